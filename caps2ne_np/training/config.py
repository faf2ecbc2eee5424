"""A run's configuration, in one place: the options (``TrainConfig``, with defaults
from ``defaults.OPTIONS``), the model's own (``ModelConfig``), the preset rules that
fill unset options (``resolve``: the learning rate, the epoch budget, the sampled set's
size), the checks (``validate``, ``check_step_memory``), the rate schedule
(``learning_rate``) and the thread count a run uses by default (``usable_cores``).

Options left None come from a preset (defaults.PRESETS, ``resolve``): 'converge'
for featureless graphs, with a peak rate set by the mean degree (``converge_lr``)
and a budget of training pairs per node (``budget_epochs``), or 'paper'.
"""

import math
import numbers
import os
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..defaults import (
    BUDGET_MAX_STRETCH,
    BUDGET_PAIRS_PER_NODE,
    DEFAULTS,
    LR_FEATURELESS,
    LR_FIXED_FEATURES,
    LR_PER_DEGREE,
    LR_RANGE,
    OPTIONS,
    PRESET_NAMES,
    PRESETS,
)
from ..errors import InputError
from . import walks as walks_mod


@dataclass
class ModelConfig:
    """Architecture options that change the math (not the optimisation).

    routing_iters  m, Algorithm 1 (>= 1)
    routing_rule   'paper' (b_i = u_hat_i . e) or 'sabour' (b_i += u_hat_i . e)
    routing_scale  c = scale * softmax(b); None -> q - 1 (authors' code), 1.0 = paper
    grad_mode      'exact' (true gradient) or 'stop' (c treated as constant, authors' code)
    skipgram_weight     lambda of the skip-gram term (skipgram.py); 0 = the paper's loss
                        (the term's code does not run)
    skipgram_negatives  0: the term's softmax is the capsule loss's sampled softmax over
                        V'; K > 0: word2vec's negative sampling, K negatives per item
    """

    routing_iters: int = 1
    routing_rule: str = "paper"
    routing_scale: float | None = None
    grad_mode: str = "exact"
    skipgram_weight: float = 0.0
    skipgram_negatives: int = 0

    def scale_for(self, n_slots):
        return float(n_slots) if self.routing_scale is None else float(self.routing_scale)


@dataclass
class TrainConfig:
    """Every option of a training run.  Paper symbols in brackets; the defaults, ranges
    and choices are those of ``defaults.OPTIONS``.

    dim [k]              size of e_v and o_v (the embeddings)
    feat_dim [d]         size of the trainable input features x (featureless graphs)
    walk_length [q]      nodes per walk; I = q - 1 context slots
    walks_per_node [T]   walks started from every node in each epoch
    epochs               passes, each of ceil(#walks / batch_size) batches
    batch_size [B]       walks per batch
    lr                   Adam learning rate (the peak of a linear schedule)
    (these four, lr_schedule, walks, sampler and adam: None -> from ``preset``)
    preset               'auto' ('converge' without fixed features, 'paper' with them),
                         'converge' or 'paper' (defaults.PRESETS; ``resolve``)
    num_sampled [|V'|]   sampled nodes per batch in the sampled softmax; None -> min(256, N - 1)
    sampler              'log_uniform' (TensorFlow's default), 'unigram' (walk
                         counts^0.75), 'uniform'
    routing_iters [m]    iterations of Algorithm 1
    routing_rule         'paper' (b_i = u_hat_i . e) or 'sabour' (b_i += u_hat_i . e)
    routing_scale        c = scale softmax(b); None -> q - 1 (authors' code)
    grad_mode            'exact' or 'stop' (c constant, authors' code)
    targets              'all', 'random' or a tuple of 0-based walk positions
    batch_mode           'random' (with replacement, authors) or 'shuffle'
    threads              Numba and BLAS threads
    seed                 seed of every random stream
    normalize_features   divide each fixed feature row by its sum (authors' code)
    adam                 'dense' (every row every step, as the authors' TensorFlow) or
                         'lazy' (only the rows of O, biases and x a batch touches: a step
                         then costs nothing per untouched node; optim.py)
    lr_schedule          'constant' (authors) or 'linear': from lr down to lr * lr_floor at
                         the last step, as word2vec's decay
    lr_floor             the linear schedule's last rate, as a fraction of lr
    walks                'fixed': the same N*T walks every epoch (authors); 'fresh': new
                         walks every epoch (walk w of epoch e is keyed by (seed, e, w))
    walk_chunk           walks per chunk when counting node frequencies for the unigram
                         sampler (walks are otherwise generated per batch, never stored)
    skipgram_weight      lambda of the skip-gram term (skipgram.py; 0: the paper's loss)
    skipgram_negatives   0: the term's softmax over V'; K: K negatives per item
    spectral             'none', 'features' (ProNE as fixed x), 'init' (ProNE starts x),
                         'init_xo' (x and O): spectral.start
    spectral_dim         d of --spectral features (None: feat_dim)
    prone_order, prone_mu, prone_theta   ProNE's Chebyshev order and filter (spectral.py)
    row_norm        the length of the written rows when propagated (propagation.py)
    propagate            'none', 'on' or 'auto': ProNE's propagation of the written o_v
                         (propagation.py; the same order and filter)
    stop                 'none' or 'auto': end before ``epochs`` when the o_v stop
                         moving (budget.py); None with an explicit ``epochs``: 'none'
    node2vec_p, node2vec_q  node2vec's return and in-out parameters of second-order
                         walks (walk_kernels.node2vec_step); 1, 1: first-order walks (the paper)
    """

    dim: int = DEFAULTS["dim"]
    feat_dim: int = DEFAULTS["feat_dim"]
    walk_length: int = DEFAULTS["walk_length"]
    walks_per_node: int | None = DEFAULTS["walks_per_node"]
    epochs: int | None = DEFAULTS["epochs"]
    batch_size: int | None = DEFAULTS["batch_size"]
    lr: float | None = DEFAULTS["lr"]
    lr_schedule: str | None = DEFAULTS["lr_schedule"]
    lr_floor: float = DEFAULTS["lr_floor"]
    walks: str | None = DEFAULTS["walks"]
    num_sampled: int | None = DEFAULTS["num_sampled"]
    sampler: str | None = DEFAULTS["sampler"]
    routing_iters: int = DEFAULTS["routing_iters"]
    routing_rule: str = DEFAULTS["routing_rule"]
    routing_scale: float | None = DEFAULTS["routing_scale"]
    grad_mode: str = DEFAULTS["grad_mode"]
    targets: object = DEFAULTS["targets"]
    batch_mode: str = DEFAULTS["batch_mode"]
    threads: int = DEFAULTS["threads"]
    seed: int = DEFAULTS["seed"]
    normalize_features: bool = DEFAULTS["normalize_features"]
    adam: str | None = DEFAULTS["adam"]
    walk_chunk: int = DEFAULTS["walk_chunk"]
    preset: str = DEFAULTS["preset"]
    skipgram_weight: float | None = DEFAULTS["skipgram_weight"]
    skipgram_negatives: int = DEFAULTS["skipgram_negatives"]
    spectral: str | None = DEFAULTS["spectral"]
    spectral_dim: int | None = DEFAULTS["spectral_dim"]
    prone_order: int = DEFAULTS["prone_order"]
    prone_mu: float = DEFAULTS["prone_mu"]
    prone_theta: float = DEFAULTS["prone_theta"]
    row_norm: float = DEFAULTS["row_norm"]
    propagate: str | None = DEFAULTS["propagate"]
    stop: str | None = DEFAULTS["stop"]
    node2vec_p: float = DEFAULTS["node2vec_p"]
    node2vec_q: float = DEFAULTS["node2vec_q"]

    def model_config(self):
        return ModelConfig(
            self.routing_iters,
            self.routing_rule,
            self.routing_scale,
            self.grad_mode,
            float(self.skipgram_weight or 0.0),
            int(self.skipgram_negatives),
        )

    def to_dict(self):
        d = asdict(self)
        if not isinstance(d["targets"], str):
            d["targets"] = [int(t) for t in d["targets"]]
        return d


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
        notes.append(
            f"spectral start off: ProNE needs --feat-dim and --dim ({max(sizes)}) below the "
            f"{n_nodes} nodes"
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
        + (", --stop auto" if out.stop == "auto" else "")
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


def converge_lr(n_nodes, n_edges):
    """The 'converge' preset's peak rate: (lr, reason).

    lr = LR_PER_DEGREE * n_edges / n_nodes (the mean degree; n_edges counts stored
    directed entries, an undirected edge twice), clipped to LR_RANGE.  A node of degree
    D has D neighbourhood relations to learn in the same number of updates (T q per
    epoch), so a denser graph needs a larger step.  Measured on the panel
    (docs/training.md): Cora (mean degree 3.9) is best at a peak near 1e-3 and declines
    above it; PPI (19.7) needs about 4e-3 in the same budget."""
    degree = n_edges / max(n_nodes, 1)
    lr = float(np.clip(LR_PER_DEGREE * degree, *LR_RANGE))
    return lr, (
        f"{LR_PER_DEGREE:g} x mean degree {degree:.1f}, within {LR_RANGE[0]:g}..{LR_RANGE[1]:g}"
    )


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
    lo, hi = walks_mod.NODE2VEC_RANGE
    for name in ("node2vec_p", "node2vec_q"):  # node2vec's p and q
        value = getattr(cfg, name)
        try:
            walks_mod.check_node2vec(name, value)
        except InputError:
            need(False, name, f"must be a finite number in [{lo:g}, {hi:g}], got {value!r}")
    for name, option in OPTIONS.items():  # every other range: --prone-mu, --prone-theta, ...
        value = getattr(cfg, name)
        if option.kind in ("int", "float") and value is not None:
            need(_in_range(value, option), name, f"must be {range_text(option)}, got {value!r}")
    if cfg.batch_size is not None and cfg.walks_per_node is not None:
        check_step_memory(cfg, n_nodes, cfg.feat_dim, sparse=True)  # before any allocation
    try:
        walks_mod.target_positions(cfg.targets, cfg.walk_length)
    except InputError as err:
        raise InputError(
            f"--targets: {err} (walk length {cfg.walk_length}: positions 0..{cfg.walk_length - 1})"
        ) from None


LR_TINY = 1e-8  # below it, an Adam step (about lr per element) is under float32's resolution


def step_memory(cfg, n_nodes, feat_dim, sparse_features=False):
    """Bytes a run of ``cfg`` needs, estimated before anything is allocated: the
    parameters with Adam's two moments, and one step's intermediates (float32; indices
    int64).  P = B x targets per walk pairs, I = q - 1 slots, m routing iterations:
    x and u (I, P, d) with their gradients, u_hat and its gradient (I, P, k), the
    routing's c (m, P, I), s and e (m, P, k), the sampled logits (P, |V'|) twice; with
    the skip-gram term's negative sampling, K negatives per (slot, pair) item: their
    positions, scores and gradients (I P K)."""
    q, k, B, m = cfg.walk_length, cfg.dim, cfg.batch_size, cfg.routing_iters
    I = q - 1
    per_walk = q if cfg.targets == "all" else 1 if cfg.targets == "random" else len(cfg.targets)
    P = B * per_walk
    S = sampled_size(cfg, n_nodes)
    d = 0 if sparse_features else feat_dim
    K = int(cfg.skipgram_negatives) if cfg.skipgram_weight else 0
    floats = (
        4 * I * P * d
        + 2 * I * P * k
        + m * P * I
        + 2 * m * P * k
        + 2 * P * S
        + 3 * n_nodes * (k + 1 + (feat_dim if not sparse_features and d else 0))
        + 4 * I * k * feat_dim
        + 3 * I * P * K
    )
    ints = B * q + 3 * I * P + (n_nodes * cfg.walks_per_node if cfg.batch_mode == "shuffle" else 0)
    return 4 * floats + 8 * (ints + 2 * I * P * K)


def check_step_memory(cfg, n_nodes, feat_dim, sparse=False):
    """InputError with the figure when ``step_memory`` exceeds the available memory."""
    from ..errors import check_memory

    check_memory(
        step_memory(cfg, n_nodes, feat_dim, sparse),
        f"training with --batch-size {cfg.batch_size}, --walk-length {cfg.walk_length}, "
        f"--dim {cfg.dim}, --routing-iters {cfg.routing_iters}"
        + (
            f", --skipgram-negatives {cfg.skipgram_negatives}"
            if cfg.skipgram_weight and cfg.skipgram_negatives
            else ""
        )
        + f" on {n_nodes} nodes",
        "lower them (--batch-size first)",
    )


def spectral_memory(cfg, n_nodes, n_edges, resume=False):
    """Bytes the spectral stages of a run need at their peaks, estimated from the float64
    blocks model/spectral.py and model/propagation.py hold at once (docs/scaling.md,
    "The spectral stages"): ``(before, after)``, before training (the spectral start and
    the stop rule's structure measure, one after the other) and after it
    (``--propagate``, beside the trained tables).  With N nodes, S = (2 x edges + N) x 12
    bytes a float64 sparse matrix of the symmetric adjacency (values and int32 indices)
    and b = spectral.FILTER_COLUMNS, the columns the Chebyshev filter takes at a time:

    * the spectral start (``cfg.spectral``; on resume only 'features', the others come
      from the checkpoint) at rank K: the randomized SVD holds 3 (N, K + 10) blocks (the
      basis Q, B = Q^T F and gesdd's V^T), the propagation 2 (N, K) (R and the filtered
      signal, then the filtered signal and the SVD's U) and 6 (N, b) of the filter, the
      larger of the two; 5 S (A, F's values, I + A, M and a temporary of building M) and
      the float32 outputs;
    * the structure measure (``--stop auto``): the randomized SVD at rank
      budget.STOP_RANK, 3 (N, STOP_RANK + 10) blocks, and 6 S (A, its held-out copy,
      their index lists);
    * ``--propagate`` on the trained o_v (N, k): 2 (N, k) blocks (the filtered o_v and
      its copy the SVD factorises; the filter: one and 6 (N, b)) and 4 S; 'auto' first
      measures held-out edges, 5 (N, k) blocks (the o_v in float64, their directions and
      the propagation over the held-out graph) and 6 S, whichever is more."""
    from ..model.spectral import FILTER_COLUMNS as b

    N, k = int(n_nodes), int(cfg.dim)
    S = 12 * (2 * int(n_edges) + N)
    before = 0
    if cfg.spectral not in (None, "none") and not (resume and cfg.spectral != "features"):
        K = (cfg.spectral_dim or cfg.feat_dim) if cfg.spectral == "features" else cfg.feat_dim
        if cfg.spectral == "init_xo":
            K = max(K, k)
        blocks = max(3 * (K + 10), 2 * K + 6 * min(b, K) if cfg.prone_order > 1 else 0)
        before = 5 * S + 8 * N * blocks + 3 * 4 * N * K
    if cfg.stop == "auto":
        from .budget import STOP_RANK

        before = max(before, 6 * S + 8 * N * 3 * (STOP_RANK + 10))
    after = 0
    if cfg.propagate in ("on", "auto"):
        after = 4 * S + 8 * N * max(2 * k, k + 6 * min(b, k))
        if cfg.propagate == "auto":
            after = max(after, 6 * S + 8 * N * 5 * k)
    return before, after


def check_run_memory(cfg, n_nodes, n_edges, feat_dim, sparse=False, resume=False):
    """InputError with the figure when the whole run needs more than the available memory:
    the training (``step_memory``) with the spectral propagation after it, beside the
    trained tables, or the spectral stages before it (``spectral_memory``), whichever
    is more."""
    from ..errors import check_memory

    step = step_memory(cfg, n_nodes, feat_dim, sparse)
    before, after = spectral_memory(cfg, n_nodes, n_edges, resume)
    if step + after <= before:
        stages, fixes = [], []
        if cfg.spectral not in (None, "none"):
            stages.append(f"--spectral {cfg.spectral}")
            fixes.append("--spectral none")
        if cfg.stop == "auto":
            stages.append("--stop auto's structure measure")
            fixes.append("--epochs N (no --stop auto)")
        what = f"the spectral stages before training ({', '.join(stages)}) on {n_nodes} nodes"
        fix = "use " + " and ".join(fixes)
        check_memory(before, what, fix)
        return
    check_step_memory(cfg, n_nodes, feat_dim, sparse)  # the training alone: its message
    if not after:
        return
    check_memory(
        step + after,
        f"training with --batch-size {cfg.batch_size}, --walk-length {cfg.walk_length}, "
        f"--dim {cfg.dim}, --routing-iters {cfg.routing_iters} on {n_nodes} nodes, then "
        f"--propagate {cfg.propagate} beside the trained tables",
        "lower them (--batch-size first), or use --propagate none (a resumed run may change it)",
    )


def learning_rate(cfg, lr, step, total_steps):
    """Adam's rate at global step ``step`` (0-based) of ``total_steps``.

    'constant': lr.  'linear': lr (1 - (1 - lr_floor) step / (total_steps - 1)), from lr
    at the first step down to lr * lr_floor at the last, as word2vec decays its rate."""
    if cfg.lr_schedule == "constant":
        return lr
    done = min(step / max(total_steps - 1, 1), 1.0)
    return lr * (1.0 - (1.0 - cfg.lr_floor) * done)


def usable_cores():
    """The cores this process may run on (its CPU affinity; else the machine's): the
    default ``--threads`` of ``caps2ne train`` and of the bench scripts."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
