"""``caps2ne infer`` as a user runs it: a request served beside an isolated node of the graph.
A checkpoint given as the model says so."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputWarning
from caps2ne_np.evaluation.evaluate import inductive_split
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.io.npy import save_npz
from caps2ne_np.io.word2vec import read_word2vec
from caps2ne_np.training import checkpoint
from clirun import (
    GRAPH,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
)
from test_infer import fit_quiet, planted_partition


def _with_extra_parts(full):
    """``full`` plus an isolated node 'iso' and a component 'a' - 'b' that no model has
    seen, appended after the other nodes (their indices unchanged)."""
    extra = sp.csr_matrix(np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]], dtype=np.float64))
    adj = sp.block_diag([full.to_scipy(), extra]).tocsr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return from_scipy(adj, full.node_ids + ["iso", "a", "b"])


@pytest.fixture(scope="module")
def full():
    return planted_partition()


@pytest.fixture(scope="module")
def model(full):
    """A featureless model trained with --propagate on, without the node 'new'."""
    sub, _ = inductive_split(full, ["new"])
    return fit_quiet(sub, epochs=2, propagate="on")


def _edge_list(graph, path):
    adj = graph.to_scipy().tocoo()
    ids = graph.node_ids
    lines = [f"{ids[u]} {ids[v]}\n" for u, v in zip(adj.row, adj.col) if u < v]
    lines += [f"{nid} {nid}\n" for nid in ids if nid == "iso"]  # kept as a node, no edge
    path.write_text("".join(lines))
    return path


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_infer_serves_a_request_beside_an_isolated_node(full, model, tmp_path):
    model.save(tmp_path / "m.npz")
    graph = _edge_list(_with_extra_parts(full), tmp_path / "g.txt")
    (tmp_path / "nodes.txt").write_text("new\nn3\n")
    r = _invoke(
        "infer", "--model", tmp_path / "m.npz", "--graph", graph,
        "--nodes", tmp_path / "nodes.txt", "--out", tmp_path / "e.emb",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    ids, E = read_word2vec(tmp_path / "e.emb")
    assert ids == ["new", "n3"] and np.all(np.linalg.norm(E, axis=1) > 0.5)


def path(n):
    return np.eye(n, k=1) + np.eye(n, k=-1)


def test_a_checkpoint_given_as_a_model_says_so(run, tmp_path):
    save_npz(tmp_path / "checkpoint.npz", overwrite=True, format=np.asarray(checkpoint.FORMAT))
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "nodes.txt", "a\n")
    result = run("infer", "--model", "checkpoint.npz", "--graph", "g.txt", "--nodes", "nodes.txt")
    assert_error(result, "checkpoint.npz: a training checkpoint, not a model file", ["--resume"])
