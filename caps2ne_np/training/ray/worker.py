"""``BatchWorker``: a rank's batches and steps against rows pulled from the shards
(plain Python), and ``RayWorker``, the actor whose pulls go to the server actors."""

import os
import time

import numpy as np

from ...model.core import loss_and_row_grads
from ...model.params import Params, slot_major
from ...model.row_grad import RowGrad
from ..loop import trained_batch
from ..step import fused
from ..step.batch import BatchStream
from ..step.optim import Adam
from .compiled import CompiledBatches
from .shards import peak_rss, set_threads, split_by_shard


class BatchWorker:
    """Rank ``rank``'s batches and steps (plain Python; the Ray actor wraps it).

    Its batches come from a batch.BatchStream, as the local engine's do, so a batch b
    of an epoch is the one ``train.fit`` trains at that point.  Where fused.supports
    the run (the defaults), a step is the single machine's compiled step on the pulled
    rows (compiled.CompiledBatches); otherwise (the skip-gram term) the Python step,
    core.loss_and_row_grads, as the single machine runs it then."""

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
        set_threads(threads)
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
            self.W_opt = Adam({"W": self.W}, lr=None)  # rates: apply_W's
        self.stream = BatchStream(indptr, indices, weights, cfg, counts=counts)
        self.mcfg = cfg.model_config()
        self.compiled = fused.supports(cfg, "dense" if fixed_features else None)
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
            if d_W_t is None:  # a non-finite loss: no update
                continue
            self.W_opt.t = t - 1
            d_W = RowGrad.every_row(d_W_t.reshape(-1, d_W_t.shape[2]))
            self.W_opt.step({"W": d_W}, lr=lr)
        sizes = [a.nbytes for a in d_W_ts if a is not None]
        if sizes:  # all but its own came from other workers
            self.pulled += (len(d_W_ts) - 1) * sizes[0]
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
        from ...io.npy import save_npz

        W, m, v = self.W_state()
        save_npz(path, overwrite=True, param_W=W, m_W=m, v_W=v)
        return str(path)

    def load_W(self, path):
        from ...io.npy import load_npz

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
        server, W's gradient (None when server 0 holds W: its push carries it) and the
        trained batch's record (loop.trained_batch).  With a replicated W, the previous
        round's W gradients (``w_steps``, ``w_rates``, ``d_W_ts``) are applied first."""
        if d_W_ts:
            self.apply_W(w_steps, w_rates, *d_W_ts)
        if self.compiled:
            return self._step_compiled(epoch, b, step)
        t0 = time.perf_counter()
        batch = self.stream.batch(epoch, b, step)
        ctx, tgt = batch.ctx, batch.targets
        S = self.n_shards
        # local rows: ascending global ids, so sums run in the same order as on N rows
        x_nodes, ctx_local = np.unique(ctx, return_inverse=True)
        ctx_local = ctx_local.reshape(ctx.shape)
        o_nodes, o_inv = np.unique(
            np.concatenate([tgt.astype(np.int64), batch.sampled]), return_inverse=True
        )
        tgt_local, sampled_local = o_inv[: tgt.shape[0]], o_inv[tgt.shape[0] :]
        o_split, x_split = split_by_shard(o_nodes, S), split_by_shard(x_nodes, S)
        t1 = time.perf_counter()
        params = self._pull_rows(o_split, x_split, o_nodes.shape[0], x_nodes.shape[0])
        t2 = time.perf_counter()
        parts = {}  # L_caps and the skip-gram term, when it is on
        loss, rg = loss_and_row_grads(
            params,
            ctx_local,
            tgt_local,
            sampled_local,
            batch.q_true,
            batch.q_sampled,
            self.mcfg,
            key=batch.key,
            parts=parts,
        )
        pushes, d_W_t = self._pushes(rg, o_nodes, x_nodes, params.W.shape)
        t3 = time.perf_counter()
        self.seconds["batch"] += t1 - t0
        self.seconds["pull"] += t2 - t1
        self.seconds["compute"] += t3 - t2
        self.seconds["steps"] += 1
        self.rows["o"] += o_nodes.shape[0]
        self.rows["x"] += x_nodes.shape[0]
        return (*pushes, d_W_t, trained_batch(self.cfg, loss, batch, parts))

    def _step_compiled(self, epoch, b, step):
        """``step`` on the compiled step: batch b drawn by the single machine's kernel,
        its rows pulled, the chunk's stages on them (compiled.CompiledBatches).  A
        non-finite loss pushes nothing to apply (the single machine stops before that
        update)."""
        t0 = time.perf_counter()
        if self.compiled is True:  # made here: the unigram sampler's counts come after __init__
            self.compiled = CompiledBatches(
                self.stream, self.mcfg, self.cfg.walk_length - 1, not self.fixed_features
            )
        drawn = self.compiled.draw(epoch, b, step)
        S = self.n_shards
        o_split, x_split = split_by_shard(drawn.o_nodes, S), split_by_shard(drawn.x_nodes, S)
        n_o, n_x = drawn.o_nodes.shape[0], drawn.x_nodes.shape[0]
        t1 = time.perf_counter()
        params = self._pull_rows(o_split, x_split, n_o, n_x)
        t2 = time.perf_counter()
        W_t = params.W.transpose(0, 2, 1)  # the contiguous (I, d, k) buffer
        g = self.compiled.gradients(drawn, params.X, W_t, params.O, params.bias)
        if np.isfinite(g.loss):
            pushes, d_W_t = self._shard_pushes(g, o_split, x_split)
        else:
            pushes, d_W_t = [dict(skip=True) for _ in range(S)], None
        t3 = time.perf_counter()
        self.seconds["batch"] += t1 - t0
        self.seconds["pull"] += t2 - t1
        self.seconds["compute"] += t3 - t2
        self.seconds["steps"] += 1
        self.rows["o"] += n_o
        self.rows["x"] += n_x
        return (*pushes, d_W_t, (g.loss, drawn.P))

    def _shard_pushes(self, g, o_split, x_split):
        """The gradients ``g`` (compiled.Gradients, on the batch's ascending local rows)
        as one push per server, and W's as ``_pushes`` returns it."""
        own_W = self.W is not None
        pushes = []
        for s, ((opos, olocal), (xpos, xlocal)) in enumerate(zip(o_split, x_split)):
            push = {"o_rows": olocal, "d_O": g.d_O[opos], "d_bias": g.d_bias[opos]}
            if g.d_x is not None:
                push.update(x_rows=xlocal, d_X=g.d_x[xpos])
            if s == 0 and not own_W:
                push["d_W_t"] = g.d_W_t
            self.pushed += sum(v.nbytes for v in push.values())
            pushes.append(push)
        if not own_W:
            return pushes, None  # in the push to server 0
        if self.n_workers > 1:  # to the other workers
            self.pushed += g.d_W_t.nbytes
        return pushes, g.d_W_t

    def _pull_rows(self, o_split, x_split, n_o, n_x):
        """A batch's rows from their shards (``split_by_shard`` of its ``n_o`` output
        nodes and ``n_x`` context nodes), and W, as params.Params over local rows."""
        S = self.n_shards
        own_W = self.W is not None
        replies = self._pull(
            [(o_split[s][1], x_split[s][1], s == 0 and not own_W) for s in range(S)]
        )
        self.requested += sum(
            o.nbytes + x.nbytes for o, x in ((o_split[s][1], x_split[s][1]) for s in range(S))
        )
        k = replies[0][0].shape[1]
        d = replies[0][2].shape[1]
        O = np.empty((n_o, k), dtype=np.float32)
        bias = np.empty(n_o, dtype=np.float32)
        X = np.empty((n_x, d), dtype=np.float32)
        for s, (o_s, b_s, x_s, _) in enumerate(replies):
            O[o_split[s][0]], bias[o_split[s][0]], X[x_split[s][0]] = o_s, b_s, x_s
            self.pulled += o_s.nbytes + b_s.nbytes + x_s.nbytes
        if own_W:
            W = self.W
        else:
            W = replies[0][3].transpose(0, 2, 1)  # slot-major view, as train.fit's W
            self.pulled += W.nbytes
        self.max_rows = max(self.max_rows, n_o, n_x)
        return Params(W, O, bias, X, fixed_features=self.fixed_features)

    def _pushes(self, rg, o_nodes, x_nodes, W_shape):
        """The row gradients ``rg`` (on local rows) as one push per server, on the
        server's rows, and W's gradient as its contiguous (I, d, k) buffer: in the push
        to server 0 when it holds W (then returned as None), else returned for the
        workers' replicas."""
        S = self.n_shards
        own_W = self.W is not None
        d_W_t = rg["W"].values.reshape(W_shape[0], W_shape[2], W_shape[1])  # every row
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
        return pushes, d_W_t

    def stats(self):
        return dict(
            pulled=self.pulled,
            pushed=self.pushed,
            requested=self.requested,
            max_rows=self.max_rows,
            o_rows=self.rows["o"],
            x_rows=self.rows["x"],
            peak_rss=peak_rss(),
            step="python" if self.compiled is False else "compiled",
            **self.seconds,
        )


class RayWorker(BatchWorker):
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
