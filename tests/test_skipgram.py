"""The skip-gram term (caps2ne_np/skipgram.py): its loss against the float64 oracle
(tests/naive.py), its gradients (merged with the capsule loss's) against central
differences, weight 0 as the paper's loss bit for bit, the same bits on 1 and 2
threads, the refusals, and training with it."""

import numba
import numpy as np
import pytest

import naive
from caps2ne_np import skipgram
from caps2ne_np.core import ModelConfig, Params, loss_and_grads, loss_and_row_grads
from caps2ne_np.errors import InputError
from cases import make_case

H = 1e-6
BAR = 1e-6
FORMS = [0, 3]  # the sampled softmax over V'; negative sampling with K = 3


def case(seed, n_pairs=3, n_slots=3, k=5, n_nodes=7, n_sampled=4):
    """A make_case problem with d == k, a repeated target and a repeated context node."""
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(
        seed, n_nodes, n_pairs, n_slots, k, k, n_sampled, repeat_target=True
    )
    ctx[0, 1] = ctx[-1, 0]  # one node in two items
    return Params(W, O, bias, X), ctx, targets, sampled, q_true, q_sampled


@pytest.mark.parametrize("negatives", FORMS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_term_loss_matches_the_float64_oracle(negatives, seed):
    params, ctx, targets, sampled, q_true, q_sampled = case(seed, n_pairs=6, n_slots=4)
    cfg = ModelConfig(skipgram_weight=0.7, skipgram_negatives=negatives)
    key = (11, 5)
    want = naive.skipgram_loss(
        params.X, params.O, params.bias, ctx, targets, sampled, q_true, q_sampled, negatives, key
    )
    caps = naive.loss(
        params.W, params.O, params.bias, params.X, ctx, targets, sampled, q_true, q_sampled,
        1, float(ctx.shape[1]), "paper",
    )  # fmt: skip
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        parts = {}
        loss, _ = loss_and_grads(
            params.astype(dtype), ctx, targets, sampled, q_true, q_sampled, cfg, key=key,
            parts=parts,
        )  # fmt: skip
        np.testing.assert_allclose(parts["skipgram"], want, rtol=tol)
        np.testing.assert_allclose(parts["capsule"], caps, rtol=tol)
        np.testing.assert_allclose(loss, caps + 0.7 * want, rtol=tol)


@pytest.mark.parametrize("negatives", FORMS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("m", [1, 2])
def test_total_gradients_match_central_differences(negatives, seed, m):
    """d(L_caps + lambda L_sg) for every parameter, W included (the merge is checked too)."""
    params, ctx, targets, sampled, q_true, q_sampled = case(seed)
    cfg = ModelConfig(routing_iters=m, skipgram_weight=0.7, skipgram_negatives=negatives)
    key = (3, 9)
    _, g = loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg, key=key)
    n_slots = float(ctx.shape[1])

    def f():
        return naive.loss(
            params.W, params.O, params.bias, params.X, ctx, targets, sampled, q_true,
            q_sampled, m, n_slots, "paper",
        ) + 0.7 * naive.skipgram_loss(
            params.X, params.O, params.bias, ctx, targets, sampled, q_true, q_sampled,
            negatives, key,
        )  # fmt: skip

    for name in ("W", "O", "bias", "X"):
        numeric = naive.numeric_grad(f, getattr(params, name), h=H)
        assert naive.rel_error(getattr(g, name), numeric) < BAR, name


@pytest.mark.parametrize("negatives", FORMS)
def test_term_gradients_alone_match_central_differences(negatives):
    """The term's own gradients (skipgram.loss_and_row_grads), away from the capsules."""
    params, ctx, targets, sampled, q_true, q_sampled = case(4, n_pairs=4, n_slots=3)
    x_nodes, item_x = np.unique(ctx, return_inverse=True)
    key = (1, 2)

    def run():
        return skipgram.loss_and_row_grads(
            params.X[x_nodes], item_x.reshape(ctx.shape), params.O, params.bias, targets,
            sampled, np.log(q_true), np.log(q_sampled), negatives, key,
        )  # fmt: skip

    loss, d_x, o_rows, d_O, d_bias = run()

    def f():
        return naive.skipgram_loss(
            params.X, params.O, params.bias, ctx, targets, sampled, q_true, q_sampled,
            negatives, key,
        )  # fmt: skip

    assert loss == pytest.approx(f(), rel=1e-12)
    dense = {n: np.zeros_like(getattr(params, n)) for n in ("X", "O", "bias")}
    dense["X"][x_nodes], dense["O"][o_rows], dense["bias"][o_rows] = d_x, d_O, d_bias
    for name in ("X", "O", "bias"):
        numeric = naive.numeric_grad(f, getattr(params, name), h=H)
        assert naive.rel_error(dense[name], numeric) < BAR, name


@pytest.mark.parametrize("negatives", FORMS)
def test_float32_kernels_agree_with_float64(negatives):
    params, ctx, targets, sampled, q_true, q_sampled = case(5, n_pairs=8, n_slots=5, k=6)
    cfg = ModelConfig(skipgram_weight=1.0, skipgram_negatives=negatives)
    args = (ctx, targets, sampled, q_true, q_sampled, cfg)
    _, g64 = loss_and_grads(params, *args)
    _, g32 = loss_and_grads(params.astype(np.float32), *args)
    for name in ("W", "O", "bias", "X"):
        np.testing.assert_allclose(getattr(g32, name), getattr(g64, name), rtol=1e-4, atol=1e-6)


def test_weight_zero_is_the_papers_loss_bit_for_bit_and_never_runs_the_term(monkeypatch):
    params, ctx, targets, sampled, q_true, q_sampled = case(0)
    params = params.astype(np.float32)
    args = (params, ctx, targets, sampled, q_true, q_sampled)
    want_loss, want = loss_and_row_grads(*args, ModelConfig())

    def boom(*a, **k):
        raise AssertionError("the skip-gram term ran with weight 0")

    monkeypatch.setattr(skipgram, "loss_and_row_grads", boom)
    loss, got = loss_and_row_grads(*args, ModelConfig(skipgram_weight=0.0, skipgram_negatives=5))
    assert loss == want_loss
    for name in want:
        assert np.array_equal(got[name].rows, want[name].rows)
        assert np.array_equal(got[name].values, want[name].values)
    with pytest.raises(AssertionError, match="ran with weight 0"):
        loss_and_row_grads(*args, ModelConfig(skipgram_weight=1.0))


@pytest.mark.parametrize("negatives", FORMS)
def test_same_bits_on_one_and_two_threads(negatives, monkeypatch):
    import caps2ne_np._jit as jit

    monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)  # the parallel kernels, however small
    params, ctx, targets, sampled, q_true, q_sampled = case(
        7, n_pairs=40, n_slots=6, k=16, n_nodes=60, n_sampled=20
    )
    params = params.astype(np.float32)
    cfg = ModelConfig(skipgram_weight=1.0, skipgram_negatives=negatives)
    old = numba.get_num_threads()
    runs = []
    try:
        for t in (1, min(2, numba.config.NUMBA_NUM_THREADS), 1):
            numba.set_num_threads(t)
            runs.append(
                loss_and_row_grads(
                    params, ctx, targets, sampled, q_true, q_sampled, cfg, key=(4, 8)
                )
            )
    finally:
        numba.set_num_threads(old)
    (l0, g0), *rest = runs
    for loss, g in rest:
        assert loss == l0
        for name in g0:
            assert np.array_equal(g[name].values, g0[name].values), name


def test_negatives_follow_the_key():
    """Other (seed, step), other negatives; the same key, the same draws (the oracle's)."""
    a = np.empty((50, 4), dtype=np.int64)
    b = np.empty_like(a)
    skipgram.negative_positions(1, 2, 50, 4, 9, a)
    skipgram.negative_positions(1, 3, 50, 4, 9, b)
    assert np.array_equal(a, naive.skipgram_negatives(1, 2, 50, 4, 9))
    assert not np.array_equal(a, b)
    assert a.min() >= 0 and a.max() < 9 and len(np.unique(a)) == 9


@pytest.mark.parametrize(
    "params_like,match",
    [
        ((True, 5, 5), "featureless graph"),
        ((False, 4, 5), "--feat-dim equal to --dim"),
    ],
)
def test_term_refuses_what_it_cannot_train(params_like, match):
    from caps2ne_np.core import check_skipgram

    with pytest.raises(InputError, match=match):
        check_skipgram(params_like, ModelConfig(skipgram_weight=1.0))
    check_skipgram(params_like, ModelConfig(skipgram_weight=0.0))  # off: nothing to refuse
