"""The command line: ``caps2ne`` (the installed script), ``python cli.py`` and
``python -m caps2ne_np``, all running the group ``cli`` below.

One module per command (train.py, infer.py, evaluate.py, data.py's fetch-data,
choose.py, links.py's split-edges, update.py), each a thin click shell over a plain
function of its options (``run_train``, ``run_infer``, ``run_evaluate``, ``run_choose``,
``run_update``) that a test can call without click; tables.py holds each command's
options, one table per command;
options.py the rows they share, the rows of train's options generated from
``defaults.OPTIONS``, and the machinery that turns a table into a command; files.py
the input loading and output checks; run.py the error handling (exit codes there) and
logging.  Importing this package compiles nothing and imports no heavy dependency:
every command imports what it needs when it runs, so ``--help`` is instant.
"""

import os

import click

from .. import __version__
from .choose import choose
from .data import fetch_data
from .evaluate import evaluate
from .infer import infer
from .links import split_edges
from .options import CONTEXT
from .train import train
from .update import update


@click.group(context_settings=CONTEXT)
@click.version_option(version=__version__, message="caps2ne_np %(version)s")
def cli():
    """Caps2NE node embeddings (Nguyen et al., CIKM 2020) on CPU with NumPy + Numba."""
    import sys

    if sys.stderr is None:  # started with 2>&-: messages go nowhere, never into stdout
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- for the life of the process


for command in (train, evaluate, split_edges, fetch_data, infer, choose, update):
    cli.add_command(command)


def main():
    """Run the command line as the ``caps2ne`` console script (whose entry point is
    ``caps2ne_np.__main__.main``, which handles Ctrl-C before this module loads)."""
    cli(prog_name=os.environ.get("CAPS2NE_PROG", "caps2ne"))
