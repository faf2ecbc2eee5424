"""The readers of the four small real graphs of ``more/``: Wiki, Actor and the Brazil and Europe
airport graphs (their file formats, the order their nodes get, the :class:`Dataset` each becomes).

The registry (names, files, downloads, SHA-256) is :mod:`caps2ne_np.graphs.datasets`, which calls
:func:`load_more`; ``shared/data/README.md`` (section 5) gives the sources and counts.

- ``wiki``: ``wiki/Wiki_edgelist.txt`` (``u v`` lines) and ``wiki/Wiki_category.txt``
  (``node class`` lines), in ``<data_dir>/more/``;
- ``actor``: ``actor/out1_graph_edges.txt`` and ``actor/out1_node_feature_label.txt``,
  tab-separated, a header line each, the class in a label line's last field;
- ``brazil-airports``, ``europe-airports``: ``airports/<region>-airports.edgelist`` (``u v``
  lines) and ``airports/labels-<region>-airports.txt`` (header ``node label``).

Every graph is read the same way:

- **Nodes.** The label file names every node once; node ``i`` is the ``i``-th of its ids in
  increasing order (numeric order when every id is an integer, else string order), and
  ``Dataset.node_ids[i]`` is that id as written.  In the four upstream files the ids are
  ``0 .. N-1``, so node ``i`` is the id ``i``.  An edge whose end has no label is an error.
- **Edges.** Undirected: each line ``u v`` gives the entries (u, v) and (v, u); an edge listed
  twice, or both ways, is one entry of weight 1.  Wiki's lines are directed links, symmetrised
  here as the published results on it do.  Self loops are kept as stored (one diagonal entry),
  as for the other benchmark sets (``Dataset.adj``): training drops them unless
  ``--keep-self-loops`` (Wiki has 1,996 loop lines on 1,165 nodes, Actor 122 on 93, Brazil 71,
  Europe 2).
- **Labels.** One class a node (int64, as stored: 0 .. C-1).  Actor's middle column (node
  features: the words of the actor's page) is not read: ``features`` is None, the graph is
  structure only.  No splits: draw them from the labels (the panel's are 10 seeded stratified
  50/50 splits).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from .downloads import default_data_dir

MORE_FILES = {
    "wiki": ("more/wiki/Wiki_edgelist.txt", "more/wiki/Wiki_category.txt"),
    "actor": ("more/actor/out1_graph_edges.txt", "more/actor/out1_node_feature_label.txt"),
    "brazil-airports": (
        "more/airports/brazil-airports.edgelist",
        "more/airports/labels-brazil-airports.txt",
    ),
    "europe-airports": (
        "more/airports/europe-airports.edgelist",
        "more/airports/labels-europe-airports.txt",
    ),
}
"""The graphs of ``more/``: name -> (edge file, label file) in the data folder (read by
:func:`read_more`)."""

__all__ = ["FORMATS", "MORE_FILES", "read_more", "node_order"]

#: name -> (the edge file's header line or None, the label file's header or None, the field
#: separator (None: any whitespace), the number of fields of a label line)
FORMATS = {
    "wiki": (None, None, None, 2),
    "actor": ("node_id\tnode_id", "node_id\tfeature(feature_amount:931)\tlabel", "\t", 3),
    "brazil-airports": (None, "node label", None, 2),
    "europe-airports": (None, "node label", None, 2),
}


def _lines(path: Path, header: str | None, sep: str | None, what: str):
    """``(line number, fields)`` of every non-blank line of ``path`` after ``header``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found ({what})") from None
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not a UTF-8 text file ({what}): {err}") from None
    lines = text.splitlines()
    start = 0
    if header is not None:
        first = lines[0].strip() if lines else ""
        if first != header:
            raise InputError(f"{path}: first line {first[:40]!r}; expected {header!r} ({what})")
        start = 1
    return [
        (k + 1, line.strip("\r\n ").split(sep))
        for k, line in enumerate(lines[start:], start=start)
        if line.strip()
    ]


def node_order(ids) -> list[str]:
    """``ids`` in the order the nodes get: numeric when every id is an integer, else by string."""
    ids = list(ids)
    try:
        return sorted(ids, key=int)
    except ValueError:
        return sorted(ids)


def _labels(path: Path, header, sep, fields: int):
    """(node ids in node order, int64 labels in that order) of a label file."""
    by_id: dict[str, int] = {}
    for lineno, row in _lines(path, header, sep, "one class a node"):
        if len(row) != fields:
            raise InputError(
                f"{path}:{lineno}: {len(row)} fields; expected {fields} (node id, ..., class)"
            )
        node, cls = row[0].strip(), row[-1].strip()
        if not cls.isdigit():
            raise InputError(f"{path}:{lineno}: class {cls[:20]!r} is not a non-negative integer")
        if node in by_id:
            raise InputError(f"{path}:{lineno}: node {node!r} has a second class line")
        by_id[node] = int(cls)
    if not by_id:
        raise InputError(f"{path}: no class lines")
    ids = node_order(by_id)
    return ids, np.array([by_id[i] for i in ids], dtype=np.int64)


def _edges(path: Path, header, sep, index: dict, label_path: Path):
    """(u, v) int64 node indices of the edge lines of ``path``."""
    rows = _lines(path, header, sep, "one edge a line")
    u = np.empty(len(rows), dtype=np.int64)
    v = np.empty(len(rows), dtype=np.int64)
    for k, (lineno, row) in enumerate(rows):
        if len(row) != 2:
            raise InputError(f"{path}:{lineno}: {len(row)} fields; expected 2 (u v)")
        for end, out in zip(row, (u, v)):
            node = index.get(end.strip())
            if node is None:
                raise InputError(
                    f"{path}:{lineno}: node {end.strip()[:20]!r} has no class in {label_path.name}"
                )
            out[k] = node
    return u, v


def read_more(name: str, data_dir=None):
    """``(adj, labels, node_ids)`` of a graph of ``more/`` (``wiki``, ``actor``,
    ``brazil-airports``, ``europe-airports``) read from ``<data_dir>/more/`` as the module
    docstring says: adj (N, N) float32 CSR, symmetric, weight 1, self loops kept; labels
    int64 (N,); node_ids the label file's ids in node order.  The registry wraps them in a
    Dataset (:func:`caps2ne_np.graphs.datasets.load_more`)."""
    import scipy.sparse as sp

    key = str(name).lower()
    if key not in MORE_FILES:
        raise InputError(f"unknown graph {name!r} of more/; choose one of {', '.join(MORE_FILES)}")
    base = Path(data_dir if data_dir is not None else default_data_dir())
    edge_path, label_path = (base / rel for rel in MORE_FILES[key])
    edge_header, label_header, sep, fields = FORMATS[key]
    ids, labels = _labels(label_path, label_header, sep, fields)
    u, v = _edges(edge_path, edge_header, sep, {i: k for k, i in enumerate(ids)}, label_path)
    n = len(ids)
    adj = sp.csr_matrix(
        (np.ones(2 * u.size, dtype=np.float32), (np.r_[u, v], np.r_[v, u])), shape=(n, n)
    )
    adj.sum_duplicates()
    adj.data[:] = 1.0  # an edge listed twice, or both ways, is one edge; a loop is one entry
    adj.sort_indices()
    return adj, labels, ids
