"""Exceptions the package raises for problems in the user's input.

Every error a user can cause with a bad file or a bad option is an ``InputError``
(a ``ValueError``), whose message is one line: the file (and line number where it
applies), what was expected, and how to fix it.  The CLI turns it into a one-line
message on stderr and exit code 1.
"""


class InputError(ValueError):
    """A problem with the user's input data or options (one-line message)."""


class GraphFormatError(InputError):
    """An edge list or graph file that cannot be read."""


class InputWarning(UserWarning):
    """Input that is legitimate but surprising (self loops, duplicate edges, isolated nodes)."""
