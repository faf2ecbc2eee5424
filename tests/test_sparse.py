"""The spectral stages' kernels (caps2ne_np/kernels/sparse.py) against NumPy and scipy: row
chunks of equal cost, the sparse product in float64 and float32 with bits independent of
the thread count, and the Chebyshev term."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.kernels import sparse
from caps2ne_np.spectral import prone as spectral


def power_law_graph(n=600, m=3000, seed=0):
    """A seeded symmetric graph whose first nodes hold most edges (hubs at low ids)."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n + 1) ** 0.8
    u = rng.choice(n, size=m, p=w / w.sum())
    v = rng.integers(0, n, size=m)
    keep = u != v
    A = sp.coo_matrix((np.ones(keep.sum()), (u[keep], v[keep])), shape=(n, n)).tocsr()
    return spectral.adjacency(A.indptr, A.indices, None, n)


def unsorted(A, seed=1):
    """``A`` with each row's entries stored in a shuffled order (as scipy's sums leave
    some products): the kernels must add them in the stored order, as scipy does."""
    rng = np.random.default_rng(seed)
    indices, data = A.indices.copy(), A.data.copy()
    for i in range(A.shape[0]):
        lo, hi = A.indptr[i], A.indptr[i + 1]
        order = lo + rng.permutation(hi - lo)
        indices[lo:hi], data[lo:hi] = A.indices[order], A.data[order]
    out = sp.csr_matrix((data * rng.uniform(0.5, 2.0, data.size), indices, A.indptr), A.shape)
    out.has_sorted_indices = False
    return out


def test_row_chunks_cover_every_row_once_in_blocks_of_equal_cost():
    A = power_law_graph()
    bounds = sparse.row_chunks(A.indptr, 16)
    assert bounds[0] == 0 and bounds[-1] == A.shape[0] and np.all(np.diff(bounds) > 0)
    cost = np.diff(A.indptr) + 1
    per_block = np.add.reduceat(cost, bounds[:-1])
    assert per_block.max() <= cost.sum() / 16 + cost.max()  # at most one row over a share
    assert np.array_equal(sparse.row_chunks(A.indptr[:1], 4), [0])  # no rows


@pytest.mark.parametrize("width", [1, 16, 138])
def test_matmat_is_scipys_product_in_float64_and_close_in_float32(width):
    A = unsorted(power_law_graph())
    X = np.random.default_rng(2).standard_normal((A.shape[0], width))
    np.testing.assert_array_equal(sparse.matmat(A, X), A @ X)  # scipy's order, scipy's bits
    A32 = spectral.in_precision(A, np.float32)
    Y32 = sparse.matmat(A32, X.astype(np.float32))
    assert Y32.dtype == np.float32
    exact = A32.astype(np.float64) @ X.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(Y32, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())


def test_matmat_bits_do_not_depend_on_the_thread_count():
    A = spectral.in_precision(power_law_graph(3000, 30000), np.float32)
    X = np.random.default_rng(3).standard_normal((A.shape[0], 32)).astype(np.float32)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = sparse.matmat(A, X)
        numba.set_num_threads(old)
        assert np.array_equal(sparse.matmat(A, X), one)
    finally:
        numba.set_num_threads(old)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chebyshev_term_is_the_numpy_steps(dtype):
    M = spectral.in_precision(unsorted(power_law_graph()), dtype)
    rng = np.random.default_rng(4)
    MT, T1, T0, out = (rng.standard_normal((M.shape[0], 16)).astype(dtype) for _ in range(4))
    coef = dtype(-0.37)
    tmp = M @ MT  # the NumPy steps of spectral._chebyshev_block before the kernel
    tmp -= 2 * T1
    T0_expected = tmp - T0
    out_expected = out + coef * T0_expected
    scratch = np.empty_like(MT)
    sparse.chebyshev_term(M, MT, T1, T0, out, coef, scratch, sparse.row_chunks(M.indptr))
    np.testing.assert_array_equal(scratch, M @ MT)
    np.testing.assert_array_equal(T0, T0_expected)
    np.testing.assert_array_equal(out, out_expected)
