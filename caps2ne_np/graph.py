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

Two readers produce the same Graph (tested byte for byte): a fast one, a Numba
byte scanner over blocks of the file with a hash table of the ids and a
row-by-row CSR builder (O(bytes + edges) time, memory a few bytes per edge
beyond the result), for the common case; and the careful one, plain Python
string handling, which runs whenever the fast one meets anything unusual (a
malformed line, a weight that is not a plain decimal, a NUL byte, non-UTF-8 bytes
or non-ASCII whitespace), so every error message comes from one place.

Input that cannot be read twice -- ``"-"`` (standard input), a pipe, a FIFO, a
device -- and compressed files (``.gz``, ``.bz2``, ``.xz``, decompressed with the
standard library) are read once into memory, so both readers see the same bytes.
That read stops with a ``GraphFormatError`` at the first NUL byte, at a line longer
than ``MAX_LINE_BYTES`` or beyond ``max_stream_bytes()`` (``/dev/zero`` is refused at
once, never read until memory runs out).

A binary cache (:func:`save_graph_cache`, :func:`load_graph_cache`,
``read_graph(..., cache="use")``) stores the CSR and the ids next to the edge
list in ``<edge list>.cache.npz``, keyed on the source's size and a BLAKE2b hash
of its bytes (and on ``directed`` / ``keep_self_loops``), so a changed source --
even one of the same size and modification time -- or a cache copied next to
another file is never used.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import stat
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numba import prange

from caps2ne_np._jit import kernel
from caps2ne_np.errors import GraphFormatError, InputError, InputWarning
from caps2ne_np.io import load_npz, read_sparse_npz, save_npz

__all__ = [
    "Graph",
    "read_edgelist",
    "read_graph",
    "from_scipy",
    "from_edges",
    "cache_path",
    "save_graph_cache",
    "load_graph_cache",
    "StaleCacheError",
]

log = logging.getLogger(__name__)

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
    _weight_column: bool | None = field(default=None, init=False, repr=False)  # the input had weights

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


MAX_LINE_BYTES = 1 << 20   # a longer line in a stream is refused (no edge line is that long)
_STREAM_CHUNK = 1 << 20
COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}
STDIN = "-"


def max_stream_bytes() -> int:
    """The most a stream (stdin, pipe, FIFO, device, compressed file) may hold: half of
    the available memory (the readers need about as much again), at least 64 MB."""
    from caps2ne_np.errors import available_memory

    free = available_memory()
    return max(64 << 20, (free or (8 << 30)) // 2)


def _display(source: str) -> str:
    return "<stdin>" if source == STDIN else source


def _is_stream(source: str) -> bool:
    """Read once into memory: stdin, anything that is not a regular file, compressed files."""
    if source == STDIN or Path(source).suffix.lower() in COMPRESSED:
        return True
    try:
        return not stat.S_ISREG(os.stat(source).st_mode) and not stat.S_ISDIR(os.stat(source).st_mode)
    except OSError:
        return False


def _read_stream(source: str) -> bytes:
    """All bytes of a stream, read once; GraphFormatError for a NUL byte, an over-long
    line, more than ``max_stream_bytes()``, or a damaged compressed file."""
    name = _display(source)
    suffix = Path(source).suffix.lower() if source != STDIN else ""
    try:
        if source == STDIN:
            fh = sys.stdin.buffer
        elif suffix in COMPRESSED:
            import importlib

            fh = importlib.import_module(COMPRESSED[suffix]).open(source, "rb")
        else:
            fh = open(source, "rb")
    except FileNotFoundError:
        _fail(name, None, "no such file", "check the path to the edge list")
    except OSError as err:
        _fail(name, None, f"cannot be read ({err.strerror or err})", "check the file's permissions")
    cap = max_stream_bytes()
    parts, total, line, run = [], 0, 1, 0   # run: bytes since the last newline
    try:
        while True:
            try:
                chunk = fh.read(_STREAM_CHUNK)
            except (OSError, EOFError, ValueError) as err:  # gzip/bz2/lzma errors are among these
                kind = f"a damaged {suffix} file" if suffix in COMPRESSED else "a read error"
                _fail(name, None, f"{kind} ({type(err).__name__}: {' '.join(str(err).split())})",
                      "check the file" + (f" (e.g. {COMPRESSED[suffix]} -t)" if suffix == ".gz" else ""))
            if not chunk:
                break
            nul = chunk.find(b"\x00")
            if nul >= 0:
                _fail(name, line + chunk.count(b"\n", 0, nul), "binary content (NUL byte)",
                      "expected a UTF-8 text edge list")
            last = chunk.rfind(b"\n")
            longest = run + (len(chunk) if last < 0 else chunk.find(b"\n"))
            if last >= 0:
                pieces = chunk[:last].split(b"\n")
                longest = max([longest] + [len(p) for p in pieces[1:]])
                run = len(chunk) - last - 1
            else:
                run += len(chunk)
            if max(longest, run) > MAX_LINE_BYTES:
                _fail(name, None, f"a line longer than {MAX_LINE_BYTES} bytes",
                      "expected an edge list ('u v [w]' per line); is this the right file?")
            line += chunk.count(b"\n")
            total += len(chunk)
            if total > cap:
                _fail(name, None, f"more than {cap} bytes from a stream (half the available memory)",
                      "give a regular file instead")
            parts.append(chunk)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    return b"".join(parts)


def _read_text(path: Path, source: str, data: bytes | None = None) -> str:
    """The file's text, or a GraphFormatError for a missing/unreadable/binary/non-UTF-8 file."""
    if data is None:
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
    """The fast reader, or the careful one when the fast one declines (returns None).

    ``stacklevel`` is that of a function called from here (as ``_build``).
    """
    source = os.fspath(path)
    if source == "":
        raise GraphFormatError("graph path is empty; give the edge-list file (or '-' for standard input)")
    data = _read_stream(source) if _is_stream(source) else None   # read once: both readers see it
    name = _display(source)
    graph = _read_edgelist_fast(source, directed, keep_self_loops, stacklevel=stacklevel, data=data)
    if graph is None:
        graph = _read_edgelist_careful(source, directed, keep_self_loops, stacklevel=stacklevel,
                                       data=data, name=name)
    return graph


def _read_edgelist_careful(path, directed, keep_self_loops, *, stacklevel, data=None, name=None):
    """The reference reader: Python string handling, every error with its line.

    ``data``: the bytes of a stream already read (``_read_stream``), named ``name``."""
    source = name if name is not None else os.fspath(path)
    text = _read_text(Path(os.fspath(path)), source, data)
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
        stacklevel=stacklevel + 1,
    )


# --------------------------------------------------------------------------- fast reader
#
# The fast path reads the file in blocks of whole lines and runs one Numba scanner
# over each: it splits a line into tokens exactly as ``line.partition("#")[0].split()``
# does for ASCII whitespace, numbers ids in order of first appearance with an
# open-addressing hash table over the token bytes, and parses plain decimal weights
# to the same float64 as ``float()``.  Whatever it cannot vouch for, it hands back
# (``_SLOW``) and the careful reader reads the file from the start.  Non-ASCII bytes
# are fine inside tokens once their block decodes as UTF-8 and holds no Unicode
# whitespace: a UTF-8 sequence never contains an ASCII byte, so splitting the bytes
# and splitting the text agree.

_BLOCK = 1 << 25  # bytes read per block (32 MiB): the reader's buffer, whatever the file size
_UTF8_BOM = b"\xef\xbb\xbf"
_UNICODE_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
"""The whitespace ``str.split()`` knows beyond ASCII (tests check the list against ``str.isspace``)."""

# scanner state (an int64 array, so a scan can stop for more room and resume)
(_ST_POS, _ST_IDS, _ST_POOL, _ST_EDGES, _ST_NEWLINES, _ST_HARD, _ST_WEIGHTED, _ST_NONASCII,
 _ST_INTS, _ST_STRS) = range(10)
# why the scanner returned
_DONE, _MORE_EDGES, _MORE_INTS, _MORE_STRS, _MORE_POOL, _MORE_HARD, _NEED_WEIGHTS, _SLOW = range(8)

_M62 = (1 << 62) - 1  # hashes live in [0, 2^62): wrapping int64 and exact Python ints agree on them
_FNV_OFFSET = 0xCBF29CE484222325 & _M62
_FNV_PRIME = 0x100000001B3
_MIX = 0x1F3D5B79A2C4E687
_LOW32 = (1 << 32) - 1
_P10 = np.array([10.0**i for i in range(23)])  # 1e0 .. 1e22, all exact in float64


@kernel
def _is_space(c):
    """True for the ASCII bytes ``str.split()`` separates on, except the newline: \\t \\v \\f \\r, 0x1c-0x1f, space."""
    return c == 32 or (9 <= c <= 13 and c != 10) or (28 <= c <= 31)


@kernel
def _finish(h):
    """A multiply-xorshift finisher on [0, 2^62) (spreads the low bits the table uses)."""
    h ^= h >> 31
    h = (h * _MIX) & _M62
    return h ^ (h >> 29)


@kernel
def _token_hash(buf, s, e):
    """FNV-1a over buf[s:e], finished; a value in [0, 2^62)."""
    h = _FNV_OFFSET
    for i in range(s, e):
        h = ((h ^ int(buf[i])) * _FNV_PRIME) & _M62
    return _finish(h)


@kernel
def _canonical_int(buf, s, e):
    """(True, value) when buf[s:e] is '0' or [-][1-9][0-9]* with at most 18 digits, the
    spellings that map one to one onto integers ('07', '+7', '-0' are other tokens)."""
    i = s
    negative = buf[i] == 45
    if negative:
        i += 1
    n = e - i
    if n < 1 or n > 18 or (buf[i] == 48 and (n > 1 or negative)):
        return False, 0
    v = 0
    for t in range(i, e):
        d = int(buf[t]) - 48
        if d < 0 or d > 9:
            return False, 0
        v = v * 10 + d
    return True, -v if negative else v


@kernel
def _new_id(buf, s, e, pool, st):
    """Number buf[s:e] as the next id: append its bytes and a '\\n' to the pool; returns the id."""
    p = st[_ST_POOL]
    for t in range(e - s):
        pool[p + t] = buf[s + t]
    pool[p + e - s] = 10
    st[_ST_POOL] = p + e - s + 1
    i = st[_ST_IDS]
    st[_ST_IDS] = i + 1
    return i


@kernel
def _intern(buf, s, e, ints, strs, pool, st):
    """The index of the id buf[s:e]; a new id gets the next number (first appearance).

    Every id's bytes, each followed by '\\n', are appended to ``pool`` in id order (one
    decode and split gives all ids).  Integer-like tokens (``_canonical_int``) are
    looked up in ``ints``, int64 (2S,): slot j holds the value at 2j and id + 1 at
    2j + 1 (0 = empty), so a lookup reads one cache line.  Other tokens in ``strs``,
    int64 (2S,): (hash >> 31) << 32 | (id + 1) at 2j, the id's pool offset at 2j + 1,
    confirmed against the bytes there.  Linear probing; the caller guarantees free
    slots and room in the pool.
    """
    is_int, v = _canonical_int(buf, s, e)
    if is_int:
        mask = ints.shape[0] // 2 - 1
        slot = _finish(v & _M62) & mask
        while True:
            entry = ints[2 * slot + 1]
            if entry == 0:
                i = _new_id(buf, s, e, pool, st)
                ints[2 * slot] = v
                ints[2 * slot + 1] = i + 1
                st[_ST_INTS] += 1
                return i
            if ints[2 * slot] == v:
                return entry - 1
            slot = (slot + 1) & mask
    h = _token_hash(buf, s, e)
    mask = strs.shape[0] // 2 - 1
    tag = h >> 31
    slot = h & mask
    length = e - s
    while True:
        entry = strs[2 * slot]
        if entry == 0:
            offset = st[_ST_POOL]
            i = _new_id(buf, s, e, pool, st)
            strs[2 * slot] = (tag << 32) | (i + 1)
            strs[2 * slot + 1] = offset
            st[_ST_STRS] += 1
            return i
        if (entry >> 32) == tag:
            a = strs[2 * slot + 1]
            same = True
            for t in range(length):  # a shorter id ends in '\n', which no token byte equals
                if pool[a + t] != buf[s + t]:
                    same = False
                    break
            if same and pool[a + length] == 10:
                return (entry & _LOW32) - 1
        slot = (slot + 1) & mask


@kernel
def _rehash_ints(old, new):
    """Insert every entry of the integer table ``old`` into the empty, larger ``new``."""
    mask = new.shape[0] // 2 - 1
    for j in range(old.shape[0] // 2):
        if old[2 * j + 1] != 0:
            v = old[2 * j]
            slot = _finish(v & _M62) & mask
            while new[2 * slot + 1] != 0:
                slot = (slot + 1) & mask
            new[2 * slot] = v
            new[2 * slot + 1] = old[2 * j + 1]


@kernel
def _rehash_strs(old, new, pool):
    """Insert every entry of the string table ``old`` into the empty, larger ``new``
    (hashes recomputed from the pool)."""
    mask = new.shape[0] // 2 - 1
    for j in range(old.shape[0] // 2):
        if old[2 * j] != 0:
            a = old[2 * j + 1]
            b = a
            while pool[b] != 10:
                b += 1
            slot = _token_hash(pool, a, b) & mask
            while new[2 * slot] != 0:
                slot = (slot + 1) & mask
            new[2 * slot] = old[2 * j]
            new[2 * slot + 1] = a


@kernel
def _parse_weight(buf, s, e):
    """(code, value) for the token buf[s:e]: code 0 -> value == float(token); 1 -> a plain
    decimal this parser cannot round exactly (ask ``float``); 2 -> not a plain decimal.

    Plain decimal: [+-] (digits [. digits] | . digits) [(e|E) [+-] digits], ASCII.
    Exact case (Clinger 1990): the significant digits form an integer M <= 2^53 and the
    decimal exponent p has |p| <= 22; then M and 10^|p| are exact doubles and one
    multiplication or division rounds correctly, as ``float()`` does.
    """
    i = s
    negative = False
    if i < e and (buf[i] == 43 or buf[i] == 45):
        negative = buf[i] == 45
        i += 1
    mant = 0
    n_sig = 0
    exp10 = 0
    digits = 0
    inexact = False
    while i < e and 48 <= buf[i] <= 57:
        d = int(buf[i]) - 48
        digits += 1
        if mant > 0 or d > 0:
            if n_sig < 18:
                mant = mant * 10 + d
                n_sig += 1
            else:
                exp10 += 1
                inexact = inexact or d > 0
        i += 1
    if i < e and buf[i] == 46:
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            d = int(buf[i]) - 48
            digits += 1
            if mant > 0 or d > 0:
                if n_sig < 18:
                    mant = mant * 10 + d
                    n_sig += 1
                    exp10 -= 1
                else:
                    inexact = inexact or d > 0
            else:
                exp10 -= 1
            i += 1
    if digits == 0:
        return 2, 0.0
    if i < e and (buf[i] == 101 or buf[i] == 69):
        i += 1
        exp_negative = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            exp_negative = buf[i] == 45
            i += 1
        exp_digits = 0
        exp = 0
        while i < e and 48 <= buf[i] <= 57:
            if exp < 100000:
                exp = exp * 10 + (int(buf[i]) - 48)
            exp_digits += 1
            i += 1
        if exp_digits == 0:
            return 2, 0.0
        exp10 += -exp if exp_negative else exp
    if i != e:
        return 2, 0.0
    if mant == 0:
        return 0, -0.0 if negative else 0.0
    if inexact or mant > (1 << 53) or exp10 > 22 or exp10 < -22:
        return 1, 0.0
    value = float(mant) * _P10[exp10] if exp10 >= 0 else float(mant) / _P10[-exp10]
    return 0, -value if negative else value


@kernel
def _scan_edges(buf, end, st, ints, strs, pool, src, dst, w, hard):
    """Scan the lines of buf[st[POS]:end] (whole lines) into edges; returns why it stopped.

    A line is split at '\\n' only; '#' starts a comment; fields are separated by the
    bytes of ``_is_space``.  0 fields: skipped; 2: an edge src[e] -> dst[e]; 3: an
    edge with weight w[e]; 1 or more than 3: ``_SLOW`` (the careful reader names the
    line).  A NUL byte or a weight that is not a plain decimal: ``_SLOW``.  A weight
    needing ``float()`` is listed in hard (edge, start, end) and left as NaN.  When an
    array is full (or w is still empty at the first weight) the scan stops before
    the line, with st[POS] at its start, so the caller can grow it and resume.
    """
    pos = st[_ST_POS]
    starts = np.empty(3, dtype=np.int64)
    ends = np.empty(3, dtype=np.int64)
    while pos < end:
        line_start = pos
        n_fields = 0
        p = pos
        while p < end:
            c = buf[p]
            if c == 10:
                break
            if c == 35:  # '#': the rest of the line is a comment
                while p < end and buf[p] != 10:
                    if buf[p] == 0:
                        return _SLOW
                    if buf[p] >= 128:
                        st[_ST_NONASCII] = 1
                    p += 1
                break
            if _is_space(c):
                p += 1
                continue
            s = p
            while p < end:
                c = buf[p]
                if c == 10 or c == 35 or _is_space(c):
                    break
                if c == 0:
                    return _SLOW
                if c >= 128:
                    st[_ST_NONASCII] = 1
                p += 1
            if n_fields < 3:
                starts[n_fields] = s
                ends[n_fields] = p
            n_fields += 1
        if n_fields == 1 or n_fields > 3:
            return _SLOW
        if n_fields >= 2:
            e = st[_ST_EDGES]
            why = _DONE
            if e >= src.shape[0]:
                why = _MORE_EDGES
            elif st[_ST_IDS] + 2 > _INT32_MAX:
                why = _SLOW
            elif 2 * (st[_ST_INTS] + 2) > ints.shape[0] // 2:
                why = _MORE_INTS
            elif 2 * (st[_ST_STRS] + 2) > strs.shape[0] // 2:
                why = _MORE_STRS
            elif st[_ST_POOL] + (ends[0] - starts[0]) + (ends[1] - starts[1]) + 2 > pool.shape[0]:
                why = _MORE_POOL
            elif n_fields == 3 and w.shape[0] == 0:
                why = _NEED_WEIGHTS
            elif n_fields == 3 and st[_ST_HARD] >= hard.shape[0]:
                why = _MORE_HARD
            if why != _DONE:
                st[_ST_POS] = line_start
                return why
            src[e] = _intern(buf, starts[0], ends[0], ints, strs, pool, st)
            dst[e] = _intern(buf, starts[1], ends[1], ints, strs, pool, st)
            if n_fields == 3:
                st[_ST_WEIGHTED] = 1
                code, value = _parse_weight(buf, starts[2], ends[2])
                if code == 2:
                    return _SLOW
                if code == 1:
                    k = st[_ST_HARD]
                    hard[k, 0] = e
                    hard[k, 1] = starts[2]
                    hard[k, 2] = ends[2]
                    st[_ST_HARD] = k + 1
                    value = np.nan
                w[e] = value
            elif w.shape[0] > 0:
                w[e] = 1.0
            st[_ST_EDGES] = e + 1
        if p < end:  # buf[p] is the newline
            st[_ST_NEWLINES] += 1
            p += 1
        pos = p
    st[_ST_POS] = pos
    return _DONE


@kernel
def _last_newline(buf, lo, hi):
    """The largest i in [lo, hi) with buf[i] == '\\n', or -1."""
    for i in range(hi - 1, lo - 1, -1):
        if buf[i] == 10:
            return i
    return -1


def _grown(a, size):
    """A copy of ``a`` with length ``size`` >= len(a); the new entries are uninitialised."""
    out = np.empty((size,) + a.shape[1:], dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


class _Scan:
    """The scanner's arrays and how they grow: id tables, id bytes, edges, weights."""

    def __init__(self, edges_hint):
        self.st = np.zeros(10, dtype=np.int64)
        self.ints = np.zeros(2 << 16, dtype=np.int64)
        self.strs = np.zeros(2 << 10, dtype=np.int64)
        self.pool = np.empty(1 << 20, dtype=np.uint8)
        cap = max(int(edges_hint), 1024)
        self.src = np.empty(cap, dtype=np.int32)
        self.dst = np.empty(cap, dtype=np.int32)
        self.w = np.empty(0, dtype=np.float64)
        self.hard = np.empty((4096, 3), dtype=np.int64)

    def grow(self, why):
        """Make room after the scanner stopped with ``why``."""
        if why == _MORE_EDGES:
            cap = self.src.shape[0] + self.src.shape[0] // 2 + 1024
            self.src, self.dst = _grown(self.src, cap), _grown(self.dst, cap)
            if self.w.shape[0]:
                self.w = _grown(self.w, cap)
        elif why == _MORE_INTS:
            new = np.zeros(2 * self.ints.shape[0], dtype=np.int64)
            _rehash_ints(self.ints, new)
            self.ints = new
        elif why == _MORE_STRS:
            new = np.zeros(2 * self.strs.shape[0], dtype=np.int64)
            _rehash_strs(self.strs, new, self.pool)
            self.strs = new
        elif why == _MORE_POOL:
            self.pool = _grown(self.pool, 2 * self.pool.shape[0])
        elif why == _NEED_WEIGHTS:
            self.w = np.ones(self.src.shape[0], dtype=np.float64)  # earlier edges had weight 1

    def resolve_hard(self, buf):
        """Parse the listed weights with ``float()`` (they are plain decimals, so it succeeds)."""
        k = int(self.st[_ST_HARD])
        for e, a, b in self.hard[:k].tolist():
            self.w[e] = float(buf[a:b].tobytes())
        self.st[_ST_HARD] = 0


def _scan_block(scan, buf, end):
    """Scan buf[st[POS]:end] to its end; False if the careful reader must take over."""
    while True:
        why = _scan_edges(buf, end, scan.st, scan.ints, scan.strs, scan.pool, scan.src, scan.dst,
                          scan.w, scan.hard)
        scan.resolve_hard(buf)
        if why == _DONE:
            return True
        if why == _SLOW:
            return False
        scan.grow(why)


def _text_ok(raw: bytes) -> bool:
    """A block with non-ASCII bytes: valid UTF-8 and no whitespace beyond ASCII."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _UNICODE_SPACE.search(text) is None


def _scan_file(path, data=None):
    """(scan, n_lines) of the edge-list file (or of ``data``, a stream's bytes), or None
    where the careful reader must decide."""
    if data is not None:
        size, fh = len(data), io.BytesIO(data)
    else:
        try:
            size = os.path.getsize(path)
            fh = open(path, "rb")
        except OSError:
            return None
    with fh:
        buf = np.empty(min(_BLOCK, size) + 1, dtype=np.uint8)  # + 1: a full buffer means more to read
        scan = None
        filled = 0  # bytes in buf: the carried partial line, then what was read
        last_byte = -1
        text_bytes = 0
        while True:
            view = memoryview(buf)
            while filled < buf.shape[0]:
                got = fh.readinto(view[filled:])
                if not got:
                    break
                filled += got
            del view
            eof = filled < buf.shape[0]
            if scan is None:
                if buf[:3].tobytes() == _UTF8_BOM:  # as _read_text: one leading BOM is not text
                    buf[: filled - 3] = buf[3:filled].copy()
                    filled -= 3
                    size -= 3
                newlines = int(np.count_nonzero(buf[:filled] == 10))
                scan = _Scan(1.02 * (newlines + 1) * max(size, 1) / max(filled, 1) + 1024)
            end = filled if eof else _last_newline(buf, 0, filled) + 1
            if end == 0 and not eof:  # a line longer than the buffer: read more of it
                buf = _grown(buf, 2 * buf.shape[0])
                continue
            scan.st[_ST_POS] = 0
            scan.st[_ST_NONASCII] = 0
            if not _scan_block(scan, buf, end):
                return None
            if scan.st[_ST_NONASCII] and not _text_ok(buf[:end].tobytes()):
                return None
            if end > 0:
                last_byte = int(buf[end - 1])
                text_bytes += end
            if eof:
                break
            rest = filled - end
            buf[:rest] = buf[end:filled].copy()
            filled = rest
    n_lines = int(scan.st[_ST_NEWLINES]) + (1 if text_bytes and last_byte != 10 else 0)
    return scan, n_lines


def _read_edgelist_fast(source, directed, keep_self_loops, *, stacklevel, data=None):
    """The Graph of the edge list at ``source`` (or of ``data``, a stream's bytes), or None
    when the careful reader must decide."""
    found = _scan_file(source, data)
    if found is None:
        return None
    scan, n_lines = found
    del found
    st = scan.st
    m, n = int(st[_ST_EDGES]), int(st[_ST_IDS])
    if m == 0 or n > _INT32_MAX:
        return None
    weights = None
    if st[_ST_WEIGHTED]:
        weights = scan.w[:m]
        with np.errstate(over="ignore"):
            w32 = weights.astype(np.float32)
        ok = np.isfinite(weights) & (weights > 0) & np.isfinite(w32) & (w32 > 0)  # as _parse_weights
        if not ok.all():
            return None
        del w32, ok
    src, dst = scan.src[:m], scan.dst[:m]
    pool = scan.pool[: int(st[_ST_POOL]) - 1]  # the ids, '\n' between them
    del scan
    csr = _build_csr(src, dst, weights, n, directed, keep_self_loops)
    del src, dst, weights
    if csr is None:
        return None
    indptr, indices, w, stats = csr
    node_ids = pool.tobytes().decode("utf-8").split("\n")
    del pool
    stats = {"lines": n_lines, **stats}
    _warn_stats(_display(source), stats, bool(st[_ST_WEIGHTED]), directed, keep_self_loops, stacklevel=stacklevel + 1)
    graph = Graph(indptr=indptr, indices=indices, weights=w, node_ids=node_ids, directed=bool(directed), stats=stats)
    graph._weight_column = bool(st[_ST_WEIGHTED])
    return graph


# --------------------------------------------------------------------------- CSR in O(n + m)


@kernel
def _count_rows(src, dst, directed, keep_loops, counts):
    """counts[u + 1] += 1 for every stored edge u -> v (and v -> u when undirected, u != v)."""
    for e in range(src.shape[0]):
        u, v = src[e], dst[e]
        if u == v and not keep_loops:
            continue
        counts[u + 1] += 1
        if not directed and u != v:
            counts[v + 1] += 1


@kernel
def _fill_rows(src, dst, w, directed, keep_loops, nxt, indices, vals):
    """Row u receives its out-neighbours in input order (a stable counting sort by row);
    ``vals`` (empty when unweighted) the weights beside them."""
    weighted = vals.shape[0] > 0
    for e in range(src.shape[0]):
        u, v = src[e], dst[e]
        if u == v and not keep_loops:
            continue
        k = nxt[u]
        indices[k] = v
        if weighted:
            vals[k] = w[e]
        nxt[u] = k + 1
        if not directed and u != v:
            k = nxt[v]
            indices[k] = u
            if weighted:
                vals[k] = w[e]
            nxt[v] = k + 1


@kernel(parallel=True)
def _sort_dedup_rows(indptr, indices, vals, directed, row_len, row_dups):
    """Sort each row by neighbour (stably), merge repeats (weights summed in input order)
    at the row's start; row_len[r] = distinct neighbours, row_dups[r] = merged entries
    counted once per edge (undirected: only those with neighbour >= r)."""
    weighted = vals.shape[0] > 0
    for r in prange(indptr.shape[0] - 1):
        lo, hi = indptr[r], indptr[r + 1]
        if hi - lo <= 32:  # insertion sort: stable, and fast on short rows
            for i in range(lo + 1, hi):
                x = indices[i]
                y = vals[i] if weighted else 0.0
                j = i - 1
                while j >= lo and indices[j] > x:
                    indices[j + 1] = indices[j]
                    if weighted:
                        vals[j + 1] = vals[j]
                    j -= 1
                indices[j + 1] = x
                if weighted:
                    vals[j + 1] = y
        elif not weighted:
            indices[lo:hi].sort()
        else:
            order = np.argsort(indices[lo:hi], kind="mergesort")
            sorted_idx = indices[lo:hi][order]
            sorted_val = vals[lo:hi][order]
            indices[lo:hi] = sorted_idx
            vals[lo:hi] = sorted_val
        dups = 0
        j = lo
        for i in range(lo + 1, hi):
            if indices[i] == indices[j]:
                if weighted:
                    vals[j] += vals[i]
                if directed or indices[i] >= r:
                    dups += 1
            else:
                j += 1
                indices[j] = indices[i]
                if weighted:
                    vals[j] = vals[i]
        row_len[r] = j - lo + 1 if hi > lo else 0
        row_dups[r] = dups


@kernel
def _compact_rows(indptr, new_indptr, indices, vals):
    """Move each row's merged entries from indptr[r] down to new_indptr[r] <= indptr[r]."""
    weighted = vals.shape[0] > 0
    for r in range(indptr.shape[0] - 1):
        a, b = indptr[r], new_indptr[r]
        if a != b:
            for t in range(new_indptr[r + 1] - b):
                indices[b + t] = indices[a + t]
                if weighted:
                    vals[b + t] = vals[a + t]


def _build_csr(src, dst, weights, n, directed, keep_self_loops):
    """``_build``'s CSR from int32 src/dst (m,) and float64 weights or None, in O(n + m)
    time and 4 bytes per stored edge (12 with weights) beyond the inputs; returns
    (indptr, indices, weights float32 or None, stats without "lines"), or None where
    ``_build`` raises (no edges left, summed weights beyond float32).

    Rows are filled in input order and sorted stably, so duplicate weights are summed
    in input order, as ``_build``'s ``np.bincount``: the same float64 sums.
    """
    n_loops = int(np.count_nonzero(src == dst))
    indptr = np.zeros(n + 1, dtype=np.int64)
    _count_rows(src, dst, bool(directed), bool(keep_self_loops), indptr)
    np.cumsum(indptr, out=indptr)
    nnz = int(indptr[-1])
    if nnz == 0:
        return None
    indices = np.empty(nnz, dtype=np.int32)
    vals = np.empty(nnz if weights is not None else 0, dtype=np.float64)
    w_in = weights if weights is not None else np.empty(0, dtype=np.float64)
    nxt = indptr[:-1].copy()
    _fill_rows(src, dst, w_in, bool(directed), bool(keep_self_loops), nxt, indices, vals)
    del nxt
    row_len = np.empty(n, dtype=np.int64)
    row_dups = np.empty(n, dtype=np.int64)
    _sort_dedup_rows(indptr, indices, vals, bool(directed), row_len, row_dups)
    n_dup = int(row_dups.sum())
    del row_dups
    if int(row_len.sum()) != nnz:
        new_indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(row_len, out=new_indptr[1:])
        _compact_rows(indptr, new_indptr, indices, vals)
        indptr = new_indptr
        nnz = int(indptr[-1])
        indices = indices[:nnz].copy()
        vals = vals[:nnz].copy() if weights is not None else vals
    w = None
    if weights is not None:
        with np.errstate(over="ignore"):
            w = vals.astype(np.float32)
        del vals
        if not np.all(np.isfinite(w)):
            return None
        if np.all(w == 1.0):
            w = None
    stats = {
        "edges_read": int(src.shape[0]),
        "self_loops": n_loops,
        "duplicates": n_dup,
        "isolated_nodes": int(np.count_nonzero(row_len == 0)),
    }
    return indptr, indices, w, stats


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
        raise GraphFormatError("graph path is empty; give the edge-list file (or '-' for standard input)")
    if cache is not None and (source == STDIN or (_is_stream(source) and
                                                  Path(source).suffix.lower() not in COMPRESSED)):
        raise InputError(f"{_display(source)}: a pipe, FIFO or device has no file to cache; "
                         "read it without the cache (--graph-cache off)")
    if cache == "use":
        try:
            return _load_graph_cache(source, directed, keep_self_loops, stacklevel=3)
        except GraphFormatError as err:
            log.info("not using the graph cache (%s); reading %s", err, source)
    stamp = _stamp(source) if cache is not None else None
    graph = _read_graph_file(source, directed, keep_self_loops)
    if cache is not None and stamp is not None:
        try:
            _save_graph_cache(graph, source, stamp, keep_self_loops)
        except (InputError, OSError) as err:
            if cache == "write":
                raise
            warnings.warn(f"{cache_path(source)}: graph cache not written ({err})", InputWarning, stacklevel=2)
    return graph


def _read_graph_file(source, directed, keep_self_loops):
    suffix = Path(source).suffix.lower() if source != STDIN else ""
    if suffix not in (".npz", ".mat"):
        return _read_edgelist(source, directed, keep_self_loops, stacklevel=5)
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
        return _from_scipy(adj, None, directed, keep_self_loops, source=source, stacklevel=5)
    except GraphFormatError:
        raise
    except InputError as err:
        _fail(source, None, f"bad adjacency matrix ({err})", "expected a square sparse matrix of finite weights > 0")
    except MemoryError:
        _fail(source, None, f"a {adj.shape[0]}-node graph does not fit in memory", "check the matrix shape")


# --------------------------------------------------------------------------- binary cache

_CACHE_FORMAT = "caps2ne_np.graph-cache"
_CACHE_VERSION = 2   # 2: keyed on a hash of the content (1: size and mtime)


class StaleCacheError(GraphFormatError):
    """A graph cache that does not belong to the file as it is now (or to the options asked for)."""


def cache_path(path) -> Path:
    """Where the binary cache of the graph file ``path`` lives: ``<path>.cache.npz`` beside it."""
    return Path(os.fspath(path) + ".cache.npz")


def _stamp(source, size_only=None):
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


@kernel
def _has_diagonal(indptr, indices):
    """True when some row r holds r (a stored self loop)."""
    for r in range(indptr.shape[0] - 1):
        for e in range(indptr[r], indptr[r + 1]):
            if indices[e] == r:
                return True
    return False


def save_graph_cache(graph: Graph, path) -> Path:
    """Write ``graph``, read from the file ``path``, to ``cache_path(path)``; returns that path.

    The cache (an ``.npz`` without pickles, written atomically) holds the CSR arrays,
    the ids, ``directed``, whether self loops were kept, ``Graph.stats``, and the
    size and a BLAKE2b hash of ``path`` now: :func:`load_graph_cache` refuses it
    once the file changes.  An existing cache is replaced; any other file at that
    path is not (``InputError``).
    """
    source = os.fspath(path)
    stamp = _stamp(source)
    if stamp is None:
        raise InputError(f"{source}: cannot stat the graph file the cache is for; check the path")
    keep = None
    if graph.stats.get("self_loops"):
        keep = bool(_has_diagonal(graph.indptr, graph.indices))
    return _save_graph_cache(graph, source, stamp, keep)


def _save_graph_cache(graph, source, stamp, keep_self_loops):
    target = cache_path(source)
    if target.exists() and not _is_graph_cache(target):
        raise InputError(f"{target}: exists and is not a graph cache; remove or rename it to cache {source}")
    if not graph.stats.get("self_loops"):
        keep_self_loops = None  # no self loop in the input: the same graph either way
    ids = "\n".join(graph.node_ids).encode("utf-8")
    weights = graph.weights if graph.weights is not None else np.empty(0, dtype=np.float32)
    weight_column = graph._weight_column if graph._weight_column is not None else graph.weights is not None
    save_npz(
        target,
        overwrite=True,
        format=np.asarray(_CACHE_FORMAT),
        version=np.int64(_CACHE_VERSION),
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
        source_size=np.int64(stamp[0]),
        source_hash=np.asarray(stamp[1]),
    )
    return target


def _is_graph_cache(target) -> bool:
    try:
        with np.load(target, allow_pickle=False) as z:
            return "format" in z.files and str(z["format"]) == _CACHE_FORMAT
    except Exception:  # noqa: BLE001 -- not an npz at all
        return False


def load_graph_cache(path, directed: bool | None = None, keep_self_loops: bool | None = None) -> Graph:
    """The Graph cached for the file ``path`` by :func:`save_graph_cache` (or ``read_graph(cache=...)``).

    Raises :class:`StaleCacheError` when ``path`` no longer has the size and content
    hash recorded in the cache (or is gone), or when ``directed`` /
    ``keep_self_loops`` are given and differ from the cached graph's; and
    ``GraphFormatError`` for a missing or damaged cache.  Warns as reading the file did.
    """
    return _load_graph_cache(os.fspath(path), directed, keep_self_loops, stacklevel=3)


def _load_graph_cache(source, directed, keep_self_loops, *, stacklevel):
    target = cache_path(source)
    if not target.is_file():
        _fail(target, None, "no such file", f"write it with read_graph({source!r}, cache='write')")
    try:
        z = load_npz(target)
    except InputError as err:
        raise GraphFormatError(str(err)) from None

    def damaged(what):
        _fail(target, None, f"damaged graph cache ({what})", "delete it; read_graph(..., cache='use') rebuilds it")

    names = ("format", "version", "indptr", "indices", "weights", "weighted", "node_ids", "n_nodes", "directed",
             "keep_self_loops", "weight_column", "stats", "source_size", "source_hash")
    if "format" not in z or z["format"].dtype.kind != "U" or str(z["format"]) != _CACHE_FORMAT:
        _fail(target, None, "not a graph cache", "delete it; read_graph(..., cache='use') rebuilds it")
    if "version" in z and np.ndim(z["version"]) == 0 and int(z["version"]) != _CACHE_VERSION:
        raise StaleCacheError(f"{target}: cache format version {int(z['version'])}, this reader writes "
                              f"{_CACHE_VERSION}; read_graph(..., cache='use') rebuilds it")
    missing = [name for name in names if name not in z]
    if missing:
        _fail(target, None, "not a graph cache", "delete it; read_graph(..., cache='use') rebuilds it")
    stamp = _stamp(source, size_only=int(z["source_size"]))
    if stamp != (int(z["source_size"]), str(z["source_hash"])):
        what = "is gone" if stamp is None else "has other content than the file the cache was written from"
        raise StaleCacheError(f"{target}: stale: {source} {what}; read_graph(..., cache='use') rebuilds it")
    cached_directed = bool(z["directed"])
    cached_keep = int(z["keep_self_loops"])
    if directed is not None and bool(directed) != cached_directed:
        raise StaleCacheError(f"{target}: cached with directed={cached_directed}, asked for directed={bool(directed)}; "
                              "rebuild it with cache='write'")
    if keep_self_loops is not None and cached_keep >= 0 and bool(keep_self_loops) != bool(cached_keep):
        raise StaleCacheError(f"{target}: cached with keep_self_loops={bool(cached_keep)}, asked for "
                              f"keep_self_loops={bool(keep_self_loops)}; rebuild it with cache='write'")
    indptr, indices, weights = z["indptr"], z["indices"], z["weights"]
    n = int(z["n_nodes"])
    if indptr.dtype != np.int64 or indices.dtype != np.int32 or weights.dtype != np.float32:
        damaged("array types")
    if indptr.shape != (n + 1,) or indptr[0] != 0 or indptr[-1] != indices.shape[0] or np.any(np.diff(indptr) < 0):
        damaged("row pointers")
    if indices.shape[0] and (int(indices.min()) < 0 or int(indices.max()) >= n):
        damaged("neighbour indices")
    if bool(z["weighted"]):
        if weights.shape != indices.shape or not np.all(np.isfinite(weights) & (weights > 0)):
            damaged("weights")
    else:
        weights = None
    try:
        node_ids = z["node_ids"].tobytes().decode("utf-8").split("\n")
        stats = json.loads(str(z["stats"]))
    except (UnicodeDecodeError, ValueError):
        damaged("ids or stats")
    if len(node_ids) != n:
        damaged(f"{len(node_ids)} ids for {n} nodes")
    if not isinstance(stats, dict) or any(key not in stats for key in ("self_loops", "duplicates", "isolated_nodes")):
        damaged("stats")
    _warn_stats(source, stats, bool(z["weight_column"]), cached_directed, cached_keep != 0, stacklevel=stacklevel + 1)
    graph = Graph(indptr=indptr, indices=indices, weights=weights, node_ids=node_ids, directed=cached_directed,
                  stats=stats)
    graph._weight_column = bool(z["weight_column"])
    return graph


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
            _fail(source, None, f"no edges left after dropping {n_loops} self loops", "pass --keep-self-loops (keep_self_loops=True) to keep them")
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
    _warn_stats(source, stats, weights is not None, directed, keep_self_loops, stacklevel=stacklevel + 1)
    graph = Graph(indptr=indptr, indices=indices, weights=w, node_ids=list(node_ids), directed=bool(directed),
                  stats=stats)
    graph._weight_column = weights is not None
    return graph


def _warn_stats(source, stats, weight_column, directed, keep_self_loops, *, stacklevel):
    """One InputWarning per policy that changed the input: dropped self loops, merged
    duplicates, nodes without out-edges (``stats`` as ``Graph.stats``)."""
    n_loops, n_dup, n_isolated = stats["self_loops"], stats["duplicates"], stats["isolated_nodes"]
    if n_loops and not keep_self_loops:
        warnings.warn(
            f"{source}: dropped {n_loops} self loop(s); pass --keep-self-loops (keep_self_loops=True) to keep them",
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


# --------------------------------------------------------------------------- in-memory inputs


def coerce_graph(obj, directed: bool = False, keep_self_loops: bool = False):
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
    (a networkx ``DiGraph`` too), self loops dropped unless ``keep_self_loops``,
    duplicates merged.  Returns ``(graph, labels)``: ``labels[i]`` is node ``i`` as the
    input named it (an int stays an int), ``graph.node_ids[i] == str(labels[i])``.
    """
    if isinstance(obj, Graph):
        return obj, list(obj.node_ids)
    if sp.issparse(obj):
        g = _from_scipy(obj, None, directed, keep_self_loops, source="adj", stacklevel=4)
        return g, list(range(g.n_nodes))
    if all(hasattr(obj, a) for a in ("nodes", "edges", "is_directed", "adj")):
        return _from_networkx(obj, directed, keep_self_loops)
    if hasattr(obj, "columns") and hasattr(obj, "iloc"):
        return _from_frame(obj, directed, keep_self_loops)
    if isinstance(obj, (np.ndarray, list, tuple)):
        return _from_edge_array(np.asarray(obj), directed, keep_self_loops, "edges")
    raise InputError(
        f"cannot read a graph from {type(obj).__name__}; give a scipy.sparse matrix, a networkx "
        "graph, an (m, 2|3) edge array, a pandas DataFrame of edges or a caps2ne_np Graph"
    )


def _labels_and_index(u, v):
    """Node labels in order of first appearance in u0, v0, u1, v1, ...; and u, v as indices."""
    both = np.column_stack([u, v]).ravel()
    if both.dtype == object:
        keys = np.array([str(x) for x in both], dtype=object)
        text = {}
        for key, x in zip(keys, both):
            text.setdefault(key, x)
        uniq, first, inverse = np.unique(keys.astype(str), return_index=True, return_inverse=True)
    else:
        uniq, first, inverse = np.unique(both, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")          # unique values by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    idx = rank[inverse.ravel()].reshape(-1, 2)
    if both.dtype == object:
        labels = [text[str(uniq[k])] for k in order]
    else:
        labels = [x.item() for x in uniq[order]]
    return labels, idx[:, 0].astype(np.int64), idx[:, 1].astype(np.int64)


def _id_column(col, name):
    col = np.asarray(col)
    if col.dtype.kind == "f":
        if not np.all(np.isfinite(col)) or not np.all(col == np.round(col)):
            raise InputError(f"{name}: node ids must be integers or strings, got non-integer floats")
        col = col.astype(np.int64)
    elif col.dtype.kind not in "iuUSO":
        raise InputError(f"{name}: node ids must be integers or strings, got dtype {col.dtype}")
    if col.dtype.kind in "US":
        col = col.astype(object)
    return col


def _from_edge_array(arr, directed, keep_self_loops, name, weights=None):
    if arr.ndim != 2 or arr.shape[1] not in (2, 3):
        raise InputError(f"{name}: expected an (m, 2) or (m, 3) edge array 'u v [weight]', got shape {arr.shape}")
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
    ids = [str(x) for x in labels]
    if weights is not None and np.all(weights == 1.0):
        weights = None
    g = from_edges(src, dst, weights, ids, directed=directed, keep_self_loops=keep_self_loops)
    return g, labels


def _from_frame(df, directed, keep_self_loops):
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
                raise InputError(f"DataFrame column {cols[2]!r}: expected numeric edge weights") from None
    else:
        raise InputError(f"DataFrame with columns {cols}: expected 'source', 'target' (and 'weight'), "
                         "or two (three) columns u, v (weight)")
    arr = np.empty((len(u), 2), dtype=object)
    arr[:, 0], arr[:, 1] = u, v
    if u.dtype.kind in "iuf" and v.dtype.kind in "iuf":
        arr = np.column_stack([u, v])
    return _from_edge_array(arr, directed, keep_self_loops, "DataFrame", weights=w)


def _from_networkx(G, directed, keep_self_loops):
    labels = list(G.nodes)
    ids = _check_node_ids([str(x) for x in labels], len(labels), what="networkx node labels")
    index = {x: i for i, x in enumerate(labels)}
    m = G.number_of_edges()
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    w = np.empty(m, dtype=np.float64)
    for e, (a, b, weight) in enumerate(G.edges(data="weight", default=1.0)):
        src[e], dst[e], w[e] = index[a], index[b], weight
    weights = None if np.all(w == 1.0) else w
    if weights is not None and not np.all(np.isfinite(weights) & (weights > 0)):
        raise InputError("networkx edge weights must be finite and > 0")
    return from_edges(src, dst, weights, ids, directed=directed, keep_self_loops=keep_self_loops), labels
