"""Replica rounds: a worker trains many batches on its own copy of the tables, and the
servers merge the copies' changes once a round (docs/distributed.md, "Replica rounds").

A worker (``ReplicaWorker``) holds every table and its lazy-Adam moments, loaded from
the servers at the start, and trains its share of a round's batches with the single
machine's compiled chunk (fused.FusedStep: draw, step and Adam in one call, each batch
at its global step and rate).  It then sends each server the values of the rows that
changed since the last round (``changed_rows``: a row's moments differ from their copy
at the last round; a lazy-Adam step changes them whenever it touches the row).  A
server merges the P workers' rows in rank order (``merge_rows``):

    changed by one worker:   value = that worker's (copied: no arithmetic)
    changed by c >= 2:       value = value_0 + sum_r (value_r - value_0)   (rank order)

and returns the merged values, which every worker copies into its tables before its
next share (none at P = 1: the worker's tables are the server's).

The moments stay on the workers between checkpoints: each worker keeps the moments of
its own steps (a local optimiser state, as each worker of Spark's or PyTorch-
BigGraph's training keeps its own), and sends them only when a checkpoint is saved
(``flush``): the moments of the rows it changed since the last one, merged by the
servers in rank order (``merge_moments``: one worker's copied, c >= 2 the mean
sum_r m_r / c, sum_r v_r / c, which stays positive) and copied back into every worker.
A round then moves 4 (k + d + 1) bytes a changed row each way, a third of the values
and both moments; docs/distributed.md, "Replica rounds".

So at P = 1 a round is the single machine's chunk on the worker, and the servers hold
the very values the worker has after every round, and its very moments after every
flush: the single machine's bits, whatever the round's size and S, and a checkpoint
that resumes it exactly.  At P > 1 the sum of the changes is what one machine would
move a row by if the workers' steps did not interact (Hogwild's sum, not Spark's
average: a row only one worker touched keeps that worker's whole step).  A worker's
reads are stale by up to one round of the other workers' batches (bounded staleness,
SSP's bound of a round).
"""

import os
import time

import numba
import numpy as np
from numba import prange

from ...kernels.jit import kernel
from ...model.params import Params, slot_major
from ..step import fused
from ..step.batch import BatchStream
from ..step.optim import Adam
from .shards import interleave, peak_rss, set_threads, shard_rows

LOAD_ROWS = 1 << 16
"""Rows per request when a worker loads the tables from the servers."""


@kernel(parallel=True)
def changed_rows(m, v, m0, v0, out):
    """out[r] = row r of the moments ``m``, ``v`` (n, w) differs from ``m0``, ``v0``
    (a NaN counts as changed); a changed row is copied into ``m0``, ``v0``."""
    for r in prange(m.shape[0]):
        c = False
        for j in range(m.shape[1]):
            if m[r, j] != m0[r, j] or v[r, j] != v0[r, j]:
                c = True
                break
        out[r] = c
        if c:
            m0[r] = m[r]
            v0[r] = v[r]


def rows_of(name, table):
    """A table as 2-D rows: W's (I, d, k) buffer as I d rows of k, the biases as (N, 1)."""
    if name == "W":
        t = table.transpose(0, 2, 1)
        return t.reshape(t.shape[0] * t.shape[1], t.shape[2])
    return table.reshape(table.shape[0], -1)


def _union(given):
    """(rows, where, count): the ascending union of the pushes' rows, each push's
    positions in it, and how many pushes hold each row."""
    union = np.unique(np.concatenate([p[0] for p in given]))
    where = [np.searchsorted(union, p[0]) for p in given]
    count = np.zeros(union.shape[0], dtype=np.int64)
    for w in where:
        count[w] += 1
    return union, where, count


def merge_rows(values, pushes):
    """Merge the P workers' ``pushes`` (rank order; each (rows, values) or None) of one
    table into ``values`` (2-D, updated in place): a row one worker changed takes its
    bits, a row c >= 2 changed value_0 + sum_r (value_r - value_0).  Returns (rows,
    values) of the merged rows, ascending, or None."""
    given = [p for p in pushes if p is not None and p[0].shape[0]]
    if not given:
        return None
    if len(given) == 1:  # one worker changed these rows: its bits, nothing to merge
        rows, val = given[0]
        values[rows] = val
        return given[0]
    union, where, count = _union(given)
    base = values[union]
    delta = np.zeros_like(base)
    for w, (_, val) in zip(where, given):
        delta[w] += val - base[w]
    new_val = base + delta
    for w, (_, val) in zip(where, given):  # one worker's row: its own bits
        one = count[w] == 1
        new_val[w[one]] = val[one]
    values[union] = new_val
    return union, new_val


def merge_moments(m, v, pushes):
    """Merge the P workers' moments ``pushes`` (rank order; each (rows, m, v) or None)
    of one table into ``m``, ``v`` (2-D, in place): a row one worker changed takes its
    bits, a row c >= 2 changed the mean.  Returns (rows, m, v) of the merged rows,
    ascending, or None."""
    given = [p for p in pushes if p is not None and p[0].shape[0]]
    if not given:
        return None
    if len(given) == 1:
        rows, m_r, v_r = given[0]
        m[rows], v[rows] = m_r, v_r
        return given[0]
    union, where, count = _union(given)
    m_sum, v_sum = np.zeros_like(m[union]), np.zeros_like(v[union])
    for w, (_, m_r, v_r) in zip(where, given):
        m_sum[w] += m_r
        v_sum[w] += v_r
    c = count[:, None].astype(m.dtype)
    new_m, new_v = m_sum / c, v_sum / c
    for w, (_, m_r, v_r) in zip(where, given):  # one worker's row: its own bits
        one = count[w] == 1
        new_m[w[one]], new_v[w[one]] = m_r[one], v_r[one]
    m[union], v[union] = new_m, new_v
    return union, new_m, new_v


class ReplicaWorker:
    """A worker of replica rounds (plain Python; ``RayReplicaWorker`` is its actor):
    every table and its moments, the compiled chunk, and the rows changed since the
    last merge.  ``servers``: S objects with ``rows(name, first, last)`` and
    ``moments(name, first, last)`` (ShardServer's), or callables returning futures
    (``fetch``)."""

    def __init__(self, rank, indptr, indices, weights, cfg, n_shards, feat_dim, fixed,
                 threads=1, fetch=None):  # fmt: skip
        set_threads(threads)
        self.rank, self.cfg, self.S, self.fixed = rank, cfg, int(n_shards), bool(fixed)
        self.fetch = fetch if fetch is not None else (lambda calls: [c() for c in calls])
        n, k, d, n_slots = int(indptr.shape[0] - 1), cfg.dim, feat_dim, cfg.walk_length - 1
        self.n_nodes = n
        self.params = Params(
            slot_major(np.zeros((n_slots, k, d), dtype=np.float32)),
            np.zeros((n, k), dtype=np.float32),
            np.zeros(n, dtype=np.float32),
            np.zeros((n, d), dtype=np.float32),
            fixed_features=self.fixed,
        )
        self.names = self.params.trainable()
        self.opt = Adam({name: getattr(self.params, name) for name in self.names}, lr=None)
        self.stream = BatchStream(indptr, indices, weights, cfg)
        self.step = None  # fused.FusedStep, once the sampler has its counts
        self.snap = {}  # name: (m0, v0), the moments at the last round
        self.pending = {}  # name: (rows,) bool, changed since the last flush of the moments
        self.pushed = self.pulled = self.loaded = 0  # bytes: changed rows out, merged in, loaded
        self.moments_pushed = self.moments_pulled = 0  # bytes of the flushes
        self.seconds = dict(train=0.0, diff=0.0, absorb=0.0, rounds=0, batches=0)

    def pid(self):
        return os.getpid()

    def node_counts(self, lo, hi, chunk):
        """Node counts over walks [lo, hi) of epoch 0 (the unigram sampler's share)."""
        return self.stream.node_counts(lo, hi, chunk)

    def set_counts(self, counts):
        self.stream.set_counts(counts)
        return True

    def load(self, servers):
        """Every table and its moments from the ``servers`` (their ``rows`` and
        ``moments``), ``LOAD_ROWS`` rows at a time; W from server 0."""
        S, n = self.S, self.n_nodes
        for name in ("O", "bias", "X"):
            table = getattr(self.params, name)
            trained = name in self.names
            for lo in range(0, n, LOAD_ROWS):
                hi = min(n, lo + LOAD_ROWS)
                parts = self.fetch([_call(srv, "rows", name, lo, hi) for srv in servers])
                table[lo:hi] = interleave(parts, lo, hi, S)
                if trained:
                    got = self.fetch([_call(srv, "moments", name, lo, hi) for srv in servers])
                    self.opt.m[name][lo:hi] = interleave([g[0] for g in got], lo, hi, S)
                    self.opt.v[name][lo:hi] = interleave([g[1] for g in got], lo, hi, S)
                    self.loaded += 2 * sum(g[0].nbytes for g in got)
                self.loaded += sum(p.nbytes for p in parts)
        W = self.fetch([_call(servers[0], "table", "W")])[0]
        mW, vW = self.fetch([_call(servers[0], "moments", "W", 0, 0)])[0]
        self.params.W[...] = W
        self.opt.m["W"].transpose(0, 2, 1)[...] = mW
        self.opt.v["W"].transpose(0, 2, 1)[...] = vW
        self.loaded += 3 * W.nbytes
        self.snap = {
            name: (rows_of(name, self.opt.m[name]).copy(), rows_of(name, self.opt.v[name]).copy())
            for name in self.names
        }
        self.pending = {name: np.zeros(self.snap[name][0].shape[0], bool) for name in self.names}
        return True

    def train(self, epoch, b, step, rates, *merged):
        """Copy the last round's ``merged`` rows (one per server) in, train batches b,
        b + 1, ... of the epoch (one per rate, steps step, step + 1, ...) with the
        compiled chunk, and return (records, push to server 0, ..., push to server
        S - 1): each push {name: (local rows, values)} of the changed rows."""
        t0 = time.perf_counter()
        self.absorb(*merged)
        t1 = time.perf_counter()
        n = len(rates)
        if self.step is None:
            mcfg = self.cfg.model_config()
            self.step = fused.FusedStep(self.stream, self.params, self.opt, mcfg, lazy=True)
        out = []
        if n:
            out = self.step.train(
                epoch, range(b, b + n), range(step, step + n), rates,
                parallel=numba.get_num_threads() > 1,
            )  # fmt: skip
        t2 = time.perf_counter()
        pushes = self._pushes() if n else [{} for _ in range(self.S)]
        t3 = time.perf_counter()
        s = self.seconds
        s["absorb"] += t1 - t0
        s["train"] += t2 - t1
        s["diff"] += t3 - t2
        s["rounds"] += 1
        s["batches"] += len(out)
        return (out, *pushes)

    def _pushes(self):
        """The values of the rows changed since the last round, one push per server (W's
        to server 0); their moments become the copy the next round compares with
        (changed_rows), and the rows wait for the next ``flush``."""
        pushes = [{} for _ in range(self.S)]
        for name in self.names:
            val = rows_of(name, getattr(self.params, name))
            m, v = rows_of(name, self.opt.m[name]), rows_of(name, self.opt.v[name])
            m0, v0 = self.snap[name]
            mask = np.empty(m.shape[0], dtype=np.bool_)
            version = changed_rows.parallel if numba.get_num_threads() > 1 else changed_rows.serial
            version(m, v, m0, v0, mask)
            self.pending[name] |= mask
            self._split(pushes, name, np.flatnonzero(mask), val)
        self.pushed += sum(_push_bytes(p) for p in pushes)
        return pushes

    def _split(self, pushes, name, rows, *tables):
        """Add {name: (local rows, table[rows] for each table)} to each server's push:
        W's whole to server 0, other rows to their owner (v % S, local row v // S)."""
        if name == "W":
            pushes[0]["W"] = (rows, *(t[rows] for t in tables))
            return
        S = self.S
        owner = rows % S
        for s in range(S):
            mine = rows[owner == s]
            pushes[s][name] = (mine // S, *(t[mine] for t in tables))

    def absorb(self, *merged):
        """Copy the merged values of each server (``ShardServer.merge``'s, or None) into
        the tables (the moments stay this worker's)."""
        for s, update in enumerate(merged):
            if not update:
                continue
            self.pulled += _push_bytes(update)
            for name, (rows, val) in update.items():
                g = rows if name == "W" else rows * self.S + s
                rows_of(name, getattr(self.params, name))[g] = val
        return True

    def flush(self):
        """The moments of the rows changed since the last flush, one push per server
        ({name: (local rows, m, v)}, as ``_pushes``), for a checkpoint; the rows wait
        no more.  Returns (True, push to server 0, ..., push to server S - 1), as
        ``train`` returns its records first."""
        pushes = [{} for _ in range(self.S)]
        for name in self.names:
            m, v = rows_of(name, self.opt.m[name]), rows_of(name, self.opt.v[name])
            self._split(pushes, name, np.flatnonzero(self.pending[name]), m, v)
            self.pending[name][:] = False
        self.moments_pushed += sum(_push_bytes(p) for p in pushes)
        return (True, *pushes)

    def absorb_moments(self, *merged):
        """Copy the merged moments of each server (``ShardServer.merge_moments``'s, or
        None) into the moments and their copy (so that the next round does not take
        them for this worker's steps)."""
        for s, update in enumerate(merged):
            if not update:
                continue
            self.moments_pulled += _push_bytes(update)
            for name, (rows, m, v) in update.items():
                g = rows if name == "W" else rows * self.S + s
                rows_of(name, self.opt.m[name])[g] = m
                rows_of(name, self.opt.v[name])[g] = v
                m0, v0 = self.snap[name]
                m0[g], v0[g] = m, v
        return True

    def stats(self):
        held = sum(a.nbytes for a in (self.params.W, self.params.O, self.params.bias))
        held += self.params.X.nbytes + sum(
            self.opt.m[n].nbytes * 4 + self.pending[n].nbytes for n in self.names
        )  # m, v, their copies and the rows waiting for a flush
        return dict(
            pulled=self.pulled,
            pushed=self.pushed,
            moments_pushed=self.moments_pushed,
            moments_pulled=self.moments_pulled,
            loaded=self.loaded,
            held_bytes=held,
            peak_rss=peak_rss(),
            step="compiled replica",
            **self.seconds,
        )


def _call(target, method, *args):
    """A deferred call of ``target.method(*args)``: a ``ShardServer`` in this process,
    or (``.remote``) an actor."""
    f = getattr(target, method)
    if hasattr(f, "remote"):
        return lambda: f.remote(*args)
    return lambda: f(*args)


def _push_bytes(push):
    return sum(a.nbytes for entry in push.values() for a in entry)


def shard_moments(server, name, first, last):
    """``ShardServer.moments``: its rows of global nodes [first, last) of m and v (W
    whole)."""
    m, v = server.opt.m[name], server.opt.v[name]
    if name == "W":
        return m.transpose(0, 2, 1), v.transpose(0, 2, 1)
    S, s = server.n_shards, server.shard
    a, b = shard_rows(first, S, s), shard_rows(last, S, s)
    return m[a:b], v[a:b]


class RayReplicaWorker(ReplicaWorker):
    """ReplicaWorker whose loads go to the server actors."""

    def __init__(self, rank, indptr, indices, weights, cfg, n_shards, feat_dim, fixed,
                 threads, servers):  # fmt: skip
        import ray

        def fetch(calls):
            return ray.get([c() for c in calls])

        super().__init__(
            rank, indptr, indices, weights, cfg, n_shards, feat_dim, fixed, threads, fetch
        )
        self.servers = servers

    def load_from_servers(self):
        return self.load(self.servers)
