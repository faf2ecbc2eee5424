"""Random walks on a CSR graph and the (context, target) pairs Caps2NE trains on.

Paper, Sec. 2 "Sampling input pairs": T uniform random walks of length q start at
every node (DeepWalk); in a walk (v_0, ..., v_{q-1}) a target v = v_j has the
context C_v = (v_0, ..., v_{j-1}, v_{j+1}, ..., v_{q-1}), the other q-1 nodes in walk
order, and context slot i feeds capsule i (weight W_i).

Symbols: ``walk_length`` q, ``walks_per_node`` T, N nodes, batch size B.

Pipeline (the authors' training loop; docs/walks.md)::

    source = WalkSource(indptr, indices, weights, T, q, seed)     # N*T walks, none stored
    for epoch in range(epochs):
        for step in range(batches_per_epoch(source.n_walks, B)):
            ids = batch_walk_ids(source.n_walks, B, seed, epoch, step)  # with replacement
            walks = source.walks(ids)                       # made per batch, (B, q)
            ctx, tgt = training_pairs(walks, np.arange(B), (3, 4, 5, 6))  # (B*4, q-1), (B*4,)

(``uniform_walks`` makes all N*T walks at once, the same ones, for tests and benchmarks.)

Every random choice comes from a counter-based stream keyed by what it is for
(walk id, (epoch, step), ...), so results are bitwise identical on 1 and N threads.
"""

import copy
import math
import numbers

import numpy as np
from numba import prange

from ..errors import InputError, check_int
from ..kernels._jit import kernel
from ..kernels.rng import (
    TAG_BATCH,
    TAG_INFER,
    TAG_PERMUTATION,
    TAG_POSITION,
    quiet_wraparound,
    rand_below,
    rand_uniform,
    stream,
    stream2,
    stream3,
)

_MAX_KEY = 2**63


# --------------------------------------------------------------------------- kernels


@kernel(parallel=True)
def _cumulative_weights(indptr, weights, cum):
    """cum[e] = sum_{lo <= f <= e} weights[f] for the row [lo, hi) holding edge e (float64).

    indptr int64 (N+1,), weights float32/float64 (nnz,), cum float64 (nnz,), written.
    Each row restarts at zero; the sum runs left to right, so it is reproducible.
    """
    for v in prange(indptr.shape[0] - 1):
        total = 0.0
        for e in range(indptr[v], indptr[v + 1]):
            total += weights[e]
            cum[e] = total


@kernel
def _rows_sorted(indptr, indices):
    """True if every CSR row's indices are non-decreasing (node2vec's membership test
    needs it)."""
    for v in range(indptr.shape[0] - 1):
        for e in range(indptr[v] + 1, indptr[v + 1]):
            if indices[e] < indices[e - 1]:
                return False
    return True


@kernel
def _pick_weighted(cum, lo, hi, x):
    """The first edge e in [lo, hi) with cum[e] > x (binary search), for 0 <= x < cum[hi-1].

    If rounding made x == cum[hi-1], returns the first e with cum[e] >= x, the last
    edge of positive weight, so an edge of weight 0 is never chosen.
    """
    a, b = lo, hi
    while a < b:
        m = (a + b) // 2
        if cum[m] > x:
            b = m
        else:
            a = m + 1
    if a < hi:
        return a
    a, b = lo, hi
    while a < b:
        m = (a + b) // 2
        if cum[m] >= x:
            b = m
        else:
            a = m + 1
    return a


@kernel
def walk_step(indptr, indices, cum, weighted, state, v):
    """One step from v: (state, u) with u ~ Uniform(N(v)), or P(u) = w(v, u) / sum_u' w(v, u')
    if weighted (the first edge whose row-cumulative weight exceeds a uniform draw times
    the row total).  A node without out-edges (or whose out-weights are all 0) stays put.
    """
    lo, hi = indptr[v], indptr[v + 1]
    if hi > lo:
        if weighted:
            total = cum[hi - 1]
            if total > 0.0:
                state, u = rand_uniform(state)
                v = indices[_pick_weighted(cum, lo, hi, u * total)]
        else:
            state, j = rand_below(state, hi - lo)  # int64 in [0, hi - lo)
            v = indices[lo + j]
    return state, v


@kernel
def _has_edge(indptr, indices, t, x):
    """True if x is in the CSR row of t, which must be sorted (binary search, O(log deg t))."""
    a, b = indptr[t], indptr[t + 1]
    while a < b:
        m = (a + b) // 2
        if indices[m] < x:
            a = m + 1
        else:
            b = m
    return a < indptr[t + 1] and indices[a] == x


@kernel
def node2vec_step(indptr, indices, cum, weighted, inv_p, inv_q, state, t, v):
    """P(x | t, v) = w(v, x) alpha(t, x) / Z:  one second-order step from v, come from t
    [node2vec, Grover & Leskovec 2016, Sec. 3.2.2]; returns (state, x).

    alpha(t, x) = 1/p if x == t, 1 if x in N(t) (an edge t -> x), 1/q otherwise.

    Rejection sampling (as PyG's Node2Vec, KnightKing): propose x ~ w(v, .) with the
    draw of ``walk_step``, then draw r ~ U[0, 1) and accept if r * alpha_max < alpha(t, x),
    alpha_max = max(1/p, 1, 1/q); otherwise propose again.  The accepted x has exactly
    the probability above.  If r * alpha_max < min(1/p, 1, 1/q) the proposal is accepted
    without the membership test x in N(t), a binary search in the row of t, whose
    indices must be sorted.  A node without out-edges (or whose out-weights are all 0)
    stays put, as in ``walk_step``.

    After ``NODE2VEC_TRIES`` rejections the step is drawn exactly instead
    (``_node2vec_exact``: one pass over v's edges, one draw): an accepted proposal and
    the exact draw have the same distribution, so their mixture has it too, and a step
    costs at most NODE2VEC_TRIES proposals plus one pass.  (Where almost every proposal
    is rejected -- a directed cycle with p = 0.001, q = 1000 accepts one in 10^6 -- runs
    were 30x slower and a signal waited ~30 s for the kernel.)
    """
    lo, hi = indptr[v], indptr[v + 1]
    if hi == lo:
        return state, v
    total = 0.0
    if weighted:
        total = cum[hi - 1]
        if not total > 0.0:
            return state, v
    a_max = max(inv_p, max(1.0, inv_q))
    a_min = min(inv_p, min(1.0, inv_q))
    for _ in range(NODE2VEC_TRIES):
        if weighted:
            state, u = rand_uniform(state)
            x = indices[_pick_weighted(cum, lo, hi, u * total)]
        else:
            state, j = rand_below(state, hi - lo)  # int64 in [0, hi - lo)
            x = indices[lo + j]
        state, r = rand_uniform(state)
        bar = r * a_max
        if bar < a_min:
            return state, x
        if x == t:
            alpha = inv_p
        elif _has_edge(indptr, indices, t, x):
            alpha = 1.0
        else:
            alpha = inv_q
        if bar < alpha:
            return state, x
    return _node2vec_exact(indptr, indices, cum, weighted, inv_p, inv_q, state, t, v)


NODE2VEC_TRIES = 16
"""Proposals of a node2vec step before it is drawn exactly (``node2vec_step``)."""


@kernel
def _node2vec_exact(indptr, indices, cum, weighted, inv_p, inv_q, state, t, v):
    """The exact second-order step from v (come from t), v with out-edges of positive
    total weight: mass_e = w_e alpha(t, x_e) over v's edges e in order (w_e = 1, or the
    edge's weight as cum[e] - cum[e - 1]), one draw u ~ U[0, 1), the first edge whose
    running mass exceeds u * sum_e mass_e (the last edge of positive mass if rounding
    leaves none); returns (state, x)."""
    lo, hi = indptr[v], indptr[v + 1]
    total = 0.0
    for e in range(lo, hi):
        total += _node2vec_mass(indptr, indices, cum, weighted, inv_p, inv_q, t, lo, e)
    state, u = rand_uniform(state)
    bar = u * total
    acc = 0.0
    last = lo
    for e in range(lo, hi):
        m = _node2vec_mass(indptr, indices, cum, weighted, inv_p, inv_q, t, lo, e)
        if m > 0.0:
            acc += m
            last = e
            if acc > bar:
                return state, indices[e]
    return state, indices[last]


@kernel
def _node2vec_mass(indptr, indices, cum, weighted, inv_p, inv_q, t, lo, e):
    """w_e alpha(t, x_e) of edge e of the row starting at lo (``_node2vec_exact``)."""
    w = 1.0
    if weighted:
        w = cum[e] - cum[e - 1] if e > lo else cum[e]
    x = indices[e]
    if x == t:
        return w * inv_p
    if _has_edge(indptr, indices, t, x):
        return w
    return w * inv_q


@kernel
def _node2vec_walk(indptr, indices, cum, weighted, inv_p, inv_q, seed, w, out):
    """Walk number w into ``out`` (q,) with second-order steps: v_0 = w mod N, v_1 from
    ``walk_step`` (no previous node yet), then v_{t+1} from ``node2vec_step`` with
    (t, v) = (v_{t-1}, v_t).  Draws from stream(seed, w), like ``_walk``.
    """
    n = indptr.shape[0] - 1
    state = stream(seed, w)  # keyed by walk id, not by thread
    v = w % n
    out[0] = v
    prev = v
    state, v = walk_step(indptr, indices, cum, weighted, state, v)
    out[1] = v
    for s in range(2, out.shape[0]):
        state, x = node2vec_step(indptr, indices, cum, weighted, inv_p, inv_q, state, prev, v)
        prev = v
        v = x
        out[s] = v


@kernel
def _walk(indptr, indices, cum, weighted, seed, w, out):
    """Walk number w into ``out`` (q,): starts at v = w mod N, draws from stream(seed, w).

    v_{t+1} ~ Uniform(N(v_t)), or P(v_{t+1} = u) = w(v_t, u) / sum_u' w(v_t, u') if
    weighted.  A node without out-edges (or whose out-weights are all 0) repeats for
    the rest of the walk, so every walk has q valid slots (DeepWalk/node2vec instead
    stop the walk early).  A weighted step draws u in [0, 1) and takes the first edge
    whose row-cumulative weight exceeds u * (row total).
    """
    n = indptr.shape[0] - 1
    state = stream(seed, w)  # keyed by walk id, not by thread
    v = w % n
    out[0] = v
    for t in range(1, out.shape[0]):
        state, v = walk_step(indptr, indices, cum, weighted, state, v)
        out[t] = v


@kernel(parallel=True)
def _uniform_walks(indptr, indices, cum, weighted, seed, walks):
    """All N*T walks: walks[w] = walk number w (``_walk``), for w = r*N + v.

    indptr int64 (N+1,), indices int32 (nnz,), cum float64 (nnz,) from
    ``_cumulative_weights`` (ignored, may be empty, when ``weighted`` is False),
    seed int, walks int32 (N*T, q) written.
    """
    for w in prange(walks.shape[0]):
        _walk(indptr, indices, cum, weighted, seed, w, walks[w])


@kernel(parallel=True)
def _walks_by_id(indptr, indices, cum, weighted, seed, walk_ids, walks):
    """walks[b] = walk number walk_ids[b] (``_walk``): any walk, on demand."""
    for b in prange(walk_ids.shape[0]):
        _walk(indptr, indices, cum, weighted, seed, walk_ids[b], walks[b])


@kernel(parallel=True)
def _node2vec_walks(indptr, indices, cum, weighted, inv_p, inv_q, seed, walk_ids, walks):
    """walks[b] = second-order walk number walk_ids[b] (``_node2vec_walk``)."""
    for b in prange(walk_ids.shape[0]):
        _node2vec_walk(indptr, indices, cum, weighted, inv_p, inv_q, seed, walk_ids[b], walks[b])


@kernel(parallel=True)
def walk_contexts(
    indptr, indices, cum, in_indptr, in_indices, in_cum, weighted, nodes, positions, seed, ctx
):
    """Contexts for inference (Algorithm 3, infer.sample_contexts): C_v of a walk of
    length q with v at position j, for each node a and sample z.

    v_j = v;  v_{t-1} ~ N_in(v_t), t = j, ..., 1;  v_{t+1} ~ N_out(v_t), t = j, ..., q-2;
    C_v = (v_t : t != j) in walk order.

    indptr, indices, cum     : out-edges (CSR int64, int32; float64 row sums of the
                               weights, empty when not ``weighted``)
    in_indptr, in_indices, in_cum : in-edges (the transpose; the same arrays for an
                               undirected graph)
    nodes     : int64 (V,)    graph index of each node to embed
    positions : int64 (L,)    0-based positions; sample z puts v at positions[z mod L]
    seed      : int           sample z of node v draws from stream3(seed, TAG_INFER, v, z)
    ctx       : int32 (V*Z, q-1)  out: row a*Z + z is sample z of nodes[a]

    The backward steps are drawn first (t = j-1 down to 0), then the forward ones.

    Notes: the authors take walks of the full graph started at every node and keep,
    for each position j, one that has v at j.  Growing the walk outwards from v gives,
    on an undirected graph, a stationary walk conditioned on v_j = v (reversibility),
    and needs no search.  A node without edges in a direction stays put (``walk_step``).
    """
    n_rows, n_slots = ctx.shape
    n_samples = n_rows // nodes.shape[0]
    n_pos = positions.shape[0]
    for p in prange(n_rows):
        a = p // n_samples
        z = p % n_samples
        v = nodes[a]
        j = positions[z % n_pos]
        state = stream3(seed, TAG_INFER, v, z)  # keyed by (node, sample), not by thread
        cur = v
        for t in range(j - 1, -1, -1):
            state, cur = walk_step(in_indptr, in_indices, in_cum, weighted, state, cur)
            ctx[p, t] = cur
        cur = v
        for t in range(j + 1, n_slots + 1):
            state, cur = walk_step(indptr, indices, cum, weighted, state, cur)
            ctx[p, t - 1] = cur


@kernel(parallel=True)
def node2vec_walk_contexts(
    indptr,
    indices,
    cum,
    in_indptr,
    in_indices,
    in_cum,
    weighted,
    inv_p,
    inv_q,
    nodes,
    positions,
    seed,
    ctx,
):
    """``walk_contexts`` with node2vec's second-order steps (``node2vec_step``), for a
    model trained on node2vec walks; the same streams, arguments and layout, plus
    inv_p = 1/p, inv_q = 1/q.  All rows (out- and in-edges) must be sorted.

    Backward (t = j-1 .. 0): v_{j-1} ~ N_in(v_j) first-order, then each step is a
    second-order step on the in-edges from (v_{t+2}, v_{t+1}).  Forward (t = j+1 ..):
    from (v_{t-2}, v_{t-1}) on the out-edges, the first one from (v_{j-1}, v_j), so
    first-order only when j = 0.

    Notes: the forward half is exactly a node2vec walk continued from (v_{j-1}, v_j);
    the backward half is a node2vec walk on the reversed graph, which a node2vec walk
    reversed in time is not in general (docs/walks.md).
    """
    n_rows, n_slots = ctx.shape
    n_samples = n_rows // nodes.shape[0]
    n_pos = positions.shape[0]
    for p in prange(n_rows):
        a = p // n_samples
        z = p % n_samples
        v = nodes[a]
        j = positions[z % n_pos]
        state = stream3(seed, TAG_INFER, v, z)  # keyed by (node, sample), not by thread
        prev = -1
        cur = v
        for t in range(j - 1, -1, -1):
            if prev < 0:
                state, x = walk_step(in_indptr, in_indices, in_cum, weighted, state, cur)
            else:
                state, x = node2vec_step(
                    in_indptr, in_indices, in_cum, weighted, inv_p, inv_q, state, prev, cur
                )
            prev = cur
            cur = x
            ctx[p, t] = cur
        prev = ctx[p, j - 1] if j > 0 else -1
        cur = v
        for t in range(j + 1, n_slots + 1):
            if prev < 0:
                state, x = walk_step(indptr, indices, cum, weighted, state, cur)
            else:
                state, x = node2vec_step(
                    indptr, indices, cum, weighted, inv_p, inv_q, state, prev, cur
                )
            prev = cur
            cur = x
            ctx[p, t - 1] = cur


@kernel
def _context_of(walks, w, j, ctx_out, p, tgt_out):
    """tgt_out[p] = v_j; ctx_out[p] = (v_t for t != j, in walk order) for walk w."""
    tgt_out[p] = walks[w, j]
    i = 0
    for t in range(walks.shape[1]):
        if t != j:
            ctx_out[p, i] = walks[w, t]
            i += 1


@kernel(parallel=True)
def make_pairs(walks, walk_ids, positions, ctx_out, tgt_out):
    """C_v = (v_t : t != j) in walk order, v = v_j, for each walk b and each target position j.

    walks int32 (n_walks, q); walk_ids int64 (B,); positions int64 (L,), 0-based,
    each in [0, q); ctx_out int32 (B*L, q-1) and tgt_out int32 (B*L,), written:
    pair b*L + k comes from walk walk_ids[b] with target position positions[k].
    """
    n_pos = positions.shape[0]
    for b in prange(walk_ids.shape[0]):
        w = walk_ids[b]
        for k in range(n_pos):
            _context_of(walks, w, positions[k], ctx_out, b * n_pos + k, tgt_out)


@kernel(parallel=True)
def make_random_pairs(walks, walk_ids, seed, key, ctx_out, tgt_out):
    """One pair per walk: j ~ Uniform{0..q-1}, C_v = (v_t : t != j), v = v_j   [paper, Sec. 2].

    walks int32 (n_walks, q); walk_ids int64 (B,); ctx_out int32 (B, q-1) and tgt_out
    int32 (B,), written.  Walk w's position is drawn from
    ``stream3(seed, TAG_POSITION, key, w)``: keyed by the walk id, so a walk drawn
    twice under the same key gets the same target (pass a new key, e.g. the global
    step, to redraw).
    """
    q = walks.shape[1]
    for b in prange(walk_ids.shape[0]):
        w = walk_ids[b]
        state = stream3(seed, TAG_POSITION, key, w)
        state, j = rand_below(state, q)
        _context_of(walks, w, j, ctx_out, b, tgt_out)


@kernel
def _batch_walk_ids(n_walks, seed, epoch, step, out):
    """out[b] ~ Uniform{0..n_walks-1}, independently (with replacement), from one stream
    (seed, epoch, step)."""
    state = stream3(seed, TAG_BATCH, epoch, step)
    for b in range(out.shape[0]):
        state, w = rand_below(state, n_walks)
        out[b] = w


@kernel
def _epoch_permutation(seed, epoch, out):
    """Fisher-Yates shuffle of 0..n-1 in place of out (int64, (n,)), from stream (seed, epoch).

    for i = n-1 .. 1: j ~ Uniform{0..i}; swap out[i], out[j].  Serial by nature, so
    thread-independent.
    """
    n = out.shape[0]
    for i in range(n):
        out[i] = i
    state = stream2(seed, TAG_PERMUTATION, epoch)
    for i in range(n - 1, 0, -1):
        state, j = rand_below(state, i + 1)
        tmp = out[i]
        out[i] = out[j]
        out[j] = tmp


# --------------------------------------------------------------------------- validation


_check_int = check_int


def check_seed(name, value):
    return _check_int(name, value, 0, _MAX_KEY - 1)


def check_csr(indptr, indices, weights):
    """Contiguous int64 indptr, int32 indices, float32 weights (or None), checked for
    consistency."""
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.shape[0] < 2:
        raise InputError(f"indptr must be 1-D with N+1 >= 2 entries, got shape {indptr.shape}")
    if indices.ndim != 1:
        raise InputError(f"indices must be 1-D, got shape {indices.shape}")
    if not np.issubdtype(indptr.dtype, np.integer) or not np.issubdtype(indices.dtype, np.integer):
        raise InputError("indptr and indices must hold integers")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    if n >= 2**31:
        raise InputError(f"indptr describes {n} nodes; node indices must fit in int32")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.shape[0]:
        raise InputError("indptr must start at 0, be non-decreasing and end at len(indices)")
    if indices.shape[0] and (indices.min() < 0 or indices.max() >= n):
        raise InputError(f"indices must lie in [0, {n}) for a graph with {n} nodes")
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    if weights is not None:
        weights = np.asarray(weights)
        if weights.shape != indices.shape:
            raise InputError(
                f"weights must have the shape of indices {indices.shape}, got {weights.shape}"
            )
        weights = np.ascontiguousarray(weights, dtype=np.float32)
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise InputError("weights must be finite and non-negative")
    return indptr, indices, weights


NODE2VEC_RANGE = (1e-3, 1e3)
"""Allowed p and q: a rejected proposal costs one more draw, and a step needs at most
about max(1/p, 1, 1/q) / min(1/p, 1, 1/q) proposals on average (at most 1e6 here)."""


def check_node2vec(name, value):
    """``value`` (node2vec's p or q) as a float in NODE2VEC_RANGE; InputError naming
    ``name`` otherwise."""
    lo, hi = NODE2VEC_RANGE
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a number in [{lo:g}, {hi:g}], got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and lo <= value <= hi):
        raise InputError(f"{name} must be a finite number in [{lo:g}, {hi:g}], got {value!r}")
    return value


def sorted_rows(indptr, indices, weights):
    """(indices, weights) with every CSR row sorted by node index: the arrays themselves
    when they are sorted already (scipy's canonical CSR), else sorted copies (weights
    permuted with them; ``weights`` may be None)."""
    if _rows_sorted(indptr, indices):
        return indices, weights
    rows = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    order = np.lexsort((indices, rows))
    indices = np.ascontiguousarray(indices[order])
    if weights is not None:
        weights = np.ascontiguousarray(weights[order])
    return indices, weights


def node2vec_params(node2vec_p, node2vec_q):
    """(inv_p, inv_q, second_order) for the kernels: second_order is False when
    p == q == 1, whose walks are the first-order ones (the same code, bit for bit)."""
    p = check_node2vec("node2vec_p", node2vec_p)
    q = check_node2vec("node2vec_q", node2vec_q)
    return 1.0 / p, 1.0 / q, not (p == 1.0 and q == 1.0)


def _check_walks(walks):
    walks = np.asarray(walks)
    if walks.ndim != 2 or walks.shape[0] < 1 or walks.shape[1] < 2:
        raise InputError(
            f"walks must be 2-D (n_walks >= 1, walk_length >= 2), got shape {walks.shape}"
        )
    if not np.issubdtype(walks.dtype, np.integer):
        raise InputError(f"walks must hold integer node indices, got dtype {walks.dtype}")
    return np.ascontiguousarray(walks, dtype=np.int32)


def _check_walk_ids(walk_ids, n_walks):
    walk_ids = np.asarray(walk_ids)
    if walk_ids.ndim != 1 or not np.issubdtype(walk_ids.dtype, np.integer):
        raise InputError(
            f"walk_ids must be a 1-D integer array, got shape {walk_ids.shape}, "
            f"dtype {walk_ids.dtype}"
        )
    if walk_ids.shape[0] and (walk_ids.min() < 0 or walk_ids.max() >= n_walks):
        raise InputError(f"walk_ids must lie in [0, {n_walks})")
    return np.ascontiguousarray(walk_ids, dtype=np.int64)


# --------------------------------------------------------------------------- public API


def cumulative_weights(indptr, weights):
    """Row-wise running sums of the edge weights, float64 (nnz,): cum[e] = sum of weights[lo..e].

    Built once per graph for weighted walks; a step picks the edge by binary search.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    weights = np.ascontiguousarray(weights)
    if weights.dtype not in (np.float32, np.float64):
        weights = weights.astype(np.float64)
    cum = np.empty(weights.shape[0], dtype=np.float64)
    _cumulative_weights(indptr, weights, cum)
    return cum


def uniform_walks(
    indptr, indices, weights, walks_per_node, walk_length, seed, node2vec_p=1.0, node2vec_q=1.0
):
    """T random walks of length q from every node (paper, Sec. 2; DeepWalk), or node2vec's
    second-order walks when p or q is not 1.

    Parameters
    ----------
    indptr, indices, weights : CSR arrays of the (directed) adjacency: out-neighbours
        of v are ``indices[indptr[v]:indptr[v+1]]``.  Converted to contiguous int64,
        int32, float32.  ``weights=None`` gives uniform steps, v_{t+1} ~ Uniform(N(v_t));
        otherwise steps are proportional to the edge weight (non-negative, finite).
    walks_per_node : int >= 1, T.
    walk_length : int >= 2, q (the target plus q-1 context nodes).
    seed : int in [0, 2**63).
    node2vec_p, node2vec_q : node2vec's return parameter p and in-out parameter q, in
        [1e-3, 1e3].  From the second step on, x in N(v) is drawn with probability
        proportional to w(v, x) times 1/p if x is the previous node t, 1 if x is a
        neighbour of t, 1/q otherwise (``node2vec_step``).  p = q = 1 (the default)
        takes the first-order code: the same walks, bit for bit.

    Returns
    -------
    walks : int32 (N*T, q).  Row w = r*N + v is round r's walk from v; it draws from
        ``stream(seed, w)``, so the result depends only on the seed, not on threads.

    Notes
    -----
    A node without out-edges (a sink, or an isolated node; also a node whose
    out-weights are all 0) repeats for the remaining steps, so each walk keeps
    q-1 valid context slots; a walk from an isolated node has the node as its own
    context.  DeepWalk/node2vec (the authors' code) stop such a walk early instead.
    """
    indptr, indices, weights = check_csr(indptr, indices, weights)
    T = _check_int("walks_per_node", walks_per_node, 1)
    q = _check_int("walk_length", walk_length, 2)
    seed = check_seed("seed", seed)
    inv_p, inv_q, second_order = node2vec_params(node2vec_p, node2vec_q)
    if second_order:
        indices, weights = sorted_rows(indptr, indices, weights)
    n = indptr.shape[0] - 1
    if weights is None:
        cum, weighted = np.empty(0, dtype=np.float64), False
    else:
        cum, weighted = cumulative_weights(indptr, weights), True
    walks = np.empty((n * T, q), dtype=np.int32)
    with quiet_wraparound():
        if second_order:
            ids = np.arange(n * T, dtype=np.int64)
            _node2vec_walks(indptr, indices, cum, weighted, inv_p, inv_q, seed, ids, walks)
        else:
            _uniform_walks(indptr, indices, cum, weighted, seed, walks)
    return walks


class WalkSource:
    """The N*T walks of a run without storing them: walk w (w = r*N + v, from node
    v) is a pure function of (seed, w), so a batch generates just its own B walks,
    identical to row w of ``uniform_walks`` with the same node2vec p and q (tested).
    Memory O(B q) instead of O(N T q); the cost, q steps per walk drawn, is tiny next
    to a training step.
    """

    def __init__(
        self,
        indptr,
        indices,
        weights,
        walks_per_node,
        walk_length,
        seed,
        node2vec_p=1.0,
        node2vec_q=1.0,
    ):
        indptr, indices, weights = check_csr(indptr, indices, weights)
        self.T = _check_int("walks_per_node", walks_per_node, 1)
        self.q = _check_int("walk_length", walk_length, 2)
        self.seed = check_seed("seed", seed)
        self.inv_p, self.inv_q, self.second_order = node2vec_params(node2vec_p, node2vec_q)
        if self.second_order:
            indices, weights = sorted_rows(indptr, indices, weights)
        self.indptr, self.indices = indptr, indices
        self.n_nodes = indptr.shape[0] - 1
        self.n_walks = self.n_nodes * self.T
        if weights is None:
            self.cum, self.weighted = np.empty(0, dtype=np.float64), False
        else:
            self.cum, self.weighted = cumulative_weights(indptr, weights), True

    def reseeded(self, seed):
        """The same walk distribution under another seed (fresh walks for a new epoch);
        shares the graph arrays."""
        other = copy.copy(self)
        other.seed = check_seed("seed", seed)
        return other

    def walks(self, walk_ids):
        """int32 (len(walk_ids), q): the walks with these ids."""
        walk_ids = np.ascontiguousarray(walk_ids, dtype=np.int64)
        if walk_ids.size and (walk_ids.min() < 0 or walk_ids.max() >= self.n_walks):
            raise InputError(f"walk_ids must be in [0, {self.n_walks})")
        out = np.empty((walk_ids.shape[0], self.q), dtype=np.int32)
        with quiet_wraparound():  # NUMBA_DISABLE_JIT: the streams' intended uint64 wrap-around
            self._walks(walk_ids, out)
        return out

    def _walks(self, walk_ids, out):
        if self.second_order:
            _node2vec_walks.for_work(out.size * 16)(
                self.indptr,
                self.indices,
                self.cum,
                self.weighted,
                self.inv_p,
                self.inv_q,
                self.seed,
                walk_ids,
                out,
            )
        else:
            _walks_by_id.for_work(out.size * 8)(
                self.indptr, self.indices, self.cum, self.weighted, self.seed, walk_ids, out
            )

    def node_counts(self, chunk=1 << 20):
        """How often each node occurs in all N*T walks, int64 (N,), computed in chunks
        of ``chunk`` walks (memory O(chunk q)); the same for any chunk size."""
        chunk = _check_int("chunk", chunk, 1)
        counts = np.zeros(self.n_nodes, dtype=np.int64)
        for lo in range(0, self.n_walks, chunk):
            ids = np.arange(lo, min(lo + chunk, self.n_walks), dtype=np.int64)
            counts += np.bincount(self.walks(ids).ravel(), minlength=self.n_nodes)
        return counts


def target_positions(spec, walk_length):
    """Parse a target-position spec into 0-based int64 positions, or ``None`` for 'random'.

    'all' -> 0..q-1 (every node of the walk is a target once, q pairs per walk; the
    paper's "rotationally select each node").  A sequence of ints -> those 0-based
    positions, in the given order (the authors use (3, 4, 5, 6) with q = 10 for
    Cora/Citeseer/Pubmed, 0-based in their code: the middle four).  'random' ->
    ``None``: one uniformly drawn position per walk (paper, Sec. 2).
    """
    q = _check_int("walk_length", walk_length, 2)
    if isinstance(spec, str):
        if spec == "all":
            return np.arange(q, dtype=np.int64)
        if spec == "random":
            return None
        raise InputError(
            f"target_positions must be 'all', 'random' or a list of positions, got {spec!r}"
        )
    try:
        values = [_check_int("target_positions", p, 0, q - 1) for p in spec]
    except TypeError:
        raise InputError(
            f"target_positions must be 'all', 'random' or a list of positions, got {spec!r}"
        ) from None
    if not values:
        raise InputError("target_positions must not be empty")
    if len(set(values)) != len(values):
        raise InputError(f"target_positions must not repeat a position, got {values}")
    return np.asarray(values, dtype=np.int64)


def training_pairs(walks, walk_ids, positions="all", seed=0, key=0):
    """(C_v, v) pairs from the walks ``walk_ids``: ctx int32 (P, q-1), tgt int32 (P,).

    ``positions`` is a spec for ``target_positions`` ('all', 'random', or 0-based
    ints) or an int64 array from it.  With L positions, P = B*L and pair b*L + k is
    walk walk_ids[b] with target position positions[k]; with 'random', P = B and the
    position of walk w is drawn from ``stream3(seed, TAG_POSITION, key, w)``.
    """
    walks = _check_walks(walks)
    walk_ids = _check_walk_ids(walk_ids, walks.shape[0])
    q = walks.shape[1]
    if isinstance(positions, np.ndarray) and positions.dtype != object:
        positions = target_positions(positions.tolist(), q)
    else:
        positions = target_positions(positions, q)
    B = walk_ids.shape[0]
    if positions is None:
        seed = check_seed("seed", seed)
        key = check_seed("key", key)
        ctx = np.empty((B, q - 1), dtype=np.int32)
        tgt = np.empty(B, dtype=np.int32)
        with quiet_wraparound():
            make_random_pairs(walks, walk_ids, seed, key, ctx, tgt)
    else:
        P = B * positions.shape[0]
        ctx = np.empty((P, q - 1), dtype=np.int32)
        tgt = np.empty(P, dtype=np.int32)
        make_pairs.for_work(ctx.size)(walks, walk_ids, positions, ctx, tgt)
    return ctx, tgt


def batches_per_epoch(n_walks, batch_size):
    """ceil(n_walks / batch_size): the authors' number of batches in an epoch."""
    n_walks = _check_int("n_walks", n_walks, 1)
    batch_size = _check_int("batch_size", batch_size, 1)
    return math.ceil(n_walks / batch_size)


def batch_walk_ids(n_walks, batch_size, seed, epoch, step):
    """B walk ids drawn uniformly with replacement (the authors' batches): int64 (B,).

    Drawn from ``stream3(seed, TAG_BATCH, epoch, step)``, so batch ``step`` of
    ``epoch`` is the same on every run and thread count.
    """
    n_walks = _check_int("n_walks", n_walks, 1)
    batch_size = _check_int("batch_size", batch_size, 1)
    seed = check_seed("seed", seed)
    epoch = check_seed("epoch", epoch)
    step = check_seed("step", step)
    out = np.empty(batch_size, dtype=np.int64)
    with quiet_wraparound():
        _batch_walk_ids(n_walks, seed, epoch, step, out)
    return out


def epoch_permutation(n_walks, seed, epoch):
    """A permutation of 0..n_walks-1, int64 (n_walks,), for an optional pass without replacement.

    Fisher-Yates driven by ``stream2(seed, TAG_PERMUTATION, epoch)``; slice it into
    consecutive batches of B (the last one shorter) to visit every walk once.
    """
    n_walks = _check_int("n_walks", n_walks, 1)
    seed = check_seed("seed", seed)
    epoch = check_seed("epoch", epoch)
    out = np.empty(n_walks, dtype=np.int64)
    with quiet_wraparound():
        _epoch_permutation(seed, epoch, out)
    return out


def node_counts(walks, n_nodes):
    """How often each node occurs in the walks: int64 (n_nodes,) (the unigram sampler's counts)."""
    walks = _check_walks(walks)
    n_nodes = _check_int("n_nodes", n_nodes, 1)
    if walks.min() < 0 or walks.max() >= n_nodes:
        raise InputError(f"walks must hold node indices in [0, {n_nodes})")
    return np.bincount(walks.ravel(), minlength=n_nodes).astype(np.int64)
