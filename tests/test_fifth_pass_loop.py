"""The epoch loop under hostile use: resuming a ``--stop auto`` run bit for bit, the
progress bar following the stop rule, the thread trial's rounds within the chunk time
bound, the memory check of the whole run, and messages that say what happened."""

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.training import budget
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import fit
from toy_graphs import ring_of_cliques

TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, batch_size=8, threads=1)


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


# ------------------------------------------------------------ what a resume may change


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


def test_propagate_may_change_on_resume(tmp_path):
    """--propagate acts on the written o_v after training: no trained bit depends on it."""
    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1, propagate="on"), checkpoint_dir=tmp_path)
    resumed = fit_on(A, TrainConfig(**TINY, epochs=2, propagate="none"), resume_from=tmp_path)
    assert len(resumed.history) == 2


def test_the_written_rows_options_may_change_on_resume(tmp_path):
    """--spectrum-power and --row-norm shape the propagated rows after training: a
    resume that changes them trains the o_v of a run without the change and carries
    the new values to the written rows (propagation.apply reads the run's config)."""
    A = ring_of_cliques()
    kw = dict(TINY, propagate="on")
    straight = fit_on(A, TrainConfig(**kw, epochs=2, spectrum_power="1", row_norm=3.0))

    def interrupt(epoch, result):
        if epoch == 2:  # before epoch 2's checkpoint: epoch 1's is kept
            raise Interrupt

    with pytest.raises(Interrupt):
        fit_on(A, TrainConfig(**kw, epochs=2), checkpoint_dir=tmp_path, epoch_callback=interrupt)
    resumed = fit_on(
        A, TrainConfig(**kw, epochs=2, spectrum_power="1", row_norm=3.0), resume_from=tmp_path
    )
    assert resumed.params.O.tobytes() == straight.params.O.tobytes()
    assert (resumed.config.spectrum_power, resumed.config.row_norm) == ("1", 3.0)


def test_other_options_are_still_refused_and_the_message_lists_what_may_change(tmp_path):
    from caps2ne_np.errors import InputError

    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1), checkpoint_dir=tmp_path)
    may = r"only --epochs, --stop, --propagate, --spectrum-power, --row-norm and"
    with pytest.raises(InputError, match=r"--lr .*" + may):
        fit_on(A, TrainConfig(**TINY, epochs=2, lr=0.01), resume_from=tmp_path)


# ------------------------------------------------------------ messages


def test_divergence_before_any_checkpoint_says_none_was_written():
    from caps2ne_np.training.loop import TrainingDiverged
    from test_loop import StubEngine, config, run

    nan_at_step_3 = StubEngine(1, loss_of=lambda s: float("nan") if s == 3 else 1.0)
    with pytest.raises(TrainingDiverged) as err:
        run(nan_at_step_3, config(), checkpoint_dir="ck_nan")
    assert "last good checkpoint" not in str(err.value)
    assert "no checkpoint was written in ck_nan" in str(err.value)
    nan_at_step_7 = StubEngine(1, loss_of=lambda s: float("nan") if s == 7 else 1.0)
    with pytest.raises(TrainingDiverged, match="the last good checkpoint is in ck_nan"):
        run(nan_at_step_7, config(), checkpoint_dir="ck_nan")  # epoch 1's is


def test_checkpoint_every_without_a_folder_is_a_usage_error(tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    graph = tmp_path / "g.txt"
    graph.write_text("0 1\n1 2\n")
    result = CliRunner().invoke(
        cli, ["train", "--graph", str(graph), "--out", str(tmp_path / "g.emb"),
              "--checkpoint-every", "10"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--checkpoint-every needs --checkpoint-dir" in result.output


# ------------------------------------------------------------ the progress bar


class RecordingBar:
    """loop's progress display, recorded: its total, batches done, totals set later."""

    def __init__(self, total, initial):
        self.total, self.n, self.totals = total, initial, [total]

    def update(self, n):
        self.n += n

    def set_postfix(self, **fields):
        self.fields = fields

    def set_total(self, total):
        self.total = total
        self.totals.append(total)

    def close(self):
        self.closed = True


@pytest.fixture
def bars(monkeypatch):
    from caps2ne_np.training import loop

    made = []

    def progress(enabled, total, initial=0):
        made.append(RecordingBar(total, initial))
        return made[-1]

    monkeypatch.setattr(loop, "_progress", progress)
    return made


def test_the_bar_is_one_epoch_long_when_the_structure_part_ends_the_run_after_it(bars):
    """The structure part decides before training: the bar's total is epoch 1's batches
    (5) from the start, not the budget's 4 epochs, and it ends full."""
    from test_loop import StubEngine, config, run

    result = run(StubEngine(1), config(epochs=4), progress=True)
    assert len(result.history) == 4  # no rule: the bar is the budget's
    assert bars[-1].totals == [20] and bars[-1].n == 20
    from caps2ne_np.training.loop import LoopOptions, TrainResult, run_epochs

    rule = budget.StopRule(structure=0.9, first=0.68)
    result = run_epochs(
        StubEngine(1), TrainResult(params=None, config=config(epochs=4)), 40,
        LoopOptions(progress=True), stop_rule=rule,
    )  # fmt: skip
    assert len(result.history) == 1
    assert bars[-1].totals[0] == 5 and bars[-1].total == bars[-1].n == 5


def test_the_bar_ends_full_where_the_rule_stops_the_run(bars):
    """The drift part decides after an epoch: the bar's total becomes the batches
    trained when the run stops (10 of 20), so it ends at 100%, not 50%."""
    from caps2ne_np.training.loop import LoopOptions, TrainResult, run_epochs
    from test_loop import StubEngine, config

    result = run_epochs(
        StubEngine(1), TrainResult(params=None, config=config(epochs=4)), 40,
        LoopOptions(progress=True), stop_rule=lambda epoch, params: epoch == 2,
    )  # fmt: skip
    assert len(result.history) == 2
    assert bars[-1].totals == [20, 10] and bars[-1].n == 10


@pytest.mark.parametrize("terminal", [False, True])
def test_a_bar_given_a_smaller_total_shows_it_done(terminal, monkeypatch):
    import io

    from caps2ne_np.training import progress

    stream = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", stream)
    bar = progress.TerminalBar(20, 0, stream) if terminal else progress.LogLines(20, 0)
    bar.update(10)
    bar.set_total(10)
    if terminal:
        assert bar.eta.total == 10 and "10/10" in stream.getvalue().split("\r")[-1]
    else:
        assert bar.line().startswith("progress: 10/10 batches (100%)")
    bar.close()


# ------------------------------------------------------------ rounds within the chunk bound


class TrialNext:
    """StepThreads' answer to 'is the next round a trial round?'."""

    def __init__(self, trial):
        self.trial = trial

    def trial_next(self):
        return self.trial


def engine_timing(width=1, trial=False):
    """A LocalEngine's round sizing (``_next_round``) without a graph."""
    from caps2ne_np.training.train import LocalEngine

    engine = object.__new__(LocalEngine)
    engine.width, engine.checkpoint_every = width, 0
    engine._chunk, engine._n, engine._rounds = None, 1, 0
    engine.threads = TrialNext(trial)
    return engine


def next_size(engine, seconds, trial=False):
    engine._next_round(0, seconds, trial)
    engine._n = engine.round_size
    return engine.round_size


@pytest.mark.parametrize("width", [1, 2])
def test_probe_and_trial_rounds_keep_within_the_chunk_time_bound(width):
    """A batch of 1 s (--batch-size 8192 on a large graph): after the first round (one
    batch, 2 s with the kernels loading) the probe round and every thread-trial round
    are one batch per thread, not fused.PROBE (4 s between signals); batches of 10 ms
    still get PROBE batches a round."""
    from caps2ne_np.training.step import fused

    engine = engine_timing(width)
    assert next_size(engine, 2.0) == width  # the probe round: 1 batch, not PROBE
    engine.threads.trial = True
    assert next_size(engine, 1.0 * 1, trial=False) == width  # a trial round follows
    assert next_size(engine, 1.0 * 1, trial=True) == width
    engine.threads.trial = False
    assert next_size(engine, 1.0 * 1, trial=True) == width  # the chunk: 1 batch too
    fast = engine_timing(width, trial=True)
    assert next_size(fast, 2.0) == width  # after the first round: its time a batch
    assert next_size(fast, 0.01 * 1, trial=True) == fused.PROBE * width
    assert next_size(fast, 0.01 * fused.PROBE, trial=True) == fused.PROBE * width


# ------------------------------------------------------------ memory of the whole run


def resolved(A, **options):
    from caps2ne_np.training.options.presets import resolve

    return resolve(TrainConfig(**TINY, **options), A.shape[0], A.nnz)[0]


def test_the_memory_check_counts_the_propagation_after_training(monkeypatch):
    """With room for the training alone, a run that propagates is refused before its
    first step (it would die in the propagation with nothing written); the same run
    with --propagate none trains."""
    from caps2ne_np import errors
    from caps2ne_np.errors import InputError
    from caps2ne_np.training.options.memory import step_memory

    A = ring_of_cliques(n_cliques=50)  # 300 nodes
    plain = dict(epochs=1, spectral="none", propagate="none")
    room = step_memory(resolved(A, **plain), A.shape[0], 8) + 1000
    monkeypatch.setattr(errors, "available_memory", lambda: room)
    steps = []
    with pytest.raises(InputError, match="--propagate on .*--propagate none"):
        fit_on(A, TrainConfig(**TINY, **dict(plain, propagate="on")),
               step_callback=lambda *a: steps.append(a))  # fmt: skip
    assert steps == []
    assert len(fit_on(A, TrainConfig(**TINY, **plain)).history) == 1


def test_the_memory_check_counts_the_spectral_start(monkeypatch):
    from caps2ne_np import errors
    from caps2ne_np.errors import InputError
    from caps2ne_np.training.options.memory import step_memory

    A = ring_of_cliques(n_cliques=50)
    plain = dict(epochs=1, spectral="none", propagate="none")
    room = step_memory(resolved(A, **plain), A.shape[0], 8) + 1000
    monkeypatch.setattr(errors, "available_memory", lambda: room)
    with pytest.raises(InputError, match="spectral stages before training"):
        fit_on(A, TrainConfig(**TINY, **dict(plain, spectral="init")))


def test_a_resumed_run_frees_the_checkpoints_arrays_once_copied(tmp_path, monkeypatch):
    import weakref

    from caps2ne_np.training import checkpoint

    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1), checkpoint_dir=tmp_path)
    real, refs = checkpoint.load, []

    def load(directory):
        ckpt = real(directory)
        refs.append(weakref.ref(ckpt["arrays"]["param_O"]))
        return ckpt

    monkeypatch.setattr(checkpoint, "load", load)
    alive = []
    fit_on(A, TrainConfig(**TINY, epochs=2), resume_from=tmp_path,
           epoch_callback=lambda epoch, result: alive.append(refs[0]() is not None))  # fmt: skip
    assert alive == [False]


def test_cli_resume_of_a_run_the_rule_ended_writes_the_same_bytes(monkeypatch, tmp_path):
    """train --stop auto (the budget a cap) ended by the drift part, then --resume with
    the same options: the same embedding bytes, no epoch more."""
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    monkeypatch.setattr(budget, "STOP_DRIFT", 10.0)  # the drift part stops after epoch 2
    monkeypatch.setattr(budget, "STOP_FLOOR", 0.0)
    A = sp.triu(ring_of_cliques()).tocoo()
    graph = tmp_path / "g.txt"
    graph.write_text("".join(f"{u} {v}\n" for u, v in zip(A.row, A.col)))
    common = ["train", "--graph", str(graph), "--dim", "8", "--feat-dim", "8",
              "--walks-per-node", "2", "--num-sampled", "8", "--batch-size", "8",
              "--threads", "1", "--history"]  # fmt: skip
    first = CliRunner().invoke(
        cli, common + [str(tmp_path / "a.csv"), "--out", str(tmp_path / "a.emb"),
                       "--checkpoint-dir", str(tmp_path / "ck")],
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(
        cli, common + [str(tmp_path / "b.csv"), "--out", str(tmp_path / "b.emb"),
                       "--resume", str(tmp_path / "ck")],
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert (tmp_path / "a.emb").read_bytes() == (tmp_path / "b.emb").read_bytes()
    assert len((tmp_path / "b.csv").read_text().splitlines()) == 1 + 2  # header, 2 epochs
