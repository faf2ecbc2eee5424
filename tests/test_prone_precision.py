"""The spectral start's precision (caps2ne_np/spectral/prone.py): the Gram SVD and projection
against the SVDs, and the float32 route of the spectral start and the propagation
(--spectral-precision) against float64."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import orthogonal_procrustes

from caps2ne_np.spectral import prone as spectral
from caps2ne_np.spectral import propagation


def power_law_graph(n=600, m=3000, seed=0):
    """A seeded symmetric graph whose first nodes hold most edges (hubs at low ids)."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, n + 1) ** 0.8
    u = rng.choice(n, size=m, p=w / w.sum())
    v = rng.integers(0, n, size=m)
    keep = u != v
    A = sp.coo_matrix((np.ones(keep.sum()), (u[keep], v[keep])), shape=(n, n)).tocsr()
    return spectral.adjacency(A.indptr, A.indices, None, n)


def reference_u_s_half(Y):
    """U S^1/2 of NumPy's SVD, each column's largest entry positive."""
    U, S, _ = np.linalg.svd(np.asarray(Y, np.float64), full_matrices=False)
    U *= np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(U.shape[1])])[None, :]
    return U * np.sqrt(S), S


def test_gram_svd_and_projection_are_the_svds():
    rng = np.random.default_rng(5)
    Y = rng.standard_normal((3000, 12)) @ np.diag(np.geomspace(10, 0.1, 12))
    S, V = spectral.gram_svd(Y, rows=700)  # several blocks
    expected, S_ref = reference_u_s_half(Y)
    np.testing.assert_allclose(S, S_ref, rtol=1e-10)
    np.testing.assert_allclose(np.abs(V), np.abs(np.linalg.svd(Y)[2].T), atol=1e-8)
    _, P = spectral.gram_projection(Y, rows=700)
    np.testing.assert_allclose(Y @ P, expected, atol=1e-9)
    E = spectral.projected_rows(Y, P, scale=2.0, rows=700)
    np.testing.assert_allclose(E, 2.0 * spectral.rownorm(expected), atol=1e-6)


def test_gram_projection_drops_the_directions_below_its_floor():
    Y = np.random.default_rng(6).standard_normal((500, 4))
    Y[:, 3] = Y[:, 0] * 1e-3 + Y[:, 1]  # rank 3: a zero singular value
    S, P = spectral.gram_projection(Y)
    assert S[-1] < spectral.GRAM_FLOOR * S[0] and not np.any(P[:, -1])
    assert np.all(np.isfinite(P))


def aligned_residual(X, Y):
    """|X Q - Y| / |Y| for the orthogonal Q that brings X nearest Y (Procrustes): an SVD
    fixes neither the signs nor the basis of equal singular values."""
    X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
    Q, _ = orthogonal_procrustes(X, Y)
    return np.linalg.norm(X @ Q - Y) / np.linalg.norm(Y)


def test_float32_propagation_is_float64s_to_rounding():
    A = power_law_graph(2000, 20000)
    O = np.random.default_rng(7).standard_normal((A.shape[0], 24)).astype(np.float32)
    p64 = propagation.propagate(A, O, scale=2.0)
    p32 = propagation.propagate(A, O, scale=2.0, dtype=np.float32)
    assert p32.E.dtype == np.float32 and p32.P.dtype == np.float64
    assert aligned_residual(p32.E, p64.E) < 1e-5
    np.testing.assert_allclose(np.linalg.norm(p32.E, axis=1), 2.0, rtol=1e-5)


def test_float32_randomized_svd_is_float64s_to_rounding():
    """The factors before their rows are normalised (a row the rank-d factors barely
    represent has no direction float32 can resolve: docs/training.md)."""
    F = spectral.proximity_matrix(power_law_graph(2000, 20000))
    U64, S64 = spectral.randomized_svd(F, 16, 3)
    U32, S32 = spectral.randomized_svd(F, 16, 3, dtype=np.float32)
    assert U32.dtype == np.float32
    np.testing.assert_allclose(S32, S64, rtol=1e-5)
    assert aligned_residual(U32 * np.sqrt(S32), U64 * np.sqrt(S64)) < 1e-4


@pytest.mark.parametrize("weight,theta", [(3.4e38, 0.5), (1.0, 95.0), (3.4e38, 100.0)])
def test_float32_stages_hold_at_the_ends_of_the_documented_ranges(weight, theta):
    # edge weights up to float32's 3.4e38 and --prone-theta up to 100 (e^theta past
    # float32 from 88.7): the float32 filter scales by powers of two, so the propagation
    # and the start are float64's to rounding, not an overflow, a NaN or a failed SVD
    A = power_law_graph() * weight
    O = np.random.default_rng(7).standard_normal((A.shape[0], 16)).astype(np.float32)
    p64 = propagation.propagate(A, O, theta=theta)
    p32 = propagation.propagate(A, O, theta=theta, dtype=np.float32)
    assert np.isfinite(p32.E).all() and aligned_residual(p32.E, p64.E) < 1e-5
    E32 = spectral.prone(A, 16, theta=theta, dtype=np.float32)
    assert np.isfinite(E32).all()
    assert aligned_residual(E32, spectral.prone(A, 16, theta=theta)) < 1e-4


def test_float32_filter_keeps_ordinary_runs_unscaled():
    # the powers of two start only past FLOAT32_HEADROOM: an unweighted graph at the
    # default theta keeps its bits
    assert spectral.float32_scales(power_law_graph() * 1e6, 27.0) == (1.0, 1.0)
    assert spectral.float32_scales(power_law_graph() * 1e12, 28.0) != (1.0, 1.0)


def test_a_nan_spectral_start_is_refused_with_one_line(monkeypatch):
    from caps2ne_np.errors import InputError
    from caps2ne_np.training.options.config import TrainConfig

    A = power_law_graph(60, 300)
    monkeypatch.setattr(spectral, "prone", lambda A, d, *a: np.full((A.shape[0], d), np.nan))
    cfg = TrainConfig(dim=8, feat_dim=8, spectral="init_xo")
    with pytest.raises(InputError, match="NaN or infinite.*float64"):
        spectral.start(A.indptr, A.indices, None, cfg)


def test_the_precision_help_states_what_float32_gives():
    # the help said the start equals float64's "to rounding" where about half of its
    # columns come out with the other sign: it now says so, and this checks the claim
    from caps2ne_np.defaults import OPTIONS

    A = power_law_graph(2000, 20000)
    E32, E64 = spectral.prone(A, 32, dtype=np.float32), spectral.prone(A, 32)
    signs = np.sign(np.sum(E32.astype(np.float64) * E64, axis=0))
    assert 0 < np.sum(signs < 0) < 32  # some columns flip, not all
    assert np.abs(E32 * signs - E64).max() < 1e-4  # equal up to those signs
    text = " ".join(OPTIONS["spectral_precision"].help.split())
    assert "up to the signs of their columns" in text and "differ in about half" in text
