"""The compiled walk kernels: one step, whole walks by id, and the walks grown outwards
from a node that inference samples its contexts from.

One step from a node (``walk_step``: uniform or by edge weight; ``node2vec_step``:
node2vec's second-order step, rejection sampling with an exact fallback); walk number w
(``walk``: first- or second-order, as the graph says) and batches of them by id
(``walks_by_id``); the walks grown outwards from a node for inference
(``walk_contexts``).  ``walks_by_id`` and ``walk_contexts`` pick a first- or a
second-order kernel from Python, so a run compiles only the one it needs.

The walk kernels read the graph as one named bundle, walk_args.WalkGraph (CSR arrays,
the weights' running sums, node2vec's 1/p and 1/q), built and checked by
walk_args.walk_graph, and unpack it once per walk (the contexts: once per call); the
steps inside take its arrays (measured: reading them from the bundle at every step,
or once per context in a helper, made first-order walks 1.4x and contexts 1.3-1.5x
slower).  Training (walks/walks.py, training/step/fused_batch.py) and inference
(inference/infer.py) both call these.  The training pairs are in
walks/pair_kernels.py, the batches' walk ids in walks/batch_ids.py.

Every random choice comes from a counter-based stream keyed by what it is for (walk id,
(node, sample)), never by the thread, so results are bitwise identical on 1 and N
threads.
"""

from numba import prange

from ..kernels.jit import inline, kernel
from ..kernels.rng import TAG_INFER, rand_below, rand_uniform, stream, stream3


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


def walks_by_id(graph, seed, walk_ids, walks):
    """walks[b] = walk number walk_ids[b] (``walk``): any walk, on demand.

    graph walk_args.WalkGraph; seed int; walk_ids int64 (B,); walks int (B, q), written.
    First- and second-order walks are separate kernels, so a run compiles only the one
    its graph asks for.
    """
    kernel_ = _node2vec_walks if graph.second_order else _first_order_walks
    kernel_(graph, seed, walk_ids, walks)


@kernel
def walk(graph, seed, w, out):
    """Walk number w into ``out`` (q,), first- or second-order as ``graph.second_order``
    says (``_first_order_walk``, ``_node2vec_walk``): one walk inside a compiled batch
    (training/step/fused_batch.py)."""
    if graph.second_order:
        _node2vec_walk(graph, seed, w, out)
    else:
        _first_order_walk(graph, seed, w, out)


@kernel
def _first_order_walk(graph, seed, w, out):
    """Walk number w into ``out`` (q,): starts at v = w mod N, draws from stream(seed, w).

    v_{t+1} ~ Uniform(N(v_t)), or P(v_{t+1} = u) = w(v_t, u) / sum_u' w(v_t, u') if
    weighted (``walk_step``).  A node without out-edges (or whose out-weights are all 0)
    repeats for the rest of the walk, so every walk has q valid slots (DeepWalk/node2vec
    instead stop the walk early).
    """
    indptr, indices, cum, weighted = graph.indptr, graph.indices, graph.cum, graph.weighted
    state = stream(seed, w)  # keyed by walk id, not by thread
    v = w % (indptr.shape[0] - 1)
    out[0] = v
    for t in range(1, out.shape[0]):
        state, v = walk_step(indptr, indices, cum, weighted, state, v)
        out[t] = v


@kernel
def _node2vec_walk(graph, seed, w, out):
    """Walk number w into ``out`` (q,) with second-order steps: v_0 = w mod N, v_1 from
    ``walk_step`` (no previous node yet), then v_{t+1} from ``node2vec_step`` with
    (t, v) = (v_{t-1}, v_t).  Draws from stream(seed, w), like ``_first_order_walk``.
    """
    indptr, indices, cum, weighted = graph.indptr, graph.indices, graph.cum, graph.weighted
    inv_p, inv_q = graph.inv_p, graph.inv_q
    state = stream(seed, w)  # keyed by walk id, not by thread
    prev = w % (indptr.shape[0] - 1)
    out[0] = prev
    state, v = walk_step(indptr, indices, cum, weighted, state, prev)
    out[1] = v
    for t in range(2, out.shape[0]):
        state, x = node2vec_step(indptr, indices, cum, weighted, inv_p, inv_q, state, prev, v)
        prev, v = v, x
        out[t] = v


@kernel(parallel=True, work=lambda graph, seed, ids, walks: 8 * walks.size)
def _first_order_walks(graph, seed, walk_ids, walks):
    """walks[b] = first-order walk number walk_ids[b] (``_first_order_walk``)."""
    for b in prange(walk_ids.shape[0]):
        _first_order_walk(graph, seed, walk_ids[b], walks[b])


@kernel(parallel=True, work=lambda graph, seed, ids, walks: 16 * walks.size)
def _node2vec_walks(graph, seed, walk_ids, walks):
    """walks[b] = second-order walk number walk_ids[b] (``_node2vec_walk``)."""
    for b in prange(walk_ids.shape[0]):
        _node2vec_walk(graph, seed, walk_ids[b], walks[b])


def walk_contexts(graph, in_graph, nodes, positions, seed, ctx):
    """Contexts for inference (Algorithm 3, infer.sample_contexts): C_v of a walk of
    length q with v at position j, for each node a and sample z.

    v_j = v;  v_{t-1} ~ N_in(v_t), t = j, ..., 1;  v_{t+1} ~ N_out(v_t), t = j, ..., q-2;
    C_v = (v_t : t != j) in walk order.

    graph     : walk_args.WalkGraph of the out-edges
    in_graph  : walk_args.WalkGraph of the in-edges (the transpose; the same arrays for
                an undirected graph), with the same weighting and p, q
    nodes     : int64 (V,)    graph index of each node to embed
    positions : int64 (L,)    0-based positions; sample z puts v at positions[z mod L]
    seed      : int           sample z of node v draws from stream3(seed, TAG_INFER, v, z)
    ctx       : int32 (V*Z, q-1)  out: row a*Z + z is sample z of nodes[a]

    The backward steps are drawn first (t = j-1 down to 0), then the forward ones:
    first-order steps (``_first_order_contexts``), or node2vec's when
    ``graph.second_order`` (``_node2vec_contexts``), separate kernels so that a run
    compiles only the one it needs.

    Notes: the authors take walks of the full graph started at every node and keep,
    for each position j, one that has v at j.  Growing the walk outwards from v gives,
    on an undirected graph, a stationary walk conditioned on v_j = v (reversibility),
    and needs no search.  A node without edges in a direction stays put (``walk_step``).
    """
    kernel_ = _node2vec_contexts if graph.second_order else _first_order_contexts
    kernel_(graph, in_graph, nodes, positions, seed, ctx)


@inline
def _context_start(nodes, positions, seed, n_rows, p):
    """(v, j, state) of context row p of n_rows = V*Z: node v = nodes[p // Z] and sample
    z = p mod Z, v at j = positions[z mod L], drawing from stream3(seed, TAG_INFER, v, z)."""
    n_samples = n_rows // nodes.shape[0]
    v = nodes[p // n_samples]
    z = p % n_samples
    state = stream3(seed, TAG_INFER, v, z)  # keyed by (node, sample), not by thread
    return v, positions[z % positions.shape[0]], state


@kernel(parallel=True)
def _first_order_contexts(graph, in_graph, nodes, positions, seed, ctx):
    """``walk_contexts`` with first-order steps (``walk_step``): from v at j backwards
    along in-edges, then forwards along out-edges."""
    indptr, indices, cum, weighted = graph.indptr, graph.indices, graph.cum, graph.weighted
    in_indptr, in_indices, in_cum = in_graph.indptr, in_graph.indices, in_graph.cum
    for p in prange(ctx.shape[0]):
        v, j, state = _context_start(nodes, positions, seed, ctx.shape[0], p)
        cur = v
        for t in range(j - 1, -1, -1):
            state, cur = walk_step(in_indptr, in_indices, in_cum, weighted, state, cur)
            ctx[p, t] = cur
        cur = v
        for t in range(j + 1, ctx.shape[1] + 1):
            state, cur = walk_step(indptr, indices, cum, weighted, state, cur)
            ctx[p, t - 1] = cur


@kernel(parallel=True)
def _node2vec_contexts(graph, in_graph, nodes, positions, seed, ctx):
    """``walk_contexts`` with node2vec's second-order steps (``node2vec_step``), for a model
    trained on node2vec walks; all rows (out- and in-edges) must be sorted.

    Backward (t = j-1 .. 0): v_{j-1} ~ N_in(v_j) first-order, then each step is a
    second-order step on the in-edges from (v_{t+2}, v_{t+1}).  Forward (t = j+1 ..):
    from (v_{t-2}, v_{t-1}) on the out-edges, the first one from (v_{j-1}, v_j), so
    first-order only when j = 0.

    Notes: the forward half is exactly a node2vec walk continued from (v_{j-1}, v_j);
    the backward half is a node2vec walk on the reversed graph, which a node2vec walk
    reversed in time is not in general (docs/walks.md).
    """
    indptr, indices, cum, weighted = graph.indptr, graph.indices, graph.cum, graph.weighted
    in_indptr, in_indices, in_cum = in_graph.indptr, in_graph.indices, in_graph.cum
    inv_p, inv_q = graph.inv_p, graph.inv_q
    for p in prange(ctx.shape[0]):
        v, j, state = _context_start(nodes, positions, seed, ctx.shape[0], p)
        prev, cur = -1, v
        for t in range(j - 1, -1, -1):
            if prev < 0:
                state, x = walk_step(in_indptr, in_indices, in_cum, weighted, state, cur)
            else:
                state, x = node2vec_step(
                    in_indptr, in_indices, in_cum, weighted, inv_p, inv_q, state, prev, cur
                )
            prev, cur = cur, x
            ctx[p, t] = cur
        prev, cur = ctx[p, j - 1] if j > 0 else -1, v
        for t in range(j + 1, ctx.shape[1] + 1):
            if prev < 0:
                state, x = walk_step(indptr, indices, cum, weighted, state, cur)
            else:
                state, x = node2vec_step(
                    indptr, indices, cum, weighted, inv_p, inv_q, state, prev, cur
                )
            prev, cur = cur, x
            ctx[p, t - 1] = cur
