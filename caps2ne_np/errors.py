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


CGROUP_ROOT = "/sys/fs/cgroup"
"""Where the cgroup files are read from (tests point it at a folder of fake ones)."""


def _read_int(path):
    """The integer in a one-line file, None when absent, unreadable or 'max'."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_available():
    """MemAvailable of /proc/meminfo (Linux), else the physical memory; None if unknown."""
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


def _cgroup_available():
    """The cgroup's memory limit less its usage (v2 ``memory.max`` / ``memory.current``,
    v1 ``memory/memory.limit_in_bytes`` / ``memory.usage_in_bytes``); None without a limit."""
    import os

    for limit, usage in (
        ("memory.max", "memory.current"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
    ):
        cap = _read_int(os.path.join(CGROUP_ROOT, limit))
        if cap is not None and cap < 1 << 60:  # v1 writes 'no limit' as a huge number
            used = _read_int(os.path.join(CGROUP_ROOT, usage)) or 0
            return max(0, cap - used)
    return None


def _rlimit_available():
    """RLIMIT_AS (``ulimit -v``) less this process's address space (VmSize); None if unset."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    size = 0
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    size = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - size)


def available_memory():
    """Bytes of memory this process may still allocate: the least of MemAvailable (Linux;
    else the physical memory), the cgroup's limit less its usage (a container), and
    ``ulimit -v`` less the address space in use; None when none is known."""
    known = [
        n for n in (_meminfo_available(), _cgroup_available(), _rlimit_available()) if n is not None
    ]
    return min(known) if known else None


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
