"""A spectral start: ProNE (Zhang et al., IJCAI 2019) embeddings as Caps2NE's input
features x, or as the first values of the trainable x (and O).  docs/math.md, "ProNE".

ProNE has two steps, both with scipy.sparse and a randomized SVD (``randomized_svd``):

1. sparse matrix factorisation (``proximity_matrix``, ``factorize``): on the support of
   the symmetric adjacency A (no self loops), with P = D^-1 A the random-walk transition
   matrix and lambda_j = (sum_i P_ij)^0.75 / sum_l (sum_i P_il)^0.75 the negative-sampling
   distribution,

       F_ij = log P_ij - log(A_ij lambda_j)      (A_ij > 0; F_ij = 0 elsewhere)

   then a truncated randomized SVD F ~ U S V^T and R = rownorm(U S^1/2)  (N, d);

2. spectral propagation (``propagate``): with L = I - D~^-1 (I + A) (D~ the degrees of
   I + A) and M = L - mu I, a Chebyshev expansion of order ``order`` of
   exp(-theta X), X = M^2 / 2 - I (the Bessel coefficients I_i(theta)):

       R~ = (I + A) (R - sum_i c_i T_i(X) R),   c_0 = I_0(theta), c_i = 2 (-1)^i I_i(theta)

   then the dense SVD R~ = U S V^T and E = rownorm(U S^1/2), float32, unit rows.

Notes (departures of the reference code, THUDM/ProNE ``proNE.py``, from the paper, which
this module follows, as the ``nodevectors`` package does): the paper's filter is
g(lambda) = exp(-theta ((lambda - mu)^2 - 1) / 2); the code's exp(-theta ((lambda - mu)^2 / 2
- 1)) differs by a constant factor inside the band.  The paper propagates with D^-1 A; the
code with I + A, unnormalised.  The random SVD is seeded here (the reference's is not),
and everything runs on one BLAS thread, so a run is the same on any thread count.

``start(indptr, indices, weights, cfg, features)`` is the one call a training run makes
(train.fit's preamble): the fixed features or the initial tables of ``cfg.spectral``.
"""

import logging
import math
import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..defaults import PRONE_THETA_MAX, PRONE_THETA_MIN, SPECTRAL_MODES
from ..errors import InputError
from ..kernels.sparse import chebyshev_term, matmat, row_chunks

log = logging.getLogger(__name__)

NEGATIVE_EXPONENT = 0.75
"""lambda_j ~ (column sum of P)^0.75: word2vec's and ProNE's negative-sampling power."""
SVD_ITERATIONS = 5
"""Power iterations of the randomized SVD (the reference's n_iter)."""


def adjacency(indptr, indices, weights, n_nodes):
    """The symmetric adjacency A (float64 CSR) ProNE factorises: max(A, A^T) of the stored
    edges (an undirected graph stores both directions: A itself), without self loops."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices)
    data = np.ones(indices.shape[0]) if weights is None else np.asarray(weights, np.float64)
    A = sp.csr_matrix((data, indices, indptr), shape=(n_nodes, n_nodes))
    A = A.maximum(A.T).tocsr()
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    return A


def proximity_matrix(A, exponent=NEGATIVE_EXPONENT):
    """F_ij = log P_ij - log(A_ij lambda_j) on A's support (docstring of the module), CSR.

    A (N, N) symmetric, non-negative, float64 CSR.  P = D^-1 A row by row; a node without
    edges has an empty row of F."""
    A = sp.csr_matrix(A, dtype=np.float64)
    deg = np.asarray(A.sum(axis=1)).ravel()
    inv = np.divide(1.0, deg, out=np.zeros_like(deg), where=deg > 0)
    P = sp.csr_matrix(  # A's pattern, sharing its index arrays
        (A.data * np.repeat(inv, np.diff(A.indptr)), A.indices, A.indptr), shape=A.shape
    )
    lam = np.asarray(P.sum(axis=0)).ravel() ** exponent
    lam /= lam.sum()
    neg = A.data * lam[A.indices]  # the entries of A diag(lambda), P's pattern
    p = P.data
    del P
    data = np.log(np.where(p > 0, p, 1.0)) - np.log(np.where(neg > 0, neg, 1.0))
    return sp.csr_matrix((data, A.indices, A.indptr), shape=A.shape)


FILTER_COLUMNS = 16
"""Columns of R the Chebyshev filter takes at a time (``filtered``).  The filter acts on
each column alone, and scipy's sparse product computes each entry of M X from its own
column of X, so a block of columns gives the same bits as the whole (N, d) matrix,
while the terms of the recurrence hold (N, FILTER_COLUMNS) blocks instead of (N, d)."""
PROGRESS_AFTER = 5.0
"""Seconds a spectral stage runs before it logs how far along it is (``Stage``)."""
PROGRESS_EVERY = 10.0
"""Seconds between two of a spectral stage's progress lines, at most one each."""


class Stage:
    """The log lines of a long spectral stage: ``Stage(name, what)`` logs that it starts;
    ``stage(where)`` logs how far along it is, past PROGRESS_AFTER seconds and at most
    once every PROGRESS_EVERY seconds (plain lines, as training's progress in a log:
    training/progress.py); ``stage.seconds()`` since it started."""

    def __init__(self, name, what, logger=log):
        self.name, self.log = name, logger
        self.t0 = time.monotonic()
        self.last = self.t0 - PROGRESS_EVERY
        logger.info("%s: %s ...", name, what)

    def __call__(self, where):
        now = time.monotonic()
        if now - self.t0 >= PROGRESS_AFTER and now - self.last >= PROGRESS_EVERY:
            self.last = now
            self.log.info("%s: %s (%.0f s)", self.name, where, now - self.t0)

    def seconds(self):
        return time.monotonic() - self.t0


def _silent(where):
    """The progress of a stage nobody watches."""


def rownorm(U, out=None):
    """Each row divided by its Euclidean norm (all-zero rows stay zero); ``out=U``
    divides in place (the same bits)."""
    norms = np.sqrt(np.einsum("ij,ij->i", U, U))
    return np.divide(U, np.where(norms > 0, norms, 1.0)[:, None], out=out)


def column_signs(U, rows=1 << 14):
    """The sign of each column's entry of largest magnitude (the first such), (K,):
    ``np.sign(U[np.argmax(np.abs(U), axis=0), range(K)])``, read ``rows`` rows at a time
    (no (N, K) copy of |U|)."""
    return block_signs(U[r0 : r0 + rows] for r0 in range(0, U.shape[0], rows))


def block_signs(blocks):
    """``column_signs`` of the matrix whose rows come as the consecutive ``blocks`` (an
    iterable of (r, K) arrays, each formed only when asked for): (K,), 0 for a zero column."""
    best = value = None
    for block in blocks:
        if best is None:
            best, value = np.full(block.shape[1], -1.0), np.zeros(block.shape[1])
        cols = np.arange(block.shape[1])
        at = np.argmax(np.abs(block), axis=0)
        size = np.abs(block[at, cols])
        better = size > best  # strictly: an earlier row keeps a tie, as argmax does
        best[better] = size[better]
        value[better] = block[at, cols][better]
    return np.sign(value)


def randomized_svd(
    M, dim, seed, n_iter=SVD_ITERATIONS, oversamples=10, progress=_silent, dtype=np.float64
):
    """The rank-``dim`` randomized SVD M ~ U S V^T of Halko, Martinsson and Tropp (2011,
    Algorithm 4.4 with LU normalisation): ``(U (n, dim), S (dim,))``.

    Scikit-learn's ``randomized_svd`` step by step, with its defaults (10 oversamples,
    LU between power iterations when there are more than 2, scipy's QR and gesdd SVD,
    signs flipped so each column of U has its largest entry positive), and the same
    draws from ``np.random.RandomState(seed)``: the same bits (tests/test_prone.py),
    without importing scikit-learn (0.7 s, more than ProNE itself on a 1,000-node graph).
    ``M``: a scipy.sparse matrix (CSR or CSC with sorted indices: each sum of a product
    runs over the same entries in the same order either way) or an array.

    ``dtype`` float32 (``--spectral-precision float32``): the same draws and steps in
    float32 (the products, LU and QR; U float32), the SVD of B = Q^T M from its Gram
    matrix B B^T in float64 (``gram_svd``).

    Memory, with K = dim + oversamples: 2 (n, K) blocks during the power iterations
    (each product is a new block, which LU factorises in place; float32: 3, each product
    written into the block of the one before), 2 at the end (the basis Q and B = Q^T M
    (K, n), whose SVD ``wide_svd`` takes without V^T), then Q and U.
    ``progress(where)`` is called after each power iteration, the QR and the SVD."""
    from scipy import linalg

    dtype = np.dtype(dtype)
    Q = np.random.RandomState(seed).normal(size=(M.shape[1], dim + oversamples))
    Q = Q.astype(dtype, copy=False)  # scikit-learn's draws, in either precision
    if sp.issparse(M):  # CSR of M and M^T, sorted: matmat gives scipy's bits
        M, Mt = M.tocsr(), M.T.tocsr()
        M, Mt = (
            in_precision(X if X.has_sorted_indices else X.sorted_indices(), dtype) for X in (M, Mt)
        )
        chunks = {id(M): row_chunks(M.indptr), id(Mt): row_chunks(Mt.indptr)}

        def prod(op, X, out=None):
            return matmat(op, X, out=out, bounds=chunks[id(op)])
    else:
        M = np.asarray(M, dtype=dtype)
        Mt, prod = M.T, np.matmul
    spare = None  # float32: the block of the product before, written again (no new pages)
    for it in range(n_iter):  # power iterations: Q tends to M's leading singular space
        for op in (M, Mt):
            Y = prod(op, Q) if spare is None else prod(op, Q, out=spare)
            spare = Q if dtype == np.float32 and sp.issparse(M) else None
            del Q
            if n_iter > 2:  # L of Y = P L U, computed in Y's memory
                Y = linalg.lu(Y, permute_l=True, overwrite_a=True, check_finite=False)[0]
            Q = Y
            del Y
        progress(f"randomized SVD, power iteration {it + 1} of {n_iter}")
    del spare
    Y = prod(M, Q)
    del Q, M
    Q = linalg.qr(Y, mode="economic", overwrite_a=True, check_finite=False)[0]  # M's range
    del Y
    progress("randomized SVD, QR of the basis")
    if dtype == np.float64:
        B = prod(Mt, Q).T if sp.issparse(Mt) else Q.T @ Mt.T  # Q^T M, (K, n), Fortran order
        del Mt
        Uhat, S = wide_svd(B)
    else:  # B B^T = Bt^T Bt for Bt = M^T Q: B's U are Bt's V
        B = prod(Mt, Q)
        del Mt
        S, Uhat = gram_svd(B)
    del B
    progress("randomized SVD, SVD of B = Q^T M")
    U = Q @ Uhat.astype(dtype, copy=False)
    del Q
    U *= column_signs(U)[None, :].astype(dtype)
    return U[:, :dim], S[:dim]


def in_precision(A, dtype):
    """The scipy CSR ``A`` with its entries in ``dtype`` (``A`` itself when they are),
    sharing A's index arrays: the same entries in the same stored order."""
    if A.dtype == dtype:
        return A
    return sp.csr_matrix((A.data.astype(dtype), A.indices, A.indptr), shape=A.shape)


def wide_svd(B):
    """``(U, S)`` of the thin SVD B = U S V^T (gesdd) of a wide ``B`` (K, n), Fortran
    order, without V^T (K, n) and its cost; ``B`` is overwritten.

    For n >= 11 K / 6 (gesdd's "path 3t") gesdd factorises B = L Q (dgelqf), takes the
    SVD of L (K, K) as gesdd takes a square matrix's and forms V^T = V_L^T Q (dorglq,
    dgemm); U and S are L's.  Here dgelqf is called alone (scipy's own LAPACK, through
    scipy.linalg.cython_lapack: scipy.linalg.lapack has no LQ) and then gesdd on L, so
    U and S are gesdd's bits (tests/test_prone.py).  Otherwise (few columns, or
    entries gesdd would rescale, as ``propagation._tall_svd``) gesdd itself."""
    from scipy import linalg

    K, n = B.shape
    top = max(float(B.max()), -float(B.min())) if B.size else 0.0
    safe = np.sqrt(np.finfo(np.float64).tiny) / np.finfo(np.float64).eps  # gesdd's SMLNUM
    if n < max(int(K * 11 / 6), 2) or not safe <= top <= 1.0 / safe or not B.flags.f_contiguous:
        U, S, _ = linalg.svd(
            B, full_matrices=False, overwrite_a=True, check_finite=False, lapack_driver="gesdd"
        )
        return U, S
    _dgelqf(B)
    U, S, _ = linalg.svd(
        np.tril(B[:, :K]), full_matrices=False, check_finite=False, lapack_driver="gesdd"
    )
    return U, S


GRAM_FLOOR = 1e-5
"""``gram_projection`` maps to 0 the directions whose singular value is below this
fraction of the largest: their values from a float64 Gram matrix of float32 entries
carry less than float32's precision, and S^-1/2 would magnify their error."""


def gram_svd(Y, rows=1 << 14):
    """``(S, V)`` of the thin SVD Y = U S V^T of a tall ``Y`` (N, k), any float dtype and
    order, from its Gram matrix Y^T Y = V S^2 V^T summed in float64 ``rows`` rows at a
    time (a fixed order: the same bits on any thread count), then ``eigh``: S (k,)
    descending, V (k, k) float64.

    Notes: a singular value s_i comes out with an absolute error near eps64 s_1^2 / s_i,
    so down to about 1e-5 s_1 it is more accurate than a float32 SVD of Y itself, at the
    cost of one pass over Y (a fifth of sgesdd's time on a (200,000, 128) block).  The
    float32 spectral stages take their SVDs this way."""
    k = Y.shape[1]
    G = np.zeros((k, k))
    for r0 in range(0, Y.shape[0], rows):
        block = np.asarray(Y[r0 : r0 + rows], dtype=np.float64)
        G += block.T @ block
    lam, V = np.linalg.eigh(G)
    return np.sqrt(np.clip(lam[::-1], 0.0, None)), V[:, ::-1]


def power_divisor(S, power):
    """S^(1 - power), what V is divided by in the map P = V S^(power - 1) that takes a
    matrix Y = U S V^T to U S^power; for ProNE's power 1/2 a square root (the bits of
    before the power was an argument)."""
    return np.sqrt(S) if power == 0.5 else S ** (1.0 - power)


def gram_projection(Y, rows=1 << 12, power=0.5, svd=None):
    """``(S, P)``: the singular values S of ``Y`` (N, k) (``gram_svd``) and P = V S^(power - 1)
    (k, k) float64, so that Y P = U S^power (ProNE's power 1/2 by default), its directions
    below GRAM_FLOOR s_1 mapped to 0 and its columns signed so that each column of U has
    its largest entry positive (``column_signs``; U formed ``rows`` rows at a time, never
    whole).  ``svd``: ``gram_svd(Y)`` when already taken (several powers of one Y)."""
    S, V = gram_svd(Y) if svd is None else svd
    top = S[0] if S.size else 0.0
    keep = S > GRAM_FLOOR * top
    P = np.zeros_like(V)
    P[:, keep] = V[:, keep] / power_divisor(S[keep], power)[None, :]
    rows_of_U = (np.asarray(Y[r0 : r0 + rows], np.float64) @ P for r0 in range(0, len(Y), rows))
    signs = block_signs(rows_of_U)
    signs[signs == 0] = 1.0
    return S, P * signs[None, :]


def projected_rows(Y, P, scale=1.0, rows=1 << 12):
    """``scale`` rownorm(Y P) (N, k) float32, formed ``rows`` rows at a time: no (N, k)
    float64 product beside ``Y``.  Each row depends only on its row of ``Y`` (the same
    dgemm bits by row blocks), and so does its norm; a zero row stays zero."""
    E = np.empty((Y.shape[0], P.shape[1]), dtype=np.float32)
    for r0 in range(0, Y.shape[0], rows):
        block = np.asarray(Y[r0 : r0 + rows]) @ P
        rownorm(block, out=block)
        if scale != 1.0:
            block *= scale
        E[r0 : r0 + rows] = block
    return E


def _dgelqf(B):
    """B = L Q in place (LAPACK dgelqf, with its optimal workspace), B (K, n) float64 in
    Fortran order: L in B's lower triangle."""
    import ctypes

    from scipy.linalg import cython_lapack

    api = ctypes.pythonapi  # prototypes of its own: ctypes.pythonapi's stay as they were
    name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", api))
    pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", api)
    )
    capsule = cython_lapack.__pyx_capi__["dgelqf"]
    address = pointer(capsule, name(capsule))
    i, p = ctypes.POINTER(ctypes.c_int), ctypes.c_void_p
    dgelqf = ctypes.CFUNCTYPE(None, i, i, p, i, p, p, i, i)(address)
    K, n = B.shape
    tau, work = np.empty(min(K, n)), np.empty(1)
    info = ctypes.c_int(0)
    args = (ctypes.c_int(K), ctypes.c_int(n), B.ctypes.data, ctypes.c_int(K), tau.ctypes.data)
    dgelqf(*args, work.ctypes.data, ctypes.c_int(-1), info)  # the workspace query
    work = np.empty(max(int(work[0]), 1))
    dgelqf(*args, work.ctypes.data, ctypes.c_int(work.shape[0]), info)
    if info.value:
        raise np.linalg.LinAlgError(f"LQ of the randomized SVD's B failed (info {info.value})")


def factorize(F, dim, seed, n_iter=SVD_ITERATIONS, progress=_silent, dtype=np.float64):
    """R = rownorm(U S^1/2) of the rank-``dim`` randomized SVD F ~ U S V^T (N, dim) in
    ``dtype``, seeded by ``seed`` (``randomized_svd``, ``n_iter`` power iterations)."""
    F = sp.csr_matrix(F)
    if not F.has_sorted_indices:
        F = F.sorted_indices()
    U, S = randomized_svd(F, dim, seed, n_iter, progress=progress, dtype=dtype)
    R = U * np.sqrt(S).astype(U.dtype)
    del U
    return rownorm(R, out=R)


def operators(A, mu):
    """A~ = I + A and M = I - D~^-1 A~ - mu I (scipy CSR float64; D~ the degrees of A~),
    the matrices of the filter (module docstring), built with the same scipy operations
    as the reference, so that their entries are stored in the same order."""
    n = A.shape[0]
    A1 = (sp.eye(n, format="csr") + A).tocsr()
    deg = np.asarray(A1.sum(axis=1)).ravel()
    M = (sp.eye(n, format="csr") * (1.0 - mu) - sp.diags(1.0 / deg) @ A1).tocsr()
    return A1, M


def _chebyshev_block(M, R, order, theta, bounds, progress=_silent, where="", scale=1.0):
    """sum_{i < order} scale c_i T_i(X) R for R (N, b) C-contiguous, in R's dtype (M's
    entries in it too; ``bounds`` = kernels.sparse.row_chunks(M.indptr)): ``chebyshev_filter``.
    The recurrence T_i = 2 X T_{i-1} - T_{i-2}, 2 X T = M (M T) - 2 T, writes T_i over
    T_{i-2} (kernels.sparse.chebyshev_term): 5 (N, b) blocks besides R (two terms, the
    sum, M T and a scratch block).  Every product and difference is the reference's, in
    its order: in float64, the same bits."""
    from scipy.special import iv

    f = R.dtype.type  # the coefficients in R's dtype: no float64 scalar widens a block
    MT = matmat(M, R, bounds=bounds)
    T1 = matmat(M, MT, bounds=bounds)
    T1 *= f(0.5)
    T1 -= R  # T_1 = X R = 0.5 M^2 R - R
    progress(f"{where}Chebyshev term 2 of {order}")
    out = f(iv(0, theta) * scale) * R
    tmp = np.multiply(f(2.0 * iv(1, theta) * scale), T1)
    out -= tmp
    T0 = R.copy() if order > 2 else None  # T_{i-2}
    for i in range(2, order):
        matmat(M, T1, out=MT, bounds=bounds)
        coef = f((2.0 if i % 2 == 0 else -2.0) * iv(i, theta) * scale)
        chebyshev_term(M, MT, T1, T0, out, coef, tmp, bounds)  # T0 = T_i; out += coef T_i
        T0, T1 = T1, T0
        progress(f"{where}Chebyshev term {i + 1} of {order}")
    return out


def chebyshev_filter(A, R, order, mu, theta):
    """sum_{i < order} c_i T_i(X) R, X = M^2 / 2 - I, M = I - D~^-1 (I + A) - mu I: the
    Chebyshev expansion of exp(-theta X) R (module docstring), (N, d) float64."""
    _, M = operators(A, mu)
    bounds = row_chunks(M.indptr)
    R = np.asarray(R, dtype=np.float64)
    out = np.empty(R.shape)
    for c0 in range(0, R.shape[1], FILTER_COLUMNS):
        block = np.ascontiguousarray(R[:, c0 : c0 + FILTER_COLUMNS])
        out[:, c0 : c0 + FILTER_COLUMNS] = _chebyshev_block(M, block, order, theta, bounds)
    return out


def filtered(A, R, order, mu, theta, progress=_silent, dtype=np.float64):
    """R~ = (I + A)(R - chebyshev_filter(R)): the signal ProNE factorises, (N, d) in
    ``dtype`` (float64, or float32 with every product and step in float32), in Fortran
    order (gesdd's own, so ``embedding`` and ``propagation.projection`` need no copy of
    it).  ``A`` (N, N) symmetric float64 CSR without self loops; ``R`` (N, d) of any
    float dtype, read FILTER_COLUMNS columns at a time (converted per block).  Memory:
    the output and 6 (N, FILTER_COLUMNS) blocks (the block of R and the recurrence's 5).
    float32: R~ / (a s), ``float32_scales``, whose rows have R~'s directions."""
    A1, M = operators(A, mu)
    a, s = float32_scales(A1, theta) if np.dtype(dtype) == np.float32 else (1.0, 1.0)
    A1, M = (in_precision(X, np.dtype(dtype)) for X in ((A1 / a).tocsr() if a != 1 else A1, M))
    bounds, bounds1 = row_chunks(M.indptr), row_chunks(A1.indptr)
    n, d = R.shape
    out = np.empty((n, d), dtype=dtype, order="F")
    for c0 in range(0, d, FILTER_COLUMNS):
        c1 = min(c0 + FILTER_COLUMNS, d)
        block = np.array(R[:, c0:c1], dtype=dtype, order="C")  # a copy: R stays
        where = f"filter, columns {c0 + 1}-{c1} of {d}, " if d > FILTER_COLUMNS else "filter, "
        filt = _chebyshev_block(M, block, order, theta, bounds, progress, where, s)
        if s != 1.0:
            block *= block.dtype.type(s)  # may round to zero: e^-theta of the filter's size
        block -= filt
        out[:, c0:c1] = matmat(A1, block, bounds=bounds1)
    return out


FLOAT32_HEADROOM = 2.0**40
"""``float32_scales``: the float32 filter scales I + A and the Chebyshev coefficients down
by powers of two when a row sum of I + A or the coefficients' sum e^theta exceed this.
float32 ends at 3.4e38: edge weights reach it (A~ R of weights 3.4e38 overflowed, and
the SVD failed), and so does e^theta at theta = 88.7 (the range goes to 100)."""


def float32_scales(A1, theta):
    """``(a, s)``: the powers of two (1 for ordinary graphs and theta < 27.7) that the
    float32 filter divides I + A (``A1``) by and multiplies its coefficients with, so
    that no block exceeds about |R| in size: R~ / (a s) = (A1 / a)(s R - s F(R)).  A
    global factor changes no written row (each is rownorm'd), and powers of two leave
    the digits as they are."""

    def above(x):
        return 2.0 ** math.ceil(math.log2(x)) if x > FLOAT32_HEADROOM else 1.0

    degree = float(np.asarray(A1.sum(axis=1)).max()) if A1.shape[0] else 1.0
    return above(degree), 1.0 / above(math.exp(theta))  # sum_i |c_i| <= e^theta


def embedding(Rt, d):
    """E = rownorm(U S^1/2) (N, d) of the thin SVD Rt = U S V^T, float64, computed in Rt's
    memory (its values are lost): Rt and U, two (N, d) blocks.  A float32 ``Rt``: U S^1/2
    = Rt V S^-1/2 from its Gram matrix (``gram_projection``), E float32, Rt kept."""
    from scipy import linalg

    if Rt.dtype == np.float32:
        _, P = gram_projection(Rt)
        return projected_rows(Rt, P[:, :d])

    U, S, _ = linalg.svd(Rt, full_matrices=False, overwrite_a=True, check_finite=False)
    U = U[:, :d]
    U *= np.sqrt(S[:d])
    return rownorm(U, out=U)


def propagate(A, R, order, mu, theta):
    """E = rownorm(U S^1/2) of the dense SVD of (I + A)(R - chebyshev_filter(R)): ProNE's
    spectral propagation (order 1: R unchanged), (N, d) float64."""
    if order == 1:
        return R
    return embedding(filtered(A, R, order, mu, theta), R.shape[1])


def prone(A, dim, seed=0, order=10, mu=0.2, theta=0.5, progress=_silent, dtype=np.float64):
    """ProNE embeddings of the symmetric adjacency ``A`` (N, N): (N, dim) float32 with unit
    rows (a node without edges: a zero row).  ``order`` of the Chebyshev expansion (1: no
    propagation), ``mu`` and ``theta`` of its filter; ``seed`` of the randomized SVD;
    ``progress(where)`` told how far along it is; ``dtype`` of every step (float64, or
    float32: ``--spectral-precision``).  Runs on one BLAS thread: the same bits whatever
    the machine's thread count.  Memory (docs/scaling.md): 3 (N, dim + 10) blocks in the
    randomized SVD, then 2 (N, dim) in the propagation, of ``dtype``."""
    from threadpoolctl import threadpool_limits

    n = A.shape[0]
    if not 1 <= dim < n:
        raise InputError(
            f"--spectral-dim: ProNE needs 1 <= d < N = {n} (the graph's nodes), got d = {dim}; "
            "lower --spectral-dim (or --feat-dim)"
        )
    with threadpool_limits(limits=1, user_api="blas"):
        R = factorize(proximity_matrix(A), dim, seed, progress=progress, dtype=dtype)
        if order == 1:
            return R.astype(np.float32)
        Rt = filtered(A, R, order, mu, theta, progress, dtype)
        del R
        progress("SVD of the filtered signal")
        return embedding(Rt, dim).astype(np.float32)


class SpectralStart(NamedTuple):
    """What ``start`` gives a run: fixed ``features`` (N, d) or None, initial ``X`` (N, d)
    or None, initial ``O`` (N, k) or None, the ``seconds`` it took and a ``note``."""

    features: object = None
    X: object = None
    O: object = None
    seconds: float = 0.0
    note: str = ""


def check(cfg, user_features):
    """InputError (one line) when ``cfg.spectral`` cannot combine with the rest of the run."""
    mode = cfg.spectral
    if mode not in SPECTRAL_MODES:
        raise InputError(f"--spectral: must be one of {SPECTRAL_MODES}, got {mode!r}")
    if mode == "none":
        return
    if user_features is not None:
        verb = "replace" if mode == "features" else "start"
        raise InputError(
            f"--spectral {mode}: the input features x are the given fixed features "
            f"(--features, or a --dataset's: --featureless drops those), so there is no x for "
            f"ProNE to {verb}; drop the features or use --spectral none"
        )
    if mode == "features" and cfg.skipgram_weight:
        raise InputError(
            "--skipgram-weight: the skip-gram term trains x, and --spectral features makes "
            "x ProNE's fixed features; use --spectral init or init_xo (ProNE starts x, "
            "which then trains) or --skipgram-weight 0"
        )
    if mode in ("init", "init_xo") and cfg.spectral_dim not in (None, cfg.feat_dim):
        raise InputError(
            f"--spectral-dim {cfg.spectral_dim}: with --spectral {mode} ProNE starts x, "
            f"whose size is --feat-dim {cfg.feat_dim}; leave --spectral-dim unset"
        )
    theta = ("prone_theta", PRONE_THETA_MIN, PRONE_THETA_MAX)  # defaults.py says why
    for name, low, high in (("prone_mu", 0.0, 2.0), theta):
        value = getattr(cfg, name)  # mu within the Laplacian's spectrum [0, 2]
        if not (math.isfinite(value) and low <= value <= high):
            raise InputError(
                f"--{name.replace('_', '-')}: must be in [{low:g}, {high:g}], got {value}"
            )


def start(indptr, indices, weights, cfg, features=None, resume=False):
    """The spectral start of a run with options ``cfg`` (config.TrainConfig): a
    SpectralStart.  'none': nothing.  'features': ProNE (d = spectral_dim or feat_dim) as
    fixed features x, used as they are (unit rows: no row-sum normalisation).  'init': x
    starts from ProNE (d = feat_dim), rescaled to the mean row norm of the random start
    U(-sqrt(1/d), sqrt(1/d)), sqrt(1/3); 'init_xo': also O (ProNE at d = k), rescaled to
    the row norm of its Glorot start, sqrt(2 k / (N + k)).  The SVD's seed comes from
    cfg.seed; ``features``: the user's fixed features (refused with any mode but 'none').
    ``resume``: the run continues from a checkpoint, which holds x and O: 'init' and
    'init_xo' compute nothing."""
    check(cfg, features)
    if cfg.spectral == "none" or (resume and cfg.spectral != "features"):
        return SpectralStart()
    from ..kernels.rng import derive_seed

    t0 = time.perf_counter()
    n = int(np.asarray(indptr).shape[0] - 1)
    A = adjacency(indptr, indices, weights, n)
    seed = derive_seed(cfg.seed, "spectral") % (2**32)
    d = (cfg.spectral_dim or cfg.feat_dim) if cfg.spectral == "features" else cfg.feat_dim
    sizes = [("--spectral-dim" if cfg.spectral_dim else "--feat-dim", d)]
    if cfg.spectral == "init_xo":
        sizes.append(("--dim", cfg.dim))  # O starts from ProNE at d = k
    for flag, size in sizes:  # ProNE's SVD needs d < N: name the option that set d
        if not 1 <= size < n:
            raise InputError(
                f"{flag} {size}: --spectral {cfg.spectral} runs ProNE at d = {size}, which "
                f"needs d < N = {n} (the graph's nodes); lower {flag} or use --spectral none"
            )

    stage = Stage(
        "spectral start",
        f"ProNE d={d} on {n:,} nodes and {A.nnz:,} stored edges (a randomized SVD, then "
        f"a Chebyshev filter of order {cfg.prone_order})",
    )

    def embed(dim):
        order, mu, theta = cfg.prone_order, cfg.prone_mu, cfg.prone_theta
        return prone(A, dim, seed, order, mu, theta, stage, np.dtype(cfg.spectral_precision))

    zero_rows = []
    E = fill_zero_rows(
        finite(embed(d), cfg), derive_seed(cfg.seed, "spectral zero rows"), zero_rows
    )
    if cfg.spectral == "features":
        out = dict(features=E)
    else:
        out = dict(X=E * np.float32(math.sqrt(1 / 3)))
    if cfg.spectral == "init_xo":
        Ek = E
        if cfg.dim != d:
            Ek = finite(embed(cfg.dim), cfg)
            Ek = fill_zero_rows(Ek, derive_seed(cfg.seed, "spectral zero O"), [])
        out["O"] = Ek * np.float32(math.sqrt(2.0 * cfg.dim / (n + cfg.dim)))
    seconds = time.perf_counter() - t0
    what = dict(features="fixed features x", init="the start of x", init_xo="the start of x and O")
    note = (
        f"spectral start: ProNE d={d} (order {cfg.prone_order}, mu {cfg.prone_mu:g}, theta "
        f"{cfg.prone_theta:g}) as {what[cfg.spectral]} in {seconds:.2f} s"
    )
    if zero_rows[0]:
        note += (
            f"; {zero_rows[0]} of {n} rows were zero (nodes without edges, or cancelled by "
            "the propagation): those start from random unit rows"
        )
    return SpectralStart(seconds=seconds, note=note, **out)


def finite(E, cfg):
    """``E``, ProNE's rows, when every entry is finite; else an InputError: a NaN start
    would train nothing but NaN."""
    bad = int((~np.isfinite(E).all(axis=1)).sum())
    if bad:
        raise InputError(
            f"spectral start: {bad} of {E.shape[0]} ProNE rows came out NaN or infinite "
            f"(--spectral-precision {cfg.spectral_precision}, --prone-theta "
            f"{cfg.prone_theta:g}); try --spectral-precision float64 or --spectral none"
        )
    return E


def fill_zero_rows(E, seed, count):
    """``E`` with each all-zero row replaced by a random unit row (float32, from ``seed``):
    a zero x or o_v never trains (squash has no gradient at 0), so a node ProNE cannot
    place starts at random as without the spectral start.  Appends the count to ``count``."""
    zero = ~np.any(E != 0, axis=1)
    count.append(int(zero.sum()))
    if zero.any():
        E = E.copy()
        R = np.random.default_rng(seed).standard_normal((int(zero.sum()), E.shape[1]))
        E[zero] = (R / np.linalg.norm(R, axis=1, keepdims=True)).astype(E.dtype)
    return E
