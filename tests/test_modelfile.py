"""Model files and calibration as a user and a hostile file meet them: the API uses the
calibration ``infer --save-calibration`` stored, ``load`` then ``save`` keeps it; every
damaged field of a model file is one line naming it, checked by the ranges training uses;
calibration messages name the real shapes and the command to recalibrate;
``--save-calibration`` writes through a symbolic link. A model path that is no regular file
says what it is. A damaged model file is one line."""

import json
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputError, InputWarning
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.evaluation.inductive import inductive_split
from caps2ne_np.graphs.graph import read_graph
from caps2ne_np.inference.calibration import apply_calibration
from caps2ne_np.inference.infer import calibrate, infer_embeddings
from caps2ne_np.io.modelcheck import check_option
from caps2ne_np.io.modelfile import read_model, save_calibration
from caps2ne_np.io.npy import load_npz, save_npz
from caps2ne_np.io.word2vec import read_word2vec
from clirun import (
    GRAPH,
    _damaged_model,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
    tiny_model,  # noqa: F401 (fixtures)
)
from test_infer import fit_quiet, fitted, planted_partition

pytestmark = pytest.mark.filterwarnings("ignore::caps2ne_np.errors.InputWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A featureless model trained on the planted-partition graph without 'new', the full
    graph as an edge list, and the nodes to embed."""
    from caps2ne_np.evaluation.inductive import inductive_split

    d = tmp_path_factory.mktemp("modelfiles")
    full = planted_partition()
    sub, _ = inductive_split(full, ["new"])
    adj = full.to_scipy().tocoo()
    (d / "full.txt").write_text(
        "".join(
            f"{full.node_ids[u]} {full.node_ids[v]}\n" for u, v in zip(adj.row, adj.col) if u < v
        )
    )
    (d / "nodes.txt").write_text("new\nn3\nn20\n")
    model = fit_quiet(sub, epochs=2)
    model.save(d / "model.npz")
    return d


def _infer(*args):
    return CliRunner().invoke(cli, ["infer", *map(str, args)])


def _copy(files, tmp_path, name="m.npz"):
    (tmp_path / name).write_bytes((files / "model.npz").read_bytes())
    return tmp_path / name


# ---------------------------------------------------------------------------


def test_load_transform_uses_the_calibration_infer_stored(files, tmp_path):
    """infer --save-calibration, then Caps2NE.load(m).transform: the same embeddings as
    infer on the same model, graph, Z and seed (before: a calibration fitted anew on
    the graph given to transform, up to 0.24 apart)."""
    m = _copy(files, tmp_path)
    r = _infer(
        "--model", m, "--graph", files / "full.txt", "--nodes", files / "nodes.txt",
        "--samples", 6, "--seed", 4, "--aggregate", "calibrated", "--save-calibration",
        "--out", tmp_path / "cli.emb",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    ids, E_cli = read_word2vec(tmp_path / "cli.emb")
    # calibrated on the full graph stored; transform on the same graph, as infer did
    model = Caps2NE.load(m)
    assert model.calibration_["samples"] == 6
    g = read_graph(files / "full.txt")
    E_api = model.transform(g, nodes=ids, samples=6, random_state=4, aggregate="calibrated")
    np.testing.assert_array_equal(E_api, E_cli)
    # not what a calibration fitted anew on another graph would give
    fresh = Caps2NE.load(m)
    del fresh.calibration_
    sub = read_graph(files / "full.txt")
    other = fresh.calibrate(sub, samples=3, random_state=9, method="scale")
    assert not np.array_equal(other["A"], model.calibration_["A"])


def test_calibrate_sets_calibration_and_save_load_keep_it(files, tmp_path):
    model = Caps2NE.load(files / "model.npz")
    assert not hasattr(model, "calibration_")  # the file stores none
    g = read_graph(files / "full.txt")
    cal = model.calibrate(g, samples=5, random_state=1)
    assert model.calibration_ is cal
    ref = calibrate(*fitted(model), g, None, samples=5, seed=1)
    np.testing.assert_array_equal(cal["A"], ref["A"])
    model.save(tmp_path / "a.npz")
    again = Caps2NE.load(tmp_path / "a.npz")
    np.testing.assert_array_equal(again.calibration_["A"], cal["A"])
    np.testing.assert_array_equal(again.calibration_["b"], cal["b"])
    again.save(tmp_path / "b.npz")  # load then save keeps it
    assert read_model(tmp_path / "b.npz")["calibration"]["samples"] == 5
    np.testing.assert_array_equal(read_model(tmp_path / "b.npz")["calibration"]["A"], cal["A"])


# ---------------------------------------------------------------------------


def _damage(src, dst, **changes):
    arrays = load_npz(src)
    for name, value in changes.items():
        if value is None:
            arrays.pop(name, None)
        else:
            arrays[name] = value(arrays[name]) if callable(value) else value
    save_npz(dst, overwrite=True, **arrays)
    return dst


def _config(**edits):
    def change(a):
        config = json.loads(str(a))
        for key, value in edits.items():
            if value is None:
                del config[key]
            else:
                config[key] = value
        return np.asarray(json.dumps(config))

    return change


def _calibration_json(value):
    return np.asarray(json.dumps(value))


DAMAGED = {
    "no-version": ({"version": None}, "no version"),
    "version-abc": ({"version": np.asarray("abc")}, "version is 'abc' (<U3), expected an integer"),
    "no-routing-iters": ({"config": _config(routing_iters=None)}, "config has no routing_iters"),
    "routing-iters-abc": (
        {"config": _config(routing_iters="abc")},
        "config routing_iters must be an integer, got 'abc'",
    ),
    "routing-scale-negative": (
        {"config": _config(routing_scale=-5)},
        "config routing_scale must be > 0, got -5",
    ),
    "routing-rule-unknown": (
        {"config": _config(routing_rule="magic")},
        "config routing_rule must be one of ('paper', 'sabour'), got 'magic'",
    ),
    "dim-disagrees": ({"config": _config(dim=9)}, "config dim is 9 but O has k = 8 columns"),
    "config-list": ({"config": np.asarray("[1, 2]")}, "config is a JSON list"),
    "config-not-json": ({"config": np.asarray("{oops")}, "config is not JSON"),
    "fixed-features-yes": (
        {"fixed_features": np.asarray("yes")},
        "fixed_features is 'yes' (<U3), expected a boolean",
    ),
    # each removed check let the file load and transform return rows
    "bias-short": ({"bias": lambda a: a[:-3]}, "bias has shape (27,), expected (30,)"),
    "W-other-k": (
        {"W": lambda a: np.ascontiguousarray(a[:, :-1, :])},
        "W must be (q-1, k, d) with k = 8",
    ),
    "feat-dim-disagrees": ({"config": _config(feat_dim=9)}, "config feat_dim is 9 but W and X"),
    "run-directed-yes": (
        {"run": np.asarray(json.dumps({"directed": "yes"}))},
        "run directed is 'yes', expected a bool",
    ),
    "duplicate-ids": (
        {"node_ids": lambda a: np.concatenate([a[:1], a[:-1]])},
        "node id 'n0' occurs twice (rows 0 and 1)",
    ),
    "calibration-list": (
        {
            "calibration": _calibration_json([1, 2]),
            "calibration_A": np.eye(8, dtype=np.float32),
            "calibration_b": np.zeros(8, dtype=np.float32),
        },
        "damaged calibration (a JSON list, expected an object); recalibrate: caps2ne infer",
    ),
    "calibration-without-A": (
        {
            "calibration": _calibration_json(dict(method="diag", samples=10, positions=[0])),
            "calibration_b": np.zeros(8, dtype=np.float32),
        },
        "damaged calibration (no calibration_A); recalibrate",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_model_file_is_one_line_naming_the_field(files, tmp_path, case):
    changes, what = DAMAGED[case]
    bad = _damage(files / "model.npz", tmp_path / "bad.npz", **changes)
    with pytest.raises(InputError) as info:
        read_model(bad)
    message = str(info.value)
    assert "\n" not in message and what in message, message
    with pytest.raises(InputError):
        Caps2NE.load(bad)
    r = _infer(
        "--model", bad, "--graph", files / "full.txt", "--nodes", files / "nodes.txt",
        "--out", tmp_path / "x.emb",
    )  # fmt: skip
    assert r.exit_code == 1 and "internal error" not in r.output, r.output
    assert what in r.output and len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("m", [10**6, 1e9])
def test_huge_routing_iters_is_refused_when_the_file_is_read(files, tmp_path, m):
    """routing_iters 1e9 was refused only by a memory estimate, and 1e6 passed it and ran
    infer for minutes: the option's range (at most 100) applies to
    model files as to training."""
    bad = _damage(files / "model.npz", tmp_path / "bad.npz", config=_config(routing_iters=m))
    with pytest.raises(InputError, match=f"config routing_iters must be <= 100, got {int(m)}"):
        read_model(bad)
    with pytest.raises(InputError, match="routing_iters must be <= 100"):
        Caps2NE.load(bad)


# ---------------------------------------------------------------------------


def test_calibration_messages_name_the_shapes_and_the_fix():
    E = np.ones((2, 8), dtype=np.float32)
    with pytest.raises(InputError, match=r"A of shape \(8, 5\) .* k = 8 need A \(8, 8\)"):
        apply_calibration(E, dict(A=np.ones((8, 5)), b=np.zeros(8)))
    A = np.eye(8)
    A[2, 2] = np.nan
    with pytest.raises(InputError, match="1 NaN or infinite .*recalibrate: caps2ne infer"):
        apply_calibration(E, dict(A=A, b=np.zeros(8)))
    with pytest.raises(InputError, match=r"values up to 1e\+30, beyond 1e\+18.*recalibrate"):
        apply_calibration(E, dict(A=1e30 * np.eye(8), b=np.zeros(8)))
    with pytest.raises(InputError, match="beyond float32's range; recalibrate"):
        apply_calibration(1e30 * E, dict(A=1e9 * np.eye(8), b=np.zeros(8)))


def test_a_calibration_without_its_settings_warns_sensibly(files):
    model = Caps2NE.load(files / "model.npz")
    g = read_graph(files / "full.txt")
    cal = dict(A=np.eye(8, dtype=np.float32), b=np.zeros(8, dtype=np.float32))
    with pytest.warns(InputWarning) as record:
        infer_embeddings(*fitted(model), g, None, ["new"], aggregate="calibrated", calibration=cal)
    text = " ".join(str(w.message) for w in record)
    assert "does not say with which Z and positions" in text and "None" not in text


def test_a_stored_calibration_with_nan_or_huge_values_says_recalibrate(files, tmp_path):
    for A, what in ((np.full((8, 8), np.nan), "64 NaN"), (1e30 * np.eye(8), "1e+30")):
        bad = _damage(
            files / "model.npz",
            tmp_path / "bad.npz",
            calibration=_calibration_json(dict(method="diag", samples=10, positions=[0])),
            calibration_A=A.astype(np.float32),
            calibration_b=np.zeros(8, dtype=np.float32),
        )
        with pytest.raises(InputError, match=re.escape(what) + ".*recalibrate: caps2ne infer"):
            read_model(bad)


# ---------------------------------------------------------------------------


def test_save_calibration_writes_through_a_symbolic_link(files, tmp_path):
    real = _copy(files, tmp_path, "real.npz")
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    r = _infer(
        "--model", link, "--graph", files / "full.txt", "--nodes", files / "nodes.txt",
        "--save-calibration", "--out", tmp_path / "x.emb",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert read_model(real)["calibration"] is not None
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        cal = read_model(real)["calibration"]
    save_calibration(link, cal)  # the function itself, too
    assert link.is_symlink()


def test_transform_uses_the_stored_calibration_not_one_fitted_afresh(files, tmp_path):
    """A stored calibration that differs from any fitted afresh (one
    fitted on the same graph with the same seed equals the stored one, so a transform
    that ignored it passed): transform's output is the mean e mapped by the stored map."""
    m = _copy(files, tmp_path)
    g = read_graph(files / "full.txt")
    model = Caps2NE.load(m)
    cal = model.calibrate(g, samples=4, random_state=2)
    odd = dict(cal, A=2.0 * np.asarray(cal["A"]), b=np.asarray(cal["b"]) + 0.5)
    save_calibration(m, odd)
    loaded = Caps2NE.load(m)
    ids = ["new", "n3"]
    mean = loaded.transform(g, nodes=ids, samples=4, random_state=2, aggregate="mean")
    got = loaded.transform(g, nodes=ids, samples=4, random_state=2, aggregate="calibrated")
    np.testing.assert_array_equal(got, apply_calibration(mean, odd))
    assert not np.allclose(got, apply_calibration(mean, cal))


# ---------------------------------------------------------------------------


def test_a_directed_model_transforms_its_graph_as_directed_after_load(tmp_path):
    """The model file stores directed (and keep_self_loops): load then transform reads the
    graph as the fit did (it was read as undirected)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    adj = sp.random(30, 30, density=0.12, format="csr", random_state=rng, dtype=np.float64)
    adj.data[:] = 1.0
    adj.setdiag(0)
    adj.eliminate_zeros()
    model = Caps2NE(dim=8, feat_dim=8, walks_per_node=2, epochs=1, num_sampled=8)
    model.fit(adj, directed=True)
    model.save(tmp_path / "d.npz")
    loaded = Caps2NE.load(tmp_path / "d.npz")
    assert loaded.directed_ and loaded.run_["directed"]
    kw = dict(samples=3, random_state=1, aggregate="mean")
    np.testing.assert_array_equal(loaded.transform(adj, **kw), model.transform(adj, **kw))


def test_load_gives_back_the_parameters_given_not_the_resolved_ones(files, tmp_path):
    """Caps2NE.load returned the preset's lr and |V'| = 63 as parameters, so a clone of
    it refused a smaller graph; the resolved values are in config_."""
    from sklearn.base import clone

    from test_infer import planted_partition as partition

    big = partition(size=40)  # 81 nodes: the resolved num_sampled is 80
    model = Caps2NE(dim=8, feat_dim=8, walks_per_node=2, epochs=1, random_state=4)
    model.fit(big)
    assert model.config_["num_sampled"] == 80
    model.save(tmp_path / "m.npz")
    loaded = Caps2NE.load(tmp_path / "m.npz")
    assert loaded.get_params() == model.get_params()
    assert loaded.config_["num_sampled"] == 80 and loaded.lr_ == model.lr_
    small = partition(size=10)  # 21 nodes
    clone(loaded).fit(small)
    loaded.fit(small)
    # a file without the record (older versions): preset-filled values stay unset
    old = _damage(tmp_path / "m.npz", tmp_path / "old.npz", run=None)
    params = Caps2NE.load(old).get_params()
    assert params["num_sampled"] is None and params["lr"] is None and params["dim"] == 8
    clone(Caps2NE.load(old)).fit(small)


def test_infer_reads_the_graph_as_the_model_was_trained(tmp_path):
    """train --directed --model-out: infer follows the stored directedness, and refuses
    --directed on a model trained undirected."""
    (tmp_path / "g.txt").write_text("".join(f"{i} {(i + 1) % 12}\n" for i in range(12)))
    (tmp_path / "nodes.txt").write_text("0\n5\n")
    common = ["--epochs", "1", "--dim", "4", "--feat-dim", "4", "--walks-per-node", "1",
              "--threads", "1", "--quiet", "--graph", tmp_path / "g.txt"]  # fmt: skip
    for name, extra in (("d.npz", ["--directed"]), ("u.npz", [])):
        r = CliRunner().invoke(
            cli, ["train", *map(str, common), *extra, "--model-out", str(tmp_path / name),
                  "--out", str(tmp_path / (name + ".emb"))],
        )  # fmt: skip
        assert r.exit_code == 0, r.output
    assert read_model(tmp_path / "d.npz")["run"]["directed"] is True
    assert read_model(tmp_path / "u.npz")["run"]["params"]["dim"] == 4
    args = ["--graph", tmp_path / "g.txt", "--nodes", tmp_path / "nodes.txt", "--quiet",
            "--aggregate", "mean"]  # fmt: skip
    _infer("--model", tmp_path / "d.npz", *args, "--out", tmp_path / "a.emb")
    r = _infer("--model", tmp_path / "d.npz", *args, "--directed", "--out", tmp_path / "b.emb")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a.emb").read_bytes() == (tmp_path / "b.emb").read_bytes()
    r = _infer("--model", tmp_path / "u.npz", *args, "--directed", "--out", tmp_path / "c.emb")
    assert r.exit_code == 1 and "trained without --directed" in r.output, r.output


def test_a_calibration_that_fails_on_a_tampered_model_names_the_file(files, tmp_path):
    """routing_scale 1e30 overflows e: the calibration fitted on it is not finite; the
    message names the model file (it said only 'the calibration')."""
    bad = _damage(files / "model.npz", tmp_path / "bad.npz", config=_config(routing_scale=1e30))
    r = _infer(
        "--model", bad, "--graph", files / "full.txt", "--nodes", files / "nodes.txt",
        "--out", tmp_path / "x.emb", "--aggregate", "calibrated",
    )  # fmt: skip
    assert r.exit_code == 1 and f"error: {bad}: fitting its calibration: " in r.output, r.output


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


def _csr(A):
    return sp.csr_matrix(np.asarray(A, dtype=np.float64))


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


def path(n):
    return np.eye(n, k=1) + np.eye(n, k=-1)


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


def test_a_model_path_that_is_no_regular_file_says_what_it_is(run, tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    for path in ("/dev/null", str(tmp_path / "fifo")):
        with pytest.raises(Exception, match="is not a regular file"):
            Caps2NE.load(path)
    with pytest.raises(Exception, match="is not a regular file"):
        Caps2NE.load("/dev/zero")
    with pytest.raises(Exception, match="an empty path was given"):
        Caps2NE.load("")
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "nodes.txt", "a\n")
    result = run("infer", "--model", "/dev/null", "--graph", "g.txt", "--nodes", "nodes.txt")
    assert_error(result, "/dev/null: is not a regular file")


@pytest.mark.parametrize(
    "changes,what",
    [
        (
            {"W": np.zeros((3, 2), dtype=np.float32)},
            "W has shape (3, 2) float32, expected a 3-D float array",
        ),
        ({"O": None}, "no O"),
        ({"X": lambda a: a[:, :2]}, "X has shape (4, 2), expected (4, 4)"),
        ({"node_ids": np.asarray(["a"])}, "1 node ids for the 4 rows of O"),
    ],
    ids=["W-shape", "no-O", "X-shape", "ids-count"],
)
def test_damaged_model_file_is_one_line(run, tmp_path, tiny_model, changes, what):
    _damaged_model(tiny_model / "m.npz", tmp_path / "bad.npz", **changes)
    with pytest.raises(InputError, match="damaged model file"):
        read_model(tmp_path / "bad.npz")
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
