"""The checks every read of a user's file needs, written once for graph, io and datasets.

A file must exist and be a file; a text file must hold no NUL byte and be UTF-8 (a
leading byte-order mark is dropped); node ids are non-empty tokens without whitespace,
each listed once.  Each helper raises the error class it is given
(:class:`~caps2ne_np.errors.InputError`, or ``GraphFormatError`` for graph files) with
one line, ``"<path>[:<line>]: <what is wrong>; <expected / fix>"``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError


def read_bytes(path, name=None, *, what="the file", error=InputError) -> bytes:
    """All bytes of the file at ``path`` (shown as ``name``); ``error`` when it is missing,
    a directory or unreadable.  ``what`` names the file in the fix ("the edge list")."""
    name = os.fspath(path) if name is None else name
    p = Path(os.fspath(path))
    if p.is_dir():
        raise error(f"{name}: is a directory; give the path of {what}")
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise error(f"{name}: no such file; check the path to {what}") from None
    except OSError as err:
        raise error(
            f"{name}: cannot be read ({err.strerror or err}); check its permissions"
        ) from None


def decode(data: bytes, name, *, expected="text", error=InputError) -> str:
    """``data`` as text without a leading byte-order mark; ``error`` naming the line of
    the first NUL byte (binary content) or of the first byte that is not UTF-8."""
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise error(f"{name}:{line}: binary content (NUL byte); expected {expected}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(
            f"{name}:{line}: invalid UTF-8 (byte 0x{data[err.start]:02x}); expected {expected} "
            "(re-encode the file, e.g. iconv -t UTF-8)"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def read_lines(path, expected: str, *, error=InputError) -> list[str]:
    """The lines of a UTF-8 text file (``\\n``, ``\\r\\n`` or ``\\r`` endings), without the ends."""
    text = decode(
        read_bytes(path, what=expected, error=error), path, expected=expected, error=error
    )
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def is_token(node) -> bool:
    """True for a node id that can be written as one token: a non-empty string without
    whitespace (``str.split`` would cut it)."""
    return isinstance(node, str) and node != "" and node.split() == [node]


def first_repeat(ids):
    """(i, j) with ``ids[j] == ids[i]``, i < j, for the first j that repeats an earlier id;
    None when all differ."""
    if len(set(ids)) == len(ids):
        return None
    seen = {}
    for j, node in enumerate(ids):
        if node in seen:
            return seen[node], j
        seen[node] = j
    return None  # pragma: no cover - the set said otherwise


def check_ids(ids, n: int, where: str, *, rows: str = "rows", tokens: bool = True) -> list[str]:
    """``ids`` as a list of ``n`` unique tokens (:func:`is_token`); InputError naming the
    first bad or repeated one (``rows``: what the n things are, "rows" or "nodes").
    ``tokens=False`` (the Python API's labels): any strings, unique."""
    ids = list(ids)
    if len(ids) != n:
        raise InputError(
            f"{where}: {len(ids)} node ids for {n} {rows}; give one id per {rows[:-1]}"
        )
    for node in ids:
        if not (is_token(node) if tokens else isinstance(node, str)):
            raise InputError(
                f"{where}: node id {node!r} is not a non-empty string without whitespace; "
                "ids are written as tokens (word2vec files, .nodes.txt)"
            )
    repeat = first_repeat(ids)
    if repeat is not None:
        raise InputError(f"{where}: node id {ids[repeat[1]]!r} occurs twice; ids must be unique")
    return ids
