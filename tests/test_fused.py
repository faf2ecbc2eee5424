"""The compiled step (caps2ne_np/training/step/fused.py) against the Python step and the math.

* its float64 gradients of one batch against central finite differences and the float64
  reference (model/reference.py), for every routing rule, gradient mode and scale, with
  trained x and with fixed dense features;
* whole runs against step.TrainStep (the same batches, rates and Adam): the same losses
  and tables to float32 rounding, for every sampler, walk and batch mode, target rule and
  Adam variant, node2vec walks and a short last batch;
* the same bits on 1 and 2 threads, and from its serial and parallel versions.
"""

import numpy as np
import pytest

from caps2ne_np.model import reference
from caps2ne_np.model.core import loss_and_grads as python_loss_and_grads
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import Params
from caps2ne_np.training.step import fused, fused_batch
from cases import make_case
from test_grads import BAR, CONFIGS, H


@pytest.mark.parametrize("m,rule,mode,scale", CONFIGS)
@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_fused_gradients_match_central_differences_and_the_reference(
    m, rule, mode, scale, fixed, seed
):
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(seed, repeat_target=True)
    n_slots = ctx.shape[1]
    cfg = ModelConfig(routing_iters=m, routing_rule=rule, routing_scale=scale, grad_mode=mode)
    params = Params(W, O, bias, X, fixed_features=fixed)
    loss, g = fused.loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    sc = float(n_slots) if scale is None else scale
    assert loss == pytest.approx(
        reference.loss(W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, m, sc, rule),
        rel=1e-12,
    )
    # the Python step's gradients (tests/test_grads.py checks them too): the same sums
    _, ref = python_loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    for name in ("W", "O", "bias") + (() if fixed else ("X",)):
        np.testing.assert_allclose(getattr(g, name), getattr(ref, name), rtol=1e-10, atol=1e-13)
    c_fixed = None
    if mode == "stop":  # finite differences with c frozen (the authors' gradient)
        cs = reference.capsule_output(W, X, ctx, m, sc, rule)[1]
        c_fixed = np.array([c[-1] for c in cs])

    def f():
        return reference.loss(
            W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, m, sc, rule, c_fixed
        )

    named = [("W", W, g.W), ("O", O, g.O), ("bias", bias, g.bias)]
    if not fixed:
        named.append(("X", X, g.X))
    else:
        assert g.X is None
    for name, arr, analytic in named:
        err = reference.rel_error(analytic, reference.numeric_grad(f, arr, h=H))
        assert err < BAR, (name, err)


def test_fused_serial_and_parallel_versions_give_the_same_bits():
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(
        3, n_nodes=40, n_pairs=37, n_slots=5, d=6, k=20, n_sampled=11
    )
    params = Params(*(a.astype(np.float32) for a in (W, O, bias, X)))
    cfg = ModelConfig(routing_iters=3)
    a = fused.loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg, parallel=True)
    b = fused.loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg, parallel=False)
    assert a[0] == b[0]
    for name in ("W", "O", "bias", "X"):
        np.testing.assert_array_equal(getattr(a[1], name), getattr(b[1], name))


def _graph(n=60, seed=0, weighted=False):
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for v in range(n):  # a ring with random chords: connected, degrees 2-6
        for u in {(v + 1) % n, int(rng.integers(n))}:
            if u != v:
                rows += [v, u]
                cols += [u, v]
    import scipy.sparse as sp

    w = rng.uniform(0.5, 3.0, size=len(rows)) if weighted else np.ones(len(rows))
    adj = sp.csr_matrix((w, (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.sort_indices()
    weights = adj.data.astype(np.float32) if weighted else None
    return adj.indptr.astype(np.int64), adj.indices.astype(np.int32), weights


SMALL = dict(dim=8, feat_dim=6, walk_length=5, walks_per_node=3, batch_size=4, epochs=2,
             threads=1, seed=7)  # fmt: skip

RUNS = {
    "converge": {},
    "paper": dict(preset="paper", num_sampled=20),
    "shuffle, short last batch": dict(batch_mode="shuffle", batch_size=7),
    "random targets, uniform sampler": dict(targets="random", sampler="uniform"),
    "positions, sabour, stop": dict(
        targets=[1, 2], routing_iters=3, routing_rule="sabour", grad_mode="stop"
    ),  # fmt: skip
    "node2vec, weighted": dict(node2vec_p=0.5, node2vec_q=2.0, weighted=True),
    "dense Adam, fixed walks, log-uniform": dict(
        adam="dense", walks="fixed", sampler="log_uniform", spectral="none"
    ),  # fmt: skip
    "fixed dense features": dict(features=True),
}


def _fit(opts, monkeypatch=None, python_step=False):
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    opts = dict(SMALL, **opts)
    weighted = opts.pop("weighted", False)
    features = opts.pop("features", False)
    indptr, indices, weights = _graph(weighted=weighted)
    X = None
    if features:
        X = np.random.default_rng(1).uniform(0, 1, size=(indptr.shape[0] - 1, 5))
    if python_step:
        monkeypatch.setattr(fused, "supports", lambda cfg, kind: False)
    return fit(indptr, indices, weights, TrainConfig(**opts), features=X)


@pytest.mark.parametrize("name", list(RUNS))
def test_fused_runs_train_as_the_python_step(name, monkeypatch):
    """The same batches, rates and Adam steps: the same losses and tables to float32
    rounding after every step of two epochs."""
    fast = _fit(RUNS[name])
    with monkeypatch.context() as mp:
        slow = _fit(RUNS[name], mp, python_step=True)
    np.testing.assert_allclose(
        [h["loss"] for h in fast.history], [h["loss"] for h in slow.history], rtol=1e-5
    )
    for table in fast.params.trainable():
        a, b = getattr(fast.params, table), getattr(slow.params, table)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-6, err_msg=table)
        assert not np.array_equal(a, getattr(_fit(dict(RUNS[name], epochs=1)).params, table))


def test_fused_runs_are_the_same_bits_on_one_and_two_threads(monkeypatch):
    import caps2ne_np.kernels.jit as jit

    monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)  # every chunk on the parallel version
    one = _fit(dict(batch_size=16))
    two = _fit(dict(batch_size=16, threads=2))
    for table in one.params.trainable():
        np.testing.assert_array_equal(getattr(one.params, table), getattr(two.params, table))


def test_the_workspace_is_named_and_sized_by_the_batch():
    P, S, n_slots, d, k, m = 5, 3, 4, 6, 2, 2
    ws = fused.make_workspace(P, S, n_slots, d, k, m, np.zeros((1, 1)))
    assert ws._fields == fused_batch.Workspace._fields
    assert (ws.d_O.shape, ws.d_W_t.shape, ws.c.shape) == (
        (S + P, k),
        (n_slots, d, k),
        (m, P, n_slots),
    )
    assert ws.x.dtype == np.float64 and ws.inv.dtype == np.int64
