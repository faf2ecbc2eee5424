"""The label-free stop rule (issue 32, caps2ne_np/training/budget.py): the drift it
measures, when it stops, that the epoch loop honours it, and that an explicit
``--epochs N`` (or ``--stop none``, or the paper preset) still trains exactly N."""

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.model.core import Params
from caps2ne_np.training import budget
from caps2ne_np.training.config import TrainConfig
from caps2ne_np.training.train import fit


def params_with(O):
    return Params(np.zeros((1, 2, 2), np.float32), O, np.zeros(len(O), np.float32), None, True)


def test_drift_is_the_relative_frobenius_change():
    a = np.ones((3, 2))
    b = a * 1.5
    assert budget.drift(a, b) == pytest.approx(np.sqrt(6 * 0.25) / np.sqrt(6 * 2.25))
    assert budget.drift(b, b) == 0.0


def test_stop_rule_stops_at_the_first_small_drift_and_never_after_epoch_one():
    rule = budget.StopRule(threshold=0.1)
    O = np.ones((4, 3), np.float32)
    assert rule(1, params_with(O)) is False  # no previous o_v: never stops
    assert rule(2, params_with(O * 2)) is False  # drift 0.5
    assert rule(3, params_with(O * 2.1)) is True  # drift 0.1 / 2.1 < 0.1
    assert rule.drifts == pytest.approx([0.5, 0.1 / 2.1])


def ring_of_cliques(n_cliques=4, size=6):
    blocks = sp.block_diag([np.ones((size, size)) - np.eye(size)] * n_cliques, format="lil")
    for c in range(n_cliques):
        u, v = c * size, ((c + 1) % n_cliques) * size + 1
        blocks[u, v] = blocks[v, u] = 1
    A = blocks.tocsr()
    A.sort_indices()
    return A


TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, batch_size=8, threads=1)


def run(A, **options):
    return fit(A.indptr, A.indices.astype(np.int32), None, TrainConfig(**TINY, **options))


@pytest.mark.parametrize("threshold,epochs", [(10.0, 2), (0.0, 6)])
def test_the_loop_ends_the_run_when_the_rule_says_so(monkeypatch, threshold, epochs):
    """--stop auto with a threshold every drift is below stops after epoch 2 (the first
    with a drift); with 0 it never stops: all 6 epochs."""
    monkeypatch.setattr(budget, "STOP_DRIFT", threshold)
    result = run(ring_of_cliques(), epochs=6, stop="auto")
    assert len(result.history) == epochs
    assert result.params.O.shape == (24, 8)


def test_a_stopped_run_is_the_full_runs_prefix(monkeypatch):
    """Stopping changes nothing before the stop: the o_v after epoch 2 of a stopped
    6-epoch run are those of epoch 2 of the full run (the schedule is the full budget's)."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)
    stopped = run(ring_of_cliques(), epochs=6, stop="auto").params.O.copy()
    seen = {}

    def keep(epoch, result):
        seen[epoch] = np.array(result.params.O)

    A = ring_of_cliques()
    fit(A.indptr, A.indices.astype(np.int32), None, TrainConfig(**TINY, epochs=6, stop="none"),
        epoch_callback=keep)  # fmt: skip
    np.testing.assert_array_equal(stopped, seen[2])


def test_explicit_epochs_train_exactly_n(monkeypatch):
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)  # the rule would stop at once
    assert len(run(ring_of_cliques(), epochs=4).history) == 4  # stop unset: none
    assert len(run(ring_of_cliques(), epochs=4, stop="none").history) == 4
    assert len(run(ring_of_cliques(), epochs=3, preset="paper").history) == 3


def test_the_converge_preset_stops_by_itself(monkeypatch):
    """No --epochs: the budget's epochs are a cap and the rule (on by the preset) ends
    the run before it."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)
    result = run(ring_of_cliques())
    assert result.config.stop == "auto" and result.config.epochs > 2
    assert len(result.history) == 2


def test_a_run_resumed_at_an_epoch_end_stops_where_the_uninterrupted_one_does(
    monkeypatch, tmp_path
):
    """The rule compares the next epoch with the o_v the run resumed from."""
    A = ring_of_cliques()
    rule = budget.StopRule(threshold=0.0)  # never stops: every epoch's drift
    fit(A.indptr, A.indices.astype(np.int32), None, TrainConfig(**TINY, epochs=6, stop="none"),
        epoch_callback=lambda epoch, result: rule(epoch, result.params))  # fmt: skip
    # a threshold between the drifts of epochs 3 and 4: the run stops after epoch 4
    monkeypatch.setattr(budget, "STOP_DRIFT", (rule.drifts[1] + rule.drifts[2]) / 2)
    assert rule.drifts[1] > rule.drifts[2]
    full = run(A, epochs=6, stop="auto")
    assert len(full.history) == 4

    class Interrupt(Exception):
        pass

    def interrupt(epoch, result):
        if epoch == 2:
            raise Interrupt

    cfg = TrainConfig(**TINY, epochs=6, stop="auto")
    with pytest.raises(Interrupt):
        fit(A.indptr, A.indices.astype(np.int32), None, cfg, checkpoint_dir=tmp_path,
            epoch_callback=interrupt)  # fmt: skip
    resumed = fit(A.indptr, A.indices.astype(np.int32), None, cfg, resume_from=tmp_path)
    assert len(resumed.history) == 4
    np.testing.assert_array_equal(resumed.params.O, full.params.O)
