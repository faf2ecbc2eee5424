"""Embedding files and atomic writes (caps2ne_np/io/word2vec.py, npy.py, atomic.py)."""

import os

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.io.atomic import atomic_write
from caps2ne_np.io.npy import load_npy, load_npz, nodes_path, save_npy, save_npz
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec


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


IDS = ["alice", "7", "07", "köln", "n_4"]


# ---- word2vec ---------------------------------------------------------------


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("detect", [False, True])
def test_word2vec_round_trip_is_exact(tmp_path, binary, detect):
    v = awkward_vectors()
    path = tmp_path / "emb.w2v"
    write_word2vec(path, IDS, v, binary=binary)
    ids, w = read_word2vec(path, binary=None if detect else binary)
    assert ids == IDS and w.dtype == np.float32
    assert np.array_equal(w.view(np.int32), v.view(np.int32))  # bit for bit, -0.0 included


def test_word2vec_text_layout(tmp_path):
    path = tmp_path / "emb.txt"
    write_word2vec(path, ["a", "b"], np.array([[1.0, 0.5], [-2.0, 1 / 3]], dtype=np.float64))
    assert path.read_text(encoding="utf-8") == "2 2\na 1 0.5\nb -2 0.333333343\n"


def test_word2vec_binary_layout(tmp_path):
    path = tmp_path / "emb.bin"
    write_word2vec(path, ["a"], np.array([[1.0, -2.0]], dtype=np.float32), binary=True)
    assert path.read_bytes() == b"1 2\na " + np.array([1.0, -2.0], dtype="<f4").tobytes() + b"\n"


def test_gensim_loads_both_formats(tmp_path):
    gensim = pytest.importorskip("gensim")
    v = awkward_vectors()
    for binary in (False, True):
        path = tmp_path / f"emb{int(binary)}.w2v"
        write_word2vec(path, IDS, v, binary=binary)
        kv = gensim.models.KeyedVectors.load_word2vec_format(str(path), binary=binary)
        assert list(kv.index_to_key) == IDS
        assert np.array_equal(kv.vectors, v)


@pytest.mark.parametrize("bad_id", ["a b", "tab\tid", "", "new\nline"])
def test_write_rejects_ids_with_whitespace(tmp_path, bad_id):
    with pytest.raises(InputError, match="whitespace"):
        write_word2vec(tmp_path / "e.txt", ["ok", bad_id], np.zeros((2, 3), np.float32))
    assert not (tmp_path / "e.txt").exists()


def test_write_rejects_duplicate_ids_and_wrong_count(tmp_path):
    with pytest.raises(InputError, match="twice"):
        write_word2vec(tmp_path / "e.txt", ["x", "x"], np.zeros((2, 3), np.float32))
    with pytest.raises(InputError, match="3 node ids for 2 rows"):
        write_word2vec(tmp_path / "e.txt", ["x", "y", "z"], np.zeros((2, 3), np.float32))


@pytest.mark.parametrize(
    "content,where,what",
    [
        ("two 3\na 1 2 3\n", ":1:", "header"),
        ("2 3\na 1 2 3\n", ":3:", "promises 2 rows"),
        ("1 3\na 1 2 3\nb 1 2 3\n", ":3:", "promises 1 rows"),
        ("2 3\na 1 2 3\nb 1 2\n", ":3:", "3 fields"),
        ("2 3\na 1 2 3\nb 1 x 3\n", ":3:", "'x' is not a number"),
        ("3 2\na 1 2\nb 3 4\na 5 6\n", ":4:", "duplicate id 'a'"),
    ],
)
def test_read_word2vec_errors_name_path_and_line(tmp_path, content, where, what):
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=what) as err:
        read_word2vec(path)
    assert str(err.value).startswith(f"{path}{where}")


def test_read_word2vec_truncated_binary(tmp_path):
    path = tmp_path / "e.bin"
    write_word2vec(path, ["a", "b"], np.ones((2, 3), np.float32), binary=True)
    path.write_bytes(path.read_bytes()[:-6])
    with pytest.raises(InputError, match="truncated"):
        read_word2vec(path, binary=True)


def test_read_word2vec_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_word2vec(tmp_path / "absent.txt")


# ---- atomic writes --------------------------------------------------------------


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


# ---- npy / npz -------------------------------------------------------------------


def test_npy_round_trip_with_nodes_file(tmp_path):
    v = awkward_vectors()
    path = tmp_path / "emb.npy"
    save_npy(path, v, node_ids=IDS)
    assert nodes_path(path) == tmp_path / "emb.nodes.txt"
    lines = (tmp_path / "emb.nodes.txt").read_text(encoding="utf-8").splitlines()
    assert lines == IDS  # ids only: np.loadtxt(..., dtype=str) reads them
    ids, w = load_npy(path)
    assert ids == IDS and np.array_equal(w.view(np.int32), v.view(np.int32))


def test_npy_default_ids_write_no_nodes_file(tmp_path):
    path = tmp_path / "emb.npy"
    save_npy(path, np.ones((3, 2)), node_ids=["0", "1", "2"])
    assert sorted(os.listdir(tmp_path)) == ["emb.npy"]
    ids, w = load_npy(path)
    assert ids == ["0", "1", "2"] and w.dtype == np.float32


def test_npy_overwrite_removes_stale_nodes_file(tmp_path):
    path = tmp_path / "emb.npy"
    save_npy(path, np.ones((2, 2)), node_ids=["a", "b"])
    with pytest.raises(InputError, match="exists"):
        save_npy(path, np.zeros((2, 2)))
    save_npy(path, np.zeros((2, 2)), overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["emb.npy"]
    assert load_npy(path)[0] == ["0", "1"]


def test_load_npy_checks_nodes_file(tmp_path):
    path = tmp_path / "emb.npy"
    save_npy(path, np.ones((2, 2)), node_ids=["a", "b"])
    (tmp_path / "emb.nodes.txt").write_text("a\nb\nc\n")
    with pytest.raises(InputError, match="3 ids for the 2 rows"):
        load_npy(path)
    (tmp_path / "emb.nodes.txt").write_text("a\na\n")
    with pytest.raises(InputError, match=r"emb.nodes.txt:2: duplicate id 'a'"):
        load_npy(path)


def test_npz_round_trip_and_no_pickles(tmp_path):
    path = tmp_path / "ckpt.npz"
    arrays = {
        "W": np.arange(6, dtype=np.float32).reshape(2, 3),
        "step": np.int64(7),
        "config": np.array('{"dim": 2}'),
    }
    save_npz(path, **arrays)
    loaded = load_npz(path)
    assert sorted(loaded) == ["W", "config", "step"]
    for name, value in arrays.items():
        assert np.array_equal(loaded[name], value)
    with pytest.raises(InputError, match="exists"):
        save_npz(path, W=arrays["W"])
    with pytest.raises(ValueError, match="object"):
        save_npz(tmp_path / "obj.npz", x=np.array([{}], dtype=object))
    np.savez(tmp_path / "pickled.npz", x=np.array([{}], dtype=object))
    with pytest.raises(InputError, match="pickled.npz"):
        load_npz(tmp_path / "pickled.npz")


# ---------------------------------------------------- durability: the file and its folder fsynced


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


INTERRUPTED_ZIP = """
import os, sys, zipfile
import numpy as np
from caps2ne_np.io.npy import save_npz

real, calls = zipfile._ZipWriteFile.close, []

def interrupted(self):
    if not calls:
        calls.append(1)
        raise KeyboardInterrupt
    return real(self)

zipfile._ZipWriteFile.close = interrupted
try:
    save_npz(os.path.join(sys.argv[1], "x.npz"), a=np.ones(3))
except BaseException as err:
    print(type(err).__name__, sorted(os.listdir(sys.argv[1])), flush=True)
    os._exit(0)
"""


def test_an_interrupt_inside_a_zip_member_stays_an_interrupt(tmp_path):
    """Ctrl-C (or the CLI's SIGTERM) landing in a zip member's close made zipfile raise
    ValueError ('open writing handle') on its own close, so the CLI reported an internal
    error instead of the interruption (seen in test_signal_ends_the_run_cleanly).  In a
    subprocess: an interrupt in pytest's own process disturbs it."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_ZIP, str(tmp_path)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip() == "KeyboardInterrupt []", proc.stdout + proc.stderr


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
