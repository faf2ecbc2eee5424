"""Caps2NE.fit on the inputs people already have (scipy, networkx, edge arrays, pandas),
undirected by default exactly as the command line; results keyed by node; scikit-learn
conventions (NotFittedError, random_state); the lazy package namespace; the
learning rate's range."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from sklearn.exceptions import NotFittedError

from caps2ne_np import Caps2NE, read_edgelist
from caps2ne_np.cli import cli
from caps2ne_np.errors import InputError
from caps2ne_np.graphs.graph import coerce_graph, read_graph
from caps2ne_np.io.npy import load_npy
from caps2ne_np.io.word2vec import read_word2vec

pytestmark = pytest.mark.filterwarnings("ignore::caps2ne_np.errors.InputWarning")
ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(dim=8, feat_dim=8, walks_per_node=2, epochs=2, num_sampled=5)
CLI_SMALL = [
    "--dim",
    "8",
    "--feat-dim",
    "8",
    "--walks-per-node",
    "2",
    "--epochs",
    "2",
    "--num-sampled",
    "5",
    "--quiet",
]
EDGES = [
    ("paris", "lyon", 1.0),
    ("lyon", "nice", 1.0),
    ("nice", "paris", 1.0),
    ("nice", "rome", 2.0),
    ("rome", "milan", 1.0),
    ("milan", "turin", 1.0),
    ("turin", "rome", 1.0),
]


def small_model(**kw):
    return Caps2NE(**{**SMALL, "random_state": 0, **kw})


@pytest.fixture
def edge_file(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v} {w:g}\n" for u, v, w in EDGES))
    return path


def asymmetric_matrix(n=50, seed=1):
    rng = np.random.default_rng(seed)
    adj = sp.random(n, n, density=0.1, format="csr", random_state=rng, dtype=np.float64)
    adj.data[:] = 1.0
    adj.setdiag(0)
    adj.eliminate_zeros()
    assert (abs(adj - adj.T) > 0).nnz > 0
    return adj


def test_fit_on_a_matrix_trains_the_graph_the_cli_trains(tmp_path):
    adj = asymmetric_matrix()
    sp.save_npz(tmp_path / "g.npz", adj)
    cli_graph = read_graph(tmp_path / "g.npz")  # what 'train --graph g.npz' reads
    api_graph, nodes = coerce_graph(adj)
    assert api_graph.n_edges == cli_graph.n_edges > adj.nnz  # undirected: both directions stored
    np.testing.assert_array_equal(api_graph.indptr, cli_graph.indptr)
    np.testing.assert_array_equal(api_graph.indices, cli_graph.indices)
    assert nodes == list(range(50))
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", str(tmp_path / "g.npz"), "--out", str(tmp_path / "g.emb"), *CLI_SMALL],
    )
    assert result.exit_code == 0, result.output
    ids, emb = read_word2vec(tmp_path / "g.emb")
    model = small_model().fit(adj)
    assert model.node_ids_ == list(range(50)) and [str(x) for x in model.node_ids_] == ids
    np.testing.assert_array_equal(model.get_embedding(), emb)  # same graph, same seed
    directed = small_model().fit(adj, directed=True)
    assert not np.array_equal(directed.get_embedding(), emb)


def test_networkx_graph_keeps_its_labels_and_equals_the_edge_list(edge_file):
    nx = pytest.importorskip("networkx")
    G = nx.Graph()
    for u, v, w in EDGES:
        G.add_edge(u, v, weight=w)
    from_file = small_model().fit(read_edgelist(edge_file))
    from_nx = small_model().fit(G)
    assert from_nx.node_ids_ == from_file.node_ids_ == list(G.nodes)
    np.testing.assert_array_equal(from_nx.get_embedding(), from_file.get_embedding())
    H = nx.Graph()
    H.add_nodes_from([10, 20, 30, 40])  # int labels, one isolated node
    H.add_edges_from([(10, 20), (20, 30), (30, 10)])
    m = small_model(num_sampled=2).fit(H)
    emb = m.embedding_dict()
    assert list(emb) == m.node_ids_ == [10, 20, 30, 40]  # one set of types
    np.testing.assert_array_equal(emb[40], m.get_embedding()[3])


def test_edge_array_equals_the_edge_list(edge_file):
    reference = small_model().fit(read_edgelist(edge_file))
    m = small_model().fit(np.array([(u, v, w) for u, v, w in EDGES], dtype=object))
    assert m.node_ids_ == reference.node_ids_
    np.testing.assert_array_equal(m.get_embedding(), reference.get_embedding())
    ints = np.array([[5, 3], [3, 7], [7, 5], [7, 9]])  # ids numbered by first appearance
    m = small_model(num_sampled=2).fit(ints)
    assert m.node_ids_ == list(m.embedding_dict()) == [5, 3, 7, 9]
    np.testing.assert_array_equal(m.embedding_dict()[5], m.get_embedding()[0])


def test_dataframe_equals_the_edge_list(edge_file):
    pd = pytest.importorskip("pandas")
    reference = small_model().fit(read_edgelist(edge_file))
    frame = pd.DataFrame(EDGES, columns=["source", "target", "weight"])
    plain = pd.DataFrame(EDGES)  # columns 0, 1, 2
    for graph in (frame, plain):
        m = small_model().fit(graph)
        assert m.node_ids_ == reference.node_ids_
        np.testing.assert_array_equal(m.get_embedding(), reference.get_embedding())


@pytest.mark.parametrize(
    "bad,match",
    [
        (np.zeros((3, 4)), r"\(m, 2\) or \(m, 3\) edge array"),
        ("edges.txt", "cannot read a graph from str"),
        (np.array([[0.5, 1.0]]), "non-integer floats"),
    ],
)
def test_unreadable_inputs_say_what_is_expected(bad, match):
    with pytest.raises(InputError, match=match):
        small_model().fit(bad)


def test_unfitted_model_raises_sklearns_not_fitted_error():
    m = Caps2NE()
    for call in (
        m.get_embedding,
        m.embedding_dict,
        m.to_keyedvectors,
        lambda: m.transform(sp.eye(3, format="csr")),
    ):
        with pytest.raises(NotFittedError, match="not fitted"):
            call()


def test_random_state_none_int_and_generator():
    adj = asymmetric_matrix(20, seed=3)
    a, b = small_model(random_state=None).fit(adj), small_model(random_state=None).fit(adj)
    assert a.seed_ != b.seed_ and not np.array_equal(a.get_embedding(), b.get_embedding())
    again = small_model(random_state=a.seed_).fit(adj)  # seed_ repeats a fresh run
    np.testing.assert_array_equal(again.get_embedding(), a.get_embedding())
    g1 = small_model(random_state=np.random.default_rng(7)).fit(adj)
    g2 = small_model(random_state=np.random.default_rng(7)).fit(adj)
    np.testing.assert_array_equal(g1.get_embedding(), g2.get_embedding())
    assert small_model(random_state=5).fit(adj).seed_ == 5
    with pytest.raises(InputError, match="random_state must be None, an int"):
        small_model(random_state=-1).fit(adj)


def test_rows_follow_node_ids_and_keyedvectors(edge_file):
    m = small_model().fit(read_edgelist(edge_file))
    assert m.node_ids_ == ["paris", "lyon", "nice", "rome", "milan", "turin"]
    emb = m.embedding_dict()
    for i, node in enumerate(m.node_ids_):
        np.testing.assert_array_equal(emb[node], m.get_embedding()[i])
    pytest.importorskip("gensim")
    kv = m.to_keyedvectors()
    np.testing.assert_array_equal(kv["rome"], emb["rome"])
    assert list(kv.index_to_key) == m.node_ids_


def test_npy_output_order_and_its_ids_file(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("5 3\n3 7\n7 5\n")  # ids 5, 3, 7: rows in that order
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(path),
            "--out",
            str(tmp_path / "e.emb"),
            "--npy",
            str(tmp_path / "e.npy"),
            *CLI_SMALL,
            "--num-sampled",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    lines = (tmp_path / "e.nodes.txt").read_text().splitlines()
    assert lines == ["5", "3", "7"]  # ids only (the renames' order keeps the pair)
    ids, emb = read_word2vec(tmp_path / "e.emb")
    np.testing.assert_array_equal(np.load(tmp_path / "e.npy"), emb)
    assert load_npy(tmp_path / "e.npy")[0] == ids == ["5", "3", "7"]
    path.write_text("0 1\n1 2\n2 0\n")  # ids 0..n-1 in order: no ids file
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(path),
            "--out",
            str(tmp_path / "f.emb"),
            "--npy",
            str(tmp_path / "f.npy"),
            *CLI_SMALL,
            "--num-sampled",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output and not (tmp_path / "f.nodes.txt").exists()
    assert not (tmp_path / "f.nodes.txt").exists()
    help_text = CliRunner().invoke(cli, ["train", "--help"]).output
    assert "when the ids are not 0..N-1" in " ".join(help_text.split())


def test_package_exports_are_lazy_and_python_m_works():
    code = (
        "import sys, caps2ne_np.cli; heavy = [m for m in ('numba', 'sklearn', 'scipy') "
        "if m in sys.modules]; print(heavy); from caps2ne_np import Caps2NE, read_edgelist; "
        "print(Caps2NE.__name__, read_edgelist.__name__)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["[]", "Caps2NE read_edgelist"]
    proc = subprocess.run(
        [sys.executable, "-m", "caps2ne_np", "--help"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0 and "Usage: python -m caps2ne_np" in proc.stdout
    assert "train" in proc.stdout and "fetch-data" in proc.stdout


# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params,name",
    [
        (dict(dim="4"), "dim"),
        (dict(dim=4.0), "dim"),
        (dict(epochs="1"), "epochs"),
        (dict(epochs=True), "epochs"),
        (dict(batch_size="8"), "batch_size"),
        (dict(routing_iters="2"), "routing_iters"),
        (dict(walk_length="5"), "walk_length"),
        (dict(walk_length=5.0), "walk_length"),
        (dict(prone_order=3.0), "prone_order"),
        (dict(prone_mu="x"), "prone_mu"),
        (dict(prone_mu=1e20), "prone_mu"),
        (dict(prone_theta=710.0), "prone_theta"),
        (dict(lr="0.001"), "lr"),
        (dict(skipgram_weight="1"), "skipgram_weight"),
        (dict(normalize_features="no"), "normalize_features"),
        (dict(n_jobs="2"), "n_jobs"),
        (dict(n_jobs=0), "n_jobs"),
        (dict(n_jobs=-100_000), "n_jobs"),
        (dict(n_jobs=True), "n_jobs"),
    ],
)
def test_parameters_of_the_wrong_type_or_range_are_one_line_errors_naming_them(params, name):
    """No raw TypeError, no 'Unknown format code', nothing taken silently."""
    adj = asymmetric_matrix(20, seed=3)
    with pytest.raises(InputError) as info:
        small_model(**params).fit(adj)
    message = str(info.value)
    assert message.startswith(f"{name}: ") and "\n" not in message, message


def test_numpy_numbers_stay_accepted_and_equal_python_ones():
    adj = asymmetric_matrix(20, seed=3)
    a = small_model(dim=np.int64(8), lr=np.float32(0.002), n_jobs=np.int32(1)).fit(adj)
    b = small_model(dim=8, lr=float(np.float32(0.002)), n_jobs=1).fit(adj)
    np.testing.assert_array_equal(a.get_embedding(), b.get_embedding())
    assert type(a.config_["dim"]) is int and type(a.config_["lr"]) is float


def test_networkx_weight_that_is_not_a_number_names_the_edge():
    nx = pytest.importorskip("networkx")
    G = nx.Graph()
    G.add_edge("a", "b", weight="heavy")
    G.add_edge("b", "c")
    with pytest.raises(InputError, match=r"edge \('a', 'b'\): weight 'heavy' is not a number"):
        small_model().fit(G)


def test_a_file_name_given_to_fit_points_to_read_edgelist(edge_file):
    """fit('edges.txt') said only what it cannot read."""
    with pytest.raises(InputError, match=r"fit\(read_edgelist\('.*edges\.txt'\)\)"):
        small_model().fit(str(edge_file))
    with pytest.raises(InputError, match=r"read_edgelist"):
        small_model().fit(edge_file)  # a Path too


def test_a_networkx_digraph_is_trained_as_directed_by_default():
    """A DiGraph was trained as undirected unless directed=True."""
    nx = pytest.importorskip("networkx")
    D = nx.DiGraph([(u, v) for u, v, _ in EDGES])
    model = small_model().fit(D)
    assert model.directed_
    explicit = small_model().fit(D, directed=True)
    np.testing.assert_array_equal(model.get_embedding(), explicit.get_embedding())
    assert not small_model().fit(D, directed=False).directed_
    assert not small_model().fit(nx.Graph(D)).directed_


def two_cliques():
    """Two 8-cliques joined by one edge, labelled by clique, and three splits."""
    edges = [(u, v) for c in (0, 8) for u in range(c, c + 8) for v in range(u + 1, c + 8)]
    adj = sp.coo_matrix((np.ones(len(edges) + 1), np.array(edges + [(0, 8)]).T), shape=(16, 16))
    labels = np.repeat([0, 1], 8)
    rng = np.random.default_rng(3)
    splits = []
    for _ in range(3):
        a, b = rng.permutation(8), 8 + rng.permutation(8)  # each clique's nodes, shuffled
        part = {"train": (0, 3), "val": (3, 5), "test": (5, 8)}
        splits.append({k: np.concatenate([a[lo:hi], b[lo:hi]]) for k, (lo, hi) in part.items()})
    return adj.tocsr(), labels, splits


def test_fit_selects_the_epoch_of_best_mean_validation_accuracy():
    """fit(labels=, splits=): the fitted o_v are those of the epoch whose mean
    validation accuracy is highest (the first on ties), as train --eval-every-epoch
    keeps; the scores of every epoch are recorded."""
    from caps2ne_np.evaluation.single import classify_splits

    adj, labels, splits = two_cliques()
    seen = []  # (epoch, o_v) of every epoch, from the user's own callback
    model = small_model(epochs=4, propagate="none", lr=0.05, spectral="none")
    model.fit(
        adj,
        labels=labels,
        splits=splits,
        epoch_callback=lambda epoch, result: seen.append((epoch, result.params.O.copy())),
    )
    assert [e for e, _ in seen] == [1, 2, 3, 4] and len(model.epoch_scores_) == 4
    val = [classify_splits(O, labels, splits)["val_mean"] for _, O in seen]
    assert [r["val_mean"] for r in model.epoch_scores_] == val
    best = int(np.argmax(val))  # first maximum
    assert model.best_epoch_ == best + 1 < 4  # (so the kept o_v are not the last)
    np.testing.assert_array_equal(model.O_, seen[best][1])
    np.testing.assert_array_equal(model.get_embedding(), seen[best][1])
    # without labels the last epoch's o_v, and no trace of a selection
    plain = small_model(epochs=4, propagate="none", lr=0.05, spectral="none").fit(adj)
    np.testing.assert_array_equal(plain.O_, seen[-1][1])
    assert not hasattr(plain, "best_epoch_")
    with pytest.raises(InputError, match="labels and splits"):
        small_model().fit(adj, labels=labels)


def test_fit_scores_each_epoch_on_the_rows_it_keeps_when_propagating():
    """With ``propagate='on'`` every epoch is scored on its o_v propagated as fit
    propagates them (it was the o_v as trained, which fit does not keep): the kept
    epoch's scores are those of get_embedding()."""
    from caps2ne_np.evaluation.single import classify_splits

    rng = np.random.default_rng(5)  # two planted groups of 30 (cliques' rows collapse)
    labels = np.repeat([0, 1], 30)
    p = np.where(labels[:, None] == labels[None, :], 0.3, 0.05)
    upper = np.triu(rng.random((60, 60)) < p, k=1)
    adj = sp.csr_matrix((upper | upper.T).astype(np.float64))
    splits = [
        {"train": o[:30], "val": o[30:40], "test": o[40:]}
        for o in (rng.permutation(60) for _ in range(3))
    ]
    model = small_model(epochs=3, propagate="on", lr=0.05, spectral="none")
    model.fit(adj, labels=labels, splits=splits)
    kept = model.epoch_scores_[model.best_epoch_ - 1]
    written = classify_splits(model.get_embedding(), labels, splits)
    assert model.propagation_ is not None
    np.testing.assert_array_equal(kept["val"], written["val"])
    np.testing.assert_array_equal(kept["test"], written["test"])
    assert kept["val_mean"] != classify_splits(model.O_, labels, splits)["val_mean"]


def _bad_selection(labels, splits):
    """(labels, splits) with one defect each, as fit(labels=, splits=) gets them."""
    split = splits[0]
    return {
        "out-of-range": (labels, [{**split, "test": np.r_[split["test"], 16]}]),
        "train-val-overlap": (labels, [{**split, "val": np.r_[split["val"], split["train"][0]]}]),
        "repeat": (labels, [{**split, "train": np.r_[split["train"], split["train"][0]]}]),
        "missing-part": (labels, [{"train": split["train"], "test": split["test"]}]),
        "short-labels": (labels[:-1], splits),
        "float-labels": (labels.astype(float), splits),
        "unlabelled-test-node": (np.r_[labels[:-1], -1], [{**split, "test": np.r_[15]}]),
    }


@pytest.mark.parametrize(
    "case,match",
    [
        ("out-of-range", r"^splits: split 0 'test': node 16 out of range 0\.\.15"),
        ("train-val-overlap", r"^splits: split 0: 'train' and 'val' share 1 node"),
        ("repeat", r"^splits: split 0 'train': node \d+ listed twice"),
        ("missing-part", r"^splits: split 0: expected exactly the keys train, val, test"),
        ("short-labels", r"^labels: expected \(16,\) integer classes"),
        ("float-labels", r"^labels: expected \(16,\) integer classes"),
        ("unlabelled-test-node", r"^splits: split 0 'test': contains unlabelled nodes"),
    ],
)
def test_fit_checks_labels_and_splits_before_any_training(case, match):
    # the CLI refuses such files before training; fit refused them after an epoch (a raw
    # IndexError, an error about "emb") or not at all (overlapping parts)
    adj, labels, splits = two_cliques()
    labels, splits = _bad_selection(labels, splits)[case]
    steps = []
    with pytest.raises(ValueError, match=match):
        small_model(epochs=1, propagate="none", spectral="none").fit(
            adj, labels=labels, splits=splits, step_callback=lambda *a: steps.append(a)
        )
    assert steps == []  # refused before the first step


def test_the_estimator_refuses_an_lr_beyond_one():
    import scipy.sparse as sp

    from caps2ne_np.errors import InputError
    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj = sp.random(20, 20, density=0.3, format="lil", random_state=0)
    adj.setdiag(0)
    adj = (adj + adj.T).tocsr()
    with pytest.raises(InputError, match=r"lr: must be in \(0, 1\], got 5"):
        Caps2NE(dim=8, feat_dim=8, lr=5.0, epochs=1).fit(adj)
