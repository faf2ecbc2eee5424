"""The label-free stop rule (caps2ne_np/training/budget.py): the drift it
measures, when it stops, that the epoch loop honours it, and that an explicit
``--epochs N`` (or ``--stop none``, or the paper preset) still trains exactly N."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.model.params import Params
from caps2ne_np.spectral.structure import measure
from caps2ne_np.training import budget
from caps2ne_np.training.loop import csr_graph
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import fit
from toy_graphs import ring_of_cliques


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


TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, batch_size=8, threads=1)


def run(A, **options):
    return fit(A.indptr, A.indices.astype(np.int32), None, TrainConfig(**TINY, **options))


@pytest.mark.parametrize("threshold,epochs", [(10.0, 2), (0.0, 6)])
def test_the_loop_ends_the_run_when_the_rule_says_so(monkeypatch, threshold, epochs):
    """--stop auto with a threshold every drift is below stops after epoch 2 (the first
    with a drift; no floor); with 0 it never stops: all 6 epochs."""
    monkeypatch.setattr(budget, "STOP_DRIFT", threshold)
    monkeypatch.setattr(budget, "STOP_FLOOR", 0.0)
    result = run(ring_of_cliques(), epochs=6, stop="auto")
    assert len(result.history) == epochs
    assert result.params.O.shape == (24, 8)


def test_a_stopped_run_is_the_full_runs_prefix(monkeypatch):
    """Stopping changes nothing before the stop: the o_v after epoch 2 of a stopped
    6-epoch run are those of epoch 2 of the full run (the schedule is the full budget's)."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)
    monkeypatch.setattr(budget, "STOP_FLOOR", 0.0)
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
    the run before it, after epoch ceil(STOP_FLOOR x budget) when every drift is small."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)
    result = run(ring_of_cliques())
    assert result.config.stop == "auto" and result.config.epochs > 2
    assert len(result.history) == budget.floor_epoch(result.config.epochs) < result.config.epochs


def test_the_floor_is_a_share_of_the_budget():
    """ceil(0.4 x epochs), never below 2: BlogCatalog's 15 -> 6, POS's 13 -> 6,
    Wikipedia's 10 -> 4, the LFR graphs' 5 -> 2 (docs/training.md)."""
    assert budget.STOP_FLOOR == 0.4
    floors = {e: budget.floor_epoch(e) for e in (None, 1, 2, 5, 6, 10, 13, 15, 25)}
    assert floors == {None: 2, 1: 2, 2: 2, 5: 2, 6: 3, 10: 4, 13: 6, 15: 6, 25: 10}


def test_a_small_drift_before_the_floor_trains_on_and_says_so(caplog):
    rule = budget.StopRule(threshold=0.1, floor=4)
    O = np.ones((4, 3), np.float32)
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        assert rule(1, params_with(O)) is False
        assert rule(2, params_with(O)) is False  # drift 0 < 0.1, epoch 2 < 4
        assert rule(3, params_with(O)) is False
        assert rule(4, params_with(O)) is True
    assert "trains at least 4 epochs, 0.4 of the budget" in caplog.text
    assert "stop after epoch 4" in caplog.text
    assert rule.drifts == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("structure", [None, 0.99])
def test_the_stop_lines_hint_true_of_a_run_given_its_epochs(caplog, structure):
    # "--epochs N trains exactly N" was false of a run given --epochs N --stop auto
    rule = budget.StopRule(threshold=0.1, structure=structure)
    O = np.ones((4, 3), np.float32)
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        assert rule(1, params_with(O)) is (structure is not None)
        assert structure is not None or rule(2, params_with(O)) is True
    assert "stop after epoch" in caplog.text and "--stop none trains every epoch" in caplog.text
    assert "--epochs N" not in caplog.text


def test_the_run_builds_its_rule_with_the_budgets_floor(monkeypatch):
    """A 6-epoch run whose every drift is below the threshold stops after epoch 3."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)
    assert len(run(ring_of_cliques(), epochs=6, stop="auto").history) == 3


@pytest.mark.parametrize("killed_in", [2, 4])
def test_a_run_resumed_at_an_epoch_end_stops_where_the_uninterrupted_one_does(
    monkeypatch, tmp_path, killed_in
):
    """The rule compares the next epoch with the o_v the run resumed from: killed in
    epoch 4 (its callback, before its checkpoint), the run resumes from epoch 3's end,
    and epoch 4's drift, the one that stops it, needs epoch 3's o_v, which only the
    checkpoint's own o_v hold (an epoch-end checkpoint stores no ``stop_previous``).
    Killed in epoch 2, the drift that stops it is measured after the resume."""
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
        if epoch == killed_in:
            raise Interrupt

    cfg = TrainConfig(**TINY, epochs=6, stop="auto")
    with pytest.raises(Interrupt):
        fit(A.indptr, A.indices.astype(np.int32), None, cfg, checkpoint_dir=tmp_path,
            epoch_callback=interrupt)  # fmt: skip
    resumed = fit(A.indptr, A.indices.astype(np.int32), None, cfg, resume_from=tmp_path)
    assert len(resumed.history) == 4
    assert resumed.params.O.tobytes() == full.params.O.tobytes()
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]


# --------------------------------------------------------------------------- the first epoch


def planted(n_blocks, size, p_in, p_out, seed=0):
    """A planted-partition graph (CSR, symmetric): ``n_blocks`` groups of ``size`` nodes,
    edges within a group with probability ``p_in``, across with ``p_out``; one group of
    240 nodes at p = 0.1 is an Erdos-Renyi graph (no structure to find)."""
    rng = np.random.default_rng(seed)
    group = np.repeat(np.arange(n_blocks), size)
    P = np.where(group[:, None] == group[None, :], p_in, p_out)
    M = np.triu(rng.random(P.shape) < P, 1)
    A = sp.csr_matrix((M | M.T).astype(np.float64))
    A.sort_indices()
    return A


STRONG = dict(n_blocks=6, size=40, p_in=0.3, p_out=0.01)  # structure 0.76-0.80 (seeds 0-2)
RANDOM = dict(n_blocks=1, size=240, p_in=0.1, p_out=0.1)  # 0.45-0.56


def test_auc_is_the_mann_whitney_statistic_with_ties_averaged():
    from scipy.stats import rankdata

    from caps2ne_np.spectral import propagation

    rng = np.random.default_rng(0)
    for _ in range(50):  # integer scores: many ties
        pos = rng.integers(0, 5, size=rng.integers(1, 30)).astype(float)
        neg = rng.integers(0, 5, size=rng.integers(1, 30)).astype(float)
        r = rankdata(np.r_[pos, neg])
        ref = (r[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))
        assert propagation.auc(pos, neg) == pytest.approx(ref, abs=1e-12)
    # by definition: every positive above every negative is 1, the reverse 0
    assert propagation.auc([2.0, 3.0], [0.0, 1.0]) == 1.0
    assert propagation.auc([0.0], [1.0, 2.0]) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_structure_separates_a_graph_of_communities_from_a_random_one(seed):
    strong = measure(planted(**STRONG, seed=seed), seed)
    random = measure(planted(**RANDOM, seed=seed), seed)
    assert strong >= budget.STOP_STRUCTURE > random
    assert random == pytest.approx(0.5, abs=0.1)  # no better than chance


def test_structure_is_not_measured_on_a_graph_too_small_to_tell():
    assert measure(ring_of_cliques(), 0) is None  # 24 nodes
    assert budget.graph_structure(TrainConfig(stop="none"), None) is None  # nothing asked


def test_structure_cannot_tell_without_held_out_edges_or_non_edges():
    """A perfect matching has no edge to hold out (every end has degree 1); a complete
    graph has no non-edge: None (the drift part decides), neither an error nor a hang."""
    u = np.arange(0, 200, 2)
    pairs = (np.r_[u, u + 1], np.r_[u + 1, u])
    matching = sp.coo_matrix((np.ones(200), pairs), shape=(200, 200)).tocsr()
    assert measure(matching, 0) is None
    complete = sp.csr_matrix(np.ones((130, 130)) - np.eye(130))
    assert measure(complete, 0) is None
    from caps2ne_np.spectral import propagation

    assert np.isnan(propagation.auc([], [1.0])) and np.isnan(propagation.auc([1.0], []))


def test_the_first_part_stops_after_epoch_one_on_structure_alone():
    O = np.ones((4, 3), np.float32)
    assert budget.StopRule(structure=0.9, first=0.68)(1, params_with(O)) is True
    for structure in (0.5, None):  # below the threshold, or not measured: the drift decides
        rule = budget.StopRule(threshold=0.1, structure=structure, first=0.68)
        assert rule(1, params_with(O)) is False
        assert rule(2, params_with(O * 2.1)) is False  # drift 1.1 / 2.1
        assert rule(3, params_with(O * 2.1)) is True  # drift 0


@pytest.mark.parametrize("kind,first_epoch_stops", [(STRONG, True), (RANDOM, False)])
def test_the_run_stops_after_epoch_one_on_a_graph_of_communities_only(
    monkeypatch, kind, first_epoch_stops
):
    """The converge preset (no --epochs) on the two graphs: the rule's first part ends
    the run with communities after one epoch; on the random graph the drift part runs
    on (a threshold no drift is below: the whole budget)."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 0.0)
    A = planted(**kind)
    result = run(A)
    assert result.config.stop == "auto" and result.config.epochs >= 2
    assert len(result.history) == (1 if first_epoch_stops else result.config.epochs)


def test_the_structure_log_line_names_the_floor(caplog):
    """A graph without low-rank structure (random, 200 nodes): the rule's first line says
    the drift part decides, from epoch ceil(0.4 x 10) = 4 on."""
    rng = np.random.default_rng(0)
    upper = sp.triu(sp.random(200, 200, density=0.05, random_state=rng, format="csr"), 1)
    A = ((upper + upper.T) > 0).astype(np.float32).tocsr()
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        run(A, epochs=10, stop="auto")
    assert "until an epoch from epoch 4 on (0.4 of the budget) moves the o_v" in caplog.text


@pytest.mark.parametrize("stop", ["none", "auto"])
def test_a_graph_too_small_to_measure_logs_no_measurement(caplog, stop):
    # a 90-node graph logged "written spectrum: a rank-32 factorisation ... to measure"
    # and then measured nothing (fewer than 4 x STOP_RANK nodes)
    from caps2ne_np.training.options.config import TrainConfig

    rng = np.random.default_rng(0)
    upper = sp.triu(sp.random(90, 90, density=0.1, random_state=rng, format="csr"), 1)
    A = ((upper + upper.T) > 0).astype(np.float32).tocsr()
    cfg = TrainConfig(stop=stop, propagate="on", spectrum_power="auto", epochs=2)
    with caplog.at_level("INFO"):
        assert budget.graph_structure(cfg, csr_graph(A.indptr, A.indices, None)) is None
    assert "rank-32 factorisation" not in caplog.text


# --------------------------------------------------------------------------- --stop auto on resume


def test_stop_auto_on_resume_of_a_stop_none_run_ends_where_a_stop_auto_run_does(tmp_path):
    """A --stop none run on a graph of communities, interrupted after epoch 1's
    checkpoint and resumed with --stop auto: the rule's first part, which the
    checkpoint did not record, ends the run there, as it ends the --stop auto run."""
    A = planted(**STRONG)

    def interrupt(epoch, result):
        if epoch == 2:  # before epoch 2's checkpoint: epoch 1's is kept
            raise InterruptedError

    with pytest.raises(InterruptedError):
        fit(A.indptr, A.indices.astype(np.int32), None, TrainConfig(**TINY, epochs=4, stop="none"),
            checkpoint_dir=tmp_path, epoch_callback=interrupt)  # fmt: skip
    full = run(A, epochs=4, stop="auto")
    assert len(full.history) == 1
    steps = []
    resumed = fit(A.indptr, A.indices.astype(np.int32), None, TrainConfig(**TINY, stop="auto"),
                  resume_from=tmp_path, step_callback=lambda e, b, s: steps.append(s))  # fmt: skip
    assert steps == [] and len(resumed.history) == 1
    assert resumed.params.O.tobytes() == full.params.O.tobytes()


def resumed_rule(epoch, batch, structure=None, stored=None, caplog=None):
    """A StopRule resumed from a checkpoint at ``epoch`` epochs and ``batch`` batches
    (``stored``: the rule's state in it; None: written without the rule)."""
    rule = budget.StopRule(threshold=0.1, structure=structure, first=0.68)
    state = dict(epoch=epoch, batch=batch)
    if stored is not None:
        state["stop"] = stored
    rule.resume(state, params_with(np.ones((4, 3), np.float32)), {})
    return rule


@pytest.mark.parametrize("epoch,batch,stops_after", [(1, 0, 1), (3, 0, 3), (2, 5, 3)])
def test_the_first_part_ends_a_resumed_run_past_epoch_one(caplog, epoch, batch, stops_after):
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        rule = resumed_rule(epoch, batch, structure=0.9)
        assert rule.stopped is (batch == 0)
        if batch:  # within an epoch: at its end, whatever the drift
            assert rule(stops_after, params_with(np.ones((4, 3), np.float32) * 5)) is True
    assert "on a checkpoint written without it" in caplog.text
    assert f"so it ends after epoch {stops_after}" in caplog.text


def test_a_resume_within_an_epoch_without_its_start_says_which_drift_it_cannot_measure(caplog):
    """A --stop none checkpoint 5 batches into epoch 3 holds no o_v of epoch 2's end: the
    log says epoch 3's drift (and those of epoch 2) cannot be measured, and the rule
    measures epoch 4's against epoch 3's o_v."""
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        rule = resumed_rule(2, 5)
        O = np.ones((4, 3), np.float32)
        assert rule(3, params_with(O)) is False  # nothing to compare with
        assert rule(4, params_with(O)) is True  # drift 0
    assert (
        "holds no o_v of epoch 2's end, so the drift of epoch 3 cannot be measured (and "
        "the drift of epoch 2 was not); the rule judges from epoch 4 on"
    ) in caplog.text
    assert rule.drifts == [0.0]


def test_a_resume_at_an_epoch_end_without_the_rule_says_which_drifts_were_not_measured(caplog):
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        rule = resumed_rule(3, 0)
    assert not rule.stopped and rule.previous is not None
    assert "the drifts of epochs 2 to 3 were not measured" in caplog.text
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        resumed_rule(2, 0)
    assert "the drift of epoch 2 was not measured" in caplog.text
    assert "judges from epoch 4 on" in caplog.text


def test_a_resume_with_the_rules_state_logs_nothing_more(caplog):
    with caplog.at_level("INFO", logger="caps2ne_np.training.budget"):
        resumed_rule(3, 0, structure=0.9, stored=dict(stopped=False, drifts=[0.5, 0.4]))
        resumed_rule(0, 0, structure=0.9)  # a new run
    assert caplog.text == ""


# --------------------------------------------------------------------------- the tuned thresholds


def test_the_stop_thresholds_sit_in_the_gaps_their_evidence_leaves():
    """Each threshold between the measured values on either side of it (the constants'
    docstrings and docs/results/stop_structure.md, heldout_stop.md): a change that moves
    one past a measured graph changes that graph's epochs and fails here."""
    # the structure part: 0.66 (the highest graph whose later epochs added points,
    # LFR 1k at mixing 0.6) < t <= 0.70 (the lowest whose did not: GitHub, PPI)
    assert 0.66 < budget.STOP_STRUCTURE <= 0.70
    # the drift part: POS's epoch-6 drift (0.218 to 0.219) < t < BlogCatalog's epoch 4
    # (0.231 to 0.232)
    assert 0.219 < budget.STOP_DRIFT < 0.231
    # the floor: BlogCatalog 6 of 15 epochs, POS at most 6 of 13
    assert math.ceil(budget.STOP_FLOOR * 15) == 6 and math.ceil(budget.STOP_FLOOR * 13) <= 6


def test_a_drift_equal_to_the_threshold_trains_on():
    """The drift part stops on a drift strictly below the threshold."""
    O1 = np.ones((4, 3), np.float32)
    O2 = O1 * 1.5
    d = budget.drift(O1, O2)
    rule = budget.StopRule(threshold=d, structure=None, floor=2)
    assert rule(1, params_with(O1)) is False
    assert rule(2, params_with(O2)) is False
    below = budget.StopRule(threshold=np.nextafter(d, 1.0), structure=None, floor=2)
    assert below(1, params_with(O1)) is False and below(2, params_with(O2)) is True


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


def test_epochs_given_on_resume_of_a_stop_auto_run_train_exactly_n(monkeypatch, tmp_path):
    """A run started without --epochs (--stop auto, the budget a cap) and resumed with
    --epochs 3 trains exactly 3 (--stop none): what it trained so far is unchanged."""
    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)  # auto would stop after epoch 2
    A = ring_of_cliques()

    def interrupt(epoch, result):
        if epoch == 2:  # before epoch 2's checkpoint: epoch 1's is kept
            raise Interrupt

    with pytest.raises(Interrupt):
        fit_on(A, TrainConfig(**TINY), checkpoint_dir=tmp_path, epoch_callback=interrupt)
    resumed = fit_on(A, TrainConfig(**TINY, epochs=3), resume_from=tmp_path)
    assert resumed.config.stop == "none"
    assert len(resumed.history) == 3
