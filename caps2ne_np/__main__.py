"""``python -m caps2ne_np train --graph edges.txt``: the same commands as the ``caps2ne`` script."""

from .cli import cli

if __name__ == "__main__":
    cli(prog_name="python -m caps2ne_np")
