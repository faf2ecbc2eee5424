r"""The training step compiled whole: a chunk of batches per call, no Python inside.

One call of ``_train_chunk`` trains a list of batches of one epoch, from their ids to
updated tables, with the GIL released; Python sets up, calls once per chunk (about
0.25 s of work, at most 64 batches) and reports between chunks (gensim's
``train_batch_sg`` and umap's ``optimize_layout`` are the models).  A batch, top to
bottom (docs/math.md names the equations; every stage is a parallel kernel below, over
items that own their outputs):

    walks, pairs, V' and Q(.)           draw_batch    (serial)  pair_kernels.pair_of, samplers
    distinct (slot, node) rows, x nodes index_batch   (serial)  rows.share_slots_kernel
    x = X[nodes], u = squash(x)         _squash_nodes  Eq. 1     capsules.squash_vector
    u_hat = W_i u per distinct row      _predict       Eq. 2     blas.block_nn per slot (or half)
    c, s, e = Routing(u_hat)            _route_pairs   Alg. 1    capsules.route_pair
    z = e.o + b - log Q, L, dL/dz       _output_layer  Eq. 3     capsules.target_logit, softmax_pair
    d_e, d_O, d_bias                    _output_backward         grads.add_scaled_row,
                                                                 grads.sampled_bias_grads
    d_u_hat                             _route_back              grads.route_backward_pair
    d_rows = sum over the pairs         grads.gather_rows_backward_kernel
    d_W_i, d_u = W_i^T d_u_hat          _W_backward              blas.block_tn, block_nt per slot
    d_x = squash'(x) d_u                _x_backward              grads.squash_backward_vector
    L = mean_p loss_p                   loss_and_grads_kernel          capsules.mean_loss
    Adam, lazy or dense                 _adam                    optim.adam_span

This module holds the scheduling only (stages, blocks of rows, the workspace); every
formula is a helper of model/, kernels/blas.py, the walks, the samplers or optim.py,
inlined here and called by the Python step's kernels too (docs/math.md), with the sums
in a fixed order: the results are the same bits on any number of threads, and agree
with the Python step to float32 rounding (tests/test_fused.py; the float64 gradients
are checked against finite differences and the reference).  What crosses into the
compiled call has names: walk_args.WalkGraph, batch.Draws, samplers.SamplerTables (built
by their owners) and the named tuples below.

What it covers: trainable x (featureless graphs, the default) or fixed dense
features, lazy or dense Adam, every sampler, walk mode, batch mode, target rule,
routing rule and gradient mode, node2vec walks.  Sparse fixed features and the
skip-gram term train with step.TrainStep (``supports``).
"""

from collections import namedtuple

import numpy as np
from numba import prange
from numba.extending import overload

from ...kernels.blas import block_nn, block_nt, block_tn
from ...kernels.jit import REASSOC, kernel
from ...kernels.rng import quiet_wraparound
from ...model.capsules import (
    add_to_row,
    gather_pair,
    mean_loss,
    route_pair,
    rule_code,
    softmax_pair,
    squash_vector,
    target_logit,
)
from ...model.grads import (
    add_row,
    add_scaled_row,
    gather_rows_backward_kernel,
    route_backward_pair,
    sampled_bias_grads,
    scatter_scalars,
    squash_backward_vector,
)
from .fused_batch import Batch, draw_batch, index_batch, make_workspace, unmark
from .optim import AdamCoefs, adam_span, adam_span_zero, bias_corrected
from .samplers import hash_table_size

CHUNK = 64
"""At most this many batches per call of the compiled chunk (per thread: the local
engines' round), and about ``CHUNK_SECONDS`` of work: progress, checkpoints, signals
and the thread-count trial happen between chunks (train.LocalEngine._next_round)."""
CHUNK_SECONDS = 0.25
PROBE = 4
"""Batches of the round that times a batch (the run's second)."""

BLOCKS = 8
BLOCK_ROWS = 64
"""The output layer's products run on blocks of pairs (and of V') of at least BLOCK_ROWS
rows, at most BLOCKS of them, and W_i u on halves of a slot only when it has at least
2 BLOCK_ROWS rows: the split is a function of the batch's sizes, never of the thread
count, so neither are the sums.  Fewer, larger GEMMs: with 8 blocks of 20 pairs and
halves of every slot the default step trained 1.34x the step before on one thread, with
these 1.83x (docs/results/fused_step.md, the two runs in its history)."""


Tables = namedtuple("Tables", "X W_t O bias train_x")
"""The trained tables: x (N, d), W_t (I, d, k) (W_i^T, params.slot_major's buffer), O
(N, k), the biases (N,), and whether x is trained (else fixed dense features)."""
Moments = namedtuple("Moments", "mX vX mW vW mO vO mb vb")
"""Adam's moments of each table, W's as W_t (a (1, d) dummy for x when x is fixed)."""
Routing = namedtuple("Routing", "iters scale rule exact")
"""Algorithm 1's m, c's scale, rule code (capsules.rule_code) and exact gradients."""


def _blocks(n):
    """The number of blocks of ``n`` rows (``BLOCKS``, ``BLOCK_ROWS``)."""
    return max(1, min(BLOCKS, n // BLOCK_ROWS))


@overload(_blocks, inline="always")
def _blocks_in_kernels(n):
    return _blocks  # the Python function, compiled and inlined into the calling kernel


def supports(cfg, features_kind):
    """True when ``_train_chunk`` trains this run: ``features_kind`` is None
    (featureless), 'dense' or 'sparse'; the skip-gram term and sparse features use
    step.TrainStep."""
    return features_kind != "sparse" and not float(cfg.skipgram_weight or 0.0)


# --------------------------------------------------------------- forward stages


@kernel(parallel=True, fastmath=REASSOC)
def _squash_nodes(X, x_nodes, G, x, u):
    """x = X[x_nodes], u = squash(x) (Eq. 1), once per distinct node."""
    for g in prange(G):
        x[g] = X[x_nodes[g]]
        squash_vector(x[g], u[g])


@kernel(parallel=True)
def _predict(u, x_of_row, slot_ptr, W_t, u_rows, u_hat_rows):
    """u_hat = W_i u (Eq. 2) on the distinct rows: u_rows[r] = u[x_of_row[r]], then one
    GEMM per half of each slot's rows (u_rows @ W_i^T; W_t[i] is W_i^T), 2I fixed items."""
    n_slots = W_t.shape[0]
    for item in prange(2 * n_slots):
        i = item // 2
        mid = (slot_ptr[i] + slot_ptr[i + 1]) // 2
        if slot_ptr[i + 1] - slot_ptr[i] < 2 * BLOCK_ROWS:
            mid = slot_ptr[i + 1]  # one GEMM for the slot: the second item has none
        lo = slot_ptr[i] if item % 2 == 0 else mid
        hi = mid if item % 2 == 0 else slot_ptr[i + 1]
        for r in range(lo, hi):
            u_rows[r] = u[x_of_row[r]]
        block_nn(u_rows, W_t[i], u_hat_rows, lo, hi)


@kernel(parallel=True, fastmath=REASSOC)
def _route_pairs(u_hat_rows, inv, n_pairs, iters, scale, rule, u_hat, c, s, e_all, b_all):
    """u_hat[i, p] = u_hat_rows[inv[i, p]] (capsules.gather_pair), then Algorithm 1 per
    pair (capsules.route_pair)."""
    for p in prange(n_pairs):
        gather_pair(u_hat_rows, inv, p, u_hat)
        b_all[p] = 0.0
        route_pair(u_hat, p, iters, scale, rule, c, s, e_all, b_all[p])


@kernel(parallel=True, fastmath=REASSOC)
def _output_layer(e, O, bias, targets, sampled, log_q_true, log_q_sampled, O_s, bq, z_s, loss,
                  d_true, d_s, d_sT):  # fmt: skip
    """z_t = e.o_t + b_t - log Q(t) (capsules.target_logit), z_s = e.o_s + b_s - log Q(s)
    (Eq. 3; capsules.add_to_row), then the softmax of each pair (capsules.softmax_pair):
    its loss and dL/dz, also transposed (``d_sT`` (S, P), for d_O), in blocks of pairs."""
    n_pairs = e.shape[0]
    n_sampled = sampled.shape[0]
    for j in prange(n_sampled):
        O_s[j] = O[sampled[j]]
        bq[j] = bias[sampled[j]] - log_q_sampled[j]
    inv_p = 1.0 / n_pairs
    nb = _blocks(n_pairs)
    for blk in prange(nb):
        lo = blk * n_pairs // nb
        hi = (blk + 1) * n_pairs // nb
        block_nt(e, O_s, z_s, lo, hi)
        for p in range(lo, hi):
            t = targets[p]
            d_true[p] = target_logit(e, p, O, bias, t, log_q_true[p])  # in the tables' dtype
            z_t = d_true[p]
            add_to_row(z_s, p, bq)
            loss[p], d_true[p] = softmax_pair(z_t, z_s[p], t, sampled, inv_p, d_s[p])
        for j in range(n_sampled):  # the block transposed: contiguous runs in d_sT
            for p in range(lo, hi):
                d_sT[j, p] = d_s[p, j]


@kernel(parallel=True)
def _output_backward(e, O, targets, d_true, d_s, d_sT, O_s, o_of_target, n_o, d_e, d_O, d_bias,
                     bias_acc):  # fmt: skip
    """d_e = d_z_t o_t + sum_s d_z_s o_s; d_o_s = sum_p d_z_ps e_p (V' is rows 0..S-1 of
    d_O) and d_o_t += d_z_t e_p over the pairs in order (grads.add_scaled_row); likewise
    the biases (grads.sampled_bias_grads, float64 sums in ``bias_acc`` (S,);
    grads.scatter_scalars)."""
    n_pairs, k = e.shape
    n_sampled = O_s.shape[0]
    nbp, nbs = _blocks(n_pairs), _blocks(n_sampled)
    for blk in prange(nbp + nbs):
        if blk < nbp:  # d_e, a block of pairs
            lo = blk * n_pairs // nbp
            hi = (blk + 1) * n_pairs // nbp
            block_nn(d_s, O_s, d_e, lo, hi)
            for p in range(lo, hi):
                add_scaled_row(d_e, p, d_true[p], O, targets[p], 0, k)
        else:  # d_O and d_bias of a block of V'
            lo = (blk - nbp) * n_sampled // nbs
            hi = (blk - nbp + 1) * n_sampled // nbs
            block_nn(d_sT, e, d_O, lo, hi)
            sampled_bias_grads(d_s, lo, hi, bias_acc[lo:hi], d_bias)
    for cb in prange((k + 15) // 16):  # the targets, in pair order, per 16 columns
        c0 = cb * 16
        c1 = min(k, c0 + 16)
        for o in range(n_sampled, n_o):
            d_O[o, c0:c1] = 0.0
        for p in range(n_pairs):
            add_scaled_row(d_O, o_of_target[p], d_true[p], e, p, c0, c1)
    for o in range(n_sampled, n_o):
        d_bias[o] = 0.0
    scatter_scalars(o_of_target[:n_pairs], d_true[:n_pairs], d_bias)


# --------------------------------------------------------------- backward stages


@kernel(parallel=True, fastmath=REASSOC)
def _route_back(u_hat, c, s, e_all, d_e, n_pairs, scale, rule, exact, d_u_hat, scratch_i,
                scratch_k):  # fmt: skip
    """d_u_hat from d_e through the routing, per pair (grads.route_backward_pair)."""
    for p in prange(n_pairs):
        scratch_i[0, p] = 0.0
        route_backward_pair(
            u_hat, c, s, e_all, d_e, p, scale, rule, exact, d_u_hat, scratch_i[0, p],
            scratch_i[1, p], scratch_k[0, p], scratch_k[1, p],
        )  # fmt: skip


@kernel(parallel=True)
def _W_backward(u_rows, d_rows, slot_ptr, W_t, train_x, d_W_t, d_u_rows):
    """d_W_i = sum_r d_u_hat_r u_r^T over slot i's rows (d_W_t[i] = u_rows^T d_rows) and,
    with a trained x, d_u_r = W_i^T d_u_hat_r (d_rows @ W_t[i]^T); 2I items."""
    n_slots = W_t.shape[0]
    for item in prange(2 * n_slots):
        i = item % n_slots
        lo, hi = slot_ptr[i], slot_ptr[i + 1]
        if item < n_slots:
            block_tn(u_rows, d_rows, d_W_t[i], lo, hi)
        elif train_x:
            block_nt(d_rows, W_t[i], d_u_rows, lo, hi)


@kernel(parallel=True, fastmath=REASSOC)
def _x_backward(x, d_u_rows, row_ptr, row_list, G, d_u, d_x):
    """d_u_g = sum of d_u_r over node g's rows (ascending; grads.add_row), d_x =
    squash'(x) d_u (grads.squash_backward_vector)."""
    for g in prange(G):
        d_u[g] = 0.0
        for n in range(row_ptr[g], row_ptr[g + 1]):
            add_row(d_u, g, d_u_rows, row_list[n], 0, d_u.shape[1])
        squash_backward_vector(x[g], d_u[g], d_x[g])


# --------------------------------------------------------------- a batch


@kernel(parallel=True)
def loss_and_grads_kernel(tables, model, batch, ws, sizes):
    """The batch's mean loss (capsules.mean_loss, float64) and gradients into the
    workspace ``ws`` (core.loss_and_row_grads' arithmetic); ``tables`` a ``Tables``, ``model`` a
    ``Routing``, ``batch`` a ``Batch`` and ``sizes`` from ``index_batch``."""
    P, m = sizes.P, model
    targets = batch.targets[:P]
    _squash_nodes(tables.X, ws.x_nodes, sizes.G, ws.x, ws.u)
    _predict(ws.u, ws.x_of_row, ws.slot_ptr, tables.W_t, ws.u_rows, ws.u_hat_rows)
    _route_pairs(ws.u_hat_rows, ws.inv, P, m.iters, m.scale, m.rule, ws.u_hat, ws.c, ws.s,
                 ws.e_all, ws.b_all)  # fmt: skip
    e = ws.e_all[m.iters - 1, :P]
    _output_layer(e, tables.O, tables.bias, targets, batch.sampled, batch.log_q_true[:P],
                  batch.log_q_sampled, ws.O_s, ws.bq, ws.z_s[:P], ws.loss, ws.d_true,
                  ws.d_s[:P], ws.d_sT)  # fmt: skip
    _output_backward(e, tables.O, targets, ws.d_true, ws.d_s[:P], ws.d_sT, ws.O_s,
                     ws.o_of_target, sizes.n_o, ws.d_e[:P], ws.d_O, ws.d_bias,
                     ws.bias_acc)  # fmt: skip
    _route_back(ws.u_hat, ws.c, ws.s, ws.e_all, ws.d_e, P, m.scale, m.rule, m.exact,
                ws.d_u_hat, ws.scratch_i, ws.scratch_k)  # fmt: skip
    gather_rows_backward_kernel(ws.d_u_hat, ws.inv, ws.slot_ptr, ws.d_rows)  # the teaching kernel
    _W_backward(ws.u_rows, ws.d_rows, ws.slot_ptr, tables.W_t, tables.train_x, ws.d_W_t,
                ws.d_u_rows)  # fmt: skip
    if tables.train_x:
        _x_backward(ws.x, ws.d_u_rows, ws.row_ptr, ws.row_list, sizes.G, ws.d_u, ws.d_x)
    return mean_loss(ws.loss[:P])


# --------------------------------------------------------------- Adam


@kernel(parallel=True)
def _adam(tables, moments, ws, sizes, coefs, lazy, marks):
    """Adam (optim.Adam, TensorFlow's form) with the batch's gradients: W every element;
    O, the biases and a trained x the batch's rows (lazy) or every row, g = 0 where the
    batch has none (dense; ``marks`` (3, N) give each node's gradient row or -1).
    ``coefs`` an optim.AdamCoefs in the tables' dtype."""
    X, W_t, O, bias = tables.X, tables.W_t, tables.O, tables.bias
    mo = moments
    lr_t, beta1, beta2, eps = coefs.lr_t, coefs.beta1, coefs.beta2, coefs.eps
    c1, c2 = coefs.c1, coefs.c2
    n_slots, d, k = W_t.shape
    Wr, mWr, vWr = (
        W_t.reshape(n_slots * d, k),
        mo.mW.reshape(n_slots * d, k),
        mo.vW.reshape(n_slots * d, k),
    )
    dWr = ws.d_W_t.reshape(n_slots * d, k)
    n_w = n_slots * d  # rows of W (column j of W_i each): items of k elements, as O's rows
    n_rows = sizes.n_o if lazy else O.shape[0]
    n_x = (sizes.G if lazy else X.shape[0]) if tables.train_x else 0
    for item in prange(n_w + n_rows + n_x):
        if item < n_w:
            adam_span(Wr[item], dWr[item], mWr[item], vWr[item], lr_t, beta1, beta2, eps, c1, c2)
        elif item < n_w + n_rows:
            o = item - n_w
            v = ws.o_nodes[o] if lazy else o
            g = o if lazy else marks[2, v]
            if g >= 0:
                adam_span(O[v], ws.d_O[g], mo.mO[v], mo.vO[v], lr_t, beta1, beta2, eps, c1, c2)
                adam_span(bias[v : v + 1], ws.d_bias[g : g + 1], mo.mb[v : v + 1],
                          mo.vb[v : v + 1], lr_t, beta1, beta2, eps, c1, c2)  # fmt: skip
            else:
                adam_span_zero(O[v], mo.mO[v], mo.vO[v], lr_t, beta1, beta2, eps)
                adam_span_zero(
                    bias[v : v + 1], mo.mb[v : v + 1], mo.vb[v : v + 1], lr_t, beta1, beta2, eps
                )
        else:
            r = item - n_w - n_rows
            v = ws.x_nodes[r] if lazy else r
            g = r if lazy else marks[1, v]
            if g >= 0:
                adam_span(X[v], ws.d_x[g], mo.mX[v], mo.vX[v], lr_t, beta1, beta2, eps, c1, c2)
            else:
                adam_span_zero(X[v], mo.mX[v], mo.vX[v], lr_t, beta1, beta2, eps)


# --------------------------------------------------------------- a chunk


@kernel(parallel=True)
def _train_chunk(graph, draws, sampler, tables, moments, model, marks, epoch, batches, steps,
                 lr_t, adam, lazy, losses, pairs):  # fmt: skip
    """Train batches ``batches`` of the epoch (global steps ``steps``, Adam step sizes
    ``lr_t``) one after the other: draw, index, forward and backward, Adam.  Writes each
    batch's mean loss and pairs; stops after a non-finite loss (without its update).
    Returns the number of batches trained.  ``graph`` walk_args.WalkGraph, ``draws``
    batch.Draws, ``sampler`` samplers.SamplerTables, ``tables``, ``moments`` and
    ``model`` as ``FusedStep`` holds them; ``adam`` an optim.AdamCoefs (its lr_t unused)
    in the tables' dtype; ``marks`` (3, N) int64, all -1 (and again on exit)."""
    O = tables.O
    S = sampler.num_sampled
    n_slots, d, k = tables.W_t.shape
    n_pos = draws.positions.shape[0] if draws.positions.shape[0] > 0 else 1
    P_max = draws.batch_size * n_pos
    ws = make_workspace(P_max, S, n_slots, d, k, model.iters, O)
    ws_pairs = P_max
    walks = np.empty((draws.batch_size, n_slots + 1), dtype=np.int64)
    ctx_t = np.empty((n_slots, P_max), dtype=np.int64)
    targets = np.empty(P_max, dtype=np.int64)
    sampled = np.empty(S, dtype=np.int64)
    table = np.empty(hash_table_size(S), dtype=np.int64)
    log_q_true = np.empty(P_max, dtype=O.dtype)
    log_q_sampled = np.empty(S, dtype=O.dtype)
    for n in range(batches.shape[0]):
        P = draw_batch(graph, draws, sampler, epoch, batches[n], steps[n], walks, ctx_t,
                        targets, sampled, table, log_q_true, log_q_sampled)  # fmt: skip
        if P != ws_pairs:  # the short last batch of an epoch in 'shuffle' mode
            ws = make_workspace(P, S, n_slots, d, k, model.iters, O)
            ws_pairs = P
        batch = Batch(ctx_t[:, :P], targets[:P], sampled, log_q_true[:P], log_q_sampled)
        sizes = index_batch(batch.ctx_t, P, batch.targets, sampled, marks, ws)
        loss = loss_and_grads_kernel(tables, model, batch, ws, sizes)
        losses[n] = loss
        pairs[n] = P
        if not np.isfinite(loss):
            unmark(marks, ws, sizes)
            return n + 1
        coefs = AdamCoefs(lr_t[n], adam.beta1, adam.beta2, adam.eps, adam.c1, adam.c2)
        _adam(tables, moments, ws, sizes, coefs, lazy, marks)
        unmark(marks, ws, sizes)
    return batches.shape[0]


# --------------------------------------------------------------- the Python side


def routing_of(mcfg, n_slots, dtype):
    """The ``Routing`` of a config.ModelConfig, in the tables' dtype."""
    return Routing(
        int(mcfg.routing_iters),
        dtype.type(mcfg.scale_for(n_slots)),
        rule_code(mcfg.routing_rule),
        mcfg.grad_mode == "exact",
    )


class FusedStep:
    """The local engines' step on the compiled chunk: ``train(epoch, batches, steps,
    rates, parallel)`` trains those batches of the stream's epoch with the given rates
    and returns ``[(loss, pairs)]`` up to the first non-finite loss.

    ``stream`` (batch.BatchStream, with its sampler), ``params`` (params.Params) and
    ``opt`` (optim.Adam: its moments are updated in place; its betas and eps are
    read, the rates are ``train``'s) as train.LocalEngine holds them; ``mcfg`` the
    config.ModelConfig; ``lazy``: lazy Adam.  ``parallel``: the parallel version of the
    kernels (Numba's threads) or the serial one (no parallel region: what each thread of
    train.AsyncEngine runs, concurrently, on the shared tables)."""

    def __init__(self, stream, params, opt, mcfg, lazy):
        self.stream, self.params, self.opt, self.lazy = stream, params, opt, bool(lazy)
        self.graph = stream.source.graph()
        W_t = params.W.transpose(0, 2, 1)
        if not W_t.flags.c_contiguous:
            raise ValueError("FusedStep: W must be stored slot-major (params.slot_major)")
        dtype = params.O.dtype
        train_x = not params.fixed_features
        dummy = np.zeros((1, params.X.shape[1]), dtype=dtype)
        m, v = opt.m, opt.v
        self.tables = Tables(params.X, W_t, params.O, params.bias, train_x)
        self.moments = Moments(
            m["X"] if train_x else dummy,
            v["X"] if train_x else dummy,
            m["W"].transpose(0, 2, 1),
            v["W"].transpose(0, 2, 1),
            m["O"],
            v["O"],
            m["bias"],
            v["bias"],
        )
        t = self.tables
        if not all(a.flags.c_contiguous for a in self.moments + (t.X, t.W_t, t.O, t.bias)):
            raise ValueError("FusedStep: every table and moment must be C-contiguous")
        self.model = routing_of(mcfg, params.W.shape[0], dtype)
        self.adam = opt.coefs_for(dtype, 0.0)
        self.marks = np.full((3, params.O.shape[0]), -1, dtype=np.int64)

    def copy_for_thread(self):
        """The same step with its own scratch marks (train.AsyncEngine's threads)."""
        other = object.__new__(FusedStep)
        other.__dict__.update(self.__dict__)
        other.marks = np.full_like(self.marks, -1)
        return other

    def lr_t(self, steps, rates):
        """Adam's bias-corrected step size of each global step (optim.bias_corrected at
        t = step + 1, as optim.Adam.lr_t), in the tables' dtype."""
        opt = self.opt
        out = [bias_corrected(rate, s + 1, opt.beta1, opt.beta2) for s, rate in zip(steps, rates)]
        return np.array(out, dtype=self.params.O.dtype)

    def train(self, epoch, batches, steps, rates, parallel=True):
        stream = self.stream
        draws = stream.draws(epoch)
        batches = np.ascontiguousarray(batches, dtype=np.int64)
        steps = np.ascontiguousarray(steps, dtype=np.int64)
        losses = np.zeros(batches.shape[0], dtype=np.float64)
        pairs = np.zeros(batches.shape[0], dtype=np.int64)
        fn = _train_chunk.parallel if parallel else _train_chunk.serial
        with quiet_wraparound():
            done = fn(
                self.graph, draws, stream.sampler_tables(), self.tables, self.moments,
                self.model, self.marks, int(epoch), batches, steps, self.lr_t(steps, rates),
                self.adam, self.lazy, losses, pairs,
            )  # fmt: skip
        return [(float(losses[n]), int(pairs[n])) for n in range(done)]


def loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, mcfg, parallel=True):
    """The compiled step's mean loss and dense gradients (core.Grads) of one given batch,
    in the parameters' dtype (float64 for the gradient checks): the same stages
    ``_train_chunk`` runs, from the index on (tests/test_fused.py checks them against
    central differences and model/reference.py).  Arguments as core.loss_and_grads;
    trained x or dense fixed features."""
    from ...model.core import Grads

    dtype = params.O.dtype
    n_slots, k, d = params.W.shape
    ctx_t = np.ascontiguousarray(np.asarray(ctx, dtype=np.int64).T)
    batch = Batch(
        ctx_t,
        np.ascontiguousarray(targets, dtype=np.int64),
        np.ascontiguousarray(sampled, dtype=np.int64),
        np.log(np.asarray(q_true, dtype=dtype)),
        np.log(np.asarray(q_sampled, dtype=dtype)),
    )
    n_pairs, n_sampled = batch.targets.shape[0], batch.sampled.shape[0]
    W_t = np.ascontiguousarray(params.W.transpose(0, 2, 1))
    train_x = not params.fixed_features
    tables = Tables(np.ascontiguousarray(params.X), W_t, params.O, params.bias, train_x)
    model = routing_of(mcfg, n_slots, dtype)
    ws = make_workspace(n_pairs, n_sampled, n_slots, d, k, model.iters, params.O)
    marks = np.full((3, params.O.shape[0]), -1, dtype=np.int64)
    sizes = index_batch(ctx_t, n_pairs, batch.targets, batch.sampled, marks, ws)
    version = loss_and_grads_kernel.parallel if parallel else loss_and_grads_kernel.serial
    loss = version(tables, model, batch, ws, sizes)
    x_nodes, o_nodes = ws.x_nodes[: sizes.G], ws.o_nodes[: sizes.n_o]
    out = Grads(
        W=np.ascontiguousarray(ws.d_W_t.transpose(0, 2, 1)),
        O=np.zeros_like(params.O),
        bias=np.zeros_like(params.bias),
        X=np.zeros_like(params.X) if train_x else None,
    )
    out.O[o_nodes] = ws.d_O[: sizes.n_o]
    out.bias[o_nodes] = ws.d_bias[: sizes.n_o]
    if train_x:
        out.X[x_nodes] = ws.d_x[: sizes.G]
    return float(loss), out
