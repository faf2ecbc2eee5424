"""ProNE's second stage over trained embeddings: spectral propagation of the o_v
(Zhang et al., IJCAI 2019, section 4), the ``--propagate`` option.  docs/training.md,
"Spectral propagation".

With A the symmetric adjacency (spectral.adjacency), A~ = I + A, D~ its degrees and
L = I - D~^-1 A~ the normalised Laplacian (eigenvalues lambda in [0, 2)), ProNE's
band-pass filter keeps the part of a signal whose frequencies lie near mu:

    g(lambda) = exp(-theta ((lambda - mu)^2 / 2 - 1))
              = exp(-theta X),   X = (L - mu I)^2 / 2 - I   (spectrum in [-1, 1] for 0 <= mu <= 2)

expanded in Chebyshev polynomials of X (the Bessel coefficients, spectral.chebyshev_filter):

    g(L) O ~ sum_{i < order} c_i T_i(X) O,   c_0 = I_0(theta), c_i = 2 (-1)^i I_i(theta)

with a truncation error at most sum_{i >= order} 2 I_i(theta) per unit of O (in the
D~^1/2 norm, where L is symmetric).  The propagated embedding is then, as ProNE does,

    O~ = A~ (O - g(L) O),   O~ = U S V^T (thin SVD),   E = rownorm(U S^p)

with ProNE's p = 1/2 (a flatter spectrum than O~'s) or p = 1 (the rows of O~ itself,
turned by V: ``--spectrum-power``, chosen per graph by ``written_power``).  Since
U S^p = O~ V S^(p-1), E = rownorm(O~ P) with the (k, k) map P = V S^(p-1):
the map a model file keeps (``propagation_P``) so that ``infer`` sends new nodes through
the same filter and the same P (``embed_new``).

Notes: the filter is the reference code's (THUDM/ProNE, and the nodevectors package's
``chebyshev_gaussian``), whose exp(-theta ((lambda - mu)^2 / 2 - 1)) differs from the
paper's exp(-theta ((lambda - mu)^2 - 1) / 2) by a constant factor exp(theta / 2) in the
band (spectral.py says the same).  Everything is scipy.sparse products on float64 and
one dense thin SVD (N, k), on one BLAS thread: the same bits on any machine's thread
count.  The ``auto`` rule, which decides from the graph and the trained o_v whether to
propagate, reads no labels (``decide``).
"""

import logging
import time
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import InputWarning
from . import prone as spectral

log = logging.getLogger(__name__)

HOLDOUT_FRACTION = 0.05
HOLDOUT_MAX = 2000
AUTO_MARGIN = 0.1
"""--propagate auto: on unless propagating lowers the link-prediction AUC of held-out
edges by more than this (``decide``).  On the panel (docs/results/propagate_panel.md)
the propagated rows' AUC was 0.002 to 0.07 below the o_v's on the graphs where
propagation raised the classification score by 0.6 to 1.9 points, and 0.25 above on POS
(+2.5):
the margin lets all of them propagate; no graph of the panel had propagation lower the
score, so the margin could not be set from one that did."""


POWER_STRUCTURE = 0.75
"""--spectrum-power auto writes rownorm(U S) (power 1) when the graph's structure measure
(spectral/structure.py, the stop rule's: held-out edges predicted by the graph's own
rank-32 factors, no labels) is at least this, else ProNE's rownorm(U S^1/2).  Chosen on
the tuning graphs (docs/training.md, 'The written spectrum'): every graph at 0.776 or more
(Pubmed, Citeseer, Cora, LFR 1k at mixing 0.3) scored as well or better with power 1,
every graph at 0.736 or less (PPI, LFR 3k at 0.5 and 0.7, POS) better with 1/2; 0.75
lies between.  No longer the default (defaults.SPECTRUM_POWER): Wiki (structure 0.88,
mean degree 9.6, 17 classes; no rule was chosen on it) lost 2.9 points to it at C = 1,
and the airport graphs 6 to 13 (docs/results/written_loo.md)."""


COLLAPSED_MAX = 0.5
"""The written embeddings are the o_v, not the propagated rows, when more than this
fraction of the nodes get a propagated row identical to another node's whose o_v
differs (``check_rows``): the filter's first factor I + A gives two adjacent nodes with
the same neighbours the same row (every node of a complete graph), and at k = 1 a unit
row is +1 or -1.  Fewer are named in the log line."""


def filtered(A, O, order, mu, theta, progress=spectral._silent, dtype=np.float64):
    """O~ = (I + A)(O - sum_{i < order} c_i T_i(X) O): the signal ProNE factorises,
    (N, k) in ``dtype`` (Fortran order, spectral.filtered).  ``A`` (N, N) symmetric
    float64 CSR without self loops."""
    return spectral.filtered(A, O, order, mu, theta, progress, dtype)


def projection(Ot, power=0.5):
    """P = V S^(power - 1) (k, k) of the thin SVD O~ = U S V^T, so that O~ P = U S^power
    (ProNE's power 1/2 by default; ``spectrum_power``); directions of a zero singular
    value map to 0, and so do the columns past N when N < k.  Signs as
    spectral.randomized_svd's: each column of U has its largest entry positive."""
    return projections(Ot, (power,))[power]


def projections(Ot, powers):
    """{power: ``projection(Ot, power)``} for each of ``powers``, the same bits, from one
    factorisation of O~ (the written rows of several powers: evaluation/written.py)."""
    if Ot.dtype == np.float32:  # from the Gram matrix in float64, as spectral.embedding
        svd = spectral.gram_svd(Ot)
        return {p: spectral.gram_projection(Ot, power=p, svd=svd)[1] for p in powers}
    S, Vt, signs = _tall_svd(Ot)
    signs[signs == 0] = 1.0
    top = S[0] if S.size else 0.0
    kept = S > 1e-12 * max(top, 1e-300)
    out = {}
    for power in powers:
        inv = np.divide(1.0, spectral.power_divisor(S, power), out=np.zeros_like(S), where=kept)
        P = np.zeros((Ot.shape[1], Ot.shape[1]))  # N < k: the columns past rank N stay 0
        P[:, : S.size] = (Vt.T * signs[None, :]) * inv[None, :]
        out[power] = P
    return out


SAFE_MIN = np.sqrt(np.finfo(np.float64).tiny) / np.finfo(np.float64).eps
"""gesdd's SMLNUM: it rescales a matrix whose largest entry lies outside [SAFE_MIN,
1 / SAFE_MIN] before its steps (``_tall_svd`` then calls it whole)."""


def _tall_svd(Ot, rows=1 << 12):
    """``(S, Vt, signs)`` of the thin SVD Ot = U S V^T (gesdd), signs the column signs of
    U (spectral.column_signs), without an (N, k) U beside Ot and gesdd's copy of it.

    For a tall Ot (N >= 11 k / 6 rows, gesdd's "path 3"), gesdd factorises Ot = Q R
    (dgeqrf, dorgqr), takes the SVD of R (k, k) as gesdd takes a square matrix's, and
    forms U = Q U_R (dgemm); these steps are called here one by one, with gesdd's
    workspace (blocked), so S and V^T are its bits, and U is formed a few thousand rows
    at a time only to read its signs.  Otherwise (few rows, or entries gesdd would
    rescale) gesdd itself."""
    from scipy import linalg
    from scipy.linalg import blas, lapack

    n, k = Ot.shape
    top = max(float(Ot.max()), -float(Ot.min())) if Ot.size else 0.0  # no |Ot| copy
    if n < max(int(k * 11 / 6), 2) or not SAFE_MIN <= top <= 1.0 / SAFE_MIN:
        U, S, Vt = linalg.svd(Ot, full_matrices=False, check_finite=False, lapack_driver="gesdd")
        return S, Vt, spectral.column_signs(U)
    C = np.array(Ot, dtype=np.float64, order="F")  # gesdd's own copy, factorised in place
    lwork = int(lapack.dgeqrf(C, lwork=-1, overwrite_a=1)[2][0])  # queries copy C without
    C, tau, _, info = lapack.dgeqrf(C, lwork=lwork, overwrite_a=1)  # overwrite_a
    R = np.triu(C[:k, :k])
    lwork = int(lapack.dorgqr(C, tau, lwork=-1, overwrite_a=1)[1][0])
    Q, _, info2 = lapack.dorgqr(C, tau, lwork=lwork, overwrite_a=1)
    if info or info2:
        raise np.linalg.LinAlgError(f"QR of the filtered o_v failed (info {info}, {info2})")
    del C
    UR, S, Vt = linalg.svd(R, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    UR = np.asfortranarray(UR)
    rows_of_U = (blas.dgemm(1.0, Q[r0 : r0 + rows], UR) for r0 in range(0, n, rows))  # Q U_R
    return S, Vt, spectral.block_signs(rows_of_U)


class Propagated(NamedTuple):
    """The propagated embeddings ``E`` (N, k) float32, rows of length ``scale``; the map
    ``P`` (k, k) float64 (E = scale rownorm(O~ P)); the ``seconds`` it took and a
    ``note`` for the log."""

    E: object
    P: object
    seconds: float = 0.0
    note: str = ""


def propagate(
    A,
    O,
    order=10,
    mu=0.2,
    theta=0.5,
    scale=1.0,
    progress=spectral._silent,
    dtype=np.float64,
    power=0.5,
):
    """Spectral propagation of the embeddings ``O`` (N, k) over the symmetric adjacency
    ``A`` (scipy.sparse (N, N)): a ``Propagated`` (module docstring), its rows of length
    ``scale`` (ProNE's: 1) and E = rownorm(U S^power) (ProNE's: 1/2, ``spectrum_power``);
    ``progress(where)`` told how far along it is; ``dtype`` of
    the filter (float64, or float32: ``--spectral-precision``, the SVD then from O~'s
    Gram matrix, ``projection``).  Memory (docs/scaling.md): O~ (N, k) and the filter's
    column blocks, then (float64) O~ and the copy its SVD factorises (``_tall_svd``);
    then O~ and E (N, k) float32, the rows O~ P formed a block of rows at a time
    (``written_rows``)."""
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    A = sp.csr_matrix(A, dtype=np.float64)
    with threadpool_limits(limits=1, user_api="blas"):
        Ot = filtered(A, O, order, mu, theta, progress, dtype)
        progress("SVD of the filtered o_v")
        P = projection(Ot, power)
        E = written_rows(Ot, P, scale)
    return Propagated(E, P, time.perf_counter() - t0)


def written(rows, scale=1.0, inplace=False):
    """``scale`` rownorm(rows) as float32: the written scale (--row-norm).  A zero row
    stays zero.  ``inplace``: ``rows`` (float64) is overwritten on the way."""
    E = spectral.rownorm(rows, out=rows if inplace else None)
    if scale != 1.0:
        E *= scale
    return E.astype(np.float32)


def written_rows(Ot, P, scale=1.0, rows=1 << 12):
    """``written(Ot @ P, scale)`` formed ``rows`` rows at a time: no (N, k) float64 product
    beside ``Ot`` (spectral.projected_rows: the same dgemm bits by row blocks,
    tests/test_propagation.py)."""
    return spectral.projected_rows(Ot, P, scale, rows)


def embed_new(A, O, rows, P, order=10, mu=0.2, theta=0.5, scale=1.0, dtype=np.float64):
    """The propagated embeddings of the nodes ``rows`` of a graph that holds new nodes:
    scale rownorm(O~[rows] P), O~ filtered over ``A`` (the whole graph, old and new
    nodes) from ``O`` (N, k): the training nodes' o_v and the new nodes' calibrated
    Algorithm 3 outputs, P the training run's map.  (k,) float32 rows of length
    ``scale``, the training run's; the filter in ``dtype``, the training run's."""
    from threadpoolctl import threadpool_limits

    A = sp.csr_matrix(A, dtype=np.float64)
    with threadpool_limits(limits=1, user_api="blas"):
        Ot = filtered(A, O, order, mu, theta, dtype=dtype)
        return written(Ot[np.asarray(rows, dtype=np.int64)] @ P, scale)


# --------------------------------------------------------------------------- label-free measures


def holdout(A, seed=0, fraction=HOLDOUT_FRACTION, max_edges=HOLDOUT_MAX):
    """A seeded link-prediction sample of the symmetric adjacency ``A`` (scipy.sparse):
    dict(pos (m, 2) held-out edges u < v, neg (m, 2) node pairs that are not edges,
    A_rest: A without the held-out edges, float64 CSR).  m = min(max_edges,
    fraction x edges), at least 1; an edge is held out only while both its endpoints keep
    another edge (so m may be smaller, even 0), and a non-edge is drawn at most 100 m
    times (fewer non-edges on a nearly complete graph)."""
    A = sp.csr_matrix(A, dtype=np.float64)
    n = A.shape[0]
    upper = sp.triu(A, k=1).tocoo()
    m_all = upper.nnz
    rng = np.random.default_rng(seed)
    m = max(1, min(max_edges, int(fraction * m_all)))
    deg = np.diff(A.indptr).astype(np.int64)
    pos = []
    for e in rng.permutation(m_all):
        u, v = int(upper.row[e]), int(upper.col[e])
        if deg[u] > 1 and deg[v] > 1:
            deg[u] -= 1
            deg[v] -= 1
            pos.append((u, v))
            if len(pos) == m:
                break
    pos = np.asarray(pos, dtype=np.int64).reshape(-1, 2)
    neg, tries = [], 100 * max(len(pos), 10)
    while len(neg) < len(pos) and tries > 0:  # a (nearly) complete graph has few non-edges
        tries -= 1
        u, v = (int(x) for x in rng.integers(0, n, size=2))
        if u != v and A[u, v] == 0:
            neg.append((min(u, v), max(u, v)))
    neg = np.asarray(neg, dtype=np.int64).reshape(-1, 2)
    drop = sp.coo_matrix(
        (np.ones(2 * len(pos)), (np.r_[pos[:, 0], pos[:, 1]], np.r_[pos[:, 1], pos[:, 0]])),
        shape=A.shape,
    ).tocsr()
    rest = A - A.multiply(drop)
    rest.eliminate_zeros()
    return dict(pos=pos, neg=neg, A_rest=rest.tocsr())


def auc(pos_scores, neg_scores):
    """The probability that a positive pair scores above a negative one (ties count 1/2):
    the Mann-Whitney form of the ROC AUC, from average ranks (scipy.stats.rankdata's
    'average', without importing scipy.stats: a second on a cold start); NaN when
    either side is empty."""
    if len(pos_scores) == 0 or len(neg_scores) == 0:
        return float("nan")
    s = np.r_[np.asarray(pos_scores, np.float64), np.asarray(neg_scores, np.float64)]
    order = np.argsort(s, kind="stable")
    _, first, counts = np.unique(s[order], return_index=True, return_counts=True)
    r = np.empty(len(s))
    r[order] = np.repeat(first + (counts + 1) / 2.0, counts)  # 1-based, ties averaged
    n_pos, n_neg = len(pos_scores), len(neg_scores)
    return float((r[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _pair_scores(E, pairs):
    return np.einsum("ij,ij->i", E[pairs[:, 0]], E[pairs[:, 1]])


def edge_measures(held, O, order=10, mu=0.2, theta=0.5):
    """Link-prediction AUCs of ``held`` (``holdout``) for the embeddings ``O`` (N, k):
    dict(auc: dot products, auc_cos: cosines, auc_prop: the rows of O propagated over
    held['A_rest'] (spectral/propagation.py, unit rows))."""
    O = np.asarray(O, dtype=np.float64)
    pos, neg = held["pos"], held["neg"]
    U = spectral.rownorm(O)
    E = propagate(held["A_rest"], O, order, mu, theta).E.astype(np.float64)
    return dict(
        auc=auc(_pair_scores(O, pos), _pair_scores(O, neg)),
        auc_cos=auc(_pair_scores(U, pos), _pair_scores(U, neg)),
        auc_prop=auc(_pair_scores(E, pos), _pair_scores(E, neg)),
    )


def spectral_test(
    A, dim, seed=0, order=10, mu=0.2, theta=0.5, factor_only=False, progress=spectral._silent
):
    """The graph's own verdict, read without labels and without the o_v: ProNE's first
    stage R (spectral.factorize, rank ``dim``) of the graph without a held-out sample of
    edges (``holdout``), and R propagated over that graph; dict(auc_factor, auc_prop):
    the link-prediction AUC of the held-out edges by each (``factor_only``: auc_factor
    alone, the stop rule's ``structure.measure``); ``progress(where)`` told how far along
    it is."""
    from threadpoolctl import threadpool_limits

    held = holdout(A, seed)
    rest = held["A_rest"]
    with threadpool_limits(limits=1, user_api="blas"):  # the same bits on any machine
        R = spectral.factorize(spectral.proximity_matrix(rest), dim, seed, progress=progress)
    pos, neg = held["pos"], held["neg"]
    out = dict(auc_factor=auc(_pair_scores(R, pos), _pair_scores(R, neg)))
    if not factor_only:
        E = propagate(rest, R, order, mu, theta, progress=progress).E.astype(np.float64)
        out["auc_prop"] = auc(_pair_scores(E, pos), _pair_scores(E, neg))
    return out


# --------------------------------------------------------------------------- a run's option


def decide(A, O, seed=0, order=10, mu=0.2, theta=0.5, held=None):
    """``--propagate auto``: ``(on, why)`` from the graph and the trained o_v, no labels.

    A guard: propagation replaces each row by its filtered, factorised, unit-length
    version, which loses whatever the o_v carry in their norms and in directions the
    graph's low frequencies do not hold.  Held-out edges (``holdout``, seeded) measure
    it: on when the AUC of the propagated rows (filtered over the graph without those
    edges) is at least the o_v's minus AUTO_MARGIN (``edge_measures``).  Off, saying
    why, when the measure cannot be taken (no edge to hold out, or no non-edge).
    ``held``: a sample to measure on instead (``holdout``'s dict: the run's own with
    ``--stop holdout``, edges training never saw); None: drawn here from ``A``."""
    own = held is not None
    if held is None:
        held = holdout(A, seed)
    if not len(held["pos"]):
        return False, (
            "no edge can be held out (every edge has an end without another edge: a "
            "matching, a star), so nothing measures the propagation: kept off"
        )
    if not len(held["neg"]):
        return False, (
            "no non-edge to set against held-out edges (a complete graph), so nothing "
            "measures the propagation: kept off"
        )
    m = edge_measures(held, O, order, mu, theta)
    on = m["auc_prop"] >= m["auc"] - AUTO_MARGIN
    why = (
        f"held-out edges{' (never trained on)' if own else ''}: AUC {m['auc_prop']:.4f} "
        f"propagated against {m['auc']:.4f} for "
        f"the o_v, {'within' if on else 'beyond'} {AUTO_MARGIN:g}"
    )
    return on, why


def written_power(cfg, structure=None):
    """``(p, why)``: the power of the written rows rownorm(U S^p) of a propagated run with
    options ``cfg`` (--spectrum-power): the option's number, or for 'auto' 1 when the
    graph's ``structure`` (training/budget.graph_structure) is at least POWER_STRUCTURE,
    else ProNE's 0.5 (also when it was not measured: a graph too small to tell, or without
    an edge to hold out).  A
    configuration from before the option (a model file's): ProNE's 0.5."""
    chosen = str(getattr(cfg, "spectrum_power", "0.5"))
    if chosen != "auto":
        return float(chosen), f"--spectrum-power {chosen}"
    if structure is None:
        return 0.5, (
            "--spectrum-power auto: the graph's structure not measured (too small, or no "
            "edge to hold out)"
        )
    side = ">=" if structure >= POWER_STRUCTURE else "<"
    return (1.0 if side == ">=" else 0.5), (
        f"--spectrum-power auto: structure AUC {structure:.3f} {side} {POWER_STRUCTURE:g}"
    )


def apply(indptr, indices, weights, cfg, O, held=None, structure=None):
    """The written embeddings of a run with options ``cfg`` (config.TrainConfig, resolved)
    and trained o_v ``O``: a ``Propagated`` when ``cfg.propagate`` is 'on', or 'auto' and
    ``decide`` says so; else None.  Logs one line saying which and why.  The filter runs
    over the whole graph (indptr, indices, weights), also after ``--stop holdout``
    trained without some of its edges; ``held``: that run's held-out sample
    (loop.TrainResult.holdout), which 'auto' measures on, or None; ``structure``: the
    graph's structure measure (loop.TrainResult.structure), which --spectrum-power auto
    reads, or None."""
    mode = getattr(cfg, "propagate", None) or "none"
    if mode == "none":
        return None
    from ..kernels.rng import derive_seed

    n = int(np.asarray(indptr).shape[0] - 1)
    stage = spectral.Stage(
        "propagation",
        f"ProNE's filter (order {cfg.prone_order}) over the o_v of {n:,} nodes, then their "
        f"SVD (--propagate {mode})",
    )
    A = spectral.adjacency(indptr, indices, weights, n)
    t0 = time.perf_counter()
    why = "--propagate on"
    if mode == "auto":
        on, why = decide(
            A,
            O,
            derive_seed(cfg.seed, "propagate") % (2**32),
            cfg.prone_order,
            cfg.prone_mu,
            cfg.prone_theta,
            held=held,
        )
        why = f"--propagate auto, {why}"
        if not on:
            log.info("written embeddings: the o_v as trained (%s)", why)
            return None
    scale = float(getattr(cfg, "row_norm", 1.0))
    dtype = np.dtype(getattr(cfg, "spectral_precision", "float64"))
    power, chose = written_power(cfg, structure)
    p = propagate(A, O, cfg.prone_order, cfg.prone_mu, cfg.prone_theta, scale, stage, dtype, power)
    seconds = time.perf_counter() - t0
    problem, twins = check_rows(p.E, O, scale)
    if problem:
        warnings.warn(
            f"written embeddings: the o_v as trained, not propagated: {problem}; "
            "--propagate none skips the propagation",
            InputWarning,
            stacklevel=2,
        )
        return None
    note = (
        f"written embeddings: the o_v propagated (ProNE's filter, order {cfg.prone_order}, "
        f"mu {cfg.prone_mu:g}, theta {cfg.prone_theta:g}; rows rownorm(U S^{power:g}) "
        f"({chose}) of length {scale:g}; {why}) "
        f"in {seconds:.2f} s{twins}"
    )
    log.info("%s", note)
    return p._replace(seconds=seconds, note=note)


def row_groups(X, decimals=None, rows=1 << 12, scale=1.0):
    """A group id (N,) int64 for each row of ``X`` (N, k), equal for equal rows (as
    float64, divided by ``scale``, rounded to ``decimals`` when given): the ``return_inverse`` of
    ``np.unique(X, axis=0)`` up to the numbering, without its sorted copies of X.  Rows
    are hashed ``rows`` at a time (the float64 bits of each entry with their high half
    folded into their low half, times a random odd multiplier, folded again, summed
    modulo 2^64), each then compared with the first row of its hash; should two different
    rows share a hash, ``np.unique`` decides (with its copies: about 5 (N, k) float64).

    Notes: the first fold matters for float32 input, whose float64 bits end in 29 zeros:
    bits times a multiplier alone lose their top 29 bits, a 35-bit hash per entry whose
    collisions are likely past about 100,000 rows (a trained (200,000, 128) o_v table met
    one, and the ``np.unique`` fallback then took 940 MB)."""

    def exact(block):
        block = np.asarray(block, dtype=np.float64)
        if scale != 1.0:
            block = block / scale
        if decimals is not None:
            block = np.round(block, decimals)
        return block + 0.0  # -0.0 as 0.0: equal values, equal bits

    n, k = X.shape
    mult = np.random.default_rng(0).integers(1, 2**62, size=k, dtype=np.uint64) * 2 + 1
    h = np.empty(n, dtype=np.uint64)
    for r0 in range(0, n, rows):
        bits = exact(X[r0 : r0 + rows]).view(np.uint64)
        bits = bits ^ (bits >> np.uint64(32))  # one to one: the high half stays as it is
        bits *= mult
        bits ^= bits >> np.uint64(32)
        h[r0 : r0 + rows] = bits.sum(axis=1)
    _, first, ids = np.unique(h, return_index=True, return_inverse=True)
    rep = first[ids.ravel()]
    for r0 in range(0, n, rows):
        if not np.array_equal(exact(X[r0 : r0 + rows]), exact(X[rep[r0 : r0 + rows]])):
            return np.unique(exact(X), axis=0, return_inverse=True)[1].ravel()
    return ids.ravel()


def identical_rows(E, O, scale=1.0):
    """How many nodes have a propagated row ``E`` (of length ``scale``; as a unit row, to
    6 decimals) equal to that of a node whose o_v (a row of ``O``) differs from theirs."""
    e_id, o_id = row_groups(E, 6, scale=scale), row_groups(O)
    pairs = np.unique(np.stack([e_id, o_id], axis=1), axis=0)  # distinct (row of E, o_v)
    groups, kinds = np.unique(pairs[:, 0], return_counts=True)
    return int(np.isin(e_id, groups[kinds > 1]).sum())


def check_rows(E, O, scale=1.0):
    """``(problem, note)`` for the propagated rows ``E`` (of length ``scale``, --row-norm;
    compared as unit rows, whatever their length) of the o_v ``O`` (N, k).
    ``problem``: why they must not be written (a row zero or not finite, or more than
    COLLAPSED_MAX of the nodes sharing their row with a node whose o_v differs), else
    ''; ``note``: a clause for the log line naming the rows made identical, or ''."""
    n, k = E.shape
    finite = np.isfinite(E).all(axis=1)
    if not finite.all():
        return f"{int((~finite).sum())} of {n} propagated rows came out NaN or infinite", ""
    zero = ~E.any(axis=1)
    if zero.any():
        return (
            f"{int(zero.sum())} of {n} propagated rows came out zero (the filter cancelled "
            "them: see --prone-theta and --prone-mu)"
        ), ""
    same = identical_rows(E, O, scale)
    why = (
        "at --dim 1 a unit row is +1 or -1"
        if k == 1
        else "the filter gives adjacent nodes with the same neighbours the same row; in a "
        "complete graph, every node"
    )
    if same > COLLAPSED_MAX * n:
        return f"{same} of {n} rows would be identical to another node's ({why})", ""
    if same:
        return "", (
            f"; {same} of {n} rows are identical to another node's ({why}; "
            "--propagate none keeps their o_v apart)"
        )
    return "", ""
