"""The rows of the commands' option tables, and the machinery that turns a table into
click options (``command``) and into the parameters a command's plain function takes
(``params``).  The tables themselves are in tables.py; ``train``'s training options
are generated here from ``defaults.OPTIONS`` (the one table of defaults, ranges,
choices and help texts that ``config.TrainConfig`` and the ``Caps2NE`` estimator
read too).

A row is an :class:`Opt`: the arguments of one ``click.option``.  The helpers below
return the rows the commands share (``edges`` returns two).
"""

from dataclasses import dataclass, field

import click

from ..defaults import OPTIONS
from ..graphs.datasets import NAMES as DATASET_NAMES  # the one registry; a light import

DATA_DIR_HELP = (
    "Folder of the benchmark data; files missing there are downloaded (SHA-256 "
    "checked) [default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np]."
)
CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}


@dataclass(frozen=True)
class Opt:
    """One row of an option table: the arguments of one ``click.option``."""

    decls: tuple
    attrs: dict = field(default_factory=dict)

    @property
    def name(self):
        """The parameter name the command receives, as click derives it: the
        undashed declaration, else the first long flag's name."""
        for decl in self.decls:
            if decl.isidentifier():
                return decl
        longest = max(len(d) - len(d.lstrip("-")) for d in self.decls)
        flag = next(d for d in self.decls if len(d) - len(d.lstrip("-")) == longest)
        return flag.lstrip("-").replace("-", "_").lower()

    @property
    def default(self):
        """The value the command receives when the option is not given."""
        value = self.attrs.get("default", False if self.attrs.get("is_flag") else None)
        if self.attrs.get("multiple"):
            return tuple(value or ())
        if isinstance(value, str) and "callback" in self.attrs:  # --targets, --positions
            return self.attrs["callback"](None, None, value)
        return value

    def __call__(self, f):
        """The row as a decorator: ``@opt.debug()`` adds --debug to a command."""
        return click.option(*self.decls, **self.attrs)(f)


def option(*decls, **attrs):
    """A table row: ``click.option``'s arguments, as that call would take them."""
    return Opt(decls, attrs)


@dataclass(frozen=True)
class Section:
    """A titled run of a table's rows: ``--help`` lists them under ``title``."""

    title: str
    rows: tuple


def section(title, *rows):
    """A Section of ``rows`` (rows and tuples of rows)."""
    return Section(title, rows)


def rows(table):
    """The Opt rows of ``table``, a sequence of rows, tuples of rows and Sections, in order."""
    out = []
    for row in table:
        if isinstance(row, Section):
            out.extend(rows(row.rows))
        else:
            out.extend(row if isinstance(row, tuple) else (row,))
    return out


def titles(table):
    """{option name: the title of its Section} of ``table``'s rows in Sections."""
    return {row.name: s.title for s in table if isinstance(s, Section) for row in rows(s.rows)}


class SectionedCommand(click.Command):
    """A click command whose ``--help`` lists its options under the titles of their
    Sections (``sections``: name -> title; click has no option groups of its own),
    the others (--help itself) under the last title, each section in table order."""

    sections: dict = {}

    def format_options(self, ctx, formatter):
        groups = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                last = list(self.sections.values())[-1] if self.sections else "Options"
                groups.setdefault(self.sections.get(param.name, last), []).append(record)
        for title, records in groups.items():
            with formatter.section(title):
                formatter.write_dl(records)


def command(table, name=None):
    """A click command of the function it decorates, with the options of ``table``
    in the order listed (as stacked ``@click.option`` lines would be), listed by
    ``--help`` under the titles of their Sections."""

    def make(f):
        for row in reversed(rows(table)):
            f = row(f)
        made = click.command(name, cls=SectionedCommand, context_settings=CONTEXT)(f)
        made.sections = titles(table)
        return made

    return make


def params(table, **given):
    """{name: value} of every option of ``table``, as its command receives them when
    only ``given`` are given (the other options at their defaults): the argument of a
    command's plain function (``run_train``, ``run_infer``, ``run_evaluate``)."""
    values = {row.name: row.default for row in rows(table)}
    unknown = set(given) - set(values)
    if unknown:
        raise TypeError(f"no such option: {', '.join(sorted(unknown))}")
    values.update(given)
    return values


def graph(help):
    return option("--graph", type=click.Path(dir_okay=False), default=None, help=help)


def dataset(help):
    return option("--dataset", type=click.Choice(DATASET_NAMES), default=None, help=help)


def data_dir(help=DATA_DIR_HELP):
    return option("--data-dir", type=click.Path(file_okay=False), default=None, help=help)


def feature_ids():
    return option(
        "--feature-ids",
        type=click.Path(dir_okay=False),
        default=None,
        help="Node id of each --features row, one per line [default: graph node order].",
    )


def features(help):
    return option(
        "--features", "features_path", type=click.Path(dir_okay=False), default=None, help=help
    )


def edges(directed_help, loops_help):
    """--directed and --keep-self-loops: how the lines of an edge list are read."""
    return (
        option("--directed", is_flag=True, help=directed_help),
        option("--keep-self-loops", is_flag=True, help=loops_help),
    )


def labels(help):
    return option(
        "--labels", "labels_path", type=click.Path(dir_okay=False), default=None, help=help
    )


def splits(help):
    return option(
        "--splits", "splits_path", type=click.Path(dir_okay=False), default=None, help=help
    )


def out(help):
    return option("--out", type=click.Path(dir_okay=False), default=None, help=help)


def overwrite(help):
    return option("--overwrite", is_flag=True, help=help)


def seed(help):
    return option("--seed", default=0, type=click.IntRange(min=0), help=help)


def debug():
    return option("--debug", is_flag=True, help="Show tracebacks.")


def quiet(help):
    return option("--quiet", "-q", is_flag=True, help=help)


def model_file(help):
    """--model: a trained model .npz that must exist."""
    return option(
        "--model",
        "model_path",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help=help,
    )


def npy(help):
    """--npy: the rows also (or only) as an (N, k) float32 .npy."""
    return option("--npy", "npy_out", type=click.Path(dir_okay=False), default=None, help=help)


def fractions(train_help, val_help, val_default):
    """--train-fraction and --val-fraction: random splits of the labelled nodes, their
    training and validation parts (fractions in (0, 1); a zero --val-fraction default
    admits 0)."""
    return (
        option(
            "--train-fraction",
            default=None,
            type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
            help=train_help,
        ),
        option(
            "--val-fraction",
            default=val_default,
            type=click.FloatRange(min=0, max=1, min_open=val_default != 0.0, max_open=True),
            help=val_help,
        ),
    )


def regularisation(help):
    """--C: the logistic regression's inverse L2 regularisation, a number or 'tuned'."""
    return option("--C", "C", default=1.0, type=CParam(), show_default=True, help=help)


def folds(flag, help):
    """A count of cross-validation folds (at least 2, default 3) under ``flag``."""
    return option(flag, default=3, type=click.IntRange(min=2), show_default=True, help=help)


# --------------------------------------------------------------------------- train's config


def _word_or_positions(value, words):
    """One of the two ``words``, or a tuple of the 0-based positions in ``value``."""
    value = value.strip().lower()
    if value in words:
        return value
    try:
        return tuple(int(t) for t in value.split(","))
    except ValueError:
        raise click.BadParameter(
            f"expected '{words[0]}', '{words[1]}' or comma-separated 0-based positions "
            "such as 3,4,5,6"
        ) from None


def parse_targets(value):
    """--targets: 'all', 'random' or a tuple of 0-based positions."""
    return _word_or_positions(value, ("all", "random"))


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
    """The row of the TrainConfig field ``name``: --kebab-name, with the default,
    range or choices and help of ``defaults.OPTIONS[name]`` (``overrides``: click
    attributes that differ on the command line).  A boolean option that is on by
    default becomes a --no-<name> flag."""
    spec = OPTIONS[name]
    flag = "--" + name.replace("_", "-")
    if spec.kind == "flag":
        if spec.default is not True:
            raise ValueError(f"{name}: only options on by default are generated, as --no-...")
        return option("--no-" + flag[2:], is_flag=True, help=spec.help, **overrides)
    attrs = dict(default=spec.default, help=spec.help)
    if spec.kind == "positions":
        attrs["callback"] = lambda ctx, param, value: parse_targets(value)
    else:
        attrs["type"] = _click_type(spec)
    attrs.update(overrides)
    return option(flag, **attrs)


def config_options(names, **overrides):
    """``config_option`` for each of ``names`` in order; ``overrides[name]`` holds the
    click attributes of that option that differ from the table."""
    return tuple(config_option(name, **overrides.get(name, {})) for name in names)


# --------------------------------------------------------------------------- infer's, evaluate's


def parse_positions(value):
    """infer's --positions: 'all', 'train' or a tuple of 0-based positions."""
    return _word_or_positions(value, ("all", "train"))


class CParam(click.ParamType):
    """evaluate's --C: a positive number, or 'tuned'."""

    name = "C"

    def convert(self, value, param, ctx):
        if isinstance(value, float) or str(value).strip().lower() == "tuned":
            return value if isinstance(value, float) else "tuned"
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not (number > 0 and number < float("inf")):
            self.fail(f"{value!r} is not a positive number or 'tuned'", param, ctx)
        return number
