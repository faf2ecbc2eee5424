"""Running a command: user errors as one line on stderr, signals, log lines above the
progress bar, and the list of outputs written (for the interruption message).

Exit codes: 0 success, 2 usage errors (click's own), 1 bad input data or a failed
run, with one line on stderr; ``--debug`` shows the traceback instead; 130 after
Ctrl-C and 143 after SIGTERM, as shells report a process ended by those signals, and
141 when the reader of standard output closed it (``--out - | head``), as after SIGPIPE.
"""

import logging
import sys
import warnings

import click

from ..errors import InputError, InputWarning

log = logging.getLogger("caps2ne_np.cli")


class Failure(click.ClickException):
    """One-line error, exit code 1."""

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt, so that
    the same clean-up runs (temp files removed, the lock released)."""


def _raise_terminated(signum, frame):
    raise Terminated()


_WRITTEN = []  # outputs written by the running command, for the interruption message


def remember(path):
    """Remember ``path`` as written, for the interruption message, without a log line
    (an output rewritten as the run goes: --history after every epoch)."""
    if str(path) not in _WRITTEN:
        _WRITTEN.append(str(path))


def wrote(path, what="embeddings"):
    """Say on stderr that ``path`` was written ('-': standard output) and remember it.
    ``what``: what went to standard output; for a file, None or the text after 'wrote'
    (the path and its companions)."""
    from ..io.atomic import is_stdout

    remember(path)
    if is_stdout(path):
        log.info(f"wrote {what} to standard output")
    else:
        log.info(f"wrote {what if what and str(path) in what else path}")


def run(debug, fn, *args, **kwargs):
    """Call fn; turn user-facing errors into one-line messages unless --debug.

    InputWarnings (self loops dropped, duplicates merged, ...) are printed as
    ``warning: ...`` lines the moment they are raised, before training starts.
    SIGTERM is handled as Ctrl-C: one line, temp files removed, exit code 143
    (130 for Ctrl-C).
    """
    import signal
    import threading

    from ..interrupts import handled_by_python

    handled_by_python()  # Ctrl-C raises KeyboardInterrupt from here: the clean-up runs
    try:
        _check_numba(debug)  # imports Numba: half a second
        from ..training.loop import TrainingDiverged
    except KeyboardInterrupt:
        raise _interrupted(False) from None

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, InputWarning):
            if logging.getLogger("caps2ne_np").isEnabledFor(logging.WARNING):  # not with -q
                write_line(f"warning: {message}")
        else:
            default_show(message, category, filename, lineno, file, line)

    _WRITTEN.clear()
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    with warnings.catch_warnings():
        warnings.simplefilter("always", InputWarning)
        default_show = warnings.showwarning
        warnings.showwarning = show
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:  # `train --out - | head`: the reader left
            if debug:
                raise
            _silence_stdout()
            failure = Failure(
                "standard output was closed by its reader (a pipe such as head): what "
                "was written there is cut short"
            )
            failure.exit_code = 141  # as a shell reports a process ended by SIGPIPE
            raise failure from None
        except (InputError, TrainingDiverged, OSError) as err:
            if debug:
                raise
            raise Failure(one_line(err)) from None
        except MemoryError:
            if debug:
                raise
            from ..errors import available_memory, format_bytes

            free = available_memory()
            raise Failure(
                "out of memory"
                + (f" ({format_bytes(free)} available to this process)" if free is not None else "")
                + "; use smaller inputs or options, or a machine (ulimit -v, container limit) "
                "with more memory"
            ) from None
        except KeyboardInterrupt as err:
            # an interrupt can stop an object in its constructor (np.savez's ZipFile of a
            # checkpoint): its __del__ then fails when the traceback is freed; the user
            # has the one-line error, not that
            sys.unraisablehook = _ignore_unraisable
            raise _interrupted(isinstance(err, Terminated)) from None
        except Exception as err:  # noqa: BLE001 -- last resort: never a bare traceback
            if debug:
                raise
            raise Failure(
                f"internal error ({type(err).__name__}: {one_line(err)}); "
                "rerun with --debug for the traceback and please report it"
            ) from None
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)


def _interrupted(term):
    """The Failure of a run ended by SIGTERM (``term``) or Ctrl-C: exit 143 or 130."""
    done = f"wrote only {', '.join(_WRITTEN)}" if _WRITTEN else "no output was written"
    failure = Failure(f"{'terminated (SIGTERM)' if term else 'interrupted'}; {done}")
    failure.exit_code = 143 if term else 130
    return failure


def _ignore_unraisable(unraisable):
    """``sys.unraisablehook`` after an interrupt: objects it left half-built say nothing."""


def _check_numba(debug):
    """Numba's environment variables, before Numba is imported and any work starts: a
    bad NUMBA_NUM_THREADS or an unusable threading layer is one line, exit code 1."""
    try:
        from ..kernels import thread_layer

        thread_layer.check_environment()
        thread_layer.check_layer()  # imports Numba and starts its threads
    except InputError as err:
        if debug:
            raise
        raise Failure(one_line(err)) from None


def _silence_stdout():
    """Point stdout at the null device, so that the flush at exit does not fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # not a real file (click's test runner)
        pass


def one_line(err):
    """The message of ``err`` on one line (an OSError: 'file: reason')."""
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    return " ".join(str(err).split())


def write_line(text):
    """One line on stderr through tqdm's writer: above a running progress bar, not glued
    onto it.  sys.stderr is looked up per line (click's test runner swaps it)."""
    from tqdm import tqdm

    tqdm.write(text, file=sys.stderr)


class BarSafeHandler(logging.Handler):
    """The package's log lines, written with :func:`write_line`."""

    def emit(self, record):
        try:
            write_line(self.format(record))
        except Exception:  # noqa: BLE001 -- logging must never raise
            self.handleError(record)


def reset_logging():
    """Undo :func:`setup_logging` (commands without -q/-v: the default logging rules);
    click's test runner runs several commands in one process."""
    logger = logging.getLogger("caps2ne_np")
    for handler in list(logger.handlers):
        if isinstance(handler, BarSafeHandler):
            logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


def setup_logging(quiet, verbose=False):
    """Log lines of the ``caps2ne_np`` loggers on stderr: info (default), errors only
    (-q), or debug details too (-v)."""
    logger = logging.getLogger("caps2ne_np")
    for handler in list(logger.handlers):
        if isinstance(handler, BarSafeHandler):
            logger.removeHandler(handler)
    handler = BarSafeHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False
