"""The skip-gram term (caps2ne_np/model/skipgram.py): its loss against the float64 oracle
(caps2ne_np/model/reference.py), its gradients (merged with the capsule loss's) against central
differences, weight 0 as the paper's loss bit for bit, the same bits on 1 and 2
threads, the refusals, and training with it."""

import numba
import numpy as np
import pytest

import naive_walks
from caps2ne_np.errors import InputError
from caps2ne_np.model import reference, skipgram
from caps2ne_np.model.core import loss_and_grads, loss_and_row_grads
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import Params
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


def skipgram_reference(params, ctx, targets, sampled, q_true, q_sampled, negatives, key):
    """The term in float64 (reference.skipgram_loss); with ``negatives`` K > 0, item m's
    K negatives are drawn from the stream (seed, TAG_SKIPGRAM, step, m) of key (seed, step)
    through the Python bodies of the random kernels (naive_walks.skipgram_negatives)."""
    neg = None
    if negatives:
        neg = naive_walks.skipgram_negatives(*key, ctx.size, negatives, len(sampled))
    return reference.skipgram_loss(
        params.X, params.O, params.bias, ctx, targets, sampled, q_true, q_sampled, neg
    )


@pytest.mark.parametrize("negatives", FORMS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_term_loss_matches_the_float64_oracle(negatives, seed):
    params, ctx, targets, sampled, q_true, q_sampled = case(seed, n_pairs=6, n_slots=4)
    cfg = ModelConfig(skipgram_weight=0.7, skipgram_negatives=negatives)
    key = (11, 5)
    want = skipgram_reference(params, ctx, targets, sampled, q_true, q_sampled, negatives, key)
    caps = reference.loss(
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
        return reference.loss(
            params.W, params.O, params.bias, params.X, ctx, targets, sampled, q_true,
            q_sampled, m, n_slots, "paper",
        ) + 0.7 * skipgram_reference(
            params, ctx, targets, sampled, q_true, q_sampled, negatives, key
        )  # fmt: skip

    for name in ("W", "O", "bias", "X"):
        numeric = reference.numeric_grad(f, getattr(params, name), h=H)
        assert reference.rel_error(getattr(g, name), numeric) < BAR, name


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
        return skipgram_reference(params, ctx, targets, sampled, q_true, q_sampled, negatives, key)

    assert loss == pytest.approx(f(), rel=1e-12)
    dense = {n: np.zeros_like(getattr(params, n)) for n in ("X", "O", "bias")}
    dense["X"][x_nodes], dense["O"][o_rows], dense["bias"][o_rows] = d_x, d_O, d_bias
    for name in ("X", "O", "bias"):
        numeric = reference.numeric_grad(f, getattr(params, name), h=H)
        assert reference.rel_error(dense[name], numeric) < BAR, name


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
    import caps2ne_np.kernels.jit as jit

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
    assert np.array_equal(a, naive_walks.skipgram_negatives(1, 2, 50, 4, 9))
    assert not np.array_equal(a, b)
    assert a.min() >= 0 and a.max() < 9 and len(np.unique(a)) == 9


# --------------------------------------------------------------------------- the wrappers


def kernel_case(seed=3, G=4, k=5, P=3, I=2, N=7, S=4, K=3):
    """float64 inputs of the term's kernels: G distinct context nodes, P pairs of I slots,
    N nodes, V' = S distinct nodes holding the first pair's target (an accidental hit),
    K negatives per item (one of them the item's target)."""
    rng = np.random.default_rng(seed)
    x, O = rng.standard_normal((G, k)), rng.standard_normal((N, k))
    bias = rng.standard_normal(N)
    item_x = rng.integers(0, G, (P, I)).astype(np.int64)
    item_x[0, 0] = item_x[-1, -1]  # a node in two items
    targets = rng.integers(0, N, P).astype(np.int64)
    sampled = rng.permutation(N)[:S].astype(np.int64)
    sampled[0] = targets[0] if targets[0] not in sampled[1:] else sampled[0]
    neg = rng.integers(0, S, (P * I, K)).astype(np.int64)
    neg[0, 0] = int(np.flatnonzero(sampled == targets[0])[0]) if targets[0] in sampled else 0
    log_q_t, log_q_s = rng.standard_normal(P), rng.standard_normal(S)
    hit = np.array([int(np.flatnonzero(sampled == t)[0]) if t in sampled else -1 for t in targets])
    return dict(x=x, O=O, bias=bias, item_x=item_x, targets=targets, sampled=sampled, neg=neg,
                log_q_t=log_q_t, log_q_s=log_q_s, hit=hit)  # fmt: skip


def test_softmax_form_kernels_match_their_sums_item_by_item():
    """node_logits, softmax_items, softmax_node_weights, target_to_x and x_to_target
    against the loss and gradients written item by item in float64 (accidental hit
    removed from its item's softmax)."""
    c_ = kernel_case()
    x, O, bias, item_x, targets = c_["x"], c_["O"], c_["bias"], c_["item_x"], c_["targets"]
    sampled, hit = c_["sampled"], c_["hit"]
    (P, I), G, S = item_x.shape, x.shape[0], sampled.shape[0]
    M = P * I
    loss, d_t = np.empty((P, I)), np.empty((P, I))
    d_z = np.zeros((G, S))  # dL/dz_gs, summed over g's items
    d_x, v, v_bias = np.zeros_like(x), np.zeros((P, x.shape[1])), np.zeros(P)
    for p in range(P):
        t = targets[p]
        for i in range(I):
            g = item_x[p, i]
            z_t = x[g] @ O[t] + bias[t] - c_["log_q_t"][p]
            z_s = x[g] @ O[sampled].T + bias[sampled] - c_["log_q_s"]
            keep = sampled != t
            total = np.exp(z_t) + np.exp(z_s[keep]).sum()
            loss[p, i] = -z_t + np.log(total)
            d_t[p, i] = (np.exp(z_t) / total - 1) / M
            d_z[g, keep] += np.exp(z_s[keep]) / total / M
            d_x[g] += d_t[p, i] * O[t]
            v[p] += d_t[p, i] * x[g]
            v_bias[p] += d_t[p, i]
    Z = x @ O[sampled].T
    c, w, w_sum = skipgram.node_logits(Z, bias[sampled], c_["log_q_s"])
    got_loss, got_d_t, a = skipgram.softmax_items(
        x, item_x, O, bias, targets, c_["log_q_t"], hit, c, w, w_sum, 1.0 / M
    )
    ptr, ids = skipgram.group_items(item_x, G)
    D = skipgram.softmax_node_weights(w, ptr, ids, I, hit, a)
    got_d_x = skipgram.target_to_x(ptr, ids, I, got_d_t, O, targets, np.zeros_like(x))
    got_v, got_v_bias = skipgram.x_to_target(x, item_x, got_d_t)
    for got, want in ((got_loss, loss), (got_d_t, d_t), (D, d_z), (got_d_x, d_x), (got_v, v),
                      (got_v_bias, v_bias)):  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


def test_negative_sampling_kernels_match_their_sums_item_by_item():
    """negative_items, negatives_to_x and negatives_to_sampled against -log sigma(z_t) -
    sum_j log sigma(-z_j) and its gradients written item by item in float64 (a negative
    equal to the target left out)."""
    c_ = kernel_case()
    x, O, bias, item_x, targets = c_["x"], c_["O"], c_["bias"], c_["item_x"], c_["targets"]
    sampled, neg = c_["sampled"], c_["neg"]
    (P, I), G, S, K = item_x.shape, x.shape[0], sampled.shape[0], neg.shape[1]
    M = P * I
    sigma = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    loss, d_t, d_n = np.empty((P, I)), np.empty((P, I)), np.zeros((M, K))
    d_x, d_O_s, d_b_s = np.zeros_like(x), np.zeros((S, x.shape[1])), np.zeros(S)
    for p in range(P):
        t = targets[p]
        for i in range(I):
            g, m = item_x[p, i], p * I + i
            z_t = x[g] @ O[t] + bias[t]
            loss[p, i] = -np.log(sigma(z_t))
            d_t[p, i] = (sigma(z_t) - 1) / M
            for j in range(K):
                s = sampled[neg[m, j]]
                if s == t:
                    continue
                z = x[g] @ O[s] + bias[s]
                loss[p, i] -= np.log(sigma(-z))
                d_n[m, j] = sigma(z) / M
                d_x[g] += d_n[m, j] * O[s]
                d_O_s[neg[m, j]] += d_n[m, j] * x[g]
                d_b_s[neg[m, j]] += d_n[m, j]
    assert np.any(d_n == 0)  # the case holds an accidental hit
    got_loss, got_d_t, got_d_n = skipgram.negative_items(
        x, item_x, O, bias, targets, sampled, neg, 1.0 / M
    )
    ptr, ids = skipgram.group_items(item_x, G)
    got_d_x = skipgram.negatives_to_x(ptr, ids, neg, got_d_n, O, sampled, np.zeros_like(x))
    neg_ptr, neg_ids = skipgram.group_items(neg, S)
    got_d_O_s, got_d_b_s = skipgram.negatives_to_sampled(x, item_x, neg_ptr, neg_ids, got_d_n, I)
    for got, want in ((got_loss, loss), (got_d_t, d_t), (got_d_n, d_n), (got_d_x, d_x),
                      (got_d_O_s, d_O_s), (got_d_b_s, d_b_s)):  # fmt: skip
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


def _bad_calls():
    """(wrapper, arguments with one bad array, the message naming it)."""
    c_ = kernel_case()
    x, O, bias, item_x, targets = c_["x"], c_["O"], c_["bias"], c_["item_x"], c_["targets"]
    sampled, neg, hit = c_["sampled"], c_["neg"], c_["hit"]
    (P, I), G, S = item_x.shape, x.shape[0], sampled.shape[0]
    Z = x @ O[sampled].T
    c, w, w_sum = skipgram.node_logits(Z, bias[sampled], c_["log_q_s"])
    _, d_t, a = skipgram.softmax_items(
        x, item_x, O, bias, targets, c_["log_q_t"], hit, c, w, w_sum, 1.0 / (P * I)
    )
    _, _, d_n = skipgram.negative_items(x, item_x, O, bias, targets, sampled, neg, 0.5)
    ptr, ids = skipgram.group_items(item_x, G)
    neg_ptr, neg_ids = skipgram.group_items(neg, S)
    far = item_x + G  # context rows past x
    f32 = np.float32
    return [
        (skipgram.node_logits, (Z, bias[sampled].astype(f32), c_["log_q_s"]),
         "node_logits: bias_s"),
        (skipgram.node_logits, (Z[:, :0], bias[:0], c_["log_q_s"][:0]), "node_logits: Z"),
        (skipgram.node_logits, (Z, bias[sampled], c_["log_q_s"], None, np.empty((G, S + 1))),
         "node_logits: w"),
        (skipgram.softmax_items, (x, far, O, bias, targets, c_["log_q_t"], hit, c, w, w_sum, 1.0),
         "softmax_items: item_x"),
        (skipgram.softmax_items, (x, item_x, O, bias, targets + 99, c_["log_q_t"], hit, c, w,
                                  w_sum, 1.0), "softmax_items: targets"),
        (skipgram.softmax_items, (x, item_x, O[:, :2], bias, targets, c_["log_q_t"], hit, c, w,
                                  w_sum, 1.0), "softmax_items: O"),
        (skipgram.softmax_node_weights, (w, ptr, ids, I, hit + S, a), "softmax_node_weights: hit"),
        (skipgram.softmax_node_weights, (w, ptr[:-1], ids, I, hit, a),
         "softmax_node_weights: item_ptr"),
        (skipgram.negative_positions, (0, 0, 4, 2, 0), "negative_positions"),
        (skipgram.negative_positions, (0, 0, 4, 2, 3, np.empty((4, 2), np.int32)),
         "negative_positions: out"),
        (skipgram.negative_items, (x, item_x, O, bias, targets, sampled, neg + S, 0.5),
         "negative_items: neg"),
        (skipgram.negative_items, (x, item_x, O, bias, targets, sampled + N_FAR, neg, 0.5),
         "negative_items: sampled"),
        (skipgram.target_to_x, (ptr, ids + 99, I, d_t, O, targets, np.zeros_like(x)),
         "target_to_x: item_ids"),
        (skipgram.target_to_x, (ptr, ids, I, d_t, O, targets, np.zeros_like(x, dtype=f32)),
         "target_to_x: O"),
        (skipgram.x_to_target, (x, far, d_t), "x_to_target: item_x"),
        (skipgram.x_to_target, (x, item_x, d_t[:, :1]), "x_to_target: d_t"),
        (skipgram.negatives_to_x, (ptr, ids, neg, d_n[:, :1], O, sampled, np.zeros_like(x)),
         "negatives_to_x: d_n"),
        (skipgram.negatives_to_x, (ptr, ids, neg + S, d_n, O, sampled, np.zeros_like(x)),
         "negatives_to_x: neg"),
        (skipgram.negatives_to_sampled, (x, far, neg_ptr, neg_ids, d_n, I),
         "negatives_to_sampled: item_x"),
        (skipgram.negatives_to_sampled, (x, item_x, neg_ptr, neg_ids + 99, d_n, I),
         "negatives_to_sampled: item_ids"),
    ]  # fmt: skip


N_FAR = 1000  # a node index past every table of kernel_case


@pytest.mark.parametrize("index", range(20))
def test_the_public_wrappers_refuse_bad_arrays_naming_them(index):
    """Every public kernel of skipgram.py checks its arrays (shape, dtype, index range)
    before the compiled kernel runs (an index out of range there reads or writes memory
    it does not own): a ValueError naming the function and the argument."""
    calls = _bad_calls()
    assert len(calls) == 20
    fn, args, name = calls[index]
    with pytest.raises(ValueError, match=f"^{name}"):
        fn(*args)


@pytest.mark.parametrize(
    "params_like,match",
    [
        ((True, 5, 5), "featureless graph"),
        ((False, 4, 5), "--feat-dim equal to --dim"),
    ],
)
def test_term_refuses_what_it_cannot_train(params_like, match):
    from caps2ne_np.model.skipgram import check_skipgram

    with pytest.raises(InputError, match=match):
        check_skipgram(params_like, ModelConfig(skipgram_weight=1.0))
    check_skipgram(params_like, ModelConfig(skipgram_weight=0.0))  # off: nothing to refuse


# --------------------------------------------------------------------------- training


def _partition():
    import scipy.sparse as sp

    from test_train import planted_partition

    adj, labels = planted_partition()
    adj = sp.csr_matrix(adj)
    return adj.indptr.astype(np.int64), adj.indices.astype(np.int32), labels


SMALL_RUN = dict(
    dim=8, feat_dim=8, walk_length=5, walks_per_node=2, epochs=1, batch_size=16, num_sampled=20
)


class _ZeroButOn(float):
    """lambda = 0.0 in every product, but truthy: the term's code runs and adds 0 x its
    gradients, so a run with it is the weight-0 path plus whatever the term's code
    disturbs besides its own (shared random streams, rows, the sampler)."""

    def __bool__(self):
        return True


@pytest.mark.parametrize(
    "preset,extra",
    # the paper preset, and the converge preset with the term off explicitly and by default
    [
        ("paper", {}),
        ("converge", {"skipgram_weight": 0.0, "spectral": "none"}),
        ("converge", {"spectral": "none"}),
    ],
)
def test_paper_preset_and_term_off_train_the_same_bits_as_the_path_without_the_term(
    preset, extra, monkeypatch
):
    """The term at weight 0 changes no bit of training: the run without the term's code
    and a run whose term runs at lambda exactly 0 are trained side by side in this process
    and give the same O, X, W and biases.  (This replaced SHA-256s recorded on one CPU:
    float bits differ between CPUs -- BLAS and Numba pick kernels by the instruction set
    -- so a recorded float hash is not a property of the code.)"""
    from caps2ne_np.model.model_config import ModelConfig
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.step import fused
    from caps2ne_np.training.train import fit

    # both runs on the Python step, where the term lives (the compiled step has no term)
    monkeypatch.setattr(fused, "supports", lambda cfg, kind: False)
    indptr, indices, _ = _partition()
    cfg = TrainConfig(**SMALL_RUN, preset=preset, seed=3, **extra)
    without = fit(indptr, indices, None, cfg)
    assert without.config.skipgram_weight == 0.0

    ran = []
    real_term = skipgram.loss_and_row_grads
    monkeypatch.setattr(
        skipgram, "loss_and_row_grads", lambda *a, **k: ran.append(1) or real_term(*a, **k)
    )
    real_model_config = TrainConfig.model_config

    def term_at_zero(self):
        mc = real_model_config(self)
        return ModelConfig(**{**mc.__dict__, "skipgram_weight": _ZeroButOn(0.0)})

    monkeypatch.setattr(TrainConfig, "model_config", term_at_zero)
    with_term = fit(indptr, indices, None, cfg)
    assert ran, "the term's code did not run: the comparison would be vacuous"
    for name in ("O", "X", "W", "bias"):
        a, b = getattr(without.params, name), getattr(with_term.params, name)
        assert np.array_equal(a, b), name


def test_term_trains_logs_both_losses_and_lowers_them():
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    indptr, indices, _ = _partition()
    for negatives in FORMS:
        cfg = TrainConfig(
            **dict(SMALL_RUN, epochs=3), skipgram_weight=1.0, skipgram_negatives=negatives
        )
        res = fit(indptr, indices, None, cfg)
        h = res.history
        assert all(e["loss"] == pytest.approx(e["loss_capsule"] + e["loss_skipgram"]) for e in h)
        assert h[-1]["loss_skipgram"] < h[0]["loss_skipgram"]
        assert h[-1]["loss_capsule"] < h[0]["loss_capsule"]


@pytest.mark.parametrize("converge_weight", [0.0, 1.0])  # the default, and a preset with it
def test_presets_fixed_features_and_feat_dim_decide_the_weight(converge_weight, monkeypatch):
    from caps2ne_np import defaults
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve

    monkeypatch.setitem(defaults.PRESETS["converge"], "skipgram_weight", converge_weight)

    def weight(fixed=False, **kw):
        return resolve(TrainConfig(**kw), 100, 1000, fixed_features=fixed)[0].skipgram_weight

    assert weight(preset="paper") == 0.0
    assert weight(preset="converge") == converge_weight
    assert weight(preset="converge", fixed=True) == 0.0  # not unless asked
    assert weight(preset="converge", feat_dim=64) == 0.0  # x_u . o_v needs d == k
    assert weight(preset="paper", skipgram_weight=0.5) == 0.5  # asked: given


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(skipgram_weight=1.0, feat_dim=4), "--feat-dim equal to --dim"),
        (dict(skipgram_weight=-1.0), "--skipgram-weight: must be a finite number >= 0"),
        (dict(skipgram_weight=1.0, skipgram_negatives=-2), "--skipgram-negatives: must be >= 0"),
    ],
)
def test_fit_refuses_bad_term_settings_in_one_line(kwargs, match):
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    indptr, indices, _ = _partition()
    with pytest.raises(InputError, match=match) as err:
        fit(indptr, indices, None, TrainConfig(**dict(SMALL_RUN, **kwargs)))
    assert "\n" not in str(err.value)


def test_fit_refuses_the_term_with_fixed_features():
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    indptr, indices, _ = _partition()
    X = np.random.default_rng(0).random((indptr.shape[0] - 1, 8)).astype(np.float32)
    with pytest.raises(InputError, match="featureless graph"):
        fit(indptr, indices, None, TrainConfig(**SMALL_RUN, skipgram_weight=1.0), features=X)
    res = fit(indptr, indices, None, TrainConfig(**SMALL_RUN, preset="converge"), features=X)
    assert res.config.skipgram_weight == 0.0


def test_resume_with_another_weight_is_refused_and_old_checkpoints_mean_weight_zero(tmp_path):
    from caps2ne_np.training import checkpoint
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    indptr, indices, _ = _partition()
    cfg = TrainConfig(**SMALL_RUN, skipgram_weight=1.0)
    fit(indptr, indices, None, cfg, checkpoint_dir=tmp_path)
    with pytest.raises(InputError, match=r"--skipgram-weight 1 \(now 0\.5\)"):
        fit(
            indptr, indices, None, TrainConfig(**dict(SMALL_RUN, epochs=2), skipgram_weight=0.5),
            resume_from=tmp_path,
        )  # fmt: skip
    ckpt = checkpoint.load(tmp_path)
    del ckpt["config"]["skipgram_weight"]  # as written before the term existed
    with pytest.raises(InputError, match="--skipgram-weight 0"):
        checkpoint.check_compatible(ckpt, cfg.to_dict(), ckpt["graph_hash"])


def test_model_file_keeps_the_weight_and_old_files_load_as_zero(tmp_path):
    import json

    from caps2ne_np.estimator.caps2ne import Caps2NE
    from caps2ne_np.io.npy import load_npz, save_npz

    indptr, indices, _ = _partition()
    import scipy.sparse as sp

    adj = sp.csr_matrix((np.ones(indices.shape[0]), indices, indptr))
    model = Caps2NE(**SMALL_RUN, skipgram_weight=0.5, skipgram_negatives=3).fit(adj)
    model.save(tmp_path / "m.npz")
    back = Caps2NE.load(tmp_path / "m.npz")
    assert (back.skipgram_weight, back.skipgram_negatives) == (0.5, 3)
    arrays = load_npz(tmp_path / "m.npz")
    config = json.loads(str(arrays["config"]))
    del config["skipgram_weight"], config["skipgram_negatives"]  # a file from before
    arrays["config"] = np.asarray(json.dumps(config))
    del arrays["run"]  # (stored in newer files)
    save_npz(tmp_path / "old.npz", overwrite=True, **arrays)
    assert Caps2NE.load(tmp_path / "old.npz").skipgram_weight == 0.0


def test_cli_history_log_line_and_refusal_with_features(tmp_path):
    import csv
    import subprocess
    import sys
    from pathlib import Path

    indptr, indices, _ = _partition()
    rows = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    keep = rows < indices
    (tmp_path / "g.txt").write_text(
        "".join(f"{u} {v}\n" for u, v in zip(rows[keep], indices[keep]))
    )
    cli = str(Path(__file__).resolve().parents[1] / "cli.py")

    def run(*args):
        return subprocess.run(
            [sys.executable, cli, "train", "--graph", "g.txt", "--dim", "8", "--feat-dim", "8",
             "--walks-per-node", "2", "--epochs", "2", *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    proc = run(
        "--out",
        "a.emb",
        "--history",
        "h.csv",
        "--skipgram-weight",
        "1",
        "--skipgram-negatives",
        "3",
    )
    assert proc.returncode == 0, proc.stderr
    assert "skip-gram term x 1 (3 negatives)" in proc.stderr  # the preset line
    assert "(capsule " in proc.stderr and "x skip-gram " in proc.stderr  # each epoch's line
    with open(tmp_path / "h.csv") as fh:
        hist = list(csv.DictReader(fh))
    assert len(hist) == 2
    for r in hist:
        total = float(r["loss_capsule"]) + float(r["loss_skipgram"])
        assert float(r["loss"]) == pytest.approx(total, rel=1e-5)
    np.save(tmp_path / "x.npy", np.ones((indptr.shape[0] - 1, 4), dtype=np.float32))
    bad = run("--out", "b.emb", "--features", "x.npy", "--skipgram-weight", "1")
    assert bad.returncode != 0
    assert "featureless graph" in bad.stderr and "Traceback" not in bad.stderr
    paper = run("--out", "c.emb", "--history", "p.csv", "--preset", "paper")
    assert paper.returncode == 0, paper.stderr
    assert "skip-gram" not in paper.stderr
    assert "loss_skipgram" not in (tmp_path / "p.csv").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("negatives", FORMS)
def test_ray_one_worker_equals_one_machine_with_the_term(ray_local, negatives):
    """The Ray workers remap node ids to local rows; V' keeps its order and the batch
    its stream key, so the term (and its negatives) are the same bits."""
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.ray.driver import fit as fit_ray
    from caps2ne_np.training.train import fit

    indptr, indices, _ = _partition()
    cfg = TrainConfig(
        **dict(SMALL_RUN, epochs=2), adam="lazy", skipgram_weight=1.0,
        skipgram_negatives=negatives,
    )  # fmt: skip
    one = fit(indptr, indices, None, cfg)
    ray = fit_ray(indptr, indices, None, cfg, workers=1, servers=2)
    for name in ("W", "O", "bias", "X"):
        assert np.array_equal(getattr(ray.params, name), getattr(one.params, name)), name
    assert [h["loss"] for h in ray.history] == [h["loss"] for h in one.history]
    for part in ("loss_capsule", "loss_skipgram"):  # the log's and --history's parts
        assert [h[part] for h in ray.history] == [h[part] for h in one.history]


@pytest.mark.parametrize("negatives", FORMS)
def test_training_with_the_term_is_the_same_on_one_and_two_threads(negatives, monkeypatch):
    import caps2ne_np.kernels.jit as jit
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)  # the parallel kernels, however small
    indptr, indices, _ = _partition()
    runs = [
        fit(
            indptr,
            indices,
            None,
            TrainConfig(**SMALL_RUN, skipgram_weight=1.0, skipgram_negatives=negatives, threads=t),
        )  # fmt: skip
        for t in (1, 2)
    ]
    for name in ("W", "O", "bias", "X"):
        assert np.array_equal(getattr(runs[0].params, name), getattr(runs[1].params, name)), name
