"""The small output-layer kernels, each against plain NumPy, serial and parallel.

They are also covered through the loss and gradient tests (naive model, finite
differences); here each one is checked on its own, with repeated targets and
column counts that do not fill the last block."""

import numpy as np
import pytest

from caps2ne_np.model import capsules, grads

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
def test_target_logits(version, dtype):
    rng, e, O, bias, targets = _problem(dtype)
    log_q = rng.normal(size=targets.shape[0]).astype(dtype)
    out = np.full(targets.shape[0], np.nan, dtype=dtype)
    getattr(capsules._target_logits, version)(e, O, bias, targets, log_q, out)
    ref = (
        np.einsum("pk,pk->p", e.astype(np.float64), O[targets].astype(np.float64))
        + bias[targets]
        - log_q
    )
    np.testing.assert_allclose(out, ref, **_tol(dtype))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_add_to_rows(version, dtype):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(7, 19)).astype(dtype)
    v = rng.normal(size=19).astype(dtype)
    ref = a + v[None, :]
    getattr(capsules._add_to_rows, version)(a, v)
    np.testing.assert_array_equal(a, ref)  # one addition per element


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


def test_output_logits_matches_numpy():
    rng, e, O, bias, targets = _problem(np.float64, seed=5)
    sampled = np.array([1, 3, 6, 8], dtype=np.int64)
    lq_t = rng.normal(size=targets.shape[0])
    lq_s = rng.normal(size=sampled.shape[0])
    z_t, z_s = capsules.output_logits(e, O, bias, targets, sampled, lq_t, lq_s)
    np.testing.assert_allclose(z_t, (e * O[targets]).sum(1) + bias[targets] - lq_t, rtol=1e-12)
    np.testing.assert_allclose(z_s, e @ O[sampled].T + bias[sampled] - lq_s, rtol=1e-12)
