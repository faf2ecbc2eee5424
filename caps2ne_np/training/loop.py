"""The epoch loop (Algorithm 2's outer loops), shared by every engine, and the set-up
before it.

``set_up`` is what every engine does before training, in one order: the options
resolved and checked (``prepare``), the run's ``Schedule`` (schedule.py: batches per
epoch and the rate of every step), the engine's own checks, the spectral start and
the fixed features.

``run_epochs`` owns what a run does between its batches, whatever computes them:
the state (``LoopState``: epoch, batch, step, the epoch's loss and pairs), resuming
it, the rate of every step (the ``Schedule``), the divergence checks, checkpoints
(every ``checkpoint_every`` steps and after every epoch), the progress bar, the
history and its log line, and the order at the end of an epoch: the epoch callback
first, then the stop rule, then the checkpoint, so that the caller's state
(``checkpoint_extra``) and the rule's (its decision, the o_v its drift compares with)
include the epoch, and a resumed run stops where the uninterrupted one does.

An engine supplies only what differs (train.LocalEngine, train.AsyncEngine,
ray.engine.RayEngine):

    round_size                 consecutive batches one ``train`` call takes (1; Ray: P)
    resumed                    the checkpoint it restored (dict: state, history, path,
                               extra; ``adam_lr``, the rate of its last step, when it
                               has one), or None
    train(epoch, b, step, rates) -> [record]  batches b, b + 1, ... of the epoch, one
                               per rate (steps step, step + 1, ...; the schedule's),
                               each recorded by ``trained_batch``: (loss, pairs), or
                               (loss, pairs, L_caps, L_sg) with the skip-gram term;
                               stops after a non-finite loss
    finite()                   every parameter finite
    save(directory, state, history, extra)  a checkpoint (``state``: a dict,
                               ``LoopState.to_dict``)
    params()                   the parameters (core.Params) as of now
"""

import logging
import math
import time
import warnings
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from ..errors import InputError, InputWarning
from ..graphs.csr import Graph
from ..model.features import prepare_features
from ..model.skipgram import check_skipgram
from . import budget, checkpoint
from .options.presets import resolve
from .options.rates import LR_TINY
from .options.validation import validate
from .schedule import Schedule

log = logging.getLogger(__name__)

STOP_ARRAYS = ("stop_previous",)
"""A checkpoint's extra arrays that hold the stop rule's state (budget.StopRule.checkpoint),
not the caller's."""


class TrainingDiverged(RuntimeError):
    """The loss or a parameter became NaN or infinite."""


@dataclass
class TrainResult:
    """Fitted parameters, the optimiser (local engines), the per-epoch history, the
    run's notes and its schedule (``lr``: the rate of the last step trained); with
    ``--stop holdout``, the edges held out of training (budget.held_out), or None; the
    graph's structure measure (budget.graph_structure), or None when nothing read it."""

    params: object
    config: object
    history: list = field(default_factory=list)
    optimizer: object = None
    notes: list = field(default_factory=list)
    schedule: object = None
    holdout: dict | None = None
    structure: float | None = None

    @property
    def lr(self):
        return self.schedule.last if self.schedule is not None else self.config.lr


def trained_batch(cfg, loss, batch, parts):
    """A trained batch as ``run_epochs`` takes it from an engine: (loss, pairs), and with
    the skip-gram term (``cfg.skipgram_weight``) its two parts too, (loss, pairs, L_caps,
    L_sg), from the ``parts`` dict core.loss_and_row_grads fills."""
    if cfg.skipgram_weight:
        return (loss, batch.n_pairs, parts["capsule"], parts["skipgram"])
    return (loss, batch.n_pairs)


def prepare(cfg, n_nodes, n_edges, fixed_features, checkpoint_every):
    """A run's resolved configuration and its notes (presets.resolve), checked once for
    every engine: the options, ``checkpoint_every``, and a warning for a rate below
    float32's resolution.  The notes are logged."""
    cfg, notes = _resolved(cfg, n_nodes, n_edges, fixed_features, checkpoint_every)
    for note in notes:
        log.info("%s", note)
    return cfg, notes


def _resolved(cfg, n_nodes, n_edges, fixed_features, checkpoint_every):
    """``prepare`` without logging the notes."""
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
            stacklevel=4,
        )
    return cfg, notes


@dataclass(frozen=True)
class LoopOptions:
    """What the caller of a run asks of its epoch loop (a ``Run``'s ``options``; the
    arrays' faces, train.fit and ray's fit, take these fields by name): ``progress``
    shows the run's progress on stderr; ``epoch_callback(epoch, result)`` is called
    after every epoch, before its checkpoint; ``checkpoint_dir`` is where checkpoints go
    (None: none), after every epoch and, with ``checkpoint_every = n > 0``, every n
    steps; ``step_callback(epoch, batch, step)`` is called after every step;
    ``checkpoint_extra`` is the caller's state stored in every checkpoint (an object
    with ``checkpoint_arrays()`` and ``restore_checkpoint(arrays)``), or None."""

    progress: bool = False
    epoch_callback: object = None
    checkpoint_dir: object = None
    checkpoint_every: int = 0
    step_callback: object = None
    checkpoint_extra: object = None


@dataclass(frozen=True)
class Run:
    """One training job, as every engine takes it (train.fit_run, ray's fit_run,
    engines.fit): ``graph`` a csr.Graph (training reads its CSR arrays alone), ``cfg``
    the options (config.TrainConfig, resolved by ``set_up``), ``features`` (N, d) fixed
    input features (dense, or core.SparseFeatures / scipy.sparse) or None to train x,
    ``resume_from`` a checkpoint folder to continue from (same input and options;
    checkpoint.RESUMABLE_CHANGES may change; epochs and stop left None:
    checkpoint.keep_budget) or None, and ``options``, what the caller asks of the epoch
    loop (``LoopOptions``: progress, callbacks, checkpoints); ``starts`` (S,) int64,
    the nodes an epoch's walks start from, T = walks_per_node each (an update's,
    update/update.py), or None: every node."""

    graph: Graph
    cfg: object
    features: object = None
    resume_from: object = None
    options: LoopOptions = LoopOptions()
    starts: object = None

    @classmethod
    def of(cls, indptr, indices, weights, cfg, features=None, resume_from=None, **options):
        """The Run of a graph given as CSR arrays (``csr_graph``): indptr (N+1,) int64,
        indices (nnz,) int32, weights (nnz,) float32 or None; ``options`` are
        ``LoopOptions``' fields."""
        graph = csr_graph(indptr, indices, weights)
        return cls(graph, cfg, features, resume_from, LoopOptions(**options))


def csr_graph(indptr, indices, weights=None):
    """A csr.Graph of CSR arrays alone, as training reads them: no node ids (the rows
    are the nodes), undirected as far as anything asks."""
    return Graph(np.asarray(indptr), np.asarray(indices), weights, node_ids=None, directed=False)


@dataclass
class Setup:
    """What an engine starts from (``set_up``): the resolved configuration, its notes,
    the ``Schedule``, the spectral start (spectral.SpectralStart), the fixed
    features the run uses (prepared), or None, the graph's structure the stop rule
    reads (budget.graph_structure), or None; with ``--stop holdout``, its held-out
    sample (budget.held_out), or None; and ``graph``, the csr.Graph the engine trains
    on: the run's, without the held-out edges when there are."""

    cfg: object
    notes: list
    schedule: Schedule
    start: object
    features: object
    structure: float | None = None
    held: dict | None = None
    graph: Graph | None = None
    starts: object = None


def set_up(run, on_resolved=None, check=None):
    """The set-up before training a ``Run``, one order for every engine: the options
    resolved and checked (``prepare``); the run's ``Schedule``; ``on_resolved(cfg,
    schedule)`` (the Ray engine caps its workers there); the notes logged; ``check(cfg)``
    (the engine's refusals before any work: the local engine's step memory, the Ray
    engine's lazy Adam); the spectral start (spectral/prone.py; a resumed run, from
    ``run.resume_from``, keeps its checkpoint's --epochs and --stop where ``cfg`` leaves
    them unset, checkpoint.keep_budget); the fixed features prepared: the given ones
    normalised as ``cfg.normalize_features`` says, ProNE's unit rows as they are; the
    graph's structure for the stop rule (budget.graph_structure, with ``--stop auto``).
    With ``--stop holdout`` the held-out sample is drawn before the spectral start
    (budget.held_out), and the start and the training see the graph without it; the
    options are resolved from the whole graph.  Returns a ``Setup``."""
    from ..spectral import prone as spectral

    graph, cfg, features, resume = run.graph, run.cfg, run.features, run.resume_from
    n_nodes, n_edges = graph.n_nodes, graph.n_edges
    if resume:
        cfg = checkpoint.keep_budget(cfg, resume)
    every = run.options.checkpoint_every
    cfg, notes = _resolved(cfg, n_nodes, n_edges, features is not None, every)
    starts = run.starts
    if starts is None:
        schedule = Schedule.for_graph(cfg, n_nodes)
    else:  # walks from the given nodes only (an update's)
        starts = _checked_starts(starts, n_nodes)
        schedule = Schedule.for_walks(cfg, starts.shape[0] * cfg.walks_per_node)
    if on_resolved is not None:
        on_resolved(cfg, schedule)
    for note in notes:
        log.info("%s", note)
    if check is not None:
        check(cfg)
    held, train = budget.held_out(cfg, graph)
    start = spectral.start(
        train.indptr, train.indices, train.weights, cfg, features, resume=bool(resume)
    )
    if start.note:
        log.info("%s", start.note)
        notes = notes + [start.note]
    if features is not None:
        features = prepare_features(features, n_nodes, cfg.normalize_features)
    elif start.features is not None:  # unit rows, used as they are
        features = prepare_features(start.features, n_nodes, normalize=False)
    structure = budget.graph_structure(cfg, graph)
    return Setup(cfg, notes, schedule, start, features, structure, held, train, starts)


def _checked_starts(starts, n_nodes):
    """``Run.starts`` as sorted int64 nodes (a node given c times starts c T walks an
    epoch: batch.start_walk_ids); InputError when empty or out of range."""
    starts = np.sort(np.asarray(starts, dtype=np.int64).ravel())
    if starts.size == 0:
        raise InputError("no node to start walks from: the set of start nodes is empty")
    if starts[0] < 0 or starts[-1] >= n_nodes:
        raise InputError(f"start nodes must be in [0, {n_nodes})")
    return starts


def run_epochs(engine, result, schedule, options=None, stop_rule=None):
    """Train ``result.config.epochs`` epochs of ``schedule.n_batches`` batches with
    ``engine`` (from its ``resumed`` state), at the rates of ``schedule`` (a
    schedule.Schedule; an int is a number of walks per epoch, ``Schedule.for_walks``);
    fills ``result.history`` and returns ``result``.  ``options``: a ``LoopOptions``
    (None: its defaults); ``stop_rule(epoch, params) -> bool``, asked after each epoch's
    callback and before its checkpoint, ends the run early (default:
    ``budget.stop_rule(config)``, the ``stop`` option's); a rule with ``checkpoint`` and
    ``resume`` (budget.StopRule) keeps its state in the checkpoints."""
    if not isinstance(schedule, Schedule):
        schedule = Schedule.for_walks(result.config, schedule)
    loop = _EpochLoop(
        engine,
        result,
        schedule,
        LoopOptions() if options is None else options,
        budget.stop_rule(result.config) if stop_rule is None else stop_rule,
    )
    return loop.run()


@dataclass
class LoopState:
    """Where a run is (a checkpoint's ``state``): the epoch, the batch within it and the
    global step of the next batch; the epoch's running loss (summed over pairs), its
    pairs and seconds; with the skip-gram term, its two parts summed over the pairs of
    the steps that reported them."""

    epoch: int = 0
    batch: int = 0
    step: int = 0
    loss_sum: float = 0.0
    n_pairs: int = 0
    seconds: float = 0.0
    caps_sum: float = 0.0
    sg_sum: float = 0.0
    part_pairs: int = 0

    PARTS = ("caps_sum", "sg_sum", "part_pairs")

    @classmethod
    def from_dict(cls, stored):
        """The state a checkpoint stored (older ones may lack the parts: zero)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in stored.items() if k in names})

    def to_dict(self, parts):
        """The state as a checkpoint stores it: the parts only with the skip-gram term
        (``parts``), as before this class."""
        d = asdict(self)
        if not parts:
            for k in self.PARTS:
                del d[k]
        return d

    def end_epoch(self):
        self.epoch += 1
        self.batch, self.loss_sum, self.n_pairs, self.seconds = 0, 0.0, 0, 0.0


class _EpochLoop:
    """One ``run_epochs`` call: its state, the rounds of an epoch, the end of an epoch."""

    def __init__(self, engine, result, schedule, options, stop_rule):
        self.engine, self.result, self.schedule = engine, result, schedule
        self.options, self.stop_rule = options, stop_rule
        self.cfg = cfg = result.config
        # With the skip-gram term, an engine that reports a step's two parts (L_caps,
        # L_sg) gets both logged: L = L_caps + lambda L_sg.
        self.term = bool(cfg.skipgram_weight)
        self.state = LoopState()
        self.bar = None
        self.first = None  # (epoch, pairs, seconds) of the run's first round
        self.saved = engine.resumed is not None  # a good checkpoint is in the folder
        schedule.last = cfg.lr  # until a step is trained
        ckpt = engine.resumed
        if ckpt is not None:
            extra = options.checkpoint_extra
            if extra is not None:  # the caller's arrays, without the stop rule's
                extra.restore_checkpoint(
                    {k: v for k, v in ckpt["extra"].items() if k not in STOP_ARRAYS}
                )
            self.state = LoopState.from_dict(ckpt["state"])
            result.history = ckpt["history"]
            if self.state.step > 0:  # the rate of the last step the checkpoint holds
                schedule.last = ckpt.get("adam_lr", schedule.rate(self.state.step - 1))
            log.info(
                "resumed from %s at epoch %d, batch %d",
                ckpt["path"],
                self.state.epoch + 1,
                self.state.batch,
            )
        result.schedule = schedule
        stop_rule = self.stop_rule
        if stop_rule is not None and hasattr(stop_rule, "resume"):  # the o_v it compares with
            stored = ckpt["state"] if ckpt is not None else self.state.to_dict(self.term)
            stop_rule.resume(stored, engine.params(), ckpt["extra"] if ckpt is not None else {})
            if getattr(stop_rule, "stopped", False):
                option = getattr(stop_rule, "option", "--stop auto")
                log.info(
                    "the stop rule ended this run after epoch %d (%s): nothing to train%s",
                    self.state.epoch,
                    option,
                    " (--stop none trains every epoch)" if option == "--stop auto" else "",
                )

    def run(self):
        state, result = self.state, self.result
        try:
            while state.epoch < self.cfg.epochs and not self._stopped():
                epoch = state.epoch
                t_start = time.perf_counter() - state.seconds
                while state.batch < self.schedule.n_batches:
                    self._round(epoch, t_start)
                if self._end_epoch(epoch, t_start):
                    if self.bar is not None:  # it ends full at the stop
                        self.bar.set_total(state.epoch * self.schedule.n_batches)
                    break
        finally:
            if self.bar is not None:
                self.bar.close()
        return result

    def _round(self, epoch, t_start):
        """One ``engine.train`` call: its batches added to the epoch's loss, a checkpoint
        when it passes a multiple of ``checkpoint_every``, the progress, the step
        callbacks."""
        state, engine, n_batches = self.state, self.engine, self.schedule.n_batches
        b0, step0 = state.batch, state.step
        n = min(engine.round_size, n_batches - b0)
        done = engine.train(epoch, b0, step0, self.schedule.rates(step0, n))
        loss_sum, n_pairs = state.loss_sum, state.n_pairs
        for r, (loss, pairs, *parts) in enumerate(done):  # batch order
            if not math.isfinite(loss):
                raise self._diverged(f"the loss became {loss}", b0 + r)
            loss_sum += loss * pairs
            n_pairs += pairs
            if self.term and parts:
                state.caps_sum += parts[0] * pairs
                state.sg_sum += parts[1] * pairs
                state.part_pairs += pairs
        if done:
            self.schedule.trained(step0 + len(done) - 1)
        state.batch, state.step = b0 + n, step0 + n
        state.loss_sum, state.n_pairs = loss_sum, n_pairs
        state.seconds = time.perf_counter() - t_start
        every = self.options.checkpoint_every
        if every and state.batch < n_batches and state.step // every > step0 // every:
            if not engine.finite():
                raise self._diverged("a parameter became NaN or infinite", state.batch)
            self._save()
        self._show_progress(epoch, b0, n, t_start)
        step_callback = self.options.step_callback
        if step_callback is not None:  # every step of the round, in order
            for r in range(n):
                step_callback(epoch, b0 + r, step0 + r)

    def _show_progress(self, epoch, b0, n, t_start):
        """The bar starts after the run's first round, which compiles the kernels on a
        cold Numba cache (or loads them from it): that time stays out of the ETA and
        pairs/s.  Its total is the epochs the stop rule may train (``_planned_epochs``);
        when the rule ends the run earlier, ``run`` sets the total to the batches
        trained."""
        state = self.state
        if self.first is None:
            if state.seconds > 2.0:
                log.info(
                    "first step: %.1fs (kernel compilation or loading; not counted in pairs/s)",
                    state.seconds,
                )
            n_batches = self.schedule.n_batches
            self.bar = _progress(
                self.options.progress,
                self._planned_epochs() * n_batches,
                state.epoch * n_batches + state.batch,
            )
            self.first = (epoch, state.n_pairs, time.perf_counter() - t_start)
        elif self.bar is not None:
            self.bar.update(n)
            if (b0 + n - 1) // 20 > (b0 - 1) // 20:  # a batch b % 20 == 0 in the round
                self.bar.set_postfix(
                    epoch=f"{epoch + 1}/{self._planned_epochs()}",
                    lr=f"{self.schedule.last:.2g}",
                    loss=f"{state.loss_sum / state.n_pairs:.4f}",
                    **(
                        {"skip-gram": f"{state.sg_sum / state.part_pairs:.4f}"}
                        if state.part_pairs
                        else {}
                    ),
                    pairs_s=f"{_rate(state.n_pairs, state.seconds, epoch, self.first):,.0f}",
                    refresh=False,
                )  # redraws follow mininterval

    def _end_epoch(self, epoch, t_start):
        """The epoch's history entry and log line, then the epoch callback, the
        checkpoint and the stop rule, in that order; True to end the run."""
        state, result, cfg, engine = self.state, self.result, self.cfg, self.engine
        if not engine.finite():
            raise self._diverged("a parameter became NaN or infinite", state.batch)
        seconds = time.perf_counter() - t_start
        entry = dict(
            epoch=epoch + 1,
            loss=state.loss_sum / state.n_pairs,
            lr=self.schedule.last,
            seconds=seconds,
            pairs=state.n_pairs,
            pairs_per_s=_rate(state.n_pairs, seconds, epoch, self.first),
        )
        parts = ""
        if state.part_pairs:  # L = L_caps + lambda L_sg: both parts
            entry.update(
                loss_capsule=state.caps_sum / state.part_pairs,
                loss_skipgram=state.sg_sum / state.part_pairs,
            )
            state.caps_sum, state.sg_sum, state.part_pairs = 0.0, 0.0, 0
            parts = (
                f" (capsule {entry['loss_capsule']:.4f} + {cfg.skipgram_weight:g} x "
                f"skip-gram {entry['loss_skipgram']:.4f})"
            )
        result.history.append(entry)
        state.end_epoch()
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
        epoch_callback = self.options.epoch_callback
        if epoch_callback is not None:  # first: its state goes into the checkpoint
            result.params = engine.params()
            epoch_callback(epoch + 1, result)
        stop = False
        if self.stop_rule is not None and state.epoch < cfg.epochs:
            result.params = engine.params()  # the decision goes into the checkpoint too
            stop = bool(self.stop_rule(epoch + 1, result.params))
        self._save()
        return stop

    def _planned_epochs(self):
        """The epochs the progress shows: the run's, or fewer when the stop rule knows
        before training that it ends the run earlier (budget.StopRule.epochs_at_most)."""
        at_most = getattr(self.stop_rule, "epochs_at_most", None)
        return self.cfg.epochs if at_most is None else at_most(self.cfg.epochs)

    def _stopped(self):
        """True when the stop rule already ended the run (a resumed run it ended)."""
        return bool(getattr(self.stop_rule, "stopped", False))

    def _save(self):
        directory, extra = self.options.checkpoint_dir, self.options.checkpoint_extra
        if directory is None:
            return
        arrays = dict(extra.checkpoint_arrays()) if extra is not None else {}
        state = self.state.to_dict(self.term)
        if hasattr(self.stop_rule, "checkpoint"):  # resumed, it stops where this run does
            state["stop"], stop_arrays = self.stop_rule.checkpoint(self.state.batch > 0)
            arrays.update(stop_arrays)
        self.engine.save(directory, state, self.result.history, arrays or None)
        self.saved = True

    def _diverged(self, what, b):
        cfg, directory = self.cfg, self.options.checkpoint_dir
        where = ""
        if directory and self.saved:
            where = f"; the last good checkpoint is in {directory}"
        elif directory:  # the first is written at the end of epoch 1 (or step n)
            where = (
                f"; no checkpoint was written in {directory} before it (the first is "
                "written at the end of epoch 1, or after --checkpoint-every steps)"
            )
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
        return TrainingDiverged(
            f"{what} at epoch {self.state.epoch + 1}, step {b + 1}; {fix}{where}"
        )


def _rate(pairs, seconds, epoch, first):
    """Pairs/s of the epoch so far, without the run's first round (kernel compilation)
    when it belongs to this epoch and is not all of it."""
    if first is not None and first[0] == epoch and pairs > first[1]:
        pairs, seconds = pairs - first[1], seconds - first[2]
    return pairs / max(seconds, 1e-9)


def _progress(enabled, total, initial=0):
    """The run's progress on stderr (progress.bar: a bar in a terminal, lines in a log)."""
    from . import progress

    return progress.bar(total, initial, enabled)
