"""Atomic writes (caps2ne_np/io/atomic.py): never overwrite unasked, keep the old file when the
writer fails, write beside the target, fsync the file and its folder, and leave no temp
file. A write interrupted midway keeps the previous output, for every writer. A special file
(a FIFO, /dev/null, a folder) is refused, never replaced; stale temp files go with the next
success; an overwritten output keeps its mode."""

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.io.atomic import atomic_write
from caps2ne_np.io.npy import nodes_path, save_npy, save_npz
from caps2ne_np.io.word2vec import write_word2vec
from caps2ne_np.training import checkpoint
from clirun import (
    GRAPH,
    _disk_full,
    _fail_temp_files,
    _save_checkpoint,
    _trained,
    _vectors,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
    train,
)


def awkward_vectors(n=5, k=4, seed=0):
    """float32 values that a lossy format would not survive."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, k)).astype(np.float32)
    v[0, :4] = [
        np.float32(1) / 3,
        -0.0,
        np.finfo(np.float32).max,
        np.finfo(np.float32).smallest_subnormal,
    ]
    v[1, 0] = np.nextafter(np.float32(1), np.float32(2))
    return v


def test_atomic_write_refuses_to_overwrite(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(InputError, match=r"exists; pass --overwrite to replace it"):
        with atomic_write(path) as f:
            f.write("new")
    assert path.read_text() == "old"
    with atomic_write(path, overwrite=True) as f:
        f.write("new")
    assert path.read_text() == "new"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_keeps_old_file_when_body_raises(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_write(path, "wb", overwrite=True) as f:
            f.write(b"half")
            raise RuntimeError("boom")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]  # temp file removed


def test_atomic_write_new_file_is_not_created_on_error(tmp_path):
    with pytest.raises(KeyError):
        with atomic_write(tmp_path / "new.txt") as f:
            f.write("x")
            raise KeyError("body")
    assert os.listdir(tmp_path) == []


def test_atomic_write_writes_to_temp_in_same_directory(tmp_path):
    path = tmp_path / "out.txt"
    with atomic_write(path) as f:
        assert os.path.dirname(f.name) == str(tmp_path) and f.name != str(path)
        assert not path.exists()
        f.write("ok\n")
    assert path.read_bytes() == b"ok\n"


def test_atomic_write_missing_directory_and_directory_target(tmp_path):
    with pytest.raises(InputError, match="does not exist") as err:
        with atomic_write(tmp_path / "no" / "out.txt"):
            pass
    assert str(tmp_path / "no") in str(err.value)
    with pytest.raises(InputError, match="is a directory"):
        with atomic_write(tmp_path, overwrite=True):
            pass


def _fsync_spy(monkeypatch):
    """Record the path behind every fd passed to os.fsync (Linux /proc), then fsync it."""
    synced = []
    real = os.fsync

    def spy(fd):
        synced.append(os.path.realpath(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return synced


def _is_temp_of(path, target):
    name = os.path.basename(path)
    return os.path.dirname(path) == str(target.parent) and name.startswith(f".{target.name}.")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc/self/fd")
@pytest.mark.parametrize("writer", ["word2vec", "word2vec-binary", "npy", "npz", "model"])
def test_atomic_writes_fsync_the_file_and_its_directory(tmp_path, monkeypatch, writer):
    """Each writer fsyncs the finished temp file before renaming it into place, then the
    directory that holds the new name (so the rename survives a power cut)."""
    ids, vectors = [f"v{i}" for i in range(5)], awkward_vectors()
    target = tmp_path / "out.bin"
    synced = _fsync_spy(monkeypatch)
    if writer.startswith("word2vec"):
        write_word2vec(target, ids, vectors, binary=writer.endswith("binary"))
    elif writer == "npy":
        target = tmp_path / "out.npy"
        save_npy(target, vectors, ids)
    elif writer == "npz":
        save_npz(target, a=vectors)
    else:
        from caps2ne_np.io.modelfile import save_model
        from caps2ne_np.model.params import Params

        W = np.ones((2, 4, 3), dtype=np.float32)
        params = Params(W, vectors, np.zeros(5, np.float32), np.ones((5, 3), np.float32))
        save_model(target, params, ids, {"dim": 4}, 0.1, [])
    files = [p for p in synced if _is_temp_of(p, target)]
    assert len(files) == 1, synced  # the matrix / archive, before the rename
    assert str(tmp_path) in synced, synced  # the directory, after it
    assert synced.index(str(tmp_path)) > synced.index(files[0])
    if writer == "npy":  # and the ids file that goes with the matrix
        assert [p for p in synced if _is_temp_of(p, nodes_path(target))], synced


LEFT_IN_A_WINDOW = """
import sys
from pathlib import Path
from caps2ne_np.io import atomic

f, tmp = atomic._create_temp(Path(sys.argv[1]) / "x.npz", binary=True)
f.write(b"half")
assert tmp.exists()
raise KeyboardInterrupt  # outside every handler that removes the temp file
"""


def test_a_temp_file_left_by_an_interrupt_outside_the_handlers_is_removed_at_exit(tmp_path):
    """An interrupt between creating a temp file and entering the try that removes it (or
    between finishing and publishing it) left ``.<name>.<pid>-<random>.tmp`` behind (seen
    in test_signal_ends_the_run_cleanly under load): the interpreter's exit removes it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", LEFT_IN_A_WINDOW, str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "KeyboardInterrupt" in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def model():
    from caps2ne_np.graphs.csr import from_edges

    g = from_edges([0, 1, 2, 3], [1, 2, 3, 0], None, ["a", "b", "c", "d"])
    return Caps2NE(
        dim=4, feat_dim=4, walks_per_node=1, epochs=1, num_sampled=2, n_jobs=1, random_state=0
    ).fit(g)


# writer: (write the previous output, write the new one with overwrite, the files that must survive)
WRITERS = {
    "word2vec-text": (
        lambda p, m: write_word2vec(p / "e.txt", list("abcd"), _vectors()),
        lambda p, m: write_word2vec(p / "e.txt", list("abcd"), _vectors() + 1, overwrite=True),
        ["e.txt"],
    ),
    "word2vec-binary": (
        lambda p, m: write_word2vec(p / "e.bin", list("abcd"), _vectors(), binary=True),
        lambda p, m: write_word2vec(
            p / "e.bin", list("abcd"), _vectors() + 1, overwrite=True, binary=True
        ),
        ["e.bin"],
    ),
    "npy": (
        lambda p, m: save_npy(p / "e.npy", _vectors(), list("abcd")),
        lambda p, m: save_npy(p / "e.npy", _vectors() + 1, list("wxyz"), overwrite=True),
        ["e.npy", "e.nodes.txt"],
    ),
    "model-npz": (
        lambda p, m: m.save(p / "m.npz"),
        lambda p, m: m.save(p / "m.npz", overwrite=True),
        ["m.npz"],
    ),
    "checkpoint": (
        lambda p, m: (_save_checkpoint(p / "ck", 1.0), _save_checkpoint(p / "ck", 2.0)),
        lambda p, m: _save_checkpoint(p / "ck", 3.0),
        ["ck/checkpoint.npz", "ck/checkpoint.prev.npz"],
    ),
}


@pytest.mark.parametrize("room", [0, 20, 60], ids=lambda r: f"after-{r}-bytes")
@pytest.mark.parametrize("exc", [_disk_full, KeyboardInterrupt], ids=["disk-full", "killed"])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_interrupted_write_keeps_the_previous_output(
    tmp_path, monkeypatch, model, writer, exc, room
):
    write_old, write_new, names = WRITERS[writer]
    write_old(tmp_path, model)
    before = {name: (tmp_path / name).read_bytes() for name in names}
    _fail_temp_files(monkeypatch, room, exc)
    with pytest.raises(OSError if exc is _disk_full else KeyboardInterrupt) as err:
        write_new(tmp_path, model)
    if exc is _disk_full:  # the error names the file being written, for the one-line CLI message
        assert Path(err.value.filename).parent == (tmp_path / names[0]).parent
    assert {name: (tmp_path / name).read_bytes() for name in names} == before
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    monkeypatch.undo()
    if writer == "checkpoint":
        assert checkpoint.load(tmp_path / "ck")["state"] == {"epoch": 2}


@pytest.mark.parametrize("kind", ["fifo", "dev-null-symlink", "directory"])
@pytest.mark.parametrize("command", ["train", "evaluate", "writer"])
def test_special_output_path_is_refused_not_replaced(run, tmp_path, kind, command):
    target = tmp_path / "o.out"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-null-symlink":
        target.symlink_to("/dev/null")
    else:
        target.mkdir()
    before = os.stat(target).st_mode
    # a directory is click's usage error (dir_okay=False); the others are ours
    code, where = (
        (2, "Invalid value")
        if kind == "directory"
        else (1, "o.out: exists and is not a regular file")
    )
    if command == "train":
        put(tmp_path, "g.txt", GRAPH)
        result = train(run, "--overwrite", out="o.out")
        assert_error(result, where, code=code)
        assert not _trained(result)
    elif command == "evaluate":
        write_word2vec(tmp_path / "e.txt", list("abcd"), np.eye(4, 2, dtype=np.float32))
        put(tmp_path, "l.txt", "a 0\nb 1\nc 0\nd 1\n")
        put(tmp_path, "s.json", [{"train": ["a", "b"], "val": ["c"], "test": ["d"]}])
        assert_error(
            run(
                "evaluate",
                "-e",
                "e.txt",
                "--labels",
                "l.txt",
                "--splits",
                "s.json",
                "--json",
                "o.out",
                "--overwrite",
            ),
            where,
            code=code,
        )
    else:
        with pytest.raises(InputError, match="not a regular file|is a directory"):
            write_word2vec(target, ["a"], np.ones((1, 2)), overwrite=True)
    assert os.stat(target).st_mode == before  # still a FIFO / device / folder
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_stale_temp_files_are_removed_by_the_next_success(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert train(run, "--checkpoint-dir", "ck").exit_code == 0
    dead = 2**22 + 12345  # above the usual pid_max: no such process
    stale = [
        tmp_path / f".out.emb.{dead}-0123456789ab.tmp",
        tmp_path / "ck" / checkpoint.NEW,
        tmp_path / "ck" / f".checkpoint.new.npz.{dead}-0123456789ab.tmp",
    ]
    live = tmp_path / f".out.emb.{os.getpid()}-0123456789ab.tmp"  # a running writer's: kept
    for p in stale + [live]:
        p.write_bytes(b"junk")
    result = train(run, "--epochs", "2", "--resume", "ck", "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert not any(p.exists() for p in stale) and live.exists()


def test_overwritten_output_keeps_its_mode(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.emb", "old\n")
    os.chmod(tmp_path / "o.emb", 0o600)
    assert train(run, "--overwrite", out="o.emb").exit_code == 0
    assert stat.S_IMODE(os.stat(tmp_path / "o.emb").st_mode) == 0o600
    assert (tmp_path / "o.emb").read_text().startswith("4 4\n")
