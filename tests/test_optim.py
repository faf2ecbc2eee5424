from types import SimpleNamespace

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


def test_adam_updates_a_slot_major_parameter_in_place_like_a_contiguous_one():
    from caps2ne_np.core import slot_major
    rng = np.random.default_rng(1)
    W0 = rng.normal(size=(3, 4, 5))
    a, b = W0.copy(), slot_major(W0)
    assert not b.flags.c_contiguous and np.shares_memory(b, b.transpose(0, 2, 1))
    opt_a, opt_b = Adam({"W": a}, lr=0.1), Adam({"W": b}, lr=0.1)
    for _ in range(3):
        g = rng.normal(size=W0.shape)
        opt_a.step({"W": g})
        opt_b.step({"W": g})           # g is C-contiguous: copied into b's layout
    np.testing.assert_array_equal(a, b)


def test_lazy_adam_updates_only_touched_rows_and_matches_reference_there():
    from caps2ne_np.core import RowGrad
    rng = np.random.default_rng(2)
    p0 = rng.normal(size=(6, 3))
    p = p0.copy()
    opt = Adam({"p": p}, lr=0.05)
    ref, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, rows in enumerate([np.array([0, 2]), np.array([2, 5]), np.array([2])], start=1):
        g = rng.normal(size=(len(rows), 3))
        opt.step({}, rows={"p": RowGrad(rows, g)})
        # reference: Adam on the touched rows only, with the global step t
        new, m_new, v_new = naive.adam_tf1(ref[rows], g, m[rows], v[rows], t, 0.05)
        ref[rows], m[rows], v[rows] = new, m_new, v_new
    np.testing.assert_allclose(p, ref, rtol=1e-12)
    np.testing.assert_array_equal(p[[1, 3, 4]], p0[[1, 3, 4]])      # never touched
    np.testing.assert_array_equal(opt.m["p"][[1, 3, 4]], 0.0)


def test_lazy_and_dense_adam_agree_on_first_step_and_differ_after():
    """On step 1 every untouched row has m = v = 0, so both variants agree; after
    that dense Adam keeps moving rows with momentum while lazy Adam does not."""
    from caps2ne_np.core import RowGrad
    rng = np.random.default_rng(3)
    p0 = rng.normal(size=(5, 2))
    dense, lazy = p0.copy(), p0.copy()
    od, ol = Adam({"p": dense}, lr=0.1), Adam({"p": lazy}, lr=0.1)
    for rows in (np.array([0, 1]), np.array([1, 3])):
        g = rng.normal(size=(2, 2))
        full = np.zeros_like(p0)
        full[rows] = g
        od.step({"p": full})
        ol.step({}, rows={"p": RowGrad(rows, g)})
        if od.t == 1:
            np.testing.assert_allclose(dense, lazy, rtol=1e-12)
    assert not np.allclose(dense[0], lazy[0])           # row 0: dense moved it again
    np.testing.assert_array_equal(lazy[[2, 4]], p0[[2, 4]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(9, 4), (9,), "slot_major"])
def test_dense_step_from_row_gradients_is_bitwise_the_dense_step(dtype, shape):
    from caps2ne_np.core import RowGrad, slot_major
    rng = np.random.default_rng(7)
    if shape == "slot_major":
        p0 = slot_major(rng.normal(size=(3, 4, 3)).astype(dtype))   # rows: (3 * 3, 4)
        n_rows = 9
    else:
        p0 = rng.normal(size=shape).astype(dtype)
        n_rows = shape[0]
    a, b = p0.copy(), p0.copy()
    if shape == "slot_major":
        b = slot_major(p0)
        a = slot_major(p0)
    opt_a, opt_b = Adam({"p": a}, lr=0.05), Adam({"p": b}, lr=0.05)
    for step in range(4):
        rows = np.sort(rng.choice(n_rows, size=step, replace=False))   # step 0: no rows
        values = rng.normal(size=(len(rows),) + ((4,) if len(p0.shape) > 1 else ())).astype(dtype)
        dense = np.zeros_like(a)
        if shape == "slot_major":
            dense.transpose(0, 2, 1).reshape(-1, 4)[rows] = values
        else:
            dense[rows] = values
        opt_a.step({"p": dense})
        opt_b.step({}, dense_rows={"p": RowGrad(rows, values)})
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(opt_a.m["p"], opt_b.m["p"])
        np.testing.assert_array_equal(opt_a.v["p"], opt_b.v["p"])


def _adam_f32_reference(p, g, m, v, lr_t, beta1=0.9, beta2=0.999, eps=1e-8):
    """TF1's float32 Adam with every operation in float32 (NumPy float32 scalars)."""
    f = np.float32
    m = f(beta1) * m + (f(1) - f(beta1)) * g
    v = f(beta2) * v + (f(1) - f(beta2)) * g * g
    return p - f(lr_t) * m / (np.sqrt(v) + f(eps)), m, v


@pytest.mark.parametrize("mode", ["dense", "dense_rows", "lazy"])
def test_float32_adam_computes_in_float32_bit_for_bit(mode):
    # The kernels must not promote the moment updates to float64 (a Python 1.0 in
    # (1.0 - beta1) * g would): each step equals float32 NumPy arithmetic exactly.
    rng = np.random.default_rng(5)
    p = rng.standard_normal((40, 16)).astype(np.float32)
    opt = Adam({"p": p}, lr=0.01)
    ref, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    rows = np.array([1, 7, 8, 30])
    for _ in range(4):
        g = (rng.standard_normal((4, 16)) * 1e-3).astype(np.float32)
        lr_t = opt.lr * np.sqrt(1 - opt.beta2 ** (opt.t + 1)) / (1 - opt.beta1 ** (opt.t + 1))
        if mode == "lazy":
            opt.step({}, rows={"p": SimpleNamespace(rows=rows, values=g)})
            ref[rows], m[rows], v[rows] = _adam_f32_reference(ref[rows], g, m[rows], v[rows], lr_t)
        else:
            dense = np.zeros_like(p)
            dense[rows] = g
            if mode == "dense":
                opt.step({"p": dense})
            else:
                opt.step({}, dense_rows={"p": SimpleNamespace(rows=rows, values=g)})
            ref, m, v = _adam_f32_reference(ref, dense, m, v, lr_t)
        np.testing.assert_array_equal(p, ref)
        np.testing.assert_array_equal(opt.m["p"], m)
        np.testing.assert_array_equal(opt.v["p"], v)
