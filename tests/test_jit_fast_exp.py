"""caps2ne_np.kernels.jit.fast_exp: Cephes expf for float32 (vectorisable), np.exp for float64."""

import numpy as np
from numba import njit

from caps2ne_np.kernels.jit import fast_exp


@njit
def _apply(x, out):
    for i in range(x.shape[0]):
        out[i] = fast_exp(x[i])


def ulp_error(got, ref):
    ref32 = ref.astype(np.float32)
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref32)).astype(np.float64)


def test_float32_within_2_ulp_over_the_softmax_range():
    x = np.concatenate(
        [
            np.linspace(-87.0, 88.0, 400_001),
            -np.logspace(-8, 1.9, 10_000),
            [0.0, -0.0, 1e-30, -1e-30],
        ]
    ).astype(np.float32)
    out = np.empty_like(x)
    _apply(x, out)
    ref = np.exp(x.astype(np.float64))
    assert ulp_error(out, ref).max() <= 2.0


def test_float32_limits_and_specials():
    x = np.array([-1000.0, -104.0, -88.0, 89.0, 1000.0, 0.0, -87.3], dtype=np.float32)
    out = np.empty_like(x)
    _apply(x, out)
    # below -87.34 exp(x) is subnormal (< 1.2e-38): flushed to zero, never garbage
    assert out[0] == 0.0 and out[1] == 0.0 and out[2] == 0.0
    assert 1e-38 < out[6] < 1.3e-38
    assert np.isfinite(out[3]) and out[3] > 1e38  # clamped at the largest finite exp
    assert out[5] == 1.0


@njit
def _apply_np(x, out):
    for i in range(x.shape[0]):
        out[i] = np.exp(x[i])


def test_float64_is_numbas_np_exp_exactly():
    x = np.linspace(-700, 700, 10_001)
    out, ref = np.empty_like(x), np.empty_like(x)
    _apply(x, out)
    _apply_np(x, ref)
    np.testing.assert_array_equal(out, ref)
