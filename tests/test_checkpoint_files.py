"""Checkpoint folders as the command line meets them (caps2ne_np/training/checkpoint.py):
a folder locked by a running run names its holder, a stale lock is taken over, damaged
files are one line or fall back with a warning, and a resume that asks for fewer epochs
or another rate says so."""

import json
import subprocess
import sys

import numpy as np
import pytest

from caps2ne_np.io.npy import load_npz, save_npz
from caps2ne_np.training import checkpoint
from clirun import (
    GRAPH,
    ROOT,
    _trained,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
    train,
)


def test_second_run_on_a_locked_checkpoint_dir_names_the_holder(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from caps2ne_np.training import checkpoint\nwith checkpoint.locked('ck'):\n"
            "    print('held', flush=True); time.sleep(120)",
            str(ROOT),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"held"
        result = train(run, "--checkpoint-dir", "ck")
        assert_error(result, f"ck: in use by process {holder.pid} (lock file ck/lock)")
        assert not _trained(result)
    finally:
        holder.kill()
        holder.wait()
    assert (
        train(run, "--checkpoint-dir", "ck", "--overwrite").exit_code == 0
    )  # its flock died with it


def test_stale_lock_of_a_dead_process_is_taken_over(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "lock").write_text(f"{2**22 + 12345}\n")
    result = train(run, "--checkpoint-dir", "ck", quiet=False)
    assert result.exit_code == 0, result.stderr
    assert (
        "warning: ck/lock: taking over the lock of process 4206649, which is gone" in result.stderr
    )
    assert not (tmp_path / "ck" / "lock").exists()


def _checkpointed(run, tmp_path, epochs=2):
    put(tmp_path, "g.txt", GRAPH)
    assert train(run, "--epochs", str(epochs), "--checkpoint-dir", "ck").exit_code == 0
    return tmp_path / "ck"


def _damage(path, **changes):
    arrays = load_npz(path)
    for name, value in changes.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value
    save_npz(path, overwrite=True, **arrays)


@pytest.mark.parametrize(
    "changes,what",
    [
        ({"state": None}, "damaged checkpoint (no state)"),
        ({"config": np.asarray("{not json")}, "damaged checkpoint (JSONDecodeError"),
        (
            {"param_O": np.zeros((3, 3), dtype=np.float32)},
            "param_O has shape (3, 3) float32, this run needs (4, 4)",
        ),
        (
            {"state": np.asarray(json.dumps({"epoch": -3, "batch": 0}))},
            "damaged checkpoint (config, history or state",
        ),
    ],
    ids=["missing-key", "bad-json", "wrong-shape", "bad-state"],
)
def test_damaged_checkpoint_is_one_line(run, tmp_path, changes, what):
    ck = _checkpointed(run, tmp_path)
    for name in (checkpoint.LATEST, checkpoint.PREVIOUS):
        _damage(ck / name, **changes)
    result = train(run, "--epochs", "3", "--resume", "ck", "--overwrite")
    assert_error(result, "ck/checkpoint", what)


def _config_with(path, **values):
    config = json.loads(str(load_npz(path)["config"]))
    return np.asarray(json.dumps(dict(config, **values)))


@pytest.mark.parametrize(
    "changes",
    [
        {"config": np.asarray("{not json")},
        {"param_O": np.zeros((3, 3), dtype=np.float32)},
        "absurd-batch",
    ],
    ids=["bad-json", "wrong-shape", "absurd-batch-size"],
)
def test_damaged_latest_checkpoint_falls_back_with_a_warning(run, tmp_path, changes):
    ck = _checkpointed(run, tmp_path)
    if changes == "absurd-batch":
        changes = {"config": _config_with(ck / checkpoint.LATEST, batch_size=10**9)}
    _damage(ck / checkpoint.LATEST, **changes)
    result = train(run, "--epochs", "3", "--resume", "ck", "--overwrite", quiet=False)
    assert result.exit_code == 0, result.stderr
    warned = [
        line for line in result.stderr.splitlines() if "ck/checkpoint.prev.npz instead" in line
    ]
    assert len(warned) == 1 and warned[0].startswith("warning: ck/checkpoint.npz: ")


def test_lr_mismatch_on_resume_reads_as_options(run, tmp_path):
    _checkpointed(run, tmp_path)
    result = train(run, "--epochs", "3", "--resume", "ck", "--lr", "0.01", "--overwrite")
    last = assert_error(
        result, "ck/checkpoint.npz: options differ from the checkpointed run: --lr "
    )
    assert "None" not in last and "(now 0.01)" in last
    assert last.endswith(
        "resume with the same options (only --epochs, --stop, --propagate, --spectrum-power, "
        "--row-norm and --threads may change)"
    )


def test_resume_with_fewer_epochs_than_the_checkpoint_is_refused(run, tmp_path):
    _checkpointed(run, tmp_path, epochs=3)
    assert_error(
        train(run, "--epochs", "2", "--resume", "ck", "--overwrite"),
        "ck/checkpoint.npz: the checkpointed run is at epoch 3, more than --epochs 2",
    )
