"""Propagated models as hostile use met them: ``infer`` and ``Caps2NE.transform`` decide
success by the requested nodes only (a node elsewhere in the graph that cannot be
embedded is no reason to fail); the propagation never writes zero, non-finite or
collapsed rows without a word (it falls back to the o_v and says why); ``--propagate
auto`` says in words when it cannot measure; a model file's propagation map and ProNE
options are checked when it is read."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputWarning
from caps2ne_np.evaluate import inductive_split
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.io.word2vec import read_word2vec
from test_infer import fit_quiet, planted_partition

# --------------------------------------------------------------------------- fixtures


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


# --------------------------------------------------------------------------- requested nodes only


def test_an_unrequested_isolated_node_or_new_component_does_not_fail_the_request(full, model):
    """'iso' (no edges) and 'a' - 'b' (nodes the featureless model never saw) could not be
    embedded, and failed a request of 'new' and 'n3' with "node 'iso' would get a zero
    embedding": the filter of a requested node reads only its own component, so the rows
    are those of the graph without the extra parts."""
    assert model.propagation_ is not None
    g = _with_extra_parts(full)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # nothing said about unrequested nodes
        E = model.transform(g, nodes=["new", "n3"], random_state=0)
    np.testing.assert_array_equal(E, model.transform(full, nodes=["new", "n3"], random_state=0))
    assert np.all(np.isfinite(E)) and np.all(np.linalg.norm(E, axis=1) > 0.5)


def test_a_requested_node_that_cannot_be_embedded_is_a_clear_error(full, model):
    g = _with_extra_parts(full)
    with pytest.raises(ValueError, match="node 'a' .*would get a zero embedding"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            model.transform(g, nodes=["new", "a"], random_state=0)


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
