"""The binary cache of a graph file: ``<file>.cache.npz``, keyed on the file's content.

It holds the CSR arrays, the node ids, ``directed``, whether self loops were kept,
``Graph.stats`` and the size and a BLAKE2b hash of the file it was written from, as
an ``.npz`` without pickles written atomically.  :func:`load` refuses it
(:class:`StaleCacheError`) once the file changes -- even to one of the same size and
modification time -- or when it was made with other options; ``graph.read_graph(...,
cache="use")`` then reads the file again.
:func:`load_graph_cache` repeats the warnings reading the file gave.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ..errors import GraphFormatError, InputError
from ..io.npy import load_npz, save_npz
from .csr import Graph, warn_stats

_FORMAT = "caps2ne_np.graph-cache"
_VERSION = 2  # 2: keyed on a hash of the content (1: size and mtime)
_REBUILD = "read_graph(..., cache='use') rebuilds it"


class StaleCacheError(GraphFormatError):
    """A graph cache that does not belong to the file as it is now (or to the options asked for)."""


def cache_path(path) -> Path:
    """Where the binary cache of the graph file ``path`` lives: ``<path>.cache.npz`` beside it."""
    return Path(os.fspath(path) + ".cache.npz")


def stamp(source, size_only=None):
    """(size, BLAKE2b-128 hex of the bytes) of the file, the cache's key of it; None if it
    cannot be read.  With ``size_only`` = a size that differs from the file's, the hash
    is skipped (the result then differs anyway)."""
    try:
        size = int(os.stat(source).st_size)
        if size_only is not None and size != size_only:
            return size, ""
        h = hashlib.blake2b(digest_size=16)
        with open(source, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    except OSError:
        return None
    return size, h.hexdigest()


def save_graph_cache(graph: Graph, path) -> Path:
    """Write ``graph``, read from the file ``path``, to ``cache_path(path)``; returns that path.

    :func:`load_graph_cache` refuses it once the file changes.  An existing cache is
    replaced; any other file at that path is not (``InputError``).
    """
    source = os.fspath(path)
    key = stamp(source)
    if key is None:
        raise InputError(f"{source}: cannot stat the graph file the cache is for; check the path")
    keep = None
    if graph.stats.get("self_loops"):
        rows = np.repeat(np.arange(graph.n_nodes), np.diff(graph.indptr))
        keep = bool(np.any(rows == graph.indices))  # a self loop is stored
    return save(graph, source, key, keep)


def save(graph, source, key, keep_self_loops) -> Path:
    """Write ``graph``, read from ``source`` whose :func:`stamp` is ``key`` with
    ``keep_self_loops``, to ``cache_path(source)``."""
    if not graph.stats.get("self_loops"):
        keep_self_loops = None  # no self loop in the input: the same graph either way
    weight_column = (
        graph._weight_column if graph._weight_column is not None else graph.weights is not None
    )
    target = cache_path(source)
    if target.exists() and not _is_cache(target):
        raise InputError(
            f"{target}: exists and is not a graph cache; remove or rename it to cache {source}"
        )
    ids = "\n".join(graph.node_ids).encode("utf-8")
    weights = graph.weights if graph.weights is not None else np.empty(0, dtype=np.float32)
    save_npz(
        target,
        overwrite=True,
        format=np.asarray(_FORMAT),
        version=np.int64(_VERSION),
        indptr=np.ascontiguousarray(graph.indptr, dtype=np.int64),
        indices=np.ascontiguousarray(graph.indices, dtype=np.int32),
        weights=np.ascontiguousarray(weights, dtype=np.float32),
        weighted=np.bool_(graph.weights is not None),
        node_ids=np.frombuffer(ids, dtype=np.uint8),
        n_nodes=np.int64(graph.n_nodes),
        directed=np.bool_(graph.directed),
        keep_self_loops=np.int64(-1 if keep_self_loops is None else int(keep_self_loops)),
        weight_column=np.bool_(weight_column),
        stats=np.asarray(json.dumps(graph.stats)),
        source_size=np.int64(key[0]),
        source_hash=np.asarray(key[1]),
    )
    return target


def _is_cache(target) -> bool:
    try:
        with np.load(target, allow_pickle=False) as z:
            return "format" in z.files and str(z["format"]) == _FORMAT
    except Exception:  # noqa: BLE001 -- not an npz at all
        return False


_NAMES = (
    "format",
    "version",
    "indptr",
    "indices",
    "weights",
    "weighted",
    "node_ids",
    "n_nodes",
    "directed",
    "keep_self_loops",
    "weight_column",
    "stats",
    "source_size",
    "source_hash",
)


def load_graph_cache(
    path, directed: bool | None = None, keep_self_loops: bool | None = None
) -> Graph:
    """The Graph cached for the file ``path`` by :func:`save_graph_cache` or ``read_graph(cache=)``.

    Raises :class:`StaleCacheError` when ``path`` no longer has the size and content
    hash recorded in the cache (or is gone), or when ``directed`` /
    ``keep_self_loops`` are given and differ from the cached graph's; and
    ``GraphFormatError`` for a missing or damaged cache.  Warns as reading the file did.
    """
    return load(os.fspath(path), directed, keep_self_loops, stacklevel=3)


def load(source, directed, keep_self_loops, *, stacklevel) -> Graph:
    """:func:`load_graph_cache` with its warnings ``stacklevel`` frames up."""
    target, z = _open(source)
    cached_directed, cached_keep = _check_fresh(target, z, source, directed, keep_self_loops)
    indptr, indices, weights, node_ids, stats = _checked_contents(target, z)
    warn_stats(
        source,
        stats,
        bool(z["weight_column"]),
        cached_directed,
        cached_keep != 0,
        stacklevel=stacklevel + 1,
    )
    graph = Graph(
        indptr=indptr,
        indices=indices,
        weights=weights,
        node_ids=node_ids,
        directed=cached_directed,
        stats=stats,
    )
    graph._weight_column = bool(z["weight_column"])
    return graph


def _open(source):
    """(cache path, its arrays) of the graph file ``source``: a graph cache of this
    version with every field, else GraphFormatError (StaleCacheError: another version)."""
    target = cache_path(source)
    if not target.is_file():
        raise GraphFormatError(
            f"{target}: no such file; write it with read_graph({source!r}, cache='write')"
        )
    try:
        z = load_npz(target)
    except InputError as err:
        raise GraphFormatError(str(err)) from None
    if "format" not in z or z["format"].dtype.kind != "U" or str(z["format"]) != _FORMAT:
        raise GraphFormatError(f"{target}: not a graph cache; delete it; {_REBUILD}")
    if "version" in z and np.ndim(z["version"]) == 0 and int(z["version"]) != _VERSION:
        raise StaleCacheError(
            f"{target}: cache format version {int(z['version'])}, this reader writes "
            f"{_VERSION}; {_REBUILD}"
        )
    if any(name not in z for name in _NAMES):
        raise GraphFormatError(f"{target}: not a graph cache; delete it; {_REBUILD}")
    return target, z


def _check_fresh(target, z, source, directed, keep_self_loops):
    """(cached directed, cached keep_self_loops as -1/0/1) once the cache ``z`` is known
    to belong to the file ``source`` as it is now and to the options asked for (None:
    any); StaleCacheError otherwise."""
    size = int(z["source_size"])
    now = stamp(source, size_only=size)
    if now != (size, str(z["source_hash"])):
        what = (
            "is gone"
            if now is None
            else "has other content than the file the cache was written from"
        )
        raise StaleCacheError(f"{target}: stale: {source} {what}; {_REBUILD}")
    cached_directed, cached_keep = bool(z["directed"]), int(z["keep_self_loops"])
    if directed is not None and bool(directed) != cached_directed:
        raise StaleCacheError(
            f"{target}: cached with directed={cached_directed}, asked for "
            f"directed={bool(directed)}; rebuild it with cache='write'"
        )
    if (
        keep_self_loops is not None
        and cached_keep >= 0
        and bool(keep_self_loops) != bool(cached_keep)
    ):
        raise StaleCacheError(
            f"{target}: cached with keep_self_loops={bool(cached_keep)}, asked for "
            f"keep_self_loops={bool(keep_self_loops)}; rebuild it with cache='write'"
        )
    return cached_directed, cached_keep


def _damaged(target, what):
    raise GraphFormatError(f"{target}: damaged graph cache ({what}); delete it; {_REBUILD}")


def _checked_contents(target, z):
    """(indptr, indices, weights or None, node ids, stats) of the cache ``z``, each
    checked as a CSR graph's; GraphFormatError naming what is damaged."""
    indptr, indices, weights = z["indptr"], z["indices"], z["weights"]
    n = int(z["n_nodes"])
    if indptr.dtype != np.int64 or indices.dtype != np.int32 or weights.dtype != np.float32:
        _damaged(target, "array types")
    if (
        indptr.shape != (n + 1,)
        or indptr[0] != 0
        or indptr[-1] != indices.shape[0]
        or np.any(np.diff(indptr) < 0)
    ):
        _damaged(target, "row pointers")
    if indices.shape[0] and (int(indices.min()) < 0 or int(indices.max()) >= n):
        _damaged(target, "neighbour indices")
    if bool(z["weighted"]):
        if weights.shape != indices.shape or not np.all(np.isfinite(weights) & (weights > 0)):
            _damaged(target, "weights")
    else:
        weights = None
    try:
        node_ids = z["node_ids"].tobytes().decode("utf-8").split("\n")
        stats = json.loads(str(z["stats"]))
    except (UnicodeDecodeError, ValueError):
        _damaged(target, "ids or stats")
    if len(node_ids) != n:
        _damaged(target, f"{len(node_ids)} ids for {n} nodes")
    if not isinstance(stats, dict) or any(
        k not in stats for k in ("self_loops", "duplicates", "isolated_nodes")
    ):
        _damaged(target, "stats")
    return indptr, indices, weights, node_ids, stats
