"""The preset rules that fill a run's unset options (``resolve``): which preset
(``preset_for``), the learning rate (rates.converge_lr), the epoch budget
(``budget_epochs``) and the sampled set's size |V'| (``sampled_size``).

Options left None come from a preset (defaults.PRESETS): 'converge' for featureless
graphs, with a peak rate set by the mean degree and a budget of training pairs per node,
or 'paper'.  Explicit options always win.
"""

import math
from dataclasses import replace

import numpy as np

from ...defaults import (
    BUDGET_MAX_STRETCH,
    BUDGET_PAIRS_PER_NODE,
    LR_FEATURELESS,
    LR_FIXED_FEATURES,
    LR_PER_DEGREE,
    LR_RANGE,
    PRESET_NAMES,
    PRESETS,
)
from ...errors import InputError
from ...walks import walks as walks_mod
from .rates import converge_lr
from .validation import check_types, validate


def preset_for(cfg, fixed_features):
    """The preset that fills cfg's unset options: 'auto' means 'converge' without fixed
    features and 'paper' with them."""
    if cfg.preset not in PRESET_NAMES:
        raise InputError(f"--preset: must be one of {PRESET_NAMES}, got {cfg.preset!r}")
    if cfg.preset != "auto":
        return cfg.preset
    return "paper" if fixed_features else "converge"


def resolve(cfg, n_nodes, n_edges, fixed_features=False):
    """A copy of ``cfg`` with every unset option (None) filled from its preset, the
    learning rate and the epoch budget included, and a list of one-line notes saying
    where each filled value came from (logged at the start of ``fit``, kept in
    ``loop.TrainResult.notes``).

    Explicit options always win: ``epochs=N`` trains exactly N epochs."""
    cfg = check_types(cfg)
    name = preset_for(cfg, fixed_features)
    values, notes = {}, []
    if cfg.skipgram_weight is None and (fixed_features or cfg.feat_dim != cfg.dim):
        values["skipgram_weight"] = 0.0  # the term needs a trained x of size k: off
    if cfg.spectral is None and fixed_features:
        values["spectral"] = "none"  # the user's features are x: nothing for ProNE to start
    if cfg.stop is None and cfg.epochs is not None:
        values["stop"] = "none"  # --epochs N trains exactly N
    for key, value in PRESETS[name].items():
        if key in values:
            continue
        if getattr(cfg, key) is None and value is not None:
            values[key] = value
    out = replace(cfg, **values)
    sizes = {"init": (out.feat_dim,), "init_xo": (out.feat_dim, out.dim)}.get(out.spectral, ())
    if cfg.spectral is None and sizes and max(sizes) >= n_nodes:
        # the preset's spectral start needs d < N (ProNE's SVD; init_xo also at d = k): a
        # graph this small starts from random x, as the paper does; an explicit --spectral
        # still says why not
        out = replace(out, spectral="none")
        fit = 1 << (n_nodes - 1).bit_length() - 1  # the largest power of 2 below n_nodes
        named = [("dim", out.dim), ("feat-dim", out.feat_dim)][-len(sizes) :]  # init: x only
        notes.append(
            "spectral start off: ProNE needs "
            + " and ".join(f"--{f} ({v})" for f, v in named)
            + f" below the {n_nodes} nodes; "
            + " ".join(f"--{f} {fit}" for f, v in named if v >= n_nodes)
            + " keeps it"
        )
    if out.lr is None and name == "converge":
        lr, why = converge_lr(n_nodes, n_edges)
        out = replace(out, lr=lr)
        notes.append(f"peak lr {lr:.3g} ({why}; --lr overrides)")
    elif out.lr is None:
        out = replace(out, lr=LR_FIXED_FEATURES if fixed_features else LR_FEATURELESS)
    out = replace(out, num_sampled=sampled_size(out, n_nodes))
    if out.epochs is None:
        validate(replace(out, epochs=1), n_nodes)
        epochs, why = budget_epochs(n_nodes, n_edges, out)
        out = replace(out, epochs=epochs)
        notes.append(f"budget: {epochs} epochs ({why}; --epochs N overrides)")
    notes.insert(
        0,
        f"preset {name}"
        + (
            f" (auto: {'fixed' if fixed_features else 'no'} input features)"
            if cfg.preset == "auto"
            else ""
        )
        + f": lr {out.lr:.3g} {out.lr_schedule}, batch {out.batch_size} walks, T = "
        f"{out.walks_per_node} {out.walks} walks per node and epoch, "
        f"{out.adam} Adam, {out.sampler} sampler"
        + (f", --spectral {out.spectral}" if out.spectral != "none" else "")
        + (f", --propagate {out.propagate}" if out.propagate not in (None, "none") else "")
        + (f", --stop {out.stop}" if out.stop not in (None, "none") else "")
        + (
            f", skip-gram term x {out.skipgram_weight:g} ("
            + (
                f"{out.skipgram_negatives} negatives"
                if out.skipgram_negatives
                else "sampled softmax"
            )
            + ")"
            if out.skipgram_weight
            else ""
        ),
    )
    return out, notes


def sampled_size(cfg, n_nodes):
    """|V'|: ``cfg.num_sampled``, or min(256, N - 1) when it is unset."""
    return cfg.num_sampled if cfg.num_sampled is not None else min(256, max(n_nodes - 1, 1))


def budget_epochs(n_nodes, n_edges, cfg):
    """Epochs of the 'converge' preset: (epochs, reason).

    An epoch of T walks per node gives T * (#targets per walk) pairs per node.  The
    budget is BUDGET_PAIRS_PER_NODE pairs per node, at least one epoch, stretched on
    dense graphs: where LR_PER_DEGREE * mean degree exceeds the rate cap LR_RANGE[1],
    the budget grows by that ratio (at most BUDGET_MAX_STRETCH), so that rate x steps
    keeps growing with the degree (POS, mean degree 38.6: 2.4x; BlogCatalog: 3x)."""
    per_walk = (
        len(walks_mod.target_positions(cfg.targets, cfg.walk_length))
        if cfg.targets != "random"
        else 1
    )
    per_epoch = cfg.walks_per_node * per_walk
    degree = n_edges / max(n_nodes, 1)
    stretch = float(np.clip(LR_PER_DEGREE * degree / LR_RANGE[1], 1.0, BUDGET_MAX_STRETCH))
    pairs = BUDGET_PAIRS_PER_NODE * stretch
    epochs = max(1, math.ceil(pairs / per_epoch - 1e-9))
    why = f"{pairs:.0f} training pairs per node"
    if stretch > 1:
        why += (
            f" ({BUDGET_PAIRS_PER_NODE} x {stretch:.2f}: mean degree {degree:.1f} asks for a "
            f"rate above the cap {LR_RANGE[1]:g})"
        )
    return epochs, why + f", {per_epoch} per epoch"
