"""The ``update`` command (caps2ne_np/cli/update.py): a model file and a changed graph
in, the new graph's embeddings and model file out; the inputs that do not match the
model are one line and exit code 1, never a traceback."""

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.io.modelfile import read_model
from caps2ne_np.io.word2vec import read_word2vec

TINY = [
    "--dim", "4", "--feat-dim", "4", "--walk-length", "4", "--walks-per-node", "2",
    "--epochs", "1", "--batch-size", "8", "--num-sampled", "6", "--threads", "1",
    "--spectral", "none", "--propagate", "on", "--stop", "none",
]  # fmt: skip


def ring(nodes):
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


OLD = ring(list(range(12))) + [(0, 6), (3, 9)]
NEW = OLD + [(12, 0), (12, 4), (13, 12), (13, 8), (2, 7)]  # two new nodes, a new edge


def write_edges(path, edges):
    path.write_text("".join(f"{u} {v}\n" for u, v in edges))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(old graph, new graph, model file) in a folder of their own."""
    root = tmp_path_factory.mktemp("update")
    old, new = write_edges(root / "old.txt", OLD), write_edges(root / "new.txt", NEW)
    model = root / "old.npz"
    args = ["train", "--graph", str(old), "--out", str(root / "old.emb"), "--model-out", str(model)]
    result = CliRunner().invoke(cli, [*args, *TINY, "-q"])
    assert result.exit_code == 0, result.output
    return old, new, model


def update(trained, tmp_path, *args):
    old, new, model = trained
    base = ["update", "--model", str(model), "--old-graph", str(old), "--graph", str(new)]
    return CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "new.emb"), "-q", *args])


def test_update_writes_every_node_of_the_new_graph_and_a_model(trained, tmp_path):
    out_model = tmp_path / "new.npz"
    result = update(trained, tmp_path, "--model-out", str(out_model))
    assert result.exit_code == 0, result.output
    ids, vectors = read_word2vec(tmp_path / "new.emb")
    assert sorted(ids, key=int) == [str(i) for i in range(14)]
    assert np.isfinite(vectors).all() and vectors.any(axis=1).all()
    model = read_model(out_model)
    assert model["O"].shape == (14, 4) and model["propagation"] is not None
    old = read_model(trained[2])
    assert [h.get("update", False) for h in model["history"]] == [False] * len(old["history"]) + [
        True
    ]  # the model's epochs, then the update's


def test_an_update_can_be_updated_again(trained, tmp_path):
    old, new, _ = trained
    first = tmp_path / "first.npz"
    assert update(trained, tmp_path, "--model-out", str(first)).exit_code == 0
    newer = write_edges(tmp_path / "newer.txt", NEW + [(14, 13), (14, 1)])
    args = ["update", "--model", str(first), "--old-graph", str(new), "--graph", str(newer)]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "newer.emb"), "-q"])
    assert result.exit_code == 0, result.output
    assert len(read_word2vec(tmp_path / "newer.emb")[0]) == 15


def test_an_old_graph_that_is_not_the_models_is_one_line(trained, tmp_path):
    old, new, model = trained
    args = ["update", "--model", str(model), "--old-graph", str(new), "--graph", str(new)]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "x.emb")])
    assert result.exit_code == 1
    assert "error: the old graph has 14 nodes and the model 12" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.emb").exists()


def test_features_for_a_featureless_model_are_one_line(trained, tmp_path):
    feats = tmp_path / "f.npy"
    np.save(feats, np.ones((14, 4), np.float32))
    result = update(trained, tmp_path, "--features", str(feats))
    assert result.exit_code == 1
    assert "without fixed features" in result.output and "Traceback" not in result.output


def test_a_resume_with_other_hops_is_one_line(trained, tmp_path):
    ckpt = tmp_path / "ckpt"
    assert update(trained, tmp_path, "--checkpoint-dir", str(ckpt)).exit_code == 0
    result = update(trained, tmp_path, "--resume", str(ckpt), "--hops", "3", "--overwrite")
    assert result.exit_code == 1
    assert "not a checkpoint of this update" in result.output


def test_a_checkpoint_folder_of_another_run_is_refused_without_overwrite(trained, tmp_path):
    ckpt = tmp_path / "ckpt"
    assert update(trained, tmp_path, "--checkpoint-dir", str(ckpt)).exit_code == 0
    other = tmp_path / "other"
    other.mkdir()
    result = update(trained, other, "--checkpoint-dir", str(ckpt))  # a new update there
    assert result.exit_code == 1 and "--overwrite" in result.output


def test_an_existing_output_is_not_replaced_without_overwrite(trained, tmp_path):
    (tmp_path / "new.emb").write_text("keep\n")
    result = update(trained, tmp_path)
    assert result.exit_code == 1
    assert (tmp_path / "new.emb").read_text() == "keep\n"
