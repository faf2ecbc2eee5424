"""A user's own node files: features (``.npz`` / ``.npy``), labels, evaluation splits, id lists.

Row ``i`` of every result is node ``i`` of the graph (``node_ids[i]``).  Problems raise
:class:`~caps2ne_np.errors.InputError` with one line naming the file (and line).
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import InputError
from ..io.files import check_npy_header, first_repeat, read_lines, read_sparse_npz


def load_splits(path, n_nodes: int, *, node_ids=None) -> list[dict]:
    """Read evaluation splits: a JSON list of ``{"train": [...], "val": [...], "test": [...]}``.

    Entries are node indices ``0 .. n_nodes-1``; with ``node_ids`` given they are node
    IDs instead (ints are compared as strings). Each part must be free of repeats and
    the three parts pairwise disjoint. Returns int64 index arrays, in file order.
    """
    path = str(path)
    expected = '[{"train": [...], "val": [...], "test": [...]}, ...]'
    text = "\n".join(read_lines(path, "a JSON list of train/val/test splits"))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{path}: malformed JSON at line {err.lineno}, column {err.colno} ({err.msg}); "
            f"expected {expected}"
        ) from None
    except (ValueError, RecursionError) as err:  # an integer of > 4300 digits; nesting too deep
        raise InputError(
            f"{path}: unreadable JSON ({type(err).__name__}: {err}); expected {expected}"
        ) from None
    if not isinstance(data, (list, dict)) or not data:
        raise InputError(
            f'{path}: expected a non-empty JSON list of {{"train", "val", "test"}} objects'
        )
    return check_splits(data, n_nodes, node_ids=node_ids, name=path)


def check_splits(data, n_nodes: int, *, node_ids=None, name="splits") -> list[dict]:
    """Evaluation splits as int64 index arrays: ``data`` a list of ``{"train", "val",
    "test"}`` mappings (one mapping: one split) of node indices ``0 .. n_nodes-1`` (or
    of node ids, with ``node_ids`` given), each part free of repeats and the three
    parts pairwise disjoint.  InputError (a ValueError) starting with ``name`` (the
    file, or the argument) otherwise.  load_splits checks a file's splits with it,
    ``Caps2NE.fit`` its ``splits`` argument."""
    path = name
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, (list, tuple)) or not data:
        raise InputError(f'{path}: expected a non-empty list of {{"train", "val", "test"}} splits')
    index = {nid: i for i, nid in enumerate(node_ids)} if node_ids is not None else None
    limit = len(node_ids) if node_ids is not None else int(n_nodes)
    out = []
    for s, split in enumerate(data):
        if not isinstance(split, dict) or set(split) != {"train", "val", "test"}:
            got = sorted(split) if isinstance(split, dict) else type(split).__name__
            raise InputError(
                f"{path}: split {s}: expected exactly the keys train, val, test; got {got}"
            )
        parts = {}
        for part in ("train", "val", "test"):
            parts[part] = _split_part(split[part], path, s, part, index, limit)
        for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
            both = np.intersect1d(parts[a], parts[b])
            if both.size:
                shown = node_ids[both[0]] if node_ids is not None else int(both[0])
                raise InputError(
                    f"{path}: split {s}: '{a}' and '{b}' share {both.size} node(s), e.g. {shown}; "
                    "make the parts disjoint"
                )
        out.append(parts)
    return out


def _split_part(values, path, s, part, index, limit):
    if isinstance(values, np.ndarray) and values.ndim == 1 and values.dtype.kind in "iu":
        values = values.tolist()  # an index array (Python callers): its ints
    if not isinstance(values, (list, tuple)):
        raise InputError(
            f"{path}: split {s} '{part}': expected a list of node ids, got {type(values).__name__}"
        )
    ids = np.empty(len(values), dtype=np.int64)
    for j, v in enumerate(values):
        if isinstance(v, np.integer):
            v = int(v)
        if index is not None and isinstance(v, (str, int)) and not isinstance(v, bool):
            i = index.get(str(v), -1)
            if i < 0:
                raise InputError(
                    f"{path}: split {s} '{part}': unknown node id {v!r}; use ids of the graph"
                )
        elif isinstance(v, int) and not isinstance(v, bool):
            i = v
            if not 0 <= i < limit:
                raise InputError(
                    f"{path}: split {s} '{part}': node {v} out of range 0..{limit - 1}; "
                    "use 0-based node indices of the graph"
                )
        else:
            raise InputError(
                f"{path}: split {s} '{part}': expected integer node indices, got {v!r}"
            )
        ids[j] = i
    repeat = first_repeat(ids.tolist())
    if repeat is not None:
        raise InputError(
            f"{path}: split {s} '{part}': node {values[repeat[1]]!r} listed twice; remove repeats"
        )
    return ids


def read_id_file(path) -> list[str]:
    """The node ids of a file with one id per line (no blanks, no empty lines, no repeats)."""
    ids = []
    for lineno, line in enumerate(read_lines(path, "one node id per feature row"), 1):
        text = line.strip()
        if not text or len(text.split()) != 1:
            raise InputError(
                f"{path}:{lineno}: expected one node id per line (no spaces, no blank lines)"
            )
        ids.append(text)
    repeat = first_repeat(ids)
    if repeat is not None:
        first, again = repeat
        raise InputError(
            f"{path}:{again + 1}: node id {ids[again]!r} repeats line {first + 1}; "
            "list each node once"
        )
    return ids


def load_features(path, node_ids_path=None, node_ids=None):
    """Node features, float32, from ``.npz`` (``scipy.sparse.save_npz``: CSR) or ``.npy`` (ndarray).

    Row ``r`` belongs to the node on line ``r`` of ``node_ids_path`` (one id per line);
    without it, row ``i`` is node ``i``. With ``node_ids`` (the graph's IDs, in index
    order) the rows are reordered so that row ``i`` is ``node_ids[i]``; every node
    needs exactly one row and every row must name a node of the graph.
    """
    path = str(path)
    x = _read_feature_matrix(path)
    if node_ids_path is not None:
        row_ids = read_id_file(node_ids_path)
        if len(row_ids) != x.shape[0]:
            raise InputError(
                f"{node_ids_path}: {len(row_ids)} node ids for {x.shape[0]} feature rows in "
                f"{path}; "
                "list one id per feature row, in row order"
            )
    else:
        row_ids = None
    if node_ids is None:
        return x
    return _in_graph_order(x, path, node_ids_path, row_ids, node_ids)


def _read_feature_matrix(path):
    """The float32 (nodes x features) matrix of ``path`` (.npz: CSR, .npy: ndarray),
    every value finite; InputError naming the file otherwise."""
    import scipy.sparse as sp

    if not os.path.isfile(path):
        raise InputError(
            f"{path}: file not found; expected node features as .npz (scipy.sparse) or .npy"
        )
    if path.endswith(".npz"):
        try:
            x = read_sparse_npz(path).tocsr()
        except Exception as err:
            raise InputError(
                f"{path}: not a scipy.sparse.save_npz file ({err}); save sparse features with "
                "scipy.sparse.save_npz or dense ones with numpy.save (.npy)"
            ) from None
    elif path.endswith(".npy"):
        check_npy_header(path)
        try:
            x = np.load(path, allow_pickle=False)
        except Exception as err:
            raise InputError(
                f"{path}: not a readable .npy array ({err}); save with numpy.save"
            ) from None
    else:
        raise InputError(
            f"{path}: unknown feature format; use .npz (scipy.sparse.save_npz) or .npy (numpy.save)"
        )
    if x.ndim != 2 or x.dtype.kind not in "biuf":
        raise InputError(
            f"{path}: expected a 2-D real (nodes x features) matrix, got shape {x.shape} dtype "
            f"{x.dtype}"
        )
    with np.errstate(over="ignore"):  # values beyond float32 become inf and are reported below
        x = x.astype(np.float32)
    values = x.data if sp.issparse(x) else x
    if not np.all(np.isfinite(values)):
        raise InputError(
            f"{path}: features contain NaN or inf (or values beyond float32); clean or rescale them"
        )
    return x


def _in_graph_order(x, path, node_ids_path, row_ids, node_ids):
    """``x`` with row ``i`` the row of ``node_ids[i]``: its rows named by ``row_ids`` (the
    lines of ``node_ids_path``), or already in node order when that is None."""
    import scipy.sparse as sp

    node_ids = [str(i) for i in node_ids]
    if row_ids is None:
        if x.shape[0] != len(node_ids):
            raise InputError(
                f"{path}: {x.shape[0]} feature rows for {len(node_ids)} nodes; give one row per "
                "node "
                "in node order, or a node-id file naming each row"
            )
        return x
    where = {nid: r for r, nid in enumerate(row_ids)}
    known = set(node_ids)
    unknown = [nid for nid in row_ids if nid not in known]
    if unknown:
        raise InputError(
            f"{node_ids_path}: node {unknown[0]!r} is not in the graph ({len(unknown)} such ids); "
            "remove those rows"
        )
    missing = [nid for nid in node_ids if nid not in where]
    if missing:
        raise InputError(
            f"{node_ids_path}: no feature row for node {missing[0]!r} ({len(missing)} nodes "
            "missing); add their rows"
        )
    order = np.fromiter((where[nid] for nid in node_ids), dtype=np.int64, count=len(node_ids))
    return x[order].tocsr() if sp.issparse(x) else np.ascontiguousarray(x[order])


def load_labels(
    path, node_ids, *, return_classes: bool = False, within="the graph", on_unknown=None
):
    """Node labels from lines ``node label`` (``#`` comments and blank lines skipped).
    ``within`` names where ``node_ids`` come from in the message for an unknown node
    (evaluate: the embedding file).

    A node on several lines with different labels makes the set multi-label. Classes
    are numbered in sorted order (numerically when every label is an integer).

    A node not in ``node_ids`` is an InputError naming the line, unless ``on_unknown``
    is given: then its lines are skipped and ``on_unknown(count, first)`` is called
    once with the number of such nodes and the first one's id (evaluate scores the
    labelled nodes it has embeddings of); fewer than 2 labelled nodes left is an
    InputError.

    Returns
    -------
    labels : int64 (N,) with -1 for unlabelled nodes, or int64 (N, L) CSR 0/1 indicator
    multilabel : bool
    classes : list of str, only with ``return_classes=True`` (class index -> label)
    """
    path = str(path)
    index = {str(nid): i for i, nid in enumerate(node_ids)}
    pairs, unknown = set(), {}
    for lineno, line in enumerate(read_lines(path, "'node label' lines"), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split()
        if len(fields) != 2:
            raise InputError(
                f"{path}:{lineno}: expected 'node label' (two fields), got {len(fields)} fields"
            )
        node = index.get(fields[0], -1)
        if node < 0 and on_unknown is None:
            raise InputError(
                f"{path}:{lineno}: node {fields[0]!r} is not in {within}; remove the line or fix "
                "the id"
            )
        if node < 0:
            unknown.setdefault(fields[0], lineno)
            continue
        pairs.add((node, fields[1]))
    if unknown:
        _check_known(path, pairs, unknown, within)
        on_unknown(len(unknown), next(iter(unknown)))
    if not pairs:
        raise InputError(f"{path}: no labels found; expected 'node label' lines")
    labels, multilabel, classes = _label_table(pairs, len(index))
    return (labels, multilabel, classes) if return_classes else (labels, multilabel)


def _check_known(path, pairs, unknown, within):
    """InputError when fewer than 2 of a labels file's nodes are in ``within`` (its other
    nodes, ``unknown``: id -> first line, are skipped)."""
    known = len({node for node, _ in pairs})
    if known < 2:
        first, lineno = next(iter(unknown.items()))
        raise InputError(
            f"{path}: {known} of its {known + len(unknown)} labelled nodes are in {within} "
            f"(line {lineno}: {first!r} is not); scoring needs at least 2: give the labels "
            "of these embeddings' nodes"
        )


def _label_table(pairs, n):
    """(labels, multilabel, classes) of the (node, label) ``pairs`` of ``n`` nodes."""
    import scipy.sparse as sp

    names = {lab for _, lab in pairs}
    try:
        classes = sorted(names, key=lambda s: (int(s), s))
    except ValueError:
        classes = sorted(names)
    cls = {c: k for k, c in enumerate(classes)}
    nodes = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=len(pairs))
    ks = np.fromiter((cls[p[1]] for p in pairs), dtype=np.int64, count=len(pairs))
    multilabel = np.unique(nodes).size != nodes.size
    if multilabel:
        labels = sp.csr_matrix(
            (np.ones(nodes.size, dtype=np.int64), (nodes, ks)), shape=(n, len(classes))
        )
        labels.sort_indices()
    else:
        labels = np.full(n, -1, dtype=np.int64)
        labels[nodes] = ks
    return labels, multilabel, classes
