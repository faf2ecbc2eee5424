"""graphs/changes.py: the difference of two graphs by node id, against sets of edges
written out in plain Python, and the hop distance against a breadth-first search."""

from collections import deque

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.graphs.changes import diff, hops_from
from caps2ne_np.graphs.csr import from_edges


def graph(edges, ids, directed=False, weights=None):
    src = np.array([ids.index(u) for u, _ in edges], dtype=np.int64)
    dst = np.array([ids.index(v) for _, v in edges], dtype=np.int64)
    w = None if weights is None else np.asarray(weights, dtype=np.float32)
    return from_edges(src, dst, w, list(ids), directed=directed)


def stored(g):
    """{(u id, v id): weight} of every stored edge."""
    w = g.weights if g.weights is not None else np.ones(g.n_edges)
    out = {}
    for i in range(g.n_nodes):
        for e in range(g.indptr[i], g.indptr[i + 1]):
            out[(g.node_ids[i], g.node_ids[g.indices[e]])] = float(w[e])
    return out


def naive_diff(old, new):
    kept = set(old.node_ids) & set(new.node_ids)
    a, b = stored(old), stored(new)
    a = {e: w for e, w in a.items() if e[0] in kept and e[1] in kept}
    b = {e: w for e, w in b.items() if e[0] in kept and e[1] in kept}
    added = {e for e in b if a.get(e) != b[e]}
    removed = {e for e in a if b.get(e) != a[e]}
    gone = set(old.node_ids) - kept
    near_gone = {v for (u, v) in stored(old) if u in gone and v in kept}
    near_gone |= {u for (u, v) in stored(old) if v in gone and u in kept}
    touched = (set(new.node_ids) - kept) | {x for e in added | removed for x in e} | near_gone
    return added, removed, touched, gone


def ids_of(g, pairs):
    return {(g.node_ids[u], g.node_ids[v]) for u, v in pairs}


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_diff_is_the_sets_of_edges_written_out(seed, directed):
    rng = np.random.default_rng(seed)
    ids = [f"n{i}" for i in range(12)]
    old_edges = {tuple(rng.choice(ids, 2, replace=False)) for _ in range(20)}
    old_ids = ids[:10]
    old_edges = [e for e in old_edges if e[0] in old_ids and e[1] in old_ids]
    new_edges = [e for e in old_edges if rng.random() > 0.2]  # some removed
    new_edges += [tuple(rng.choice(ids, 2, replace=False)) for _ in range(5)]  # some added
    new_ids = [i for i in ids if i != "n3"]  # n3 removed, n10 and n11 may come
    new_edges = [e for e in new_edges if "n3" not in e]
    old = graph(old_edges, old_ids, directed)
    new = graph(new_edges, [i for i in new_ids if any(i in e for e in new_edges)], directed)
    change = diff(old, new)
    added, removed, touched, gone = naive_diff(old, new)
    assert ids_of(new, change.edges_added) == added
    assert ids_of(new, change.edges_removed) == removed
    assert {new.node_ids[i] for i in change.touched} == touched
    assert {old.node_ids[i] for i in change.removed_old} == gone
    assert [old.node_ids[i] for i in change.kept_old] == [new.node_ids[j] for j in change.kept_new]
    assert {new.node_ids[j] for j in change.added} == set(new.node_ids) - set(old.node_ids)


def test_a_changed_weight_is_an_edge_removed_and_added():
    old = graph([("a", "b"), ("b", "c")], ["a", "b", "c"], weights=[1.0, 2.0])
    new = graph([("a", "b"), ("b", "c")], ["a", "b", "c"], weights=[1.0, 3.0])
    change = diff(old, new)
    assert ids_of(new, change.edges_added) == {("b", "c"), ("c", "b")}
    assert ids_of(new, change.edges_removed) == {("b", "c"), ("c", "b")}


def test_the_same_graph_is_no_change_even_with_nodes_reordered():
    old = graph([("a", "b"), ("b", "c")], ["a", "b", "c"])
    new = graph([("b", "c"), ("a", "b")], ["c", "b", "a"])
    change = diff(old, new)
    assert change.empty and len(change.kept_new) == 3


def test_graphs_read_one_directed_one_not_are_refused():
    old = graph([("a", "b")], ["a", "b"], directed=True)
    new = graph([("a", "b")], ["a", "b"], directed=False)
    with pytest.raises(InputError, match="--directed"):
        diff(old, new)


def naive_hops(g, seeds, max_hops):
    nbrs = {i: set() for i in range(g.n_nodes)}
    for i in range(g.n_nodes):
        for j in g.indices[g.indptr[i] : g.indptr[i + 1]]:
            nbrs[i].add(int(j))
            nbrs[int(j)].add(i)
    dist = {s: 0 for s in seeds}
    queue = deque(seeds)
    while queue:
        u = queue.popleft()
        for v in nbrs[u]:
            if v not in dist and dist[u] < max_hops:
                dist[v] = dist[u] + 1
                queue.append(v)
    return [dist.get(i, -1) for i in range(g.n_nodes)]


@pytest.mark.parametrize("max_hops", [0, 1, 2, 5])
def test_hops_are_a_breadth_first_search_either_way(max_hops):
    rng = np.random.default_rng(max_hops)
    ids = [str(i) for i in range(30)]
    edges = [tuple(rng.choice(ids, 2, replace=False)) for _ in range(35)]
    g = graph(edges, ids, directed=True)
    seeds = [0, 7]
    assert hops_from(g, seeds, max_hops).tolist() == naive_hops(g, seeds, max_hops)


def test_hops_refuse_seeds_outside_the_graph():
    g = graph([("a", "b")], ["a", "b"])
    with pytest.raises(InputError, match=r"\[0, 2\)"):
        hops_from(g, [2], 1)
