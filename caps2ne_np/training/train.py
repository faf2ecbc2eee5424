"""Training on one machine (Algorithm 2): ``fit_run`` and its engine.

An epoch follows the authors' code: T walks start from every node; a batch is B
walks drawn uniformly *with replacement*, each giving its (context, target) pairs;
an epoch is ceil(#walks / B) batches.  ``batch_mode = 'shuffle'`` instead visits
every walk exactly once per epoch in a seeded order.  With ``walks = 'fixed'`` (the
authors') every epoch replays the same N*T walks; with ``'fresh'`` each epoch draws
new ones.  Walks are made batch by batch and never stored (batch.BatchStream).

``fit_run`` trains a job (loop.Run; ``fit`` is its face for CSR arrays): the set-up
(loop.set_up: the options resolved, config.py), then the epoch loop (loop.run_epochs)
with ``LocalEngine``: one step per round, the parameters and Adam in this process.
Every random choice comes from a stream keyed by (seed, purpose, epoch, step), so
a run is reproducible from its seed whatever the thread count (docs/training.md).
"""

import logging
import math
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from copy import copy
from dataclasses import replace

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import InputError, InputWarning
from ..kernels import jit, thread_layer
from ..kernels.rng import derive_seed
from ..kernels.thread_layer import StepThreads
from ..model.features import SparseFeatures
from ..model.params import init_params
from . import budget, checkpoint
from .loop import Run, TrainResult, run_epochs, set_up, trained_batch
from .options.memory import check_run_memory
from .step import fused
from .step.batch import BatchStream
from .step.optim import Adam
from .step.python_step import TrainStep

log = logging.getLogger(__name__)

PARALLEL_MODES = ("sync", "async")
CHUNK_TRIAL = dict(warmup=1, rounds=3, recheck=60, watch=8, spike=3.0, backoff=8)
"""StepThreads' trial over the compiled step's rounds: the first round loads the kernels;
then three rounds of fused.PROBE batches on each count (LocalEngine keeps trial rounds
that short: beside a busy process, the default Cora step took 60 ms a batch on 2
threads against 3 ms on one, the OpenMP barriers waiting for a descheduled thread);
a new trial 60 chunks (about 15 s) later, up to 8 times that while trials keep
confirming the choice, and at once when 8 chunks run 50% slower than the trial said or
one chunk 3 times slower."""
SWITCH_INTERVAL = 1e-4
"""Python's GIL switch interval while ``AsyncEngine``'s threads run (Python's default is
5 ms): the default Cora run with ``--parallel async --threads 2`` took 24.7 s with it
against 27.0 s with the default (two runs each)."""


def fit(indptr, indices, weights, cfg, features=None, resume_from=None, parallel="sync", **options):
    """Train Caps2NE on the graph given by CSR arrays (indptr (N+1,) int64, indices (nnz,)
    int32, weights (nnz,) float32 or None): ``fit_run`` of ``loop.Run.of`` those arrays,
    ``cfg``, ``features``, ``resume_from`` and ``options`` (loop.LoopOptions' fields:
    progress, epoch_callback, checkpoint_dir, checkpoint_every, step_callback,
    checkpoint_extra); returns a loop.TrainResult."""
    return fit_run(
        Run.of(indptr, indices, weights, cfg, features, resume_from, **options), parallel
    )


def fit_run(run, parallel="sync"):
    """Train the job ``run`` (loop.Run: graph, options, features, resume, the loop's
    callbacks and checkpoints) in this process; returns a loop.TrainResult.

    Checkpoints: written to ``run.options.checkpoint_dir`` after every epoch and, with
    ``checkpoint_every = n > 0``, every n steps (checkpoint.py, check_arguments); the
    folder is locked for the run (checkpoint.locked).  ``checkpoint_extra``: state of the
    caller's that goes into every checkpoint, an object with ``checkpoint_arrays()`` (a
    dict of named arrays, as of the last finished epoch) and
    ``restore_checkpoint(arrays)`` (called on resume with the stored dict); the epoch
    callback runs before the epoch's checkpoint is written, so that state includes the
    epoch.  ``step_callback(epoch, batch, step)`` is called after every step (to
    interrupt a run).
    Memory: refused before allocating (InputError) when the run's need (the step's,
    memory.step_memory, and the spectral stages', memory.spectral_memory) exceeds what
    is available.
    parallel: 'sync' (every step on the threads that time fastest; the same bits on any
    thread count) or 'async' (``AsyncEngine``: ``cfg.threads`` threads each train their
    own batches on the shared tables without locks; faster, not reproducible).
    """
    if parallel not in PARALLEL_MODES:
        raise InputError(f"--parallel: must be one of {PARALLEL_MODES}, got {parallel!r}")
    o, graph, features = run.options, run.graph, run.features
    checkpoint.check_arguments(o.checkpoint_dir, o.checkpoint_every, run.resume_from)
    # every checkpoint records the mode; a resume in the other one is refused
    extra = checkpoint.RecordsParallel(parallel, o.checkpoint_extra, run.resume_from)
    options = replace(o, checkpoint_extra=extra)

    def check(cfg):  # refused before allocating: the whole run, spectral stages too
        sparse = features is not None and hasattr(features, "nnz")
        feat_dim = cfg.feat_dim if features is None else int(features.shape[1])
        resume = run.resume_from is not None
        check_run_memory(cfg, graph.n_nodes, graph.n_edges, feat_dim, sparse, resume)

    setup = set_up(run, check=check)
    Engine = AsyncEngine if parallel == "async" else LocalEngine
    # --stop holdout: the graph without its held-out edges (setup.graph)
    result = _train(Engine, setup, run.resume_from, options)
    if not np.any(result.params.O):  # never silent (a zero start does not train)
        warnings.warn(
            f"all {graph.n_nodes} trained embeddings o_v are zero: nothing trained (squash "
            "has no gradient at a zero start); check --spectral, --lr and --epochs",
            InputWarning,
            stacklevel=2,
        )
    return result


def _train(Engine, setup, resume_from, options):
    """The epoch loop with an ``Engine`` (LocalEngine or AsyncEngine) made from the
    set-up ``setup`` (loop.Setup) and ``options`` (loop.LoopOptions), on ``cfg.threads``
    Numba threads and one BLAS thread, with the checkpoint folder locked."""
    cfg, checkpoint_dir = setup.cfg, options.checkpoint_dir
    old_threads = numba.get_num_threads()
    numba.set_num_threads(thread_layer.threads_used(cfg.threads))
    lock = checkpoint.locked(checkpoint_dir) if checkpoint_dir is not None else nullcontext()
    try:
        # over/underflow ends as NaN or inf, which the divergence checks report in one line
        with (
            threadpool_limits(limits=1),
            np.errstate(over="ignore", invalid="ignore"),
            lock,
            ExitStack() as stack,
        ):
            engine = Engine(
                setup.graph,
                cfg,
                setup.features,
                resume_from,
                progress=options.progress,
                start=setup.start,
                schedule=setup.schedule,
                starts=setup.starts,
            )
            setup.start = None  # copied into the tables: the spectral start's (N, d) arrays go
            result = TrainResult(
                params=engine.params(),
                config=cfg,
                optimizer=engine.optimizer,
                notes=setup.notes,
                holdout=setup.held,  # --propagate auto measures on it, after every epoch too
                structure=setup.structure,
            )
            stack.callback(engine.close)
            engine.checkpoint_every = int(options.checkpoint_every)  # rounds end there
            stop_rule = budget.stop_rule(cfg, setup.structure, setup.held)
            return run_epochs(engine, result, setup.schedule, options, stop_rule=stop_rule)
    finally:
        numba.set_num_threads(old_threads)


class LocalEngine:
    """The single-machine engine of loop.run_epochs: every table and Adam's moments in
    this process.

    Where fused.supports the run (trained x or dense fixed features, no skip-gram term:
    the defaults), a round is a chunk of ``fused.CHUNK`` batches trained by one compiled
    call (fused.FusedStep), on the thread count a ``StepThreads`` trial over chunks finds
    fastest (1 or all: the same bits either way).  Otherwise a round is one batch of
    step.TrainStep, the next batch of the epoch drawn before its update (every draw is
    keyed by its step) for the fused W update with sparse features
    (step.FusedSparseW)."""

    round_size = 1

    def __init__(
        self,
        graph,
        cfg,
        features,
        resume_from,
        progress=False,
        start=None,
        *,
        schedule,
        starts=None,
    ):
        self.cfg = cfg
        self.schedule = schedule  # the run's: batches per epoch, every step's rate
        indptr, indices, weights = graph.indptr, graph.indices, graph.weights
        n_nodes = graph.n_nodes
        self.graph_hash = checkpoint.fingerprint(indptr, indices, weights, features, starts)
        ckpt = None
        if resume_from is not None:
            ckpt = checkpoint.load(resume_from)
            ckpt = checkpoint.check_compatible(ckpt, cfg.to_dict(), self.graph_hash)
        sparse = isinstance(features, SparseFeatures)
        sparse_x = features if sparse else None
        self.stream = BatchStream(
            indptr, indices, weights, cfg, index=True, sparse_features=sparse_x, starts=starts
        )
        kind = None if features is None else ("sparse" if sparse else "dense")
        if progress and _kernels_cold(fused.supports(cfg, kind), cfg.skipgram_weight):
            log.info("compiling kernels (first run only; cached on disk for later runs) ...")
        if cfg.sampler == "unigram":
            t0 = time.perf_counter()
            self.stream.set_counts(self.stream.source.node_counts(cfg.walk_chunk))
            log.info(
                "counted nodes in %d walks in %.2fs",
                self.stream.source.n_walks,
                time.perf_counter() - t0,
            )
        rng = np.random.default_rng(derive_seed(cfg.seed, "init"))
        feat_dim = cfg.feat_dim if features is None else features.shape[1]
        given = {} if start is None else dict(X=start.X, O=start.O)  # --spectral init(_xo)
        params = init_params(
            n_nodes, cfg.dim, feat_dim, cfg.walk_length - 1, rng, features, **given
        )
        self.names = names = params.trainable()
        opt = Adam({name: getattr(params, name) for name in names}, lr=None)  # rates: schedule
        if ckpt is not None:
            try:
                checkpoint.check_arrays(ckpt, params, names)
            except InputError as err:  # the latest is damaged: try the previous
                ckpt = checkpoint.fall_back(ckpt, err)
                ckpt = checkpoint.check_compatible(ckpt, cfg.to_dict(), self.graph_hash)
                checkpoint.check_arrays(ckpt, params, names)
            arrays = ckpt["arrays"]
            for name in names:
                getattr(params, name)[...] = arrays[f"param_{name}"]
                opt.m[name][...] = arrays[f"m_{name}"]
                opt.v[name][...] = arrays[f"v_{name}"]
            opt.t = ckpt["adam_t"]  # (its adam_lr: loop.run_epochs gives it to the schedule)
            ckpt = dict(ckpt, arrays=None)  # copied in: freed (3 tables' worth at the end)
            del arrays
        self.resumed = ckpt
        self._params, self.optimizer = params, opt
        lazy = cfg.adam == "lazy"
        self.fused = self.step = self.threads = None
        self.checkpoint_every = 0  # fit_run sets it: rounds end at its multiples
        self.width = 1  # batches trained at once (AsyncEngine: one per thread)
        self._chunk = None  # batches per round (per thread), once timed
        self._n, self._rounds = 1, 0
        if fused.supports(cfg, kind):
            self.fused = fused.FusedStep(self.stream, params, opt, cfg.model_config(), lazy)
            n = numba.get_num_threads()
            if n > 1 and jit.PAR_MIN_WORK > 0:  # (0: the tests' every kernel parallel)
                # each round's time per batch (rounds differ in size)
                clock = lambda: time.perf_counter() / self._n  # noqa: E731
                self.threads = StepThreads(n, clock=clock, **CHUNK_TRIAL)
        else:
            self.step = TrainStep(params, opt, cfg.model_config(), lazy=lazy)
        self._ahead = None  # (epoch, b, batch b): drawn by the previous step

    def train(self, epoch, b, step, rates):
        if self.fused is not None:
            n = self._n = len(rates)
            if self.threads is not None:
                self.threads.begin()
            t0 = time.perf_counter()
            # the parallel version on one thread too (the trial's rounds): one compile
            out = self.fused.train(
                epoch, range(b, b + n), range(step, step + n), rates,
                parallel=self.threads is not None or numba.get_num_threads() > 1,
            )  # fmt: skip
            seconds = time.perf_counter() - t0
            trial = self.threads is not None and self.threads.timed
            if self.threads is not None:
                self.threads.end()
            self._next_round(step + n, seconds, trial)
            self.optimizer.t = step + len(out)  # for checkpoints
            return out
        out = []
        for r, lr in enumerate(rates):
            ahead = self._ahead
            if ahead is not None and ahead[:2] == (epoch, b + r):
                batch = ahead[2]
            else:
                batch = self.stream.batch(epoch, b + r, step + r)
            loss, grads = self.step.gradients(batch)  # forward, backward
            out.append(self._record(loss, batch, self.step))
            if not math.isfinite(loss):
                break
            nxt = b + r + 1
            n_batches = self.schedule.n_batches
            ahead = self.stream.batch(epoch, nxt, step + r + 1) if nxt < n_batches else None
            self.step.update(grads, ahead, lr)  # Adam, at the step's rate
            self._ahead = (epoch, nxt, ahead)
        return out

    def _next_round(self, next_step, seconds, trial=False):
        """The size of the next round with the compiled step: the run's first round is one
        batch (it compiles or loads the kernels: kept out of the rate and the ETA), the
        second up to ``fused.PROBE`` batches per thread, which time a batch; from then on
        a chunk of about ``fused.CHUNK_SECONDS`` (at most ``fused.CHUNK`` batches per
        thread), so that progress, checkpoints and signals are never far apart, sized
        again from every round that was not a trial (the load changes).  A round of the
        ``StepThreads`` trial is up to ``fused.PROBE`` batches: it may run on the slower
        count.  The probe and trial rounds keep within the time bound too, by the last
        round's time a batch (the first round's, which loads the kernels, is more than a
        batch's): with large batches (--batch-size 8192 on 20,000 nodes, about 1 s a
        batch) they are one batch per thread, not PROBE seconds between signals.  A
        round ends at the next multiple of ``checkpoint_every``."""
        self._rounds += 1
        per = max(seconds / max(self._n, 1) * self.width, 1e-9)  # a batch per thread
        if self._rounds > 1 and not trial:
            self._chunk = max(1, min(fused.CHUNK, int(fused.CHUNK_SECONDS / per)))
        if self._chunk is None or (self.threads is not None and self.threads.trial_next()):
            size = max(1, min(fused.PROBE, int(fused.CHUNK_SECONDS / per))) * self.width
        else:
            size = self._chunk * self.width
        every = self.checkpoint_every
        if every:
            size = min(size, every - next_step % every)
        self.round_size = max(1, size)

    def _record(self, loss, batch, train_step):
        """A trained batch as loop.run_epochs takes it (loop.trained_batch)."""
        return trained_batch(self.cfg, loss, batch, train_step.parts)

    def finite(self):
        return all(np.isfinite(getattr(self._params, n)).all() for n in self.names)

    def save(self, directory, state, history, extra):
        checkpoint.save(
            directory,
            self._params,
            self.optimizer,
            state,
            self.cfg.to_dict(),
            history,
            self.graph_hash,
            extra=extra,
            lr=self.schedule.last,  # the rate of the last step trained (loop.run_epochs)
        )

    def params(self):
        return self._params

    def close(self):
        pass


class AsyncEngine(LocalEngine):
    """``--parallel async``: ``cfg.threads`` threads train at once, each its own batches,
    on the shared tables without locks (Hogwild, Recht et al. 2011; word2vec's threads).

    A round of ``round_size`` consecutive batches is dealt out round-robin (thread w
    takes batches w, w + n, ...); each thread draws its batches from the run's stream
    (every draw is keyed by its batch and step, as in the synchronous run), computes
    the step on one Numba thread and applies its lazy Adam update to the rows it
    touched while the other threads do the same.  Adam's step t and rate are those of
    the batch's global step.  So a round holds the same batches with the same rates as
    the synchronous run; what differs is that a step may read rows another thread is
    writing, and sees the other threads' updates in an order that depends on timing:
    the result is not reproducible bit for bit, and with one thread it is the
    synchronous run's exactly (tests/test_train_async.py).

    With the compiled step (fused.FusedStep: the defaults) each thread trains its share
    of a round in one call of the serial chunk kernel with the GIL released, so the
    threads overlap everything; otherwise each thread runs step.TrainStep, whose kernels
    release the GIL but whose Python between them takes turns (docs/training.md,
    Threads)."""

    STEPS_PER_THREAD = 16
    """Batches each thread trains per round with step.TrainStep (a round is one
    ``loop.run_epochs`` unit: progress, checkpoints and step callbacks happen between
    rounds); fused.CHUNK with the compiled step."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.n_threads = max(1, int(self.cfg.threads))
        self.threads = None  # every thread on its own core, serial kernels
        mcfg, lazy = self.cfg.model_config(), self.cfg.adam == "lazy"
        self.steps = []
        if self.fused is not None:
            self.width = self.n_threads
            self.steps = [self.fused.copy_for_thread() for _ in range(self.n_threads)]
        else:
            self.round_size = self.n_threads * self.STEPS_PER_THREAD
            for _ in range(self.n_threads):
                opt = copy(self.optimizer)  # its own t; the tables and moments shared
                self.steps.append(
                    TrainStep(
                        self._params, opt, mcfg, lazy=lazy, fused=False, adaptive_threads=False
                    )
                )
        self.pool = ThreadPoolExecutor(self.n_threads) if self.n_threads > 1 else None
        self._switch = None
        if self.pool is not None and self.fused is None:
            # the GIL passes between the threads at every kernel call and return; a thread
            # waiting for it while another runs Python waits this long before asking
            self._switch = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL)

    def train(self, epoch, b, step, rates):
        self.stream.set_epoch(epoch)  # before the threads read the stream
        n = len(rates)

        def run_fused(w):
            mine = list(range(w, n, self.n_threads))
            out = self.steps[w].train(
                epoch, [b + r for r in mine], [step + r for r in mine], [rates[r] for r in mine],
                parallel=False,
            )  # fmt: skip
            return dict(zip(mine, out))

        def run(w):
            numba.set_num_threads(1)  # per thread; its kernels run serially
            out = {}
            train_step = self.steps[w]
            with np.errstate(over="ignore", invalid="ignore"):  # (per thread)
                for r in range(w, n, self.n_threads):
                    batch = self.stream.batch(epoch, b + r, step + r)
                    train_step.opt.t = step + r
                    loss, grads = train_step.gradients(batch)
                    out[r] = self._record(loss, batch, train_step)
                    if not math.isfinite(loss):
                        break
                    train_step.update(grads, lr=rates[r])
            return out

        t0 = time.perf_counter()
        if self.fused is not None:
            run = run_fused
            self._n = n
        done = {}
        if self.pool is None:
            done.update(run(0))
        else:
            for out in self.pool.map(run, range(self.n_threads)):
                done.update(out)
        merged = []  # batch order, up to the first batch a stopped thread did not train
        for r in range(n):
            if r not in done:
                break
            merged.append(done[r])
            if not math.isfinite(done[r][0]):
                break
        self.optimizer.t = step + len(merged)  # for checkpoints: as the synchronous run
        if self.fused is not None:
            self._next_round(step + n, time.perf_counter() - t0)
        return merged

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None
        if self._switch is not None:
            sys.setswitchinterval(self._switch)
            self._switch = None


def _kernels_cold(fused_run, skipgram_weight=0.0):
    """True if a kernel the run starts with is compiled neither in this process nor in
    the on-disk cache (``cached_on_disk``).  With the compiled step (``fused_run``): its
    chunk kernel, in the version the run calls (the parallel one on more than one
    thread, even for the thread trial's one-thread rounds; else the serial one).  With
    the Python step: every kernel of its modules (a heuristic: a cache entry for other
    argument types counts), the skip-gram term's only when it is on."""
    from ..kernels import blas
    from ..model import capsules, core, grads, rows, skipgram
    from ..walks import walks
    from .step import fused, optim, samplers
    from .step import python_step as step

    def cold(dispatcher):
        return not dispatcher.signatures and not cached_on_disk(dispatcher.py_func)

    if fused_run:
        chunk = fused._train_chunk
        return cold(chunk.parallel if numba.get_num_threads() > 1 else chunk.serial)
    modules = (capsules, grads, core, rows, blas, optim, step, samplers, walks)
    for module in modules + (skipgram,) * bool(skipgram_weight):
        for obj in vars(module).values():
            if isinstance(obj, numba.core.dispatcher.Dispatcher) and cold(obj):
                return True
    return False


def cached_on_disk(py_func):
    """True when Numba's on-disk cache holds an index for the Python function
    ``py_func`` (a dispatcher's ``py_func``), found where Numba's documentation puts
    cache files: the index ``<module>.<qualified name>-<first line>.py<XY>.nbi`` in the
    ``__pycache__`` folder beside the source, or, with ``NUMBA_CACHE_DIR`` set
    (numba.config.CACHE_DIR), in a folder below it named after the source's folder.
    Read from the folders alone (no Numba internals): a cache of another layout counts as
    cold, which costs only the compile note."""
    import inspect
    import os

    source = os.path.abspath(inspect.getfile(py_func))
    stem = os.path.splitext(os.path.basename(source))[0]
    qualname = py_func.__qualname__.replace("<", "").replace(">", "")
    version = f"{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
    name = f"{stem}.{qualname}-{py_func.__code__.co_firstlineno}.py{version}.nbi"
    folder = os.path.dirname(source)
    root = numba.config.CACHE_DIR
    if not root:
        return os.path.exists(os.path.join(folder, "__pycache__", name))
    prefix = os.path.basename(folder) + "_"
    try:
        subfolders = [f for f in os.listdir(root) if f.startswith(prefix)]
    except OSError:  # no cache folder yet
        return False
    return any(os.path.exists(os.path.join(root, f, name)) for f in subfolders)
