import numpy as np
import pytest

from caps2ne_np.optim import Adam

import naive


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_adam_matches_tf1_reference_over_several_steps(dtype, tol):
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(7, 3))
    p = p0.astype(dtype)
    opt = Adam({"p": p}, lr=0.01)
    ref, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t in range(1, 6):
        g = rng.normal(size=p0.shape)
        opt.step({"p": g.astype(dtype)})
        ref, m, v = naive.adam_tf1(ref, g, m, v, t, 0.01)
    np.testing.assert_allclose(p, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(opt.m["p"], m, rtol=tol, atol=tol)
    assert opt.t == 5


def test_adam_rejects_non_positive_lr():
    with pytest.raises(ValueError, match="lr"):
        Adam({"p": np.zeros(2)}, lr=0)
