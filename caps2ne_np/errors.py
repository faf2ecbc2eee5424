"""Exceptions the package raises for problems in the user's input.

Every error a user can cause with a bad file or a bad option is an ``InputError``
(a ``ValueError``), whose message is one line: the file (and line number where it
applies), what was expected, and how to fix it.  The CLI turns it into a one-line
message on stderr and exit code 1.
"""

import numbers


class InputError(ValueError):
    """A problem with the user's input data or options (one-line message)."""


class GraphFormatError(InputError):
    """An edge list or graph file that cannot be read."""


class InputWarning(UserWarning):
    """Input that is legitimate but surprising (self loops, duplicate edges, isolated nodes)."""


def check_int(name, value, low, high=None):
    """``value`` as an int in [low, high]; ``InputError`` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise InputError(f"{name} must be {bound}, got {value}")
    return value


def available_memory():
    """Bytes of memory this process may still allocate: MemAvailable (Linux), else the
    physical memory; None when neither is known."""
    import os

    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n):
    """1.5 GB, 3.2 TB, ... (powers of 1000); beyond 1000 PB, 1.7e+22 bytes."""
    if n >= 1e18:
        return f"{n:.2g} bytes"
    for unit in ("bytes", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def check_memory(need, what, fix):
    """InputError before allocating when ``need`` bytes exceed the available memory:
    ``<what> needs about <need> of memory; this machine has <free> available; <fix>``."""
    free = available_memory()
    if free is not None and need > free:
        raise InputError(
            f"{what} needs about {format_bytes(need)} of memory; this machine has "
            f"{format_bytes(free)} available; {fix}"
        )
