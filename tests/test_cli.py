"""The command line, as a user runs it: train on a tiny edge list, read the
word2vec file back; bad input gives exit code != 0 and one line, no traceback."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np._cli import cli
from caps2ne_np.io import read_word2vec
from caps2ne_np.model import Caps2NE

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "2", "--quiet"]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    lines = ["# two triangles joined by one edge, string ids", "alice bob", "bob carol",
             "carol alice", "carol dave 2.0", "dave erin", "erin frank", "frank dave"]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_writes_word2vec_with_original_ids(edges, tmp_path):
    out = tmp_path / "emb.txt"
    model_out = tmp_path / "model.npz"
    npy = tmp_path / "emb.npy"
    result = CliRunner().invoke(cli, ["train", "--graph", str(edges), "--out", str(out),
                                      "--model-out", str(model_out), "--npy", str(npy), *TINY])
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
    result = CliRunner().invoke(cli, ["train", "--graph", str(edges), "--out", str(out),
                                      "--overwrite", *TINY])
    assert result.exit_code == 0, result.output
    assert read_word2vec(out)[1].shape == (6, 8)


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("content,needle", [
    (None, "no such file"),
    ("a b\nc\n", ":2:"),
    ("a b 1\nb c -3\n", ":2:"),
    ("a b x\n", ":1:"),
    ("", "no edges"),
    ("a a\n", "self loop"),
])
def test_bad_graph_gives_one_line_error(tmp_path, content, needle):
    path = tmp_path / "g.txt"
    if content is not None:
        path.write_text(content)
    proc = run_cli("train", "--graph", str(path), *TINY, cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 or all(line.startswith("warning:") for line in lines[:-1])
    assert lines[-1].startswith("error:") and needle in lines[-1].lower(), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("g.emb"))


def test_out_of_range_option_is_a_usage_error(edges, tmp_path):
    proc = run_cli("train", "--graph", str(edges), "--walk-length", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "walk-length" in proc.stderr
    proc = run_cli("train", "--graph", str(edges), "--num-sampled", "6", *TINY, cwd=tmp_path)
    assert proc.returncode == 1 and "num-sampled" in proc.stderr and "Traceback" not in proc.stderr


def test_help_lists_every_option_with_defaults():
    proc = subprocess.run([sys.executable, str(ROOT / "cli.py"), "train", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for option in ["--graph", "--out", "--model-out", "--dim", "--walk-length", "--walks-per-node",
                   "--epochs", "--batch-size", "--lr", "--num-sampled", "--sampler",
                   "--routing-iters", "--routing-rule", "--grad-mode", "--targets", "--threads",
                   "--seed", "--directed"]:
        assert option in proc.stdout
    assert "default: 10" in proc.stdout
