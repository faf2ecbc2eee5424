"""Graphs as CSR arrays: edge-list / ``.npz`` / ``.mat`` readers and the node-ID map.

A :class:`Graph` is the out-adjacency of n nodes in CSR form, the layout the walk
kernels read: the out-neighbours of node i are
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

Edge-list format (docs/input-formats.md): one edge per line, ``u v`` or ``u v w``,
fields separated by whitespace; ``#`` starts a comment (whole line or trailing);
blank lines are ignored.  Node ids are arbitrary tokens kept as strings (``7`` and
``07`` are different nodes), numbered in order of first appearance.  A missing
weight is 1; a weight must be a finite number > 0 that fits in float32.

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

Errors in a file raise :class:`~caps2ne_np.errors.GraphFormatError` with one line,
``"<path>:<line>: <what is wrong>; <expected / fix>"``, or ``"<path>: ..."`` for
problems of the whole file (missing, a directory, no edges).  No other exception
type escapes for bad file content.  Bad in-memory arrays passed to
:func:`from_edges` / :func:`from_scipy` raise :class:`~caps2ne_np.errors.InputError`.

This module compiles no Numba kernel; it is plain vectorised NumPy/SciPy.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from caps2ne_np.errors import GraphFormatError, InputError, InputWarning
from caps2ne_np.io import read_sparse_npz

__all__ = ["Graph", "read_edgelist", "read_graph", "from_scipy", "from_edges"]

_INT32_MAX = np.iinfo(np.int32).max
_F32_MAX = float(np.finfo(np.float32).max)
_FORMAT = "'u v' or 'u v w' (whitespace separated, '#' starts a comment)"


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


def _short(token: str) -> str:
    """repr of a token for a one-line message (escapes control characters, cuts long ones)."""
    return repr(token) if len(token) <= 40 else repr(token[:37]) + "..."


def _fail(source, lineno, what, fix):
    where = f"{source}:{lineno}" if lineno is not None else f"{source}"
    raise GraphFormatError(f"{where}: {what}; {fix}")


def _read_text(path: Path, source: str) -> str:
    """The file's text, or a GraphFormatError for a missing/unreadable/binary/non-UTF-8 file."""
    if not path.exists():
        _fail(source, None, "no such file", "check the path to the edge list")
    if path.is_dir():
        _fail(source, None, "is a directory", "pass the edge-list file itself")
    try:
        data = path.read_bytes()
    except OSError as err:
        _fail(source, None, f"cannot be read ({err.strerror or err})", "check the file's permissions")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        _fail(source, line, "binary content (NUL byte)", "expected a UTF-8 text edge list")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        _fail(
            source,
            line,
            f"invalid UTF-8 (byte 0x{data[err.start]:02x})",
            "node ids and weights must be UTF-8 text; re-encode the file (e.g. iconv -t UTF-8)",
        )
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _parse_weights(tokens, linenos, source):
    """float64 weights of the given tokens; GraphFormatError on the first bad one."""
    try:
        w = np.fromiter(map(float, tokens), dtype=np.float64, count=len(tokens))
    except ValueError:
        for tok, line in zip(tokens, linenos):
            try:
                float(tok)
            except ValueError:
                _fail(source, int(line), f"weight {_short(tok)} is not a number", "expected a number > 0 in the third column")
        _fail(source, None, "a weight is not a number", "expected a number > 0 in the third column")
    with np.errstate(over="ignore"):
        w32 = w.astype(np.float32)  # the stored value: '3.40282347e+38' is float32's max, not beyond it
    bad = ~(np.isfinite(w) & (w > 0) & np.isfinite(w32) & (w32 > 0))  # NaN, <= 0, overflows or underflows float32
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        _fail(
            source,
            int(linenos[j]),
            f"weight {_short(tokens[j])} is not a finite number > 0 that fits in float32",
            "weights must lie in (0, 3.4e38]; drop the edge instead of giving it weight 0",
        )
    return w


def read_edgelist(path, directed: bool = False, keep_self_loops: bool = False) -> Graph:
    """Read a whitespace-separated edge list (``u v`` or ``u v w`` per line) into a Graph.

    See the module docstring for the format and the self-loop / duplicate /
    isolated-node policies.  Raises ``GraphFormatError`` ("path:line: ...") for bad
    content and warns (``InputWarning``) for dropped self loops, merged duplicates and
    nodes without out-edges.
    """
    return _read_edgelist(path, directed, keep_self_loops, stacklevel=4)


def _read_edgelist(path, directed, keep_self_loops, *, stacklevel):
    source = os.fspath(path)
    text = _read_text(Path(source), source)
    lines = text.split("\n")
    n_lines = len(lines) - 1 if text.endswith("\n") else len(lines)
    if text == "":
        n_lines = 0
    if "#" in text:
        rows = [line.partition("#")[0].split() for line in lines]
    else:
        rows = [line.split() for line in lines]
    lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    bad = np.flatnonzero((lens == 1) | (lens > 3))
    if bad.size:
        i = int(bad[0])
        what = f"1 field {_short(rows[i][0])}" if lens[i] == 1 else f"{lens[i]} fields"
        _fail(source, i + 1, f"line has {what}", "expected " + _FORMAT)
    has_edge = np.flatnonzero(lens >= 2)
    if has_edge.size == 0:
        _fail(source, None, f"no edges in {n_lines} line(s)", "expected one edge per line: " + _FORMAT)
    edges = [rows[i] for i in has_edge]
    m = len(edges)
    flat = [None] * (2 * m)
    flat[0::2] = [r[0] for r in edges]
    flat[1::2] = [r[1] for r in edges]
    index = dict.fromkeys(flat)  # insertion order = order of first appearance
    for i, node in enumerate(index):
        index[node] = i
    codes = np.fromiter(map(index.__getitem__, flat), dtype=np.int64, count=2 * m)
    node_ids = list(index)
    weights = None
    weighted_rows = np.flatnonzero(lens[has_edge] == 3)
    if weighted_rows.size:
        tokens = [edges[j][2] for j in weighted_rows]
        weights = np.ones(m, dtype=np.float64)
        weights[weighted_rows] = _parse_weights(tokens, has_edge[weighted_rows] + 1, source)
    return _build(
        codes[0::2],
        codes[1::2],
        weights,
        node_ids,
        directed,
        keep_self_loops,
        source=source,
        n_lines=n_lines,
        stacklevel=stacklevel,
    )


def _check_node_ids(node_ids, n, what="node_ids"):
    """node_ids as a list of non-empty, whitespace-free, unique strings of length n."""
    ids = [str(x) for x in node_ids]
    if len(ids) != n:
        raise InputError(f"{what} has {len(ids)} entries for {n} nodes; give one id per node")
    for node in ids:
        if not node or node.split() != [node]:
            raise InputError(
                f"{what} contains {node!r}; ids must be non-empty and contain no whitespace "
                "(they are written as tokens in word2vec files)"
            )
    if len(set(ids)) != n:
        seen = set()
        for node in ids:
            if node in seen:
                raise InputError(f"{what} contains {node!r} twice; ids must be unique")
            seen.add(node)
    return ids


def from_edges(src, dst, weights, node_ids, directed: bool = False, keep_self_loops: bool = False) -> Graph:
    """Graph from edge arrays: edge e goes ``src[e] -> dst[e]`` with weight ``weights[e]``.

    ``src``, ``dst``: integer arrays (m,) of node indices in [0, n); ``weights``: (m,)
    finite and > 0, or ``None`` for weight 1; ``node_ids``: n unique, non-empty,
    whitespace-free strings.  The same policies as :func:`read_edgelist` apply
    (symmetrise unless ``directed``, drop self loops, merge duplicates).
    """
    ids = _check_node_ids(node_ids, len(node_ids))
    n = len(ids)
    src = np.asarray(src)
    dst = np.asarray(dst)
    for name, arr in (("src", src), ("dst", dst)):
        if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
            raise InputError(f"{name} must be a 1-D integer array of node indices, got {arr.dtype} {arr.shape}")
    if src.shape != dst.shape:
        raise InputError(f"src and dst must have the same length, got {src.shape[0]} and {dst.shape[0]}")
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
    return _build(src, dst, weights, ids, directed, keep_self_loops, source="edges", stacklevel=3)


def from_scipy(adj, node_ids=None, directed: bool = False, keep_self_loops: bool = False) -> Graph:
    """Graph from a square scipy.sparse matrix; entry (i, j) != 0 is the edge i -> j.

    Stored zeros are not edges; duplicate entries of a COO matrix are summed (scipy's
    meaning).  With ``directed=False`` a symmetric matrix is read through its upper
    triangle, so (i, j) and (j, i) give one undirected edge with their common weight;
    an asymmetric matrix is read entry by entry like an edge list, so a reciprocal
    pair is a duplicate (merged, weights summed when not all 1).  Nodes without edges
    are kept.  ``node_ids`` defaults to ``'0' .. 'n-1'``.
    """
    return _from_scipy(adj, node_ids, directed, keep_self_loops, source="adj", stacklevel=4)


def _from_scipy(adj, node_ids, directed, keep_self_loops, *, source, stacklevel):
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
    ids = [str(i) for i in range(n)] if node_ids is None else _check_node_ids(node_ids, n)
    data = csr.data.astype(np.float64)
    if not np.all(np.isfinite(data) & (data > 0) & (data <= _F32_MAX)):
        raise InputError("adj entries must be finite, > 0 and fit in float32 (stored zeros are ignored)")
    coo = csr.tocoo()
    rows, cols = coo.row.astype(np.int64), coo.col.astype(np.int64)
    data = coo.data.astype(np.float64)
    if not directed and (abs(csr - csr.T) > 0).nnz == 0:
        upper = rows <= cols
        rows, cols, data = rows[upper], cols[upper], data[upper]
    weights = None if np.all(data == 1.0) else data
    return _build(rows, cols, weights, ids, directed, keep_self_loops, source=source, stacklevel=stacklevel)


def read_graph(path, directed: bool = False, keep_self_loops: bool = False) -> Graph:
    """Read a graph file by suffix: ``.npz`` (scipy.sparse.save_npz), ``.mat``, else an edge list.

    A ``.mat`` file must hold one sparse matrix, or a variable named ``network`` (the
    BlogCatalog / PPI / Flickr files).  Matrix node ids are ``'0' .. 'n-1'``.
    """
    source = os.fspath(path)
    suffix = Path(source).suffix.lower()
    if suffix not in (".npz", ".mat"):
        return _read_edgelist(source, directed, keep_self_loops, stacklevel=4)
    p = Path(source)
    if not p.is_file():
        _fail(source, None, "is a directory" if p.is_dir() else "no such file", "check the path to the graph")
    if suffix == ".npz":
        try:
            adj = read_sparse_npz(source)
        except Exception as err:  # noqa: BLE001 -- any failure of the reader is a bad file
            _fail(source, None, f"not a scipy.sparse .npz ({type(err).__name__}: {err})", "write it with scipy.sparse.save_npz")
    else:
        import scipy.io

        try:
            mat = scipy.io.loadmat(source)
        except Exception as err:  # noqa: BLE001 -- any failure of the reader is a bad file
            _fail(source, None, f"not a MATLAB .mat file ({type(err).__name__}: {err})", "save it with scipy.io.savemat")
        names = [k for k in mat if not k.startswith("__")]
        sparse = [k for k in names if sp.issparse(mat[k])]
        if "network" in names:
            adj = mat["network"]
        elif len(sparse) == 1:
            adj = mat[sparse[0]]
        else:
            _fail(source, None, f"holds variables {names}", "expected a sparse matrix named 'network' or exactly one sparse matrix")
    try:
        adj = sp.csr_matrix(adj)
        if adj.format == "csr":
            adj.check_format(full_check=True)
    except MemoryError:
        shape = f"{adj.shape[0]} x {adj.shape[1]}"
        _fail(source, None, f"a {shape} matrix does not fit in memory", "check the matrix shape")
    except Exception as err:  # noqa: BLE001 -- a .mat variable may be of any type
        what = f"not a matrix ({type(err).__name__}: {err})"
        _fail(source, None, what, "expected a square sparse matrix of finite weights > 0")
    try:
        return _from_scipy(adj, None, directed, keep_self_loops, source=source, stacklevel=4)
    except GraphFormatError:
        raise
    except InputError as err:
        _fail(source, None, f"bad adjacency matrix ({err})", "expected a square sparse matrix of finite weights > 0")
    except MemoryError:
        _fail(source, None, f"a {adj.shape[0]}-node graph does not fit in memory", "check the matrix shape")


def _build(src, dst, weights, node_ids, directed, keep_self_loops, *, source, n_lines=0, stacklevel=2):
    """The shared core: validated int64 src/dst, float64 weights or None -> Graph.

    Drops/keeps self loops, canonicalises undirected pairs to (min, max), merges
    duplicates (weights summed), symmetrises, sorts into CSR.
    """
    n = len(node_ids)
    if n > _INT32_MAX:
        _fail(source, None, f"{n} nodes", f"at most {_INT32_MAX} nodes are supported (int32 indices)")
    m_read = int(src.shape[0])
    loop = src == dst
    n_loops = int(np.count_nonzero(loop))
    if n_loops and not keep_self_loops:
        keep = ~loop
        src, dst = src[keep], dst[keep]
        weights = weights[keep] if weights is not None else None
    if src.size == 0:
        if n_loops and not keep_self_loops:
            _fail(source, None, f"no edges left after dropping {n_loops} self loops", "pass keep_self_loops=True to keep them")
        _fail(source, None, "no edges", "expected at least one edge")
    if directed:
        u, v = src, dst
    else:
        u, v = np.minimum(src, dst), np.maximum(src, dst)
    key, inverse = np.unique(u * n + v, return_inverse=True)
    n_dup = int(u.shape[0] - key.shape[0])
    w = None
    if weights is not None:
        w = np.bincount(inverse.ravel(), weights=weights, minlength=key.shape[0])
        with np.errstate(over="ignore"):
            overflow = not np.all(np.isfinite(w.astype(np.float32)))
        if overflow:
            _fail(source, None, "summed weights of duplicate edges overflow float32", "rescale the weights")
    u, v = key // n, key % n
    if not directed:
        off = u != v
        u, v = np.concatenate([u, v[off]]), np.concatenate([v, u[off]])
        w = np.concatenate([w, w[off]]) if w is not None else None
        order = np.argsort(u * n + v, kind="stable")
        u, v = u[order], v[order]
        w = w[order] if w is not None else None
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
    if n_loops and not keep_self_loops:
        warnings.warn(
            f"{source}: dropped {n_loops} self loop(s); pass keep_self_loops=True to keep them",
            InputWarning,
            stacklevel=stacklevel,
        )
    if n_dup:
        how = "weights summed" if weights is not None else "kept at weight 1"
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
    return Graph(indptr=indptr, indices=indices, weights=w, node_ids=list(node_ids), directed=bool(directed), stats=stats)
