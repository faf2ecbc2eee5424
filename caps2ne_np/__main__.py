"""``python -m caps2ne_np train --graph edges.txt``: the same commands as the ``caps2ne``
script, whose entry point is ``main`` here."""

import os

from .interrupts import exit_on_interrupt


def main(prog_name=None):
    """Run the command line; Ctrl-C while its commands load is one line, exit 130."""
    exit_on_interrupt()
    from .cli import cli

    cli(prog_name=prog_name or os.environ.get("CAPS2NE_PROG", "caps2ne"))


if __name__ == "__main__":
    main("python -m caps2ne_np")
