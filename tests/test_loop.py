"""The epoch loop both engines share (loop.run_epochs), driven by a stub engine: the
order at the end of an epoch (callback, then checkpoint), checkpoints every n steps
with rounds of several batches, the divergence message with its routing-scale hint,
and the rate of every step."""

import math

import pytest

from caps2ne_np.training.loop import (
    LoopOptions,
    LoopState,
    TrainingDiverged,
    TrainResult,
    run_epochs,
)
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.options.rates import learning_rate
from caps2ne_np.training.schedule import Schedule

N_WALKS = 40  # batch_size 8: 5 batches per epoch


class StubEngine:
    """Records what the loop asks; every batch has loss ``loss_of(step)`` and 8 pairs."""

    def __init__(self, round_size, loss_of=lambda step: 1.0, resumed=None):
        self.round_size, self.loss_of, self.resumed = round_size, loss_of, resumed
        self.calls, self.rates = [], []

    def train(self, epoch, b, step, rates):
        self.calls.append(("train", epoch, b, step, len(rates)))
        self.rates += rates
        out = []
        for r in range(len(rates)):
            out.append((self.loss_of(step + r), 8))
            if not math.isfinite(out[-1][0]):
                break
        return out

    def finite(self):
        return True

    def save(self, directory, state, history, extra):
        self.calls.append(("save", state["epoch"], state["step"], extra))

    def params(self):
        return "params"


def config(**kw):
    return TrainConfig(**dict(dict(batch_size=8, epochs=2, lr=1e-2, lr_schedule="linear"), **kw))


def run(engine, cfg, **kw):
    return run_epochs(engine, TrainResult(params=None, config=cfg), N_WALKS, LoopOptions(**kw))


class Extra:
    def __init__(self, calls):
        self.calls, self.epochs = calls, 0

    def __call__(self, epoch, result):
        self.calls.append(("callback", epoch, result.params))
        self.epochs = epoch

    def checkpoint_arrays(self):
        return {"epochs": self.epochs}


@pytest.mark.parametrize("round_size", [1, 2, 3])
def test_epoch_callback_runs_before_the_epochs_checkpoint(round_size):
    engine = StubEngine(round_size)
    extra = Extra(engine.calls)
    result = run(
        engine, config(), epoch_callback=extra, checkpoint_dir="ck", checkpoint_extra=extra
    )
    ends = [c for c in engine.calls if c[0] != "train"]
    # the checkpoint of epoch e holds the callback's state after epoch e
    assert ends == [
        ("callback", 1, "params"),
        ("save", 1, 5, {"epochs": 1}),
        ("callback", 2, "params"),
        ("save", 2, 10, {"epochs": 2}),
    ]
    assert [h["pairs"] for h in result.history] == [40, 40]
    trained = [(c[2], c[4]) for c in engine.calls if c[0] == "train"][:3]
    assert trained[0] == (0, round_size) and trained[1][0] == round_size  # rounds of P batches


@pytest.mark.parametrize("round_size,saves", [(1, [3, 6, 9]), (2, [4, 7, 9]), (3, [3, 8])])
def test_checkpoints_when_a_round_passes_a_multiple_of_checkpoint_every(round_size, saves):
    engine = StubEngine(round_size)
    run(engine, config(), checkpoint_dir="ck", checkpoint_every=3)
    mid = [c[2] for c in engine.calls if c[0] == "save" and c[2] % 5]  # not an epoch's end
    assert mid == saves


@pytest.mark.parametrize("round_size", [1, 2])
def test_every_step_gets_the_schedules_rate(round_size):
    engine = StubEngine(round_size)
    cfg = config()
    result = run(engine, cfg)
    assert engine.rates == [learning_rate(cfg, cfg.lr, s, 10) for s in range(10)]
    assert result.history[-1]["lr"] == engine.rates[-1]
    assert result.lr == engine.rates[-1] < cfg.lr  # the schedule's, not an optimizer's
    schedule = Schedule.for_walks(cfg, N_WALKS)
    assert (schedule.n_batches, schedule.total_steps) == (5, 10)
    assert schedule.rates(0, 10) == engine.rates


def test_loop_state_reads_and_writes_the_checkpoint_dict():
    """LoopState stores the dict checkpoints always held (the skip-gram parts only with
    the term) and reads older ones that lack the parts."""
    old = {"epoch": 1, "batch": 2, "step": 7, "loss_sum": 1.5, "n_pairs": 16, "seconds": 0.25}
    state = LoopState.from_dict(old)
    assert (state.step, state.caps_sum, state.part_pairs) == (7, 0.0, 0)
    assert list(state.to_dict(parts=False).items()) == list(old.items())
    with_parts = state.to_dict(parts=True)
    assert list(with_parts)[-3:] == ["caps_sum", "sg_sum", "part_pairs"]
    assert LoopState.from_dict(with_parts) == state


def test_a_resumed_run_starts_from_the_checkpoints_state_and_rate():
    ckpt = dict(
        state={"epoch": 1, "batch": 2, "step": 7, "loss_sum": 16.0, "n_pairs": 16, "seconds": 0.0},
        history=[{"epoch": 1}],
        path="ck",
        extra={},
        adam_lr=0.123,
    )
    engine = StubEngine(1, resumed=ckpt)
    cfg = config()
    result = run(engine, cfg)
    assert [c[1:4] for c in engine.calls if c[0] == "train"] == [(1, 2, 7), (1, 3, 8), (1, 4, 9)]
    assert len(result.history) == 2 and result.lr == learning_rate(cfg, cfg.lr, 9, 10)
    assert result.history[1]["loss"] == (16.0 + 3 * 8) / (16 + 3 * 8)
    done = StubEngine(1, resumed=dict(ckpt, state=dict(ckpt["state"], epoch=2, batch=0)))
    assert run(done, cfg).lr == 0.123 and not done.calls  # nothing left: the stored rate


@pytest.mark.parametrize("round_size", [1, 3])
def test_divergence_names_the_step_and_the_routing_scale(round_size):
    nan_at_step_3 = StubEngine(round_size, loss_of=lambda s: float("nan") if s == 3 else 1.0)
    with pytest.raises(TrainingDiverged, match=r"epoch 1, step 4; lower --lr") as err:
        run(nan_at_step_3, config())
    assert "routing-scale" not in str(err.value)
    engine = StubEngine(round_size, loss_of=lambda s: float("inf") if s == 3 else 1.0)
    with pytest.raises(TrainingDiverged, match=r"step 4; lower --routing-scale \(now 20;"):
        run(engine, config(routing_scale=20.0))


def test_checkpoint_without_filled_num_sampled_resumes():
    """A checkpoint written before ``resolve`` filled num_sampled stores None: the
    same run, so resuming it is not refused; another explicit value still is."""
    from caps2ne_np.errors import InputError
    from caps2ne_np.training import checkpoint

    ckpt = {"path": "ck/latest.npz", "graph_hash": "h", "config": {"num_sampled": None, "dim": 8}}
    checkpoint._check_same_run(ckpt, {"num_sampled": 59, "dim": 8, "skipgram_weight": 0.0}, "h")
    ckpt["config"]["num_sampled"] = 32
    with pytest.raises(InputError, match="num-sampled 32"):
        checkpoint._check_same_run(ckpt, {"num_sampled": 59, "dim": 8, "skipgram_weight": 0.0}, "h")


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
