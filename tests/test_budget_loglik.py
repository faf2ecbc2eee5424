"""``--stop loglik`` (caps2ne_np/training/budget.py): the held-out contexts' log-likelihood
agrees with the dense NumPy reference, each context reaches its target only through
its held-out edge, the rule stops when the log-likelihood stops rising and resumes
from a checkpoint, and ``train`` offers it."""

import logging

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.errors import InputError
from caps2ne_np.model import reference
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import Params
from caps2ne_np.training import budget
from caps2ne_np.training.loop import csr_graph
from caps2ne_np.training.options.config import TrainConfig
from test_budget_holdout import (
    TINY,
    first_stop,
    fit_on,
    pairs_of,
    params_with,
    planted,
    ring_of_cliques,
    spy_rules,
    threshold_between_gains,
    tiny_cli_run,
)

# --------------------------------------------------------------------------- the score


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("iters,rule", [(1, "paper"), (3, "paper"), (2, "sabour")])
def test_loglik_is_the_full_softmax_log_likelihood_of_the_reference(dtype, tol, iters, rule):
    """budget.loglik (the package's forward pass, chunks of 3) against the slow
    reference: e from reference.capsule_output, then the full softmax over every node."""
    rng = np.random.default_rng(7)
    N, I, k, d, P = 13, 4, 5, 6, 8
    W = rng.normal(size=(I, k, d))
    O = rng.normal(size=(N, k))
    bias = rng.normal(size=N)
    X = rng.normal(size=(N, d))
    ctx = rng.integers(0, N, size=(P, I)).astype(np.int32)
    tgt = rng.integers(0, N, size=P)
    model = ModelConfig(routing_iters=iters, routing_rule=rule)
    params = Params(W, O, bias, X).astype(dtype)
    got = budget.loglik(params, ctx, tgt, model, chunk=3)
    e, _ = reference.capsule_output(W, X, ctx, iters, float(I), rule)
    want = -reference.full_softmax_loss(e, O, bias, tgt)
    assert got == pytest.approx(want, rel=tol, abs=tol)


def test_a_large_graph_scores_fewer_contexts_at_a_time(monkeypatch):
    """The logits block is at most LOGLIK_LOGITS entries: with room for one context's
    row, the contexts go one at a time, to the same value."""
    rng = np.random.default_rng(3)
    N, I, k, d, P = 11, 3, 4, 5, 6
    params = Params(*(rng.normal(size=s) for s in ((I, k, d), (N, k), N, (N, d))))
    ctx = rng.integers(0, N, size=(P, I)).astype(np.int32)
    tgt = rng.integers(0, N, size=P)
    model = ModelConfig(routing_iters=2)
    whole = budget.loglik(params, ctx, tgt, model)
    seen = []
    from caps2ne_np.model import batch_forward

    original = batch_forward.forward

    def spy(params, ctx, cfg, *a, **kw):
        seen.append(len(ctx))
        return original(params, ctx, cfg, *a, **kw)

    monkeypatch.setattr(batch_forward, "forward", spy)
    monkeypatch.setattr(budget, "LOGLIK_LOGITS", N + 1)
    assert budget.loglik(params, ctx, tgt, model) == pytest.approx(whole, rel=1e-12)
    assert seen == [1] * P


# --------------------------------------------------------------------------- the sample


def held_of(A, **cfg):
    cfg = TrainConfig(**dict(TINY, stop="loglik", **cfg))
    graph = csr_graph(A.indptr, A.indices.astype(np.int32), None)
    return budget.held_out(cfg, graph)


@pytest.mark.parametrize("targets,t", [("all", 0), ("random", 0), ((3, 4), 3), ((5,), 5)])
def test_each_context_reaches_its_target_only_through_its_held_out_edge(targets, t):
    """The target sits at the run's first target position t; the context nodes beside
    it (positions t - 1 and t + 1) are the held-out edge's other end, and each side is
    a walk over the training graph away from it."""
    A = ring_of_cliques()
    q = 6
    held, train_graph = held_of(A, walk_length=q, targets=targets)
    indptr, indices = train_graph.indptr, train_graph.indices
    pos, ctx, tgt = held["pos"], held["ctx"], held["tgt"]
    m = len(pos)
    assert m > 0 and ctx.shape == (2 * m, q - 1) and ctx.dtype == np.int32
    ends = np.r_[pos[:, 0], pos[:, 1]]
    assert np.array_equal(tgt, np.r_[pos[:, 1], pos[:, 0]])
    trained = pairs_of(indptr, indices)
    for c, v, u in zip(ctx, tgt, ends):
        walk = np.r_[c[:t], v, c[t:]]  # the q nodes in walk order
        neighbours = [walk[j] for j in (t - 1, t + 1) if 0 <= j < q]
        assert all(x == u for x in neighbours)
        assert (u, v) not in trained and (v, u) not in trained
        for a, b in zip(walk[: t - 1], walk[1:t]):  # the left side, toward u
            assert (a, b) in trained
        for a, b in zip(walk[t + 1 : -1], walk[t + 2 :]):  # the right side, from u
            assert (a, b) in trained


def test_the_contexts_are_seeded():
    A = planted()
    one, _ = held_of(A, seed=3)
    two, _ = held_of(A, seed=3)
    other, _ = held_of(A, seed=4)
    assert np.array_equal(one["ctx"], two["ctx"]) and np.array_equal(one["tgt"], two["tgt"])
    assert not np.array_equal(one["ctx"], other["ctx"][: len(one["ctx"])])


def test_a_complete_graph_still_holds_edges_out_for_the_log_likelihood():
    """No non-edge to set against matters to the AUC, not to the log-likelihood."""
    n = 10
    A = sp.csr_matrix(np.ones((n, n)) - np.eye(n))
    held, _ = held_of(A)
    assert held is not None and len(held["tgt"]) == 2 * len(held["pos"])
    assert len(held["neg"]) == 0
    cfg = TrainConfig(**dict(TINY, stop="holdout"))
    assert budget.held_out(cfg, csr_graph(A.indptr, A.indices.astype(np.int32), None))[0] is None


# --------------------------------------------------------------------------- the rule


class Fed(budget.LoglikRule):
    """The rule with measured log-likelihoods fed in, not scored."""

    def __init__(self, values, min_gain=None):
        held = dict(ctx=np.zeros((1, 1), np.int32), tgt=np.zeros(1, np.int64))
        super().__init__(held, TrainConfig(**TINY), min_gain)
        self.fed = iter(values)

    def score(self, params):
        return next(self.fed)


@pytest.mark.parametrize(
    "values,stops_after",
    [
        ([-6.39, -6.15, -6.08, -6.045, -6.035], 5),  # bundled Cora: gains 0.24 .. 0.0097
        ([-7.53, -7.57, -7.59], 2),  # a falling log-likelihood stops at once
        ([-5.0, -4.0, -3.0], None),  # rising by 1 every epoch: never
    ],
)
def test_the_rule_stops_once_the_gain_falls_below_the_threshold(values, stops_after):
    rule = Fed(values)
    stop = first_stop(rule, len(values))
    assert stop == stops_after and rule.stopped == (stop is not None)
    assert rule.scores == values[: stop or len(values)]


def test_the_rules_state_round_trips_through_a_checkpoint():
    rule = Fed([-3.0, -2.0, -1.995])
    O = params_with(np.ones((2, 2), np.float32))
    assert [rule(e, O) for e in (1, 2, 3)] == [False, False, True]
    stored, arrays = rule.checkpoint(mid_epoch=False)
    assert arrays == {} and stored["logliks"] == [-3.0, -2.0, -1.995]
    again = Fed([])
    again.resume(dict(epoch=3, batch=0, stop=stored), O)
    assert again.stopped and again.scores == rule.scores


# --------------------------------------------------------------------------- runs


def test_a_loglik_run_stops_where_its_own_log_likelihoods_say(monkeypatch, caplog):
    """The rule's scores are the log-likelihoods of the run's parameters after each
    epoch (recomputed here from a copy taken by the epoch callback), and the run ends
    after the first epoch whose gain is below the threshold, set between two of the
    run's own gains (measured with a rule that never stops)."""
    rules = spy_rules(monkeypatch)
    monkeypatch.setattr(budget, "LOGLIK_MIN_GAIN", -np.inf)
    A = planted()
    cfg = TrainConfig(**TINY, epochs=6, stop="loglik", lr=0.002)
    copies = []
    free = fit_on(A, cfg, epoch_callback=lambda e, r: copies.append(r.params.astype(np.float64)))
    assert len(free.history) == 6
    ctx, tgt = free.holdout["ctx"], free.holdout["tgt"]
    model = free.config.model_config()
    mine = [budget.loglik(p, ctx, tgt, model) for p in copies[:-1]]
    assert rules[-1].scores == pytest.approx(mine, rel=1e-5)  # asked before the last epoch
    s, threshold = threshold_between_gains(rules[-1].scores)  # the gains of epochs 2..5
    monkeypatch.setattr(budget, "LOGLIK_MIN_GAIN", threshold)
    with caplog.at_level(logging.INFO, logger="caps2ne_np"):
        stopped = fit_on(A, cfg)
    assert len(stopped.history) == s + 2
    assert "held-out contexts after epoch 1: log-likelihood" in caplog.text
    assert "--stop loglik; --stop none trains every epoch" in caplog.text


@pytest.mark.parametrize(
    "before,now", [("loglik", "auto"), ("none", "loglik"), ("holdout", "loglik")]
)
def test_a_resume_cannot_switch_to_or_from_loglik(tmp_path, before, now):
    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1, stop=before), checkpoint_dir=tmp_path)
    with pytest.raises(InputError, match="trains on the graph without its held-out edges"):
        fit_on(A, TrainConfig(**TINY, epochs=2, stop=now), resume_from=tmp_path)


def test_train_offers_loglik(tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.io.word2vec import read_word2vec

    out = CliRunner().invoke(cli, ["train", "--help"], terminal_width=10_000)
    assert "none|auto|holdout|loglik" in out.output
    A, out = tiny_cli_run(tmp_path, "--stop", "loglik")
    assert "--stop loglik:" in out.stderr and "edges held out" in out.stderr
    assert "held-out contexts after epoch 1: log-likelihood" in out.stderr
    assert len(read_word2vec(tmp_path / "e.emb")[0]) == A.shape[0]
