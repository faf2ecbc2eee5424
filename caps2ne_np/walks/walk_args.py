"""The arguments of the walk kernels, checked and prepared: a CSR graph's arrays
(``check_csr``, ``sorted_rows``, ``cumulative_weights``), a seed (``check_seed``),
node2vec's p and q (``check_node2vec``, ``node2vec_params``), target positions
(``check_positions``) and the one bundle every walk kernel of walk_steps.py reads,
``WalkGraph``, built by ``walk_graph``.  Training (walks/walks.py) and inference
(inference/infer.py) both call these before walk_steps.py's kernels; the two kernels
that prepare a graph (the rows' running sums of the weights, the sorted-rows test) are
here, beside their callers."""

import math
import numbers
from collections import namedtuple

import numpy as np
from numba import prange

from ..errors import InputError, check_int
from ..kernels.jit import kernel

_MAX_KEY = 2**63


# --------------------------------------------------------------------------- validation


def check_seed(name, value):
    return check_int(name, value, 0, _MAX_KEY - 1)


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


def check_positions(name, spec, walk_length, expected):
    """``spec``, a sequence of distinct 0-based positions in a walk of length q, as
    int64 (L,), in the given order; InputError naming ``name`` otherwise (``expected``:
    what the caller's spec may be, for the message)."""
    q = check_int("walk_length", walk_length, 2)
    try:
        values = [check_int(name, p, 0, q - 1) for p in spec]
    except TypeError:
        raise InputError(f"{name} must be {expected}, got {spec!r}") from None
    if not values:
        raise InputError(f"{name} must not be empty")
    if len(set(values)) != len(values):
        raise InputError(f"{name} must not repeat a position, got {values}")
    return np.asarray(values, dtype=np.int64)


# --------------------------------------------------------------------------- preparation


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


WalkGraph = namedtuple("WalkGraph", "indptr indices cum weighted inv_p inv_q second_order")
"""A graph as every walk kernel reads it (walk_steps.py; ``walk_graph`` builds it):

indptr int64 (N+1,), indices int32 (nnz,)  the CSR out-edges (rows sorted when
                                           ``second_order``: the membership test needs it)
cum float64 (nnz,)    the rows' running sums of the edge weights (``cumulative_weights``);
                      empty, and ``weighted`` False, for uniform steps
inv_p, inv_q float    node2vec's 1/p and 1/q
second_order bool     node2vec's second-order steps (False when p == q == 1)"""


def walk_graph(indptr, indices, weights, node2vec_p=1.0, node2vec_q=1.0):
    """The ``WalkGraph`` of CSR arrays (checked: ``check_csr``; ``weights`` None for
    uniform steps) and node2vec's p and q (``node2vec_params``): rows sorted for
    second-order walks, the weights' running sums when weighted.  Its scalars are
    Python bool and float, so every bundle has the same Numba type."""
    indptr, indices, weights = check_csr(indptr, indices, weights)
    inv_p, inv_q, second_order = node2vec_params(node2vec_p, node2vec_q)
    if second_order:  # the membership test needs sorted rows
        indices, weights = sorted_rows(indptr, indices, weights)
    if weights is None:
        cum, weighted = np.empty(0, dtype=np.float64), False
    else:
        cum, weighted = cumulative_weights(indptr, weights), True
    return WalkGraph(indptr, indices, cum, weighted, inv_p, inv_q, second_order)


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
