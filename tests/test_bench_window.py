"""The window-T embedding (bench/window.py) against the dense float64 NetMF."""

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from toy_graphs import ring_of_cliques

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import window  # noqa: E402 (bench/window.py, the experiment's module)

sys.path.pop(0)


def netmf_dense(A, T=10, b=1.0):
    """log(max(vol / (b T) (sum_{r=1..T} P^r) D^-1, 1)), P = D^-1 A, dense float64."""
    A = np.asarray(A.todense() if sp.issparse(A) else A, dtype=np.float64)
    d = A.sum(axis=1)
    P = A / d[:, None]
    S, Pr = np.zeros_like(A), np.eye(A.shape[0])
    for _ in range(T):
        Pr = Pr @ P
        S += Pr
    M = A.sum() / (b * T) * S / d[None, :]
    return np.log(np.maximum(M, 1.0))


def circulant(n=40, offsets=(1, 2, 5)):
    """A regular graph: node i joined to i +- each offset (mod n); its walks start from
    the stationary distribution when they start from every node."""
    A = np.zeros((n, n))
    for k in offsets:
        for i in range(n):
            A[i, (i + k) % n] = A[(i + k) % n, i] = 1
    return sp.csr_matrix(A)


def csr_args(A):
    A = sp.csr_matrix(A)
    A.sort_indices()
    return A.indptr, A.indices, None


@pytest.mark.parametrize("T", [1, 3, 10])
def test_exact_matrix_is_netmf(T):
    A = ring_of_cliques(drop_zeros=True)
    M, used = window.matrix(*csr_args(A), window=T, source="exact")
    assert used == "exact"
    np.testing.assert_allclose(M.toarray(), netmf_dense(A, T), rtol=1e-12, atol=1e-12)


def test_exact_matrix_by_blocks():
    A = ring_of_cliques(drop_zeros=True)
    M = window.exact_matrix(A, 10, block=5)  # 5 blocks, the last of 4 columns
    np.testing.assert_allclose(M.toarray(), netmf_dense(A), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(M.toarray(), M.toarray().T)


def test_negative_samples_shift_the_matrix():
    A = ring_of_cliques(drop_zeros=True)
    M, _ = window.matrix(*csr_args(A), negative=5.0, source="exact")
    np.testing.assert_allclose(M.toarray(), netmf_dense(A, 10, 5.0), rtol=1e-12, atol=1e-12)


def test_walk_counts_estimate_netmf():
    """On a regular graph the walks' shifted PMI tends to NetMF's matrix."""
    A = circulant()
    M, used = window.matrix(*csr_args(A), source="walks", walks_per_node=200, walk_length=60)
    assert used == "walks"
    ref = netmf_dense(A)
    big = ref > 0.3
    err = np.abs(M.toarray() - ref)
    assert err[big].mean() < 0.05
    np.testing.assert_allclose(M.toarray(), M.toarray().T, atol=1e-12)  # both directions


def test_walk_counts_are_the_pairs_within_the_window():
    A = ring_of_cliques(drop_zeros=True)
    indptr, indices, _ = csr_args(A)
    C = window.walk_counts(indptr, indices, None, window=3, walks_per_node=2, walk_length=8)
    from caps2ne_np.walks.walks import uniform_walks

    W = uniform_walks(indptr, indices, None, 2, 8, 0)
    ref = np.zeros((24, 24))
    for w in W:
        for i in range(8):
            for j in range(i + 1, min(8, i + 4)):
                ref[w[i], w[j]] += 1
                ref[w[j], w[i]] += 1
    np.testing.assert_array_equal(C.toarray(), ref)


def test_embedding_is_the_dense_svd():
    """rownorm(U S^1/2) of the rank-4 SVD, compared through E E^T (free of the signs and
    of rotations within equal singular values)."""
    A = ring_of_cliques(drop_zeros=True)
    E, _ = window.embed(*csr_args(A), dim=4, source="exact", row_norm=2.0)
    U, S, _ = np.linalg.svd(netmf_dense(A))
    assert S[4] < 0.1 * S[3]  # a gap: the rank-4 space is well defined
    R = U[:, :4] * np.sqrt(S[:4])
    R = 2.0 * R / np.linalg.norm(R, axis=1, keepdims=True)
    assert E.dtype == np.float32 and E.shape == (24, 4)
    np.testing.assert_allclose(E @ E.T, R @ R.T, atol=1e-5)


def test_embedding_is_seeded():
    A = circulant()
    a, _ = window.embed(*csr_args(A), dim=8, seed=3)
    b, _ = window.embed(*csr_args(A), dim=8, seed=3)
    np.testing.assert_array_equal(a, b)


def test_exact_refused_past_the_cap():
    A = ring_of_cliques(drop_zeros=True)
    assert window.exact_matrix(A, 10, max_entries=100) is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(source="dense"), "source"),
        (dict(source="walks", window=10, walk_length=10), "window"),
        (dict(dim=24), "dim"),
    ],
)
def test_bad_input(kwargs, match):
    A = ring_of_cliques(drop_zeros=True)
    with pytest.raises(ValueError, match=match):
        window.embed(*csr_args(A), **kwargs)
