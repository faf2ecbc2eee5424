from types import SimpleNamespace

import numpy as np
import pytest

from caps2ne_np.model import reference
from caps2ne_np.model.params import slot_major
from caps2ne_np.model.row_grad import RowGrad, row_matrix
from caps2ne_np.training.step.optim import Adam


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_adam_matches_tf1_reference_over_several_steps(dtype, tol):
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(7, 3))
    p = p0.astype(dtype)
    opt = Adam({"p": p}, lr=0.01)
    ref, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t in range(1, 6):
        g = rng.normal(size=p0.shape)
        opt.step({"p": RowGrad.every_row(g.astype(dtype))})
        ref, m, v = reference.adam_tf1(ref, g, m, v, t, 0.01)
    np.testing.assert_allclose(p, ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(opt.m["p"], m, rtol=tol, atol=tol)
    assert opt.t == 5


def test_adam_rejects_non_positive_lr():
    with pytest.raises(ValueError, match="lr"):
        Adam({"p": np.zeros(2)}, lr=0)


def test_a_step_given_its_rate_is_the_fixed_rate_step_and_holds_no_rate():
    """The engines' optimizers have no rate of their own (lr=None): each step is given
    the schedule's, with the same bits as an optimizer whose fixed rate it is, from the
    same state; a step without a rate is refused."""
    rng = np.random.default_rng(5)
    given = rng.normal(size=(6, 3)).astype(np.float32)
    opt = Adam({"p": given}, lr=None)
    for rate in (0.05, 0.02, 0.01):
        g = RowGrad(np.array([0, 2, 5]), rng.normal(size=(3, 3)).astype(np.float32))
        ref = Adam({"p": given.copy()}, lr=rate)  # this step's rate, fixed
        ref.m["p"][...], ref.v["p"][...], ref.t = opt.m["p"], opt.v["p"], opt.t
        opt.step({"p": g}, lazy=True, lr=rate)
        ref.step({"p": g}, lazy=True)
        np.testing.assert_array_equal(given, ref.params["p"])
        np.testing.assert_array_equal(opt.v["p"], ref.v["p"])
    assert opt.lr is None and opt.t == 3
    with pytest.raises(ValueError, match="rate"):
        opt.step({"p": g})


def test_adam_updates_a_slot_major_parameter_in_place_like_a_contiguous_one():
    rng = np.random.default_rng(1)
    W0 = rng.normal(size=(3, 4, 5))
    a, b = W0.copy(), slot_major(W0)
    assert not b.flags.c_contiguous and np.shares_memory(b, b.transpose(0, 2, 1))
    opt_a, opt_b = Adam({"W": a}, lr=0.1), Adam({"W": b}, lr=0.1)
    for _ in range(3):
        g = rng.normal(size=W0.shape)
        opt_a.step({"W": RowGrad.every_row(row_matrix(g))})  # rows (3, 4 * 5)
        opt_b.step({"W": RowGrad.every_row(row_matrix(slot_major(g)))})  # rows (3 * 5, 4)
    np.testing.assert_array_equal(a, b)


def test_lazy_adam_updates_only_touched_rows_and_matches_reference_there():
    rng = np.random.default_rng(2)
    p0 = rng.normal(size=(6, 3))
    p = p0.copy()
    opt = Adam({"p": p}, lr=0.05)
    ref, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, rows in enumerate([np.array([0, 2]), np.array([2, 5]), np.array([2])], start=1):
        g = rng.normal(size=(len(rows), 3))
        opt.step({"p": RowGrad(rows, g)}, lazy=True)
        # reference: Adam on the touched rows only, with the global step t
        new, m_new, v_new = reference.adam_tf1(ref[rows], g, m[rows], v[rows], t, 0.05)
        ref[rows], m[rows], v[rows] = new, m_new, v_new
    np.testing.assert_allclose(p, ref, rtol=1e-12)
    np.testing.assert_array_equal(p[[1, 3, 4]], p0[[1, 3, 4]])  # never touched
    np.testing.assert_array_equal(opt.m["p"][[1, 3, 4]], 0.0)


def test_lazy_and_dense_adam_agree_on_first_step_and_differ_after():
    """On step 1 every untouched row has m = v = 0, so both variants agree; after
    that dense Adam keeps moving rows with momentum while lazy Adam does not."""
    rng = np.random.default_rng(3)
    p0 = rng.normal(size=(5, 2))
    dense, lazy = p0.copy(), p0.copy()
    od, ol = Adam({"p": dense}, lr=0.1), Adam({"p": lazy}, lr=0.1)
    for rows in (np.array([0, 1]), np.array([1, 3])):
        g = rng.normal(size=(2, 2))
        full = np.zeros_like(p0)
        full[rows] = g
        od.step({"p": RowGrad.every_row(full)})
        ol.step({"p": RowGrad(rows, g)}, lazy=True)
        if od.t == 1:
            np.testing.assert_allclose(dense, lazy, rtol=1e-12)
    assert not np.allclose(dense[0], lazy[0])  # row 0: dense moved it again
    np.testing.assert_array_equal(lazy[[2, 4]], p0[[2, 4]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(9, 4), (9,), "slot_major"])
def test_dense_step_from_row_gradients_is_bitwise_the_dense_step(dtype, shape):
    rng = np.random.default_rng(7)
    if shape == "slot_major":
        p0 = slot_major(rng.normal(size=(3, 4, 3)).astype(dtype))  # rows: (3 * 3, 4)
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
        rows = np.sort(rng.choice(n_rows, size=step, replace=False))  # step 0: no rows
        values = rng.normal(size=(len(rows),) + ((4,) if len(p0.shape) > 1 else ())).astype(dtype)
        dense = np.zeros_like(a)
        if shape == "slot_major":
            dense.transpose(0, 2, 1).reshape(-1, 4)[rows] = values
        else:
            dense[rows] = values
        opt_a.step({"p": RowGrad.every_row(row_matrix(dense))})
        opt_b.step({"p": RowGrad(rows, values)})
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
            opt.step({"p": SimpleNamespace(rows=rows, values=g)}, lazy=True)
            ref[rows], m[rows], v[rows] = _adam_f32_reference(ref[rows], g, m[rows], v[rows], lr_t)
        else:
            dense = np.zeros_like(p)
            dense[rows] = g
            if mode == "dense":
                opt.step({"p": RowGrad.every_row(dense)})
            else:
                opt.step({"p": SimpleNamespace(rows=rows, values=g)})
            ref, m, v = _adam_f32_reference(ref, dense, m, v, lr_t)
        np.testing.assert_array_equal(p, ref)
        np.testing.assert_array_equal(opt.m["p"], m)
        np.testing.assert_array_equal(opt.v["p"], v)


def _sparse_W_problem(dtype, seed=0, n_nodes=40, d=30, n_slots=3, k=8):
    """W (slot-major), a row-sparse gradient of W on the columns one batch touches, and
    the column index of a second batch (the one the fused update predicts)."""
    import scipy.sparse as sp

    from caps2ne_np.model.features import SparseFeatures
    from caps2ne_np.model.rows import batch_columns, share_slots

    rng = np.random.default_rng(seed)
    sf = SparseFeatures.from_scipy(
        sp.random(n_nodes, d, density=0.15, format="csr", random_state=seed), dtype
    )
    batches = []
    for _ in range(2):
        ctx_t = rng.integers(0, n_nodes, size=(n_slots, 12)).astype(np.int64)
        nodes, ptr, _ = share_slots(ctx_t)
        batches.append((nodes, ptr, batch_columns(sf, nodes, ptr)))
    W = slot_major(rng.normal(size=(n_slots, k, d)).astype(dtype))
    keys = batches[0][2].keys
    d_W = RowGrad(keys, rng.normal(size=(keys.shape[0], k)).astype(dtype))
    return rng, sf, batches[1], W, d_W


def _fused(version, p, m, v, d, d_W, cols, u_hat, coefs):
    """step._adam_W_predict on W's row matrices, as step.FusedSparseW calls it."""
    from caps2ne_np.training.step.python_step import _adam_W_predict

    n_slots = p.shape[0] // d
    grad = (d_W.rows, d_W.values, np.searchsorted(d_W.rows, np.arange(n_slots + 1) * d))
    getattr(_adam_W_predict, version)(p, m, v, d, grad, cols, u_hat, coefs)


@pytest.mark.parametrize("next_batch", [True, False])
def test_fused_sparse_W_update_matches_numpy(next_batch):
    """step._adam_W_predict against plain NumPy in float64: one dense Adam step over
    every row of W from its row-sparse gradient, then the next batch's W_i u."""
    rng, sf, (n_nodes, n_ptr, n_cols), W, d_W = _sparse_W_problem(np.float64)
    n_slots, k, d = W.shape
    u = sf.to_scipy().tocsr()
    u.data = sf.u_data
    u = u.toarray()
    # reference: dense gradient of W (slot-major rows), Adam, next products
    g = np.zeros((n_slots * d, k))
    g[d_W.rows] = d_W.values
    p, m, v = row_matrix(W).copy(), rng.random(g.shape), rng.random(g.shape)
    p_ref, m_ref, v_ref = _adam64(p, g, m, v, 0.01)
    u_hat_ref = np.stack(
        [
            u[n_nodes[r]] @ p_ref[i * d : (i + 1) * d]
            for i in range(n_slots)
            for r in range(n_ptr[i], n_ptr[i + 1])
        ]
    )
    # fused kernel
    p2, m2, v2 = p.copy(), m.copy(), v.copy()
    u_hat = np.zeros((n_nodes.shape[0], k))
    cols = (
        (n_cols.keys, n_cols.slot_key_ptr, n_cols.key_ptr, n_cols.ent_row, n_cols.ent_val)
        if next_batch
        else (
            np.zeros(0, np.int64),
            np.zeros(n_slots + 1, np.int64),
            np.zeros(1, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0),
        )
    )
    _fused("serial", p2, m2, v2, d, d_W, cols, u_hat, (0.01, 0.9, 0.999, 1e-8, 0.1, 0.001))
    np.testing.assert_allclose(p2, p_ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m2, m_ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(v2, v_ref, rtol=1e-12, atol=1e-15)
    if next_batch:
        np.testing.assert_allclose(u_hat, u_hat_ref, rtol=1e-12, atol=1e-14)
    else:
        assert not u_hat.any()


def _adam64(p, g, m, v, lr_t, beta1=0.9, beta2=0.999, eps=1e-8):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return p - lr_t * m / (np.sqrt(v) + eps), m, v


@pytest.mark.parametrize("version", ["serial", "parallel"])
def test_fused_sparse_W_update_is_bitwise_the_separate_kernels_in_float32(version):
    from caps2ne_np.model import capsules
    from caps2ne_np.training.step.optim import _adam_dense_rowgrad

    rng, sf, (n_nodes, n_ptr, n_cols), W, d_W = _sparse_W_problem(np.float32, seed=1)
    n_slots, k, d = W.shape
    f = np.float32
    coefs = (f(0.01), f(0.9), f(0.999), f(1e-8), f(1) - f(0.9), f(1) - f(0.999))
    p, m, v = (
        row_matrix(W).copy(),
        rng.random((n_slots * d, k)).astype(f),
        rng.random((n_slots * d, k)).astype(f),
    )
    # separate kernels: dense Adam from rows, then the next forward product
    position = np.full(n_slots * d, -1, dtype=np.int64)
    position[d_W.rows] = np.arange(d_W.rows.shape[0])
    p1, m1, v1 = p.copy(), m.copy(), v.copy()
    _adam_dense_rowgrad.serial(p1, position, d_W.values, m1, v1, *coefs)
    u_hat1 = np.zeros((n_nodes.shape[0], k), dtype=f)
    capsules._predict_sparse.serial(
        n_cols.keys,
        n_cols.slot_key_ptr,
        n_cols.key_ptr,
        n_cols.ent_row,
        n_cols.ent_val,
        p1.reshape(n_slots, d, k),
        u_hat1,
    )
    # fused
    p2, m2, v2 = p.copy(), m.copy(), v.copy()
    u_hat2 = np.zeros_like(u_hat1)
    cols = (n_cols.keys, n_cols.slot_key_ptr, n_cols.key_ptr, n_cols.ent_row, n_cols.ent_val)
    _fused(version, p2, m2, v2, d, d_W, cols, u_hat2, coefs)
    for a, b in ((p1, p2), (m1, m2), (v1, v2), (u_hat1, u_hat2)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("threads", [1, 2])
def test_lazy_step_of_all_tables_in_one_kernel_is_bitwise_the_per_table_kernels(
    threads, monkeypatch
):
    """optim._adam_tables (one parallel region for every table of a lazy step)
    gives the same bits as one kernel per table (_adam_rows, and _adam_dense for a
    gradient of every row), float32, on 1 and 2 threads."""
    import numba

    import caps2ne_np.kernels.jit as jit

    monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)  # the parallel versions, however small
    rng = np.random.default_rng(7)
    shapes = {"W": (4, 6, 5), "O": (30, 6), "bias": (30,), "X": (30, 5)}
    init = {n: rng.normal(size=s).astype(np.float32) for n, s in shapes.items()}

    def run(fuse):
        params = {n: (slot_major(a) if n == "W" else a.copy()) for n, a in init.items()}
        opt = Adam(params, lr=0.05)
        opt.fuse = fuse
        r = np.random.default_rng(8)
        for _ in range(3):
            o_rows = np.sort(r.choice(30, 9, replace=False))
            x_rows = np.sort(r.choice(30, 4, replace=False))
            W_rows = row_matrix(params["W"])
            grads = {
                "W": RowGrad.every_row(r.normal(size=W_rows.shape).astype(np.float32)),
                "O": RowGrad(o_rows, r.normal(size=(9, 6)).astype(np.float32)),
                "bias": RowGrad(o_rows, r.normal(size=9).astype(np.float32)),
                "X": RowGrad(x_rows, r.normal(size=(4, 5)).astype(np.float32)),
            }
            opt.step(grads, lazy=True)
        return params, opt

    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        (a, opt_a), (b, opt_b) = run(True), run(False)
    finally:
        numba.set_num_threads(old)
    for n in shapes:
        np.testing.assert_array_equal(a[n], b[n])
        np.testing.assert_array_equal(opt_a.m[n], opt_b.m[n])
        np.testing.assert_array_equal(opt_a.v[n], opt_b.v[n])
    assert not np.array_equal(a["O"], init["O"])


def test_lazy_step_takes_read_only_gradients_and_mixed_tables():
    """Read-only gradient arrays (as Ray's object store hands them over) and tables of
    other dtypes are updated as the per-table kernels do (the one-kernel step)."""
    rng = np.random.default_rng(9)
    init = {"O": rng.normal(size=(8, 3)), "bias": rng.normal(size=8)}
    init32 = {"X": rng.normal(size=(8, 2)).astype(np.float32)}

    def run(fuse):
        params = {n: a.copy() for n, a in {**init, **init32}.items()}
        opt = Adam(params, lr=0.1)
        opt.fuse = fuse
        rows = np.array([1, 4, 6])
        grads = {}
        for n, p in params.items():
            values, r = rng_values(p, rows), rows.copy()
            if n == "O":  # read-only beside the writable gradient of the biases
                values.flags.writeable = r.flags.writeable = False
            grads[n] = RowGrad(r, values)
        opt.step(grads, lazy=True)
        return params

    def rng_values(p, rows):
        shape = (rows.shape[0],) + p.shape[1:]
        return np.linspace(-1, 1, int(np.prod(shape))).reshape(shape).astype(p.dtype)

    a, b = run(True), run(False)
    for n in a:
        np.testing.assert_array_equal(a[n], b[n])
    assert not np.array_equal(a["O"], init["O"])
