"""Ctrl-C before a command has loaded: the entry points (``cli.py``, ``python -m
caps2ne_np``, the ``caps2ne`` script) call ``exit_on_interrupt`` before they import the
commands (click, NumPy, then Numba: half a second), so that an interrupt there ends the
process with the line and exit code of an interrupted run (130), not a traceback or
click's "Aborted!".  ``cli.run.run`` hands SIGINT back to Python's KeyboardInterrupt
once a command starts its work, whose clean-up then runs.  Imports nothing heavy."""

import os
import signal
import sys

MESSAGE = "error: interrupted; no output was written"


def _exit(signum, frame):
    try:
        sys.stderr.write(MESSAGE + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed (2>&-)
        pass
    os._exit(130)  # nothing to clean up yet: no file is open for writing


def exit_on_interrupt():
    """SIGINT ends the process at once with MESSAGE and exit code 130, until
    ``handled_by_python`` is called; a SIGINT ignored by the parent (a background job of
    a shell without job control) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit)


def handled_by_python():
    """SIGINT raises KeyboardInterrupt again (Python's own handler), where
    ``exit_on_interrupt`` had installed the immediate exit."""
    if signal.getsignal(signal.SIGINT) is _exit:
        signal.signal(signal.SIGINT, signal.default_int_handler)
