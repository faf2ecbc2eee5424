"""``train --resume`` and ``--checkpoint-dir`` on the command line: what a resumed run
trains, and the files and folders it may and may not replace."""

import csv

import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.training import budget
from toy_graphs import ring_of_cliques

TINY = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--num-sampled", "8",
        "--batch-size", "8", "--threads", "1"]  # fmt: skip


@pytest.fixture
def graph(tmp_path):
    A = sp.triu(ring_of_cliques(drop_zeros=True)).tocoo()
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in zip(A.row, A.col)))
    return path


def train(graph, *args):
    return CliRunner().invoke(cli, ["train", "--graph", str(graph), *TINY, *args])


def epochs_in(history):
    with open(history) as fh:
        return [int(row["epoch"]) for row in csv.DictReader(fh)]


def test_a_resume_without_epochs_or_stop_trains_no_more_than_the_checkpointed_run(graph, tmp_path):
    """--epochs 2 --propagate none, resumed with only --propagate on: the same two
    epochs, propagated; not the preset's budget under --stop auto."""
    ck, out = tmp_path / "ck", tmp_path / "b.emb"
    first = train(graph, "--epochs", "2", "--propagate", "none", "--checkpoint-dir", ck,
                  "--out", tmp_path / "a.emb")  # fmt: skip
    assert first.exit_code == 0, first.output
    again = train(graph, "--resume", ck, "--propagate", "on", "--out", out,
                  "--history", tmp_path / "h.csv")  # fmt: skip
    assert again.exit_code == 0, again.output
    assert epochs_in(tmp_path / "h.csv") == [1, 2]
    assert "resuming with --epochs 2 and --stop none of the checkpointed run" in again.output


# ------------------------------------------------------------ what a resume may replace


@pytest.fixture
def two_runs(graph, tmp_path):
    """Two finished 1-epoch runs, checkpointed in ck_a and ck_b (other seeds)."""
    for name, seed in (("a", "0"), ("b", "1")):
        done = train(graph, "--epochs", "1", "--seed", seed, "--checkpoint-dir",
                     tmp_path / f"ck_{name}", "--out", tmp_path / f"{name}.emb")  # fmt: skip
        assert done.exit_code == 0, done.output
    return tmp_path / "ck_a", tmp_path / "ck_b"


def test_a_resume_into_another_runs_checkpoint_folder_is_refused(graph, tmp_path, two_runs):
    ck_a, ck_b = two_runs
    before = (ck_b / "checkpoint.npz").read_bytes()
    again = train(graph, "--epochs", "2", "--resume", ck_a, "--checkpoint-dir", ck_b,
                  "--out", tmp_path / "c.emb")  # fmt: skip
    assert again.exit_code == 1
    assert (
        f"{ck_b / 'checkpoint.npz'}: exists, the checkpoint of another run, which --resume "
        f"{ck_a} would replace with its own; leave out --checkpoint-dir"
    ) in again.output
    assert (ck_b / "checkpoint.npz").read_bytes() == before
    assert not (tmp_path / "c.emb").exists()
    overwritten = train(graph, "--epochs", "2", "--resume", ck_a, "--checkpoint-dir", ck_b,
                        "--out", tmp_path / "c.emb", "--overwrite")  # fmt: skip
    assert overwritten.exit_code == 0, overwritten.output
    assert (ck_b / "checkpoint.npz").read_bytes() != before


def test_a_resume_may_name_its_own_folder_as_checkpoint_dir(graph, tmp_path, two_runs):
    ck_a, _ = two_runs
    again = train(graph, "--epochs", "2", "--resume", ck_a, "--checkpoint-dir", ck_a / ".",
                  "--out", tmp_path / "c.emb")  # fmt: skip
    assert again.exit_code == 0, again.output


def test_a_resume_does_not_replace_a_history_file_of_another_run(graph, tmp_path, two_runs):
    """--history on resume rewrites the resumed run's own history file, but a file that
    is not it (another run's history, or any other file) only with --overwrite."""
    ck_a, _ = two_runs
    own, other, notes = tmp_path / "own.csv", tmp_path / "other.csv", tmp_path / "notes.txt"
    for history, ck, seed in ((own, ck_a, "0"), (other, two_runs[1], "1")):  # epoch 1
        done = train(graph, "--epochs", "1", "--seed", seed, "--resume", ck, "--history",
                     history, "--out", tmp_path / f"{history.stem}.emb")  # fmt: skip
        assert done.exit_code == 0, done.output
    notes.write_text("my notes\n")
    for path in (other, notes):
        before = path.read_bytes()
        again = train(graph, "--epochs", "2", "--resume", ck_a, "--history", path,
                      "--out", tmp_path / "c.emb")  # fmt: skip
        assert again.exit_code == 1
        assert f"{path}: exists; pass --overwrite" in again.output
        assert path.read_bytes() == before
    again = train(graph, "--epochs", "2", "--resume", ck_a, "--history", own,
                  "--out", tmp_path / "c.emb")  # fmt: skip
    assert again.exit_code == 0, again.output
    assert epochs_in(own) == [1, 2]


def test_an_interrupted_run_names_the_history_it_wrote(graph, tmp_path, monkeypatch):
    """Interrupted at epoch 1's checkpoint, after --history was written: the message
    names that file, not 'no output was written'."""
    from caps2ne_np.training import checkpoint

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "save", interrupted)
    history = tmp_path / "h.csv"
    result = train(graph, "--epochs", "2", "--history", history, "--checkpoint-dir",
                   tmp_path / "ck", "--out", tmp_path / "a.emb")  # fmt: skip
    assert result.exit_code == 130
    assert f"interrupted; wrote only {history}" in result.output
    assert epochs_in(history) == [1]


# ------------------------------------------------------------ empty folder names


@pytest.mark.parametrize(
    "args,option",
    [
        (["--checkpoint-dir", ""], "--checkpoint-dir"),
        (["--checkpoint-dir", "", "--checkpoint-every", "5"], "--checkpoint-dir"),
        (["--resume", ""], "--resume"),
    ],  # fmt: skip
)
def test_an_empty_checkpoint_folder_name_is_a_usage_error(graph, tmp_path, args, option):
    """'' would turn checkpointing off silently (or resume from the current folder)."""
    result = train(graph, "--epochs", "1", "--out", tmp_path / "a.emb", *args)
    assert result.exit_code == 2
    assert f"{option}: an empty path; give a folder" in result.output
    assert not (tmp_path / "a.emb").exists()


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
