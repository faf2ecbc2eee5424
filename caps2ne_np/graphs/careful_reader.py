"""The careful edge-list reader: plain Python string handling, the reference the NumPy
reader (graph.py) is tested against bit for bit, and the one place every error message
about a malformed edge list comes from (``"<path>:<line>: <what is wrong>; <fix>"``).

graph.py hands it the bytes the NumPy reader declined (a malformed line, a mix of
lines with and without a weight, a spelling of a number only ``float()`` takes,
Unicode whitespace, non-UTF-8 bytes); it gives the same Graph or the error.
"""

import os
import re
import warnings

import numpy as np

from ..errors import GraphFormatError, InputWarning
from ..io.files import decode, read_bytes
from .csr import build, raise_format_error

_FORMAT = "'u v' or 'u v w' (whitespace separated, '#' starts a comment)"


def _short(token: str) -> str:
    """repr of a token for a one-line message (escapes control characters, cuts long ones)."""
    return repr(token) if len(token) <= 40 else repr(token[:37]) + "..."


UNICODE_SPACE = re.compile("[\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
"""The whitespace ``str.split()`` knows beyond ASCII (a test checks it against ``str.isspace``)."""


def _space_note(line):
    """'; the line holds U+00A0 (NO-BREAK SPACE), ...' when ``line`` (outside a comment)
    holds a Unicode space that ``str.split`` splits fields at, else ''."""
    found = UNICODE_SPACE.search(line.partition("#")[0])
    if found is None:
        return ""
    import unicodedata

    ch = found.group()
    name = unicodedata.name(ch, "a Unicode space")
    return (
        f"; the line holds U+{ord(ch):04X} ({name}), which separates fields as a space "
        "does: replace it in the node id"
    )


def _warn_unicode_spaces(lines, source, stacklevel):
    """InputWarning at the first line whose fields a Unicode space other than ASCII's
    separated (read as the documented format says: fields are split at whitespace)."""
    for i, line in enumerate(lines):
        note = _space_note(line)
        if note:
            warnings.warn(
                InputWarning(f"{source}:{i + 1}: {note[2:]}, if it was meant as part of one"),
                stacklevel=stacklevel,
            )
            return


def _parse_weights(tokens, linenos, source, lines=None):
    """float64 weights of the given tokens; GraphFormatError on the first bad one
    (``lines``: the file's lines, for a note on a Unicode space in the bad one)."""
    try:
        w = np.fromiter(map(float, tokens), dtype=np.float64, count=len(tokens))
    except ValueError:
        for tok, line in zip(tokens, linenos):
            try:
                float(tok)
            except ValueError:
                raise_format_error(
                    source,
                    int(line),
                    f"weight {_short(tok)} is not a number",
                    "expected a number > 0 in the third column (fields are split at every "
                    "space and tab, so a node id cannot contain a space)"
                    + (_space_note(lines[int(line) - 1]) if lines is not None else "")
                    + _header_note(lines, int(line)),
                )
        raise_format_error(
            source, None, "a weight is not a number", "expected a number > 0 in the third column"
        )
    with np.errstate(over="ignore"):
        w32 = w.astype(
            np.float32
        )  # the stored value: '3.40282347e+38' is float32's max, not beyond it
    bad = ~(
        np.isfinite(w) & (w > 0) & np.isfinite(w32) & (w32 > 0)
    )  # NaN, <= 0, overflows or underflows float32
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise_format_error(
            source,
            int(linenos[j]),
            f"weight {_short(tokens[j])} is not a finite number > 0 that fits in float32",
            "weights must lie in (0, 3.4e38]; drop the edge instead of giving it weight 0",
        )
    return w


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_HEADER_WORD = re.compile(
    r"(source|target|src|dst|from|to|u|v|head|tail|node|nodes|id|ids|node_?id|"
    r"(node|id|vertex)_?[12ab]|vertex|weight|w)s?",
    re.IGNORECASE,
)
"""A column name a header line of an edge list is made of (checked on string ids)."""


def _first_edge_line(data: bytes):
    """(line number, fields) of the first line of ``data`` holding a field, or (None, [])."""
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    lineno = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        lineno += 1
        fields = data[start:end].decode("utf-8", "replace").partition("#")[0].split()
        if fields:
            return lineno, fields
        start = end + 1
    return None, []


def check_header(graph, data: bytes, source) -> None:
    """GraphFormatError naming the line when the first edge of an edge list (``data``,
    read into ``graph``) is a header line such as ``source target`` or ``id_1 id_2``:
    no other edge names its ids, and they are not numbers while every other node id
    is, or they are column names (:data:`_HEADER_WORD`); a line with a number as its
    weight is an edge.  Costs nothing when the first id is a number."""
    ids = graph.node_ids
    if not ids or _NUMBER.fullmatch(ids[0]):
        return
    lineno, fields = _first_edge_line(data)
    head = fields[:2]
    if len(head) < 2 or head[0] != ids[0]:
        return
    if len(fields) > 2 and _NUMBER.fullmatch(fields[2]):
        return  # a weight: an edge (a header names its weight column with a word)
    k = len(set(head))  # the first line's nodes are nodes 0 .. k-1 (first appearance)
    others = ids[k:]
    numeric = not any(_NUMBER.fullmatch(f) for f in head) and bool(others)
    numeric = numeric and all(_NUMBER.fullmatch(x) for x in others)
    if numeric:
        why = "its ids are not numbers while every other node id is"
    elif all(_HEADER_WORD.fullmatch(f) for f in head):
        why = "its ids are column names"
    else:
        return
    if not _alone(graph, k):
        return  # another edge names them: they are nodes
    raise_format_error(
        source,
        lineno,
        f"{' '.join(fields)!r} looks like a header line, not an edge ({why})",
        "remove the line, or start it with '#' to keep it as a comment",
    )


def _alone(graph, k) -> bool:
    """True when nodes 0 .. k-1 have edges only among themselves."""
    indptr, indices = graph.indptr, graph.indices
    inside = int(np.count_nonzero(indices[: indptr[k]] < k))
    return inside == int(indptr[k]) and inside == int(np.count_nonzero(indices < k))


def _header_note(lines, lineno) -> str:
    """'; a header line? ...' when line ``lineno`` of ``lines`` is the first with fields."""
    if lines is None or any(line.partition("#")[0].split() for line in lines[: lineno - 1]):
        return ""
    return "; if it is a header line, remove it or start it with '#'"


def read_edgelist_careful(path, directed, keep_self_loops, *, stacklevel, data=None, name=None):
    """The reference reader: Python string handling, every error with its line.

    ``data``: the file's bytes when already read, ``name`` the file's name in messages."""
    source = name if name is not None else os.fspath(path)
    if data is None:
        data = read_bytes(path, source, what="the edge list", error=GraphFormatError)
    text = decode(data, source, expected="a UTF-8 text edge list", error=GraphFormatError)
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
        fix = "expected " + _FORMAT + ("; a node id cannot contain a space" if lens[i] > 3 else "")
        if lens[i] == 1 and "," in rows[i][0]:
            fix += (
                "; fields are separated by whitespace, not commas: replace a CSV file's "
                "commas with spaces and remove its header line"
            )
        raise_format_error(source, i + 1, f"line has {what}", fix + _space_note(lines[i]))
    has_edge = np.flatnonzero(lens >= 2)
    if has_edge.size == 0:
        raise_format_error(
            source, None, f"no edges in {n_lines} line(s)", "expected one edge per line: " + _FORMAT
        )
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
        weights[weighted_rows] = _parse_weights(tokens, has_edge[weighted_rows] + 1, source, lines)
    if not text.isascii():
        _warn_unicode_spaces(lines, source, stacklevel + 1)
    return build(
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
