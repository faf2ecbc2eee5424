"""The inductive split (paper Sec. 4.3): the test nodes and every edge touching them
removed from a graph (:func:`inductive_split`).  A model is trained on the rest, and the
test nodes are embedded by Algorithm 3 on the full graph (``infer.infer_embeddings``)
before the classifier scores them (docs/inductive.md)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import scipy.sparse as sp

from ..errors import InputError, InputWarning
from ..graphs.csr import Graph

log = logging.getLogger(__name__)


def inductive_split(graph_or_adj, test_nodes):
    """Remove the test nodes and every edge touching them: ``(subgraph, kept)``.

    graph_or_adj : csr.Graph, or a scipy.sparse (N, N) adjacency
    test_nodes   : graph indices (int), or node ids (str) of a Graph

    Returns the subgraph on the other nodes (a Graph with their ids, or a CSR matrix)
    and ``kept`` int64 (N - |test|,): subgraph node i is original node kept[i] (kept is
    sorted, so the remaining nodes keep their relative order).  Nodes left without
    edges stay in the subgraph (their walks stay in place, so their o_v is learned from
    their own features alone); an ``InputWarning`` gives their count.  Train on the subgraph,
    then embed the test nodes with ``infer_embeddings`` on the full graph.
    """
    is_graph = isinstance(graph_or_adj, Graph)
    adj, n = _adjacency(graph_or_adj, is_graph)
    test = _test_indices(graph_or_adj, test_nodes, is_graph, n)
    keep = np.ones(n, dtype=bool)
    keep[test] = False
    kept = np.flatnonzero(keep).astype(np.int64)
    if kept.size < 2:
        raise InputError(
            f"removing {test.size} test nodes leaves {kept.size} node(s); training needs at least 2"
        )
    sub = adj[kept][:, kept].tocsr()
    sub.sort_indices()
    indptr = np.ascontiguousarray(sub.indptr, dtype=np.int64)
    lone = np.flatnonzero((np.diff(indptr) == 0) & (np.diff(sub.tocsc().indptr) == 0))
    if lone.size:
        first = graph_or_adj.node_ids[int(kept[lone[0]])] if is_graph else int(kept[lone[0]])
        warnings.warn(
            f"{lone.size} node(s) left without edges by removing the test nodes, e.g. "
            f"{first!r}: training learns their o_v from their own features alone (an "
            "edge list of the subgraph would drop them); infer_embeddings on the full "
            "graph embeds them from their edges",
            InputWarning,
            stacklevel=2,
        )
    if not is_graph:
        return sub, kept
    return _kept_graph(graph_or_adj, sub, indptr, kept, test.size), kept


def _adjacency(graph_or_adj, is_graph):
    """(CSR adjacency, node count) of a Graph or a square scipy.sparse matrix."""
    if is_graph:
        return graph_or_adj.to_scipy(), graph_or_adj.n_nodes
    if (
        sp.issparse(graph_or_adj)
        and graph_or_adj.ndim == 2
        and graph_or_adj.shape[0] == graph_or_adj.shape[1]
    ):
        return sp.csr_matrix(graph_or_adj), graph_or_adj.shape[0]
    raise InputError(
        "graph_or_adj must be a caps2ne_np.graphs.csr.Graph or a square scipy.sparse matrix"
    )


def _test_indices(graph_or_adj, test_nodes, is_graph, n):
    """The test nodes as sorted unique int64 indices in [0, n) (ids looked up in a Graph)."""
    test = np.asarray(test_nodes)
    if test.size and not np.issubdtype(test.dtype, np.integer):
        if not is_graph:
            raise InputError("test_nodes of a scipy adjacency must be integer node indices")
        test = graph_or_adj.index_of([str(t) for t in test_nodes])
    test = np.unique(test.astype(np.int64))
    if test.size and (test[0] < 0 or test[-1] >= n):
        raise InputError(f"test_nodes must be node indices in [0, {n})")
    return test


def _kept_graph(graph, sub, indptr, kept, n_removed):
    """The Graph of the kept nodes: the subgraph ``sub`` (CSR, its ``indptr`` as int64)
    with their ids, the weights of ``graph`` (None when all 1), and the split's stats."""
    weights = None
    if graph.weights is not None:
        weights = np.ascontiguousarray(sub.data, dtype=np.float32)
        if np.all(weights == 1.0):
            weights = None
    isolated = int(np.count_nonzero(np.diff(indptr) == 0))  # as graph.py counts them
    stats = dict(
        removed_nodes=int(n_removed),
        removed_edges=int(graph.n_edges - sub.nnz),
        isolated_nodes=isolated,
    )
    log.info(
        "inductive split: removed %d nodes and %d stored edges; %d nodes left without edges",
        n_removed,
        stats["removed_edges"],
        isolated,
    )
    ids = graph.node_ids
    return Graph(
        indptr=indptr,
        indices=np.ascontiguousarray(sub.indices, dtype=np.int32),
        weights=weights,
        node_ids=[ids[i] for i in kept],
        directed=graph.directed,
        stats=stats,
    )
