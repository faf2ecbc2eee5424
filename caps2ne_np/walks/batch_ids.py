"""The compiled kernels that choose an epoch's walks: the walk ids of a batch, drawn with
replacement (``batch_walk_ids_into``, the authors' batches), and an epoch's permutation
of all walks for a pass without replacement (``epoch_permutation_into``).  Their checked
public faces are walks.batch_walk_ids and walks.epoch_permutation;
training/step/fused_batch.py compiles ``batch_walk_ids_into`` into its batch.

Each draws from one counter-based stream keyed by (seed, epoch[, step]), serially, so
results are the same on any thread count.
"""

from ..kernels.jit import kernel
from ..kernels.rng import TAG_BATCH, TAG_PERMUTATION, rand_below, stream2, stream3


@kernel
def batch_walk_ids_into(n_walks, seed, epoch, step, out):
    """out[b] ~ Uniform{0..n_walks-1}, independently (with replacement), from one stream
    (seed, epoch, step)."""
    state = stream3(seed, TAG_BATCH, epoch, step)
    for b in range(out.shape[0]):
        state, w = rand_below(state, n_walks)
        out[b] = w


@kernel
def epoch_permutation_into(seed, epoch, out):
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
