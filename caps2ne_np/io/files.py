"""The checks every read of a user's file needs, written once for graph, io and datasets.

A file must exist and be a file; a text file must hold no NUL byte and be UTF-8 (a
leading byte-order mark is dropped); node ids are non-empty tokens without whitespace,
each listed once; an ``.npy`` header must match the file's size and a scipy sparse
``.npz`` must hold well-formed index arrays.  This is the one module of io/ that the
graph input (graphs/) reads through; the graph cache alone writes and reads its own
``.npz`` with npy.py.  Each helper raises the error class it is given
(:class:`~caps2ne_np.errors.InputError`, or ``GraphFormatError`` for graph files) with
one line, ``"<path>[:<line>]: <what is wrong>; <expected / fix>"``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

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


def text_ids(node_ids, n: int, where: str) -> list:
    """The ``n`` node ids or labels as the tokens a text format writes (``str(label)``:
    ints and other labels as their string); InputError naming a few that cannot be
    written (empty or with whitespace) and how many, or the first repeated one."""
    ids = [node if isinstance(node, str) else str(node) for node in node_ids]
    bad = [node for node in ids if not is_token(node)]
    if bad:
        shown = ", ".join(repr(node) for node in bad[:3])
        raise InputError(
            f"{where}: {len(bad)} of {len(ids)} node ids cannot be written as text tokens "
            f"(empty or containing whitespace), e.g. {shown}; rename them (e.g. spaces to "
            "'_') or keep them in Python (Caps2NE.save writes any label)"
        )
    return check_ids(ids, n, where)


def check_unique(path, ids, first: int, unit: str) -> None:
    """InputError naming the second occurrence of a repeated id (``unit`` 'line' or 'row')."""
    repeat = first_repeat(ids)
    if repeat is not None:
        i, j = repeat
        where = f"{path}:{first + j}" if unit == "line" else f"{path}: row {first + j}"
        raise InputError(
            f"{where}: duplicate id {ids[j]!r} (first at {unit} {first + i}); ids must be unique"
        )


_NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first entry, or an empty zip


def check_npy_header(path) -> tuple:
    """(shape, dtype) from the header of the ``.npy`` at ``path``, checked against its size.

    Raises ``InputError`` naming the file when it is not an ``.npy`` (an ``.npz`` is
    named as such), holds Python objects, or is shorter or longer than its header
    says, so that ``np.load`` is never asked to allocate what the file does not hold.
    """
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            head = fh.read(len(_NPY_MAGIC))
            if head.startswith(ZIP_MAGIC):
                raise InputError(
                    f"{path}: is an .npz (zip) archive; expected an .npy file written by numpy.save"
                )
            if head != _NPY_MAGIC:
                raise InputError(
                    f"{path}: not an .npy file (no NumPy header); "
                    "expected a file written by numpy.save"
                )
            fh.seek(0)
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                return None, None  # a newer header: np.load itself checks it
            offset = fh.tell()
    except InputError:
        raise
    except OSError as err:
        raise InputError(
            f"{path}: cannot be read ({err.strerror or err}); check the path and its permissions"
        ) from None
    except Exception as err:  # noqa: BLE001 -- any failure to parse the header is a bad file
        raise InputError(
            f"{path}: bad .npy header ({type(err).__name__}: {err}); "
            "expected a file written by numpy.save"
        ) from None
    if dtype.hasobject:
        raise InputError(
            f"{path}: holds Python objects (dtype {dtype}); "
            "expected a numeric array, saved without pickles"
        )
    need = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if need != size - offset:
        raise InputError(
            f"{path}: header promises shape {shape} {dtype} ({need} bytes) "
            f"but {size - offset} bytes follow; "
            "the file is truncated or damaged"
        )
    return shape, dtype


def read_sparse_npz(path):
    """The matrix in a ``scipy.sparse.save_npz`` file, its structure checked in full.

    ``scipy.sparse.load_npz`` trusts the stored index arrays (it skips most checks
    when ``indptr[-1]`` is 0), and later operations on a bad one raise odd errors or
    crash the process.  Raises ``ValueError`` (or the reader's own exception) for
    anything that is not a well-formed sparse matrix; callers add the file name.
    """
    with open(path, "rb") as fh:
        if not fh.read(4).startswith(ZIP_MAGIC):
            raise ValueError("not a zip archive")
    import scipy.sparse as sp  # on first use: importing graphs.datasets stays light

    m = sp.load_npz(path)
    if m.format in ("csr", "csc", "bsr"):
        indptr, indices = np.asarray(m.indptr), np.asarray(m.indices)
        if indptr.ndim != 1 or indptr.size < 1 or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise ValueError("indptr must start at 0 and never decrease")
        if indptr[-1] != indices.size or np.shape(m.data)[0] != indices.size:
            raise ValueError(
                f"indptr ends at {indptr[-1]} for {indices.size} indices "
                f"and {np.shape(m.data)[0]} values"
            )
        m.check_format(full_check=True)  # indices within the shape, lengths consistent
    return m
