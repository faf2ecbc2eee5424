"""The epoch loop under hostile use: resuming a ``--stop auto`` run bit for bit, the
progress bar following the stop rule, the thread trial's rounds within the chunk time
bound, the memory check of the whole run, and messages that say what happened."""

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.training import budget
from caps2ne_np.training.config import TrainConfig
from caps2ne_np.training.train import fit

TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, batch_size=8, threads=1)


def ring_of_cliques(n_cliques=4, size=6):
    blocks = sp.block_diag([np.ones((size, size)) - np.eye(size)] * n_cliques, format="lil")
    for c in range(n_cliques):
        u, v = c * size, ((c + 1) % n_cliques) * size + 1
        blocks[u, v] = blocks[v, u] = 1
    A = blocks.tocsr()
    A.sort_indices()
    return A


def fit_on(A, cfg, **kw):
    return fit(A.indptr, A.indices.astype(np.int32), None, cfg, **kw)


class Interrupt(Exception):
    pass


@pytest.fixture
def drift_stops_after_epoch_4(monkeypatch):
    """A threshold between the drifts of epochs 3 and 4 (measured on a run without the
    rule): ``--stop auto`` on the ring of cliques ends the run after epoch 4."""
    A = ring_of_cliques()
    rule = budget.StopRule(threshold=0.0)  # never stops: every epoch's drift
    fit_on(A, TrainConfig(**TINY, epochs=6, stop="none"),
           epoch_callback=lambda epoch, result: rule(epoch, result.params))  # fmt: skip
    assert rule.drifts[1] > rule.drifts[2]
    monkeypatch.setattr(budget, "STOP_DRIFT", (rule.drifts[1] + rule.drifts[2]) / 2)
    cfg = TrainConfig(**TINY, epochs=6, stop="auto")
    full = fit_on(A, cfg)
    assert len(full.history) == 4
    return A, cfg, full


@pytest.mark.parametrize("epoch,batch", [(2, 3), (3, 1)])
def test_a_stop_auto_run_killed_mid_epoch_resumes_bit_for_bit(
    drift_stops_after_epoch_4, tmp_path, epoch, batch
):
    """Killed within epoch 3 (or 4) after a checkpoint there: the resumed run has the
    o_v of the last epoch end the drift needs, so it stops after epoch 4 with the
    uninterrupted run's bytes."""
    A, cfg, full = drift_stops_after_epoch_4

    def kill(e, b, step):
        if (e, b) == (epoch, batch):
            raise Interrupt

    with pytest.raises(Interrupt):
        fit_on(A, cfg, checkpoint_dir=tmp_path, checkpoint_every=2, step_callback=kill)
    resumed = fit_on(A, cfg, resume_from=tmp_path, checkpoint_dir=tmp_path)
    assert len(resumed.history) == 4
    assert resumed.params.O.tobytes() == full.params.O.tobytes()
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]


def test_resuming_a_run_the_rule_ended_trains_nothing(drift_stops_after_epoch_4, tmp_path):
    """The rule's decision is in the checkpoint: the same options resume to the same
    outputs without training another epoch."""
    A, cfg, full = drift_stops_after_epoch_4
    fit_on(A, cfg, checkpoint_dir=tmp_path)
    steps = []
    resumed = fit_on(
        A, cfg, resume_from=tmp_path, checkpoint_dir=tmp_path,
        step_callback=lambda e, b, s: steps.append(s),
    )  # fmt: skip
    assert steps == []
    assert len(resumed.history) == 4
    assert resumed.params.O.tobytes() == full.params.O.tobytes()
