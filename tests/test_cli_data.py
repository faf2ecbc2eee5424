"""Benchmark data from the command line as a new user meets it: 'train --dataset cora' after
install, with the data placed by hand (no network) or fetched from a mirror; without either,
one line saying which file to put where. fetch-data repairs a truncated file."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchdata import DATA, needs_data
from caps2ne_np.errors import InputError
from caps2ne_np.graphs import datasets, downloads
from caps2ne_np.io.word2vec import read_word2vec

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = "http://127.0.0.1:9/"  # the discard port: every download is refused


def run(args, cwd, **env):
    """``python -m caps2ne_np ARGS`` in ``cwd`` (not the checkout), as after ``pip install``."""
    full = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "caps2ne_np", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )


@needs_data("cora")
def test_train_dataset_cora_from_files_placed_by_hand(tmp_path):
    data = tmp_path / "my-data"
    for rel in datasets.dataset_files("cora"):
        (data / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / rel, data / rel)
    proc = run(
        [
            "train",
            "--dataset",
            "cora",
            "--walks-per-node",
            "1",
            "--epochs",
            "1",
            "--dim",
            "8",
            "--out",
            "cora.emb",
            "-q",
        ],
        tmp_path,
        CAPS2NE_DATA=str(data),
        CAPS2NE_DATA_MIRROR=OFFLINE,
    )
    assert proc.returncode == 0, proc.stderr
    ids, emb = read_word2vec(tmp_path / "cora.emb")
    assert ids[:3] == ["0", "1", "2"] and emb.shape == (2708, 8) and np.isfinite(emb).all()


@needs_data("ppi")
def test_fetch_data_fills_the_user_cache(tmp_path):
    cache = tmp_path / "xdg"
    env = dict(XDG_CACHE_HOME=str(cache), CAPS2NE_DATA_MIRROR=str(DATA))
    env_no_data = {k: v for k, v in os.environ.items() if k != "CAPS2NE_DATA"}
    proc = subprocess.run(
        [sys.executable, "-m", "caps2ne_np", "fetch-data", "ppi"],
        cwd=tmp_path,
        env=dict(env_no_data, PYTHONPATH=str(ROOT), **env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ppi: {cache / 'caps2ne_np'}"
    assert (cache / "caps2ne_np" / "multilabel" / "PPI.mat").read_bytes() == (
        DATA / "multilabel" / "PPI.mat"
    ).read_bytes()


def test_train_dataset_offline_says_which_file_to_put_where(tmp_path):
    proc = run(
        ["train", "--dataset", "ppi", "--out", "ppi.emb"],
        tmp_path,
        CAPS2NE_DATA=str(tmp_path / "data"),
        CAPS2NE_DATA_MIRROR=OFFLINE,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: multilabel/PPI.mat: cannot get it from the mirror")
    assert f"put it at {tmp_path / 'data' / 'multilabel' / 'PPI.mat'}" in last
    assert downloads.UPSTREAM + "graph/PPI.mat" in last
    assert not (tmp_path / "ppi.emb").exists()


def test_data_dir_option_is_named_in_the_message(tmp_path):
    from caps2ne_np.errors import InputError

    try:
        datasets.load_planetoid("cora", tmp_path / "nowhere")
    except InputError as err:
        assert "--data-dir" in str(err) and "data_dir" in str(err)
    else:
        raise AssertionError("no error")


def cli(*args, cwd, **env):
    """``python -m caps2ne_np ARGS`` of this checkout."""
    return subprocess.run(
        [sys.executable, "-m", "caps2ne_np", *map(str, args)],
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def copy_set(name, dest):
    """The files of benchmark set ``name`` copied from the session's data folder."""
    for rel in datasets.dataset_files(name):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / rel, dest / rel)
    return dest


@needs_data("cora")
def test_fetch_data_repairs_a_truncated_file(tmp_path):
    data = copy_set("cora", tmp_path / "d")
    graph_file = data / "planetoid" / "ind.cora.graph"
    graph_file.write_bytes(graph_file.read_bytes()[:1000])
    with pytest.raises(
        InputError, match=r"fetch it again with 'caps2ne fetch-data cora --data-dir"
    ):
        datasets.load_planetoid("cora", data)  # not "replace it with the original file" alone
    proc = cli(
        "fetch-data", "cora", "--data-dir", data, cwd=tmp_path, CAPS2NE_DATA_MIRROR=str(DATA)
    )
    assert proc.returncode == 0, proc.stderr
    assert "ind.cora.graph: differs from the registry's copy" in proc.stderr
    assert graph_file.read_bytes() == (DATA / "planetoid" / "ind.cora.graph").read_bytes()
