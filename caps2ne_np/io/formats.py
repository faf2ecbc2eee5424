"""Embedding files: word2vec text/binary, ``.npy`` (+ ``.nodes.txt``), ``.npz``; atomic writes.

Formats (docs/input-formats.md):

- word2vec text, as gensim ``KeyedVectors.load_word2vec_format`` reads it: a header
  ``n k``, then one line per node in index order, ``node_id v1 ... vk``, single
  spaces, UTF-8.  Values are float32 written with ``%.9g``: nine significant digits
  identify every float32, so reading the file back gives the same bits.
- word2vec binary (``binary=True``): the same header line, then per node
  ``node_id`` + ``b" "`` + k little-endian float32 + ``b"\\n"``.
- ``.npy``: the (n, k) float32 matrix, row i = node i; when the node ids are not
  exactly ``'0' .. 'n-1'`` they go to ``<stem>.nodes.txt`` next to it, one per line.
- ``.npz``: named arrays (checkpoints), never pickles.

Node ids are non-empty strings without whitespace (they are tokens of a line), and
unique.  Every write goes to a temporary file in the target's directory that is
flushed, fsync'ed and renamed into place, so a crash never leaves a half-written
file under the target name; an existing file is replaced only with
``overwrite=True`` (the CLI's ``--overwrite``); a failed write (a full disk)
raises an ``OSError`` naming the target and leaves the old file in place.

Problems with the user's files raise :class:`~caps2ne_np.errors.InputError` with
a one-line message.  Readers check a file's structure before trusting it (an
``.npy`` header against the file's size, the index arrays of a sparse ``.npz``, a
word2vec header against the bytes that follow) and refuse NaN or infinite values
in embeddings.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import stat
import sys
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from .files import check_ids, first_repeat, is_token, read_bytes

__all__ = [
    "RowBlocks",
    "atomic_write",
    "write_word2vec",
    "read_word2vec",
    "save_npy",
    "load_npy",
    "save_npz",
    "load_npz",
    "nodes_path",
    "check_npy_header",
    "read_sparse_npz",
]

_CHUNK_ROWS = 4096  # rows formatted / parsed per batch


def _exists(p: Path) -> bool:
    return p.exists() or p.is_symlink()


STDOUT = "-"  # an output path meaning standard output (single-file outputs only)


def is_stdout(path) -> bool:
    """True for ``"-"``, the output path that means standard output."""
    return isinstance(path, str) and path == STDOUT


def check_output_path(path, overwrite: bool) -> Path:
    """The target as a Path, after every check that can be made before writing.

    Refused (``InputError``, one line): an empty path, a missing or non-folder
    parent, a dangling symbolic link, an existing path that is not a regular file (a
    directory, a device such as ``/dev/null``, a FIFO, a socket, or a symbolic link to
    one of these: renaming a temp file over it would replace it with a regular file),
    an existing file without ``overwrite``, and a folder where no file can be created.
    """
    raw = os.fspath(path)
    if raw == "":
        raise InputError("output path is empty; give the path of a file to write")
    target = Path(raw)
    parent = target.parent
    if not parent.is_dir():
        what = "is not a folder" if _exists(parent) else "does not exist"
        raise InputError(f"{raw}: folder {parent} {what}; create it or choose another output path")
    if target.is_symlink() and not target.exists():
        raise InputError(
            f"{raw}: is a dangling symbolic link (to {os.readlink(target)}); remove it or "
            "give another path"
        )
    if target.is_dir():
        raise InputError(f"{raw}: is a directory; give the path of a file to write")
    if target.exists() and not target.is_file():
        raise InputError(
            f"{raw}: exists and is not a regular file (a device, FIFO or socket); refusing "
            "to replace it; give a file path (or '-' for standard output where accepted)"
        )
    if _exists(target) and not overwrite:
        raise InputError(f"{raw}: exists; pass --overwrite to replace it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{raw}: folder {parent} is not writable; choose a writable folder")
    return target


def probe_writable(path) -> None:
    """Create and remove a temp file next to ``path``: ``InputError`` if the folder refuses
    (a read-only file system, or permissions that ``os.access`` does not see)."""
    target = Path(os.fspath(path))
    tmp = _temp_name(target)
    _LIVE_TEMPS[tmp] = os.getpid()
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        _LIVE_TEMPS.pop(tmp, None)
        raise InputError(
            f"{os.fspath(path)}: cannot create a file in {target.parent} ({err.strerror or err}); "
            "choose a writable folder"
        ) from None
    _discard(tmp)


_check_target = check_output_path


def _pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (on this machine)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def _temp_name(target: Path) -> Path:
    """``.<name>.<pid>-<random>.tmp`` beside ``target``: the pid lets a later run
    recognise (and remove) the temp files of a process that was killed."""
    return target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp"


def remove_stale_temps(target) -> list:
    """Remove the temp files of ``target`` left by processes that no longer exist
    (``.<name>.<pid>-<random>.tmp`` with a dead pid); returns the paths removed."""
    target = Path(os.fspath(target))
    removed = []
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        middle = name[len(prefix) : -len(".tmp")]
        pid, dash, token = middle.partition("-")
        if not (dash and pid.isdigit() and len(token) == 12) or _pid_alive(int(pid)):
            continue
        try:
            os.unlink(entry.path)
            removed.append(Path(entry.path))
        except OSError:
            pass
    return removed


_LIVE_TEMPS: dict = {}
"""Temp files this process created and has neither published nor removed yet, with the
pid that created them: removed at interpreter exit (``_remove_live_temps``), so an
interruption that lands outside the handlers that remove them (between creating the
file and entering the ``try``, or between finishing it and publishing it) leaves none."""


@atexit.register
def _remove_live_temps() -> None:
    for tmp, pid in list(_LIVE_TEMPS.items()):
        if pid == os.getpid():  # not in a forked child: the parent may still be writing
            try:
                os.unlink(tmp)
            except OSError:
                pass
    _LIVE_TEMPS.clear()


def _create_temp(target: Path, binary: bool):
    """(file, path) of a new hidden file next to ``target``, created like ``open(.., 'x')``."""
    for _ in range(100):
        tmp = _temp_name(target)
        _LIVE_TEMPS[tmp] = os.getpid()  # before it exists: no window without a record
        try:
            if binary:
                return open(tmp, "xb"), tmp
            return open(tmp, "x", encoding="utf-8", newline=""), tmp
        except FileExistsError:
            _LIVE_TEMPS.pop(tmp, None)  # another process's file: never remove it
            continue
        except OSError as err:
            _LIVE_TEMPS.pop(tmp, None)
            raise InputError(
                f"{target.parent}: cannot create a file there ({err.strerror or err}); "
                "choose a writable directory"
            ) from None
    raise InputError(
        f"{target.parent}: cannot find a free temporary name; remove stale .*.tmp files"
    )


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; not every platform or filesystem supports it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _keep_mode(tmp: Path, target: Path) -> None:
    """Give the new file the permission bits of the regular file it replaces (a 0600
    output stays 0600)."""
    try:
        st = os.stat(target)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        try:
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        except OSError:
            pass


_STAGED = []
"""The publications ``publish_together`` holds back: a list per open block (innermost
last) of ("publish", tmp, target, overwrite) and ("unlink", path) actions."""


@contextmanager
def publish_together():
    """Hold back every output the block writes (``atomic_write``, ``save_npy``,
    ``save_npz``, word2vec) until the block ends: then all are renamed into place, in
    the order written; if the block raises (a full disk while writing the third), none
    is, their temp files are removed and every old file stays as it was.  Renames need
    no space, so once every temp file is complete, publishing them all almost never
    fails.  (Standard output is written at once: it cannot be held back.)"""
    _STAGED.append([])
    try:
        yield
    except BaseException:
        for action in _STAGED.pop():
            if action[0] == "publish":
                _discard(action[1])
        raise
    actions = _STAGED.pop()
    for i, action in enumerate(actions):
        try:
            if action[0] == "publish":
                _publish(*action[1:])
            elif _exists(action[1]):
                os.unlink(action[1])
        except BaseException:
            for rest in actions[i + 1 :]:
                if rest[0] == "publish":
                    _discard(rest[1])
            raise


def _unlink_output(path: Path) -> None:
    """Remove an output's stale companion (``save_npy``'s nodes file), or stage that."""
    if _STAGED:
        _STAGED[-1].append(("unlink", path))
    elif _exists(path):
        os.unlink(path)


def _publish(tmp: Path, target: Path, overwrite: bool) -> None:
    """Move the finished temp file to ``target``; without overwrite, never clobber.
    Inside ``publish_together``: only noted, done when the block ends."""
    if _STAGED:
        _STAGED[-1].append(("publish", tmp, target, overwrite))
        return
    if overwrite:
        if target.exists() and not target.is_file():  # became a device / FIFO meanwhile
            raise InputError(f"{target}: exists and is not a regular file; refusing to replace it")
        _keep_mode(tmp, target)
        os.replace(tmp, target)
        _LIVE_TEMPS.pop(tmp, None)
        return
    try:
        os.link(tmp, target)  # atomic "create only if absent"
    except FileExistsError:
        raise InputError(f"{target}: exists; pass --overwrite to replace it") from None
    except OSError:  # no hard links on this filesystem: check, then rename
        if _exists(target):
            raise InputError(f"{target}: exists; pass --overwrite to replace it") from None
        os.replace(tmp, target)
        _LIVE_TEMPS.pop(tmp, None)
        return
    os.unlink(tmp)
    _LIVE_TEMPS.pop(tmp, None)


def _discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    _LIVE_TEMPS.pop(tmp, None)


def _reraise_naming(err: BaseException, path):
    """Re-raise ``err``; an OSError that names no file (a full disk) is re-raised naming
    ``path``."""
    if isinstance(err, OSError) and not err.filename:
        raise OSError(err.errno, err.strerror or str(err), os.fspath(path)) from err
    raise err


@contextmanager
def _temp_file(target: Path, binary: bool):
    """Yield a new temp file next to ``target``; on success flush and fsync it, on error remove it.

    The temp file is closed, complete and still unpublished when the block ends:
    the caller renames it with ``_publish`` (or removes it with ``_discard``).
    """
    f, tmp = _create_temp(target, binary)
    try:
        with f:
            yield f, tmp
            f.flush()
            os.fsync(f.fileno())
    except BaseException as err:
        _discard(tmp)
        _reraise_naming(_interrupt_of(err) or err, target)


def _interrupt_of(err):
    """The KeyboardInterrupt (Ctrl-C, or the CLI's SIGTERM) that ``err`` was raised while
    handling, if any: a zip writer interrupted inside a member's close raises ValueError
    ("open writing handle") on its own close, which must not hide the interruption."""
    if isinstance(err, KeyboardInterrupt):
        return None
    seen, depth = err.__context__, 0
    while seen is not None and depth < 10:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        seen, depth = seen.__context__, depth + 1
    return None


@contextmanager
def atomic_write(path, mode: str = "w", overwrite: bool = False):
    """Open a temp file next to ``path``; on success fsync it and rename it to ``path``.

    ``mode`` is ``"w"`` (UTF-8 text, ``\\n`` newlines) or ``"wb"``.  ``path`` ``"-"`` writes to
    standard output instead (no temp file, no overwrite check).  If the body
    raises, the temp file is removed and ``path`` is left as it was.  Raises
    ``InputError`` if ``path`` exists and ``overwrite`` is false, if it is a
    directory, or if its directory is missing or not writable; an ``OSError`` of
    the write itself (a full disk) names ``path``.
    """
    if mode not in ("w", "wt", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    if is_stdout(path):
        stream = sys.stdout.buffer if mode == "wb" else sys.stdout
        yield stream
        stream.flush()
        return
    target = _check_target(path, overwrite)
    with _temp_file(target, binary=mode == "wb") as (f, tmp):
        yield f
    try:
        _publish(tmp, target, overwrite)
    except BaseException as err:
        _discard(tmp)
        _reraise_naming(err, target)
    _fsync_dir(target.parent)
    remove_stale_temps(target)


class RowBlocks:
    """A matrix handed to the writers as consecutive blocks of rows, not as one array.

    ``shape`` is (n, k) or (n,); ``blocks`` is a function returning a *fresh* iterator
    over arrays holding rows [0, a), [a, b), ... whose row counts add up to n (the Ray
    engine's driver pulls them from the shards, docs/distributed.md).  Every writer of
    this module takes one wherever it takes a matrix and writes the same bytes as for
    the whole array; iterating checks the blocks and gives them as C-contiguous float32.
    """

    def __init__(self, shape, blocks):
        self.shape = tuple(int(s) for s in shape)
        if len(self.shape) not in (1, 2) or self.shape[0] < 0:
            raise ValueError(f"RowBlocks: shape must be (n,) or (n, k), got {shape}")
        self._blocks = blocks

    @classmethod
    def of(cls, array, rows=_CHUNK_ROWS):
        """``array`` (already float32 and C-contiguous, or it is converted per block) in
        blocks of ``rows`` rows."""
        n = array.shape[0]
        return cls(array.shape, lambda: (array[a : a + rows] for a in range(0, n, rows)))

    def __iter__(self):
        n, tail, done = self.shape[0], self.shape[1:], 0
        for block in self._blocks():
            block = np.ascontiguousarray(block, dtype=np.float32)
            if block.shape[1:] != tail or done + block.shape[0] > n:
                raise ValueError(
                    f"RowBlocks: a block of shape {block.shape} after {done} rows "
                    f"does not fit shape {self.shape}"
                )
            done += block.shape[0]
            yield block
        if done != n:
            raise ValueError(f"RowBlocks: the blocks hold {done} rows, the shape says {n}")


def _as_matrix(vectors) -> np.ndarray:
    v = np.asarray(vectors)
    if v.ndim != 2 or v.shape[1] < 1:
        raise ValueError(f"vectors must be a 2-D (n, k) array with k >= 1, got shape {v.shape}")
    if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
        raise ValueError(f"vectors must be real numbers, got dtype {v.dtype}")
    return np.ascontiguousarray(v, dtype=np.float32)


def _as_blocks(vectors) -> RowBlocks:
    """``vectors`` (an (n, k) array or a RowBlocks of that shape) as RowBlocks."""
    if isinstance(vectors, RowBlocks):
        if len(vectors.shape) != 2 or vectors.shape[1] < 1:
            raise ValueError(
                f"vectors must be (n, k) blocks with k >= 1, got shape {vectors.shape}"
            )
        return vectors
    return RowBlocks.of(_as_matrix(vectors))


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


def write_word2vec(path, node_ids, vectors, overwrite: bool = False, binary: bool = False) -> None:
    """Write (n, k) vectors in word2vec text (``%.9g``, exact) or binary format, atomically.

    ``vectors`` is an array or a :class:`RowBlocks` (same bytes either way)."""
    blocks = _as_blocks(vectors)
    n, k = blocks.shape
    ids = text_ids(node_ids, n, os.fspath(path))
    header = f"{n} {k}\n"
    line = "%s" + " %.9g" * k + "\n"  # float32 -> Python float is exact; %.9g round-trips float32
    row = 4 * k
    with atomic_write(path, "wb" if binary else "w", overwrite=overwrite) as f:
        f.write(header.encode("ascii") if binary else header)
        first = 0  # global row of the block's first row
        for block in blocks:
            for a in range(0, block.shape[0], _CHUNK_ROWS):  # bounds the formatted strings
                chunk = block[a : a + _CHUNK_ROWS]
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


def _check_unique(path, ids, first: int, unit: str) -> None:
    """InputError naming the second occurrence of a repeated id (``unit`` 'line' or 'row')."""
    repeat = first_repeat(ids)
    if repeat is not None:
        i, j = repeat
        where = f"{path}:{first + j}" if unit == "line" else f"{path}: row {first + j}"
        raise InputError(
            f"{where}: duplicate id {ids[j]!r} (first at {unit} {first + i}); ids must be unique"
        )


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
    for a in range(0, n, _CHUNK_ROWS):
        b = min(a + _CHUNK_ROWS, n)
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
    _check_unique(path, ids, 2, unit="line")
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
    _check_unique(path, ids, 1, unit="row")
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


def nodes_path(path) -> Path:
    """The node-id file that goes with an ``.npy``: ``emb.npy`` -> ``emb.nodes.txt``."""
    p = Path(os.fspath(path))
    stem = p.name[: -len(".npy")] if p.name.endswith(".npy") else p.name
    return p.with_name(stem + ".nodes.txt")


_NODES_TAG = "# caps2ne_np ids of "


def _matrix_hash(n: int, k: int):
    """The blake2b-128 of :func:`_matrix_digest`, fed its shape; update it with the rows' bytes."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{n}x{k}".encode("ascii"))
    return h


def _matrix_digest(v: np.ndarray) -> str:
    """blake2b-128 of an (n, k) float32 matrix's shape and bytes: ties a ``.nodes.txt``
    to its ``.npy``."""
    h = _matrix_hash(*v.shape)
    h.update(np.ascontiguousarray(v, dtype="<f4").data)
    return h.hexdigest()


def _write_npy_blocks(f, blocks: RowBlocks, hasher=None) -> None:
    """The ``.npy`` bytes ``np.save`` writes for the float32 matrix ``blocks`` holds: the
    version 1.0 header of numpy.lib.format (what ``np.save`` chooses for any shape whose
    header fits 64 KiB), then the rows, block by block; ``hasher`` sees each block."""
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
        "fortran_order": False,
        "shape": blocks.shape,
    }
    np.lib.format.write_array_header_1_0(f, header)
    for block in blocks:
        raw = block.astype("<f4", copy=False).reshape(-1).view(np.uint8)  # len(raw) = bytes
        if hasher is not None:
            hasher.update(raw)
        f.write(raw)


def save_npy(path, vectors, node_ids=None, overwrite: bool = False) -> None:
    """Atomically save (n, k) float32 ``vectors`` to ``path``; ids go to ``<stem>.nodes.txt``.

    The nodes file is written only when ``node_ids`` is given and differs from
    ``'0' .. 'n-1'``.  An existing nodes file would be paired with the new matrix on
    load, so it counts as a file to overwrite (and is removed when not rewritten).

    The pair cannot be renamed into place in one step, so the nodes file names the
    matrix it belongs to: its first line is ``# caps2ne_np ids of <name>.npy: <n> rows,
    blake2b <digest of the matrix>``, and :func:`load_npy` refuses a pair whose digests
    differ.  The matrix is published first and the nodes file (or its removal) last,
    so a kill in between leaves the new matrix with the old nodes file, which
    ``load_npy`` then refuses instead of pairing them.

    ``vectors`` is an array or a :class:`RowBlocks` (same bytes either way: the
    digest is computed from the blocks as they are written).
    """
    blocks = _as_blocks(vectors)
    n, k = blocks.shape
    ids = None if node_ids is None else text_ids(node_ids, n, os.fspath(path))
    write_ids = ids is not None and ids != [str(i) for i in range(n)]
    nodes = nodes_path(path)
    target = _check_target(path, overwrite)
    if _exists(nodes) and not overwrite:
        raise InputError(
            f"{nodes}: exists (it would be read with {path}); pass --overwrite to replace it"
        )
    if _exists(nodes) and not nodes.is_file():
        raise InputError(f"{nodes}: exists and is not a regular file; refusing to replace it")
    # Both files are written in full before either is renamed into place, so a failed
    # write (a full disk) leaves the old pair as it was, never a new matrix with old ids.
    pending = []
    try:
        hasher = _matrix_hash(n, k)
        with _temp_file(target, binary=True) as (f, tmp_matrix):
            _write_npy_blocks(f, blocks, hasher)
        pending.append(tmp_matrix)
        if write_ids:
            with _temp_file(nodes, binary=False) as (f, tmp_nodes):
                f.write(f"{_NODES_TAG}{target.name}: {n} rows, blake2b {hasher.hexdigest()}\n")
                f.write("\n".join(ids) + "\n")
            pending.append(tmp_nodes)
        _publish(tmp_matrix, target, overwrite)
        pending.remove(tmp_matrix)
        if write_ids:
            _publish(tmp_nodes, nodes, overwrite)
        else:
            _unlink_output(nodes)
    except BaseException as err:
        for tmp in pending:
            _discard(tmp)
        _reraise_naming(err, target)
    _fsync_dir(target.parent)
    remove_stale_temps(target)
    remove_stale_temps(nodes)


_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip's first entry, or an empty zip


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
            if head.startswith(_ZIP_MAGIC):
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
        if not fh.read(4).startswith(_ZIP_MAGIC):
            raise ValueError("not a zip archive")
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


def load_npy(path):
    """(node_ids, vectors float32 (n, k)) from an ``.npy`` and its ``.nodes.txt`` if present."""
    p = Path(os.fspath(path))
    if not p.is_file():
        raise InputError(
            f"{path}: {'is a directory' if p.is_dir() else 'no such file'}; give an .npy file"
        )
    check_npy_header(p)
    try:
        v = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError, MemoryError) as err:
        raise InputError(
            f"{path}: not a readable .npy array ({err}); expected a file written by save_npy"
        ) from None
    if (
        v.ndim != 2
        or not np.issubdtype(v.dtype, np.number)
        or np.issubdtype(v.dtype, np.complexfloating)
    ):
        raise InputError(f"{path}: holds shape {v.shape} {v.dtype}; expected a real (n, k) matrix")
    with np.errstate(over="ignore"):  # values beyond float32 become inf, reported next
        v = np.ascontiguousarray(v, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(v).ravel())
    if bad.size:
        r, c = divmod(int(bad[0]), v.shape[1])
        raise InputError(
            f"{path}: row {r}, column {c} (0-based): value {v[r, c]} is not finite; "
            "embeddings must be finite numbers"
        )
    n = v.shape[0]
    nodes = nodes_path(p)
    if not _exists(nodes):
        return [str(i) for i in range(n)], v
    raw = read_bytes(nodes)
    try:
        ids = raw.decode("utf-8").splitlines()
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise InputError(f"{nodes}:{line}: invalid UTF-8; expected one node id per line") from None
    first = 1
    if ids and ids[0].startswith(_NODES_TAG):
        tag, ids, first = ids[0], ids[1:], 2
        digest = tag.rsplit(" ", 1)[-1]
        if digest != _matrix_digest(v):
            raise InputError(
                f"{nodes}: written for another matrix than {path} "
                "(an interrupted write, or files from "
                "two runs); write the pair again (train --npy ... --overwrite)"
            )
    if len(ids) != n:
        raise InputError(
            f"{nodes}: {len(ids)} ids for the {n} rows of {path}; expected one id per row"
        )
    for i, node in enumerate(ids):
        if not is_token(node):
            raise InputError(
                f"{nodes}:{i + first}: id {node!r} is empty or contains whitespace; "
                "expected one id per line"
            )
    _check_unique(nodes, ids, first, unit="line")
    return ids, v


def save_npz(path, overwrite: bool = False, **arrays) -> None:
    """Atomically ``np.savez`` the named arrays (no object arrays, so no pickles).

    An array may be a :class:`RowBlocks`: then the archive is written member by member
    as ``np.savez`` writes it (an uncompressed zip64 member ``<name>.npy`` per array,
    in order), each such member from its blocks, so the matrix is never whole in
    memory; the members hold the bytes ``np.savez`` would write (only the zip's
    timestamps differ, as they do between two ``np.savez`` calls)."""
    packed = {}
    for name, value in arrays.items():
        a = value if isinstance(value, RowBlocks) else np.asarray(value)
        if not isinstance(a, RowBlocks) and a.dtype.hasobject:
            raise ValueError(
                f"{name} has dtype object; store numbers or strings (e.g. JSON) instead"
            )
        packed[name] = a
    with atomic_write(path, "wb", overwrite=overwrite) as f:
        if not any(isinstance(a, RowBlocks) for a in packed.values()):
            np.savez(
                f, **packed
            )  # no object arrays, hence no pickles (allow_pickle= needs NumPy >= 2.1)
            return
        with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            for name, a in packed.items():
                with z.open(
                    name + ".npy", "w", force_zip64=True
                ) as member:  # as np.savez (gh-10776)
                    if isinstance(a, RowBlocks):
                        _write_npy_blocks(member, a)
                    else:
                        np.lib.format.write_array(member, a, allow_pickle=False)


def load_npz(path) -> dict:
    """All arrays of an ``.npz`` as a dict, read fully (the file is closed); pickles refused."""
    if os.fspath(path) == "":
        raise InputError("an empty path was given; give the path of an .npz file")
    p = Path(os.fspath(path))
    if not p.is_file():
        if p.is_dir():
            what = "is a directory"
        elif p.exists():  # /dev/null, /dev/zero, a FIFO, a socket
            what = "is not a regular file (a device, FIFO or socket)"
        else:
            what = "no such file"
        raise InputError(f"{path}: {what}; give an .npz file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(4)
    except OSError as err:
        raise InputError(
            f"{path}: cannot be read ({err.strerror or err}); check its permissions"
        ) from None
    if not head.startswith(_ZIP_MAGIC):
        raise InputError(f"{path}: not an .npz (zip) archive; expected a file written by save_npz")
    try:
        z = np.load(p, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            raise ValueError("it holds a single .npy array")
        with z:
            return {name: z[name] for name in z.files}
    except Exception as err:  # noqa: BLE001 -- zipfile, zlib and the .npy reader raise many types
        raise InputError(
            f"{path}: not a readable .npz ({type(err).__name__}: {err}); "
            "expected a file written by save_npz"
        ) from None
