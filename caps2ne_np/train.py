"""The training loop (Algorithm 2): epochs of batches of walks, and the defaults'
rules (presets, the learning rate and the epoch budget).

An epoch follows the authors' code: T walks start from every node; a batch is B
walks drawn uniformly *with replacement*, each giving its (context, target) pairs;
an epoch is ceil(#walks / B) batches.  ``batch_mode = 'shuffle'`` instead visits
every walk exactly once per epoch in a seeded order.  With ``walks = 'fixed'`` (the
authors') every epoch replays the same N*T walks; with ``'fresh'`` each epoch draws
new ones.  Walks are made batch by batch and never stored (walks.WalkSource).

Options left None come from a preset (defaults.PRESETS, ``resolve``): 'converge'
for featureless graphs, with a peak rate set by the mean degree (``converge_lr``)
and a budget of training pairs per node (``budget_epochs``), or 'paper'.

Every random choice comes from a stream keyed by (seed, purpose, epoch, step), so
a run is reproducible from its seed whatever the thread count (docs/training.md).
"""

import logging
import math
import time
from dataclasses import asdict, dataclass, field, replace

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from . import walks as walks_mod
from .batch import Batch
from .core import ModelConfig, init_params, prepare_features
from .defaults import (
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
from .errors import InputError
from .optim import Adam
from .rng import derive_seed
from .samplers import make_sampler
from .step import TrainStep

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss or a parameter became NaN or infinite."""


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
    node2vec_p, node2vec_q  node2vec's return and in-out parameters of second-order
                         walks (walks.node2vec_step); 1, 1: first-order walks (the paper)
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
    node2vec_p: float = DEFAULTS["node2vec_p"]
    node2vec_q: float = DEFAULTS["node2vec_q"]

    def model_config(self):
        return ModelConfig(
            self.routing_iters, self.routing_rule, self.routing_scale, self.grad_mode
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
    ``TrainResult.notes``).

    Explicit options always win: ``epochs=N`` trains exactly N epochs."""
    name = preset_for(cfg, fixed_features)
    values, notes = {}, []
    for key, value in PRESETS[name].items():
        if getattr(cfg, key) is None and value is not None:
            values[key] = value
    out = replace(cfg, **values)
    if out.lr is None and name == "converge":
        lr, why = converge_lr(n_nodes, n_edges)
        out = replace(out, lr=lr)
        notes.append(f"peak lr {lr:.3g} ({why}; --lr overrides)")
    elif out.lr is None:
        out = replace(out, lr=LR_FIXED_FEATURES if fixed_features else LR_FEATURELESS)
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
        f"{out.adam} Adam, {out.sampler} sampler",
    )
    return out, notes


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
    routing's c (m, P, I), s and e (m, P, k), the sampled logits (P, |V'|) twice."""
    q, k, B, m = cfg.walk_length, cfg.dim, cfg.batch_size, cfg.routing_iters
    I = q - 1
    per_walk = q if cfg.targets == "all" else 1 if cfg.targets == "random" else len(cfg.targets)
    P = B * per_walk
    S = cfg.num_sampled if cfg.num_sampled is not None else min(256, n_nodes - 1)
    d = 0 if sparse_features else feat_dim
    floats = (
        4 * I * P * d
        + 2 * I * P * k
        + m * P * I
        + 2 * m * P * k
        + 2 * P * S
        + 3 * n_nodes * (k + 1 + (feat_dim if not sparse_features and d else 0))
        + 4 * I * k * feat_dim
    )
    ints = B * q + 3 * I * P + (n_nodes * cfg.walks_per_node if cfg.batch_mode == "shuffle" else 0)
    return 4 * floats + 8 * ints


def check_step_memory(cfg, n_nodes, feat_dim, sparse=False):
    """InputError with the figure when ``step_memory`` exceeds the available memory."""
    from .errors import check_memory

    check_memory(
        step_memory(cfg, n_nodes, feat_dim, sparse),
        f"training with --batch-size {cfg.batch_size}, --walk-length {cfg.walk_length}, "
        f"--dim {cfg.dim}, --routing-iters {cfg.routing_iters} on {n_nodes} nodes",
        "lower them (--batch-size first)",
    )


def walk_seed(seed, epoch):
    """The walk seed of an epoch: epoch 0 (and every epoch with ``walks='fixed'``) uses
    the run's walk seed; later epochs with ``walks='fresh'`` each their own."""
    return derive_seed(seed, "walks" if epoch == 0 else f"walks/{epoch}")


def learning_rate(cfg, lr, step, total_steps):
    """Adam's rate at global step ``step`` (0-based) of ``total_steps``.

    'constant': lr.  'linear': lr (1 - (1 - lr_floor) step / (total_steps - 1)), from lr
    at the first step down to lr * lr_floor at the last, as word2vec decays its rate."""
    if cfg.lr_schedule == "constant":
        return lr
    done = min(step / max(total_steps - 1, 1), 1.0)
    return lr * (1.0 - (1.0 - cfg.lr_floor) * done)


def training_batch(
    walks,
    order,
    epoch,
    b,
    step,
    batch_size,
    positions,
    sampler,
    num_sampled,
    seed_batch,
    seed_pos,
    seed_sample,
):
    """Batch b of an epoch (a batch.Batch): its walks (``walks``, a WalkSource; ``order``
    the epoch's permutation with batch_mode 'shuffle', else None: drawn from
    (seed_batch, epoch, b)), their (context, target)
    pairs at ``positions`` (None: one random position per walk, keyed by the global
    ``step``) and the sampled softmax's nodes and expected counts (keyed by ``step``).
    ``fit`` and the Ray workers (distributed.py) both build their batches here."""
    if order is None:
        walk_ids = walks_mod.batch_walk_ids(walks.n_walks, batch_size, seed_batch, epoch, b)
    else:
        walk_ids = order[b * batch_size : (b + 1) * batch_size]
    batch_walks = walks.walks(walk_ids)
    ctx, tgt = walks_mod.training_pairs(
        batch_walks,
        np.arange(batch_walks.shape[0]),
        positions if positions is not None else "random",
        seed=seed_pos,
        key=step,
    )
    sampled, tries = sampler.sample(num_sampled, seed_sample, step)
    return Batch(
        ctx,
        tgt,
        sampled,
        sampler.expected_count(tgt, tries),
        sampler.expected_count(sampled, tries),
    )


@dataclass
class TrainResult:
    """Fitted parameters, optimiser, walks and the per-epoch history."""

    params: object
    config: TrainConfig
    history: list = field(default_factory=list)
    optimizer: object = None
    notes: list = field(default_factory=list)


def fit(
    indptr,
    indices,
    weights,
    cfg,
    features=None,
    progress=False,
    epoch_callback=None,
    checkpoint_dir=None,
    checkpoint_every=0,
    resume_from=None,
    step_callback=None,
    checkpoint_extra=None,
):
    """Train Caps2NE on the graph given by CSR arrays; returns a TrainResult.

    indptr (N+1,) int64, indices (nnz,) int32, weights (nnz,) float32 or None.
    features: (N, d) fixed input features, or None to train x (featureless).
    epoch_callback(epoch, result) is called after every epoch.
    checkpoint_dir: write the full state there after every epoch and, with
    ``checkpoint_every = n > 0``, every n steps (checkpoint.py).
    resume_from: a checkpoint directory to continue from (same input and options;
    ``epochs`` and ``threads`` may change).
    step_callback(epoch, batch, step) is called after every step (tests use it to
    interrupt a run).
    checkpoint_extra: state of the caller's that goes into every checkpoint, an object
    with ``checkpoint_arrays()`` (a dict of named arrays, as of the last finished epoch)
    and ``restore_checkpoint(arrays)`` (called on resume with the stored dict); the
    epoch callback runs before the epoch's checkpoint is written, so that state
    includes the epoch.  The folder is locked for the run (checkpoint.locked).
    Memory: refused before allocating (InputError) when ``step_memory`` exceeds what is
    available.
    """
    n_nodes = int(indptr.shape[0] - 1)
    cfg, notes = resolve(
        cfg, n_nodes, int(np.asarray(indices).shape[0]), fixed_features=features is not None
    )
    validate(cfg, n_nodes)
    for note in notes:
        log.info("%s", note)
    if checkpoint_every < 0:
        raise InputError(f"--checkpoint-every: must be >= 0, got {checkpoint_every}")
    from .errors import InputWarning

    if cfg.lr < LR_TINY:
        import warnings

        warnings.warn(
            f"--lr {cfg.lr:g}: an Adam step of about {cfg.lr:g} per element is below "
            "float32's resolution for parameters of size 0.01-1, so training will "
            "barely change them; the paper's rates are 1e-5 to 5e-4",
            InputWarning,
            stacklevel=2,
        )
    sparse = features is not None and hasattr(features, "nnz")
    check_step_memory(
        cfg, n_nodes, cfg.feat_dim if features is None else int(features.shape[1]), sparse
    )
    if features is not None:
        features = prepare_features(features, n_nodes, cfg.normalize_features)
    lr = cfg.lr
    old_threads = numba.get_num_threads()
    numba.set_num_threads(min(cfg.threads, numba.config.NUMBA_NUM_THREADS))
    from contextlib import nullcontext

    from . import checkpoint

    lock = checkpoint.locked(checkpoint_dir) if checkpoint_dir is not None else nullcontext()
    try:
        # over/underflow ends as NaN or inf, which the divergence checks report in one line
        with threadpool_limits(limits=1), np.errstate(over="ignore", invalid="ignore"), lock:
            result = _fit(
                indptr,
                indices,
                weights,
                cfg,
                lr,
                features,
                progress,
                epoch_callback,
                checkpoint_dir,
                checkpoint_every,
                resume_from,
                step_callback,
                checkpoint_extra,
            )
            result.notes = notes
            return result
    finally:
        numba.set_num_threads(old_threads)


def _fit(
    indptr,
    indices,
    weights,
    cfg,
    lr,
    features,
    progress,
    epoch_callback,
    checkpoint_dir,
    checkpoint_every,
    resume_from,
    step_callback,
    checkpoint_extra=None,
):
    from . import checkpoint

    n_nodes = int(indptr.shape[0] - 1)
    q = cfg.walk_length
    graph_hash = checkpoint.fingerprint(indptr, indices, weights, features)
    ckpt = None
    if resume_from is not None:
        ckpt = checkpoint.load(resume_from)
        ckpt = checkpoint.check_compatible(ckpt, cfg.to_dict(), graph_hash)
    # Walks are generated on demand, batch by batch: walk w is a pure function of
    # (seed, w), so the run never holds all N*T walks (walks.WalkSource).
    source = walks_mod.WalkSource(
        indptr,
        indices,
        weights,
        cfg.walks_per_node,
        q,
        walk_seed(cfg.seed, 0),
        cfg.node2vec_p,
        cfg.node2vec_q,
    )
    positions = walks_mod.target_positions(cfg.targets, q)
    if progress and _kernels_cold():
        log.info("compiling kernels (first run only; cached on disk for later runs) ...")
    counts = None
    if cfg.sampler == "unigram":
        t0 = time.perf_counter()
        counts = source.node_counts(cfg.walk_chunk)
        log.info("counted nodes in %d walks in %.2fs", source.n_walks, time.perf_counter() - t0)
    sampler = make_sampler(cfg.sampler, n_nodes, counts=counts)

    num_sampled = cfg.num_sampled if cfg.num_sampled is not None else min(256, n_nodes - 1)
    rng = np.random.default_rng(derive_seed(cfg.seed, "init"))
    feat_dim = cfg.feat_dim if features is None else features.shape[1]
    params = init_params(n_nodes, cfg.dim, feat_dim, q - 1, rng, features=features)
    names = params.trainable()
    opt = Adam({name: getattr(params, name) for name in names}, lr=lr)
    result = TrainResult(params=params, config=cfg, optimizer=opt)
    state = dict(epoch=0, batch=0, step=0, loss_sum=0.0, n_pairs=0, seconds=0.0)
    if ckpt is not None:
        try:
            checkpoint.check_arrays(ckpt, params, names)
        except InputError as err:  # the latest is damaged: try the previous
            ckpt = checkpoint.fall_back(ckpt, err)
            ckpt = checkpoint.check_compatible(ckpt, cfg.to_dict(), graph_hash)
            checkpoint.check_arrays(ckpt, params, names)
        arrays = ckpt["arrays"]
        if checkpoint_extra is not None:
            checkpoint_extra.restore_checkpoint(ckpt["extra"])
        for name in names:
            getattr(params, name)[...] = arrays[f"param_{name}"]
            opt.m[name][...] = arrays[f"m_{name}"]
            opt.v[name][...] = arrays[f"v_{name}"]
        opt.t, opt.lr = ckpt["adam_t"], ckpt["adam_lr"]
        state.update(ckpt["state"])
        result.history = ckpt["history"]
        log.info(
            "resumed from %s at epoch %d, batch %d",
            ckpt["path"],
            state["epoch"] + 1,
            state["batch"],
        )
    train_step = TrainStep(params, opt, cfg.model_config(), lazy=cfg.adam == "lazy")

    def save_checkpoint():
        if checkpoint_dir is not None:
            extra = checkpoint_extra.checkpoint_arrays() if checkpoint_extra is not None else None
            checkpoint.save(
                checkpoint_dir,
                params,
                opt,
                state,
                cfg.to_dict(),
                result.history,
                graph_hash,
                extra=extra,
            )

    def diverged(what):
        where = f"; the last good checkpoint is in {checkpoint_dir}" if checkpoint_dir else ""
        fix = f"lower --lr (now {lr:g})"
        if cfg.routing_scale is not None and cfg.routing_scale > q - 1:
            fix = (
                f"lower --routing-scale (now {cfg.routing_scale:g}; the authors' is q - 1 = "
                f"{q - 1}) or --lr (now {lr:g})"
            )
        return TrainingDiverged(
            f"{what} at epoch {state['epoch'] + 1}, step {state['batch'] + 1}; {fix}{where}"
        )

    n_walks = source.n_walks
    n_batches = walks_mod.batches_per_epoch(n_walks, cfg.batch_size)
    seed_batch = derive_seed(cfg.seed, "batch")
    seed_pos = derive_seed(cfg.seed, "positions")
    seed_sample = derive_seed(cfg.seed, "sampler")
    total_steps = cfg.epochs * n_batches
    # The bar starts after the run's first step, which compiles the kernels on a cold
    # Numba cache (or loads them from it): that time stays out of the ETA and pairs/s.
    bar = None
    first = None  # (epoch, pairs, seconds) of the run's first step
    try:
        while state["epoch"] < cfg.epochs:
            epoch = state["epoch"]
            t_start = time.perf_counter() - state["seconds"]
            order = (
                walks_mod.epoch_permutation(n_walks, seed_batch, epoch)
                if cfg.batch_mode == "shuffle"
                else None
            )
            epoch_walks = (
                source if cfg.walks == "fixed" else source.reseeded(walk_seed(cfg.seed, epoch))
            )

            def make_batch(b, step, epoch_walks=epoch_walks, order=order, epoch=epoch):
                return training_batch(
                    epoch_walks,
                    order,
                    epoch,
                    b,
                    step,
                    cfg.batch_size,
                    positions,
                    sampler,
                    num_sampled,
                    seed_batch,
                    seed_pos,
                    seed_sample,
                )

            batch = None
            while state["batch"] < n_batches:
                b, step = state["batch"], state["step"]
                if batch is None:  # else drawn by the previous step, ahead
                    batch = make_batch(b, step)
                opt.lr = learning_rate(cfg, lr, step, total_steps)
                loss, grads = train_step.gradients(batch)  # forward, backward
                if not math.isfinite(loss):
                    raise diverged(f"the loss became {loss}")
                # the next batch of the epoch is drawn before the update (every draw is
                # keyed by its step): the fused W update forms its W_i u (step.py)
                ahead = make_batch(b + 1, step + 1) if b + 1 < n_batches else None
                train_step.update(grads, ahead)  # Adam
                n_pairs, batch = batch.n_pairs, ahead
                state.update(
                    batch=b + 1,
                    step=step + 1,
                    loss_sum=state["loss_sum"] + loss * n_pairs,
                    n_pairs=state["n_pairs"] + n_pairs,
                    seconds=time.perf_counter() - t_start,
                )
                if (
                    checkpoint_every
                    and state["step"] % checkpoint_every == 0
                    and state["batch"] < n_batches
                ):
                    if not _finite(params, names):
                        raise diverged("a parameter became NaN or infinite")
                    save_checkpoint()
                if first is None:
                    if state["seconds"] > 2.0:
                        log.info(
                            "first step: %.1fs (kernel compilation or loading; not counted "
                            "in pairs/s)",
                            state["seconds"],
                        )
                    bar = _progress(
                        progress, total_steps, state["epoch"] * n_batches + state["batch"]
                    )
                    first = (epoch, state["n_pairs"], time.perf_counter() - t_start)
                elif bar is not None:
                    bar.update(1)
                    if b % 20 == 0:
                        bar.set_postfix(
                            epoch=f"{epoch + 1}/{cfg.epochs}",
                            lr=f"{opt.lr:.2g}",
                            loss=f"{state['loss_sum'] / state['n_pairs']:.4f}",
                            pairs_s=f"{_rate(state, epoch, first):,.0f}",
                            refresh=False,
                        )  # redraws follow mininterval
                if step_callback is not None:
                    step_callback(epoch, b, step)
            if not _finite(params, names):
                raise diverged("a parameter became NaN or infinite")
            seconds = time.perf_counter() - t_start
            entry = dict(
                epoch=epoch + 1,
                loss=state["loss_sum"] / state["n_pairs"],
                lr=opt.lr,
                seconds=seconds,
                pairs=state["n_pairs"],
                pairs_per_s=_rate(dict(state, seconds=seconds), epoch, first),
            )
            result.history.append(entry)
            state.update(epoch=epoch + 1, batch=0, loss_sum=0.0, n_pairs=0, seconds=0.0)
            log.info(
                "epoch %d/%d: loss %.5f, lr %.3g, %.1fs, %.0f pairs/s",
                epoch + 1,
                cfg.epochs,
                entry["loss"],
                entry["lr"],
                seconds,
                entry["pairs_per_s"],
            )
            if epoch_callback is not None:  # first: its state goes into the checkpoint
                epoch_callback(epoch + 1, result)
            save_checkpoint()
    finally:
        if bar is not None:
            bar.close()
    return result


def _finite(params, names):
    return all(np.isfinite(getattr(params, n)).all() for n in names)


def _rate(state, epoch, first):
    """Pairs/s of the epoch so far, without the run's first step (kernel compilation)
    when it belongs to this epoch and is not all of it."""
    pairs, seconds = state["n_pairs"], state["seconds"]
    if first is not None and first[0] == epoch and pairs > first[1]:
        pairs, seconds = pairs - first[1], seconds - first[2]
    return pairs / max(seconds, 1e-9)


def _kernels_cold():
    """True if a Numba kernel of the training step is compiled neither in this process nor
    in the on-disk cache (a heuristic: a cache entry for other argument types counts)."""
    import os

    from . import batch, blas, capsules, core, grads, optim, samplers, step

    try:
        for module in (capsules, grads, core, batch, blas, optim, step, samplers, walks_mod):
            for obj in vars(module).values():
                if isinstance(obj, numba.core.dispatcher.Dispatcher) and not obj.signatures:
                    if not os.path.exists(obj._cache._cache_file._index_path):
                        return True
    except AttributeError:  # another Numba's cache layout: say nothing
        return False
    return False


def _progress(enabled, total, initial=0):
    """The tqdm bar on stderr; when stderr is not a terminal (a log file, CI) it is
    redrawn at most every 30 s, instead of ~10 times a second."""
    if not enabled:
        return None
    import sys

    from tqdm.auto import tqdm

    tty = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
    return tqdm(
        total=total,
        initial=initial,
        unit="batch",
        dynamic_ncols=tty,
        leave=True,
        file=sys.stderr,
        mininterval=0.1 if tty else 30.0,
        maxinterval=10.0 if tty else 300.0,
    )
