"""The shared (slot, node) rows of a batch (rows.share_slots): the bookkeeping
against a plain NumPy reference, and whole batches built from walks, where pairs
share most rows, against the naive per-pair model (float64 loss and gradients)."""

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.model import capsules, grads, reference
from caps2ne_np.model.batch_forward import forward
from caps2ne_np.model.core import loss_and_grads
from caps2ne_np.model.features import SparseFeatures
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import Params
from caps2ne_np.model.rows import batch_columns, share_slots
from caps2ne_np.walks.walks import training_pairs


def walk_batch(seed, n_nodes=9, n_walks=5, q=6, positions="all"):
    """Pairs from short walks over few nodes: every row is shared by several pairs."""
    rng = np.random.default_rng(seed)
    walks = rng.integers(0, n_nodes, size=(n_walks, q)).astype(np.int32)
    ctx, tgt = training_pairs(walks, np.arange(n_walks), positions)
    return ctx.astype(np.int64), tgt.astype(np.int64)


@pytest.mark.parametrize("seed", range(5))
def test_share_slots_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    ctx_t = rng.integers(0, 6 + seed * 40, size=(4, 30)).astype(np.int64)
    nodes, ptr, inv = share_slots(ctx_t)
    assert ptr[0] == 0 and ptr[-1] == nodes.shape[0]
    for i in range(ctx_t.shape[0]):
        seg = nodes[ptr[i] : ptr[i + 1]]
        # each slot's distinct nodes, in order of first appearance
        _, first = np.unique(ctx_t[i], return_index=True)
        np.testing.assert_array_equal(seg, ctx_t[i][np.sort(first)])
        assert np.all((inv[i] >= ptr[i]) & (inv[i] < ptr[i + 1]))
        np.testing.assert_array_equal(nodes[inv[i]], ctx_t[i])
    # the scratch buffer is left clean: a second call gives the same answer
    again = share_slots(ctx_t)
    for a, b in zip((nodes, ptr, inv), again):
        np.testing.assert_array_equal(a, b)


def test_walk_pairs_share_rows():
    # q = 10, every position a target: at most 2 (q - 1) = 18 rows per walk, not 90
    # (walks of distinct nodes, so that only the walk structure shares rows)
    walks = np.arange(200, dtype=np.int32).reshape(20, 10)
    for positions, per_walk in (("all", 18), ([3, 4, 5, 6], 12)):
        ctx, _ = training_pairs(walks, np.arange(20), positions)
        nodes, _, _ = share_slots(np.ascontiguousarray(ctx.T.astype(np.int64)))
        assert nodes.shape[0] == 20 * per_walk


def test_gather_rows_and_its_backward():
    rng = np.random.default_rng(3)
    ctx_t = rng.integers(0, 5, size=(3, 8)).astype(np.int64)
    nodes, ptr, inv = share_slots(ctx_t)
    src = rng.normal(size=(nodes.shape[0], 4))
    out = np.empty((3, 8, 4))
    capsules.gather_rows(src, inv, out)
    np.testing.assert_array_equal(out, src[inv])
    d_out = rng.normal(size=out.shape)
    d_src = np.full_like(src, np.nan)
    grads.gather_rows_backward(d_out, inv, ptr, d_src)
    ref = np.zeros_like(src)
    np.add.at(ref, inv.reshape(-1), d_out.reshape(-1, 4))
    np.testing.assert_allclose(d_src, ref, rtol=1e-12, atol=1e-15)


def _sparse_batch(seed, n_nodes=30, d=50, n_slots=4, n_pairs=12, density=0.1):
    rng = np.random.default_rng(seed)
    keep = np.ones(n_nodes)
    keep[3] = 0  # a node without features
    x = sp.diags(keep) @ sp.random(n_nodes, d, density=density, format="csr", random_state=seed)
    sf = SparseFeatures.from_scipy(x, np.float64)
    ctx_t = rng.integers(0, n_nodes, size=(n_slots, n_pairs)).astype(np.int64)
    ctx_t[0, 0] = 3
    nodes, ptr, _ = share_slots(ctx_t)
    return rng, sf, nodes, ptr


@pytest.mark.parametrize("seed,density", [(0, 0.1), (1, 0.02), (2, 0.6)])
def test_batch_columns_lists_every_nonzero_once_by_column(seed, density):
    # density 0.6 takes the scan branch of the key sort, 0.02 the np.sort branch
    _, sf, nodes, ptr = _sparse_batch(seed, density=density)
    d = sf.shape[1]
    u = sf.to_scipy().tocsr()
    u.data = sf.u_data
    cols = batch_columns(sf, nodes, ptr)
    expect = {}  # key -> [(row, value)] in ascending row order
    for i in range(ptr.shape[0] - 1):
        for r in range(ptr[i], ptr[i + 1]):
            row = u[nodes[r]]
            for j, val in zip(row.indices, row.data):
                expect.setdefault(i * d + j, []).append((r, val))
    np.testing.assert_array_equal(cols.keys, sorted(expect))
    assert cols.key_ptr[-1] == cols.ent_row.shape[0] == sum(map(len, expect.values()))
    for kk, key in enumerate(cols.keys):
        lo, hi = cols.key_ptr[kk], cols.key_ptr[kk + 1]
        assert list(zip(cols.ent_row[lo:hi], cols.ent_val[lo:hi])) == expect[key]
    for i in range(ptr.shape[0] - 1):
        in_slot = cols.keys[cols.slot_key_ptr[i] : cols.slot_key_ptr[i + 1]] // d
        assert np.all(in_slot == i)
    again = batch_columns(sf, nodes, ptr)  # the scratch buffer is left clean
    np.testing.assert_array_equal(again.ent_row, cols.ent_row)
    np.testing.assert_array_equal(again.keys, cols.keys)


@pytest.mark.parametrize("seed,density", [(3, 0.05), (4, 0.5)])
def test_batch_columns_parallel_equals_serial(seed, density, monkeypatch):
    # the slots are indexed independently in parallel: same arrays as one thread
    import numba

    from caps2ne_np.kernels import jit

    _, sf, nodes, ptr = _sparse_batch(seed, density=density)
    serial = batch_columns(sf, nodes, ptr)
    monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)
    old = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        parallel = batch_columns(sf, nodes, ptr)
    finally:
        numba.set_num_threads(old)
    for name in ("keys", "slot_key_ptr", "key_ptr", "ent_row", "ent_val"):
        np.testing.assert_array_equal(getattr(parallel, name), getattr(serial, name))


@pytest.mark.parametrize("seed", range(3))
def test_sparse_products_by_column_match_dense_numpy(seed):
    rng, sf, nodes, ptr = _sparse_batch(seed)
    n_slots, d, k = ptr.shape[0] - 1, sf.shape[1], 6
    u = sf.to_scipy().tocsr()
    u.data = sf.u_data
    u = u.toarray()
    W_t = rng.normal(size=(n_slots, d, k))  # W_i transposed: (d, k)
    row_slot = np.repeat(np.arange(n_slots), np.diff(ptr))
    cols = batch_columns(sf, nodes, ptr)
    u_hat = np.zeros((nodes.shape[0], k))
    capsules.predict_sparse(cols, W_t, u_hat)
    ref = np.stack([u[nodes[r]] @ W_t[row_slot[r]] for r in range(nodes.shape[0])])
    np.testing.assert_allclose(u_hat, ref, rtol=1e-12, atol=1e-14)
    # backward: d_W_i = sum over slot i's rows of u_r (outer) d_u_hat_r, touched columns only
    d_u_hat = rng.normal(size=u_hat.shape)
    values = np.full((cols.keys.shape[0], k), np.nan)
    grads.predict_sparse_backward_cols(cols, d_u_hat, values)
    dense = np.zeros((n_slots, d, k))
    for r in range(nodes.shape[0]):
        dense[row_slot[r]] += np.outer(u[nodes[r]], d_u_hat[r])
    np.testing.assert_allclose(values, dense.reshape(-1, k)[cols.keys], rtol=1e-12, atol=1e-14)
    untouched = np.setdiff1d(np.arange(n_slots * d), cols.keys)
    assert np.all(dense.reshape(-1, k)[untouched] == 0)


@pytest.mark.parametrize("features", ["trainable", "fixed", "sparse"])
@pytest.mark.parametrize("m,positions", [(1, "all"), (3, "all"), (2, [1, 2, 3])])
def test_walk_batches_match_naive_gradients(features, m, positions):
    ctx, targets = walk_batch(m, positions=positions)
    n_nodes, q = 9, ctx.shape[1] + 1
    rng = np.random.default_rng(10 + m)
    d, k = 5, 4
    W = rng.normal(0, 0.6, size=(q - 1, k, d))
    O = rng.normal(0, 0.5, size=(n_nodes, k))
    bias = rng.normal(0, 0.1, size=n_nodes)
    X = rng.normal(0, 0.8, size=(n_nodes, d))
    sampled = np.array([0, 3, 5, 7])
    q_true = rng.uniform(0.2, 1.0, size=targets.shape[0])
    q_sampled = rng.uniform(0.2, 1.0, size=4)
    if features == "sparse":
        X[rng.random(X.shape) < 0.5] = 0.0
        params = Params(W, O, bias, SparseFeatures.from_scipy(sp.csr_matrix(X), np.float64), True)
    else:
        params = Params(W, O, bias, X, fixed_features=features == "fixed")
    cfg = ModelConfig(routing_iters=m)
    loss, g = loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)

    def f():
        return reference.loss(
            W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, m, float(q - 1), "paper"
        )

    assert loss == pytest.approx(f(), rel=1e-12)
    named = [("W", W, g.W), ("O", O, g.O), ("bias", bias, g.bias)]
    if features == "trainable":
        named.append(("X", X, g.X))
    for name, arr, analytic in named:
        numeric = reference.numeric_grad(f, arr, h=1e-6)
        assert reference.rel_error(analytic, numeric) < 1e-6, name
    u = reference.squash(X[ctx].reshape(-1, d)).reshape(ctx.shape + (d,))
    np.testing.assert_allclose(
        forward(params, ctx, cfg).u_hat, np.einsum("ikd,pid->ipk", W, u), rtol=1e-12, atol=1e-15
    )


@pytest.mark.parametrize("bad", [-1, 9])
def test_out_of_range_context_ids_are_refused_before_any_kernel(bad):
    ctx, targets = walk_batch(0)
    ctx[0, 0] = bad
    rng = np.random.default_rng(0)
    X = rng.normal(size=(9, 5))
    W, O, bias = rng.normal(size=(ctx.shape[1], 4, 5)), rng.normal(size=(9, 4)), np.zeros(9)
    for params in (
        Params(W, O, bias, X),
        Params(W, O, bias, SparseFeatures.from_scipy(sp.csr_matrix(X), np.float64), True),
    ):
        with pytest.raises(ValueError, match="context node ids"):
            forward(params, ctx, ModelConfig())
