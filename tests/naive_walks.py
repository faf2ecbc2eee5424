"""Slow, obvious references for caps2ne_np.walks.walks and .samplers and the skip-gram negatives.

Same names and arguments as the kernels (outputs are returned, not preallocated),
plain loops, no ``@njit``.  Random draws go through the Python bodies of the
``rng`` kernels (``.py_func``), so integer results must equal the fast kernels'
exactly for the same seed.
"""

import math
import types

import numpy as np

from caps2ne_np.kernels import rng


def _python_namespace(module):
    """The module's kernels as plain Python functions that also call each other's Python bodies.

    ``kernel.py_func`` alone would still call the *compiled* helpers it names
    (``stream`` calls ``mix64``), so each body is rebound to a namespace in which
    every kernel name is its Python body.  Under NUMBA_DISABLE_JIT the kernels are
    already plain functions.
    """
    namespace = dict(vars(module))
    for name, obj in vars(module).items():
        body = getattr(obj, "py_func", None)
        if body is not None:
            namespace[name] = types.FunctionType(body.__code__, namespace, name, body.__defaults__)
    return types.SimpleNamespace(**namespace)


pyrng = _python_namespace(rng)


def uniform_walks(indptr, indices, weights, walks_per_node, walk_length, seed):
    """Walk w = r*N + v from v; each step uniform (or weight-proportional) over
    out-neighbours; sinks repeat."""
    n = len(indptr) - 1
    walks = np.zeros((n * walks_per_node, walk_length), dtype=np.int32)
    with rng.quiet_wraparound():
        for r in range(walks_per_node):
            for start in range(n):
                w = r * n + start
                state = pyrng.stream(seed, w)
                v = start
                walks[w, 0] = v
                for t in range(1, walk_length):
                    lo, hi = int(indptr[v]), int(indptr[v + 1])
                    if hi > lo and weights is None:
                        state, j = pyrng.rand_below(state, hi - lo)
                        v = int(indices[lo + j])
                    elif hi > lo:
                        cum = np.cumsum(
                            np.asarray(weights[lo:hi], dtype=np.float32).astype(np.float64)
                        )
                        if cum[-1] > 0:
                            state, u = pyrng.rand_uniform(state)
                            x = u * cum[-1]
                            above = [e for e in range(hi - lo) if cum[e] > x]
                            e = above[0] if above else [e for e in range(hi - lo) if cum[e] >= x][0]
                            v = int(indices[lo + e])
                    walks[w, t] = v
    return walks


def _first_order_step(indptr, indices, weights, state, v):
    """(state, next node): uniform or weight-proportional over v's out-neighbours; a sink
    (or a row of zero weights) stays put.  The draws of ``uniform_walks``'s steps."""
    lo, hi = int(indptr[v]), int(indptr[v + 1])
    if hi > lo and weights is None:
        state, j = pyrng.rand_below(state, hi - lo)
        return state, int(indices[lo + j])
    if hi > lo:
        cum = np.cumsum(np.asarray(weights[lo:hi], dtype=np.float32).astype(np.float64))
        if cum[-1] > 0:
            state, u = pyrng.rand_uniform(state)
            x = u * cum[-1]
            above = [e for e in range(hi - lo) if cum[e] > x]
            e = above[0] if above else [e for e in range(hi - lo) if cum[e] >= x][0]
            return state, int(indices[lo + e])
    return state, v


def node2vec_alpha(indptr, indices, p, q, t, x):
    """node2vec's search bias: 1/p if x == t, 1 if t -> x is an edge, 1/q otherwise."""
    if x == t:
        return 1.0 / p
    if x in {int(u) for u in indices[indptr[t] : indptr[t + 1]]}:
        return 1.0
    return 1.0 / q


def node2vec_probs(indptr, indices, weights, p, q, t, v):
    """The exact second-order transition P(x | t, v) = w(v, x) alpha(t, x) / Z, as
    {x: probability} over v's out-neighbours (parallel edges add up)."""
    mass = {}
    for e in range(int(indptr[v]), int(indptr[v + 1])):
        x = int(indices[e])
        w = 1.0 if weights is None else float(np.float32(weights[e]))
        mass[x] = mass.get(x, 0.0) + w * node2vec_alpha(indptr, indices, p, q, t, x)
    total = sum(mass.values())
    return {x: m / total for x, m in mass.items()}


def node2vec_step(indptr, indices, weights, p, q, state, t, v):
    """(state, x): propose x as a first-order step from v, draw r ~ U[0, 1) and accept
    when r * max(alpha) < alpha(t, x), else propose again; a sink (or a row of zero
    weights) stays put, drawing nothing."""
    lo, hi = int(indptr[v]), int(indptr[v + 1])
    if hi == lo or (weights is not None and not np.sum(weights[lo:hi], dtype=np.float64) > 0):
        return state, v
    a_max = max(1.0 / p, 1.0, 1.0 / q)
    for _ in range(NODE2VEC_TRIES):
        state, x = _first_order_step(indptr, indices, weights, state, v)
        state, r = pyrng.rand_uniform(state)
        if r * a_max < node2vec_alpha(indptr, indices, p, q, t, x):
            return state, x
    # then exactly: mass w_e alpha(t, x_e) over v's edges in order, one draw
    if weights is None:
        w = np.ones(hi - lo)
    else:
        cum = np.cumsum(np.asarray(weights[lo:hi], dtype=np.float32).astype(np.float64))
        w = np.diff(cum, prepend=0.0)
        w[0] = cum[0]
    xs = [int(x) for x in indices[lo:hi]]
    mass = [float(w[e]) * node2vec_alpha(indptr, indices, p, q, t, x) for e, x in enumerate(xs)]
    total = 0.0
    for m in mass:
        total += m
    state, u = pyrng.rand_uniform(state)
    acc, last = 0.0, 0
    for e, m in enumerate(mass):
        if m > 0.0:
            acc += m
            last = e
            if acc > u * total:
                return state, xs[e]
    return state, xs[last]


NODE2VEC_TRIES = 16  # walk_steps.NODE2VEC_TRIES: proposals before the exact draw


def node2vec_walks(indptr, indices, weights, walks_per_node, walk_length, seed, p, q):
    """Walk w = r*N + v from v, from stream(seed, w): the first step as ``uniform_walks``,
    then ``node2vec_step`` from (previous, current).  Rows must be sorted (the kernel
    sorts them; the order decides which neighbour a draw picks)."""
    n = len(indptr) - 1
    walks = np.zeros((n * walks_per_node, walk_length), dtype=np.int32)
    with rng.quiet_wraparound():
        for w in range(n * walks_per_node):
            state = pyrng.stream(seed, w)
            walk = [w % n]
            state, v = _first_order_step(indptr, indices, weights, state, walk[0])
            walk.append(v)
            while len(walk) < walk_length:
                state, x = node2vec_step(indptr, indices, weights, p, q, state, *walk[-2:])
                walk.append(x)
            walks[w] = walk
    return walks


def node2vec_walk_contexts(out_csr, in_csr, weighted, p, q, nodes, positions, seed, q_len, Z):
    """int32 (V*Z, q_len-1); row a*Z + z: sample z of nodes[a] with v at
    j = positions[z mod L], from stream3(seed, TAG_INFER, v, z).  Backward over in-edges
    (first-order first, then second-order from (v_{t+2}, v_{t+1})), then forward over
    out-edges from (v_{j-1}, v_j) (first-order when j = 0).
    ``*_csr`` = (indptr, indices, weights)."""
    n_slots = q_len - 1
    rows = []
    with rng.quiet_wraparound():
        for v in nodes:
            for z in range(Z):
                j = int(positions[z % len(positions)])
                state = pyrng.stream3(seed, rng.TAG_INFER, int(v), z)
                walk = {j: int(v)}
                for t in range(j - 1, -1, -1):
                    ip, ix, w = in_csr
                    w = w if weighted else None
                    if t == j - 1:
                        state, walk[t] = _first_order_step(ip, ix, w, state, walk[t + 1])
                    else:
                        state, walk[t] = node2vec_step(
                            ip, ix, w, p, q, state, walk[t + 2], walk[t + 1]
                        )
                for t in range(j + 1, n_slots + 1):
                    ip, ix, w = out_csr
                    w = w if weighted else None
                    if t - 2 < 0:
                        state, walk[t] = _first_order_step(ip, ix, w, state, walk[t - 1])
                    else:
                        state, walk[t] = node2vec_step(
                            ip, ix, w, p, q, state, walk[t - 2], walk[t - 1]
                        )
                rows.append([walk[t] for t in range(n_slots + 1) if t != j])
    return np.array(rows, dtype=np.int32)


def _pair(walk, j):
    """(context = the walk without slot j, in order; target = walk[j])."""
    return [int(walk[t]) for t in range(len(walk)) if t != j], int(walk[j])


def make_pairs(walks, walk_ids, positions):
    """Pair b*L + k: walk walk_ids[b], target position positions[k]."""
    ctx, tgt = [], []
    for w in walk_ids:
        for j in positions:
            c, v = _pair(walks[w], j)
            ctx.append(c)
            tgt.append(v)
    q = walks.shape[1]
    return np.array(ctx, dtype=np.int32).reshape(-1, q - 1), np.array(tgt, dtype=np.int32)


def make_random_pairs(walks, walk_ids, seed, key):
    """One pair per walk, the position drawn from stream3(seed, TAG_POSITION, key, walk id)."""
    ctx, tgt = [], []
    with rng.quiet_wraparound():
        for w in walk_ids:
            state = pyrng.stream3(seed, rng.TAG_POSITION, key, int(w))
            state, j = pyrng.rand_below(state, walks.shape[1])
            c, v = _pair(walks[w], int(j))
            ctx.append(c)
            tgt.append(v)
    q = walks.shape[1]
    return np.array(ctx, dtype=np.int32).reshape(-1, q - 1), np.array(tgt, dtype=np.int32)


def batch_walk_ids(n_walks, batch_size, seed, epoch, step):
    """batch_size draws from Uniform{0..n_walks-1}, one stream per (seed, epoch, step)."""
    out = []
    with rng.quiet_wraparound():
        state = pyrng.stream3(seed, rng.TAG_BATCH, epoch, step)
        for _ in range(batch_size):
            state, w = pyrng.rand_below(state, n_walks)
            out.append(int(w))
    return np.array(out, dtype=np.int64)


def epoch_permutation(n_walks, seed, epoch):
    """Fisher-Yates: for i = n-1 .. 1, swap i with j ~ Uniform{0..i}."""
    perm = list(range(n_walks))
    with rng.quiet_wraparound():
        state = pyrng.stream2(seed, rng.TAG_PERMUTATION, epoch)
        for i in range(n_walks - 1, 0, -1):
            state, j = pyrng.rand_below(state, i + 1)
            perm[i], perm[int(j)] = perm[int(j)], perm[i]
    return np.array(perm, dtype=np.int64)


def alias_probs(prob, alias):
    """The distribution an alias table draws from:
    P(c) = (prob[c] + sum_{alias[i]=c} (1 - prob[i])) / n."""
    n = len(prob)
    p = np.zeros(n)
    for i in range(n):
        p[i] += prob[i]
        p[alias[i]] += 1.0 - prob[i]
    return p / n


def draw(sampler, state):
    """One draw from the sampler's base distribution: (state, c)."""
    n = sampler.n
    if sampler.name == "uniform":
        return pyrng.rand_below(state, n)
    if sampler.name == "log_uniform":
        state, u = pyrng.rand_uniform(state)
        c = int(math.floor(math.exp(u * math.log(n + 1)))) - 1
        return state, min(max(c, 0), n - 1)
    state, i = pyrng.rand_below(state, n)
    state, u = pyrng.rand_uniform(state)
    return state, (int(i) if u < sampler._prob[i] else int(sampler._alias[i]))


def sample(sampler, num_sampled, seed, key):
    """Draw until num_sampled distinct nodes are found: (distinct in order of appearance,
    num_tries)."""
    seen, out, num_tries = set(), [], 0
    with rng.quiet_wraparound():
        state = pyrng.stream2(seed, rng.TAG_SAMPLER, key)
        while len(out) < num_sampled:
            state, c = draw(sampler, state)
            num_tries += 1
            if int(c) not in seen:
                seen.add(int(c))
                out.append(int(c))
    return np.array(out, dtype=np.int64), num_tries


def expected_count(p, num_tries):
    """1 - (1 - p)^num_tries, the chance that num_tries draws include a node of probability p."""
    return 1.0 - (1.0 - np.asarray(p, dtype=np.float64)) ** num_tries


def skipgram_negatives(seed, step, n_items, n_negatives, n_sampled):
    """(M, K) positions in V' of each item's negatives (skipgram.negative_positions):
    the stream (seed, TAG_SKIPGRAM, step, m) of rng.py, drawn through the kernels'
    Python bodies."""
    out = np.empty((n_items, n_negatives), dtype=np.int64)
    with rng.quiet_wraparound():
        for m in range(n_items):
            state = pyrng.stream3(seed, rng.TAG_SKIPGRAM, step, m)
            for j in range(n_negatives):
                state, out[m, j] = pyrng.rand_below(state, n_sampled)
    return out
