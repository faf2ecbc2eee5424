"""``python cli.py train --graph edges.txt``: the same commands as the ``caps2ne`` script."""

from caps2ne_np.interrupts import exit_on_interrupt

if __name__ == "__main__":
    exit_on_interrupt()  # before the commands load: Ctrl-C then is one line, exit 130
    from caps2ne_np.cli import cli

    cli(prog_name="cli.py")
