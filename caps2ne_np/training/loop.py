"""The epoch loop (Algorithm 2's outer loops), shared by both engines.

``run_epochs`` owns what a run does between its batches, whatever computes them:
the state (epoch, batch, step, the epoch's loss and pairs), resuming it, the rate of
every step (config.learning_rate), the divergence checks, checkpoints (every
``checkpoint_every`` steps and after every epoch), the progress bar, the history and
its log line, and the order at the end of an epoch: the epoch callback first, then
the checkpoint, so that the caller's state (``checkpoint_extra``) includes the epoch.

An engine supplies only what differs (train.LocalEngine, train.AsyncEngine,
ray.engine.RayEngine):

    round_size                 consecutive batches one ``train`` call takes (1; Ray: P)
    resumed                    the checkpoint it restored (dict: state, history, path,
                               extra), or None
    optimizer                  ``lr`` and ``t`` of the last step
    train(epoch, b, step, rates) -> [record]  batches b, b + 1, ... of the epoch, one
                               per rate (steps step, step + 1, ...), each recorded by
                               ``trained_batch``: (loss, pairs), or (loss, pairs,
                               L_caps, L_sg) with the skip-gram term; stops after a
                               non-finite loss
    finite()                   every parameter finite
    save(directory, state, history, extra)  a checkpoint
    params()                   the parameters (core.Params) as of now
"""

import logging
import math
import time
import warnings
from dataclasses import dataclass, field

from ..errors import InputError, InputWarning
from ..model.core import check_skipgram
from . import budget
from . import walks as walks_mod
from .config import LR_TINY, learning_rate, resolve, validate

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """The loss or a parameter became NaN or infinite."""


@dataclass
class TrainResult:
    """Fitted parameters, optimiser, the per-epoch history and the run's notes."""

    params: object
    config: object
    history: list = field(default_factory=list)
    optimizer: object = None
    notes: list = field(default_factory=list)


def trained_batch(cfg, loss, batch, parts):
    """A trained batch as ``run_epochs`` takes it from an engine: (loss, pairs), and with
    the skip-gram term (``cfg.skipgram_weight``) its two parts too, (loss, pairs, L_caps,
    L_sg), from the ``parts`` dict core.loss_and_row_grads fills."""
    if cfg.skipgram_weight:
        return (loss, batch.n_pairs, parts["capsule"], parts["skipgram"])
    return (loss, batch.n_pairs)


def prepare(cfg, n_nodes, n_edges, fixed_features, checkpoint_every):
    """A run's resolved configuration and its notes (config.resolve), checked once for
    both engines: the options, ``checkpoint_every``, and a warning for a rate below
    float32's resolution.  The notes are logged."""
    cfg, notes = resolve(cfg, n_nodes, n_edges, fixed_features=fixed_features)
    validate(cfg, n_nodes)
    # --skipgram-weight given with --features or --feat-dim != --dim: one line
    check_skipgram((fixed_features, cfg.feat_dim, cfg.dim), cfg.model_config())
    if checkpoint_every < 0:
        raise InputError(f"--checkpoint-every: must be >= 0, got {checkpoint_every}")
    if cfg.lr < LR_TINY:
        warnings.warn(
            f"--lr {cfg.lr:g}: an Adam step of about {cfg.lr:g} per element is below "
            "float32's resolution for parameters of size 0.01-1, so training will "
            "barely change them; the paper's rates are 1e-5 to 5e-4",
            InputWarning,
            stacklevel=3,
        )
    for note in notes:
        log.info("%s", note)
    return cfg, notes


def run_epochs(
    engine,
    result,
    n_walks,
    progress=False,
    epoch_callback=None,
    checkpoint_dir=None,
    checkpoint_every=0,
    step_callback=None,
    checkpoint_extra=None,
    stop_rule=None,
):
    """Train ``result.config.epochs`` epochs of ceil(n_walks / batch_size) batches with
    ``engine`` (from its ``resumed`` state); fills ``result.history`` and returns
    ``result``.  The arguments are those of ``train.fit``; ``stop_rule(epoch, params)
    -> bool``, asked after each epoch's callback and checkpoint, ends the run early
    (default: ``budget.stop_rule(config)``, the ``stop`` option's)."""
    cfg = result.config
    if stop_rule is None:
        stop_rule = budget.stop_rule(cfg)
    state = dict(epoch=0, batch=0, step=0, loss_sum=0.0, n_pairs=0, seconds=0.0)
    # With the skip-gram term, an engine that reports a step's two parts (L_caps, L_sg)
    # gets both logged: L = L_caps + lambda L_sg.
    term = bool(cfg.skipgram_weight)
    if term:
        state.update(caps_sum=0.0, sg_sum=0.0, part_pairs=0)
    ckpt = engine.resumed
    if ckpt is not None:
        if checkpoint_extra is not None:
            checkpoint_extra.restore_checkpoint(ckpt["extra"])
        state.update(ckpt["state"])
        result.history = ckpt["history"]
        log.info(
            "resumed from %s at epoch %d, batch %d",
            ckpt["path"],
            state["epoch"] + 1,
            state["batch"],
        )

    if stop_rule is not None and hasattr(stop_rule, "resume"):  # the o_v it compares with
        stop_rule.resume(state, engine.params())

    def save():
        if checkpoint_dir is not None:
            extra = checkpoint_extra.checkpoint_arrays() if checkpoint_extra is not None else None
            engine.save(checkpoint_dir, state, result.history, extra)

    def diverged(what, b):
        where = f"; the last good checkpoint is in {checkpoint_dir}" if checkpoint_dir else ""
        fix = f"lower --lr (now {cfg.lr:g})"
        q = cfg.walk_length
        if cfg.skipgram_weight and cfg.skipgram_weight > 1:  # lambda L_sg dwarfs the rest
            fix = (
                f"lower --skipgram-weight (now {cfg.skipgram_weight:g}; 1 weighs the two "
                f"losses alike) or --lr (now {cfg.lr:g})"
            )
        elif cfg.routing_scale is not None and cfg.routing_scale > q - 1:
            fix = (
                f"lower --routing-scale (now {cfg.routing_scale:g}; the authors' is q - 1 = "
                f"{q - 1}) or --lr (now {cfg.lr:g})"
            )
        return TrainingDiverged(f"{what} at epoch {state['epoch'] + 1}, step {b + 1}; {fix}{where}")

    n_batches = walks_mod.batches_per_epoch(n_walks, cfg.batch_size)
    total_steps = cfg.epochs * n_batches
    # The bar starts after the run's first round, which compiles the kernels on a cold
    # Numba cache (or loads them from it): that time stays out of the ETA and pairs/s.
    bar = None
    first = None  # (epoch, pairs, seconds) of the run's first round
    try:
        while state["epoch"] < cfg.epochs:
            epoch = state["epoch"]
            t_start = time.perf_counter() - state["seconds"]
            while state["batch"] < n_batches:
                b0, step0 = state["batch"], state["step"]
                n = min(engine.round_size, n_batches - b0)
                rates = [learning_rate(cfg, cfg.lr, step0 + r, total_steps) for r in range(n)]
                done = engine.train(epoch, b0, step0, rates)
                loss_sum, n_pairs = state["loss_sum"], state["n_pairs"]
                for r, (loss, pairs, *parts) in enumerate(done):  # batch order
                    if not math.isfinite(loss):
                        raise diverged(f"the loss became {loss}", b0 + r)
                    loss_sum += loss * pairs
                    n_pairs += pairs
                    if term and parts:
                        state["caps_sum"] = state.get("caps_sum", 0.0) + parts[0] * pairs
                        state["sg_sum"] = state.get("sg_sum", 0.0) + parts[1] * pairs
                        state["part_pairs"] = state.get("part_pairs", 0) + pairs
                state.update(
                    batch=b0 + n,
                    step=step0 + n,
                    loss_sum=loss_sum,
                    n_pairs=n_pairs,
                    seconds=time.perf_counter() - t_start,
                )
                if (
                    checkpoint_every
                    and state["batch"] < n_batches
                    and state["step"] // checkpoint_every > step0 // checkpoint_every
                ):
                    if not engine.finite():
                        raise diverged("a parameter became NaN or infinite", state["batch"])
                    save()
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
                    bar.update(n)
                    if (b0 + n - 1) // 20 > (b0 - 1) // 20:  # a batch b % 20 == 0 in the round
                        bar.set_postfix(
                            epoch=f"{epoch + 1}/{cfg.epochs}",
                            lr=f"{engine.optimizer.lr:.2g}",
                            loss=f"{state['loss_sum'] / state['n_pairs']:.4f}",
                            **(
                                {"skip-gram": f"{state['sg_sum'] / state['part_pairs']:.4f}"}
                                if state.get("part_pairs")
                                else {}
                            ),
                            pairs_s=f"{_rate(state, epoch, first):,.0f}",
                            refresh=False,
                        )  # redraws follow mininterval
                if step_callback is not None:  # every step of the round, in order
                    for r in range(n):
                        step_callback(epoch, b0 + r, step0 + r)
            if not engine.finite():
                raise diverged("a parameter became NaN or infinite", state["batch"])
            seconds = time.perf_counter() - t_start
            entry = dict(
                epoch=epoch + 1,
                loss=state["loss_sum"] / state["n_pairs"],
                lr=engine.optimizer.lr,
                seconds=seconds,
                pairs=state["n_pairs"],
                pairs_per_s=_rate(dict(state, seconds=seconds), epoch, first),
            )
            parts = ""
            if state.get("part_pairs"):  # L = L_caps + lambda L_sg: both parts
                entry.update(
                    loss_capsule=state["caps_sum"] / state["part_pairs"],
                    loss_skipgram=state["sg_sum"] / state["part_pairs"],
                )
                state.update(caps_sum=0.0, sg_sum=0.0, part_pairs=0)
                parts = (
                    f" (capsule {entry['loss_capsule']:.4f} + {cfg.skipgram_weight:g} x "
                    f"skip-gram {entry['loss_skipgram']:.4f})"
                )
            result.history.append(entry)
            state.update(epoch=epoch + 1, batch=0, loss_sum=0.0, n_pairs=0, seconds=0.0)
            log.info(
                "epoch %d/%d: loss %.4f%s, lr %.3g, %.1fs, %.0f pairs/s",
                epoch + 1,
                cfg.epochs,
                entry["loss"],
                parts,
                entry["lr"],
                seconds,
                entry["pairs_per_s"],
            )
            if epoch_callback is not None:  # first: its state goes into the checkpoint
                result.params = engine.params()
                epoch_callback(epoch + 1, result)
            save()
            if stop_rule is not None and state["epoch"] < cfg.epochs:
                result.params = engine.params()
                if stop_rule(epoch + 1, result.params):
                    break
    finally:
        if bar is not None:
            bar.close()
    return result


def _rate(state, epoch, first):
    """Pairs/s of the epoch so far, without the run's first round (kernel compilation)
    when it belongs to this epoch and is not all of it."""
    pairs, seconds = state["n_pairs"], state["seconds"]
    if first is not None and first[0] == epoch and pairs > first[1]:
        pairs, seconds = pairs - first[1], seconds - first[2]
    return pairs / max(seconds, 1e-9)


def _progress(enabled, total, initial=0):
    """The run's progress on stderr (progress.bar: a bar in a terminal, lines in a log)."""
    from . import progress

    return progress.bar(total, initial, enabled)
