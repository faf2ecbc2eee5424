"""A batch inside the compiled step (training/step/fused.py): drawn (its walks, pairs, V' and
log Q, key for key as batch.BatchStream.batch draws them), indexed (its distinct
(slot, node) rows, x nodes and O rows) and the workspace that holds its forward and
backward pass, every array named (``Workspace``)."""

from collections import namedtuple

import numpy as np

from ...kernels.jit import kernel
from ...model.rows import share_slots_kernel
from ...walks.batch_ids import batch_walk_ids_into
from ...walks.pair_kernels import pair_of, random_position
from ...walks.walk_steps import walk
from .samplers import expected_count_of, node_probability, sample_unique

Batch = namedtuple("Batch", "ctx_t targets sampled log_q_true log_q_sampled")
"""A batch: contexts slot-major (I, P), targets (P,), V' (S,) and the log expected counts."""
Sizes = namedtuple("Sizes", "P R G n_o")
"""A batch's pairs, distinct (slot, node) rows, distinct x nodes and O rows (``index_batch``)."""
Workspace = namedtuple(
    "Workspace",
    "nodes slot_ptr inv x_nodes x_of_row row_ptr row_list o_nodes o_of_target x u u_rows "
    "u_hat_rows u_hat c s e_all b_all O_s z_s loss d_true d_s d_sT d_e d_O d_bias d_u_hat "
    "scratch_i scratch_k d_rows d_W_t d_u_rows d_u d_x bq bias_acc",
)
"""Every array of a batch's forward and backward pass (``make_workspace``)."""


@kernel
def draw_batch(graph, draws, sampler, epoch, b, step, walks, ctx_t, targets, sampled, table,
                log_q_true, log_q_sampled):  # fmt: skip
    """Batch b of the epoch at global step ``step``: its walks, (context, target) pairs
    (``ctx_t`` (I, P) slot-major, ``targets`` (P,)), V' (``sampled``) and the log
    expected counts; the draws of batch.BatchStream.batch, key for key.  ``graph``
    walk_args.WalkGraph, ``draws`` batch.Draws, ``sampler`` samplers.SamplerTables.
    Returns P."""
    dr, sm = draws, sampler
    positions = dr.positions
    q = walks.shape[1]
    # the batch's walks: B ids with replacement, or the epoch's order
    if dr.order.shape[0] == 0:
        ids = np.empty(dr.batch_size, dtype=np.int64)
        batch_walk_ids_into(dr.n_walks, dr.seed_batch, epoch, b, ids)
        if dr.walk_ids.shape[0] > 0:  # walk j of the epoch is walk id walk_ids[j]
            for w in range(ids.shape[0]):
                ids[w] = dr.walk_ids[ids[w]]
    else:
        ids = dr.order[b * dr.batch_size : min((b + 1) * dr.batch_size, dr.n_walks)]
    n_b = ids.shape[0]
    for w in range(n_b):
        walk(graph, dr.walk_seed, ids[w], walks[w])
    # pairs: C_v = (v_t : t != j), v = v_j, at the given positions or one random j per walk
    n_pos = positions.shape[0] if positions.shape[0] > 0 else 1
    for w in range(n_b):
        for a in range(n_pos):
            if positions.shape[0] > 0:
                j = positions[a]
            else:
                j = random_position(dr.seed_pos, step, w, q)
            p = w * n_pos + a
            targets[p] = pair_of(walks[w], j, ctx_t[:, p])
    n_pairs = n_b * n_pos
    # V' and log Q(c) = log(1 - (1 - P(c))^num_tries)
    tries = sample_unique(sm.kind, sm.n, sm.log_range, sm.prob, sm.alias, sm.seed, step,
                           sampled, table)  # fmt: skip
    for p in range(n_pairs):
        log_q_true[p] = np.log(_expected_count(sm, targets[p], tries))
    for s in range(sampled.shape[0]):
        log_q_sampled[s] = np.log(_expected_count(sm, sampled[s], tries))
    return n_pairs


@kernel
def _expected_count(sm, c, tries):
    """Q(c) in float64 (samplers.expected_count_of of samplers.node_probability),
    rounded to the tables' float32 (the cast core.loss_and_row_grads makes)."""
    prob = node_probability(sm.kind, sm.n, sm.log_range, sm.p, c)
    return np.float32(expected_count_of(prob, tries))


@kernel
def index_batch(ctx_t, n_pairs, targets, sampled, marks, ws):
    """The batch's index: distinct (slot, node) rows (rows.share_slots), their distinct
    nodes in order of first appearance (x), each node's rows ascending (for d_x), and
    the rows of O and the biases the batch touches: V' first (row j is sampled[j]),
    then the targets not in V'.  ``marks`` (3, N) all -1, left marking the batch's x
    and O rows (``unmark``), into the workspace ``ws``.  Returns the batch's ``Sizes``."""
    nodes, slot_ptr, inv = ws.nodes, ws.slot_ptr, ws.inv
    x_nodes, x_of_row, row_ptr, row_list = ws.x_nodes, ws.x_of_row, ws.row_ptr, ws.row_list
    o_nodes, o_of_target = ws.o_nodes, ws.o_of_target
    R = share_slots_kernel(ctx_t[:, :n_pairs], marks[0], nodes, inv[:, :n_pairs], slot_ptr)
    mark_x, mark_o = marks[1], marks[2]
    G = _first_seen(nodes, R, mark_x, x_nodes, 0, x_of_row)
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
    n_o = _first_seen(targets, n_pairs, mark_o, o_nodes, n_o, o_of_target)
    return Sizes(n_pairs, R, G, n_o)


@kernel  # a call, not inlined: inlined twice, Numba warned of an out-of-scope variable
def _first_seen(values, n, mark, distinct, count, number):
    """Number the distinct values of ``values[:n]`` in order of first appearance, on
    from ``count``: ``mark[v]`` holds v's number (-1: none yet), a new value is
    appended to ``distinct``, ``number[a]`` is the number of ``values[a]``.  Returns
    the new count."""
    for a in range(n):
        v = values[a]
        if mark[v] < 0:
            mark[v] = count
            distinct[count] = v
            count += 1
        number[a] = mark[v]
    return count


@kernel
def unmark(marks, ws, sizes):
    """Marks of the batch's x and O rows (``index_batch``) back to -1."""
    for g in range(sizes.G):
        marks[1, ws.x_nodes[g]] = -1
    for o in range(sizes.n_o):
        marks[2, ws.o_nodes[o]] = -1


@kernel
def make_workspace(P, S, n_slots, d, k, iters, dtype_of):
    """Every array a batch of P pairs, |V'| = S, I slots, feature size d, embedding size
    k and m routing iterations uses (a ``Workspace``), in the dtype of ``dtype_of``.
    A batch has at most R = I P distinct rows and G = R distinct nodes."""
    R = n_slots * P
    f = dtype_of.dtype
    i8 = np.int64
    return Workspace(
        np.empty(R, dtype=i8),  # nodes: the node of each distinct row
        np.empty(n_slots + 1, dtype=i8),  # slot_ptr
        np.empty((n_slots, P), dtype=i8),  # inv
        np.empty(R, dtype=i8),  # x_nodes
        np.empty(R, dtype=i8),  # x_of_row
        np.empty(R + 1, dtype=i8),  # row_ptr
        np.empty(R, dtype=i8),  # row_list
        np.empty(S + P, dtype=i8),  # o_nodes
        np.empty(P, dtype=i8),  # o_of_target
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
        np.empty(S, dtype=np.float64),  # bias_acc: the float64 sums of d_b_s
    )
