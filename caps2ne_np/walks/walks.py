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
This module checks the arguments and holds the public functions; the compiled kernels
they call are in walk_steps.py (one step, walks by id), pair_kernels.py (pairs) and
batch_ids.py (a batch's walk ids, an epoch's permutation), the graph's and the seed's
checks and the graph bundle the kernels read (``WalkGraph``), which inference shares,
in walk_args.py.

Every random choice comes from a counter-based stream keyed by what it is for
(walk id, (epoch, step), ...), so results are bitwise identical on 1 and N threads.
"""

import copy
import math

import numpy as np

from ..errors import InputError, check_int
from ..kernels.rng import quiet_wraparound
from .batch_ids import batch_walk_ids_into, epoch_permutation_into
from .pair_kernels import make_pairs, make_random_pairs
from .walk_args import check_positions, check_seed, walk_graph
from .walk_steps import walks_by_id

# --------------------------------------------------------------------------- validation


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
    graph = walk_graph(indptr, indices, weights, node2vec_p, node2vec_q)
    T = check_int("walks_per_node", walks_per_node, 1)
    q = check_int("walk_length", walk_length, 2)
    seed = check_seed("seed", seed)
    n = graph.indptr.shape[0] - 1
    walks = np.empty((n * T, q), dtype=np.int32)
    with quiet_wraparound():
        walks_by_id(graph, seed, np.arange(n * T, dtype=np.int64), walks)
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
        self._graph = walk_graph(indptr, indices, weights, node2vec_p, node2vec_q)
        self.T = check_int("walks_per_node", walks_per_node, 1)
        self.q = check_int("walk_length", walk_length, 2)
        self.seed = check_seed("seed", seed)
        self.n_nodes = self._graph.indptr.shape[0] - 1
        self.n_walks = self.n_nodes * self.T

    def graph(self):
        """The walks' graph as a compiled kernel reads it (walk_args.WalkGraph)."""
        return self._graph

    @property
    def indptr(self):
        """int64 (N+1,): the CSR row pointers the walks follow."""
        return self._graph.indptr

    @property
    def indices(self):
        """int32 (nnz,): the CSR out-neighbours the walks follow (rows sorted for
        second-order walks)."""
        return self._graph.indices

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
            walks_by_id(self._graph, self.seed, walk_ids, out)
        return out

    def node_counts(self, chunk=1 << 20):
        """How often each node occurs in all N*T walks, int64 (N,), computed in chunks
        of ``chunk`` walks (memory O(chunk q)); the same for any chunk size."""
        chunk = check_int("chunk", chunk, 1)
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
    q = check_int("walk_length", walk_length, 2)
    if isinstance(spec, str):
        if spec == "all":
            return np.arange(q, dtype=np.int64)
        if spec == "random":
            return None
        raise InputError(
            f"target_positions must be 'all', 'random' or a list of positions, got {spec!r}"
        )
    return check_positions("target_positions", spec, q, "'all', 'random' or a list of positions")


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
        make_pairs(walks, walk_ids, positions, ctx, tgt)
    return ctx, tgt


def batches_per_epoch(n_walks, batch_size):
    """ceil(n_walks / batch_size): the authors' number of batches in an epoch."""
    n_walks = check_int("n_walks", n_walks, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    return math.ceil(n_walks / batch_size)


def batch_walk_ids(n_walks, batch_size, seed, epoch, step):
    """B walk ids drawn uniformly with replacement (the authors' batches): int64 (B,).

    Drawn from ``stream3(seed, TAG_BATCH, epoch, step)``, so batch ``step`` of
    ``epoch`` is the same on every run and thread count.
    """
    n_walks = check_int("n_walks", n_walks, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    seed = check_seed("seed", seed)
    epoch = check_seed("epoch", epoch)
    step = check_seed("step", step)
    out = np.empty(batch_size, dtype=np.int64)
    with quiet_wraparound():
        batch_walk_ids_into(n_walks, seed, epoch, step, out)
    return out


def epoch_permutation(n_walks, seed, epoch):
    """A permutation of 0..n_walks-1, int64 (n_walks,), for an optional pass without replacement.

    Fisher-Yates driven by ``stream2(seed, TAG_PERMUTATION, epoch)``; slice it into
    consecutive batches of B (the last one shorter) to visit every walk once.
    """
    n_walks = check_int("n_walks", n_walks, 1)
    seed = check_seed("seed", seed)
    epoch = check_seed("epoch", epoch)
    out = np.empty(n_walks, dtype=np.int64)
    with quiet_wraparound():
        epoch_permutation_into(seed, epoch, out)
    return out


def node_counts(walks, n_nodes):
    """How often each node occurs in the walks: int64 (n_nodes,) (the unigram sampler's counts)."""
    walks = _check_walks(walks)
    n_nodes = check_int("n_nodes", n_nodes, 1)
    if walks.min() < 0 or walks.max() >= n_nodes:
        raise InputError(f"walks must hold node indices in [0, {n_nodes})")
    return np.bincount(walks.ravel(), minlength=n_nodes).astype(np.int64)
