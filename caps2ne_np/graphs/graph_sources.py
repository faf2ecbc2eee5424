"""Graphs that do not come as edge-list text: matrix files, networkx graphs, DataFrames, arrays.

:func:`read_matrix` reads a ``.npz`` (``scipy.sparse.save_npz``) or ``.mat`` file into a
checked CSR matrix; :func:`edges_of` turns a networkx graph, a pandas DataFrame of
edges or an (m, 2|3) edge array into edge arrays with ids numbered in order of first
appearance (:func:`factorise`), as the edge-list reader numbers tokens.
:mod:`caps2ne_np.graphs.graph` builds the ``Graph`` from either.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, InputError
from ..io.files import check_ids, read_sparse_npz

_MATRIX = "expected a square sparse matrix of finite weights > 0"


def factorise(values):
    """(first, codes) of a 1-D array: ``values[first]`` are the distinct values in order
    of first appearance and ``codes`` (int64) each value's index among them."""
    values = np.asarray(values)
    if values.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(values)
    ordered = values[order]
    new = np.empty(values.size, dtype=bool)
    new[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    del ordered
    starts = np.flatnonzero(new)
    first = np.minimum.reduceat(order, starts)  # each value's first position, whatever the sort
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(starts.size, dtype=np.int64)
    rank[by_first] = np.arange(starts.size)
    group = np.cumsum(new, dtype=np.int64)  # 1 + the sorted rank of each sorted value
    group -= 1
    codes = np.empty(values.size, dtype=np.int64)
    codes[order] = rank.take(group, out=group)
    return first[by_first], codes


def read_matrix(source: str):
    """The adjacency matrix of a ``.npz`` or ``.mat`` file as CSR; ``GraphFormatError`` for
    a missing file, a file of another kind, or a ``.mat`` without one clear matrix (it
    must hold a variable ``network``, as the BlogCatalog / PPI / Flickr files, or one
    sparse matrix)."""
    p = Path(source)

    def fail(what, fix=_MATRIX):
        raise GraphFormatError(f"{source}: {what}; {fix}")

    if not p.is_file():
        fail("is a directory" if p.is_dir() else "no such file", "check the path to the graph")
    if p.suffix.lower() == ".npz":
        try:
            adj = read_sparse_npz(source)
        except Exception as err:  # noqa: BLE001 -- any failure of the reader is a bad file
            fail(
                f"not a scipy.sparse .npz ({type(err).__name__}: {err})",
                "write it with scipy.sparse.save_npz",
            )
    else:
        import scipy.io

        try:
            mat = scipy.io.loadmat(source)
        except Exception as err:  # noqa: BLE001 -- any failure of the reader is a bad file
            fail(
                f"not a MATLAB .mat file ({type(err).__name__}: {err})",
                "save it with scipy.io.savemat",
            )
        names = [k for k in mat if not k.startswith("__")]
        sparse = [k for k in names if sp.issparse(mat[k])]
        if "network" not in names and len(sparse) != 1:
            fail(
                f"holds variables {names}",
                "expected a sparse matrix named 'network' or exactly one sparse matrix",
            )
        adj = mat["network"] if "network" in names else mat[sparse[0]]
    try:
        adj = sp.csr_matrix(adj)
        if adj.format == "csr":
            adj.check_format(full_check=True)
    except MemoryError:
        fail(
            f"a {adj.shape[0]} x {adj.shape[1]} matrix does not fit in memory",
            "check the matrix shape",
        )
    except Exception as err:  # noqa: BLE001 -- a .mat variable may be of any type
        fail(f"not a matrix ({type(err).__name__}: {err})")
    return adj


def edges_of(obj):
    """(src, dst, weights or None, ids, labels) of a networkx graph, a DataFrame of edges or
    an (m, 2|3) edge array (``graph.coerce_graph`` says which); None for anything else."""
    if all(hasattr(obj, a) for a in ("nodes", "edges", "is_directed", "adj")):
        return _networkx(obj)
    if hasattr(obj, "columns") and hasattr(obj, "iloc"):
        return _frame(obj)
    if isinstance(obj, (np.ndarray, list, tuple)):
        return _edge_array(np.asarray(obj), "edges")
    return None


def _labels_and_index(u, v):
    """Node labels in order of first appearance in u0, v0, u1, v1, ...; and u, v as indices."""
    both = np.column_stack([u, v]).ravel()
    keys = np.array([str(x) for x in both]) if both.dtype == object else both
    first, codes = factorise(keys)
    labels = both[first].tolist()
    return labels, codes[0::2], codes[1::2]


def _id_column(col, name):
    col = np.asarray(col)
    if col.dtype.kind == "f":
        if not np.all(np.isfinite(col)) or not np.all(col == np.round(col)):
            raise InputError(
                f"{name}: node ids must be integers or strings, got non-integer floats"
            )
        col = col.astype(np.int64)
    elif col.dtype.kind not in "iuUSO":
        raise InputError(f"{name}: node ids must be integers or strings, got dtype {col.dtype}")
    if col.dtype.kind in "US":
        col = col.astype(object)
    return col


def _edge_array(arr, name, weights=None):
    if arr.ndim != 2 or arr.shape[1] not in (2, 3):
        raise InputError(
            f"{name}: expected an (m, 2) or (m, 3) edge array 'u v [weight]', got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise InputError(f"{name}: no edges")
    if arr.shape[1] == 3 and weights is None:
        try:
            weights = np.asarray(arr[:, 2], dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{name}: the third column must hold numeric weights") from None
    u = _id_column(arr[:, 0], name)
    v = _id_column(arr[:, 1], name)
    if u.dtype != v.dtype:
        u, v = u.astype(object), v.astype(object)
    labels, src, dst = _labels_and_index(u, v)
    if weights is not None and np.all(weights == 1.0):
        weights = None
    return src, dst, weights, [str(x) for x in labels], labels


def _frame(df):
    cols = list(df.columns)
    if "source" in cols and "target" in cols:
        u, v = df["source"].to_numpy(), df["target"].to_numpy()
        w = df["weight"].to_numpy(dtype=np.float64) if "weight" in cols else None
    elif len(cols) in (2, 3):
        u, v = df.iloc[:, 0].to_numpy(), df.iloc[:, 1].to_numpy()
        w = None
        if len(cols) == 3:
            try:
                w = df.iloc[:, 2].to_numpy(dtype=np.float64)
            except (TypeError, ValueError):
                raise InputError(
                    f"DataFrame column {cols[2]!r}: expected numeric edge weights"
                ) from None
    else:
        raise InputError(
            f"DataFrame with columns {cols}: expected 'source', 'target' (and 'weight'), "
            "or two (three) columns u, v (weight)"
        )
    arr = np.empty((len(u), 2), dtype=object)
    arr[:, 0], arr[:, 1] = u, v
    if u.dtype.kind in "iuf" and v.dtype.kind in "iuf":
        arr = np.column_stack([u, v])
    return _edge_array(arr, "DataFrame", weights=w)


def _networkx(G):
    labels = list(G.nodes)
    # any hashable label: only a text writer needs tokens (io.write_word2vec says so)
    ids = check_ids(
        [str(x) for x in labels], len(labels), "networkx node labels", rows="nodes", tokens=False
    )
    index = {x: i for i, x in enumerate(labels)}
    m = G.number_of_edges()
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    w = np.empty(m, dtype=np.float64)
    for e, (a, b, weight) in enumerate(G.edges(data="weight", default=1.0)):
        src[e], dst[e] = index[a], index[b]
        try:
            w[e] = weight
        except (TypeError, ValueError):
            raise InputError(
                f"networkx edge ({a!r}, {b!r}): weight {weight!r} is not a number; "
                "edge weights must be finite numbers > 0"
            ) from None
    weights = None if np.all(w == 1.0) else w
    if weights is not None and not np.all(np.isfinite(weights) & (weights > 0)):
        raise InputError("networkx edge weights must be finite and > 0")
    return src, dst, weights, ids, labels
