"""The output layer's small forward kernels (caps2ne_np/model/capsules.py), each against
plain NumPy, serial and parallel, with repeated targets and column counts that do not fill
the last block.  They are also covered through the loss and gradient tests (naive model,
finite differences)."""

import numpy as np
import pytest

from caps2ne_np.model import capsules

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


def test_output_logits_matches_numpy():
    rng, e, O, bias, targets = _problem(np.float64, seed=5)
    sampled = np.array([1, 3, 6, 8], dtype=np.int64)
    lq_t = rng.normal(size=targets.shape[0])
    lq_s = rng.normal(size=sampled.shape[0])
    z_t, z_s = capsules.output_logits(e, O, bias, targets, sampled, lq_t, lq_s)
    np.testing.assert_allclose(z_t, (e * O[targets]).sum(1) + bias[targets] - lq_t, rtol=1e-12)
    np.testing.assert_allclose(z_s, e @ O[sampled].T + bias[sampled] - lq_s, rtol=1e-12)
