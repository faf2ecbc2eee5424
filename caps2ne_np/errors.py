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
