"""A window-T embedding: the matrix DeepWalk factorises implicitly (NetMF, Qiu et al.,
WSDM 2018), built sparse and factorised by the randomized SVD of spectral/prone.py.

With A the symmetric adjacency, D its degrees, P = D^-1 A, vol = sum_ij A_ij, the window
T and b negative samples, skip-gram over random walks with a window of T factorises

    M = vol / (b T) (sum_{r=1..T} P^r) D^-1,        M' = log(max(M, 1))      (NetMF, Thm 2.3)

(entries with M <= 1 are 0 in M').  Dense, M is N x N; two sparse editions:

* ``exact_matrix``: M' a block of columns at a time from sparse products of A with
  dense (N, block) blocks (only M's entries above 1 are kept), refused once M' stores
  more entries than a cap;
* ``walk_counts`` (NetSMF / LightNE style): C_ij = how often j is within T steps of i
  on random walks (both directions), then M_ij = C_ij |C| / (b c_i c_j) with c = C's
  row sums and |C| its total: the shifted PMI of the walks' pairs (Levy and Goldberg
  2014), whose expectation is NetMF's M when the walks start from the stationary
  distribution.  It stores at most the number of distinct pairs the walks drew.

``embed`` factorises M' ~ U S V^T at rank ``dim`` and writes rownorm(U S^1/2) times a
row length.  The dense float64 edition (tests/test_bench_window.py) is the reference."""

import numpy as np
import scipy.sparse as sp

from caps2ne_np.spectral import prone as spectral
from caps2ne_np.walks.walks import uniform_walks

WINDOW = 10
"""T: DeepWalk's window (NetMF's T = 10)."""
NEGATIVE = 1.0
"""b: the negative samples of the shifted PMI (NetMF's b = 1)."""
EXACT_MAX_ENTRIES = 1 << 26
"""The most stored entries of M' the exact edition builds (about 800 MB as CSR)."""


def exact_matrix(A, window=WINDOW, negative=NEGATIVE, block=256, max_entries=EXACT_MAX_ENTRIES):
    """NetMF's log(max(M, 1)) exactly (CSR float64, symmetric), computed a block of
    ``block`` columns at a time and never dense as a whole: with Z_1 = A[:, B] and
    Z_r = A D^-1 Z_{r-1} (N, |B|), S[:, B] = sum_r Z_r is the block of S = sum_r D P^r
    (D P^r = A (D^-1 A)^(r-1)), and M[:, B] = vol / (b T) D^-1 S[:, B] D_B^-1.  Cost:
    ``window`` sparse products of A with an (N, block) block per block, T nnz(A) N
    multiply-adds in all.  None when M' stores more than ``max_entries`` entries (the
    walk edition then stores fewer)."""
    A = sp.csr_matrix(A, dtype=np.float64)
    A.sort_indices()
    n = A.shape[0]
    d = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    scale = d.sum() / (negative * window)
    parts, stored = [], 0
    for lo in range(0, n, block):
        cols = np.arange(lo, min(lo + block, n))
        Z = np.ascontiguousarray(A[:, cols].toarray())
        S = Z.copy()
        for _ in range(window - 1):
            Z = spectral.matmat(A, Z * inv[:, None])
            S += Z
        S *= scale * inv[:, None] * inv[cols][None, :]
        np.log(np.maximum(S, 1.0), out=S)
        part = sp.csr_matrix(S.T)  # rows B of M' (M' is symmetric)
        del Z, S
        stored += part.nnz
        if stored > max_entries:
            return None
        parts.append(part)
    M = sp.vstack(parts, format="csr") if parts else sp.csr_matrix((n, n))
    M = ((M + M.T) * 0.5).tocsr()  # symmetric to the last bit
    M.eliminate_zeros()
    M.sort_indices()
    return M


def walk_counts(indptr, indices, weights, window=WINDOW, walks_per_node=10, walk_length=80, seed=0):
    """C (N, N) CSR float64: how often node j is within ``window`` steps of node i on
    ``walks_per_node`` random walks of length ``walk_length`` from every node (both
    directions, so C is symmetric), drawn by training.walks.uniform_walks (weighted steps
    when ``weights`` is given)."""
    n = int(np.asarray(indptr).shape[0] - 1)
    if not 1 <= window < walk_length:
        raise ValueError(f"window: must be in [1, walk_length), got {window}")
    walks = uniform_walks(indptr, indices, weights, walks_per_node, walk_length, seed)
    C = sp.csr_matrix((n, n), dtype=np.float64)
    for r in range(1, window + 1):
        u = walks[:, :-r].ravel()
        v = walks[:, r:].ravel()
        ones = np.ones(u.shape[0], dtype=np.float64)
        C = C + sp.csr_matrix((ones, (u, v)), shape=(n, n))
        del u, v, ones
    del walks
    return (C + C.T).tocsr()


def shifted_pmi(S, marginals=None, negative=NEGATIVE):
    """M' = log(max(S_ij |S| / (b m_i m_j), 1)) on S's support (CSR float64, zeros
    dropped): m = ``marginals`` or S's row sums, |S| = sum m.  With S = sum_r D P^r and
    m = d this is NetMF's log(max(M, 1)) (|S| = T vol)."""
    S = sp.csr_matrix(S, dtype=np.float64)
    m = np.asarray(S.sum(axis=1)).ravel() if marginals is None else np.asarray(marginals, float)
    total = m.sum()
    inv = np.divide(1.0, m, out=np.zeros_like(m), where=m > 0)
    M = S.copy()
    rows = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    M.data = M.data * (total / negative) * inv[rows] * inv[M.indices]
    M.data = np.log(np.maximum(M.data, 1.0))
    M.eliminate_zeros()
    M.sort_indices()
    return M


def matrix(
    indptr,
    indices,
    weights,
    window=WINDOW,
    negative=NEGATIVE,
    source="auto",
    seed=0,
    walks_per_node=10,
    walk_length=80,
):
    """NetMF's log(max(M, 1)) for the graph (CSR arrays, undirected: both directions
    stored), sparse: ``source`` 'exact' (sparse powers; ValueError past the cap), 'walks'
    (``walk_counts``) or 'auto' (exact when it stays under the cap, else walks).
    Returns (M', the source used)."""
    n = int(np.asarray(indptr).shape[0] - 1)
    if source not in ("auto", "exact", "walks"):
        raise ValueError(f"source: must be 'auto', 'exact' or 'walks', got {source!r}")
    if source in ("auto", "exact"):
        A = spectral.adjacency(indptr, indices, weights, n)
        M = exact_matrix(A, window, negative)
        if M is not None:
            return M, "exact"
        if source == "exact":
            raise ValueError(
                f"source 'exact': NetMF's matrix stores more than {EXACT_MAX_ENTRIES} entries"
            )
    C = walk_counts(indptr, indices, weights, window, walks_per_node, walk_length, seed)
    return shifted_pmi(C, None, negative), "walks"


def embed(
    indptr,
    indices,
    weights,
    dim=128,
    window=WINDOW,
    negative=NEGATIVE,
    seed=0,
    source="auto",
    row_norm=1.0,
    **walk_options,
):
    """The window-``window`` embedding (N, dim) float32: rownorm(U S^1/2) of the
    rank-``dim`` randomized SVD (spectral.randomized_svd, seeded) of ``matrix``, rows of
    length ``row_norm`` (all-zero rows, of nodes without edges, stay zero).  Returns
    (E, the source used)."""
    M, used = matrix(indptr, indices, weights, window, negative, source, seed, **walk_options)
    if not 1 <= dim < M.shape[0]:
        raise ValueError(f"dim: must be in [1, N) = [1, {M.shape[0]}), got {dim}")
    U, S = spectral.randomized_svd(M, dim, seed)
    E = U * np.sqrt(S)
    del U
    spectral.rownorm(E, out=E)
    E *= row_norm
    return E.astype(np.float32), used
