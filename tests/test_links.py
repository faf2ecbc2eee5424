"""evaluation/links.py: the edge split keeps every node, the non-edges are non-edges of
their kind, and every metric against a small NumPy reference (or scikit-learn's own);
the Python example of docs/links.md runs."""

import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import average_precision_score, roc_auc_score
from sklearn.model_selection import StratifiedKFold

from caps2ne_np.errors import InputError
from caps2ne_np.evaluation import links
from caps2ne_np.spectral.propagation import auc

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------- naive references


def naive_average_precision(pos, neg):
    """Distinct scores: the mean over the positives of the precision among the pairs
    scored at least as high as that positive."""
    scores = [(s, 1) for s in pos] + [(s, 0) for s in neg]
    ranked = sorted(scores, key=lambda t: -t[0])
    hits, total = 0, 0.0
    for i, (_, label) in enumerate(ranked, 1):
        if label:
            hits += 1
            total += hits / i
    return total / len(pos)


def naive_hits(pos, neg, k):
    """The positives above the K-th highest negative, one by one."""
    kth = sorted(neg, reverse=True)[k - 1]
    return sum(1 for s in pos if s > kth) / len(pos)


def naive_cosine(E, pairs):
    out = []
    for u, v in pairs:
        a, b = E[u].astype(float), E[v].astype(float)
        out.append(a @ b / (np.sqrt(a @ a) * np.sqrt(b @ b)))
    return np.array(out)


def random_graph(n, p, seed, leaves=0):
    """A symmetric 0/1 adjacency: G(n, p) plus ``leaves`` nodes of degree one hanging on
    random nodes (the nodes a careless split drops)."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < p, 1)
    A = np.zeros((n + leaves, n + leaves))
    A[:n, :n] = upper | upper.T
    for leaf in range(n, n + leaves):
        hub = rng.integers(0, n)
        A[leaf, hub] = A[hub, leaf] = 1
    return sp.csr_matrix(A)


def components(A):
    return sp.csgraph.connected_components(A, directed=False)[0]


# --------------------------------------------------------------------------- the split


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_split_keeps_every_node_and_the_components(fraction, seed):
    A = random_graph(40, 0.08, seed, leaves=25)  # 25 nodes of degree one
    split = links.split_edges(A, fraction, seed)
    train = split.train_adjacency()
    had = np.diff(A.indptr) > 0
    keeps = np.diff(train.indptr) > 0
    assert np.array_equal(had, keeps), "a node lost all its training edges"
    assert components(train) == components(A)
    both = np.concatenate([split.train, split.held])
    assert len(np.unique(both, axis=0)) == len(both) == sp.triu(A, 1).nnz
    assert (both[:, 0] < both[:, 1]).all()
    m = sp.triu(A, 1).nnz
    forest = A.shape[0] - components(A)  # edges a spanning forest keeps
    assert len(split.held) == min(round(fraction * m), m - forest)


def test_split_is_seeded_and_ignores_weights():
    A = random_graph(30, 0.2, 5)
    W = A.copy()
    W.data = np.random.default_rng(0).uniform(0.5, 3, W.nnz)
    W = (sp.triu(W, 1) + sp.triu(W, 1).T).tocsr()
    a, b = links.split_edges(A, 0.2, 7), links.split_edges(W, 0.2, 7)
    assert np.array_equal(a.held, b.held) and np.array_equal(a.train, b.train)
    assert not np.array_equal(a.held, links.split_edges(A, 0.2, 8).held)
    assert np.allclose(b.train_weights, np.asarray(W[b.train[:, 0], b.train[:, 1]]).ravel())


def test_a_tree_has_nothing_to_hold_out():
    n = 10
    A = sp.csr_matrix((np.ones(2 * (n - 1)), (np.r_[0:9, 1:10], np.r_[1:10, 0:9])), (n, n))
    split = links.split_edges(A, 0.5, 0)
    assert len(split.held) == 0 and split.wanted == 4 and len(split.train) == 9


def test_directed_split_keeps_ordered_pairs_and_its_non_edges_are_ordered():
    rng = np.random.default_rng(3)
    D = sp.csr_matrix(np.triu(rng.random((25, 25)) < 0.3, 1).astype(float))  # u -> v, u < v
    split = links.split_edges(D, 0.3, 0, directed=True)
    both = np.concatenate([split.train, split.held])
    assert (both[:, 0] < both[:, 1]).all()  # as stored: u -> v, never turned around
    neg = links.sample_non_edges(split, 200, "uniform", seed=0)
    assert not np.asarray(D[neg[:, 0], neg[:, 1]]).any()  # no u -> v edge
    assert np.asarray(D[neg[:, 1], neg[:, 0]]).any()  # but v -> u may be one
    with pytest.raises(InputError, match="symmetric"):
        links.split_edges(D, 0.3, 0)


# --------------------------------------------------------------------------- non-edges


@pytest.mark.parametrize("kind", links.NEGATIVE_KINDS)
def test_non_edges_are_distinct_non_edges_of_the_whole_graph(kind):
    A = random_graph(50, 0.1, 1, leaves=10)
    split = links.split_edges(A, 0.2, 0)
    neg = links.sample_non_edges(split, 150, kind, seed=4)
    assert len(neg) == 150
    assert (neg[:, 0] != neg[:, 1]).all()
    assert not np.asarray(A[neg[:, 0], neg[:, 1]]).any()
    assert len(np.unique(np.sort(neg, axis=1), axis=0)) == len(neg)
    if kind == "two-hop":
        train = split.train_adjacency()
        common = np.asarray((train[neg[:, 0]].multiply(train[neg[:, 1]])).sum(axis=1)).ravel()
        assert (common > 0).all()


def test_degree_matched_ends_have_the_degree_of_edge_ends():
    # a star plus a sparse rest: the hub ends many edges and few uniform pairs
    A = random_graph(200, 0.01, 2).tolil()
    A[0, 1:120] = 1
    A[1:120, 0] = 1
    A = A.tocsr()
    split = links.split_edges(A, 0.1, 0)
    deg = np.diff(A.indptr)
    uni = links.sample_non_edges(split, 300, "uniform", seed=0)
    hard = links.sample_non_edges(split, 300, "degree", seed=0)
    edge_ends = deg[split.held].mean()
    assert deg[hard].mean() > 2 * deg[uni].mean()
    assert abs(deg[hard].mean() - edge_ends) < abs(deg[uni].mean() - edge_ends)


# --------------------------------------------------------------------------- metrics


def test_auc_matches_sklearn_with_ties():
    rng = np.random.default_rng(0)
    pos, neg = rng.integers(0, 5, 40).astype(float), rng.integers(0, 4, 60).astype(float)
    y = np.r_[np.ones(40), np.zeros(60)]
    assert auc(pos, neg) == pytest.approx(roc_auc_score(y, np.r_[pos, neg]), abs=1e-12)


def test_average_precision_matches_the_naive_definition():
    rng = np.random.default_rng(1)
    pos, neg = rng.normal(1, 1, 30), rng.normal(0, 1, 50)
    assert links.average_precision(pos, neg) == pytest.approx(naive_average_precision(pos, neg))
    y = np.r_[np.ones(30), np.zeros(50)]
    assert links.average_precision(pos, neg) == pytest.approx(
        average_precision_score(y, np.r_[pos, neg])
    )


@pytest.mark.parametrize("k", [1, 7, 50])
def test_hits_at_k_matches_the_naive_count(k):
    rng = np.random.default_rng(k)
    pos, neg = rng.normal(1, 1, 40), rng.integers(0, 6, 50).astype(float)  # ties among negatives
    assert links.hits_at_k(pos, neg, k) == pytest.approx(naive_hits(pos, neg, k))


@pytest.mark.parametrize("k", [0, 51])
def test_hits_at_k_refuses_k_out_of_range(k):
    with pytest.raises(InputError, match=r"K must be in 1\.\.50"):
        links.hits_at_k(np.ones(3), np.zeros(50), k)


def test_pair_scores_and_hadamard_match_loops():
    rng = np.random.default_rng(2)
    E = rng.standard_normal((12, 5)).astype(np.float32)
    E[3] = 0  # a zero row scores 0 by cosine
    pairs = rng.integers(0, 12, (20, 2))
    pairs = pairs[(pairs != 3).all(axis=1)]
    assert np.allclose(links.pair_scores(E, pairs, "cosine"), naive_cosine(E, pairs))
    dots = [float(E[u].astype(float) @ E[v].astype(float)) for u, v in pairs]
    assert np.allclose(links.pair_scores(E, pairs, "dot"), dots)
    assert links.pair_scores(E, np.array([[3, 4]]), "cosine")[0] == 0
    H = links.hadamard(E, pairs)
    assert np.allclose(H[0], E[pairs[0, 0]].astype(float) * E[pairs[0, 1]])


def test_logistic_scores_are_out_of_fold_decisions():
    rng = np.random.default_rng(3)
    E = rng.standard_normal((30, 4))
    pos, neg = rng.integers(0, 30, (25, 2)), rng.integers(0, 30, (25, 2))
    p, q = links.logistic_scores(E, pos, neg, folds=3, seed=9)
    pairs = np.concatenate([pos, neg])
    X = E[pairs[:, 0]] * E[pairs[:, 1]]
    y = np.r_[np.ones(25), np.zeros(25)]
    ref = np.empty(50)
    for tr, te in StratifiedKFold(3, shuffle=True, random_state=9).split(X, y):
        ref[te] = LogisticRegression(max_iter=1000).fit(X[tr], y[tr]).decision_function(X[te])
    assert np.allclose(np.r_[p, q], ref)


def test_evaluate_links_tells_good_rows_from_noise():
    n = 150
    block = np.arange(n) // 15  # ten blocks: a uniform pair shares one with chance 1/10
    rng = np.random.default_rng(4)
    upper = np.triu((block[:, None] == block[None, :]) & (rng.random((n, n)) < 0.5), 1)
    A = sp.csr_matrix((upper | upper.T).astype(float))
    split = links.split_edges(A, 0.1, 0)
    good = np.eye(10)[block] + 0.05 * rng.standard_normal((n, 10))
    noise = rng.standard_normal((n, 10))
    a = links.evaluate_links(good, split, ("uniform",), k=5)["kinds"]["uniform"]["scores"]
    b = links.evaluate_links(noise, split, ("uniform",), k=5)["kinds"]["uniform"]["scores"]
    for scorer in links.SCORERS:
        assert a[scorer]["auc"] > 0.9 and b[scorer]["auc"] < 0.6, scorer


# --------------------------------------------------------------------------- the files


def write(folder, split, ids, source=""):
    for name, text in links.split_files(split, ids, source).items():
        (folder / name).write_text(text)


def test_split_files_round_trip_with_weights(tmp_path):
    A = random_graph(20, 0.3, 6)
    A.data = np.arange(1, A.nnz + 1, dtype=float)
    A = (sp.triu(A, 1) + sp.triu(A, 1).T).tocsr()
    ids = [f"n{i}" for i in range(20)]
    split = links.split_edges(A, 0.2, 0)
    write(tmp_path, split, ids, source="g.txt")
    train = (tmp_path / links.TRAIN_FILE).read_text().splitlines()
    assert train[0].startswith("# training edges of g.txt") and len(train[1].split()) == 3
    back = links.read_split(tmp_path, A, ids)
    for name in ("train", "held", "train_weights"):
        assert np.array_equal(getattr(back, name), getattr(split, name)), name


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda held, train: held + "n0 n0\n", r"held_edges.txt:\d+: not an edge of the graph"),
        (lambda held, train: held + "x y\n", r"held_edges.txt:\d+: node 'x' is not in the graph"),
        (lambda held, train: held + train.splitlines()[1] + "\n", r"already listed"),
        (lambda held, train: "\n".join(held.splitlines()[:-1]) + "\n", r"lists \d+ of the graph"),
    ],
    ids=["non-edge", "unknown-node", "twice", "missing"],
)
def test_read_split_refuses_files_that_do_not_match(tmp_path, edit, message):
    A = random_graph(20, 0.3, 6)
    ids = [f"n{i}" for i in range(20)]
    write(tmp_path, links.split_edges(A, 0.2, 0), ids)
    held, train = tmp_path / links.HELD_FILE, tmp_path / links.TRAIN_FILE
    held.write_text(edit(held.read_text(), train.read_text()))
    with pytest.raises(InputError, match=message):
        links.read_split(tmp_path, A, ids)


def test_the_python_example_of_docs_links_runs(tmp_path, monkeypatch):
    text = (ROOT / "docs" / "links.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(block, "docs/links.md", "exec"), scope)
    assert scope["result"]["kinds"]["uniform"]["scores"]["logistic"]["auc"] > 0.5
