"""Reading a graph into the CSR ``Graph``: a file (edge list, ``.npz``, ``.mat``; its bytes
read once, the NumPy reader first) or what a Python user holds (``coerce_graph``).

Edge-list format (docs/input-formats.md): one edge per line, ``u v`` or ``u v w``,
fields separated by whitespace; ``#`` starts a comment (whole line or trailing);
blank lines are ignored.  Node ids are arbitrary tokens kept as strings (``7`` and
``07`` are different nodes), numbered in order of first appearance.  A missing
weight is 1; a weight must be a finite number > 0 that fits in float32.

Errors in a file raise :class:`~caps2ne_np.errors.GraphFormatError` with one line,
``"<path>:<line>: <what is wrong>; <expected / fix>"``, or ``"<path>: ..."`` for
problems of the whole file (missing, a directory, no edges).  No other exception
type escapes for bad file content.  Bad in-memory arrays passed to
``csr.from_edges`` / ``csr.from_scipy`` raise :class:`~caps2ne_np.errors.InputError`.

Two readers produce the same Graph (tested bit for bit).  The NumPy reader parses
plain files with ``np.loadtxt``: integer ids straight to int64, other ids as strings,
numbered in order of first appearance by ``graph_sources.factorise`` (a sort; string
ids a bounded piece of the file at a time);
whatever it does not vouch for -- a malformed line, a mix of lines with and without
a weight, a spelling of a number only ``float()`` takes, Unicode whitespace, a NUL
byte, non-UTF-8 bytes -- goes to the careful reader (careful_reader.py), plain Python
string handling, so every error message comes from one place.  docs/input-formats.md has the
figures: a 1M-edge integer edge list loads in about a second.

Input that cannot be read twice -- ``"-"`` (standard input), a pipe, a FIFO, a
device -- and compressed files (``.gz``, ``.bz2``, ``.xz``, decompressed with the
standard library) are read once into memory, as every file is, so both readers see
the same bytes.  That read stops with a ``GraphFormatError`` at the first NUL byte,
at a line longer than ``MAX_LINE_BYTES`` or beyond ``max_stream_bytes()``
(``/dev/zero`` is refused at once, never read until memory runs out).

The binary cache (``read_graph(..., cache="use")``; ``save_graph_cache`` and
``load_graph_cache`` of :mod:`caps2ne_np.graphs.graph_cache`) keeps the CSR and the ids
in ``<file>.cache.npz``, keyed on the file's size and a BLAKE2b hash of its bytes
and on ``directed`` / ``keep_self_loops``.  Matrix files and in-memory inputs
(networkx, DataFrames, edge arrays) are turned into arrays by
:mod:`caps2ne_np.graphs.graph_sources`.
"""

from __future__ import annotations

import io
import logging
import os
import re
import stat
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, InputError, InputWarning
from ..io.files import read_bytes
from . import graph_cache
from .careful_reader import UNICODE_SPACE, check_header, read_edgelist_careful
from .csr import Graph, build, from_edges, from_scipy, raise_format_error
from .graph_cache import cache_path
from .graph_sources import edges_of, factorise, read_matrix

__all__ = ["read_edgelist", "read_graph", "coerce_graph"]

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1 << 20  # a longer line in a stream is refused (no edge line is that long)
_STREAM_CHUNK = 1 << 20
COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}
STDIN = "-"
_TESTER = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}  # the command that tests such a file


READER_BYTES_PER_BYTE = 20
"""Peak memory of reading an edge list per byte of it (decompressed): measured 16.4 for
'1 2' lines, 17.6 for 'a b', 11.2 for random integer ids, when the cap was set (a
one-off measurement; tests/test_graph_streams.py checks the cap built on it); the
readers hold the bytes, tokens, id arrays and the CSR at once.  String ids are parsed
in pieces (``_parse_strings``): 10M lines 'a b 1.5' (80 MB) peak at 0.87 GB, 10.9 per
byte (26 when the whole file was one string table)."""


def max_stream_bytes() -> int:
    """The most a stream (stdin, pipe, FIFO, device, compressed file) may hold: the
    available memory (``errors.available_memory``: RAM, cgroup limit, ``ulimit -v``)
    over :data:`READER_BYTES_PER_BYTE`, at least 1 MiB."""
    from ..errors import available_memory

    free = available_memory()
    return max(1 << 20, (free or (8 << 30)) // READER_BYTES_PER_BYTE)


def _decompress_errors() -> tuple:
    """What a damaged compressed file raises beyond OSError / EOFError / ValueError:
    ``lzma.LZMAError`` (a bad .xz) and ``zlib.error`` (bad deflate data in a .gz)."""
    import lzma
    import zlib

    return (lzma.LZMAError, zlib.error)


def _display(source: str) -> str:
    return "<stdin>" if source == STDIN else source


def _is_stream(source: str) -> bool:
    """Read once into memory: stdin, anything that is not a regular file, compressed files."""
    if source == STDIN or Path(source).suffix.lower() in COMPRESSED:
        return True
    try:
        return not stat.S_ISREG(os.stat(source).st_mode) and not stat.S_ISDIR(
            os.stat(source).st_mode
        )
    except OSError:
        return False


def _open_stream(source: str, name: str, suffix: str):
    """The binary file object of ``source`` (standard input, a compressed file read
    through its module, or a plain file); GraphFormatError when it cannot be opened."""
    try:
        if source == STDIN:
            if sys.stdin is None:  # the shell closed it: <&-
                raise_format_error(
                    name, None, "standard input is closed", "pipe the edges in or name a file"
                )
            return sys.stdin.buffer
        if suffix in COMPRESSED:
            import importlib

            return importlib.import_module(COMPRESSED[suffix]).open(source, "rb")
        return open(source, "rb")
    except FileNotFoundError:
        raise_format_error(name, None, "no such file", "check the path to the edge list")
    except OSError as err:
        raise_format_error(
            name, None, f"cannot be read ({err.strerror or err})", "check the file's permissions"
        )


def _read_stream(source: str) -> bytes:
    """All bytes of a stream, read once; GraphFormatError for a NUL byte, an over-long
    line, more than ``max_stream_bytes()``, or a damaged compressed file."""
    name = _display(source)
    suffix = Path(source).suffix.lower() if source != STDIN else ""
    fh = _open_stream(source, name, suffix)
    cap = max_stream_bytes()
    parts, total, line, run = [], 0, 1, 0  # run: bytes since the last newline
    try:
        while True:
            try:
                chunk = fh.read(_STREAM_CHUNK)
            except (OSError, EOFError, ValueError, *_decompress_errors()) as err:
                kind = f"a damaged {suffix} file" if suffix in COMPRESSED else "a read error"
                raise_format_error(
                    name,
                    None,
                    f"{kind} ({type(err).__name__}: {' '.join(str(err).split())})",
                    "check the file"
                    + (f" (e.g. {_TESTER[suffix]} -t)" if suffix in _TESTER else ""),
                )
            if not chunk:
                break
            nul = chunk.find(b"\x00")
            if nul >= 0:
                raise_format_error(
                    name,
                    line + chunk.count(b"\n", 0, nul),
                    "binary content (NUL byte)",
                    "expected a UTF-8 text edge list",
                )
            last = chunk.rfind(b"\n")
            longest = run + (len(chunk) if last < 0 else chunk.find(b"\n"))
            if last >= 0:
                pieces = chunk[:last].split(b"\n")
                longest = max([longest] + [len(p) for p in pieces[1:]])
                run = len(chunk) - last - 1
            else:
                run += len(chunk)
            if max(longest, run) > MAX_LINE_BYTES:
                raise_format_error(
                    name,
                    None,
                    f"a line longer than {MAX_LINE_BYTES} bytes",
                    "expected an edge list ('u v [w]' per line); is this the right file?",
                )
            line += chunk.count(b"\n")
            total += len(chunk)
            if total > cap:
                from ..errors import format_bytes

                after = " after decompression" if suffix in COMPRESSED else ""
                raise_format_error(
                    name,
                    None,
                    f"more than {format_bytes(cap)} of text{after}: reading it needs about "
                    f"{READER_BYTES_PER_BYTE} times that, more memory "
                    "than is available (RAM, cgroup limit, ulimit -v)",
                    "is this the right file? otherwise read it on a machine with more memory",
                )
            parts.append(chunk)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    return b"".join(parts)


def read_edgelist(path, directed: bool = False, keep_self_loops: bool = False) -> Graph:
    """Read a whitespace-separated edge list (``u v`` or ``u v w`` per line) into a Graph.

    See the module docstring for the format and the self-loop / duplicate /
    isolated-node policies.  Raises ``GraphFormatError`` ("path:line: ...") for bad
    content and warns (``InputWarning``) for dropped self loops, merged duplicates and
    nodes without out-edges.
    """
    return _read_edgelist(path, directed, keep_self_loops, stacklevel=4)


def _read_edgelist(path, directed, keep_self_loops, *, stacklevel):
    """The NumPy reader, or the careful one when the NumPy reader declines (returns None).

    ``stacklevel`` is that of a function called from here (as ``csr.build``).
    """
    source = os.fspath(path)
    if source == "":
        raise GraphFormatError(
            "graph path is empty; give the edge-list file (or '-' for standard input)"
        )
    name = _display(source)
    try:
        if _is_stream(source):
            data = _read_stream(source)
        else:
            data = read_bytes(source, name, what="the edge list", error=GraphFormatError)
        graph = _read_edgelist_fast(
            source, directed, keep_self_loops, stacklevel=stacklevel, data=data
        )
        if graph is None:
            graph = read_edgelist_careful(
                source, directed, keep_self_loops, stacklevel=stacklevel, data=data, name=name
            )
        check_header(graph, data, name)
    except MemoryError:
        from ..errors import available_memory, format_bytes

        free = available_memory()
        raise_format_error(
            name,
            None,
            "out of memory while reading the edge list"
            + (f" ({format_bytes(free)} available)" if free is not None else ""),
            f"reading needs about {READER_BYTES_PER_BYTE} bytes per byte of text; use a machine "
            "with more memory (or raise ulimit -v / the container's limit)",
        )
    return graph


# --------------------------------------------------------------------------- the NumPy reader
#
# Comments are cut and str.split()'s ASCII blanks turned into spaces, then np.loadtxt
# parses lines ``u v`` or ``u v w``: integer ids straight to int64 when every token is
# spelled canonically ('7', not '07', '+7' or '-0', which are other nodes), else ids as
# strings (UTF-8 is fine, Unicode whitespace is not).  Weights: NumPy's float parser
# gives the double ``float()`` gives on the spellings it takes (the integer path), or
# ``float()`` itself (the string path).  Whatever loadtxt refuses (a line with 1 or 4
# fields, a mix of 2 and 3, a bad number) goes to the careful reader, which reads the
# same bytes again and gives the same Graph or the error.

_UTF8_BOM = b"\xef\xbb\xbf"
_COMMENT = re.compile(rb"#[^\n]*")
_SPACES = bytes.maketrans(b"\t\r\x0b\x0c\x1c\x1d\x1e\x1f", b" " * 8)  # str.split()'s ASCII blanks
_FIRST_LINE = re.compile(rb"[^ \n][^\n]*")
_STRING_PIECE = 1 << 18  # bytes of text per loadtxt call on the string path (_parse_strings)
_LONG_LINE = 256  # a file with longer lines goes to the careful reader (loadtxt's string array
# takes 4 bytes per character of the longest token for every token)


def _noncanonical_ints(data: bytes) -> bool:
    """True when a token of ``data`` (spaces and newlines only) starts with '+', '-0' or
    '0' and a digit: a spelling that loadtxt reads as an integer other tokens also name."""
    b = np.frombuffer(data + b" ", dtype=np.uint8)
    starts = (b == 43) | (b == 45) | (b == 48)  # '+', '-', '0' ...
    starts[1:] &= b[:-1] <= 32  # ... at the start of a token
    at = np.flatnonzero(starts)
    head, nxt = b[at], b[at + 1]
    return bool(
        np.any(
            (head == 43) | ((head == 45) & (nxt == 48)) | ((head == 48) & (nxt >= 48) & (nxt <= 57))
        )
    )


def _loadtxt(data: bytes, dtype, ndmin):
    """np.loadtxt of whitespace-separated columns of UTF-8 bytes, or None where it objects."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "line N contained no data"
            warnings.simplefilter("error", DeprecationWarning)  # e.g. an integer read via a float
            return np.loadtxt(
                io.BytesIO(data), dtype=dtype, comments=None, ndmin=ndmin, encoding="utf-8"
            )
    except (ValueError, OverflowError, DeprecationWarning):
        return None


def _pieces(data: bytes, size: int):
    """``data`` in pieces of about ``size`` bytes, each cut after a newline."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + size - 1)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def _parse_strings(data: bytes, ncols: int):
    """(node ids, codes, weights or None) of an edge list with string ids: ``codes`` the
    (2m,) int64 node of each token ``u0 v0 u1 v1 ...``, nodes numbered in order of first
    appearance; ``weights`` float64 by ``float()``; or None where the careful reader must
    decide.

    Parsed :data:`_STRING_PIECE` bytes at a time, each piece's distinct ids numbered
    (``factorise``) and looked up in one dict of the file's ids: loadtxt's string table
    (4 bytes per character of the longest token, for every token, doubled while it
    grows), the sort of the ids and the weights' Python objects exist for one piece,
    not the file; what the file leaves is the codes, the weights and one ``str`` per node."""
    cap = data.count(b"\n") + 1  # lines, at most
    codes = np.empty(2 * cap, dtype=np.int64)
    weights = np.empty(cap if ncols == 3 else 0, dtype=np.float64)
    index = {}
    m = 0
    for piece in _pieces(data, _STRING_PIECE):
        lines = np.flatnonzero(np.frombuffer(piece, dtype=np.uint8) == 10)
        if np.diff(lines, prepend=-1, append=len(piece)).max() > _LONG_LINE:
            return None
        rows = _loadtxt(piece, str, 2)
        if rows is None:
            return None
        if rows.shape[0] == 0:  # blank lines only
            continue
        if rows.shape[1] != ncols:
            return None
        k = rows.shape[0]
        first, local = factorise(rows[:, :2].ravel())
        distinct = rows[:, :2].ravel()[first].tolist()
        add = index.setdefault
        known = np.fromiter((add(v, len(index)) for v in distinct), np.int64, len(distinct))
        codes[2 * m : 2 * (m + k)] = known[local]
        if ncols == 3:
            try:
                weights[m : m + k] = np.fromiter(map(float, rows[:, 2].tolist()), np.float64, k)
            except ValueError:
                return None
        m += k
    if m == 0:
        return None
    return list(index), codes[: 2 * m], weights[:m] if ncols == 3 else None


def _parse_plain(data: bytes):
    """(node ids, src, dst, weights or None) of an edge list without comments whose
    blanks are spaces, or None where the careful reader must decide."""
    line = _FIRST_LINE.search(data)
    ncols = len(line.group().split()) if line else 0
    if ncols not in (2, 3):
        return None
    cols = [("u", np.int64), ("v", np.int64)] + [("w", np.float64)] * (ncols == 3)
    rows = None
    if data.isascii() and not _noncanonical_ints(data):
        rows = _loadtxt(data, cols, 1)
    if rows is not None:
        ids = np.column_stack([rows["u"], rows["v"]]).ravel()
        weights = rows["w"].copy() if ncols == 3 else None
        del rows
        first, codes = factorise(ids)
        node_ids = [str(x) for x in ids[first].tolist()]
    else:
        parsed = _parse_strings(data, ncols)
        if parsed is None:
            return None
        node_ids, codes, weights = parsed
    if weights is not None:
        with np.errstate(over="ignore"):
            w32 = weights.astype(np.float32)
        if not np.all(np.isfinite(weights) & (weights > 0) & np.isfinite(w32) & (w32 > 0)):
            return None  # as _parse_weights, which names the line
    return node_ids, codes[0::2], codes[1::2], weights


def _read_edgelist_fast(source, directed, keep_self_loops, *, stacklevel, data=None):
    """The Graph of the edge list at ``source`` (or of ``data``, its bytes), or None where
    the careful reader must decide (it raises the error, or reads an unusual file)."""
    if data is None:
        try:
            data = Path(source).read_bytes()
        except OSError:
            return None
    if data.startswith(_UTF8_BOM):
        data = data[3:]
    if b"\x00" in data:
        return None
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    n_lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if b"#" in data:
        data = _COMMENT.sub(b"", data)
    data = data.translate(_SPACES)
    if not data.isascii() and UNICODE_SPACE.search(data.decode("utf-8")):
        return None
    parsed = _parse_plain(data)
    if parsed is None:
        return None
    node_ids, src, dst, weights = parsed
    try:
        return build(
            src,
            dst,
            weights,
            node_ids,
            directed,
            keep_self_loops,
            source=_display(source),
            n_lines=n_lines,
            stacklevel=stacklevel + 1,
        )
    except GraphFormatError:
        return None


CACHE_MODES = (None, "use", "write")


def read_graph(path, directed: bool = False, keep_self_loops: bool = False, cache=None) -> Graph:
    """Read a graph file by suffix: ``.npz`` (scipy.sparse.save_npz), ``.mat``, else an edge list.

    A ``.mat`` file must hold one sparse matrix, or a variable named ``network`` (the
    BlogCatalog / PPI / Flickr files).  Matrix node ids are ``'0' .. 'n-1'``.

    ``cache``: ``None`` reads the file; ``"use"`` loads ``cache_path(path)`` when it is
    fresh (written from a file of the same size and content hash, with the same
    ``directed`` / ``keep_self_loops``) and otherwise reads the file and rewrites the
    cache (a cache that cannot be written only warns); ``"write"`` reads the file and
    (re)writes the cache.  A cached graph warns as the file did.
    """
    if cache not in CACHE_MODES:
        raise InputError(f"cache must be None, 'use' or 'write', got {cache!r}")
    source = os.fspath(path)
    if source == "":
        raise GraphFormatError(
            "graph path is empty; give the edge-list file (or '-' for standard input)"
        )
    if cache is not None and (
        source == STDIN or (_is_stream(source) and Path(source).suffix.lower() not in COMPRESSED)
    ):
        raise InputError(
            f"{_display(source)}: a pipe, FIFO or device has no file to cache; "
            "read it without the cache (--graph-cache off)"
        )
    if cache == "use":
        try:
            return graph_cache.load(source, directed, keep_self_loops, stacklevel=3)
        except GraphFormatError as err:
            log.info("not using the graph cache (%s); reading %s", err, source)
    stamp = graph_cache.stamp(source) if cache is not None else None
    graph = _read_graph_file(source, directed, keep_self_loops)
    if cache is not None and stamp is not None:
        try:
            graph_cache.save(graph, source, stamp, keep_self_loops)
        except (InputError, OSError) as err:
            if cache == "write":
                raise
            warnings.warn(
                f"{cache_path(source)}: graph cache not written ({err})", InputWarning, stacklevel=2
            )
    return graph


def _read_graph_file(source, directed, keep_self_loops):
    suffix = Path(source).suffix.lower() if source != STDIN else ""
    if suffix not in (".npz", ".mat"):
        return _read_edgelist(source, directed, keep_self_loops, stacklevel=5)
    adj = read_matrix(source)
    try:
        return from_scipy(adj, None, directed, keep_self_loops, source=source, stacklevel=3)
    except GraphFormatError:
        raise
    except InputError as err:
        raise_format_error(
            source,
            None,
            f"bad adjacency matrix ({err})",
            "expected a square sparse matrix of finite weights > 0",
        )
    except MemoryError:
        raise_format_error(
            source,
            None,
            f"a {adj.shape[0]}-node graph does not fit in memory",
            "check the matrix shape",
        )


# --------------------------------------------------------------------------- in-memory inputs


def coerce_graph(obj, directed: bool = False, keep_self_loops: bool = False, tokens: bool = True):
    """A :class:`Graph` from what a Python user already holds, plus each node's label.

    ``obj`` may be:

    * a :class:`Graph` (returned as it is; ``directed`` and ``keep_self_loops`` were
      fixed when it was built);
    * a square scipy.sparse matrix: :func:`from_scipy`, exactly as ``train --graph x.npz``
      reads the same matrix (ids ``'0' .. 'n-1'``);
    * a networkx graph: nodes in ``G.nodes`` order, labels kept (id ``str(label)``),
      edge attribute ``weight`` when present, isolated nodes kept;
    * an edge array (m, 2) or (m, 3) (``u v [weight]`` per row), or a pandas DataFrame
      with columns ``source``/``target`` (``weight`` optional) or else the first two
      (and a numeric third as the weight): ids are the values, numbered in order of
      first appearance, as :func:`read_edgelist` numbers the tokens of a file.

    The same policies as :func:`read_edgelist` apply: undirected unless ``directed``
    (a networkx ``DiGraph`` too; ``Caps2NE.fit`` passes ``directed=True`` for one by
    default), self loops dropped unless ``keep_self_loops``,
    duplicates merged.  ``tokens=False`` (the estimator) accepts labels whose
    ``str`` has whitespace.  Returns ``(graph, labels)``: ``labels[i]`` is node ``i`` as the
    input named it (an int stays an int), ``graph.node_ids[i] == str(labels[i])``.
    """
    if isinstance(obj, Graph):
        return obj, list(obj.node_ids)
    if sp.issparse(obj):
        g = from_scipy(obj, None, directed, keep_self_loops, stacklevel=2)
        return g, list(range(g.n_nodes))
    edges = edges_of(obj)
    if edges is None:
        hint = ""
        if isinstance(obj, (str, os.PathLike)):  # a file name: the reader takes it
            hint = f"; for a file, read it first: fit(read_edgelist({os.fspath(obj)!r}))"
        raise InputError(
            f"cannot read a graph from {type(obj).__name__}; give a scipy.sparse matrix, a "
            "networkx "
            "graph, an (m, 2|3) edge array, a pandas DataFrame of edges or a caps2ne_np Graph"
            + hint
        )
    src, dst, weights, ids, labels = edges
    return from_edges(
        src, dst, weights, ids, directed=directed, keep_self_loops=keep_self_loops, tokens=tokens
    ), labels
