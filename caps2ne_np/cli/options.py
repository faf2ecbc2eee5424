"""Options shared by the commands, and the ``train`` options generated from
``defaults.OPTIONS`` (the one table of defaults, ranges, choices and help texts that
``config.TrainConfig`` and the ``Caps2NE`` estimator read too).

Each function returns a click decorator; ``options(*decorators)`` applies several in
the order written, as stacked ``@click.option`` lines would.
"""

import click

from ..defaults import OPTIONS
from ..graphs.datasets import NAMES as DATASET_NAMES  # the one registry; a light import

DATA_DIR_HELP = (
    "Folder of the benchmark data; files missing there are downloaded (SHA-256 "
    "checked) [default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np]."
)
CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}


def options(*decorators):
    """One decorator applying ``decorators`` so that the options appear in this order."""

    def apply(f):
        for decorator in reversed(decorators):
            f = decorator(f)
        return f

    return apply


def dataset(help):
    return click.option("--dataset", type=click.Choice(DATASET_NAMES), default=None, help=help)


def data_dir(help=DATA_DIR_HELP):
    return click.option("--data-dir", type=click.Path(file_okay=False), default=None, help=help)


def feature_ids():
    return click.option(
        "--feature-ids",
        type=click.Path(dir_okay=False),
        default=None,
        help="Node id of each --features row, one per line [default: graph node order].",
    )


def features(help):
    return click.option(
        "--features", "features_path", type=click.Path(dir_okay=False), default=None, help=help
    )


def edges(directed_help, loops_help):
    """--directed and --keep-self-loops: how the lines of an edge list are read."""
    return options(
        click.option("--directed", is_flag=True, help=directed_help),
        click.option("--keep-self-loops", is_flag=True, help=loops_help),
    )


def labels(help):
    return click.option(
        "--labels", "labels_path", type=click.Path(dir_okay=False), default=None, help=help
    )


def splits(help):
    return click.option(
        "--splits", "splits_path", type=click.Path(dir_okay=False), default=None, help=help
    )


def out(help):
    return click.option("--out", type=click.Path(dir_okay=False), default=None, help=help)


def overwrite(help):
    return click.option("--overwrite", is_flag=True, help=help)


def seed(help):
    return click.option("--seed", default=0, type=click.IntRange(min=0), help=help)


def debug():
    return click.option("--debug", is_flag=True, help="Show tracebacks.")


def quiet(help):
    return click.option("--quiet", "-q", is_flag=True, help=help)


# --------------------------------------------------------------------------- train's config


def parse_targets(value):
    """--targets: 'all', 'random' or a tuple of 0-based positions."""
    value = value.strip().lower()
    if value in ("all", "random"):
        return value
    try:
        return tuple(int(t) for t in value.split(","))
    except ValueError:
        raise click.BadParameter(
            "expected 'all', 'random' or comma-separated 0-based positions such as 3,4,5,6"
        ) from None


def _click_type(option):
    if option.kind in ("int", "float") and option.low is None and option.high is None:
        return click.INT if option.kind == "int" else click.FLOAT  # not "x<=None" in --help
    if option.kind == "int":
        return click.IntRange(min=option.low, max=option.high)
    if option.kind == "float":
        return click.FloatRange(
            min=option.low,
            max=option.high,
            min_open="low" in option.open,
            max_open="high" in option.open,
        )
    if option.kind == "choice":
        return click.Choice(option.choices)
    raise ValueError(f"no click type for an option of kind {option.kind!r}")


def config_option(name, **overrides):
    """The click option of the TrainConfig field ``name``: --kebab-name, with the default,
    range or choices and help of ``defaults.OPTIONS[name]`` (``overrides``: click
    attributes that differ on the command line).  A boolean option that is on by
    default becomes a --no-<name> flag."""
    option = OPTIONS[name]
    flag = "--" + name.replace("_", "-")
    if option.kind == "flag":
        if option.default is not True:
            raise ValueError(f"{name}: only options on by default are generated, as --no-...")
        return click.option("--no-" + flag[2:], is_flag=True, help=option.help, **overrides)
    attrs = dict(default=option.default, help=option.help)
    if option.kind == "positions":
        attrs["callback"] = lambda ctx, param, value: parse_targets(value)
    else:
        attrs["type"] = _click_type(option)
    attrs.update(overrides)
    return click.option(flag, **attrs)


def config_options(names, **overrides):
    """``config_option`` for each of ``names`` in order; ``overrides[name]`` holds the
    click attributes of that option that differ from the table."""
    return options(*(config_option(name, **overrides.get(name, {})) for name in names))
