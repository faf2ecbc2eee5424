r"""The training step compiled whole: a chunk of batches per call, no Python inside.

One call of ``_train_chunk`` trains a list of batches of one epoch, from their ids to
updated tables, with the GIL released; Python sets up, calls once per chunk (about
0.25 s of work, at most 64 batches) and reports between chunks (gensim's
``train_batch_sg`` and umap's ``optimize_layout`` are the models).  A batch, top to
bottom (docs/math.md names the equations; every stage is a parallel kernel below, over
items that own their outputs):

    walks, pairs, V' and Q(.)           _draw_batch    (serial; keyed by (seed, epoch, b, step))
    distinct (slot, node) rows, x nodes _index_batch   (serial; rows.share_slots)
    x = X[nodes], u = squash(x)         _squash_nodes  Eq. 1     capsules.squash_vector
    u_hat = W_i u per distinct row      _predict       Eq. 2     one GEMM per slot (or half)
    c, s, e = Routing(u_hat)            _route_pairs   Alg. 1    capsules.route_pair
    z = e.o + b - log Q, L, dL/dz       _output_layer  Eq. 3     capsules.softmax_pair
    d_e, d_O, d_bias                    _output_backward
    d_u_hat                             _route_back              grads.route_backward_pair
    d_rows = sum over the pairs         grads._gather_rows_backward
    d_W_i, d_u = W_i^T d_u_hat          _W_backward              one GEMM per slot
    d_x = squash'(x) d_u                _x_backward              grads.squash_backward_vector
    Adam, lazy or dense                 _adam                    optim.adam_span

The arithmetic is that of core.loss_and_row_grads and optim.Adam (the same inlined
helpers), with its sums in a fixed order: the results are the same bits on any number
of threads, and agree with the Python step to float32 rounding (tests/test_fused.py;
the float64 gradients are checked against finite differences and the reference).

What it covers: trainable x (featureless graphs, the default) or fixed dense
features, lazy or dense Adam, every sampler, walk mode, batch mode, target rule,
routing rule and gradient mode, node2vec walks.  Sparse fixed features and the
skip-gram term train with step.TrainStep (``supports``).
"""

import numpy as np
from numba import prange
from numba.extending import overload

from ..kernels._jit import REASSOC, kernel
from ..kernels.rng import TAG_POSITION, quiet_wraparound, rand_below, stream3
from ..model.capsules import route_pair, rule_code, softmax_pair, squash_vector
from ..model.grads import _gather_rows_backward, route_backward_pair, squash_backward_vector
from ..model.rows import _share_slots
from .optim import adam_span, adam_span_zero
from .samplers import KIND_ALIAS, KIND_LOG_UNIFORM, _sample_unique
from .walk_kernels import _batch_walk_ids, _node2vec_walk, _walk

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


# --------------------------------------------------------------- drawing a batch


@kernel
def _draw_batch(graph, draws, sampler, epoch, b, step, walks, ctx_t, targets, sampled, table,
                log_q_true, log_q_sampled):  # fmt: skip
    """Batch b of the epoch at global step ``step``: its walks, (context, target) pairs
    (``ctx_t`` (I, P) slot-major, ``targets`` (P,)), V' (``sampled``) and the log
    expected counts; the draws of batch.BatchStream.batch, key for key.  Returns P."""
    indptr, indices, cum, weighted, inv_p, inv_q, second_order = graph
    walk_seed, n_walks, batch_size, order, seed_batch, positions, seed_pos = draws
    kind, n, log_range, prob, alias, p_table, seed_sample, _ = sampler
    q = walks.shape[1]
    # the batch's walks: B ids with replacement, or the epoch's order
    if order.shape[0] == 0:
        ids = np.empty(batch_size, dtype=np.int64)
        _batch_walk_ids(n_walks, seed_batch, epoch, b, ids)
    else:
        ids = order[b * batch_size : min((b + 1) * batch_size, n_walks)]
    n_b = ids.shape[0]
    for w in range(n_b):
        if second_order:
            _node2vec_walk(
                indptr, indices, cum, weighted, inv_p, inv_q, walk_seed, ids[w], walks[w]
            )
        else:
            _walk(indptr, indices, cum, weighted, walk_seed, ids[w], walks[w])
    # pairs: C_v = (v_t : t != j), v = v_j, at the given positions or one random j per walk
    n_pos = positions.shape[0] if positions.shape[0] > 0 else 1
    for w in range(n_b):
        for a in range(n_pos):
            if positions.shape[0] > 0:
                j = positions[a]
            else:
                state = stream3(seed_pos, TAG_POSITION, step, w)
                state, j = rand_below(state, q)
            p = w * n_pos + a
            targets[p] = walks[w, j]
            i = 0
            for t in range(q):
                if t != j:
                    ctx_t[i, p] = walks[w, t]
                    i += 1
    n_pairs = n_b * n_pos
    # V' and log Q(c) = log(1 - (1 - P(c))^num_tries)
    tries = _sample_unique(kind, n, log_range, prob, alias, seed_sample, step, sampled, table)
    for p in range(n_pairs):
        log_q_true[p] = np.log(_expected_count(kind, n, log_range, p_table, targets[p], tries))
    for s in range(sampled.shape[0]):
        log_q_sampled[s] = np.log(_expected_count(kind, n, log_range, p_table, sampled[s], tries))
    return n_pairs


@kernel
def _expected_count(kind, n, log_range, p_table, c, tries):
    """Q(c) = -expm1(tries log1p(-P(c))) in float64, rounded to the tables' float32
    (samplers.expected_count, then the cast core.loss_and_row_grads makes)."""
    if kind == KIND_ALIAS:
        prob = p_table[c]
    elif kind == KIND_LOG_UNIFORM:
        prob = np.log1p(1.0 / (c + 1.0)) / log_range
    else:
        prob = 1.0 / n
    return np.float32(-np.expm1(tries * np.log1p(-prob)))


@kernel
def _index_batch(ctx_t, n_pairs, targets, sampled, marks, rows, x_rows, o_rows):
    """The batch's index: distinct (slot, node) rows (rows.share_slots), their distinct
    nodes in order of first appearance (x), each node's rows ascending (for d_x), and
    the rows of O and the biases the batch touches: V' first (row j is sampled[j]),
    then the targets not in V'.  ``marks`` (3, N) all -1, left marking the batch's x
    and O rows (``_unmark``).  Returns (R, G, n_o)."""
    nodes, slot_ptr, inv = rows
    x_nodes, x_of_row, row_ptr, row_list = x_rows
    o_nodes, o_of_target = o_rows
    R = _share_slots(ctx_t[:, :n_pairs], marks[0], nodes, inv[:, :n_pairs], slot_ptr)
    mark_x, mark_o = marks[1], marks[2]
    G = 0
    for r in range(R):
        v = nodes[r]
        if mark_x[v] < 0:
            mark_x[v] = G
            x_nodes[G] = v
            G += 1
        x_of_row[r] = mark_x[v]
    row_ptr[: G + 1] = 0
    for r in range(R):
        row_ptr[x_of_row[r] + 1] += 1
    for g in range(G):
        row_ptr[g + 1] += row_ptr[g]
    fill = row_ptr[:G].copy()
    for r in range(R):  # rows ascending within each node
        g = x_of_row[r]
        row_list[fill[g]] = r
        fill[g] += 1
    n_o = 0
    for j in range(sampled.shape[0]):
        mark_o[sampled[j]] = n_o
        o_nodes[n_o] = sampled[j]
        n_o += 1
    for p in range(n_pairs):
        t = targets[p]
        if mark_o[t] < 0:
            mark_o[t] = n_o
            o_nodes[n_o] = t
            n_o += 1
        o_of_target[p] = mark_o[t]
    return R, G, n_o


@kernel
def _unmark(marks, x_nodes, G, o_nodes, n_o):
    for g in range(G):
        marks[1, x_nodes[g]] = -1
    for o in range(n_o):
        marks[2, o_nodes[o]] = -1


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
        if hi > lo:
            np.dot(u_rows[lo:hi], W_t[i], u_hat_rows[lo:hi])


@kernel(parallel=True, fastmath=REASSOC)
def _route_pairs(u_hat_rows, inv, n_pairs, iters, scale, rule, u_hat, c, s, e_all, b_all):
    """u_hat[i, p] = u_hat_rows[inv[i, p]], then Algorithm 1 per pair."""
    n_slots = u_hat.shape[0]
    for p in prange(n_pairs):
        for i in range(n_slots):
            u_hat[i, p] = u_hat_rows[inv[i, p]]
        b_all[p] = 0.0
        route_pair(u_hat, p, iters, scale, rule, c, s, e_all, b_all[p])


@kernel(parallel=True, fastmath=REASSOC)
def _output_layer(e, O, bias, targets, sampled, log_q_true, log_q_sampled, O_s, bq, z_s, loss,
                  d_true, d_s, d_sT):  # fmt: skip
    """z_t = e.o_t + b_t - log Q(t), z_s = e.o_s + b_s - log Q(s) (Eq. 3), then the
    softmax of each pair (capsules.softmax_pair): its loss and dL/dz, also transposed
    (``d_sT`` (S, P), for d_O), in blocks of pairs."""
    n_pairs, k = e.shape
    n_sampled = sampled.shape[0]
    for j in prange(n_sampled):
        O_s[j] = O[sampled[j]]
        bq[j] = bias[sampled[j]] - log_q_sampled[j]
    inv_p = 1.0 / n_pairs
    nb = _blocks(n_pairs)
    for blk in prange(nb):
        lo = blk * n_pairs // nb
        hi = (blk + 1) * n_pairs // nb
        if hi > lo:
            np.dot(e[lo:hi], O_s.T, z_s[lo:hi])
        for p in range(lo, hi):
            t = targets[p]
            acc = 0.0
            for j in range(k):
                acc += e[p, j] * O[t, j]
            d_true[p] = acc + bias[t] - log_q_true[p]  # z_t, rounded to the tables' dtype
            z_t = d_true[p]
            for j in range(n_sampled):
                z_s[p, j] += bq[j]
            loss[p], d_true[p] = softmax_pair(z_t, z_s[p], t, sampled, inv_p, d_s[p])
        for j in range(n_sampled):  # the block transposed: contiguous runs in d_sT
            for p in range(lo, hi):
                d_sT[j, p] = d_s[p, j]


@kernel(parallel=True)
def _output_backward(e, O, targets, d_true, d_s, d_sT, O_s, o_of_target, n_o, d_e, d_O, d_bias):
    """d_e = d_z_t o_t + sum_s d_z_s o_s; d_o_s = sum_p d_z_ps e_p (V' is rows 0..S-1 of
    d_O) and d_o_t += d_z_t e_p over the pairs in order; likewise the biases."""
    n_pairs, k = e.shape
    n_sampled = O_s.shape[0]
    nbp, nbs = _blocks(n_pairs), _blocks(n_sampled)
    for blk in prange(nbp + nbs):
        if blk < nbp:  # d_e, a block of pairs
            lo = blk * n_pairs // nbp
            hi = (blk + 1) * n_pairs // nbp
            if hi > lo:
                np.dot(d_s[lo:hi], O_s, d_e[lo:hi])
            for p in range(lo, hi):
                w = d_true[p]
                t = targets[p]
                for j in range(k):
                    d_e[p, j] += w * O[t, j]
        else:  # d_O and d_bias of a block of V'
            lo = (blk - nbp) * n_sampled // nbs
            hi = (blk - nbp + 1) * n_sampled // nbs
            if hi > lo:
                np.dot(d_sT[lo:hi], e, d_O[lo:hi])
            for j in range(lo, hi):
                acc = 0.0
                for p in range(n_pairs):
                    acc += d_sT[j, p]
                d_bias[j] = acc
    for cb in prange((k + 15) // 16):  # the targets, in pair order, per 16 columns
        c0 = cb * 16
        c1 = min(k, c0 + 16)
        for o in range(n_sampled, n_o):
            d_O[o, c0:c1] = 0.0
        for p in range(n_pairs):
            o = o_of_target[p]
            for j in range(c0, c1):
                d_O[o, j] += d_true[p] * e[p, j]
    for o in range(n_sampled, n_o):
        d_bias[o] = 0.0
    for p in range(n_pairs):
        d_bias[o_of_target[p]] += d_true[p]


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
            if hi > lo:
                np.dot(u_rows[lo:hi].T, d_rows[lo:hi], d_W_t[i])
            else:
                d_W_t[i] = 0.0
        elif train_x and hi > lo:
            np.dot(d_rows[lo:hi], W_t[i].T, d_u_rows[lo:hi])


@kernel(parallel=True, fastmath=REASSOC)
def _x_backward(x, d_u_rows, row_ptr, row_list, G, d_u, d_x):
    """d_u_g = sum of d_u_r over node g's rows (ascending), d_x = squash'(x) d_u."""
    for g in prange(G):
        d_u[g] = 0.0
        for n in range(row_ptr[g], row_ptr[g + 1]):
            r = row_list[n]
            for j in range(d_u.shape[1]):
                d_u[g, j] += d_u_rows[r, j]
        squash_backward_vector(x[g], d_u[g], d_x[g])


# --------------------------------------------------------------- a batch


@kernel(parallel=True)
def _loss_and_grads(tables, model, batch, ws, sizes):
    """The batch's mean loss (float64) and gradients into ``ws`` (core.loss_and_row_grads'
    arithmetic); ``batch`` = (ctx_t, targets, sampled, log_q_true, log_q_sampled) and
    ``sizes`` = (P, R, G, n_o) from ``_index_batch``."""
    X, W_t, O, bias, train_x = tables
    iters, scale, rule, exact = model
    ctx_t, targets, sampled, log_q_true, log_q_sampled = batch
    n_pairs, R, G, n_o = sizes
    # fmt: off
    (nodes, slot_ptr, inv, x_nodes, x_of_row, row_ptr, row_list, o_nodes, o_of_target, x, u,
     u_rows, u_hat_rows, u_hat, c, s, e_all, b_all, O_s, z_s, loss, d_true, d_s, d_sT, d_e,
     d_O, d_bias, d_u_hat, scratch_i, scratch_k, d_rows, d_W_t, d_u_rows, d_u, d_x, bq) = ws
    # fmt: on
    P = n_pairs
    _squash_nodes(X, x_nodes, G, x, u)
    _predict(u, x_of_row, slot_ptr, W_t, u_rows, u_hat_rows)
    _route_pairs(u_hat_rows, inv, P, iters, scale, rule, u_hat, c, s, e_all, b_all)
    e = e_all[iters - 1, :P]
    _output_layer(e, O, bias, targets[:P], sampled, log_q_true[:P], log_q_sampled, O_s, bq,
                  z_s[:P], loss, d_true, d_s[:P], d_sT)  # fmt: skip
    _output_backward(e, O, targets[:P], d_true, d_s[:P], d_sT, O_s, o_of_target, n_o,
                     d_e[:P], d_O, d_bias)  # fmt: skip
    _route_back(u_hat, c, s, e_all, d_e, P, scale, rule, exact, d_u_hat, scratch_i, scratch_k)
    _gather_rows_backward(d_u_hat, inv, slot_ptr, d_rows)  # the teaching kernel itself
    _W_backward(u_rows, d_rows, slot_ptr, W_t, train_x, d_W_t, d_u_rows)
    if train_x:
        _x_backward(x, d_u_rows, row_ptr, row_list, G, d_u, d_x)
    total = 0.0
    for p in range(P):
        total += loss[p]
    return total / P


@kernel
def _workspace(P, S, n_slots, d, k, iters, dtype_of):
    """Every array a batch of P pairs, |V'| = S, I slots, feature size d, embedding size
    k and m routing iterations uses (``_loss_and_grads``'s ``ws``), in the dtype of
    ``dtype_of``.  A batch has at most R = I P distinct rows and G = R distinct nodes."""
    R = n_slots * P
    f = dtype_of.dtype
    return (
        np.empty(R, dtype=np.int64),  # nodes: the node of each distinct row
        np.empty(n_slots + 1, dtype=np.int64),  # slot_ptr
        np.empty((n_slots, P), dtype=np.int64),  # inv
        np.empty(R, dtype=np.int64),  # x_nodes
        np.empty(R, dtype=np.int64),  # x_of_row
        np.empty(R + 1, dtype=np.int64),  # row_ptr
        np.empty(R, dtype=np.int64),  # row_list
        np.empty(S + P, dtype=np.int64),  # o_nodes
        np.empty(P, dtype=np.int64),  # o_of_target
        np.empty((R, d), dtype=f),  # x
        np.empty((R, d), dtype=f),  # u
        np.empty((R, d), dtype=f),  # u_rows
        np.empty((R, k), dtype=f),  # u_hat_rows
        np.empty((n_slots, P, k), dtype=f),  # u_hat
        np.empty((iters, P, n_slots), dtype=f),  # c
        np.empty((iters, P, k), dtype=f),  # s
        np.empty((iters, P, k), dtype=f),  # e_all
        np.empty((P, n_slots), dtype=f),  # b_all
        np.empty((S, k), dtype=f),  # O_s
        np.empty((P, S), dtype=f),  # z_s
        np.empty(P, dtype=f),  # loss
        np.empty(P, dtype=f),  # d_true
        np.empty((P, S), dtype=f),  # d_s
        np.empty((S, P), dtype=f),  # d_sT
        np.empty((P, k), dtype=f),  # d_e
        np.empty((S + P, k), dtype=f),  # d_O
        np.empty(S + P, dtype=f),  # d_bias
        np.empty((n_slots, P, k), dtype=f),  # d_u_hat
        np.empty((2, P, n_slots), dtype=f),  # scratch_i: route_backward_pair's d_b, d_c
        np.empty((2, P, k), dtype=f),  # scratch_k: its d_er, d_s
        np.empty((R, k), dtype=f),  # d_rows
        np.empty((n_slots, d, k), dtype=f),  # d_W_t
        np.empty((R, d), dtype=f),  # d_u_rows
        np.empty((R, d), dtype=f),  # d_u
        np.empty((R, d), dtype=f),  # d_x
        np.empty(S, dtype=f),  # bq: b_s - log Q(s)
    )


# --------------------------------------------------------------- Adam


@kernel(parallel=True)
def _adam(tables, moments, ws, sizes, coefs, lazy, marks):
    """Adam (optim.Adam, TensorFlow's form) with the batch's gradients: W every element;
    O, the biases and a trained x the batch's rows (lazy) or every row, g = 0 where the
    batch has none (dense; ``marks`` (3, N) give each node's gradient row or -1).
    ``coefs`` = (lr_t, beta1, beta2, eps, 1 - beta1, 1 - beta2) in the tables' dtype."""
    X, W_t, O, bias, train_x = tables
    mX, vX, mW, vW, mO, vO, mb, vb = moments
    n_pairs, R, G, n_o = sizes
    x_nodes, o_nodes = ws[3], ws[7]
    d_O, d_bias, d_W_t, d_x = ws[25], ws[26], ws[31], ws[34]
    lr_t, beta1, beta2, eps, c1, c2 = coefs
    n_slots, d, k = W_t.shape
    Wr, mWr, vWr = (
        W_t.reshape(n_slots * d, k),
        mW.reshape(n_slots * d, k),
        vW.reshape(n_slots * d, k),
    )
    dWr = d_W_t.reshape(n_slots * d, k)
    n_w = n_slots * d  # rows of W (column j of W_i each): items of k elements, as O's rows
    n_rows = n_o if lazy else O.shape[0]
    n_x = (G if lazy else X.shape[0]) if train_x else 0
    for item in prange(n_w + n_rows + n_x):
        if item < n_w:
            adam_span(Wr[item], dWr[item], mWr[item], vWr[item], lr_t, beta1, beta2, eps, c1, c2)
        elif item < n_w + n_rows:
            o = item - n_w
            v = o_nodes[o] if lazy else o
            g = o if lazy else marks[2, v]
            if g >= 0:
                adam_span(O[v], d_O[g], mO[v], vO[v], lr_t, beta1, beta2, eps, c1, c2)
                adam_span(bias[v : v + 1], d_bias[g : g + 1], mb[v : v + 1], vb[v : v + 1],
                          lr_t, beta1, beta2, eps, c1, c2)  # fmt: skip
            else:
                adam_span_zero(O[v], mO[v], vO[v], lr_t, beta1, beta2, eps)
                adam_span_zero(
                    bias[v : v + 1], mb[v : v + 1], vb[v : v + 1], lr_t, beta1, beta2, eps
                )
        else:
            r = item - n_w - n_rows
            v = x_nodes[r] if lazy else r
            g = r if lazy else marks[1, v]
            if g >= 0:
                adam_span(X[v], d_x[g], mX[v], vX[v], lr_t, beta1, beta2, eps, c1, c2)
            else:
                adam_span_zero(X[v], mX[v], vX[v], lr_t, beta1, beta2, eps)


# --------------------------------------------------------------- a chunk


@kernel(parallel=True)
def _train_chunk(graph, draws, sampler, tables, moments, model, marks, epoch, batches, steps,
                 lr_t, adam, lazy, losses, pairs):  # fmt: skip
    """Train batches ``batches`` of the epoch (global steps ``steps``, Adam step sizes
    ``lr_t``) one after the other: draw, index, forward and backward, Adam.  Writes each
    batch's mean loss and pairs; stops after a non-finite loss (without its update).
    Returns the number of batches trained.  ``adam`` = (beta1, beta2, eps, 1 - beta1,
    1 - beta2) in the tables' dtype; ``marks`` (3, N) int64, all -1 (and again on exit)."""
    X, W_t, O, bias, train_x = tables
    iters = model[0]
    batch_size, positions = draws[2], draws[5]
    num_sampled = sampler[7]
    n_slots, d, k = W_t.shape
    n_pos = positions.shape[0] if positions.shape[0] > 0 else 1
    P_max = batch_size * n_pos
    ws = _workspace(P_max, num_sampled, n_slots, d, k, iters, O)
    ws_pairs = P_max
    walks = np.empty((batch_size, n_slots + 1), dtype=np.int64)
    ctx_t = np.empty((n_slots, P_max), dtype=np.int64)
    targets = np.empty(P_max, dtype=np.int64)
    sampled = np.empty(num_sampled, dtype=np.int64)
    size = 2
    while size < 2 * num_sampled:
        size *= 2
    table = np.empty(size, dtype=np.int64)
    log_q_true = np.empty(P_max, dtype=O.dtype)
    log_q_sampled = np.empty(num_sampled, dtype=O.dtype)
    for n in range(batches.shape[0]):
        P = _draw_batch(graph, draws, sampler, epoch, batches[n], steps[n], walks, ctx_t,
                        targets, sampled, table, log_q_true, log_q_sampled)  # fmt: skip
        if P != ws_pairs:  # the short last batch of an epoch in 'shuffle' mode
            ws = _workspace(P, num_sampled, n_slots, d, k, iters, O)
            ws_pairs = P
        batch = (ctx_t[:, :P], targets[:P], sampled, log_q_true[:P], log_q_sampled)
        sizes = _index_batch(batch[0], P, batch[1], sampled, marks, (ws[0], ws[1], ws[2]),
                             (ws[3], ws[4], ws[5], ws[6]), (ws[7], ws[8]))  # fmt: skip
        R, G, n_o = sizes
        loss = _loss_and_grads(tables, model, batch, ws, (P, R, G, n_o))
        losses[n] = loss
        pairs[n] = P
        if not np.isfinite(loss):
            _unmark(marks, ws[3], G, ws[7], n_o)
            return n + 1
        coefs = (lr_t[n], adam[0], adam[1], adam[2], adam[3], adam[4])
        _adam(tables, moments, ws, (P, R, G, n_o), coefs, lazy, marks)
        _unmark(marks, ws[3], G, ws[7], n_o)
    return batches.shape[0]


# --------------------------------------------------------------- the Python side


class FusedStep:
    """The local engines' step on the compiled chunk: ``train(epoch, batches, steps,
    rates, parallel)`` trains those batches of the stream's epoch with the given rates
    and returns ``[(loss, pairs)]`` up to the first non-finite loss.

    ``stream`` (batch.BatchStream, with its sampler), ``params`` (core.Params) and
    ``opt`` (optim.Adam: its moments are updated in place; its betas and eps are
    read, the rates are ``train``'s) as train.LocalEngine holds them; ``mcfg`` the
    config.ModelConfig; ``lazy``: lazy Adam.  ``parallel``: the parallel version of the
    kernels (Numba's threads) or the serial one (no parallel region: what each thread of
    train.AsyncEngine runs, concurrently, on the shared tables)."""

    def __init__(self, stream, params, opt, mcfg, lazy):
        self.stream, self.params, self.opt, self.lazy = stream, params, opt, bool(lazy)
        src, cfg = stream.source, stream.cfg
        self.graph = (
            src.indptr,
            src.indices,
            src.cum,
            bool(src.weighted),
            float(src.inv_p),
            float(src.inv_q),
            bool(src.second_order),
        )
        self.positions = (
            stream.positions if stream.positions is not None else np.empty(0, dtype=np.int64)
        )
        self.num_sampled = int(cfg.num_sampled)
        W_t = params.W.transpose(0, 2, 1)
        if not W_t.flags.c_contiguous:
            raise ValueError("FusedStep: W must be stored slot-major (core.slot_major)")
        dtype = params.O.dtype
        self.train_x = not params.fixed_features
        dummy = np.zeros((1, params.X.shape[1]), dtype=dtype)
        m, v = opt.m, opt.v
        self.tables = (params.X, W_t, params.O, params.bias, self.train_x)
        self.moments = (
            m["X"] if self.train_x else dummy,
            v["X"] if self.train_x else dummy,
            m["W"].transpose(0, 2, 1),
            v["W"].transpose(0, 2, 1),
            m["O"],
            v["O"],
            m["bias"],
            v["bias"],
        )
        if not all(a.flags.c_contiguous for a in self.moments + self.tables[:4]):
            raise ValueError("FusedStep: every table and moment must be C-contiguous")
        scale = mcfg.scale_for(params.W.shape[0])
        self.model = (
            int(mcfg.routing_iters),
            dtype.type(scale),
            rule_code(mcfg.routing_rule),
            mcfg.grad_mode == "exact",
        )
        dt = dtype.type
        self.adam = (dt(opt.beta1), dt(opt.beta2), dt(opt.eps), dt(1) - dt(opt.beta1),
                     dt(1) - dt(opt.beta2))  # fmt: skip
        self.marks = np.full((3, params.O.shape[0]), -1, dtype=np.int64)

    def copy_for_thread(self):
        """The same step with its own scratch marks (train.AsyncEngine's threads)."""
        other = object.__new__(FusedStep)
        other.__dict__.update(self.__dict__)
        other.marks = np.full_like(self.marks, -1)
        return other

    def lr_t(self, steps, rates):
        """Adam's bias-corrected step size of each global step (optim.Adam.lr_t at
        t = step + 1), in the tables' dtype."""
        opt = self.opt
        out = [
            rate * np.sqrt(1.0 - opt.beta2 ** (s + 1)) / (1.0 - opt.beta1 ** (s + 1))
            for s, rate in zip(steps, rates)
        ]
        return np.array(out, dtype=self.params.O.dtype)

    def train(self, epoch, batches, steps, rates, parallel=True):
        stream = self.stream
        stream.set_epoch(epoch)
        walks = stream._walks
        order = stream._order if stream._order is not None else np.empty(0, dtype=np.int64)
        draws = (
            int(walks.seed),
            int(walks.n_walks),
            int(stream.cfg.batch_size),
            order,
            int(stream.seed_batch),
            self.positions,
            int(stream.seed_pos),
        )
        smp = stream.sampler
        p_table = getattr(smp, "_p", np.empty(0, dtype=np.float64))
        sampler = (
            int(smp._kind),
            int(smp.n),
            float(smp._log_range),
            smp._prob,
            smp._alias,
            p_table,
            int(stream.seed_sample),
            self.num_sampled,
        )
        batches = np.ascontiguousarray(batches, dtype=np.int64)
        steps = np.ascontiguousarray(steps, dtype=np.int64)
        losses = np.zeros(batches.shape[0], dtype=np.float64)
        pairs = np.zeros(batches.shape[0], dtype=np.int64)
        fn = _train_chunk.parallel if parallel else _train_chunk.serial
        with quiet_wraparound():
            done = fn(
                self.graph, draws, sampler, self.tables, self.moments, self.model, self.marks,
                int(epoch), batches, steps, self.lr_t(steps, rates), self.adam, self.lazy,
                losses, pairs,
            )  # fmt: skip
        return [(float(losses[n]), int(pairs[n])) for n in range(done)]


def loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, mcfg, parallel=True):
    """The compiled step's mean loss and dense gradients (core.Grads) of one given batch,
    in the parameters' dtype (float64 for the gradient checks): the same stages
    ``_train_chunk`` runs, from the index on (tests/test_fused.py checks them against
    central differences and model/reference.py).  Arguments as core.loss_and_grads;
    trained x or dense fixed features."""
    from ..model.core import Grads

    dtype = params.O.dtype
    n_slots, k, d = params.W.shape
    ctx_t = np.ascontiguousarray(np.asarray(ctx, dtype=np.int64).T)
    targets = np.ascontiguousarray(targets, dtype=np.int64)
    sampled = np.ascontiguousarray(sampled, dtype=np.int64)
    n_pairs, n_sampled = targets.shape[0], sampled.shape[0]
    log_q_true = np.log(np.asarray(q_true, dtype=dtype))
    log_q_sampled = np.log(np.asarray(q_sampled, dtype=dtype))
    W_t = np.ascontiguousarray(params.W.transpose(0, 2, 1))
    train_x = not params.fixed_features
    tables = (np.ascontiguousarray(params.X), W_t, params.O, params.bias, train_x)
    scale = dtype.type(mcfg.scale_for(n_slots))
    model = (
        int(mcfg.routing_iters),
        scale,
        rule_code(mcfg.routing_rule),
        mcfg.grad_mode == "exact",
    )
    ws = _workspace(n_pairs, n_sampled, n_slots, d, k, model[0], params.O)
    marks = np.full((3, params.O.shape[0]), -1, dtype=np.int64)
    batch = (ctx_t, targets, sampled, log_q_true, log_q_sampled)
    R, G, n_o = _index_batch(ctx_t, n_pairs, targets, sampled, marks, ws[0:3], ws[3:7], ws[7:9])
    version = _loss_and_grads.parallel if parallel else _loss_and_grads.serial
    loss = version(tables, model, batch, ws, (n_pairs, R, G, n_o))
    x_nodes, o_nodes = ws[3][:G], ws[7][:n_o]
    out = Grads(
        W=np.ascontiguousarray(ws[31].transpose(0, 2, 1)),
        O=np.zeros_like(params.O),
        bias=np.zeros_like(params.bias),
        X=np.zeros_like(params.X) if train_x else None,
    )
    out.O[o_nodes] = ws[25][:n_o]
    out.bias[o_nodes] = ws[26][:n_o]
    if train_x:
        out.X[x_nodes] = ws[34][:G]
    return float(loss), out
