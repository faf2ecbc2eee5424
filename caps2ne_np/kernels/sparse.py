"""Sparse-times-dense products on Numba's threads: the spectral stages' one kernel
(spectral/prone.py: the randomized SVD's power iterations, ProNE's Chebyshev filter and
the propagation of the o_v are all products A X with A sparse, X (N, b) dense).

* ``matmat(A, X)``: Y = A X for A scipy CSR, X float64 or float32.
* ``chebyshev_term``: one term of the filter's recurrence, the product and the four
  element-wise steps after it in one pass over the rows.

Every entry Y_ic is summed over row i's stored entries in their stored order, from 0,
with one multiply and one add per entry (no FMA, no reassociation: ``FASTMATH`` is off),
as scipy's ``csr_matvecs`` adds them; in float64 the bits are scipy's ``A @ X``.  The rows
are split into ``ROW_CHUNKS`` blocks of about equal stored entries (``row_chunks``), the
unit of a ``prange`` item: the split depends on A alone, so the bits do not depend on the
thread count, and a thread is not left with the hubs of a power-law graph (equal row
counts left one thread 1.4x the other's work on a 200,000-node graph:
docs/results/scale_spectral.md).
"""

import numpy as np
from numba import prange

from .jit import inline, kernel

ROW_CHUNKS = 256
"""Blocks of rows per product (``row_chunks``): enough that the threads' shares of stored
entries are nearly equal, few enough that a block's rows amortise its start."""


def row_chunks(indptr, chunks=ROW_CHUNKS):
    """(B + 1,) int64 row boundaries splitting a CSR matrix's rows into B <= ``chunks``
    consecutive blocks of about equal cost (stored entries plus one per row)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    cost = indptr + np.arange(n + 1)  # cumulative cost of rows 0..i-1
    bounds = np.searchsorted(cost, np.linspace(0, cost[-1], max(1, min(chunks, n)) + 1))
    bounds[0], bounds[-1] = 0, n
    return np.unique(bounds)


@inline
def _row_product(indptr, indices, data, X, Y, i):
    """Y[i] = row i of A times X, A (n, m) in CSR (indptr, indices, data): Y_ic = the sum
    of A_ij X_jc over row i's stored entries in their stored order, from 0."""
    for c in range(Y.shape[1]):
        Y[i, c] = 0.0
    for jj in range(indptr[i], indptr[i + 1]):
        j = indices[jj]
        a = data[jj]
        for c in range(Y.shape[1]):
            Y[i, c] += a * X[j, c]


@kernel(parallel=True, work=lambda indptr, indices, data, bounds, X, Y: indices.size * Y.shape[1])
def _csr_matmat(indptr, indices, data, bounds, X, Y):
    """Y = A X, A (n, m) in CSR, X (m, b), Y (n, b), by ``_row_product``."""
    for k in prange(bounds.shape[0] - 1):
        for i in range(bounds[k], bounds[k + 1]):
            _row_product(indptr, indices, data, X, Y, i)


def _operands(A, X):
    """A's arrays in X's dtype (float64 unless X is float32) and X C-contiguous."""
    dtype = np.float32 if np.asarray(X).dtype == np.float32 else np.float64
    X = np.ascontiguousarray(X, dtype=dtype)
    return np.asarray(A.data, dtype=dtype), X


def matmat(A, X, out=None, bounds=None):
    """A X (n, b) for A scipy CSR and X (m, b), in X's precision (float32 for float32,
    else float64), on Numba's threads.  ``out``: a C-contiguous (n, b) block of that dtype
    to write (it must not be X); ``bounds``: ``row_chunks(A.indptr)``, when the caller
    multiplies by A many times."""
    data, X = _operands(A, X)
    if out is None:
        out = np.empty((A.shape[0], X.shape[1]), dtype=X.dtype)
    if bounds is None:
        bounds = row_chunks(A.indptr)
    _csr_matmat(A.indptr, A.indices, data, bounds, X, out)
    return out


@kernel(
    parallel=True,
    work=lambda indptr, indices, data, bounds, MT, T1, T0, out, coef, tmp: (
        indices.size * MT.shape[1]
    ),
)
def _chebyshev_term(indptr, indices, data, bounds, MT, T1, T0, out, coef, tmp):
    """Row by row: tmp = M MT, tmp -= 2 T1, T0 = tmp - T0, out += coef T0 (each step
    rounded as the NumPy expression it replaces, in the blocks' dtype: ``coef`` is a
    scalar of it, and 2 T1 is written T1 + T1 so that no float64 literal widens it)."""
    for k in prange(bounds.shape[0] - 1):
        for i in range(bounds[k], bounds[k + 1]):
            _row_product(indptr, indices, data, MT, tmp, i)
            for c in range(tmp.shape[1]):
                t = tmp[i, c] - (T1[i, c] + T1[i, c])  # 2 T1, exact, in T1's dtype
                t = t - T0[i, c]
                T0[i, c] = t
                out[i, c] += coef * t


def chebyshev_term(M, MT, T1, T0, out, coef, tmp, bounds):
    """The step T_i = 2 X T_{i-1} - T_{i-2} of spectral._chebyshev_block, X = M^2 / 2 - I,
    given MT = M T_{i-1}: T0 (holding T_{i-2}) becomes T_i = M MT - 2 T1 - T0 and ``out``
    gains ``coef`` T_i; ``tmp`` is scratch.  All (n, b) C-contiguous blocks of one dtype,
    ``coef`` a scalar of it, ``bounds`` = ``row_chunks(M.indptr)``.  The same bits as
    the NumPy steps ``tmp = M @ MT; tmp -= 2 * T1; T0[:] = tmp - T0; out += coef * T0``."""
    data = np.asarray(M.data, dtype=MT.dtype)
    _chebyshev_term(M.indptr, M.indices, data, bounds, MT, T1, T0, out, coef, tmp)
