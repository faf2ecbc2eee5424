"""Progress a person can read: compile time kept out of pairs/s, log lines written
above the bar (not glued onto it), no redraw storm into a log file, -q prints only
errors, -v more."""

import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numba
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.cli.run import BarSafeHandler as _BarSafeHandler
from caps2ne_np.cli.run import reset_logging as _reset_logging
from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.training import budget, progress
from caps2ne_np.training import loop as loop_mod
from caps2ne_np.training import train as train_mod
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import fit

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--num-sampled", "3"]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("a b\nb c\nc a\nc d\nd e\ne c\ne e\n")  # one self loop: a warning
    return path


def test_quiet_prints_only_errors(edges, tmp_path):
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(edges),
            "--out",
            str(tmp_path / "e.emb"),
            "--epochs",
            "2",
            *SMALL,
            "-q",
        ],
    )
    assert r.exit_code == 0 and r.output == ""  # no warning, no summary lines
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(edges),
            "--out",
            str(tmp_path / "e.emb"),
            "--epochs",
            "2",
            *SMALL,
            "-q",
        ],
    )
    assert r.exit_code == 1 and r.output.startswith("error: ") and r.output.count("\n") == 1


def test_default_and_verbose_lines(edges, tmp_path):
    r = CliRunner().invoke(
        cli,
        ["train", "--graph", str(edges), "--out", str(tmp_path / "e.emb"), "--epochs", "2", *SMALL],
    )
    assert r.exit_code == 0, r.output
    for text in ("warning: ", "graph: 5 nodes", "epoch 2/2: loss", "trained 2 epochs", "wrote "):
        assert text in r.output
    assert "resolved configuration" not in r.output
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(edges),
            "--out",
            str(tmp_path / "e.emb"),
            "--epochs",
            "2",
            *SMALL,
            "-v",
            "--overwrite",
        ],
    )
    assert r.exit_code == 0 and "resolved configuration: {'dim': 8" in r.output


def test_log_lines_are_not_glued_to_the_bar(edges, tmp_path):
    """Through a pipe (as into a log file) every log line starts a line of its own."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "caps2ne_np",
            "train",
            "--graph",
            str(edges),
            "--out",
            str(tmp_path / "e.emb"),
            "--epochs",
            "3",
            *SMALL,
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "batch" in proc.stderr  # the bar was drawn
    for text in ("epoch 1/3: loss", "epoch 3/3: loss", "trained 3 epochs", "wrote "):
        assert re.search(r"(^|\n|\r)" + re.escape(text), proc.stderr), proc.stderr


class Pipe:
    """A stderr that is not a terminal (a log file, a pipe), keeping what is written."""

    def __init__(self):
        self.parts = []

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass

    def isatty(self):
        return False


def test_no_bar_and_few_plain_lines_when_stderr_is_not_a_terminal(monkeypatch):
    pipe = Pipe()
    monkeypatch.setattr(sys, "stderr", pipe)
    bar = loop_mod._progress(True, 2000)
    for _ in range(2000):
        bar.update(1)
        time.sleep(0.0005)  # > 1 s in all: 10 redraws at tqdm's 0.1 s
    bar.close()
    assert "".join(pipe.parts) == ""  # under 30 s: the epoch lines say it all


def test_plain_progress_lines_carry_whole_fields_and_one_loss_format(monkeypatch):
    pipe = Pipe()
    monkeypatch.setattr(sys, "stderr", pipe)
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    bar = loop_mod._progress(True, 678, 300)
    bar.set_postfix(epoch="1/2", lr="5.2e-04", loss=progress.loss_text(5.76621), pairs_s="140,833")
    bar.update(39)
    bar.close()
    assert "".join(pipe.parts) == (
        "progress: 339/678 batches (50%), epoch 1/2, loss 5.7662, pairs/s 140,833, lr 5.2e-04\n"
    )


class Terminal(Pipe):
    def isatty(self):
        return True


class ZeroColumns(Terminal):
    def fileno(self):
        return 2


def test_a_terminal_of_zero_columns_gets_plain_lines(monkeypatch):
    # `script` without a size makes a terminal of 0 columns, where tqdm drew nothing
    term = ZeroColumns()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=1: os.terminal_size((0, 0)))
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)
    bar = loop_mod._progress(True, 678, 300)
    bar.set_postfix(epoch="1/2", loss=progress.loss_text(5.76621))
    bar.update(39)
    bar.close()
    assert "".join(term.parts) == "progress: 339/678 batches (50%), epoch 1/2, loss 5.7662\n"


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_bar_fits_the_terminal_and_keeps_whole_fields(monkeypatch, columns):
    """At 80 columns tqdm's default drew a one-character bar and cut the postfix."""
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("COLUMNS", str(columns))
    bar = loop_mod._progress(True, 67800)
    fields = dict(epoch="12/50", lr="0.00052", loss="5.7662", pairs_s="140,833")
    bar.set_postfix(refresh=True, **fields)
    bar.update(33900)
    bar._bar.refresh()
    drawn = [line for line in "".join(term.parts).split("\r") if "33900/67800" in line]
    assert drawn
    for line in drawn:
        assert len(line) <= columns - 1, line
        cells = re.search(r"\|(.*)\|", line).group(1)
        assert len(cells) >= progress.MIN_BAR, line
        postfix = line[line.index("<") :]
        assert postfix.endswith("]"), line
        whole = {f"{progress.LABELS.get(k, k)} {v}" for k, v in fields.items()}
        assert set(postfix[:-1].split(", ")[1:]) <= whole, line  # no field cut
        assert "epoch 12/50" in postfix and ("loss 5.7662" in postfix or columns < 80)
    if columns >= 120:
        assert "pairs/s 140,833" in drawn[-1] and "lr 0.00052" in drawn[-1]
    bar.close()


def test_one_loss_is_printed_one_way(edges, tmp_path):
    """The epoch line and the run's last line show the same loss with the same digits."""
    r = CliRunner().invoke(
        cli,
        ["train", "--graph", str(edges), "--out", str(tmp_path / "e.emb"), "--epochs", "1", *SMALL],
    )
    assert r.exit_code == 0, r.output
    epoch = re.search(r"epoch 1/1: loss (\S+),", r.output).group(1)
    last = re.search(r"final loss (\S+),", r.output).group(1)
    assert epoch == last and len(epoch.split(".")[1]) == progress.LOSS_DIGITS


def test_training_run_into_a_log_file_prints_plain_lines(monkeypatch):
    """A whole run (hundreds of steps, the postfix updated every 20) into a non-terminal:
    no carriage return, no bar drawn at the end (once it was there twice)."""
    g = read_edgelist(ROOT / "caps2ne_np" / "data" / "cora.edgelist")
    cfg = TrainConfig(dim=8, feat_dim=8, walks_per_node=2, epochs=2, batch_size=16, threads=1)
    fit(g.indptr, g.indices, g.weights, cfg)  # warm
    _reset_logging()  # only the bar writes here
    pipe = Pipe()
    monkeypatch.setattr(sys, "stderr", pipe)
    steps = 2 * -(-2 * g.n_nodes // 16)
    fit(g.indptr, g.indices, g.weights, cfg, progress=True)
    text = "".join(pipe.parts)
    assert "\r" not in text and text == "", text  # under 30 s: no progress line
    monkeypatch.setattr(progress, "LOG_INTERVAL", 0.0)  # a line per round (a chunk of steps)
    pipe.parts.clear()
    fit(g.indptr, g.indices, g.weights, cfg, progress=True)
    lines = "".join(pipe.parts).split("\n")
    assert lines[-1] == "" and all(line.startswith("progress: ") for line in lines[:-1])
    done = [int(line.split()[1].split("/")[0]) for line in lines[:-1]]
    assert "\r" not in "".join(pipe.parts) and len(done) > 10
    assert done == sorted(set(done)) and done[-1] == steps
    assert lines[-2].startswith(f"progress: {steps}/{steps} batches (100%), epoch 2/2, loss ")


def test_first_step_is_kept_out_of_pairs_per_second(monkeypatch):
    g = read_edgelist(ROOT / "caps2ne_np" / "data" / "cora.edgelist")
    cfg = TrainConfig(dim=8, feat_dim=8, walks_per_node=1, epochs=2, batch_size=64, threads=1)
    fit(g.indptr, g.indices, g.weights, cfg)  # warm
    original = train_mod.fused.FusedStep.train
    calls = []

    def slow_first(self, *args, **kwargs):
        if not calls:
            time.sleep(2.0)  # a cold Numba cache
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(train_mod.fused.FusedStep, "train", slow_first)
    h = fit(g.indptr, g.indices, g.weights, cfg).history
    assert h[0]["seconds"] > 2.0  # wall time is kept
    # Without the first step (>= 2 s, 1 of 43 batches) the rate is at least
    # (P - P/43) / (S - 2); with it, P / S: far lower, however loaded the machine.
    assert h[0]["pairs_per_s"] >= 0.95 * h[0]["pairs"] / (h[0]["seconds"] - 2.0)


def test_compiling_message_when_the_numba_cache_is_cold(tmp_path):
    code = "from caps2ne_np.training import train; print(train._kernels_cold(True))"
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_CACHE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.stdout.strip() == "True", proc.stderr  # an empty cache folder
    g = read_edgelist(ROOT / "caps2ne_np" / "data" / "cora.edgelist")
    fit(
        g.indptr,
        g.indices,
        g.weights,
        TrainConfig(dim=8, feat_dim=8, walks_per_node=1, epochs=1, threads=1),
    )
    n = numba.get_num_threads()
    numba.set_num_threads(1)  # the run's threads: its chunk's serial version only
    try:
        assert train_mod._kernels_cold(True) is False  # compiled in this process
    finally:
        numba.set_num_threads(n)


def test_compiling_message_is_logged_before_the_first_batch(monkeypatch, tmp_path):
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("caps2ne_np")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    monkeypatch.setattr(train_mod, "_kernels_cold", lambda *args: True)
    monkeypatch.setattr(loop_mod, "_progress", lambda *a, **k: None)
    try:
        g = read_edgelist(ROOT / "caps2ne_np" / "data" / "cora.edgelist")
        fit(
            g.indptr,
            g.indices,
            g.weights,
            TrainConfig(dim=8, feat_dim=8, walks_per_node=1, epochs=1, threads=1),
            progress=True,
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    i = next(k for k, m in enumerate(records) if m.startswith("compiling kernels (first run only"))
    assert i < next(k for k, m in enumerate(records) if m.startswith("epoch 1/1"))


def test_quiet_does_not_leak_into_the_next_command(edges, tmp_path):
    """click's runner (and a notebook) runs several commands in one process."""
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(edges),
            "--out",
            str(tmp_path / "e.emb"),
            "--epochs",
            "1",
            *SMALL,
            "-q",
        ],
    )
    assert r.exit_code == 0 and logging.getLogger("caps2ne_np").level == logging.ERROR
    (tmp_path / "labels.txt").write_text("a x\nb x\nc y\nd y\ne y\n")
    r = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "e.emb"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--fractions",
            "0.5",
        ],
    )
    logger = logging.getLogger("caps2ne_np")
    assert logger.level == logging.NOTSET and logger.propagate
    assert not [h for h in logger.handlers if isinstance(h, _BarSafeHandler)]


def test_time_remaining_ignores_a_compile_stall(monkeypatch):
    """6/13540 [00:18<17:16:53] -- a kernel compiling after the first
    step stalled one update for 18 s, and tqdm's moving average made that the rate."""
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    bar = loop_mod._progress(True, 13540)
    now = [0.0]
    bar.eta.clock = lambda: now[0]
    bar.eta.last = 0.0
    for dt in (0.1, 0.1, 18.0, 0.1, 0.1, 0.1):  # a stall in the third update
        now[0] += dt
        bar.update(1)
    assert bar.eta.text() == "22:33"  # 13534 batches at 10 per second
    bar._bar.refresh()
    assert "6/13540" in term.parts[-1] and "<22:33" in term.parts[-1], term.parts[-1]
    bar.close()
    fresh = progress.Eta(100, 0, clock=lambda: 0.0)
    assert fresh.text() == "?"  # no estimate from fewer than 3 updates


@pytest.mark.parametrize("tiny", [False, True])
def test_spectral_stages_say_they_start_and_how_far_along(monkeypatch, tmp_path, tiny):
    """The spectral start, the stop rule's structure measure and the propagation each log
    a line before they start ('<stage>: ... ...'), then, past PROGRESS_AFTER seconds, at
    most one line every PROGRESS_EVERY saying how far along they are: none on Cora in
    the defaults' few seconds, one per step when both are 0."""
    from caps2ne_np.spectral import prone as spectral

    if tiny:
        monkeypatch.setattr(spectral, "PROGRESS_AFTER", 0.0)
        monkeypatch.setattr(spectral, "PROGRESS_EVERY", 0.0)
    graph = ROOT / "caps2ne_np" / "data" / "cora.edgelist"
    r = CliRunner().invoke(
        cli, ["train", "--graph", str(graph), "--out", str(tmp_path / "e.emb"), *SMALL]
    )
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    for stage in ("spectral start", "stop rule", "propagation"):
        mine = [i for i, line in enumerate(lines) if line.startswith(f"{stage}: ")]
        assert mine and lines[mine[0]].endswith(" ..."), (stage, r.output)
        steps = [lines[i] for i in mine if re.search(r" \(\d+ s\)$", lines[i])]
        assert len(steps) >= (5 if tiny else 0) and (tiny or not steps), (stage, steps)
        assert all(i > mine[0] for i in mine[1:])
    if tiny:
        assert "spectral start: randomized SVD, power iteration 5 of 5 (0 s)" in lines
        assert "spectral start: filter, Chebyshev term 10 of 10 (0 s)" in lines
        assert "propagation: SVD of the filtered o_v (0 s)" in lines


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
