"""A graph as CSR arrays, the layout the walk kernels read, and the one builder of it.

A :class:`Graph` is the out-adjacency of n nodes: the out-neighbours of node i are
``indices[indptr[i]:indptr[i + 1]]`` (sorted), with edge weights ``weights[...]``
or, when ``weights is None``, weight 1 for every edge.

=========  =======  =========  ==========================================
field      dtype    shape      meaning
=========  =======  =========  ==========================================
indptr     int64    (n + 1,)   row pointers, ``indptr[0] == 0``, monotone
indices    int32    (nnz,)     out-neighbour indices, sorted within a row
weights    float32  (nnz,)     finite, > 0; ``None`` when every weight is 1
node_ids   str      n          index i -> the user's id token
=========  =======  =========  ==========================================

Every reader (:mod:`caps2ne_np.graphs.graph`) ends in :func:`build`, and so do
:func:`from_edges` and :func:`from_scipy`.
Policies (each departure from "store exactly what was given" is counted in
``Graph.stats`` and reported with one :class:`~caps2ne_np.errors.InputWarning`):

- Undirected by default: the line ``u v`` stores u->v and v->u.  ``directed=True``
  stores only u->v.
- Self loops (``u u``) are dropped by default, because a walk step that stays put
  adds no new context; ``keep_self_loops=True`` keeps them (an undirected self loop
  is stored once, with its weight).  Only dropping warns.
- Duplicate edges -- the same u->v given twice, or ``u v`` and ``v u`` in an
  undirected graph -- are merged into one edge.  Without a weight column the
  merged edge keeps weight 1 (listing an edge twice does not double it); with a
  weight column (on any line) the weights are summed.
- Nodes without out-edges (left by dropped self loops, directed sinks, or empty
  rows of a matrix) are kept; they are counted as ``isolated_nodes`` and reported.
  A walk from such a node stays in place (docs/walks.md).
- ``weights`` is ``None`` when every stored weight is exactly 1.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, InputError, InputWarning
from ..io.files import check_ids

_INT32_MAX = np.iinfo(np.int32).max
_F32_MAX = float(np.finfo(np.float32).max)


@dataclass(eq=False, repr=False)
class Graph:
    """Out-adjacency in CSR form plus the node-ID map (see the module docstring)."""

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray | None
    node_ids: list[str]
    directed: bool
    stats: dict = field(default_factory=dict)
    _index: dict | None = field(default=None, init=False, repr=False)
    _weight_column: bool | None = field(
        default=None, init=False, repr=False
    )  # the input had weights

    @property
    def n_nodes(self) -> int:
        """Number of nodes n."""
        return int(self.indptr.shape[0] - 1)

    @property
    def n_edges(self) -> int:
        """Number of stored (directed) edges, nnz; an undirected edge counts twice."""
        return int(self.indices.shape[0])

    def degree(self) -> np.ndarray:
        """Out-degree of every node, int64 (n,)."""
        return np.diff(self.indptr).astype(np.int64, copy=False)

    def to_scipy(self) -> sp.csr_matrix:
        """The adjacency as a float32 ``scipy.sparse.csr_matrix`` (weights, or ones)."""
        n = self.n_nodes
        data = self.weights if self.weights is not None else np.ones(self.n_edges, dtype=np.float32)
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(n, n), dtype=np.float32)

    def index_of(self, ids) -> np.ndarray:
        """Indices (int64) of the given id strings; a single string is treated as ``[ids]``.

        Raises ``InputError`` naming the first id that is not in the graph.
        """
        if isinstance(ids, str):
            ids = [ids]
        if self._index is None:
            self._index = {node: i for i, node in enumerate(self.node_ids)}
        index = self._index
        out = np.empty(len(ids), dtype=np.int64)
        for j, node in enumerate(ids):
            i = index.get(node)
            if i is None:
                raise InputError(
                    f"node id {node!r} is not in the graph; ids are the tokens of the edge list, "
                    f"compared as strings ('7' and '07' differ)"
                )
            out[j] = i
        return out

    def __repr__(self) -> str:
        return (
            f"Graph(n_nodes={self.n_nodes}, n_edges={self.n_edges}, directed={self.directed}, "
            f"weighted={self.weights is not None})"
        )


def raise_format_error(source, lineno, what, fix):
    """Raise GraphFormatError 'source:lineno: what; fix' (no ':lineno' when it is None)."""
    where = f"{source}:{lineno}" if lineno is not None else f"{source}"
    raise GraphFormatError(f"{where}: {what}; {fix}")


def from_edges(
    src,
    dst,
    weights,
    node_ids,
    directed: bool = False,
    keep_self_loops: bool = False,
    *,
    tokens: bool = True,
) -> Graph:
    """Graph from edge arrays: edge e goes ``src[e] -> dst[e]`` with weight ``weights[e]``.

    ``src``, ``dst``: integer arrays (m,) of node indices in [0, n); ``weights``: (m,)
    finite and > 0, or ``None`` for weight 1; ``node_ids``: n unique, non-empty,
    whitespace-free strings (``tokens=False``: any unique strings, for the Python
    API's labels; only text writers need tokens).  The same policies as :func:`read_edgelist` apply
    (symmetrise unless ``directed``, drop self loops, merge duplicates).
    """
    ids = check_ids(
        [str(x) for x in node_ids], len(node_ids), "node_ids", rows="nodes", tokens=tokens
    )
    n = len(ids)
    src = np.asarray(src)
    dst = np.asarray(dst)
    for name, arr in (("src", src), ("dst", dst)):
        if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
            raise InputError(
                f"{name} must be a 1-D integer array of node indices, got {arr.dtype} {arr.shape}"
            )
    if src.shape != dst.shape:
        raise InputError(
            f"src and dst must have the same length, got {src.shape[0]} and {dst.shape[0]}"
        )
    src = src.astype(np.int64)
    dst = dst.astype(np.int64)
    if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= n):
        raise InputError(f"src/dst contain indices outside [0, {n}); each must index node_ids")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != src.shape:
            raise InputError(f"weights must have shape {src.shape}, got {weights.shape}")
        if not np.all(np.isfinite(weights) & (weights > 0) & (weights <= _F32_MAX)):
            raise InputError("weights must be finite, > 0 and fit in float32")
    return build(src, dst, weights, ids, directed, keep_self_loops, source="edges", stacklevel=3)


def from_scipy(
    adj,
    node_ids=None,
    directed: bool = False,
    keep_self_loops: bool = False,
    *,
    source="adj",
    stacklevel=1,
) -> Graph:
    """Graph from a square scipy.sparse matrix; entry (i, j) != 0 is the edge i -> j.

    Stored zeros are not edges; duplicate entries of a COO matrix are summed (scipy's
    meaning).  With ``directed=False`` a symmetric matrix is read through its upper
    triangle, so (i, j) and (j, i) give one undirected edge with their common weight;
    an asymmetric matrix is read entry by entry like an edge list, so a reciprocal
    pair is a duplicate (merged, weights summed when not all 1).  Nodes without edges
    are kept.  ``node_ids`` defaults to ``'0' .. 'n-1'``.  ``source`` names the
    matrix in warnings, which point ``stacklevel`` frames above this call.
    """
    if not sp.issparse(adj):
        raise InputError(f"adj must be a scipy.sparse matrix, got {type(adj).__name__}")
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise InputError(f"adj must be square (n, n), got shape {adj.shape}")
    n = adj.shape[0]
    if n > _INT32_MAX:
        raise InputError(f"adj has {n} nodes; at most {_INT32_MAX} are supported (int32 indices)")
    csr = sp.csr_matrix(adj, copy=True)
    if csr.dtype == np.bool_:
        csr = csr.astype(np.float64)
    if not (np.issubdtype(csr.dtype, np.integer) or np.issubdtype(csr.dtype, np.floating)):
        raise InputError(f"adj must have a real numeric dtype, got {csr.dtype}")
    csr.sum_duplicates()
    csr.eliminate_zeros()
    ids = (
        [str(i) for i in range(n)]
        if node_ids is None
        else check_ids([str(x) for x in node_ids], n, "node_ids", rows="nodes")
    )
    data = csr.data.astype(np.float64)
    if not np.all(np.isfinite(data) & (data > 0) & (data <= _F32_MAX)):
        raise InputError(
            "adj entries must be finite, > 0 and fit in float32 (stored zeros are ignored)"
        )
    coo = csr.tocoo()
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    data = coo.data.astype(np.float64)
    if not directed and (abs(csr - csr.T) > 0).nnz == 0:
        upper = rows <= cols
        rows, cols, data = rows[upper], cols[upper], data[upper]
    weights = None if np.all(data == 1.0) else data
    return build(
        rows,
        cols,
        weights,
        ids,
        directed,
        keep_self_loops,
        source=source,
        stacklevel=stacklevel + 2,
    )


def build(
    src, dst, weights, node_ids, directed, keep_self_loops, *, source, n_lines=0, stacklevel=2
):
    """The one CSR builder: validated int64 src/dst, float64 weights or None -> Graph.

    Drops/keeps self loops, canonicalises undirected pairs to (min, max), merges
    duplicates (weights summed), symmetrises, sorts into CSR.
    """
    n = len(node_ids)
    if n > _INT32_MAX:
        raise_format_error(
            source, None, f"{n} nodes", f"at most {_INT32_MAX} nodes are supported (int32 indices)"
        )
    m_read = int(src.shape[0])
    src, dst, weights, n_loops = _drop_self_loops(src, dst, weights, keep_self_loops, source)
    m = int(src.shape[0])
    if directed:
        keys = src * n + dst
    else:
        keys = np.minimum(src, dst)
        keys *= n
        keys += np.maximum(src, dst)
    del src, dst
    key, w = _merge_duplicates(keys, weights, source)
    del keys
    n_dup = m - int(key.shape[0])
    if not directed:  # add v -> u; the keys stay distinct, so any sort gives the one order
        u, v = np.divmod(key, n)
        off = u != v
        key = np.concatenate([key, v[off] * n + u[off]])
        del u, v
        if w is None:
            key.sort()
        else:
            order = np.argsort(key)
            key, w = key[order], np.concatenate([w, w[off]])[order]
    u, v = np.divmod(key, n)
    del key
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(u, minlength=n), out=indptr[1:])
    indices = v.astype(np.int32)
    if w is not None:
        w = w.astype(np.float32)
        if np.all(w == 1.0):
            w = None
    n_isolated = int(np.count_nonzero(indptr[1:] == indptr[:-1]))
    stats = {
        "lines": int(n_lines),
        "edges_read": m_read,
        "self_loops": n_loops,
        "duplicates": n_dup,
        "isolated_nodes": n_isolated,
    }
    warn_stats(
        source, stats, weights is not None, directed, keep_self_loops, stacklevel=stacklevel + 1
    )
    graph = Graph(
        indptr=indptr,
        indices=indices,
        weights=w,
        node_ids=list(node_ids),
        directed=bool(directed),
        stats=stats,
    )
    graph._weight_column = weights is not None
    return graph


def _drop_self_loops(src, dst, weights, keep_self_loops, source):
    """(src, dst, weights, number of self loops read): the self loops dropped unless
    ``keep_self_loops``; GraphFormatError when no edge is left."""
    loop = src == dst
    n_loops = int(np.count_nonzero(loop))
    if n_loops and not keep_self_loops:
        keep = ~loop
        src, dst = src[keep], dst[keep]
        weights = weights[keep] if weights is not None else None
    if src.size == 0:
        if n_loops and not keep_self_loops:
            raise_format_error(
                source,
                None,
                f"no edges left after dropping {n_loops} self loops",
                "pass --keep-self-loops (keep_self_loops=True) to keep them",
            )
        raise_format_error(source, None, "no edges", "expected at least one edge")
    return src, dst, weights, n_loops


def _merge_duplicates(keys, weights, source):
    """(sorted distinct edge keys, their summed float64 weights or None); sorts ``keys``
    in place when there are no weights.  GraphFormatError when a sum overflows float32."""
    w = None
    if weights is None:
        keys.sort()  # np.unique without inverse hashes: several times slower on 1M keys
        key = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    else:
        key, inverse = np.unique(keys, return_inverse=True)
        w = np.bincount(inverse.ravel(), weights=weights, minlength=key.shape[0])  # in input order
        del inverse
        with np.errstate(over="ignore"):
            overflow = not np.all(np.isfinite(w.astype(np.float32)))
        if overflow:
            raise_format_error(
                source,
                None,
                "summed weights of duplicate edges overflow float32",
                "rescale the weights",
            )
    return key, w


def warn_stats(source, stats, weight_column, directed, keep_self_loops, *, stacklevel):
    """One InputWarning per policy that changed the input: dropped self loops, merged
    duplicates, nodes without out-edges (``stats`` as ``Graph.stats``)."""
    n_loops, n_dup, n_isolated = stats["self_loops"], stats["duplicates"], stats["isolated_nodes"]
    if n_loops and not keep_self_loops:
        warnings.warn(
            f"{source}: dropped {n_loops} self loop(s); pass --keep-self-loops "
            "(keep_self_loops=True) to keep them",
            InputWarning,
            stacklevel=stacklevel,
        )
    if n_dup:
        how = "weights summed" if weight_column else "kept at weight 1"
        pair = " ('u v' and 'v u' are the same undirected edge)" if not directed else ""
        warnings.warn(
            f"{source}: merged {n_dup} duplicate edge(s){pair}, {how}",
            InputWarning,
            stacklevel=stacklevel,
        )
    if n_isolated:
        warnings.warn(
            f"{source}: {n_isolated} node(s) have no out-edges; walks from them stay in place",
            InputWarning,
            stacklevel=stacklevel,
        )
