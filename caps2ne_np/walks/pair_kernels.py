"""The compiled kernels that cut walks into (context, target) training pairs: the pair
of one walk at a target position (``pair_of``), a walk's random target position
(``random_position``) and the pairs of a batch of walks (``make_pairs`` at given
positions, ``make_random_pairs`` at one random position per walk).  The checks and
public functions that call these are in walks.py (docs/walks.md);
training/step/fused_batch.py compiles ``pair_of`` and ``random_position`` into its
batch.  The walks themselves are in walk_steps.py, the batches' walk ids in batch_ids.py.

Every random choice comes from a counter-based stream keyed by what it is for (walk id
and key), never by the thread, so results are bitwise identical on 1 and N threads.
"""

from numba import prange

from ..kernels.jit import inline, kernel
from ..kernels.rng import TAG_POSITION, rand_below, stream3


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
