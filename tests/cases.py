"""Tiny random Caps2NE problems for the gradient checks (tests/test_grads.py against
central differences, tests/test_core_torch.py against PyTorch autograd)."""

import numpy as np


def make_case(
    seed,
    n_nodes=7,
    n_pairs=3,
    n_slots=3,
    d=4,
    k=5,
    n_sampled=4,
    scale_w=0.6,
    *,
    zero_fraction=0.0,
    zero_row=None,
    repeat_target=False,
):
    """(W, O, bias, X, ctx, targets, sampled, q_true, q_sampled) in float64, away from
    |s| ~ 0 (W large enough for a non-trivial squash).  The sampled set is distinct and
    holds the first pair's target (an accidental hit).  ``zero_fraction`` zeroes that
    share of X's entries (bag-of-words-like), ``zero_row`` one whole row (as Citeseer
    has), ``repeat_target`` gives the last pair the first pair's target."""
    rng = np.random.default_rng(seed)
    W = rng.normal(0, scale_w, size=(n_slots, k, d))
    O = rng.normal(0, 0.5, size=(n_nodes, k))
    bias = rng.normal(0, 0.1, size=n_nodes)
    X = rng.normal(0, 0.8, size=(n_nodes, d))
    if zero_fraction:
        X[rng.random(X.shape) < zero_fraction] = 0.0
    if zero_row is not None:
        X[zero_row] = 0.0
    ctx = rng.integers(0, n_nodes, size=(n_pairs, n_slots))
    targets = rng.integers(0, n_nodes, size=n_pairs)
    if repeat_target:
        targets[-1] = targets[0]
    others = np.setdiff1d(np.arange(n_nodes), targets[:1])
    sampled = np.concatenate([targets[:1], rng.choice(others, size=n_sampled - 1, replace=False)])
    rng.shuffle(sampled)
    q_true = rng.uniform(0.2, 1.0, size=n_pairs)
    q_sampled = rng.uniform(0.2, 1.0, size=n_sampled)
    return W, O, bias, X, ctx, targets, sampled, q_true, q_sampled
