"""bench/graphgen.py: the planted-community graphs of bench/vs_deepwalk.py are
deterministic, simple, symmetric, heavy-tailed and mixed as asked (no Numba here)."""

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import graphgen  # noqa: E402


@pytest.fixture(scope="module")
def g3k():
    return graphgen.lfr_like(3000, mu=0.3, seed=5)


def test_same_seed_same_graph_other_seed_other_graph(g3k):
    adj, labels = g3k
    adj2, labels2 = graphgen.lfr_like(3000, mu=0.3, seed=5)
    assert np.array_equal(adj.indptr, adj2.indptr) and np.array_equal(adj.indices, adj2.indices)
    assert np.array_equal(labels, labels2)
    adj3, _ = graphgen.lfr_like(3000, mu=0.3, seed=6)
    assert adj3.nnz != adj.nnz or not np.array_equal(adj3.indices, adj.indices)


def test_simple_symmetric_graph_of_ones_without_isolated_nodes(g3k):
    adj, labels = g3k
    assert isinstance(adj, sp.csr_matrix) and adj.dtype == np.float32 and adj.shape == (3000, 3000)
    assert np.all(adj.data == 1.0)
    assert (adj - adj.T).nnz == 0
    assert adj.diagonal().sum() == 0
    assert np.diff(adj.indptr).min() >= 1
    assert labels.dtype == np.int64 and labels.shape == (3000,)
    assert np.array_equal(np.unique(labels), np.arange(labels.max() + 1))  # every community used


@pytest.mark.parametrize("n,mu", [(1000, 0.3), (3000, 0.5), (2000, 0.1)])
def test_realized_mixing_and_mean_degree_close_to_the_targets(n, mu):
    adj, labels = graphgen.lfr_like(n, mu=mu, seed=1)
    per_node, per_edge = graphgen.mixing(adj, labels)
    assert abs(per_node - mu) < 0.03 and abs(per_edge - mu) < 0.04
    assert 13.0 < adj.nnz / n < 17.0  # target 15, a little lost to duplicates


def test_degrees_and_community_sizes_are_heavy_tailed(g3k):
    adj, labels = g3k
    deg = np.diff(adj.indptr)
    assert deg.max() > 6 * deg.mean()
    assert np.median(deg) < deg.mean()  # right-skewed
    sizes = np.bincount(labels)
    s_min, s_max, _ = graphgen.default_sizes(3000)
    assert sizes.min() >= s_min and sizes.max() <= s_max + 1
    assert sizes.max() > 3 * sizes.min() and np.median(sizes) < sizes.mean()


def test_nodes_with_many_internal_edges_sit_in_communities_that_hold_them():
    adj, labels = graphgen.lfr_like(1000, mu=0.1, seed=2, max_degree=90)
    rows = np.repeat(np.arange(1000), np.diff(adj.indptr))
    internal = np.bincount(rows, weights=labels[rows] == labels[adj.indices], minlength=1000)
    assert np.all(internal < np.bincount(labels)[labels])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="mu"):
        graphgen.lfr_like(100, mu=1.0)
    with pytest.raises(ValueError, match="n: expected"):
        graphgen.lfr_like(2)


def test_edge_list_and_label_files(tmp_path):
    adj, labels = graphgen.lfr_like(200, mu=0.3, seed=0, min_community=10, max_community=60)
    path = tmp_path / "g.txt"
    n_edges = graphgen.write_edgelist(path, adj)
    edges = np.loadtxt(path, dtype=np.int64).reshape(-1, 2)
    assert n_edges == edges.shape[0] == adj.nnz // 2
    assert np.all(edges[:, 0] < edges[:, 1])
    assert np.array_equal(edges, edges[np.lexsort((edges[:, 1], edges[:, 0]))])
    back = sp.coo_matrix((np.ones(n_edges), (edges[:, 0], edges[:, 1])), shape=adj.shape)
    assert ((back + back.T) != adj).nnz == 0
    graphgen.write_labels(tmp_path / "g.labels", labels)
    lab = np.loadtxt(tmp_path / "g.labels", dtype=np.int64)
    assert np.array_equal(lab[:, 0], np.arange(200)) and np.array_equal(lab[:, 1], labels)
