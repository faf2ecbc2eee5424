"""A worker's batch on the compiled step (training/step/fused.py), on the rows it pulled.

``CompiledBatches`` draws batch b of an epoch with the kernel the single machine's
chunk draws it with (fused_batch.draw_batch, global node ids), renumbers its nodes to
local rows (``_localise``: the distinct context nodes ascending, and the distinct
targets and V' ascending), and, once the caller has pulled those rows, runs the
chunk's own stages on them: fused_batch.index_batch, then fused.loss_and_grads_kernel.

Renumbering is a bijection that keeps the order of the node ids, and the index
numbers rows in order of first appearance, so every row, block and sum of the step
is the one the single machine makes on the N-row tables: the same gradients, bit for
bit.  The gradients come out on the local rows in ascending order (``Gradients``),
ready to split by shard; Adam is the servers' (optim.Adam's lazy step: optim.adam_span
per row, as fused._adam).
"""

from collections import namedtuple

import numba
import numpy as np

from ...kernels.jit import kernel
from ...kernels.rng import quiet_wraparound
from ..step.fused import Tables, loss_and_grads_kernel, routing_of
from ..step.fused_batch import Batch, draw_batch, index_batch, make_workspace, unmark
from ..step.samplers import hash_table_size

Drawn = namedtuple("Drawn", "P x_nodes o_nodes batch")
"""A drawn batch: its pairs, the distinct context nodes and the distinct O rows (targets
and V'), ascending global ids, and the fused_batch.Batch on local rows (contexts
renumbered into ``x_nodes``, targets and V' into ``o_nodes``)."""
Gradients = namedtuple("Gradients", "loss d_W_t d_O d_bias d_x")
"""A batch's mean loss and gradients: d_W_t (I, d, k) (W_i^T's), and d_O, d_bias, d_x on
the local rows of ``Drawn.o_nodes`` and ``Drawn.x_nodes``, in that order (d_x None with
fixed features)."""


@kernel
def _localise(ctx_t, targets, sampled, ctx_l, tgt_l, smp_l):
    """The distinct nodes of the contexts ``ctx_t`` (I, P) and of ``targets`` and
    ``sampled`` together, ascending; each id renumbered to its position there (into
    ``ctx_l``, ``tgt_l``, ``smp_l``).  Returns (x_nodes, o_nodes)."""
    n_slots, n_pairs = ctx_t.shape
    flat = np.empty(n_slots * n_pairs, dtype=np.int64)
    for i in range(n_slots):
        for p in range(n_pairs):
            flat[i * n_pairs + p] = ctx_t[i, p]
    x_nodes = np.unique(flat)
    for i in range(n_slots):
        for p in range(n_pairs):
            ctx_l[i, p] = np.searchsorted(x_nodes, ctx_t[i, p])
    both = np.empty(n_pairs + sampled.shape[0], dtype=np.int64)
    both[:n_pairs] = targets
    both[n_pairs:] = sampled
    o_nodes = np.unique(both)
    for p in range(n_pairs):
        tgt_l[p] = np.searchsorted(o_nodes, targets[p])
    for j in range(sampled.shape[0]):
        smp_l[j] = np.searchsorted(o_nodes, sampled[j])
    return x_nodes, o_nodes


@kernel(parallel=True)
def _step_local(tables, model, batch, ws, marks):
    """Index the batch (local rows), its loss and gradients into ``ws`` (the stages of
    fused._train_chunk), marks back to -1.  Returns (loss, n_o, G)."""
    sizes = index_batch(batch.ctx_t, batch.targets.shape[0], batch.targets, batch.sampled,
                         marks, ws)  # fmt: skip
    loss = loss_and_grads_kernel(tables, model, batch, ws, sizes)
    unmark(marks, ws, sizes)
    return loss, sizes.n_o, sizes.G


class CompiledBatches:
    """A worker's batches on the compiled step: ``draw(epoch, b, step)`` (a ``Drawn``),
    then ``gradients(drawn, X, W_t, O, bias)`` on the rows pulled for it.

    ``stream`` the worker's batch.BatchStream (its sampler set), ``mcfg`` the
    config.ModelConfig, ``n_slots`` the I of W; ``train_x`` False for fixed
    features."""

    def __init__(self, stream, mcfg, n_slots, train_x):
        self.stream, self.train_x, self.n_slots = stream, bool(train_x), int(n_slots)
        self.graph = stream.source.graph()
        self.model = routing_of(mcfg, n_slots, np.dtype(np.float32))
        cfg = stream.cfg
        n_pos = stream.positions.shape[0] if stream.positions is not None else 1
        P = int(cfg.batch_size) * max(1, n_pos)
        self.S = S = int(stream.sampler_tables().num_sampled)
        self.walks = np.empty((cfg.batch_size, n_slots + 1), dtype=np.int64)
        self.ctx_t = np.empty((n_slots, P), dtype=np.int64)
        self.targets = np.empty(P, dtype=np.int64)
        self.sampled = np.empty(S, dtype=np.int64)
        self.table = np.empty(hash_table_size(S), dtype=np.int64)
        self.log_q_true = np.empty(P, dtype=np.float32)
        self.log_q_sampled = np.empty(S, dtype=np.float32)
        self.marks = np.full((3, max(n_slots * P, S + P)), -1, dtype=np.int64)
        self.W_t = self.ws = None  # W's buffer and the workspace, once the sizes are known
        self.ws_pairs = -1

    def draw(self, epoch, b, step):
        """Batch b of the epoch at global step ``step`` (fused_batch.draw_batch), on
        local rows."""
        stream = self.stream
        with quiet_wraparound():
            P = draw_batch(
                self.graph, stream.draws(epoch), stream.sampler_tables(), int(epoch), int(b),
                int(step), self.walks, self.ctx_t, self.targets, self.sampled, self.table,
                self.log_q_true, self.log_q_sampled,
            )  # fmt: skip
        n_slots = self.n_slots
        ctx_l = np.empty((n_slots, P), dtype=np.int64)
        tgt_l = np.empty(P, dtype=np.int64)
        smp_l = np.empty(self.S, dtype=np.int64)
        x_nodes, o_nodes = _localise(
            self.ctx_t[:, :P], self.targets[:P], self.sampled, ctx_l, tgt_l, smp_l
        )
        batch = Batch(ctx_l, tgt_l, smp_l, self.log_q_true[:P].copy(), self.log_q_sampled.copy())
        return Drawn(P, x_nodes, o_nodes, batch)

    def gradients(self, drawn, X, W_t, O, bias):
        """The batch's loss and gradients (``Gradients``) on its pulled rows: ``X``
        (n_x, d) of ``drawn.x_nodes``, ``O`` (n_o, k) and ``bias`` (n_o,) of
        ``drawn.o_nodes``, W as its (I, d, k) buffer ``W_t`` (copied: Ray's arrays
        are read-only)."""
        n_slots, d, k = W_t.shape
        if self.W_t is None:
            self.W_t = np.empty((n_slots, d, k), dtype=np.float32)
        if self.ws_pairs != drawn.P:  # the short last batch of an epoch in 'shuffle' mode
            self.ws = make_workspace(drawn.P, self.S, n_slots, d, k, self.model.iters, self.W_t)
            self.ws_pairs = drawn.P
        ws = self.ws
        if W_t is not self.W_t:
            np.copyto(self.W_t, W_t)
        tables = Tables(X, self.W_t, O, bias, self.train_x)
        # the parallel version on more than one thread (as train.LocalEngine): same bits
        step = _step_local.parallel if numba.get_num_threads() > 1 else _step_local.serial
        loss, n_o, G = step(tables, self.model, drawn.batch, ws, self.marks)
        # V' first, then the other targets (o), first appearance (x): to ascending rows
        order_o = ws.o_nodes[:n_o]
        d_O = np.empty((n_o, k), dtype=np.float32)
        d_bias = np.empty(n_o, dtype=np.float32)
        d_O[order_o] = ws.d_O[:n_o]
        d_bias[order_o] = ws.d_bias[:n_o]
        d_x = None
        if self.train_x:
            d_x = np.empty((G, d), dtype=np.float32)
            d_x[ws.x_nodes[:G]] = ws.d_x[:G]
        return Gradients(float(loss), ws.d_W_t.copy(), d_O, d_bias, d_x)
