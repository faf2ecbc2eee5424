"""The hand-derived loss and gradients of ``core.loss_and_grads`` against PyTorch autograd
on the benchmark peer (bench/peers/torch_caps2ne.py): same parameters, same pairs, same
sampled set and expected counts, float64.  Also a check that the peer's training step
lowers its loss, so the throughput benchmark times a working model."""

import os
import sys

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")

from caps2ne_np.model.core import loss_and_grads  # noqa: E402
from caps2ne_np.model.features import SparseFeatures  # noqa: E402
from caps2ne_np.model.model_config import ModelConfig  # noqa: E402
from caps2ne_np.model.params import Params  # noqa: E402

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
)
import cases  # noqa: E402
from peers.torch_caps2ne import TorchCaps2NE  # noqa: E402

RTOL = 1e-10
# Gradient entries that cancel to ~0 cannot meet a relative bar; anything below 1e-12 of
# the array's largest entry is compared absolutely (float64 rounding is ~1e-16 of it).
ATOL_FRACTION = 1e-12


def make_case(seed):
    """A tiny float64 problem with one accidental hit and a repeated target, features
    with zeros (one all-zero row, as Citeseer's)."""
    return cases.make_case(
        seed,
        n_nodes=9,
        n_pairs=4,
        n_slots=4,
        d=6,
        k=5,
        n_sampled=5,
        zero_fraction=0.5,
        zero_row=3,
        repeat_target=True,
    )


def assert_close(ours, theirs, name):
    atol = ATOL_FRACTION * max(np.abs(theirs).max(), 1e-300)
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=atol, err_msg=f"gradient of {name}")


FEATURES = ["trainable", "fixed-dense", "fixed-bag", "sparse-core"]


@pytest.mark.parametrize("features", FEATURES)
@pytest.mark.parametrize("mode", ["exact", "stop"])
@pytest.mark.parametrize("rule", ["paper", "sabour"])
@pytest.mark.parametrize("m", [1, 3])
def test_loss_and_grads_equal_torch_autograd(m, rule, mode, features):
    """features: trainable X; fixed dense X on both sides with the peer's dense or
    embedding-bag path; 'sparse-core': the library's sparse fixed features vs the bag path."""
    seed = 7 * m + 3 * (rule == "sabour") + (mode == "stop")
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(seed)
    n_slots, d, k = W.shape[0], W.shape[2], W.shape[1]
    cfg = ModelConfig(routing_iters=m, routing_rule=rule, grad_mode=mode)
    if features == "trainable":
        params = Params(W, O, bias, X, fixed_features=False)
        peer = TorchCaps2NE(
            X.shape[0],
            k,
            n_slots,
            feat_dim=d,
            routing_iters=m,
            routing_rule=rule,
            grad_mode=mode,
            dtype=torch.float64,
        ).load_numpy(W, O, bias, X)
    else:
        if features == "sparse-core":
            params = Params(
                W,
                O,
                bias,
                SparseFeatures.from_scipy(sp.csr_matrix(X), np.float64),
                fixed_features=True,
            )
        else:
            params = Params(W, O, bias, X, fixed_features=True)
        peer = TorchCaps2NE(
            X.shape[0],
            k,
            n_slots,
            features=sp.csr_matrix(X) if features != "fixed-dense" else X,
            feature_mode="dense" if features == "fixed-dense" else "bag",
            routing_iters=m,
            routing_rule=rule,
            grad_mode=mode,
            dtype=torch.float64,
        ).load_numpy(W, O, bias)

    loss, g = loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    torch_loss = peer.forward_loss(ctx, targets, sampled, q_true, q_sampled)
    torch_loss.backward()
    tg = peer.grads()

    np.testing.assert_allclose(loss, float(torch_loss.detach()), rtol=RTOL, err_msg="loss")
    names = ["W", "O", "bias"] + (["X"] if features == "trainable" else [])
    assert (g.X is None) == (features != "trainable")
    for name in names:
        assert_close(getattr(g, name), tg[name], name)


def test_stop_mode_differs_from_exact_for_several_iterations():
    """The 'stop' option must change the gradient when m > 1 (else the test above could
    pass with the option ignored on both sides)."""
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(5)
    out = {}
    for mode in ("exact", "stop"):
        peer = TorchCaps2NE(
            X.shape[0],
            W.shape[1],
            W.shape[0],
            feat_dim=W.shape[2],
            routing_iters=3,
            grad_mode=mode,
            dtype=torch.float64,
        ).load_numpy(W, O, bias, X)
        peer.forward_loss(ctx, targets, sampled, q_true, q_sampled).backward()
        out[mode] = peer.grads()["W"]
    assert np.abs(out["exact"] - out["stop"]).max() > 1e-6


def test_peer_train_step_lowers_the_loss_on_a_fixed_batch():
    W, O, bias, X, ctx, targets, sampled, q_true, q_sampled = make_case(11)
    peer = TorchCaps2NE(
        X.shape[0],
        W.shape[1],
        W.shape[0],
        feat_dim=W.shape[2],
        routing_iters=3,
        dtype=torch.float32,
    ).load_numpy(W, O, bias, X)
    peer.make_optimizer(lr=1e-2)
    first = peer.train_step(ctx, targets, sampled, q_true, q_sampled)
    for _ in range(30):
        last = peer.train_step(ctx, targets, sampled, q_true, q_sampled)
    assert np.isfinite(last) and last < 0.8 * first
