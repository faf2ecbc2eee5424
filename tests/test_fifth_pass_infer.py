"""Propagated models as hostile use met them: ``infer`` and ``Caps2NE.transform`` decide
success by the requested nodes only (a node elsewhere in the graph that cannot be
embedded is no reason to fail); the propagation never writes zero, non-finite or
collapsed rows without a word (it falls back to the o_v and says why); ``--propagate
auto`` says in words when it cannot measure; a model file's propagation map and ProNE
options are checked when it is read."""

import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputError, InputWarning
from caps2ne_np.evaluation.inductive import inductive_split
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.io.modelcheck import check_option
from caps2ne_np.io.modelfile import read_model
from caps2ne_np.io.npy import load_npz, save_npz
from caps2ne_np.io.word2vec import read_word2vec
from caps2ne_np.spectral import propagation
from caps2ne_np.training.options.config import TrainConfig
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


# --------------------------------------------------------------------------- degenerate rows


def _cfg(**kw):
    return TrainConfig(**dict(dict(propagate="on", seed=0), **kw))


def _csr(A):
    return sp.csr_matrix(np.asarray(A, dtype=np.float64))


def _apply(A, O, **kw):
    A = _csr(A)
    return propagation.apply(A.indptr, A.indices, None, _cfg(**kw), np.asarray(O, np.float32))


def test_a_propagation_that_cancels_every_row_falls_back_to_the_o_v():
    """Two nodes whose o_v sum to zero: (I + A)(O - g(L) O) is zero, and so was every
    written row; now the o_v are written, with a warning saying why."""
    with pytest.warns(InputWarning, match="2 of 2 propagated rows came out zero"):
        assert _apply([[0, 1], [1, 0]], [[0.5], [-0.5]]) is None


def test_prone_theta_too_small_to_filter_is_refused():
    """theta 1e-20 cancelled the filter to zero in float64 (300 of 300 zero rows); the
    range now starts where the filter still differs across the spectrum."""
    from caps2ne_np.estimator.caps2ne import Caps2NE

    with pytest.raises(ValueError, match="prone_theta"):
        Caps2NE(epochs=1, dim=4, feat_dim=4, prone_theta=1e-20).fit(_csr(complete(5)))
    with pytest.raises(ValueError, match="must be >= 0.01"):
        check_option("prone_theta", 1e-20)
    assert check_option("prone_theta", 0.01) == 0.01


def complete(n):
    return np.ones((n, n)) - np.eye(n)


def star(n):
    A = np.zeros((n, n))
    A[0, 1:] = A[1:, 0] = 1
    return A


def path(n):
    return np.eye(n, k=1) + np.eye(n, k=-1)


@pytest.mark.parametrize(
    "A,k,why",
    [
        (complete(10), 4, "10 of 10 rows"),
        (complete(150), 8, "150 of 150 rows"),
        (star(12), 1, "--dim 1"),
        (path(12), 1, "--dim 1"),
        (np.kron(np.eye(2), np.ones((3, 3))) - np.eye(6), 4, "6 of 6 rows"),
    ],
    ids=["K10", "K150", "star-dim1", "path-dim1", "two-triangles"],
)
def test_rows_the_propagation_makes_identical_fall_back_to_the_o_v(A, k, why):
    """Every node of a complete graph got the same row, and at --dim 1 every row was +-1:
    when most rows are copies of another node's that the o_v kept apart, the o_v are
    written, with a warning naming how many and why."""
    O = np.random.default_rng(0).standard_normal((A.shape[0], k))
    with pytest.warns(InputWarning, match="identical") as record:
        assert _apply(A, O) is None
    text = str(record[0].message)
    assert why in text and "--propagate none" in text


def test_a_few_adjacent_twins_are_named_and_the_rest_propagates(caplog):
    """Two adjacent nodes with the same neighbours always get the same row; a minority of
    such rows keeps the propagation, and the log line says how many."""
    rng = np.random.default_rng(1)
    A = np.triu(rng.random((40, 40)) < 0.2, 1).astype(float)
    A[0, :] = A[:, 0] = 0
    A[0, 1] = A[1, 0] = 1
    A[0, 2:] = A[1, 2:]
    A = np.maximum(A, A.T)
    np.fill_diagonal(A, 0)
    with caplog.at_level("INFO", logger="caps2ne_np"):
        p = _apply(A, rng.standard_normal((40, 8)))
    assert p is not None
    np.testing.assert_array_equal(p.E[0], p.E[1])
    assert "2 of 40 rows are identical to another node's" in p.note
    assert "warning" not in p.note


def test_the_written_embeddings_of_a_complete_graph_are_the_o_v(tmp_path):
    """End to end: train on K6 writes distinct rows (the o_v), with the warning."""
    lines = "".join(f"n{i} n{j}\n" for i in range(6) for j in range(i + 1, 6))
    (tmp_path / "g.txt").write_text(lines)
    r = _invoke(
        "train", "--graph", tmp_path / "g.txt", "--out", tmp_path / "e.emb", "--dim", "4",
        "--feat-dim", "4", "--epochs", "1", "--walks-per-node", "2", "--threads", "1",
        "--propagate", "on",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "warning: written embeddings" in r.output and "identical" in r.output
    _, E = read_word2vec(tmp_path / "e.emb")
    assert np.unique(E, axis=0).shape[0] == 6


def test_infer_refuses_to_write_zero_rows_from_a_degenerate_map(full, model):
    """A map that passes the file's checks but sends a requested node's filtered row to
    zero (here: P zero but on a direction no filter input has) is an error, not a zero
    row written with exit 0."""
    import dataclasses

    from caps2ne_np.inference.propagated import infer_propagated

    sub, _ = inductive_split(full, ["new"])  # training nodes only: every input is an o_v
    P = np.zeros_like(model.propagation_.P)
    P[0, 0] = 1.0
    params = model.params_()
    O = np.asarray(params.O).copy()
    O[:, 0] = 0.0  # every o_v has a zero first coordinate, so O~ P = 0
    with pytest.raises(InputError, match="node 'n3'.* came out zero"):
        infer_propagated(
            dataclasses.replace(params, O=O), model.config_, model.node_ids_, sub, None,
            ["n3"], model.propagation_._replace(P=P),
        )  # fmt: skip


# --------------------------------------------------------------------------- --propagate auto


@pytest.mark.parametrize(
    "A,words",
    [
        (np.kron(np.eye(6), [[0, 1], [1, 0]]), "no edge can be held out"),
        (star(10), "no edge can be held out"),
        (complete(10), "no non-edge"),
    ],
    ids=["matching", "star", "K10"],
)
def test_auto_says_in_words_when_it_cannot_measure(A, words):
    O = np.random.default_rng(0).standard_normal((A.shape[0], 4))
    on, why = propagation.decide(_csr(A), O, seed=0)
    assert "nan" not in why and words in why, why
    assert not on and "kept off" in why


# --------------------------------------------------------------------------- the model file


def _damage(src, dst, **changes):
    arrays = load_npz(src)
    for name, value in changes.items():
        arrays[name] = value(arrays[name]) if callable(value) else value
    save_npz(dst, overwrite=True, **arrays)
    return dst


def _prone_order(value):
    def change(a):
        config = json.loads(str(a))
        config["prone_order"] = value
        return np.asarray(json.dumps(config))

    return change


DAMAGED_PROPAGATION = {
    "P-zero": (dict(propagation_P=lambda P: np.zeros_like(P)), "propagation_P is all zero"),
    "P-huge": (dict(propagation_P=lambda P: P * 1e300), "propagation_P holds values up to"),
    "P-tiny": (dict(propagation_P=lambda P: P * 1e-300), "propagation_P holds values only up to"),
    "P-nan": (dict(propagation_P=lambda P: np.full_like(P, np.nan)), "NaN or infinite"),
    "P-strings": (dict(propagation_P=lambda P: P.astype(str)), "propagation_P holds <U"),
    "E-strings": (dict(propagated=lambda E: E.astype(str)), "propagated holds <U"),
    "E-zero": (dict(propagated=lambda E: np.zeros_like(E)), "propagated is all zero"),
    "order-huge": (dict(config=_prone_order(10**7)), "config prone_order must be <= 200"),
}


@pytest.mark.parametrize("case", list(DAMAGED_PROPAGATION))
def test_a_damaged_propagation_is_refused_when_the_file_is_read(full, model, tmp_path, case):
    """A zero or 1e300-scaled map passed and infer wrote zero rows; a map of strings was an
    internal error (TypeError); prone_order 1e7 ran infer for 198 s."""
    changes, what = DAMAGED_PROPAGATION[case]
    model.save(tmp_path / "m.npz")
    bad = _damage(tmp_path / "m.npz", tmp_path / "bad.npz", **changes)
    with pytest.raises(InputError) as info:
        read_model(bad)
    assert what in str(info.value) and "\n" not in str(info.value), str(info.value)
    graph = _edge_list(full, tmp_path / "g.txt")
    (tmp_path / "nodes.txt").write_text("new\n")
    r = _invoke(
        "infer", "--model", bad, "--graph", graph, "--nodes", tmp_path / "nodes.txt",
        "--out", tmp_path / "e.emb",
    )  # fmt: skip
    assert r.exit_code == 1 and "internal error" not in r.output and what in r.output, r.output
    assert not (tmp_path / "e.emb").exists()


def test_a_calibration_that_maps_every_node_to_one_row_is_refused(model, tmp_path):
    """A stored calibration with A = 0 passed the checks and infer wrote b for every node
    (zero rows when b = 0)."""
    model.save(tmp_path / "m.npz")
    meta = dict(method="diag", n=30, samples=10, positions=list(range(10)), seed=0)
    bad = _damage(
        tmp_path / "m.npz", tmp_path / "bad.npz", calibration=np.asarray(json.dumps(meta)),
        calibration_A=np.zeros((8, 8), np.float32), calibration_b=np.zeros(8, np.float32),
    )  # fmt: skip
    with pytest.raises(InputError, match="A is all zero"):
        read_model(bad)
