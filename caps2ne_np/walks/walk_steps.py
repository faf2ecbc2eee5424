"""The compiled walk kernels: one step, whole walks by id, and the walks grown outwards
from a node that inference samples its contexts from.

One step from a node (``walk_step``: uniform or by edge weight; ``node2vec_step``:
node2vec's second-order step, rejection sampling with an exact fallback); walk number w
(``_walk``, ``_node2vec_walk``) and batches of them by id (``_walks_by_id``,
``_node2vec_walks``, ``_uniform_walks``); the walks grown outwards from a node for
inference (``walk_contexts``, ``node2vec_walk_contexts``); the running sums of a row's
edge weights and the sorted-rows test they need.  Their argument checks are in
walk_args.py; training (walks/walks.py, training/step/fused.py) and inference (inference/infer.py)
both call these.  The training pairs and batch ids are in walks/pair_kernels.py.

Every random choice comes from a counter-based stream keyed by what it is for (walk id,
(node, sample)), never by the thread, so results are bitwise identical on 1 and N
threads.
"""

from numba import prange

from ..kernels.jit import kernel
from ..kernels.rng import TAG_INFER, rand_below, rand_uniform, stream, stream3


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


@kernel(parallel=True, work=lambda indptr, indices, cum, weighted, seed, ids, walks: 8 * walks.size)
def _walks_by_id(indptr, indices, cum, weighted, seed, walk_ids, walks):
    """walks[b] = walk number walk_ids[b] (``_walk``): any walk, on demand."""
    for b in prange(walk_ids.shape[0]):
        _walk(indptr, indices, cum, weighted, seed, walk_ids[b], walks[b])


@kernel(
    parallel=True,
    work=lambda indptr, indices, cum, weighted, inv_p, inv_q, seed, ids, walks: 16 * walks.size,
)
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
