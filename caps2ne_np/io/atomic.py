"""Atomic writes: every output goes to a temp file beside its target, then is renamed.

Every write goes to a temporary file in the target's directory that is flushed,
fsync'ed and renamed into place, so a crash never leaves a half-written file under the
target name; an existing file is replaced only with ``overwrite=True`` (the CLI's
``--overwrite``); a failed write (a full disk) raises an ``OSError`` naming the target
and leaves the old file in place.  Temp files are named ``.<name>.<pid>-<random>.tmp``:
the pid lets a later run remove those of a process that was killed
(:func:`remove_stale_temps`), and those of this process are removed at interpreter exit.
:func:`publish_together` holds several outputs back until all are complete.  An output
path ``"-"`` means standard output.  The formats written through this module:
word2vec.py, npy.py, modelfile.py.
"""

from __future__ import annotations

import atexit
import os
import secrets
import stat
import sys
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError

__all__ = [
    "STDOUT",
    "is_stdout",
    "check_output_path",
    "probe_writable",
    "remove_stale_temps",
    "publish_together",
    "atomic_write",
]


def exists(p: Path) -> bool:
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
        what = "is not a folder" if exists(parent) else "does not exist"
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
    if exists(target) and not overwrite:
        raise InputError(f"{raw}: exists; pass --overwrite to replace it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{raw}: folder {parent} is not writable; choose a writable folder")
    return target


def probe_writable(path, subject=None, making="a file") -> None:
    """Create and remove a temp file next to ``path``: ``InputError`` if the folder refuses
    (a read-only file system, or permissions that ``os.access`` does not see), saying
    '<subject>: cannot create <making> in <folder>' (subject: ``path``, by default)."""
    target = Path(os.fspath(path))
    tmp = _temp_name(target)
    _LIVE_TEMPS[tmp] = os.getpid()
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as err:
        _LIVE_TEMPS.pop(tmp, None)
        raise InputError(
            f"{subject or os.fspath(path)}: cannot create {making} in {target.parent} "
            f"({err.strerror or err}); choose a writable folder"
        ) from None
    discard(tmp)


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


def fsync_dir(directory: Path) -> None:
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
                discard(action[1])
        raise
    actions = _STAGED.pop()
    for i, action in enumerate(actions):
        try:
            if action[0] == "publish":
                publish(*action[1:])
            elif exists(action[1]):
                os.unlink(action[1])
        except BaseException:
            for rest in actions[i + 1 :]:
                if rest[0] == "publish":
                    discard(rest[1])
            raise


def unlink_output(path: Path) -> None:
    """Remove an output's stale companion (``save_npy``'s nodes file), or stage that."""
    if _STAGED:
        _STAGED[-1].append(("unlink", path))
    elif exists(path):
        os.unlink(path)


def publish(tmp: Path, target: Path, overwrite: bool) -> None:
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
        if exists(target):
            raise InputError(f"{target}: exists; pass --overwrite to replace it") from None
        os.replace(tmp, target)
        _LIVE_TEMPS.pop(tmp, None)
        return
    os.unlink(tmp)
    _LIVE_TEMPS.pop(tmp, None)


def discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    _LIVE_TEMPS.pop(tmp, None)


def reraise_naming(err: BaseException, path):
    """Re-raise ``err``; an OSError that names no file (a full disk) is re-raised naming
    ``path``."""
    if isinstance(err, OSError) and not err.filename:
        raise OSError(err.errno, err.strerror or str(err), os.fspath(path)) from err
    raise err


@contextmanager
def temp_file(target: Path, binary: bool):
    """Yield a new temp file next to ``target``; on success flush and fsync it, on error remove it.

    The temp file is closed, complete and still unpublished when the block ends:
    the caller renames it with ``publish`` (or removes it with ``discard``).
    """
    f, tmp = _create_temp(target, binary)
    try:
        with f:
            yield f, tmp
            f.flush()
            os.fsync(f.fileno())
    except BaseException as err:
        discard(tmp)
        reraise_naming(_interrupt_of(err) or err, target)


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
    target = check_output_path(path, overwrite)
    with temp_file(target, binary=mode == "wb") as (f, tmp):
        yield f
    try:
        publish(tmp, target, overwrite)
    except BaseException as err:
        discard(tmp)
        reraise_naming(err, target)
    fsync_dir(target.parent)
    remove_stale_temps(target)
