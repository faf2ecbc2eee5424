"""Sharded training on Ray: the parameter server of docs/scaling.md, layout B.

The N-row tables (O, the biases, x: trained or fixed) and their lazy-Adam moments
are split by node id over S *server* actors: node v lives on server ``v % S`` at
local row ``v // S``.  W (small) and its Adam moments live on server 0, or on every
worker (``w_placement='workers'``: a replica each, see ``fit``).  P *worker*
actors hold the CSR (shared through Ray's object store) and nothing of size N
except the sampler's table; each builds its own batches from (seed, epoch, batch)
exactly as ``train.fit`` does, pulls the rows the batch needs, runs the unchanged
``core.loss_and_row_grads`` on those rows only (node ids remapped to local rows)
and returns one push of row gradients per server.

A *round* runs batches ``b0 + r`` (r = 0 .. P - 1) of the epoch on worker r, all
against the parameters at the start of the round; each server then applies the P
pushes **in rank order**, each as one lazy-Adam step with the step count and rate
of its global batch number, as ``train.fit`` would have applied them one after the
other.  So:

* P = 1 takes the very steps of ``train.fit`` with ``adam='lazy'``: the same
  embeddings, bit for bit, for any S (tests/test_distributed.py);
* P > 1 takes the same batches, the same number of Adam steps and the same rates,
  but the gradient of push r is computed r updates late (bounded staleness P - 1);
  a run is reproducible for fixed P (any S gives the same bits).

The driver (this process) only orchestrates: it never holds a table during training,
and it streams the initial values to the servers chunk by chunk.  The outputs are
streamed too (``write_outputs``: consecutive row blocks pulled from the shards into
the block-wise writers of ``io``); only a caller that wants the arrays (the
estimator's ``O_``, an ``epoch_callback``) makes the driver gather whole tables.

Checkpoints: one file per server (``shard-<s>-of-<S>.<epoch>-<step>.npz``, written by
the server) plus the driver's state ``driver.npz``, which names them; the driver
file is replaced atomically after every shard file is complete, so the directory
always holds one whole checkpoint.  A killed actor surfaces as ``RayActorError`` in
the current round (0.02 to 0.09 s after SIGKILL, measured on one machine); the driver
then restarts every actor from the last checkpoint (``max_restarts`` times) or stops
with ``WorkerLost``, naming the checkpoint to ``--resume`` from.

Ray is imported only here, and only when this engine runs.
"""

import logging
import math
import os
import resource
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from . import walks as walks_mod
from .core import Params, RowGrad, loss_and_row_grads, slot_major
from .errors import InputError
from .optim import Adam
from .samplers import make_sampler

log = logging.getLogger(__name__)

DRIVER_FILE = "driver.npz"
W_PLACEMENTS = ("server", "workers")
FORMAT = "caps2ne_np.distributed_checkpoint"
INIT_CHUNK_ROWS = 1 << 16
"""Rows per chunk when the driver streams initial values to the servers."""
OUTPUT_BLOCK_ROWS = 1 << 14
"""Rows per block when the driver streams a table from the servers into a writer."""


class WorkerLost(ConnectionError):
    """An actor died and the run could not continue on its own (a ConnectionError, so
    the command line reports it in one line, exit code 1)."""


# ----------------------------------------------------------------------------- sharding


def shard_rows(n_nodes, n_shards, shard):
    """Number of nodes v < n_nodes with v % n_shards == shard."""
    return max(0, (n_nodes - shard + n_shards - 1) // n_shards)


def split_by_shard(nodes, n_shards):
    """For ascending global ids ``nodes``: per shard, (positions in ``nodes``, local rows).
    Local rows ascend too (v // S is monotone within a residue class)."""
    owner = nodes % n_shards
    out = []
    for s in range(n_shards):
        pos = np.flatnonzero(owner == s)
        out.append((pos, nodes[pos] // n_shards))
    return out


def interleave(parts, first, last, n_shards):
    """Rows [first, last) of a table in node order, from each shard's rows of that range
    (``parts[s]``: nodes v in [first, last) with v % S == s, ascending, as
    ``ShardServer.rows`` returns them): node v is row v - first."""
    out = np.empty((last - first,) + parts[0].shape[1:], dtype=np.float32)
    for s, part in enumerate(parts):
        out[(s - first) % n_shards :: n_shards] = part
    return out


# ----------------------------------------------------------------------------- server


class ShardServer:
    """One shard of the tables and their lazy-Adam state (plain Python; the Ray actor
    wraps it).  ``owns_W``: this shard also holds W and its moments."""

    def __init__(
        self, shard, n_shards, n_nodes, dim, feat_dim, n_slots, fixed_features, owns_W, threads=1
    ):
        _set_threads(threads)
        self.shard, self.n_shards = shard, n_shards
        self.n_rows = shard_rows(n_nodes, n_shards, shard)
        self.fixed_features = fixed_features
        self.owns_W = owns_W
        self.arrays = {
            "O": np.zeros((self.n_rows, dim), dtype=np.float32),
            "bias": np.zeros(self.n_rows, dtype=np.float32),
            "X": np.zeros((self.n_rows, feat_dim), dtype=np.float32),
        }
        if owns_W:
            self.arrays["W"] = slot_major(np.zeros((n_slots, dim, feat_dim), dtype=np.float32))
        self.trainable = [
            n
            for n in ("W", "O", "bias", "X")
            if n in self.arrays and not (n == "X" and fixed_features)
        ]
        self.opt = Adam({n: self.arrays[n] for n in self.trainable}, lr=1.0)
        self.pulled = self.pushed = 0  # bytes served / received
        self.seconds = dict(apply=0.0, pushes=0)

    def pid(self):
        return os.getpid()

    def set_rows(self, name, first_global, values):
        """Store the rows of global nodes [first_global, first_global + len(values))
        that this shard owns (the driver streams initial values in chunks)."""
        if name == "W":
            self.arrays["W"][...] = values
            return
        nodes = np.arange(first_global, first_global + values.shape[0])
        mine = nodes % self.n_shards == self.shard
        self.arrays[name][nodes[mine] // self.n_shards] = values[mine]

    def pull(self, o_rows, x_rows, with_W):
        """O and bias rows ``o_rows``, X rows ``x_rows`` (local rows), and W (as its
        contiguous (I, d, k) buffer) if asked."""
        a = self.arrays
        out = [
            a["O"][o_rows],
            a["bias"][o_rows],
            a["X"][x_rows],
            a["W"].transpose(0, 2, 1) if with_W else None,
        ]
        self.pulled += sum(x.nbytes for x in out if x is not None)
        return out

    def apply(self, steps, rates, *pushes):
        """Apply the pushes of a round in rank order: push r is one lazy-Adam step with
        step count ``steps[r]`` (1-based t) and rate ``rates[r]``."""
        t0 = time.perf_counter()
        for t, lr, push in zip(steps, rates, pushes):
            self.pushed += sum(v.nbytes for v in push.values() if isinstance(v, np.ndarray))
            self.opt.t, self.opt.lr = t - 1, lr  # step() increments t
            rows = {
                "O": RowGrad(push["o_rows"], push["d_O"]),
                "bias": RowGrad(push["o_rows"], push["d_bias"]),
            }
            if not self.fixed_features:
                rows["X"] = RowGrad(push["x_rows"], push["d_X"])
            if self.owns_W:  # every row of W
                d_W_t = push["d_W_t"]
                rows["W"] = RowGrad.every_row(d_W_t.reshape(-1, d_W_t.shape[2]))
            self.opt.step(rows, lazy=True)
        self.seconds["apply"] += time.perf_counter() - t0
        self.seconds["pushes"] += len(pushes)
        return True

    def finite(self):
        return all(bool(np.isfinite(self.arrays[n]).all()) for n in self.trainable)

    def table(self, name):
        return self.arrays[name]

    def rows(self, name, first, last):
        """This shard's rows of global nodes [first, last) (a view: local rows
        ceil((first - s) / S) .. ceil((last - s) / S))."""
        S, s = self.n_shards, self.shard
        return self.arrays[name][shard_rows(first, S, s) : shard_rows(last, S, s)]

    def stats(self):
        def size(n):
            return self.arrays[n].nbytes + (
                self.opt.m[n].nbytes + self.opt.v[n].nbytes if n in self.trainable else 0
            )

        return dict(
            rows=self.n_rows,
            row_bytes=sum(size(n) for n in ("O", "bias", "X")),
            held_bytes=sum(size(n) for n in self.arrays),
            pulled=self.pulled,
            pushed=self.pushed,
            peak_rss=_peak_rss(),
            **self.seconds,
        )

    def save(self, path):
        from .io import save_npz

        arrays = {f"param_{n}": self.arrays[n] for n in self.arrays}
        for n in self.trainable:
            arrays[f"m_{n}"], arrays[f"v_{n}"] = self.opt.m[n], self.opt.v[n]
        if self.owns_W:  # W is saved in its (I, d, k) memory order
            for key in ("param_W", "m_W", "v_W"):
                arrays[key] = arrays[key].transpose(0, 2, 1)
        save_npz(
            path,
            overwrite=True,
            shard=np.int64(self.shard),
            n_shards=np.int64(self.n_shards),
            **arrays,
        )
        return str(path)

    def load(self, path):
        from .io import load_npz

        z = load_npz(path)
        if int(z["shard"]) != self.shard or int(z["n_shards"]) != self.n_shards:
            raise InputError(
                f"{path}: shard {int(z['shard'])} of {int(z['n_shards'])}, "
                f"expected {self.shard} of {self.n_shards}"
            )
        for n in self.arrays:
            self._copy(self.arrays[n], z[f"param_{n}"], n)
        for n in self.trainable:
            self._copy(self.opt.m[n], z[f"m_{n}"], n)
            self._copy(self.opt.v[n], z[f"v_{n}"], n)
        return True

    @staticmethod
    def _copy(dst, src, name):
        if name == "W":
            dst.transpose(0, 2, 1)[...] = src
        else:
            dst[...] = src


# ----------------------------------------------------------------------------- worker


class BatchWorker:
    """Rank ``rank``'s batches and steps (plain Python; the Ray actor wraps it).

    ``make_batch`` repeats ``train._fit``'s ``make_batch`` (same streams and keys), so
    a batch b of an epoch is the one ``train.fit`` trains at that point; the P = 1
    equality test would catch any drift."""

    def __init__(
        self,
        rank,
        indptr,
        indices,
        weights,
        cfg,
        counts,
        n_shards,
        pull,
        fixed_features=False,
        threads=1,
        replicate_W=None,
    ):
        from .train import derive_seed, walk_seed

        _set_threads(threads)
        self.rank, self.cfg, self.n_shards, self._pull = rank, cfg, n_shards, pull
        self.fixed_features = fixed_features
        # replicate_W = (n_workers, feat_dim): this worker keeps a replica of W and its
        # moments, updated with every worker's gradient in rank order (apply_W)
        self.W = self.W_opt = None
        if replicate_W is not None:
            self.n_workers, feat_dim = replicate_W
            self.W = slot_major(
                np.zeros((cfg.walk_length - 1, cfg.dim, feat_dim), dtype=np.float32)
            )
            self.W_opt = Adam({"W": self.W}, lr=1.0)
        n_nodes = int(indptr.shape[0] - 1)
        self.source = walks_mod.WalkSource(
            indptr,
            indices,
            weights,
            cfg.walks_per_node,
            cfg.walk_length,
            walk_seed(cfg.seed, 0),
            cfg.node2vec_p,
            cfg.node2vec_q,
        )
        self.positions = walks_mod.target_positions(cfg.targets, cfg.walk_length)
        self.sampler = (
            make_sampler(cfg.sampler, n_nodes, counts=counts)
            if cfg.sampler != "unigram" or counts is not None
            else None
        )
        self.num_sampled = cfg.num_sampled if cfg.num_sampled is not None else min(256, n_nodes - 1)
        self.seed_batch = derive_seed(cfg.seed, "batch")
        self.seed_pos = derive_seed(cfg.seed, "positions")
        self.seed_sample = derive_seed(cfg.seed, "sampler")
        self._walk_seed = walk_seed
        self._epoch, self._order, self._walks = None, None, None
        self.mcfg = cfg.model_config()
        self.pulled = self.pushed = self.requested = 0  # bytes: rows in, gradients out, ids out
        self.max_rows = 0  # most rows of one table held for a batch
        self.rows = dict(o=0, x=0)  # rows pulled: O and bias, x
        self.seconds = dict(batch=0.0, pull=0.0, compute=0.0, W_apply=0.0, steps=0)

    def pid(self):
        return os.getpid()

    def set_W(self, values):
        self.W[...] = values
        return True

    def apply_W(self, steps, rates, *d_W_ts):
        """Replicated W: the Adam steps of a round's W gradients (every worker's, as
        contiguous (I, d, k) buffers), in rank order, as server 0 would apply them."""
        t0 = time.perf_counter()
        for t, lr, d_W_t in zip(steps, rates, d_W_ts):
            self.W_opt.t, self.W_opt.lr = t - 1, lr
            self.W_opt.step({"W": RowGrad.every_row(d_W_t.reshape(-1, d_W_t.shape[2]))})
        if d_W_ts:  # all but its own came from other workers
            self.pulled += (len(d_W_ts) - 1) * d_W_ts[0].nbytes
        self.seconds["W_apply"] += time.perf_counter() - t0
        return True

    def W_state(self):
        """W and its moments as contiguous (I, d, k) buffers."""
        return [
            np.ascontiguousarray(a.transpose(0, 2, 1))
            for a in (self.W, self.W_opt.m["W"], self.W_opt.v["W"])
        ]

    def finite_W(self):
        return bool(np.isfinite(self.W).all())

    def save_W(self, path):
        from .io import save_npz

        W, m, v = self.W_state()
        save_npz(path, overwrite=True, param_W=W, m_W=m, v_W=v)
        return str(path)

    def load_W(self, path):
        from .io import load_npz

        z = load_npz(path)
        for dst, key in (
            (self.W, "param_W"),
            (self.W_opt.m["W"], "m_W"),
            (self.W_opt.v["W"], "v_W"),
        ):
            dst.transpose(0, 2, 1)[...] = z[key]
        return True

    def node_counts(self, lo, hi, chunk):
        """Node counts over walks [lo, hi) of epoch 0 (the unigram sampler's share)."""
        counts = np.zeros(self.source.n_nodes, dtype=np.int64)
        for a in range(lo, hi, chunk):
            ids = np.arange(a, min(a + chunk, hi), dtype=np.int64)
            counts += np.bincount(self.source.walks(ids).ravel(), minlength=self.source.n_nodes)
        return counts

    def set_counts(self, counts):
        self.sampler = make_sampler("unigram", self.source.n_nodes, counts=counts)
        return True

    def _epoch_state(self, epoch):
        if self._epoch != epoch:
            cfg = self.cfg
            self._order = (
                walks_mod.epoch_permutation(self.source.n_walks, self.seed_batch, epoch)
                if cfg.batch_mode == "shuffle"
                else None
            )
            self._walks = (
                self.source
                if cfg.walks == "fixed"
                else self.source.reseeded(self._walk_seed(cfg.seed, epoch))
            )
            self._epoch = epoch

    def make_batch(self, epoch, b, step):
        """Batch b of the epoch (a batch.Batch)."""
        from .train import training_batch

        self._epoch_state(epoch)
        return training_batch(
            self._walks,
            self._order,
            epoch,
            b,
            step,
            self.cfg.batch_size,
            self.positions,
            self.sampler,
            self.num_sampled,
            self.seed_batch,
            self.seed_pos,
            self.seed_sample,
        )

    def step(self, epoch, b, step, w_steps=(), w_rates=(), *d_W_ts):
        """Batch b: pull its rows, run the core step on them, and return one push per
        server, W's gradient (None when server 0 holds W: its push carries it) and
        (loss, #pairs).  With a replicated W, the previous round's W gradients
        (``w_steps``, ``w_rates``, ``d_W_ts``) are applied first."""
        if d_W_ts:
            self.apply_W(w_steps, w_rates, *d_W_ts)
        t0 = time.perf_counter()
        batch = self.make_batch(epoch, b, step)
        ctx, tgt, sampled = batch.ctx, batch.targets, batch.sampled
        q_true, q_sampled = batch.q_true, batch.q_sampled
        S = self.n_shards
        # local rows: ascending global ids, so sums run in the same order as on N rows
        x_nodes, ctx_local = np.unique(ctx, return_inverse=True)
        ctx_local = ctx_local.reshape(ctx.shape)
        o_nodes, o_inv = np.unique(
            np.concatenate([tgt.astype(np.int64), sampled]), return_inverse=True
        )
        tgt_local, sampled_local = o_inv[: tgt.shape[0]], o_inv[tgt.shape[0] :]
        o_split, x_split = split_by_shard(o_nodes, S), split_by_shard(x_nodes, S)
        t1 = time.perf_counter()
        own_W = self.W is not None
        replies = self._pull(
            [(o_split[s][1], x_split[s][1], s == 0 and not own_W) for s in range(S)]
        )
        t2 = time.perf_counter()
        self.requested += sum(
            o.nbytes + x.nbytes for o, x in ((o_split[s][1], x_split[s][1]) for s in range(S))
        )
        k = replies[0][0].shape[1]
        d = replies[0][2].shape[1]
        O = np.empty((o_nodes.shape[0], k), dtype=np.float32)
        bias = np.empty(o_nodes.shape[0], dtype=np.float32)
        X = np.empty((x_nodes.shape[0], d), dtype=np.float32)
        for s, (o_s, b_s, x_s, _) in enumerate(replies):
            O[o_split[s][0]], bias[o_split[s][0]], X[x_split[s][0]] = o_s, b_s, x_s
            self.pulled += o_s.nbytes + b_s.nbytes + x_s.nbytes
        if own_W:
            W = self.W
        else:
            W = replies[0][3].transpose(0, 2, 1)  # slot-major view, as train.fit's W
            self.pulled += W.nbytes
        self.max_rows = max(self.max_rows, o_nodes.shape[0], x_nodes.shape[0])
        params = Params(W, O, bias, X, fixed_features=self.fixed_features)
        loss, rg = loss_and_row_grads(
            params, ctx_local, tgt_local, sampled_local, q_true, q_sampled, self.mcfg
        )
        d_W_t = rg["W"].values.reshape(W.shape[0], W.shape[2], W.shape[1])  # every row
        g_o = o_nodes[rg["O"].rows]
        pushes = []
        for s, (pos, local) in enumerate(split_by_shard(g_o, S)):
            push = {"o_rows": local, "d_O": rg["O"].values[pos], "d_bias": rg["bias"].values[pos]}
            if "X" in rg:
                g_x = x_nodes[rg["X"].rows]
                xpos, xlocal = split_by_shard(g_x, S)[s]
                push.update(x_rows=xlocal, d_X=rg["X"].values[xpos])
            if s == 0 and not own_W:
                push["d_W_t"] = d_W_t
            self.pushed += sum(v.nbytes for v in push.values())
            pushes.append(push)
        if not own_W:
            d_W_t = None  # in the push to server 0
        elif self.n_workers > 1:  # to the other workers
            self.pushed += d_W_t.nbytes
        t3 = time.perf_counter()
        self.seconds["batch"] += t1 - t0
        self.seconds["pull"] += t2 - t1
        self.seconds["compute"] += t3 - t2
        self.seconds["steps"] += 1
        self.rows["o"] += o_nodes.shape[0]
        self.rows["x"] += x_nodes.shape[0]
        return (*pushes, d_W_t, (loss, int(tgt.shape[0])))

    def stats(self):
        return dict(
            pulled=self.pulled,
            pushed=self.pushed,
            requested=self.requested,
            max_rows=self.max_rows,
            o_rows=self.rows["o"],
            x_rows=self.rows["x"],
            peak_rss=_peak_rss(),
            **self.seconds,
        )


def _set_threads(threads):
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    threadpool_limits(limits=1)  # products run on Numba's threads (blas.py)


def _peak_rss():
    """This process's peak resident set size, bytes (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


# ----------------------------------------------------------------------------- Ray glue


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'caps2ne_np[ray]'") from None
    return ray


def _package_root():
    return str(Path(__file__).resolve().parent.parent)


def start_ray(address=None, num_cpus=None):
    """Connect to ``address`` or start a local Ray instance sized to this machine;
    returns True when this call started it (the caller then shuts it down).  Actor
    processes get this package's parent folder on PYTHONPATH, so a source checkout
    runs the same code in every process."""
    ray = _ray()
    if ray.is_initialized():
        return False
    path = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)
    runtime_env = {"env_vars": {"PYTHONPATH": path}}
    if address:
        ray.init(address=address, runtime_env=runtime_env, logging_level=logging.WARNING)
    else:
        ray.init(
            num_cpus=num_cpus or os.cpu_count() or 1,
            include_dashboard=False,
            runtime_env=runtime_env,
            logging_level=logging.WARNING,
        )
    return True


class _Cluster:
    """The actors of one run: S servers, P workers."""

    def __init__(
        self,
        ray,
        indptr,
        indices,
        weights,
        cfg,
        n_nodes,
        feat_dim,
        fixed,
        P,
        S,
        threads,
        replicate_W,
    ):
        self.ray, self.replicate_W = ray, replicate_W
        cpus = float(ray.available_resources().get("CPU", 1.0))
        worker_cpus = min(1.0, max(cpus, 0.01) / (P + S))
        Server = ray.remote(ShardServer).options(
            num_cpus=0, max_restarts=0, scheduling_strategy="SPREAD"
        )
        self.servers = [
            Server.remote(
                s,
                S,
                n_nodes,
                cfg.dim,
                feat_dim,
                cfg.walk_length - 1,
                fixed,
                s == 0 and not replicate_W,
                threads,
            )
            for s in range(S)
        ]
        csr = [ray.put(a) for a in (indptr, indices)] + [
            None if weights is None else ray.put(weights)
        ]
        Worker = ray.remote(_RayWorker).options(
            num_cpus=worker_cpus, max_restarts=0, scheduling_strategy="SPREAD"
        )
        self.workers = [
            Worker.remote(
                r,
                *csr,
                cfg,
                None,
                S,
                self.servers,
                fixed,
                threads,
                (P, feat_dim) if replicate_W else None,
            )
            for r in range(P)
        ]

    def actors(self):
        return self.servers + self.workers

    def kill(self):
        for a in self.actors():
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 -- already dead is fine
                pass


class _RayWorker(BatchWorker):
    """BatchWorker whose pulls go to the server actors."""

    def __init__(
        self,
        rank,
        indptr,
        indices,
        weights,
        cfg,
        counts,
        n_shards,
        servers,
        fixed,
        threads,
        replicate_W,
    ):
        import ray

        def pull(requests):
            return ray.get([srv.pull.remote(o, x, w) for srv, (o, x, w) in zip(servers, requests)])

        super().__init__(
            rank, indptr, indices, weights, cfg, counts, n_shards, pull, fixed, threads, replicate_W
        )


# ----------------------------------------------------------------------------- driver


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
    workers=1,
    servers=1,
    address=None,
    max_restarts=2,
    max_rows_per_shard=None,
    stats=None,
    w_placement="server",
    write_outputs=None,
):
    """``train.fit`` on a Ray cluster (P = ``workers``, S = ``servers``): same
    arguments and result, plus the engine's own.

    address: a Ray cluster ('auto', 'ray://host:10001', ...) or None for a local
    instance sized to this machine.  max_restarts: automatic restarts from the last
    checkpoint after an actor dies (needs ``checkpoint_dir``).  max_rows_per_shard:
    refuse a layout whose servers would each hold more rows (a guard for memory
    planning and the tests).  stats: a dict, filled with per-actor traffic and memory.
    w_placement: 'server' (W and its moments on server 0: every worker pulls W and
    pushes its gradient each round) or 'workers' (a replica on every worker, each
    applying all P gradients of a round in rank order: no W traffic at P = 1,
    (P - 1) gradients in per worker and round).  Same numbers either way.
    write_outputs: called as ``write_outputs(result)`` after training, while the actors
    still live, with ``result.params`` holding W and, instead of the N-row tables,
    ``io.RowBlocks`` that pull consecutive row blocks from the shards (see
    ``streamed_params``): the writers of ``io`` stream them, and the driver never holds
    a whole table.  The returned result then has ``params=None``.
    """
    from .core import prepare_features
    from .train import resolve, validate

    P, S = int(workers), int(servers)
    if P < 1:
        raise InputError(f"--workers: must be >= 1, got {workers}")
    if w_placement not in W_PLACEMENTS:
        raise InputError(f"w_placement: must be one of {W_PLACEMENTS}, got {w_placement!r}")
    if S < 1:
        raise InputError(f"--servers: must be >= 1, got {servers}")
    n_nodes = int(indptr.shape[0] - 1)
    if S > n_nodes:
        raise InputError(f"--servers: at most the number of nodes ({n_nodes}), got {S}")
    cfg, notes = resolve(
        cfg, n_nodes, int(np.asarray(indices).shape[0]), fixed_features=features is not None
    )
    validate(cfg, n_nodes)
    if cfg.adam != "lazy":
        raise InputError(
            "--engine ray: needs --adam lazy (a server updates only the rows "
            f"it is sent), got --adam {cfg.adam}"
        )
    if max_rows_per_shard is not None and shard_rows(n_nodes, S, 0) > max_rows_per_shard:
        raise InputError(
            f"--servers: {S} servers hold up to {shard_rows(n_nodes, S, 0)} rows "
            f"each, above the limit of {max_rows_per_shard}; use at least "
            f"{math.ceil(n_nodes / max_rows_per_shard)}"
        )
    if checkpoint_every < 0:
        raise InputError(f"--checkpoint-every: must be >= 0, got {checkpoint_every}")
    if features is not None:
        features = prepare_features(features, n_nodes, cfg.normalize_features)
        if not isinstance(features, np.ndarray):
            raise InputError(
                "--engine ray: sparse fixed features are not supported yet; "
                "pass them dense (.npy) or use the single-machine engine"
            )
    for note in notes:
        log.info("%s", note)
    started = start_ray(address)
    ray = _ray()
    try:
        attempt = 0
        while True:
            try:
                return _fit(
                    ray,
                    indptr,
                    indices,
                    weights,
                    cfg,
                    features,
                    progress,
                    epoch_callback,
                    checkpoint_dir,
                    checkpoint_every,
                    resume_from,
                    step_callback,
                    P,
                    S,
                    notes,
                    stats,
                    w_placement == "workers",
                    write_outputs,
                )
            except _actor_lost_errors(ray) as err:
                have = checkpoint_dir is not None and (Path(checkpoint_dir) / DRIVER_FILE).is_file()
                what = _one_line(err)
                if stats is not None:
                    stats.setdefault("failures", []).append(dict(time=time.time(), what=what))
                if have and attempt < max_restarts:
                    attempt += 1
                    log.warning(
                        "an actor died (%s); restarting every actor from the checkpoint "
                        "in %s (restart %d of %d)",
                        what,
                        checkpoint_dir,
                        attempt,
                        max_restarts,
                    )
                    resume_from = checkpoint_dir
                    continue
                if have:
                    raise WorkerLost(
                        f"an actor died ({what}); the last checkpoint is in "
                        f"{checkpoint_dir}: continue with --resume "
                        f"{checkpoint_dir}"
                    ) from None
                raise WorkerLost(
                    f"an actor died ({what}); nothing was checkpointed (give "
                    "--checkpoint-dir to be able to resume)"
                ) from None
    finally:
        if started:
            ray.shutdown()


def _actor_lost_errors(ray):
    """The errors by which Ray reports an actor gone: killed, crashed, or stopped by
    Ray's memory monitor."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.OutOfMemoryError)


def cli_fit(indptr, indices, weights, cfg, overwrite=False, ray_address=None, **kwargs):
    """``fit`` as ``caps2ne train --engine ray`` calls it: refuses to start a new run
    over a sharded checkpoint unless ``overwrite``.  ``checkpoint_extra`` (train.fit's:
    the --eval-every-epoch tracker's state) is not stored in sharded checkpoints, so a
    resumed run would select its epoch among the epochs it trains itself: the command
    line refuses --eval-every-epoch with --checkpoint-dir/--resume on Ray before this is
    called; a library caller who passes both gets a warning."""
    directory = kwargs.get("checkpoint_dir")
    if kwargs.pop("checkpoint_extra", None) is not None and directory:
        log.warning(
            "--engine ray: the --eval-every-epoch scores are not checkpointed; a "
            "resumed run chooses among the epochs it trains after resuming"
        )
    if (
        directory
        and not kwargs.get("resume_from")
        and not overwrite
        and (Path(directory) / DRIVER_FILE).exists()
    ):
        raise InputError(
            f"{Path(directory) / DRIVER_FILE}: exists; pass --resume {directory} "
            "to continue that run, or --overwrite to start a new one there"
        )
    return fit(indptr, indices, weights, cfg, address=ray_address, **kwargs)


def _one_line(err):
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()  # Ray colours
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def _fit(
    ray,
    indptr,
    indices,
    weights,
    cfg,
    features,
    progress,
    epoch_callback,
    checkpoint_dir,
    checkpoint_every,
    resume_from,
    step_callback,
    P,
    S,
    notes,
    stats,
    replicate_W,
    write_outputs=None,
):
    from . import checkpoint
    from .train import TrainingDiverged, TrainResult, _progress, learning_rate

    n_nodes = int(indptr.shape[0] - 1)
    fixed = features is not None
    feat_dim = features.shape[1] if fixed else cfg.feat_dim
    graph_hash = checkpoint.fingerprint(indptr, indices, weights, features)
    ckpt = None
    if resume_from is not None:
        ckpt = load_driver(resume_from)
        checkpoint.check_compatible(ckpt, cfg.to_dict(), graph_hash)
        if ckpt["n_shards"] != S:
            raise InputError(
                f"{ckpt['path']}: written with --servers {ckpt['n_shards']}; "
                f"resume with the same number of servers (now {S})"
            )
    cluster = _Cluster(
        ray, indptr, indices, weights, cfg, n_nodes, feat_dim, fixed, P, S, cfg.threads, replicate_W
    )
    if stats is not None:  # the actors of this attempt (tests kill one)
        stats["actors"] = dict(servers=cluster.servers, workers=cluster.workers)
    try:
        servers, workers = cluster.servers, cluster.workers
        if cfg.sampler == "unigram":
            n_walks = n_nodes * cfg.walks_per_node
            cuts = [n_walks * r // P for r in range(P + 1)]
            parts = ray.get(
                [
                    w.node_counts.remote(cuts[r], cuts[r + 1], cfg.walk_chunk)
                    for r, w in enumerate(workers)
                ]
            )
            counts_ref = ray.put(np.sum(parts, axis=0))  # int64: any order, same sum
            ray.get([w.set_counts.remote(counts_ref) for w in workers])
        state = dict(epoch=0, batch=0, step=0, loss_sum=0.0, n_pairs=0, seconds=0.0)
        history = []
        if ckpt is None:
            _initialise(ray, cluster, cfg, n_nodes, feat_dim, features)
        else:
            directory = Path(ckpt["dir"])
            pending = [
                srv.load.remote(str(directory / name)) for srv, name in zip(servers, ckpt["shards"])
            ]
            if replicate_W:
                if not ckpt["w_file"]:
                    raise InputError(
                        f"{ckpt['path']}: W was held by server 0 in that run; "
                        "resume with the same W placement"
                    )
                pending += [w.load_W.remote(str(directory / ckpt["w_file"])) for w in workers]
            elif ckpt["w_file"]:
                raise InputError(
                    f"{ckpt['path']}: W was replicated on the workers in that "
                    "run; resume with the same W placement"
                )
            ray.get(pending)
            state.update(ckpt["state"])
            history = ckpt["history"]
            log.info(
                "resumed from %s at epoch %d, batch %d",
                ckpt["path"],
                state["epoch"] + 1,
                state["batch"],
            )
        lr = cfg.lr
        n_batches = walks_mod.batches_per_epoch(n_nodes * cfg.walks_per_node, cfg.batch_size)
        total_steps = cfg.epochs * n_batches
        result = TrainResult(
            params=None,
            config=cfg,
            history=history,
            optimizer=SimpleNamespace(lr=lr, t=state["step"]),
            notes=notes,
        )
        no_W = [((), ()), ()]
        w_pending = list(no_W)  # replicated W: last round's (steps, rates), refs

        def flush_W():
            """Replicated W: apply the last round's W gradients on every worker now."""
            if replicate_W and w_pending[1]:
                (steps, rates), refs = w_pending
                ray.get([w.apply_W.remote(steps, rates, *refs) for w in workers])
                w_pending[:] = no_W

        def finite():
            checks = [srv.finite.remote() for srv in servers]
            if replicate_W:
                checks.append(workers[0].finite_W.remote())
            return all(ray.get(checks))

        def save():
            if checkpoint_dir is not None:
                save_checkpoint(
                    ray, checkpoint_dir, cluster, state, cfg, history, graph_hash, S, replicate_W
                )

        def diverged(what):
            where = f"; the last good checkpoint is in {checkpoint_dir}" if checkpoint_dir else ""
            return TrainingDiverged(
                f"{what} at epoch {state['epoch'] + 1}, step "
                f"{state['batch'] + 1}; lower --lr (now {lr:g}){where}"
            )

        bar = _progress(progress, total_steps, state["step"])
        try:
            while state["epoch"] < cfg.epochs:
                epoch = state["epoch"]
                t_start = time.perf_counter() - state["seconds"]
                while state["batch"] < n_batches:
                    b0, step0 = state["batch"], state["step"]
                    bs = list(range(b0, min(b0 + P, n_batches)))
                    (w_steps, w_rates), w_refs = w_pending
                    refs = [
                        workers[r]
                        .step.options(num_returns=S + 2)
                        .remote(epoch, b, step0 + r, w_steps, w_rates, *w_refs)
                        for r, b in enumerate(bs)
                    ]
                    steps = [step0 + r + 1 for r in range(len(bs))]
                    rates = [learning_rate(cfg, lr, step0 + r, total_steps) for r in range(len(bs))]
                    applied = [
                        srv.apply.remote(steps, rates, *[refs[r][s] for r in range(len(bs))])
                        for s, srv in enumerate(servers)
                    ]
                    w_pending[:] = (
                        [(steps, rates), [refs[r][S] for r in range(len(bs))]]
                        if replicate_W
                        else no_W
                    )
                    done = ray.get([refs[r][S + 1] for r in range(len(bs))])
                    ray.get(applied)
                    loss_sum, n_pairs = state["loss_sum"], state["n_pairs"]
                    for loss, pairs in done:  # rank order
                        if not math.isfinite(loss):
                            raise diverged(f"the loss became {loss}")
                        loss_sum += loss * pairs
                        n_pairs += pairs
                    result.optimizer.lr, result.optimizer.t = rates[-1], steps[-1]
                    state.update(
                        batch=b0 + len(bs),
                        step=step0 + len(bs),
                        loss_sum=loss_sum,
                        n_pairs=n_pairs,
                        seconds=time.perf_counter() - t_start,
                    )
                    if (
                        checkpoint_every
                        and state["batch"] < n_batches
                        and state["step"] // checkpoint_every > step0 // checkpoint_every
                    ):
                        flush_W()
                        if not finite():
                            raise diverged("a parameter became NaN or infinite")
                        save()
                    if bar is not None:
                        bar.update(len(bs))
                    if step_callback is not None:
                        step_callback(epoch, bs[-1], state["step"] - 1)
                flush_W()
                if not finite():
                    raise diverged("a parameter became NaN or infinite")
                seconds = time.perf_counter() - t_start
                entry = dict(
                    epoch=epoch + 1,
                    loss=state["loss_sum"] / state["n_pairs"],
                    lr=result.optimizer.lr,
                    seconds=seconds,
                    pairs=state["n_pairs"],
                    pairs_per_s=state["n_pairs"] / seconds,
                )
                history.append(entry)
                state.update(epoch=epoch + 1, batch=0, loss_sum=0.0, n_pairs=0, seconds=0.0)
                save()
                log.info(
                    "epoch %d/%d: loss %.5f, lr %.3g, %.1fs, %.0f pairs/s",
                    epoch + 1,
                    cfg.epochs,
                    entry["loss"],
                    entry["lr"],
                    seconds,
                    entry["pairs_per_s"],
                )
                if epoch_callback is not None:
                    result.params = gather(ray, cluster, n_nodes, fixed, features, replicate_W)
                    epoch_callback(epoch + 1, result)
        finally:
            if bar is not None:
                bar.close()
        if stats is not None:
            stats["servers"] = ray.get([srv.stats.remote() for srv in servers])
            stats["workers"] = ray.get([w.stats.remote() for w in workers])
            stats["driver_peak_rss"] = _peak_rss()
        if write_outputs is not None:
            result.params = streamed_params(
                ray, cluster, n_nodes, cfg.dim, feat_dim, fixed, features, replicate_W
            )
            write_outputs(result)
            result.params = None  # its blocks pull from actors about to stop
            return result
        result.params = gather(ray, cluster, n_nodes, fixed, features, replicate_W)
        return result
    finally:
        cluster.kill()


def _initialise(ray, cluster, cfg, n_nodes, feat_dim, features):
    """The initial values of ``core.init_params`` (same generator, same order of
    draws), streamed to the servers in chunks of rows: the driver never holds a
    whole table.  NumPy's generator gives the same numbers drawn in chunks."""
    from .train import derive_seed

    servers = cluster.servers
    rng = np.random.default_rng(derive_seed(cfg.seed, "init"))
    k, n_slots = cfg.dim, cfg.walk_length - 1
    W = slot_major(rng.normal(0.0, 0.01, size=(n_slots, k, feat_dim)).astype(np.float32))
    if cluster.replicate_W:
        W_ref = ray.put(W)
        pending = [w.set_W.remote(W_ref) for w in cluster.workers]
    else:
        pending = [servers[0].set_rows.remote("W", 0, W)]
    limit = np.sqrt(6.0 / (n_nodes + k))
    a = np.sqrt(1.0 / feat_dim)

    def stream(name, draw):
        for lo in range(0, n_nodes, INIT_CHUNK_ROWS):
            hi = min(lo + INIT_CHUNK_ROWS, n_nodes)
            chunk = ray.put(np.ascontiguousarray(draw(lo, hi)))
            pending.extend(srv.set_rows.remote(name, lo, chunk) for srv in servers)
            if len(pending) > 8 * len(servers):  # bound the chunks in flight
                ray.get(pending)
                pending.clear()

    stream("O", lambda lo, hi: rng.uniform(-limit, limit, size=(hi - lo, k)).astype(np.float32))
    if features is None:
        stream("X", lambda lo, hi: rng.uniform(-a, a, size=(hi - lo, feat_dim)).astype(np.float32))
    else:
        stream("X", lambda lo, hi: features[lo:hi])
    ray.get(pending)


def _gather_W(ray, cluster, replicate_W):
    if replicate_W:
        return ray.get(cluster.workers[0].W_state.remote())[0].transpose(0, 2, 1)
    return ray.get(cluster.servers[0].table.remote("W"))


def gather(ray, cluster, n_nodes, fixed, features=None, replicate_W=False):
    """The whole parameters on the driver (``core.Params``), node v = row v."""
    servers = cluster.servers
    W = _gather_W(ray, cluster, replicate_W)
    out = {}
    for name in ("O", "bias", "X"):
        if name == "X" and fixed:
            continue
        out[name] = interleave(
            ray.get([srv.table.remote(name) for srv in servers]), 0, n_nodes, len(servers)
        )
    X = features if fixed else out["X"]
    return Params(slot_major(np.array(W)), out["O"], out["bias"], X, fixed_features=fixed)


def row_blocks(ray, servers, name, shape, block_rows=None):
    """Table ``name`` (of ``shape``, (N, width) or (N,)) as ``io.RowBlocks``: rows
    [a, a + block_rows) at a time, each pulled from every shard (one request per
    server, in parallel) and interleaved into node order.  The next block's requests
    go out before a block is handed on, so the transfer overlaps the writing; the
    driver holds at most two blocks (and their shard parts) of the table.
    ``block_rows`` defaults to ``OUTPUT_BLOCK_ROWS``."""
    from .io import RowBlocks

    n_nodes = shape[0]
    block_rows = int(block_rows or OUTPUT_BLOCK_ROWS)

    def request(first):
        last = min(first + block_rows, n_nodes)
        return first, last, [srv.rows.remote(name, first, last) for srv in servers]

    def blocks():
        ahead = request(0) if n_nodes else None
        while ahead is not None:
            first, last, refs = ahead
            ahead = request(last) if last < n_nodes else None
            yield interleave(ray.get(refs), first, last, len(servers))

    return RowBlocks(shape, blocks)


def streamed_params(
    ray, cluster, n_nodes, dim, feat_dim, fixed, features=None, replicate_W=False, block_rows=None
):
    """``core.Params`` for the writers without gathering: W (small) on the driver, O, the
    biases and trained x as ``io.RowBlocks`` pulled from the servers (``row_blocks``);
    each can be iterated again (a new pass over the shards)."""
    servers = cluster.servers
    W = _gather_W(ray, cluster, replicate_W)
    O = row_blocks(ray, servers, "O", (n_nodes, dim), block_rows)
    bias = row_blocks(ray, servers, "bias", (n_nodes,), block_rows)
    X = features if fixed else row_blocks(ray, servers, "X", (n_nodes, feat_dim), block_rows)
    return Params(slot_major(np.array(W)), O, bias, X, fixed_features=fixed)


# ----------------------------------------------------------------------------- checkpoints


def save_checkpoint(ray, directory, cluster, state, cfg, history, graph_hash, S, replicate_W):
    """Every server writes its shard for this step (and worker 0 the replicated W),
    then the driver file naming them replaces the previous one (atomic); older
    files are removed after."""
    import json

    from .io import save_npz

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tag = f"{state['epoch']}-{state['step']}"
    names = [f"shard-{s}-of-{S}.{tag}.npz" for s in range(S)]
    pending = [srv.save.remote(str(directory / name)) for srv, name in zip(cluster.servers, names)]
    w_file = f"W.{tag}.npz" if replicate_W else ""
    if replicate_W:
        pending.append(cluster.workers[0].save_W.remote(str(directory / w_file)))
    ray.get(pending)
    save_npz(
        directory / DRIVER_FILE,
        overwrite=True,
        format=np.asarray(FORMAT),
        config=np.asarray(json.dumps(cfg.to_dict())),
        history=np.asarray(json.dumps(history)),
        state=np.asarray(json.dumps(state)),
        graph_hash=np.asarray(graph_hash),
        n_shards=np.int64(S),
        shards=np.asarray(json.dumps(names)),
        w_file=np.asarray(w_file),
    )
    keep = set(names) | {w_file}
    for old in list(directory.glob(f"shard-*-of-{S}.*.npz")) + list(directory.glob("W.*.npz")):
        if old.name not in keep:
            old.unlink()


def load_driver(directory):
    """The driver state of a sharded checkpoint (InputError when there is none)."""
    import json

    from .io import load_npz

    path = Path(directory) / DRIVER_FILE
    if not path.is_file():
        raise InputError(
            f"{directory}: no {DRIVER_FILE} to resume from; was the run started "
            "with --engine ray --checkpoint-dir?"
        )
    z = load_npz(path)
    if str(z.get("format", "")) != FORMAT:
        raise InputError(f"{path}: not a caps2ne_np sharded checkpoint")
    return {
        "config": json.loads(str(z["config"])),
        "history": json.loads(str(z["history"])),
        "state": json.loads(str(z["state"])),
        "graph_hash": str(z["graph_hash"]),
        "n_shards": int(z["n_shards"]),
        "shards": json.loads(str(z["shards"])),
        "w_file": str(z["w_file"]),
        "path": str(path),
        "dir": str(directory),
    }
