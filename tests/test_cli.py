"""The command line, as a user runs it: train on a tiny edge list, read the
word2vec file back, evaluate, resume, the graph cache; ``train --help`` through the
root cli.py shim in a real process.  Bad input (one line, exit 1 or 2, no traceback)
is tests/test_cli_train_input.py's and tests/test_cli_evaluate.py's, in-process; the
real-process checks of the exit codes, of stdout/stderr and of --debug are
tests/test_cli_run.py's."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.io.word2vec import read_word2vec

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "2", "--quiet"]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    lines = [
        "# two triangles joined by one edge, string ids",
        "alice bob",
        "bob carol",
        "carol alice",
        "carol dave 2.0",
        "dave erin",
        "erin frank",
        "frank dave",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_writes_word2vec_with_original_ids(edges, tmp_path):
    out = tmp_path / "emb.txt"
    model_out = tmp_path / "model.npz"
    npy = tmp_path / "emb.npy"
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(edges),
            "--out",
            str(out),
            "--model-out",
            str(model_out),
            "--npy",
            str(npy),
            *TINY,
        ],
    )
    assert result.exit_code == 0, result.output
    ids, vectors = read_word2vec(out)
    assert ids == ["alice", "bob", "carol", "dave", "erin", "frank"]
    assert vectors.shape == (6, 8) and np.all(np.isfinite(vectors))
    model = Caps2NE.load(model_out)
    np.testing.assert_array_equal(model.get_embedding(), vectors)
    assert model.node_ids_ == ids and model.W_.shape == (9, 8, 8)
    assert np.load(npy).shape == (6, 8)


def test_refuses_to_overwrite_without_flag(edges, tmp_path):
    out = tmp_path / "emb.txt"
    out.write_text("precious\n")
    result = CliRunner().invoke(cli, ["train", "--graph", str(edges), "--out", str(out), *TINY])
    assert result.exit_code == 1
    assert "--overwrite" in result.output
    assert out.read_text() == "precious\n"
    result = CliRunner().invoke(
        cli, ["train", "--graph", str(edges), "--out", str(out), "--overwrite", *TINY]
    )
    assert result.exit_code == 0, result.output
    assert read_word2vec(out)[1].shape == (6, 8)


def test_help_lists_every_option_with_defaults():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "train", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    for option in [
        "--graph",
        "--out",
        "--model-out",
        "--dim",
        "--walk-length",
        "--walks-per-node",
        "--epochs",
        "--batch-size",
        "--lr",
        "--num-sampled",
        "--sampler",
        "--routing-iters",
        "--routing-rule",
        "--grad-mode",
        "--targets",
        "--threads",
        "--seed",
        "--directed",
    ]:
        assert option in proc.stdout
    assert "default: 10" in proc.stdout


def test_train_on_bundled_dataset_with_eval_every_epoch_then_evaluate(tmp_path):
    out = tmp_path / "cora.emb"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "train",
            "--dataset",
            "cora-bundled",
            "--out",
            str(out),  # not -q:
            "--eval-every-epoch",
            "--history",
            str(tmp_path / "history.csv"),
            "--walks-per-node",
            "1",  # it hides
            *[a for a in TINY if a != "--quiet"],
        ],
    )  # the summary
    assert result.exit_code == 0, result.output
    assert "kept epoch" in result.output and "val acc" in result.output
    result_train = result.output
    kept = next(line for line in result.output.splitlines() if line.startswith("kept epoch"))
    ids, vectors = read_word2vec(out)
    assert len(ids) == 2708 and vectors.shape == (2708, 8)
    js = tmp_path / "res.json"
    result = runner.invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(out),
            "-e",
            str(out),
            "--dataset",
            "cora-bundled",
            "--json",
            str(js),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "epoch selected on validation" in result.output
    import json

    res = json.loads(js.read_text())
    assert len(res) == 3 and len(res[0]["test"]) == 10
    assert res[2]["protocol"] == "epoch-selection"
    # the kept-epoch line quotes the written file's score (it quoted
    # only the per-split selection's, which no written file has)
    # (with --propagate, the default, the written embeddings are the propagated ones)
    assert f"embeddings score test acc {100 * np.mean(res[0]['test']):.2f} +- " in kept
    # and every epoch was scored (and chosen) on the rows written for it, the
    # propagated ones: the kept epoch's per-epoch scores are the file's (they were
    # the o_v's before propagation, which no file holds)
    assert f"(best mean val acc {100 * np.mean(res[0]['val']):.2f}%)" in kept
    epoch = int(kept.split()[2])
    import csv

    with open(tmp_path / "history.csv", newline="") as fh:
        row = list(csv.DictReader(fh))[epoch - 1]
    assert float(row["val_acc"]) == pytest.approx(np.mean(res[0]["val"]), abs=1e-6)
    assert float(row["test_acc"]) == pytest.approx(np.mean(res[0]["test"]), abs=1e-6)
    assert "(the rows written for this epoch: the o_v propagated;" in result_train


def test_evaluate_multilabel_from_label_file(tmp_path):
    rng = np.random.default_rng(0)
    ids = [f"n{i}" for i in range(40)]
    groups = rng.integers(0, 2, size=40)
    emb = np.eye(2)[groups] + 0.01 * rng.normal(size=(40, 2))
    from caps2ne_np.io.word2vec import write_word2vec

    write_word2vec(tmp_path / "e.txt", ids, emb.astype(np.float32))
    lines = [f"{n} g{g}" for n, g in zip(ids, groups)] + [f"{ids[0]} extra", f"{ids[1]} extra"]
    (tmp_path / "labels.txt").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "e.txt"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--shuffles",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "micro-F1" in result.output
    js = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "e.txt"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--shuffles",
            "2",
            "--classifier",
            "liblinear",
            "--json",
            str(js),
        ],
    )
    assert result.exit_code == 0, result.output
    import json

    assert json.loads(js.read_text())[0]["solver"] == "liblinear"
    # two embedding files: the epoch is also chosen by cross-validation
    write_word2vec(
        tmp_path / "e2.txt", ids, (emb + 0.5 * rng.normal(size=emb.shape)).astype(np.float32)
    )
    result = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "e.txt"),
            "-e",
            str(tmp_path / "e2.txt"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--shuffles",
            "2",
            "--fractions",
            "0.5",
            "--json",
            str(js),
            "--overwrite",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "epoch selected by cross-validation" in result.output
    res = json.loads(js.read_text())
    assert len(res) == 3 and len(res[2]["epochs_micro"][0]) == 2


def test_checkpoint_then_resume_with_more_epochs(edges, tmp_path):
    runner = CliRunner()
    ck = tmp_path / "ck"
    base = [
        "train",
        "--graph",
        str(edges),
        "--dim",
        "8",
        "--feat-dim",
        "8",
        "--walks-per-node",
        "2",
        "--quiet",
    ]
    result = runner.invoke(
        cli, [*base, "--epochs", "1", "--checkpoint-dir", str(ck), "--out", str(tmp_path / "a.emb")]
    )
    assert result.exit_code == 0, result.output
    assert (ck / "checkpoint.npz").is_file()
    result = runner.invoke(
        cli, [*base, "--epochs", "2", "--resume", str(ck), "--out", str(tmp_path / "b.emb")]
    )
    assert result.exit_code == 0, result.output
    straight = runner.invoke(cli, [*base, "--epochs", "2", "--out", str(tmp_path / "c.emb")])
    assert straight.exit_code == 0, straight.output
    np.testing.assert_array_equal(
        read_word2vec(tmp_path / "b.emb")[1], read_word2vec(tmp_path / "c.emb")[1]
    )
    result = runner.invoke(
        cli,
        [
            *base,
            "--epochs",
            "2",
            "--dim",
            "4",
            "--resume",
            str(ck),
            "--out",
            str(tmp_path / "d.emb"),
        ],
    )
    assert result.exit_code == 1 and "dim" in result.output


def test_graph_cache_is_written_then_used(edges, tmp_path):
    runner = CliRunner()
    base = ["train", "--graph", str(edges), *TINY]
    result = runner.invoke(cli, [*base, "--graph-cache", "write", "--out", str(tmp_path / "a.emb")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "edges.txt.cache.npz").is_file()
    result = runner.invoke(cli, [*base, "--graph-cache", "use", "--out", str(tmp_path / "b.emb")])
    assert result.exit_code == 0, result.output
    a, b = read_word2vec(tmp_path / "a.emb"), read_word2vec(tmp_path / "b.emb")
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])


def test_result_lines_name_every_file_written(edges, tmp_path, monkeypatch):
    """'trained 1 epochs', a 'wrote x.npy' that hid x.nodes.txt, no line for --history, no
    'wrote' from infer."""
    monkeypatch.chdir(tmp_path)
    small = [a for a in TINY if a != "--quiet"]
    small[small.index("--epochs") + 1] = "1"
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", str(edges), "--out", "e.txt", "--npy", "e.npy", "--history",
         "h.csv", "--model-out", "m.npz", *small],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert any(line.startswith("trained 1 epoch in ") for line in lines), lines
    for want in ("wrote e.txt", "wrote e.npy (node ids in e.nodes.txt)",
                 "wrote h.csv (the per-epoch history)", "wrote m.npz"):  # fmt: skip
        assert want in lines, lines
    (tmp_path / "nodes.txt").write_text("alice\n")
    result = CliRunner().invoke(
        cli, ["infer", "--model", "m.npz", "--graph", str(edges), "--nodes", "nodes.txt",
              "--out", "i.emb"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[-1] == "wrote i.emb", result.stderr


@pytest.mark.filterwarnings("ignore::caps2ne_np.errors.InputWarning")  # the CLI prints them
def test_run_train_is_train_without_click(edges, tmp_path, monkeypatch):
    """The command's work is a plain function of its options: run_train on a tiny graph,
    no click in the call, writes what `train` with the same options writes."""
    import click

    from caps2ne_np.cli.train import run_train, train_params

    def no_click(*args, **kwargs):
        raise AssertionError("run_train used click")

    tiny = dict(dim=8, feat_dim=8, walks_per_node=2, epochs=2, quiet=True)
    params = train_params(
        graph=str(edges),
        out=str(tmp_path / "plain.emb"),
        npy_out=str(tmp_path / "plain.npy"),
        **tiny,
    )
    with monkeypatch.context() as m:  # no command-line machinery
        m.setattr(click, "echo", no_click)
        run_train(params)
    ids, vectors = read_word2vec(tmp_path / "plain.emb")
    assert ids == ["alice", "bob", "carol", "dave", "erin", "frank"]
    assert vectors.shape == (6, 8) and np.all(np.isfinite(vectors))
    np.testing.assert_array_equal(np.load(tmp_path / "plain.npy"), vectors)
    result = CliRunner().invoke(
        cli, ["train", "--graph", str(edges), "--out", str(tmp_path / "cli.emb"), *TINY]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cli.emb").read_bytes() == (tmp_path / "plain.emb").read_bytes()
    with pytest.raises(TypeError, match="no such option: epoch"):
        train_params(epoch=2)


@pytest.mark.parametrize("name", ["train", "infer", "evaluate"])
def test_each_command_takes_its_options_from_its_table(name):
    """options.params(table) is what the command receives when nothing is given: the
    same names, in the table's order, with the same defaults (click's conversions)."""
    from caps2ne_np.cli import options, tables

    table = {"train": tables.TRAIN, "infer": tables.INFER, "evaluate": tables.EVALUATE}[name]
    command = cli.commands[name]
    required = [p for p in command.params if getattr(p, "required", False)]
    given = {"infer": ["--model", __file__, "--nodes", __file__], "evaluate": ["-e", "x"]}
    received = command.make_context(name, given.get(name, [])).params
    defaults = options.params(table, **{p.name: received[p.name] for p in required})
    assert [p.name for p in command.params if p.name != "help"] == list(defaults)
    assert received == defaults
    for key, value in received.items():
        assert type(value) is type(defaults[key]), key


def test_verbose_says_the_threads_the_run_gets(edges, tmp_path, monkeypatch):
    # under NUMBA_NUM_THREADS=1, -v said "4 thread(s)" (the --threads asked for)
    import numba

    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    args = [a for a in TINY if a != "--quiet"] + ["--threads", "3", "-v"]
    out = str(tmp_path / "o.emb")
    result = CliRunner().invoke(cli, ["train", "--graph", str(edges), "--out", out, *args])
    assert result.exit_code == 0, result.output
    assert "; 1 thread(s) (NUMBA_NUM_THREADS caps --threads 3)" in result.output


TRAIN_SECTIONS = (
    "Input",
    "Output",
    "Scoring every epoch",
    "Model (the paper's symbols)",
    "Training",
    "Spectral start and written rows (ProNE)",
    "Checkpoints",
    "Threads and engines",
    "Messages",
)


def test_train_help_lists_its_options_in_sections():
    # one ungrouped list of ~300 lines before; every option has a section, in order
    from caps2ne_np.cli import options, tables
    from caps2ne_np.defaults import OPTIONS

    text = CliRunner().invoke(cli, ["train", "--help"], terminal_width=100).output
    heads = [line[:-1] for line in text.splitlines() if line and not line[0].isspace()]
    assert heads[1:] == [f"{title}" for title in TRAIN_SECTIONS]
    assert "Options:" not in text
    placed = options.titles(tables.TRAIN)
    assert set(placed) == {p.name for p in cli.commands["train"].params if p.name != "help"}
    assert {
        name if name != "normalize_features" else "no_normalize_features" for name in OPTIONS
    } <= set(placed)


def test_resume_help_names_every_option_a_resume_may_change():
    # the help named --epochs, --stop and --propagate where the code allows more
    from caps2ne_np.training.checkpoint import RESUMABLE_CHANGES

    text = CliRunner().invoke(cli, ["train", "--help"], terminal_width=10_000).output
    line = next(row for row in text.splitlines() if row.strip().startswith("--resume"))
    for name in RESUMABLE_CHANGES:
        assert f"--{name.replace('_', '-')}" in line, name


def test_train_help_does_not_contradict_the_defaults():
    from caps2ne_np.defaults import OPTIONS, ROW_NORM

    propagate = " ".join(OPTIONS["propagate"].help.split())
    assert ROW_NORM != 1 and "(unit rows)" not in propagate and "--row-norm" in propagate
    assert "exactly this many, or at most with a --stop rule" in OPTIONS["epochs"].help
