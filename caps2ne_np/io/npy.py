"""``.npy`` embeddings with their ``.nodes.txt`` ids, and ``.npz`` archives (docs/input-formats.md).

- ``.npy``: the (n, k) float32 matrix, row i = node i; when the node ids are not
  exactly ``'0' .. 'n-1'`` they go to ``<stem>.nodes.txt`` next to it, one per line
  (the order of the renames keeps the two a pair; older files' first line tied them
  by a digest, which is still checked).
- ``.npz``: named arrays (checkpoints, the model file, the graph cache), never pickles.

Writes are atomic (atomic.py); the readers check a file's structure before trusting
it (an ``.npy`` header against the file's size: files.check_npy_header) and refuse NaN
or infinite values in embeddings, with a one-line :class:`~caps2ne_np.errors.InputError`.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np

from ..errors import InputError
from . import atomic
from .atomic import atomic_write
from .blocks import RowBlocks, as_blocks
from .files import ZIP_MAGIC, check_npy_header, check_unique, is_token, read_bytes, text_ids

__all__ = ["nodes_path", "save_npy", "load_npy", "save_npz", "load_npz"]


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

    The nodes file holds the ids only, one per line, which ``np.loadtxt(..., dtype=str)``
    reads as they are.  The pair cannot be renamed into place in one step, so the order
    keeps it a pair: the old matrix is removed first, then the nodes file is published
    (or removed), and the new matrix last; a kill in between leaves no matrix, never a
    matrix beside another run's ids.  (Files written before this order carried a first
    line ``# caps2ne_np ids of <name>.npy: <n> rows, blake2b <digest>``, which
    :func:`load_npy` still reads and checks.)

    ``vectors`` is an array or a :class:`RowBlocks` (same bytes either way: the
    digest is computed from the blocks as they are written).
    """
    blocks = as_blocks(vectors)
    n, k = blocks.shape
    ids = None if node_ids is None else text_ids(node_ids, n, os.fspath(path))
    write_ids = ids is not None and ids != [str(i) for i in range(n)]
    nodes = nodes_path(path)
    target = atomic.check_output_path(path, overwrite)
    if atomic.exists(nodes) and not overwrite:
        raise InputError(
            f"{nodes}: exists (it would be read with {path}); pass --overwrite to replace it"
        )
    if atomic.exists(nodes) and not nodes.is_file():
        raise InputError(f"{nodes}: exists and is not a regular file; refusing to replace it")
    # Both files are written in full before either is renamed into place, so a failed
    # write (a full disk) leaves the old pair as it was, never a new matrix with old ids.
    pending = []
    try:
        with atomic.temp_file(target, binary=True) as (f, tmp_matrix):
            _write_npy_blocks(f, blocks)
        pending.append(tmp_matrix)
        if write_ids:
            with atomic.temp_file(nodes, binary=False) as (f, tmp_nodes):
                f.write("\n".join(ids) + "\n")
            pending.append(tmp_nodes)
        if atomic.exists(nodes) or write_ids:
            atomic.unlink_output(target)  # no moment with the new ids beside the old matrix
        if write_ids:
            atomic.publish(tmp_nodes, nodes, overwrite)
            pending.remove(tmp_nodes)
        else:
            atomic.unlink_output(nodes)
        atomic.publish(tmp_matrix, target, overwrite)
        pending.remove(tmp_matrix)
    except BaseException as err:
        for tmp in pending:
            atomic.discard(tmp)
        atomic.reraise_naming(err, target)
    atomic.fsync_dir(target.parent)
    atomic.remove_stale_temps(target)
    atomic.remove_stale_temps(nodes)


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
    if not atomic.exists(nodes):
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
    check_unique(nodes, ids, first, unit="line")
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
    if not head.startswith(ZIP_MAGIC):
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
