"""Batched matrix products on Numba's threads, each product one single-threaded BLAS call.

Training keeps BLAS at one thread (``threadpoolctl``) and spreads the products over
Numba's thread pool instead: one pool of threads for everything, not two fighting over
the cores (measured: docs/benchmarks.md, "Measurements behind the compilation and
threading choices").

* ``segment_matmul``, ``segment_matmul_tn``: one product per context slot i over the
  block of rows ``ptr[i]:ptr[i+1]`` that slot i owns (parallel over slots): W_i u and
  its gradients on a batch's distinct (slot, node) rows.
* ``row_matmul``: out = a @ b with the rows of ``a`` split into ``CHUNKS`` fixed
  blocks (parallel over blocks).  The split does not depend on the thread count,
  so results are the same on any number of threads.

Inside ``@njit``, ``np.dot`` on 2-D contiguous (C or F order) float arrays calls
BLAS ``gemm`` through SciPy's BLAS, a library of its own.  It is imported here, at
import time, so that it is already loaded when ``train.fit`` limits every BLAS to
one thread: ``threadpoolctl`` only sees libraries loaded before the limit is set.
"""

from importlib import import_module

import numpy as np
from numba import prange

from .jit import inline, kernel

import_module("scipy.linalg.cython_blas")  # loaded before threadpoolctl limits it (above)

CHUNKS = 8


# --- one block of rows: the products every kernel here, and training/step/fused.py's
# stages, run on their own split of the rows (one single-threaded GEMM each)


@inline
def block_nn(a, b, out, lo, hi):
    """out[lo:hi] = a[lo:hi] @ b (nothing for an empty block)."""
    if hi > lo:
        np.dot(a[lo:hi], b, out[lo:hi])


@inline
def block_nt(a, b, out, lo, hi):
    """out[lo:hi] = a[lo:hi] @ b.T (nothing for an empty block)."""
    if hi > lo:
        np.dot(a[lo:hi], b.T, out[lo:hi])


@inline
def block_tn(a, b, out, lo, hi):
    """out = a[lo:hi].T @ b[lo:hi], the sum of the block's outer products (zero for an
    empty block)."""
    if hi > lo:
        np.dot(a[lo:hi].T, b[lo:hi], out)
    else:
        out[...] = 0.0


@kernel(parallel=True, work=lambda a, b, out, chunks: out.size * a.shape[1])
def _rows_nn(a, b, out, chunks):
    n = a.shape[0]
    for c in prange(chunks):
        block_nn(a, b, out, c * n // chunks, (c + 1) * n // chunks)


@kernel(parallel=True, work=lambda a, b, out, chunks: out.size * a.shape[1])
def _rows_nt(a, b, out, chunks):
    n = a.shape[0]
    for c in prange(chunks):
        block_nt(a, b, out, c * n // chunks, (c + 1) * n // chunks)


def row_matmul(a, b, trans_b=False, out=None):
    """out = a @ op(b), rows of a in CHUNKS fixed blocks; a, b C-contiguous 2-D."""
    n = b.shape[0] if trans_b else b.shape[1]
    if out is None:
        out = np.empty((a.shape[0], n), dtype=a.dtype)
    chunks = max(1, min(CHUNKS, a.shape[0]))
    (_rows_nt if trans_b else _rows_nn)(a, b, out, chunks)
    return out


# --- segmented products: one GEMM per slot over that slot's block of rows ---------
# ``ptr`` (I + 1,) splits the rows of a 2-D array into I consecutive blocks, block i
# holding the distinct (slot i, node) rows of a batch (rows.share_slots).


@kernel(parallel=True, work=lambda a, b, ptr, out: out.size * a.shape[1])
def _seg_nn(a, b, ptr, out):
    for i in prange(b.shape[0]):
        block_nn(a, b[i], out, ptr[i], ptr[i + 1])


@kernel(parallel=True, work=lambda a, b, ptr, out: out.size * a.shape[1])
def _seg_nt(a, b, ptr, out):
    for i in prange(b.shape[0]):
        block_nt(a, b[i], out, ptr[i], ptr[i + 1])


@kernel(
    parallel=True,
    work=lambda a, b, ptr, out: out.size * max(1, a.shape[0] // max(1, out.shape[0])),
)
def _seg_tn(a, b, ptr, out):
    for i in prange(out.shape[0]):
        block_tn(a, b, out[i], ptr[i], ptr[i + 1])


def segment_matmul(a, b, ptr, trans_b=False, out=None):
    """out[lo_i:hi_i] = a[lo_i:hi_i] @ op(b[i]) for each block i = [ptr[i], ptr[i+1]).

    ``a`` (R, n) and ``b`` (I, n, m) (or (I, m, n) with ``trans_b``) C-contiguous;
    returns (R, m).  Blocks run in parallel, one single-threaded GEMM each.
    """
    m = b.shape[1] if trans_b else b.shape[2]
    if out is None:
        out = np.empty((a.shape[0], m), dtype=a.dtype)
    (_seg_nt if trans_b else _seg_nn)(a, b, ptr, out)
    return out


def segment_matmul_tn(a, b, ptr, out):
    """out[i] = a[lo_i:hi_i].T @ b[lo_i:hi_i] for each block i (zero for an empty
    block): the per-slot sum of outer products.  ``out`` (I, a.shape[1], b.shape[1])
    C-contiguous, overwritten."""
    _seg_tn(a, b, ptr, out)
    return out


TN_CHUNKS = 4


@kernel(parallel=True, work=lambda a, b, partial, chunks: partial[0].size * a.shape[0])
def _rows_tn(a, b, partial, chunks):
    n = a.shape[0]
    for c in prange(chunks):
        block_tn(a, b, partial[c], c * n // chunks, (c + 1) * n // chunks)


def row_matmul_tn(a, b):
    """a.T @ b for C-contiguous 2-D a (n, m) and b (n, p), without copying a.T: the
    contraction over n is split into TN_CHUNKS fixed blocks (parallel), whose
    partial products are then added in block order (the same sums on any number of
    threads)."""
    chunks = max(1, min(TN_CHUNKS, a.shape[0]))
    partial = np.empty((chunks, a.shape[1], b.shape[1]), dtype=a.dtype)
    _rows_tn(a, b, partial, chunks)
    out = partial[0]
    for c in range(1, chunks):
        out += partial[c]
    return out
