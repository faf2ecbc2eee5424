"""Every gradient of the hand-derived backward pass against central finite differences in
float64 (relative error < 1e-6), and the fast forward kernels against the float64 reference
caps2ne_np/model/reference.py. The output layer's small backward kernels (add_scaled_rows,
column sums, scatter rows) each against plain NumPy, serial and parallel."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.model import capsules, grads, reference
from caps2ne_np.model.batch_forward import forward
from caps2ne_np.model.core import loss_and_grads
from caps2ne_np.model.features import SparseFeatures
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import Params
from cases import make_case

H = 1e-6
BAR = 1e-6


CONFIGS = [
    (m, rule, mode, scale)
    for m in (1, 2, 3)
    for rule in ("paper", "sabour")
    for mode in ("exact", "stop")
    for scale in (None, 1.0)
    if not (m == 1 and rule == "sabour")  # one iteration never updates b
]


@pytest.mark.parametrize("m,rule,mode,scale", CONFIGS)
@pytest.mark.parametrize("features", ["trainable", "fixed", "sparse"])
@pytest.mark.parametrize("seed", [0, 1])
def test_loss_and_grads_match_central_differences(
    m, rule, mode, scale, features, seed, record_property
):
    """Also records each case's errors (in --junitxml; docs/results/gradcheck.md tabulates them)."""
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(seed)
    n_slots = ctx.shape[1]
    cfg = ModelConfig(routing_iters=m, routing_rule=rule, routing_scale=scale, grad_mode=mode)
    fixed = features != "trainable"
    if features == "sparse":  # bag-of-words-like: most entries zero
        X[np.random.default_rng(seed + 100).random(X.shape) < 0.6] = 0.0
        X[2] = 0.0  # an all-zero feature row (as in Citeseer)
        params = Params(
            W, O, bias, SparseFeatures.from_scipy(sp.csr_matrix(X), np.float64), fixed_features=True
        )
    else:
        params = Params(W, O, bias, X, fixed_features=fixed)
    loss, g = loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)

    sc = float(n_slots) if scale is None else scale
    c_fixed = None
    if mode == "stop":  # finite differences with c frozen
        fw = forward(params, ctx, cfg)
        c_fixed = fw.c[m - 1]

    def f():
        return reference.loss(
            W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, m, sc, rule, c_fixed
        )

    assert loss == pytest.approx(
        reference.loss(W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, m, sc, rule),
        rel=1e-12,
    )
    named = [("W", W, g.W), ("O", O, g.O), ("bias", bias, g.bias)]
    if not fixed:
        named.append(("X", X, g.X))
    else:
        assert g.X is None
    errors = {
        name: reference.rel_error(analytic, reference.numeric_grad(f, arr, h=H))
        for name, arr, analytic in named
    }
    record_property(
        "gradcheck",
        json.dumps(
            dict(
                m=m, rule=rule, mode=mode, scale=scale, features=features, seed=seed, errors=errors
            )
        ),
    )
    bad = {name: f"{err:.2e}" for name, err in errors.items() if not err < BAR}
    assert not bad, f"relative errors over {BAR}: {bad}"


@pytest.mark.parametrize("n,k", [(1, 2), (3, 5)])
def test_squash_matches_reference_and_backward_matches_central_differences(n, k):
    rng = np.random.default_rng(10 * n + k)
    s = rng.standard_normal((n, k))
    d_e = rng.standard_normal((n, k))
    out = np.empty_like(s)
    capsules.squash(s, out)
    np.testing.assert_allclose(out, reference.squash(s), rtol=1e-12, atol=1e-15)
    d_s = np.empty_like(s)
    grads.squash_backward(s, d_e, d_s)
    numeric = reference.numeric_grad(lambda: float(np.sum(reference.squash(s) * d_e)), s, h=H)
    assert reference.rel_error(d_s, numeric) < BAR


def test_squash_float32_matches_reference_float64():
    rng = np.random.default_rng(3)
    s = rng.standard_normal((20, 16)).astype(np.float32)
    out = np.empty_like(s)
    capsules.squash(s, out)
    np.testing.assert_allclose(out, reference.squash(s), rtol=1e-5, atol=1e-6)


def test_squash_and_gradient_are_finite_and_zero_at_zero_vector():
    s = np.zeros((2, 4))
    out = np.full_like(s, np.nan)
    capsules.squash(s, out)
    d_s = np.full_like(s, np.nan)
    grads.squash_backward(s, np.ones_like(s), d_s)
    assert np.all(out == 0) and np.all(np.isfinite(d_s)) and np.all(d_s == 0)


@pytest.mark.parametrize("m,rule", [(1, "paper"), (3, "paper"), (3, "sabour")])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_route_matches_naive(m, rule, dtype, tol):
    rng = np.random.default_rng(m)
    n_slots, n_pairs, k = 4, 5, 6
    u_hat = rng.normal(0, 0.7, size=(n_slots, n_pairs, k))
    c = np.empty((m, n_pairs, n_slots), dtype=dtype)
    s = np.empty((m, n_pairs, k), dtype=dtype)
    e = np.empty((m, n_pairs, k), dtype=dtype)
    capsules.route(u_hat.astype(dtype), m, dtype(n_slots), capsules.ROUTING_RULES[rule], c, s, e)
    for p in range(n_pairs):
        e_ref, cs_ref = reference.route(u_hat[:, p, :], m, float(n_slots), rule)
        np.testing.assert_allclose(e[m - 1, p], e_ref, rtol=tol, atol=tol)
        for r in range(m):
            np.testing.assert_allclose(c[r, p], cs_ref[r], rtol=tol, atol=tol)


def test_one_iteration_with_default_scale_gives_unit_coefficients():
    u_hat = np.random.default_rng(0).normal(size=(9, 2, 3))
    c = np.empty((1, 2, 9))
    s = np.empty((1, 2, 3))
    e = np.empty((1, 2, 3))
    capsules.route(u_hat, 1, 9.0, capsules.RULE_PAPER, c, s, e)
    np.testing.assert_allclose(c, 1.0)
    np.testing.assert_allclose(s[0], u_hat.sum(axis=0))


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_forward_and_sampled_softmax_match_reference(dtype, tol):
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(
        5, n_nodes=12, n_pairs=6, n_slots=4
    )
    cfg = ModelConfig(routing_iters=3)
    params = Params(W, O, bias, X).astype(dtype)
    fw = forward(params, ctx, cfg)
    e_ref, _ = reference.capsule_output(W, X, ctx, 3, 4.0, "paper")
    np.testing.assert_allclose(fw.e, e_ref, rtol=tol, atol=tol)
    loss, _ = loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    ref = reference.sampled_softmax_loss(e_ref, O, bias, targets, sampled, q_true, q_sampled)
    assert loss == pytest.approx(ref, rel=10 * tol)


def test_float32_gradients_track_float64():
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(9, n_pairs=5)
    cfg = ModelConfig(routing_iters=3)
    _, g64 = loss_and_grads(Params(W, O, bias, X), ctx, targets, sampled, q_true, q_sampled, cfg)
    _, g32 = loss_and_grads(
        Params(W, O, bias, X).astype(np.float32), ctx, targets, sampled, q_true, q_sampled, cfg
    )
    for a, b in [(g32.W, g64.W), (g32.O, g64.O), (g32.bias, g64.bias), (g32.X, g64.X)]:
        assert reference.rel_error(a, b) < 1e-5


def test_scatter_add_rows_sums_repeats_like_numpy_add_at():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 5, size=40)
    vals = rng.normal(size=(40, 37))
    out = np.zeros((5, 37))
    grads.scatter_add_rows(out, rows, vals)
    ref = np.zeros((5, 37))
    np.add.at(ref, rows, vals)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("m", [1, 3])
def test_sparse_feature_path_agrees_with_dense_path(dtype, tol, m):
    rng = np.random.default_rng(m)
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(
        7, n_nodes=15, n_pairs=8, n_slots=4, d=30, k=6, n_sampled=5, scale_w=0.3
    )
    X = (rng.random(X.shape) < 0.15).astype(np.float64)  # binary bag of words
    X[3] = 0.0
    cfg = ModelConfig(routing_iters=m)
    dense = Params(W, O, bias, X, fixed_features=True).astype(dtype)
    sparse = Params(
        W, O, bias, SparseFeatures.from_scipy(sp.csr_matrix(X)), fixed_features=True
    ).astype(dtype)
    loss_d, g_d = loss_and_grads(dense, ctx, targets, sampled, q_true, q_sampled, cfg)
    loss_s, g_s = loss_and_grads(sparse, ctx, targets, sampled, q_true, q_sampled, cfg)
    assert loss_s == pytest.approx(loss_d, rel=tol)
    for a, b in [(g_s.W, g_d.W), (g_s.O, g_d.O), (g_s.bias, g_d.bias)]:
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_squash_csr_matches_dense_squash():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 9)) * (rng.random((6, 9)) < 0.4)
    X[1] = 0.0
    sf = SparseFeatures.from_scipy(sp.csr_matrix(X), np.float64)
    u = sp.csr_matrix((sf.u_data, sf.indices, sf.indptr), shape=sf.shape).toarray()
    np.testing.assert_allclose(u, reference.squash(X), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blas_helpers_match_numpy_matmul(dtype):
    from caps2ne_np.kernels.blas import row_matmul

    rng = np.random.default_rng(0)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    x, y, z = (
        rng.random((37, 8)).astype(dtype),
        rng.random((8, 5)).astype(dtype),
        rng.random((5, 8)).astype(dtype),
    )
    np.testing.assert_allclose(row_matmul(x, y), x @ y, rtol=tol)
    np.testing.assert_allclose(row_matmul(x, z, trans_b=True), x @ z.T, rtol=tol)
    np.testing.assert_allclose(row_matmul(x[:3], y), x[:3] @ y, rtol=tol)  # fewer rows than chunks
    from caps2ne_np.kernels.blas import row_matmul_tn, segment_matmul, segment_matmul_tn

    w = rng.random((37, 6)).astype(dtype)
    np.testing.assert_allclose(row_matmul_tn(x, w), x.T @ w, rtol=tol)
    np.testing.assert_allclose(row_matmul_tn(x[:2], w[:2]), x[:2].T @ w[:2], rtol=tol)
    # segmented products: blocks [0, 10), [10, 10) (empty), [10, 37) of the rows
    ptr = np.array([0, 10, 10, 37])
    B = rng.random((3, 8, 5)).astype(dtype)
    ref = np.concatenate([x[0:10] @ B[0], x[10:37] @ B[2]])
    np.testing.assert_allclose(segment_matmul(x, B, ptr), ref, rtol=tol)
    np.testing.assert_allclose(
        segment_matmul(x, np.ascontiguousarray(B.transpose(0, 2, 1)), ptr, trans_b=True),
        ref,
        rtol=tol,
    )
    out = np.full((3, 8, 6), np.nan, dtype=dtype)
    segment_matmul_tn(x, w, ptr, out)
    np.testing.assert_allclose(out[0], x[:10].T @ w[:10], rtol=tol)
    assert np.all(out[1] == 0)
    np.testing.assert_allclose(out[2], x[10:].T @ w[10:], rtol=tol)


def test_row_sparse_W_gradient_for_sparse_features_equals_the_dense_one():
    from caps2ne_np.model.core import loss_and_row_grads
    from caps2ne_np.model.params import slot_major
    from caps2ne_np.model.row_grad import row_matrix

    rng = np.random.default_rng(11)
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(
        3, n_nodes=15, n_pairs=6, n_slots=4, d=30, k=6, n_sampled=5, scale_w=0.3
    )
    X = (rng.random(X.shape) < 0.15).astype(np.float64)
    params = Params(
        slot_major(W),
        O,
        bias,
        SparseFeatures.from_scipy(sp.csr_matrix(X), np.float64),
        fixed_features=True,
    )
    cfg = ModelConfig(routing_iters=2)
    # the same features given dense: d_W from one GEMM per slot over the rows of u
    dense = Params(slot_major(W), O, bias, X, fixed_features=True)
    loss, g = loss_and_grads(dense, ctx, targets, sampled, q_true, q_sampled, cfg)
    loss2, rg = loss_and_row_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    assert loss2 == pytest.approx(loss, rel=1e-12)
    dense_rows = row_matrix(slot_major(g.W))  # (I * d, k)
    rebuilt = np.zeros_like(dense_rows)
    rebuilt[rg["W"].rows] = rg["W"].values
    np.testing.assert_allclose(rebuilt, dense_rows, rtol=1e-12, atol=1e-15)
    assert len(rg["W"].rows) < dense_rows.shape[0]  # only touched columns


def test_row_sparse_W_gradient_for_sparse_features_matches_finite_differences():
    # The training path (rows.batch_columns + grads.predict_sparse_backward_cols)
    # checked directly against central differences in float64, untouched columns of
    # W included (their gradient must be exactly zero and absent from the rows).
    from caps2ne_np.model.core import loss_and_row_grads
    from caps2ne_np.model.params import slot_major

    rng = np.random.default_rng(12)
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(
        5, n_nodes=12, n_pairs=5, n_slots=3, d=20, k=4, n_sampled=4, scale_w=0.3
    )
    X = (rng.random(X.shape) < 0.2) * rng.random(X.shape)
    params = Params(
        slot_major(W), O, bias, SparseFeatures.from_scipy(sp.csr_matrix(X)), fixed_features=True
    )
    cfg = ModelConfig(routing_iters=2)

    def loss():
        return loss_and_row_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)[0]

    _, rg = loss_and_row_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    W_rows = params.W.transpose(0, 2, 1).reshape(-1, params.W.shape[1])  # view: (I * d, k)
    assert np.shares_memory(W_rows, params.W)
    numeric = reference.numeric_grad(loss, W_rows)
    analytic = np.zeros_like(numeric)
    analytic[rg["W"].rows] = rg["W"].values
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-9)
    untouched = np.setdiff1d(np.arange(W_rows.shape[0]), rg["W"].rows)
    assert untouched.size and np.all(numeric[untouched] == 0)
    assert np.abs(numeric).max() > 1e-4  # the check is not vacuous


VERSIONS = ["serial", "parallel"]


def _problem(dtype, seed=0, n_pairs=13, k=37, n_nodes=9):
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(n_pairs, k)).astype(dtype)
    O = rng.normal(size=(n_nodes, k)).astype(dtype)
    bias = rng.normal(size=n_nodes).astype(dtype)
    targets = rng.integers(0, n_nodes, size=n_pairs).astype(np.int64)
    targets[:3] = 4  # a repeated target
    return rng, e, O, bias, targets


def _tol(dtype):
    return dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_add_scaled_rows(version, dtype):
    rng, e, O, _, targets = _problem(dtype, seed=2)
    d_true = rng.normal(size=targets.shape[0]).astype(dtype)
    ref = e + d_true[:, None] * O[targets]
    getattr(grads._add_scaled_rows, version)(e, d_true, O, targets)
    np.testing.assert_allclose(e, ref, **_tol(dtype))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("n_cols", [1, 16, 37])
def test_column_sums_in_row_order(version, n_cols):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(11, n_cols)).astype(np.float32)
    out = np.full(n_cols, np.nan, dtype=np.float32)
    getattr(grads.column_sums, version)(a, out)
    ref = np.zeros(n_cols, dtype=np.float64)
    for p in range(a.shape[0]):  # the kernel's order, in float64, rounded once
        ref += a[p]
    np.testing.assert_array_equal(out, ref.astype(np.float32))


@pytest.mark.parametrize("version", VERSIONS)
def test_scatter_rows_sums_repeated_rows_in_order(version):
    rng = np.random.default_rng(4)
    rows = np.array([2, 0, 2, 5, 2], dtype=np.int64)
    values = rng.normal(size=(5, 21)).astype(np.float32)
    out = rng.normal(size=(6, 21)).astype(np.float32)
    ref = out.copy()
    for n, r in enumerate(rows):  # in order n = 0, 1, ...
        ref[r] += values[n]
    getattr(grads._scatter_rows_serial, version)(rows, values, out)
    np.testing.assert_array_equal(out, ref)
    scal_out = np.zeros(6, dtype=np.float32)
    grads.scatter_scalars(rows, values[:, 0].copy(), scal_out)
    scal_ref = np.zeros(6, dtype=np.float32)
    np.add.at(scal_ref, rows, values[:, 0])
    np.testing.assert_allclose(scal_out, scal_ref, rtol=1e-6)
