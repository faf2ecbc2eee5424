"""Training progress on stderr: a bar fitted to the terminal, or plain lines in a log.

``bar(total)`` returns an object with ``update(n)``, ``set_postfix(**fields)``,
``set_total(total)`` (a run the stop rule ends early: the batches it trained, so the
display ends full) and ``close()``:

- stderr is a terminal: a tqdm bar as wide as the terminal (read again at each postfix
  update, so a resized window is followed).  The postfix keeps whole fields, most
  important first (epoch, loss, pairs/s, lr); a field that does not fit beside a bar of
  at least ``MIN_BAR`` characters is left out, never cut.  The bar is cleared when
  training ends: the epoch lines and the run's last line stay.
- stderr is not a terminal (a log file, CI, a pipe), or a terminal that reports 0
  columns (``script`` without a size), where tqdm draws nothing: no bar, no carriage returns.  One
  plain line ``progress: 339/678 batches (50%), epoch 1/2, loss 5.7662, ...`` at most
  every ``LOG_INTERVAL`` seconds; the epoch lines carry the rest.

Losses are printed with ``LOSS_DIGITS`` decimals everywhere (:func:`loss_text`): the
bar, the epoch lines and the run's last line show one value the same way.
"""

import os
import shutil
import sys
import time

LOSS_DIGITS = 4
MIN_BAR = 10
LOG_INTERVAL = 30.0
ORDER = ("epoch", "loss", "pairs_s", "lr")
LABELS = {"pairs_s": "pairs/s"}


def loss_text(loss):
    """A loss as every progress line prints it (``LOSS_DIGITS`` decimals)."""
    return f"{loss:.{LOSS_DIGITS}f}"


def is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def terminal_width(stream):
    """Columns of the terminal ``stream`` writes to (COLUMNS, then 80, when unknown)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return shutil.get_terminal_size((80, 24)).columns


def _columns(stream):
    """The bar's width: one column short of the terminal's, so that a terminal that
    wraps at its last column does not start a new line on each redraw."""
    return max(terminal_width(stream) - 1, 20)


def _field(name, value):
    return f"{LABELS.get(name, name)} {value}"


def _ordered(fields):
    return [n for n in ORDER if n in fields] + [n for n in fields if n not in ORDER]


def fit_postfix(fields, room):
    """The fields, in ``ORDER``, joined by ', ', keeping only whole fields within
    ``room`` characters: a field that does not fit is dropped, later ones may fit."""
    out = ""
    for name in _ordered(fields):
        text = _field(name, fields[name])
        joined = f"{out}, {text}" if out else text
        if len(joined) <= room:
            out = joined
    return out


ETA_WINDOW = 20
"""Updates whose rates the bar's time remaining reads (``Eta``)."""


class Eta:
    """The time remaining: the batches left at the median rate of the last ``ETA_WINDOW``
    updates, '?' before 3 of them.  tqdm's own estimate (a moving average) showed 17
    hours for 6 of 13,540 batches when a kernel still compiling after the first step
    stalled one update for 18 s; a median ignores such a stall (a checkpoint write
    too)."""

    def __init__(self, total, initial, clock=time.monotonic):
        self.total, self.n, self.clock = total, initial, clock
        self.last = clock()
        self.rates = []

    def update(self, n):
        now = self.clock()
        dt, self.last = now - self.last, now
        self.n += n
        if n > 0:
            self.rates = (self.rates + [n / max(dt, 1e-9)])[-ETA_WINDOW:]

    def text(self):
        from tqdm import tqdm

        if len(self.rates) < 3:
            return "?"
        rate = sorted(self.rates)[len(self.rates) // 2]
        return tqdm.format_interval(max(self.total - self.n, 0) / rate)


class TerminalBar:
    """A tqdm bar fitted to the terminal's width, postfix fields whole; the time
    remaining is ``Eta``'s."""

    def __init__(self, total, initial, stream):
        from tqdm.auto import tqdm

        self.stream, self.total = stream, total
        self.width = _columns(stream)
        self.eta = eta = Eta(total, initial)

        class _Bar(tqdm):
            @property
            def format_dict(self):
                return dict(super().format_dict, remaining=eta.text())

        self._bar = _Bar(
            total=total,
            initial=initial,
            unit="batch",
            ncols=self.width,
            leave=False,
            file=stream,
            mininterval=0.1,
            maxinterval=10.0,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]",
        )

    def update(self, n=1):
        self.eta.update(n)
        self._bar.update(n)

    def set_postfix(self, refresh=False, **fields):
        self.width = self._bar.ncols = _columns(self.stream)
        digits = len(str(self.total))
        # "100%|" + bar + "| " + n/total + " [0:00:00<0:00:00" + ", " + postfix + "]"
        fixed = 5 + 2 + 2 * digits + 1 + 17 + 2 + 1
        postfix = fit_postfix(fields, self.width - fixed - MIN_BAR)
        self._bar.set_postfix_str(postfix, refresh=refresh)

    def set_total(self, total):
        """A new total (the run ends at another batch than planned), shown at once."""
        self.total = self.eta.total = self._bar.total = total
        self._bar.refresh()

    def close(self):
        self._bar.close()


class LogLines:
    """Plain progress lines for a log: no bar, no carriage return."""

    def __init__(self, total, initial, interval=None):
        self.total, self.n = total, initial
        self.interval = LOG_INTERVAL if interval is None else interval
        self.fields = {}
        self.last = time.monotonic()

    def update(self, n=1):
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.write()

    def set_postfix(self, refresh=False, **fields):
        self.fields = dict(fields)

    def set_total(self, total):
        self.total = total

    def line(self):
        pct = 100 * self.n // max(self.total, 1)
        parts = [f"progress: {self.n}/{self.total} batches ({pct}%)"]
        parts += [_field(name, self.fields[name]) for name in _ordered(self.fields)]
        return ", ".join(parts)

    def write(self):
        stream = sys.stderr  # looked up per line: click's test runner swaps it
        stream.write(self.line() + "\n")
        stream.flush()

    def close(self):
        pass


def bar(total, initial=0, enabled=True):
    """The progress display of a run of ``total`` batches, ``initial`` done already
    (a resumed run), on stderr; None when ``enabled`` is false."""
    if not enabled:
        return None
    stream = sys.stderr
    if is_terminal(stream) and terminal_width(stream) > 0:
        return TerminalBar(total, initial, stream)
    return LogLines(total, initial)  # also a terminal of 0 columns, where tqdm draws nothing
