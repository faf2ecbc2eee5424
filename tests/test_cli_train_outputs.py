"""What a run says about its outputs: ``--out -`` with standard output closed is refused before
training, in one line; ``--eval-every-epoch`` says in the run's last line which epoch it
wrote. The word2vec binary output equals the text output and loads in gensim; the history
CSV has a row per epoch with its rate and accuracies."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.io.word2vec import read_word2vec
from clirun import CLIQUE_LABELS, CLIQUE_SPLITS, CLIQUES, EVAL, put

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dim", "4", "--feat-dim", "4", "--walks-per-node", "1", "--num-sampled", "2"]


def test_closed_stdout_is_refused_before_training(tmp_path):
    """``train --out - >&-``: before, the run trained to the end and then failed with
    'internal error (AttributeError ...)'."""
    put(tmp_path, "g.txt", CLIQUES)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "train", "--graph", "g.txt", "--out", "-", *TINY],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),  # as the shell's '>&-'
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "error: --out -: standard output is closed; give --out a file name, or run the "
        "command with its output open (e.g. '> out.emb')"
    ], proc.stderr
    assert "epoch" not in proc.stderr  # refused before training


def test_eval_every_epoch_says_which_epoch_it_wrote(tmp_path):
    """Seed 2 at this rate keeps epoch 2 of 6 (tests/test_cli_train_resume_eval.py): the last
    line says so."""
    put(tmp_path, "g.txt", CLIQUES)
    put(tmp_path, "l.txt", CLIQUE_LABELS)
    put(tmp_path, "s.json", CLIQUE_SPLITS)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "train", "--graph", "g.txt", "--out", "o.emb"]
        + EVAL
        + ["--epochs", "6"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("wrote epoch 2 of 6: best validation accuracy ("), proc.stderr


SMALL = [
    "--dim",
    "8",
    "--feat-dim",
    "8",
    "--walks-per-node",
    "2",
    "--epochs",
    "2",
    "--num-sampled",
    "4",
    "--quiet",
]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text(
        "alice bob\nbob carol\ncarol alice\ncarol dave\ndave erin\nerin frank\nfrank dave\n"
    )
    return path


def test_binary_output_equals_the_text_output_and_loads_in_gensim(edges, tmp_path):
    runner = CliRunner()
    for name, extra in (("t.emb", []), ("b.bin", ["--binary"])):
        r = runner.invoke(
            cli, ["train", "--graph", str(edges), "--out", str(tmp_path / name), *SMALL, *extra]
        )
        assert r.exit_code == 0, r.output
    text_ids, text = read_word2vec(tmp_path / "t.emb")
    bin_ids, binary = read_word2vec(tmp_path / "b.bin")
    assert bin_ids == text_ids and (tmp_path / "b.bin").read_bytes().startswith(b"6 8\nalice ")
    np.testing.assert_array_equal(binary, text)
    gensim = pytest.importorskip("gensim")
    kv = gensim.models.KeyedVectors.load_word2vec_format(str(tmp_path / "b.bin"), binary=True)
    np.testing.assert_array_equal(kv["dave"], text[text_ids.index("dave")])


def test_history_csv_has_a_row_per_epoch_with_rate_and_accuracies(tmp_path):
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--dataset",
            "cora-bundled",
            "--out",
            str(tmp_path / "c.emb"),
            "--history",
            str(tmp_path / "run.csv"),
            "--eval-every-epoch",
            "--dim",
            "8",
            "--feat-dim",
            "8",
            "--walks-per-node",
            "1",
            "--epochs",
            "2",
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    assert list(rows[0]) == [
        "epoch",
        "loss",
        "lr",
        "seconds",
        "pairs",
        "pairs_per_s",
        "val_acc",
        "test_acc",
    ]
    for row in rows:
        assert float(row["loss"]) > 0 and float(row["pairs_per_s"]) > 0 and int(row["pairs"]) > 0
        assert 0 < float(row["val_acc"]) <= 1 and 0 < float(row["test_acc"]) <= 1
