"""The ``fetch-data`` command: download the benchmark sets (datasets.fetch)."""

import click

from . import options as opt
from .run import run, setup_logging

DOWNLOADABLE = tuple(name for name in opt.DATASET_NAMES if name != "cora-bundled")
"""The sets fetch-data downloads (cora-bundled ships with the package)."""


@click.command("fetch-data", context_settings=opt.CONTEXT)
@click.argument("names", nargs=-1, type=click.Choice(DOWNLOADABLE))
@opt.data_dir("Folder to put them in [default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np].")
@click.option("--featureless", is_flag=True, help="Skip the Planetoid feature files (allx, tx).")
@opt.debug()
def fetch_data(names, data_dir, featureless, debug):
    """Download benchmark sets (all of them without NAMES) into the data folder.

    Files come from each set's upstream repository at a fixed commit (the paper's
    sets from the authors'), or from $CAPS2NE_DATA_MIRROR, each checked against the
    size and SHA-256 held in the code; files already there are kept when they match
    and fetched again when they differ (modified or truncated).  'train --dataset
    NAME' does the same.
    """

    def fetch():
        from ..graphs import datasets

        setup_logging(False)
        for name in names or DOWNLOADABLE:
            where = datasets.fetch(name, data_dir, features=not featureless)
            click.echo(f"{name}: {where}")

    run(debug, fetch)
