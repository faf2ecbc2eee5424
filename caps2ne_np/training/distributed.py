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

The driver (this process) only orchestrates: it never holds a table during training;
it makes the initial values (``core.init_params``) and sends them to the servers chunk
by chunk.  Its epoch loop is loop.run_epochs, shared with ``train.fit``; ``RayEngine``
supplies the rounds, the checks and the checkpoints.  The outputs are
streamed too (``write_outputs``: consecutive row blocks pulled from the shards into
the block-wise writers of ``io``); only a caller that wants the arrays (the
estimator's ``O_``, an ``epoch_callback``) makes the driver gather whole tables.

Checkpoints: one file per server (``shard-<s>-of-<S>.<epoch>-<step>.npz``, written by
the server) plus the driver's state ``driver.npz``, which names them; the driver
file is replaced atomically after every shard file is complete, so the directory
always holds one whole checkpoint.  A killed actor surfaces as ``RayActorError`` in
the current round; the driver then restarts every actor from the last checkpoint
(``max_restarts`` times) or stops with ``WorkerLost``, naming the checkpoint to ``--resume`` from.

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

from ..errors import InputError
from ..kernels import _threads
from ..kernels.rng import derive_seed
from ..model.core import (
    Params,
    RowGrad,
    init_params,
    loss_and_row_grads,
    prepare_features,
    slot_major,
)
from . import checkpoint
from . import walks as walks_mod
from .batch import BatchStream
from .loop import TrainResult, prepare, run_epochs
from .optim import Adam

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
        from ..io.formats import save_npz

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
        from ..io.formats import load_npz

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

    Its batches come from a batch.BatchStream, as the local engine's do, so a batch b
    of an epoch is the one ``train.fit`` trains at that point."""

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
        self.stream = BatchStream(indptr, indices, weights, cfg, counts=counts)
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
        from ..io.formats import save_npz

        W, m, v = self.W_state()
        save_npz(path, overwrite=True, param_W=W, m_W=m, v_W=v)
        return str(path)

    def load_W(self, path):
        from ..io.formats import load_npz

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
        return self.stream.node_counts(lo, hi, chunk)

    def set_counts(self, counts):
        self.stream.set_counts(counts)
        return True

    def step(self, epoch, b, step, w_steps=(), w_rates=(), *d_W_ts):
        """Batch b: pull its rows, run the core step on them, and return one push per
        server, W's gradient (None when server 0 holds W: its push carries it) and
        (loss, #pairs), with the skip-gram term also (L_caps, L_sg).  With a replicated
        W, the previous round's W gradients (``w_steps``, ``w_rates``, ``d_W_ts``) are
        applied first."""
        if d_W_ts:
            self.apply_W(w_steps, w_rates, *d_W_ts)
        t0 = time.perf_counter()
        batch = self.stream.batch(epoch, b, step)
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
        parts = {}  # L_caps and the skip-gram term, when it is on
        loss, rg = loss_and_row_grads(
            params,
            ctx_local,
            tgt_local,
            sampled_local,
            q_true,
            q_sampled,
            self.mcfg,
            key=batch.key,
            parts=parts,
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
        done = (loss, int(tgt.shape[0]))
        if self.cfg.skipgram_weight:  # both parts, for the log and --history
            done += (parts["capsule"], parts["skipgram"])
        return (*pushes, d_W_t, done)

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
    return str(Path(__file__).resolve().parents[2])


CONNECT_TIMEOUT = 20.0
"""Seconds a ``--ray-address`` has to answer the probe (``_probe``)."""
ADDRESS_FORMS = "'auto', 'host:port' (the head's GCS port, 6379 by default) or 'ray://host:10001'"


def ray_logging_level():
    """Ray's own log level in this process: warnings, or errors only when the package
    logs only errors (``-q``)."""
    return max(logging.WARNING, logging.getLogger("caps2ne_np").getEffectiveLevel())


def ray_address_target(address):
    """(host, port) that ``address`` (``--ray-address``) must answer at, or None for
    'auto' and 'local'; InputError for anything but those, 'host:port' and
    'ray://host:port', and for 'ray://' without the Ray Client extra."""
    import importlib.util

    text = str(address).strip()
    if text in ("auto", "local"):
        return None
    client = text.startswith("ray://")
    host, sep, port = text[6:].rpartition(":") if client else text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--ray-address {address}: expected {ADDRESS_FORMS}")
    if client and importlib.util.find_spec("grpc") is None:
        raise InputError(
            f"--ray-address {address}: a ray:// address needs Ray Client: "
            "pip install 'ray[client]' (or run on the head node with --ray-address auto)"
        )
    return host, int(port)


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""An HTTP/2 client's first bytes (the preface and an empty SETTINGS frame)."""


def _probe(address, host, port, timeout):
    """InputError unless a gRPC server (a Ray GCS or Ray Client server) answers at
    host:port within ``timeout`` seconds: it must accept a TCP connection and answer
    an HTTP/2 preface with a SETTINGS frame.  ``ray.init`` itself retries for minutes
    in native code against a port that accepts and stays silent."""
    import socket

    def fail(why):
        return InputError(
            f"--ray-address {address}: no Ray cluster at {host}:{port} ({why}); start "
            "one (ray start --head) or check the address"
        )

    deadline = time.monotonic() + timeout
    head = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(HTTP2_PREFACE)
            while len(head) < 9:
                sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                part = sock.recv(9 - len(head))
                if not part:
                    break
                head += part
    except TimeoutError:
        raise fail(f"no answer within {timeout:g} s") from None
    except OSError as err:
        raise fail(err.strerror or str(err)) from None
    if len(head) < 9 or head[3] != 4:
        raise fail("something answers there, but not a Ray cluster's gRPC")


def _connect(ray, address, **options):
    """``ray.init(address=...)``; any error of Ray's while connecting is one line."""
    try:
        ray.init(address=address, **options)
    except Exception as err:  # noqa: BLE001 -- Ray's many connection errors: one line
        raise InputError(f"--ray-address {address}: could not connect ({_one_line(err)})") from None


def actor_spin_env():
    """The OpenMP spin of Ray's actors: ``_threads.SHARED_SPIN_COUNT`` (several actors
    share the cores, where a long spin holds a core another actor needs), unless the
    user set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``, which the actors inherit."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return {}
    return {"GOMP_SPINCOUNT": _threads.SHARED_SPIN_COUNT}


def start_ray(address=None, num_cpus=None):
    """Connect to ``address`` or start a local Ray instance sized to this machine;
    returns True when this call started it (the caller then shuts it down).  Actor
    processes get this package's parent folder on PYTHONPATH, so a source checkout
    runs the same code in every process.  An address that is malformed, or where no
    gRPC server answers within ``CONNECT_TIMEOUT`` seconds, is an InputError.  Ray logs at
    ``ray_logging_level``; with errors only (-q) the actors' output is not forwarded."""
    ray = _ray()
    if ray.is_initialized():
        return False
    path = os.pathsep.join(p for p in (_package_root(), os.environ.get("PYTHONPATH")) if p)
    runtime_env = {"env_vars": {"PYTHONPATH": path, **actor_spin_env()}}
    level = ray_logging_level()
    options = dict(
        runtime_env=runtime_env, logging_level=level, log_to_driver=level <= logging.WARNING
    )
    if address:
        target = ray_address_target(address)
        if target is not None:
            _probe(address, *target, timeout=CONNECT_TIMEOUT)
        _connect(ray, address, **options)
    else:
        try:
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, **options)
        except Exception as err:  # noqa: BLE001 -- a raylet that did not start: one line
            raise InputError(
                f"--engine ray: could not start a local Ray instance ({_one_line(err)})"
            ) from None
    return True


class _ResultsOnlyStdout:
    """``sys.stdout`` while Ray runs in this process.  Ray's driver threads print the
    raylet's messages ('N PYTHON worker processes have been started', a killed worker)
    and the actors' output to ``sys.stdout``; here only the main thread's writes (the
    results: ``--out -``) reach standard output.  Other threads' go to stderr, or
    nowhere when ``quiet``."""

    def __init__(self, stdout, quiet):
        self._stdout, self._quiet = stdout, quiet

    def _target(self):
        import sys
        import threading

        if threading.current_thread() is threading.main_thread():
            return self._stdout
        return None if self._quiet else sys.stderr

    def write(self, text):
        target = self._target()
        return len(text) if target is None else target.write(text)

    def flush(self):
        target = self._target()
        if target is not None:
            target.flush()

    def __getattr__(self, name):
        return getattr(self._stdout, name)


def results_only_stdout(quiet):
    """A context in which standard output carries only the main thread's writes
    (``_ResultsOnlyStdout``)."""
    import contextlib
    import sys

    @contextlib.contextmanager
    def swapped():
        real = sys.stdout
        sys.stdout = _ResultsOnlyStdout(real, quiet)
        try:
            yield
        finally:
            sys.stdout = real

    return swapped()


def worker_count(workers, cfg, n_nodes, n_edges, fixed_features=False, address=None):
    """``workers`` capped by the batches of an epoch (a round trains at most that many:
    the extra workers would only start and idle; the result is the same bits), with a
    warning, and a warning when a local run has more workers than CPUs."""
    from .config import resolve

    P = int(workers)
    if P < 1:
        return P  # fit says what is wrong
    resolved, _ = resolve(cfg, n_nodes, n_edges, fixed_features=fixed_features)
    n_batches = walks_mod.batches_per_epoch(n_nodes * resolved.walks_per_node, resolved.batch_size)
    if P > n_batches:
        log.warning(
            "--workers %d: an epoch has %d batches, so a round trains at most %d; "
            "starting %d workers",
            P,
            n_batches,
            n_batches,
            n_batches,
        )
        P = n_batches
    cpus = os.cpu_count() or 1
    if not address and P > cpus:
        log.warning(
            "--workers %d: more than the %d CPUs of this machine; the workers share "
            "them (slower per worker, and each one a process of its own)",
            P,
            cpus,
        )
    return P


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
    checkpoint_extra=None,
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
    checkpoint_extra: as ``train.fit``'s (stored in the driver's file).
    """
    P, S = int(workers), int(servers)
    n_nodes = int(indptr.shape[0] - 1)
    _check_layout(P, S, n_nodes, w_placement, max_rows_per_shard)
    n_edges = int(np.asarray(indices).shape[0])
    cfg, notes = prepare(cfg, n_nodes, n_edges, features is not None, checkpoint_every)
    if cfg.adam != "lazy":
        raise InputError(
            "--engine ray: needs --adam lazy (a server updates only the rows "
            f"it is sent), got --adam {cfg.adam}"
        )
    from ..model import spectral

    start = spectral.start(indptr, indices, weights, cfg, features, resume=resume_from is not None)
    if start.note and start.features is None:  # --spectral init, init_xo
        log.info("%s", start.note)
        notes = notes + [start.note]
    if start.features is not None:  # unit rows, used as they are
        features, notes = start.features, notes + [start.note]
    elif features is not None:
        features = prepare_features(features, n_nodes, cfg.normalize_features)
        if not isinstance(features, np.ndarray):
            raise InputError(
                "--engine ray: sparse fixed features are not supported yet; "
                "pass them dense (.npy) or use the single-machine engine"
            )
    started = start_ray(address)
    ray = _ray()
    try:
        attempt = 0
        while True:
            try:
                engine = RayEngine(
                    ray,
                    indptr,
                    indices,
                    weights,
                    cfg,
                    features,
                    resume_from,
                    P,
                    S,
                    w_placement == "workers",
                    stats,
                    start=start,
                )
                try:
                    result = TrainResult(
                        params=None, config=cfg, optimizer=engine.optimizer, notes=notes
                    )
                    run_epochs(
                        engine,
                        result,
                        n_nodes * cfg.walks_per_node,
                        progress=progress,
                        epoch_callback=epoch_callback,
                        checkpoint_dir=checkpoint_dir,
                        checkpoint_every=checkpoint_every,
                        step_callback=step_callback,
                        checkpoint_extra=checkpoint_extra,
                    )
                    return engine.finish(result, stats, write_outputs)
                finally:
                    engine.cluster.kill()
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


def _check_layout(P, S, n_nodes, w_placement, max_rows_per_shard):
    """InputError (one line) for a layout that cannot run: P workers, S servers."""
    if P < 1:
        raise InputError(f"--workers: must be >= 1, got {P}")
    if w_placement not in W_PLACEMENTS:
        raise InputError(f"w_placement: must be one of {W_PLACEMENTS}, got {w_placement!r}")
    if S < 1:
        raise InputError(f"--servers: must be >= 1, got {S}")
    if S > n_nodes:
        raise InputError(f"--servers: at most the number of nodes ({n_nodes}), got {S}")
    if max_rows_per_shard is not None and shard_rows(n_nodes, S, 0) > max_rows_per_shard:
        raise InputError(
            f"--servers: {S} servers hold up to {shard_rows(n_nodes, S, 0)} rows "
            f"each, above the limit of {max_rows_per_shard}; use at least "
            f"{math.ceil(n_nodes / max_rows_per_shard)}"
        )


def _actor_lost_errors(ray):
    """The errors by which Ray reports an actor gone: killed, crashed, or stopped by
    Ray's memory monitor."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.OutOfMemoryError)


def cli_fit(indptr, indices, weights, cfg, overwrite=False, ray_address=None, **kwargs):
    """``fit`` as ``caps2ne train --engine ray`` calls it: refuses to start a new run
    over a sharded checkpoint unless ``overwrite``."""
    directory = kwargs.get("checkpoint_dir")
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
    n_nodes, n_edges = int(indptr.shape[0] - 1), int(np.asarray(indices).shape[0])
    fixed = kwargs.get("features") is not None
    if "workers" in kwargs:
        kwargs["workers"] = worker_count(
            kwargs["workers"], cfg, n_nodes, n_edges, fixed, ray_address
        )
    with results_only_stdout(quiet=ray_logging_level() > logging.WARNING):
        return fit(indptr, indices, weights, cfg, address=ray_address, **kwargs)


def _one_line(err):
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()  # Ray colours
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


class RayEngine:
    """The Ray engine of loop.run_epochs: S shard servers and P workers (``_Cluster``).

    A round runs batches b0 .. b0 + P - 1 of the epoch, batch b0 + r on worker r, all
    against the parameters at the start of the round; each server then applies the P
    pushes in rank order, as P lazy-Adam steps with their own step counts and rates.
    With a replicated W, a round's W gradients are applied on every worker at the start
    of the next round (or by ``finite``/``save``, which bring W up to date first)."""

    def __init__(
        self,
        ray,
        indptr,
        indices,
        weights,
        cfg,
        features,
        resume_from,
        P,
        S,
        replicate_W,
        stats,
        start=None,
    ):
        self.ray, self.cfg, self.S, self.replicate_W = ray, cfg, S, replicate_W
        self.n_nodes = n_nodes = int(indptr.shape[0] - 1)
        self.features = features
        self.start = start  # spectral.SpectralStart: --spectral init / init_xo start x (and O)
        self.fixed = features is not None
        self.feat_dim = features.shape[1] if self.fixed else cfg.feat_dim
        self.graph_hash = checkpoint.fingerprint(indptr, indices, weights, features)
        ckpt = None
        if resume_from is not None:
            ckpt = load_driver(resume_from)
            checkpoint.check_compatible(ckpt, cfg.to_dict(), self.graph_hash)
            if ckpt["n_shards"] != S:
                raise InputError(
                    f"{ckpt['path']}: written with --servers {ckpt['n_shards']}; "
                    f"resume with the same number of servers (now {S})"
                )
        self.round_size = P
        self.cluster = _Cluster(
            ray,
            indptr,
            indices,
            weights,
            cfg,
            n_nodes,
            self.feat_dim,
            self.fixed,
            P,
            S,
            cfg.threads,
            replicate_W,
        )
        if stats is not None:  # the actors of this attempt (tests kill one)
            stats["actors"] = dict(servers=self.cluster.servers, workers=self.cluster.workers)
        try:
            self._start(ckpt)
        except BaseException:
            self.cluster.kill()
            raise
        self.resumed = ckpt
        self.optimizer = SimpleNamespace(lr=cfg.lr, t=ckpt["state"]["step"] if ckpt else 0)
        self._w_pending = None  # replicated W: last round's ((steps, rates), refs)

    def _start(self, ckpt):
        ray, cfg, servers, workers = self.ray, self.cfg, self.cluster.servers, self.cluster.workers
        if cfg.sampler == "unigram":
            n_walks = self.n_nodes * cfg.walks_per_node
            P = len(workers)
            cuts = [n_walks * r // P for r in range(P + 1)]
            parts = ray.get(
                [
                    w.node_counts.remote(cuts[r], cuts[r + 1], cfg.walk_chunk)
                    for r, w in enumerate(workers)
                ]
            )
            counts_ref = ray.put(np.sum(parts, axis=0))  # int64: any order, same sum
            ray.get([w.set_counts.remote(counts_ref) for w in workers])
        if ckpt is None:
            self._initialise()
            return
        directory = Path(ckpt["dir"])
        pending = [
            srv.load.remote(str(directory / name)) for srv, name in zip(servers, ckpt["shards"])
        ]
        if self.replicate_W:
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

    def _initialise(self):
        """The initial values of ``core.init_params``, sent to the servers in chunks of
        rows (the driver holds the initial tables only until they are sent)."""
        ray, cfg, servers = self.ray, self.cfg, self.cluster.servers
        rng = np.random.default_rng(derive_seed(cfg.seed, "init"))
        params = init_params(
            self.n_nodes, cfg.dim, self.feat_dim, cfg.walk_length - 1, rng, self.features
        )
        if self.start is not None and self.start.X is not None:  # as train.LocalEngine
            params.X[...] = self.start.X
        if self.start is not None and self.start.O is not None:
            params.O[...] = self.start.O
        if self.replicate_W:
            W_ref = ray.put(params.W)
            pending = [w.set_W.remote(W_ref) for w in self.cluster.workers]
        else:
            pending = [servers[0].set_rows.remote("W", 0, params.W)]
        for name in ("O", "X"):
            table = getattr(params, name)
            for lo in range(0, self.n_nodes, INIT_CHUNK_ROWS):
                chunk = ray.put(np.ascontiguousarray(table[lo : lo + INIT_CHUNK_ROWS]))
                pending.extend(srv.set_rows.remote(name, lo, chunk) for srv in servers)
                if len(pending) > 8 * len(servers):  # bound the chunks in flight
                    ray.get(pending)
                    pending.clear()
        ray.get(pending)

    def train(self, epoch, b0, step0, rates):
        ray, S = self.ray, self.S
        servers, workers = self.cluster.servers, self.cluster.workers
        (w_steps, w_rates), w_refs = self._w_pending or (((), ()), ())
        refs = [
            workers[r]
            .step.options(num_returns=S + 2)
            .remote(epoch, b0 + r, step0 + r, w_steps, w_rates, *w_refs)
            for r in range(len(rates))
        ]
        steps = [step0 + r + 1 for r in range(len(rates))]
        applied = [
            srv.apply.remote(steps, rates, *[refs[r][s] for r in range(len(rates))])
            for s, srv in enumerate(servers)
        ]
        self._w_pending = (
            ((steps, rates), [refs[r][S] for r in range(len(rates))]) if self.replicate_W else None
        )
        done = ray.get([refs[r][S + 1] for r in range(len(rates))])
        ray.get(applied)
        self.optimizer.lr, self.optimizer.t = rates[-1], steps[-1]
        return done

    def _flush_W(self):
        """Replicated W: apply the last round's W gradients on every worker now."""
        if self._w_pending is not None:
            (steps, rates), refs = self._w_pending
            self.ray.get([w.apply_W.remote(steps, rates, *refs) for w in self.cluster.workers])
            self._w_pending = None

    def finite(self):
        self._flush_W()
        checks = [srv.finite.remote() for srv in self.cluster.servers]
        if self.replicate_W:
            checks.append(self.cluster.workers[0].finite_W.remote())
        return all(self.ray.get(checks))

    def save(self, directory, state, history, extra):
        self._flush_W()
        save_checkpoint(
            self.ray,
            directory,
            self.cluster,
            state,
            self.cfg,
            history,
            self.graph_hash,
            self.S,
            self.replicate_W,
            extra,
        )

    def params(self):
        return gather(
            self.ray, self.cluster, self.n_nodes, self.fixed, self.features, self.replicate_W
        )

    def finish(self, result, stats, write_outputs):
        """After the last epoch: the actors' statistics, then the outputs streamed from
        the shards (``write_outputs``) or the gathered parameters in ``result``."""
        ray, cluster = self.ray, self.cluster
        if stats is not None:
            stats["servers"] = ray.get([srv.stats.remote() for srv in cluster.servers])
            stats["workers"] = ray.get([w.stats.remote() for w in cluster.workers])
            stats["driver_peak_rss"] = _peak_rss()
        if write_outputs is not None:
            result.params = streamed_params(
                ray,
                cluster,
                self.n_nodes,
                self.cfg.dim,
                self.feat_dim,
                self.fixed,
                self.features,
                self.replicate_W,
            )
            write_outputs(result)
            result.params = None  # its blocks pull from actors about to stop
            return result
        result.params = self.params()
        return result


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
    from ..io.formats import RowBlocks

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


def save_checkpoint(
    ray, directory, cluster, state, cfg, history, graph_hash, S, replicate_W, extra=None
):
    """Every server writes its shard for this step (and worker 0 the replicated W),
    then the driver file naming them (and holding the caller's ``extra`` arrays, as
    ``extra_<name>``) replaces the previous one (atomic); older files are removed
    after."""
    import json

    from ..io.formats import save_npz

    directory = Path(directory).absolute()  # the actors' working folder is not ours
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
        **{f"extra_{name}": value for name, value in (extra or {}).items()},
    )
    keep = set(names) | {w_file}
    for old in list(directory.glob(f"shard-*-of-{S}.*.npz")) + list(directory.glob("W.*.npz")):
        if old.name not in keep:
            old.unlink()


def load_driver(directory):
    """The driver state of a sharded checkpoint (InputError when there is none)."""
    import json

    from ..io.formats import load_npz

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
        "extra": {k[len("extra_") :]: z[k] for k in z if k.startswith("extra_")},
        "path": str(path),
        "dir": str(Path(directory).absolute()),
    }
