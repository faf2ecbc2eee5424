"""word2vec embedding files, text and binary (docs/input-formats.md).

- text, as gensim ``KeyedVectors.load_word2vec_format`` reads it: a header ``n k``,
  then one line per node in index order, ``node_id v1 ... vk``, single spaces, UTF-8.
  Values are float32 written with ``%.9g``: nine significant digits identify every
  float32, so reading the file back gives the same bits.
- binary (``binary=True``): the same header line, then per node ``node_id`` + ``b" "``
  + k little-endian float32 + ``b"\\n"``.

Node ids are non-empty strings without whitespace (they are tokens of a line), and
unique.  Writes are atomic (atomic.py).  The reader checks the header against the
bytes that follow and refuses NaN or infinite values, with a one-line
:class:`~caps2ne_np.errors.InputError` naming path:line.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import InputError
from .atomic import atomic_write
from .blocks import CHUNK_ROWS, as_blocks
from .files import check_unique, is_token, read_bytes, text_ids

__all__ = ["write_word2vec", "read_word2vec"]


def write_word2vec(path, node_ids, vectors, overwrite: bool = False, binary: bool = False) -> None:
    """Write (n, k) vectors in word2vec text (``%.9g``, exact) or binary format, atomically.

    ``vectors`` is an array or a :class:`RowBlocks` (same bytes either way)."""
    blocks = as_blocks(vectors)
    n, k = blocks.shape
    ids = text_ids(node_ids, n, os.fspath(path))
    header = f"{n} {k}\n"
    line = "%s" + " %.9g" * k + "\n"  # float32 -> Python float is exact; %.9g round-trips float32
    row = 4 * k
    with atomic_write(path, "wb" if binary else "w", overwrite=overwrite) as f:
        f.write(header.encode("ascii") if binary else header)
        first = 0  # global row of the block's first row
        for block in blocks:
            for a in range(0, block.shape[0], CHUNK_ROWS):  # bounds the formatted strings
                chunk = block[a : a + CHUNK_ROWS]
                names = ids[first + a : first + a + chunk.shape[0]]
                if binary:
                    raw = chunk.astype("<f4", copy=False).tobytes()
                    f.write(
                        b"".join(
                            node.encode("utf-8") + b" " + raw[j * row : (j + 1) * row] + b"\n"
                            for j, node in enumerate(names)
                        )
                    )
                else:
                    f.write(
                        "".join(
                            [line % (node, *values) for node, values in zip(names, chunk.tolist())]
                        )
                    )
            first += block.shape[0]


def _parse_header(path, data: bytes):
    """(n, k, offset of the first row) from the ``n k`` header line."""
    end = data.find(b"\n")
    raw = data[: end if end >= 0 else len(data)]
    try:
        fields = raw.decode("ascii").split()
        n, k = (int(x) for x in fields)
    except (UnicodeDecodeError, ValueError):
        raise InputError(
            f"{path}:1: header {raw[:60]!r} is not 'n k'; "
            "expected a word2vec file starting with 'rows dim'"
        ) from None
    if n < 0 or k < 1:
        raise InputError(
            f"{path}:1: header says {n} rows of dimension {k}; expected rows >= 0 and dim >= 1"
        )
    return n, k, (end + 1 if end >= 0 else len(data))


def _read_text_rows(path, text: str, n: int, k: int):
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) != n:
        line = n + 2 if len(lines) > n else len(lines) + 2
        raise InputError(
            f"{path}:{line}: header promises {n} rows, the file has {len(lines)}; "
            "fix the header or the rows"
        )
    if n * k * 2 > len(text):  # every value needs a separator and a digit: some row is short
        for i, line in enumerate(lines):
            fields = line.split()
            if len(fields) != k + 1:
                raise InputError(
                    f"{path}:{i + 2}: row has {len(fields)} fields; "
                    f"expected an id and {k} values separated by spaces"
                )
    ids: list[str] = []
    out = np.empty((n, k), dtype=np.float32)
    for a in range(0, n, CHUNK_ROWS):
        b = min(a + CHUNK_ROWS, n)
        tokens: list[str] = []
        for i in range(a, b):
            fields = lines[i].split()
            if len(fields) != k + 1:
                raise InputError(
                    f"{path}:{i + 2}: row has {len(fields)} fields; "
                    f"expected an id and {k} values separated by spaces"
                )
            ids.append(fields[0])
            tokens.extend(fields[1:])
        try:
            out[a:b] = np.array(tokens, dtype=np.float32).reshape(b - a, k)
        except ValueError:
            for j, tok in enumerate(tokens):
                try:
                    np.float32(tok)
                except ValueError:
                    raise InputError(
                        f"{path}:{a + j // k + 2}: value {tok!r} is not a number; "
                        f"expected {k} floats"
                    ) from None
            raise InputError(
                f"{path}:{a + 2}: rows {a + 2}..{b + 1} hold a value that is not a number"
            ) from None
        bad = np.flatnonzero(~np.isfinite(out[a:b]).ravel())
        if bad.size:
            j = int(bad[0])
            raise InputError(
                f"{path}:{a + j // k + 2}: value {tokens[j]!r} is not finite "
                "(NaN, inf or beyond float32); "
                "embeddings must be finite numbers"
            )
    check_unique(path, ids, 2, unit="line")
    return ids, out


def _read_binary_rows(path, data: bytes, start: int, n: int, k: int):
    width = 4 * k
    if n * (width + 1) > len(data) - start:  # each row: an id byte or more, a space, k float32
        raise InputError(
            f"{path}: truncated: the header promises {n} rows of {k} float32 "
            f"(at least {n * (width + 1)} bytes), "
            f"but {len(data) - start} bytes follow it; fix the header or the file"
        )
    ids: list[str] = []
    out = np.empty((n, k), dtype=np.float32)
    pos = start
    for r in range(n):
        while data[pos : pos + 1] == b"\n":
            pos += 1
        space = data.find(b" ", pos)
        if space < 0 or space + 1 + width > len(data):
            raise InputError(
                f"{path}: row {r + 1} of {n} is truncated (byte {pos}); "
                "the file ends before the header's row count"
            )
        try:
            ids.append(data[pos:space].decode("utf-8"))
        except UnicodeDecodeError:
            raise InputError(
                f"{path}: row {r + 1} (byte {pos}): node id is not UTF-8; "
                "expected a word2vec binary file"
            ) from None
        out[r] = np.frombuffer(data, dtype="<f4", count=k, offset=space + 1)
        pos = space + 1 + width
    if data[pos:].strip():
        raise InputError(
            f"{path}: {len(data) - pos} bytes after the {n} rows the header promises; "
            "fix the header"
        )
    for r, node in enumerate(ids):
        if not is_token(node):
            raise InputError(
                f"{path}: row {r + 1}: node id {node!r} is empty or contains whitespace"
            )
    bad = np.flatnonzero(~np.isfinite(out).ravel())
    if bad.size:
        r, c = divmod(int(bad[0]), k)
        raise InputError(
            f"{path}: row {r + 1} ({ids[r]!r}): value {c + 1} is {out[r, c]}; "
            "embeddings must be finite numbers"
        )
    check_unique(path, ids, 1, unit="row")
    return ids, out


def read_word2vec(path, binary: bool | None = None):
    """Read a word2vec text or binary file -> (node_ids list[str], vectors float32 (n, k)).

    ``binary=None`` detects the format: a body that is not UTF-8 is binary, and a
    UTF-8 body that does not parse as text is tried as binary before the text error
    is raised.  Raises ``InputError`` (path:line) for a bad header, row count, row
    length, value or a duplicate id.
    """
    data = read_bytes(path)
    n, k, start = _parse_header(path, data)
    if binary:
        return _read_binary_rows(path, data, start, n, k)
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as err:
        if binary is None:
            return _read_binary_rows(path, data, start, n, k)
        line = data.count(b"\n", 0, start + err.start) + 1
        raise InputError(
            f"{path}:{line}: invalid UTF-8; expected a word2vec text file (or pass binary=True)"
        ) from None
    try:
        return _read_text_rows(path, text, n, k)
    except InputError:
        if binary is None and not _looks_like_text_rows(text):
            try:
                return _read_binary_rows(path, data, start, n, k)
            except InputError:
                pass
        raise


def _looks_like_text_rows(text: str) -> bool:
    """Whether the body's first line is a text row (an id, then numbers): a text file
    whose header is wrong, whose error must not be masked by reading it as binary."""
    first = text.lstrip("\n").split("\n", 1)[0].split()
    if len(first) < 2:
        return False
    try:
        [float(v) for v in first[1:]]
    except ValueError:
        return False
    return True
