"""The checks of a run's options, before anything reads them: every option's type
(``check_types``) and range (``validate``, ``range_text``), from the table
``defaults.OPTIONS``, then the rules that involve the graph.

The step's memory check that ``validate`` runs is the config's own
(``TrainConfig.check_step_memory``, which calls memory.check_step_memory), so this module
does not import config.py.
"""

import math
import numbers
from dataclasses import replace

import numpy as np

from ...defaults import OPTIONS
from ...errors import InputError
from ...walks import walks as walks_mod
from ...walks.walk_args import NODE2VEC_RANGE, check_node2vec


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_types(cfg):
    """``cfg`` with every option as a plain Python value (numpy integers and floats
    become ``int`` / ``float``), or InputError (one line, naming the option) for a value
    of the wrong type: ``dim='4'``, ``dim=4.0``, ``epochs=True``, ``lr='0.001'``,
    ``normalize_features='no'``.  Options whose default is None (set by the preset) may
    be None.  Runs before anything reads the options (``resolve``)."""
    values = {}
    for name, option in OPTIONS.items():
        value = getattr(cfg, name)
        if value is None and option.default is None:
            continue
        flag = "--" + name.replace("_", "-")
        if option.kind == "int":
            if not _is_int(value):
                raise InputError(f"{flag}: must be an integer, got {value!r}")
            values[name] = int(value)
        elif option.kind == "float":
            if not _is_real(value):
                raise InputError(f"{flag}: must be a number, got {value!r}")
            values[name] = float(value)
        elif option.kind == "flag":
            if not isinstance(value, (bool, np.bool_)):
                raise InputError(f"{flag}: must be True or False, got {value!r}")
            values[name] = bool(value)
        elif option.kind == "choice":
            if not isinstance(value, str):
                raise InputError(f"{flag}: must be one of {option.choices}, got {value!r}")
        elif option.kind == "positions":
            ok = isinstance(value, str) or (
                isinstance(value, (tuple, list)) and all(_is_int(t) for t in value)
            )
            if not ok:
                raise InputError(
                    f"{flag}: must be 'all', 'random' or a tuple of 0-based positions, "
                    f"got {value!r}"
                )
            if not isinstance(value, str):
                values[name] = tuple(int(t) for t in value)
    return replace(cfg, **values)


def _in_range(value, option):
    """Whether a number is within ``option``'s range (finite for a float)."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    low_ok = option.low is None or (
        value > option.low if "low" in option.open else value >= option.low
    )
    high_ok = option.high is None or (
        value < option.high if "high" in option.open else value <= option.high
    )
    return low_ok and high_ok


def range_text(option):
    """``option``'s range as the messages and --help say it: '>= 1', 'in (0, 100]'."""
    lo = "(" if "low" in option.open else "["
    hi = ")" if "high" in option.open else "]"
    if option.low is not None and option.high is not None:
        return f"in {lo}{option.low:g}, {option.high:g}{hi}"
    if option.low is not None:
        return f"{'>' if 'low' in option.open else '>='} {option.low:g}"
    if option.high is not None:
        return f"{'<' if 'high' in option.open else '<='} {option.high:g}"
    return "finite"


def validate(cfg, n_nodes):
    """Raise InputError (one line, naming the option) for an out-of-range option: the
    ranges and choices of ``defaults.OPTIONS``, then the rules that involve the graph."""

    def need(ok, option, what):
        if not ok:
            raise InputError(f"--{option.replace('_', '-')}: {what}")

    for name, option in OPTIONS.items():  # integer ranges: --dim 0, --walk-length 1
        value = getattr(cfg, name)
        if option.kind == "int" and option.low and value is not None:
            need(int(value) >= option.low, name, f"must be >= {option.low}, got {value}")
    need(n_nodes >= 2, "graph", f"needs at least 2 nodes, got {n_nodes}")
    if cfg.num_sampled is not None:
        need(
            cfg.num_sampled < n_nodes,
            "num_sampled",
            f"must be smaller than the number of nodes ({n_nodes}), got {cfg.num_sampled}",
        )
    need(
        cfg.lr is None or (math.isfinite(cfg.lr) and cfg.lr > 0),
        "lr",
        f"must be a positive number, got {cfg.lr}",
    )
    with np.errstate(over="ignore"):
        lr32 = None if cfg.lr is None else float(np.float32(cfg.lr))
    need(
        cfg.lr is None or lr32 > 0,
        "lr",
        f"{cfg.lr:g} is 0 in float32 (below 1.4e-45): training would change nothing; "
        f"use a rate of 1e-6 or more",
    )
    for name, option in OPTIONS.items():  # --sampler, --routing-rule, --adam, ...
        if option.kind == "choice" and name != "preset":  # preset: checked by preset_for
            need(getattr(cfg, name) in option.choices, name, f"must be one of {option.choices}")
    need(
        math.isfinite(cfg.lr_floor) and 0 < cfg.lr_floor <= 1,
        "lr_floor",
        f"must be in (0, 1], got {cfg.lr_floor}",
    )
    need(
        cfg.skipgram_weight is None
        or (math.isfinite(cfg.skipgram_weight) and cfg.skipgram_weight >= 0),
        "skipgram_weight",
        f"must be a finite number >= 0, got {cfg.skipgram_weight}",
    )
    need(
        int(cfg.skipgram_negatives) >= 0,
        "skipgram_negatives",
        f"must be >= 0, got {cfg.skipgram_negatives}",
    )
    need(
        cfg.routing_scale is None or (math.isfinite(cfg.routing_scale) and cfg.routing_scale > 0),
        "routing_scale",
        f"must be a finite number > 0, got {cfg.routing_scale}",
    )
    lo, hi = NODE2VEC_RANGE
    for name in ("node2vec_p", "node2vec_q"):  # node2vec's p and q
        value = getattr(cfg, name)
        try:
            check_node2vec(name, value)
        except InputError:
            need(False, name, f"must be a finite number in [{lo:g}, {hi:g}], got {value!r}")
    for name, option in OPTIONS.items():  # every other range: --prone-mu, --prone-theta, ...
        value = getattr(cfg, name)
        if option.kind in ("int", "float") and value is not None:
            need(_in_range(value, option), name, f"must be {range_text(option)}, got {value!r}")
    if cfg.batch_size is not None and cfg.walks_per_node is not None:
        cfg.check_step_memory(n_nodes)  # before any allocation (memory.check_step_memory)
    try:
        walks_mod.target_positions(cfg.targets, cfg.walk_length)
    except InputError as err:
        raise InputError(
            f"--targets: {err} (walk length {cfg.walk_length}: positions 0..{cfg.walk_length - 1})"
        ) from None
