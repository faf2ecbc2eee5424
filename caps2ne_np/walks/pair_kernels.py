"""The compiled kernels that cut walks into training pairs and pick a batch's walks:
the (context, target) pairs of a batch of walks (``pair_of``, ``make_pairs``,
``make_random_pairs``, ``random_position``), the walk ids of a batch and an epoch's
permutation.  The checks and public functions that call these are in walks.py
(docs/walks.md); training/step/fused.py compiles ``pair_of``, ``random_position`` and
``_batch_walk_ids`` into its chunk.

The walks themselves (one step, walks by id, inference's contexts) are in
caps2ne_np/walks/walk_steps.py, below training and inference both; this module
re-exports them for the callers that import them from here.

Every random choice comes from a counter-based stream keyed by what it is for (walk id,
(epoch, step), ...), never by the thread, so results are bitwise identical on 1 and N
threads.
"""

from numba import prange

from ..kernels.jit import inline, kernel
from ..kernels.rng import TAG_BATCH, TAG_PERMUTATION, TAG_POSITION, rand_below, stream2, stream3
from .walk_steps import (  # noqa: F401 (re-exported: the walks moved below training)
    NODE2VEC_TRIES,
    _cumulative_weights,
    _has_edge,
    _node2vec_exact,
    _node2vec_mass,
    _node2vec_walk,
    _node2vec_walks,
    _pick_weighted,
    _rows_sorted,
    _uniform_walks,
    _walk,
    _walks_by_id,
    node2vec_step,
    node2vec_walk_contexts,
    walk_contexts,
    walk_step,
)


@inline
def pair_of(walk, j, ctx):
    """The pair of ``walk`` (q,) at target position j: C_v = (v_t : t != j) in walk
    order into ``ctx`` (q-1,), and v = v_j, returned."""
    i = 0
    for t in range(walk.shape[0]):
        if t != j:
            ctx[i] = walk[t]
            i += 1
    return walk[j]


@inline
def random_position(seed, key, w, q):
    """j ~ Uniform{0..q-1} for walk w of a batch, keyed by (seed, key, w)."""
    state = stream3(seed, TAG_POSITION, key, w)
    state, j = rand_below(state, q)
    return j


@kernel(parallel=True, work=lambda walks, walk_ids, positions, ctx_out, tgt_out: ctx_out.size)
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
            p = b * n_pos + k
            tgt_out[p] = pair_of(walks[w], positions[k], ctx_out[p])


@kernel(parallel=True, work=lambda walks, walk_ids, seed, key, ctx_out, tgt_out: ctx_out.size)
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
        tgt_out[b] = pair_of(walks[w], random_position(seed, key, w, q), ctx_out[b])


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
