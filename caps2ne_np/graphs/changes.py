"""What changed between two versions of a graph, by the user's node ids: the nodes kept,
added and removed, the edges added and removed between kept nodes, and how many hops
each node of the new graph stands from the change.

An update of a trained model (a graph that grew or lost edges) reads this: the kept
nodes keep their rows, the added ones need a start, and training walks begin near the
change (``hops_from``).  Edges are compared as stored (both directions of an undirected
edge); a weight that changed on an edge both versions have is a change too.

    change = diff(old, new)          # two csr.Graph
    dist = hops_from(new, change.touched, max_hops=2)   # -1: further than 2 hops
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .csr import Graph


@dataclass(frozen=True)
class GraphChange:
    """The difference of two graphs (``diff``).  Indices are the new graph's unless the
    field says old.

    kept_old, kept_new: (K,) int64, a node both graphs have: its index in each.
    added:              (A,) int64, nodes only the new graph has.
    removed_old:        (R,) int64, nodes only the old graph has (old indices).
    edges_added:        (m, 2) int64, stored edges u->v of the new graph between kept
                        nodes that the old graph lacks (or had with another weight).
    edges_removed:      (m', 2) int64, stored edges of the old graph between kept nodes
                        that the new graph lacks (or has with another weight), in new
                        indices.
    touched:            (T,) int64, sorted: the added nodes, the kept nodes that an added
                        or removed edge ends at, and the kept neighbours of removed nodes.
    """

    kept_old: np.ndarray
    kept_new: np.ndarray
    added: np.ndarray
    removed_old: np.ndarray
    edges_added: np.ndarray
    edges_removed: np.ndarray
    touched: np.ndarray

    @property
    def empty(self):
        """True when the graphs are the same (same nodes, same stored edges)."""
        return len(self.touched) == 0 and len(self.removed_old) == 0


def _edges(matrix):
    """(m, 2) int64 stored edges and (m,) float64 weights of a sparse matrix."""
    coo = sp.coo_matrix(matrix)
    return np.c_[coo.row, coo.col].astype(np.int64), coo.data.astype(np.float64)


def _keys(matrix, n):
    """u * n + v of every stored edge u->v."""
    edges, _ = _edges(matrix)
    return edges[:, 0] * n + edges[:, 1]


def diff(old: Graph, new: Graph) -> GraphChange:
    """The change from ``old`` to ``new`` (module docstring).  Both must be directed, or
    both undirected: a graph read the other way is not a change of the same graph."""
    if bool(old.directed) != bool(new.directed):
        raise InputError(
            "the old graph was read as "
            + ("directed" if old.directed else "undirected")
            + " and the new one as "
            + ("directed" if new.directed else "undirected")
            + ": read both the same way (--directed)"
        )
    old_index = {node: i for i, node in enumerate(old.node_ids)}
    kept_new, kept_old, added = [], [], []
    for j, node in enumerate(new.node_ids):
        i = old_index.get(node)
        if i is None:
            added.append(j)
        else:
            kept_new.append(j)
            kept_old.append(i)
    kept_new = np.asarray(kept_new, dtype=np.int64)
    kept_old = np.asarray(kept_old, dtype=np.int64)
    present = np.zeros(old.n_nodes, dtype=bool)
    present[kept_old] = True
    removed_old = np.flatnonzero(~present).astype(np.int64)

    # the old graph restricted to the kept nodes, renumbered into the new indices
    to_new = np.full(old.n_nodes, -1, dtype=np.int64)
    to_new[kept_old] = kept_new
    A_old = old.to_scipy()
    sub = A_old[kept_old][:, kept_old].tocoo()
    A_old_kept = sp.csr_matrix(
        (sub.data, (kept_new[sub.row], kept_new[sub.col])), shape=(new.n_nodes,) * 2
    )
    A_new = new.to_scipy()
    is_kept = np.zeros(new.n_nodes, dtype=bool)
    is_kept[kept_new] = True
    A_new_kept = A_new.multiply(is_kept[:, None]).multiply(is_kept[None, :]).tocsr()
    delta = (A_new_kept - A_old_kept).tocsr()
    delta.eliminate_zeros()
    changed, _ = _edges(delta)
    n = np.int64(new.n_nodes)
    key = changed[:, 0] * n + changed[:, 1]
    in_new = np.isin(key, _keys(A_new_kept, n))
    in_old = np.isin(key, _keys(A_old_kept, n))
    edges_added = changed[in_new]
    edges_removed = changed[in_old]

    # kept neighbours of removed nodes (both directions), in new indices
    gone = A_old[removed_old]
    near_removed = to_new[np.unique(np.r_[gone.indices, A_old[:, removed_old].tocoo().row])]
    touched = np.unique(
        np.r_[added, changed.ravel(), near_removed[near_removed >= 0]].astype(np.int64)
    )
    return GraphChange(
        kept_old=kept_old,
        kept_new=kept_new,
        added=np.asarray(added, dtype=np.int64),
        removed_old=removed_old,
        edges_added=edges_added,
        edges_removed=edges_removed,
        touched=touched,
    )


def hops_from(graph: Graph, seeds, max_hops):
    """(n,) int64: the number of hops from the nearest seed to each node of ``graph``,
    following edges either way (a breadth-first search over A + A^T), -1 for a node
    further than ``max_hops`` (or not reached).  ``seeds``: node indices."""
    max_hops = int(max_hops)
    if max_hops < 0:
        raise InputError(f"max_hops must be >= 0, got {max_hops}")
    A = graph.to_scipy()
    A = (A + A.T).tocsr()
    dist = np.full(graph.n_nodes, -1, dtype=np.int64)
    frontier = np.unique(np.asarray(seeds, dtype=np.int64))
    if frontier.size and (frontier.min() < 0 or frontier.max() >= graph.n_nodes):
        raise InputError(f"seed nodes must be in [0, {graph.n_nodes})")
    dist[frontier] = 0
    for hop in range(1, max_hops + 1):
        if frontier.size == 0:
            break
        reached = np.unique(A[frontier].indices)
        frontier = reached[dist[reached] < 0]
        dist[frontier] = hop
    return dist
