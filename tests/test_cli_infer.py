"""``caps2ne infer`` as a user runs it: a request served beside an isolated node of the graph.
A checkpoint given as the model says so. --out - writes to stdout; a model with NaN or huge
values is refused, the output is checked before it is written, and absurd --samples give the
memory figure."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputWarning
from caps2ne_np.evaluation.inductive import inductive_split
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.io.npy import save_npz
from caps2ne_np.io.word2vec import read_word2vec
from caps2ne_np.training import checkpoint
from clirun import (
    GRAPH,
    _damaged_model,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
    tiny_model,  # noqa: F401 (fixtures)
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


def test_infer_out_dash_writes_to_stdout(run, tmp_path, tiny_model):
    result = run(
        "infer",
        "--model",
        tiny_model / "m.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "-",
        "--aggregate",
        "mean",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "2 4"


def _nan_first(a):
    a = a.copy()
    a.flat[0] = np.nan
    return a


@pytest.mark.parametrize(
    "changes,what",
    [
        ({"W": _nan_first}, "W holds 1 NaN or infinite values"),
        ({"O": lambda a: a + 1e30}, "O holds values up to 1e+30"),
        ({"X": lambda a: np.full_like(a, np.inf)}, "X holds 16 NaN or infinite values"),
    ],
    ids=["nan-W", "huge-O", "inf-X"],
)
def test_infer_refuses_a_model_with_nan_or_huge_values(run, tmp_path, tiny_model, changes, what):
    _damaged_model(tiny_model / "m.npz", tmp_path / "bad.npz", **changes)
    result = run(
        "infer",
        "--model",
        "bad.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
    )
    assert_error(result, "bad.npz: damaged model file", what)
    assert not (tmp_path / "n.emb").exists()


def test_infer_checks_its_output_before_writing(run, tmp_path, tiny_model, monkeypatch):
    from caps2ne_np.inference import infer

    real = infer.infer_embeddings

    def nan_out(*args, **kwargs):
        ids, E = real(*args, **kwargs)
        E[1] = np.nan
        return ids, E

    monkeypatch.setattr(infer, "infer_embeddings", nan_out)
    result = run(
        "infer",
        "--model",
        tiny_model / "m.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
        "--aggregate",
        "mean",
    )
    assert_error(result, f"{tiny_model / 'm.npz'}: 1 of 2 embeddings came out NaN or infinite")
    assert not (tmp_path / "n.emb").exists()


def test_infer_absurd_samples_is_refused_with_the_memory_figure(run, tmp_path, tiny_model):
    result = run(
        "infer",
        "--model",
        tiny_model / "m.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
        "--samples",
        "1000000000000",
        "--aggregate",
        "mean",
    )
    assert_error(result, "--samples 1000000000000 for 2 node(s)", "of memory; this machine has")
