"""Embeddings as .npy / .npz with their node ids (caps2ne_np/io/npy.py): round trips, the ids
file beside the matrix, no pickles, an interrupt inside a zip member, the ids file that
np.loadtxt reads, and a kill between the two renames. A failed ids file keeps the previous
.npy pair. A kill between the .npy renames leaves no mismatched pair; a hand-written ids
file still loads."""

import os

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.io import atomic
from caps2ne_np.io.npy import load_npy, load_npz, nodes_path, save_npy, save_npz
from clirun import _fail_temp_files, _vectors


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


def test_np_loadtxt_reads_the_ids_file_without_a_warning(tmp_path):
    import warnings

    import numpy as np

    from caps2ne_np.io.npy import load_npy, save_npy

    save_npy(tmp_path / "e.npy", np.ones((3, 2), np.float32), ["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = np.loadtxt(tmp_path / "e.nodes.txt", dtype=str)
    assert ids.tolist() == ["a", "b", "c"] == load_npy(tmp_path / "e.npy")[0]


def test_an_old_ids_file_with_its_tag_line_still_loads_and_is_checked(tmp_path):
    import numpy as np

    from caps2ne_np.errors import InputError
    from caps2ne_np.io.npy import _matrix_digest, load_npy

    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.save(tmp_path / "e.npy", v)
    tag = f"# caps2ne_np ids of e.npy: 3 rows, blake2b {_matrix_digest(v)}\n"
    (tmp_path / "e.nodes.txt").write_text(tag + "a\nb\nc\n")
    assert load_npy(tmp_path / "e.npy")[0] == ["a", "b", "c"]
    np.save(tmp_path / "e.npy", v + 1)  # another matrix beside the old file
    with pytest.raises(InputError, match="written for another matrix"):
        load_npy(tmp_path / "e.npy")


def test_a_kill_between_the_renames_leaves_no_matrix_with_the_wrong_ids(tmp_path, monkeypatch):
    import numpy as np

    from caps2ne_np.errors import InputError
    from caps2ne_np.io import atomic
    from caps2ne_np.io.npy import load_npy, save_npy

    save_npy(tmp_path / "e.npy", np.ones((4, 2), np.float32), list("abcd"))
    real, calls = atomic.publish, []

    def publish(tmp, target, overwrite):
        calls.append(target.name)
        if len(calls) == 2:  # killed after the first rename
            raise KeyboardInterrupt
        return real(tmp, target, overwrite)

    monkeypatch.setattr(atomic, "publish", publish)
    with pytest.raises(KeyboardInterrupt):
        save_npy(tmp_path / "e.npy", np.zeros((4, 2), np.float32), list("wxyz"), overwrite=True)
    monkeypatch.undo()
    assert calls == ["e.nodes.txt", "e.npy"]  # the ids first, the matrix last
    with pytest.raises(InputError, match="no such file"):
        load_npy(tmp_path / "e.npy")  # the old matrix went first: never paired with wxyz
    assert not list(tmp_path.glob(".*.tmp"))


def test_failed_nodes_file_keeps_the_previous_npy_pair(tmp_path, monkeypatch):
    """The .npy and its .nodes.txt are written in full before either is renamed: no new
    matrix with old ids."""
    save_npy(tmp_path / "e.npy", _vectors(), list("abcd"))
    before = load_npy(tmp_path / "e.npy")
    created = _fail_temp_files(
        monkeypatch, 0, which=2
    )  # the second temp file, the ids, hits a full disk
    with pytest.raises(OSError, match="No space left"):
        save_npy(tmp_path / "e.npy", _vectors() + 1, list("wxyz"), overwrite=True)
    assert [t.name for t in created] == ["e.npy", "e.nodes.txt"]
    ids, vectors = load_npy(tmp_path / "e.npy")
    assert ids == before[0] and np.array_equal(vectors, before[1])


def test_kill_between_the_npy_renames_leaves_no_mismatched_pair(tmp_path, monkeypatch):
    save_npy(tmp_path / "e.npy", np.ones((4, 2)), list("abcd"))
    real, calls = atomic.publish, []

    def publish(tmp, target, overwrite):
        calls.append(target.name)
        if len(calls) == 2:  # killed after the first rename
            raise KeyboardInterrupt
        return real(tmp, target, overwrite)

    monkeypatch.setattr(atomic, "publish", publish)
    with pytest.raises(KeyboardInterrupt):
        save_npy(tmp_path / "e.npy", np.zeros((4, 2)), list("wxyz"), overwrite=True)
    monkeypatch.undo()
    with pytest.raises(InputError, match="e.npy: no such file"):  # the old matrix went first
        load_npy(tmp_path / "e.npy")
    assert not list(tmp_path.glob(".*.tmp"))


def test_npy_pair_round_trips_and_a_hand_written_nodes_file_still_loads(tmp_path):
    save_npy(tmp_path / "e.npy", np.ones((2, 3)), ["x", "y"])
    assert load_npy(tmp_path / "e.npy")[0] == ["x", "y"]
    (tmp_path / "e.nodes.txt").write_text("p\nq\n")  # no tag line: an older or hand-made file
    assert load_npy(tmp_path / "e.npy")[0] == ["p", "q"]
