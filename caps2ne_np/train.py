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
from dataclasses import dataclass, field

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from . import walks as walks_mod
from .batch import Batch
from .config import LR_TINY, check_step_memory, learning_rate, resolve, validate
from .core import init_params, prepare_features
from .errors import InputError
from .optim import Adam
from .rng import derive_seed
from .samplers import make_sampler
from .step import TrainStep

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss or a parameter became NaN or infinite."""


def walk_seed(seed, epoch):
    """The walk seed of an epoch: epoch 0 (and every epoch with ``walks='fixed'``) uses
    the run's walk seed; later epochs with ``walks='fresh'`` each their own."""
    return derive_seed(seed, "walks" if epoch == 0 else f"walks/{epoch}")


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
    config: object
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
        indptr, indices, weights, cfg.walks_per_node, q, walk_seed(cfg.seed, 0)
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

    num_sampled = cfg.num_sampled
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
