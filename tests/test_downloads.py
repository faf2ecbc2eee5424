"""Benchmark files checked against the registry when used and fetched safely
(caps2ne_np/graphs/downloads.py, datasets.fetch): a modified file is refused and fetched
again, the verdict is cached until the file changes, an unwritable or read-only data folder
and a folder where a file should be are named, and downloads that are too long, too slow
or left by a dead fetch are cut, stopped or removed."""

import http.server
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from benchdata import DATA, needs_data
from caps2ne_np.errors import InputError
from caps2ne_np.graphs import datasets, downloads

OFFLINE = "http://127.0.0.1:9/"  # the discard port: connection refused


def copy_set(name, dest):
    """The files of benchmark set ``name`` copied from the session's data folder."""
    for rel in datasets.dataset_files(name):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / rel, dest / rel)
    return dest


def fake_mirror(root, rel, content):
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(content)
    return root


@needs_data("cora")
def test_a_modified_test_index_is_refused_then_repaired(monkeypatch, tmp_path):
    data = copy_set("cora", tmp_path / "d")
    index = data / "planetoid" / "ind.cora.test.index"
    lines = index.read_text().split("\n")
    lines[0], lines[1] = lines[1], lines[0]  # still a valid file: labels differ at two nodes
    index.write_text("\n".join(lines))
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", OFFLINE)
    with pytest.raises(
        InputError,
        match=r"ind\.cora\.test\.index: differs from the original file .*"
        rf"'caps2ne fetch-data cora --data-dir {data}'",
    ):
        datasets.load_dataset("cora", data, download=False)
    with pytest.raises(InputError, match=r"ind\.cora\.test\.index: cannot get it from the mirror"):
        datasets.load_dataset("cora", data)  # it would fetch it again, but the mirror is down
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(DATA))
    ds = datasets.load_dataset("cora", data)  # fetched again from the mirror
    assert index.read_bytes() == (DATA / "planetoid" / "ind.cora.test.index").read_bytes()
    np.testing.assert_array_equal(ds.labels, datasets.load_planetoid("cora", DATA).labels)


def test_the_verdict_is_cached_until_the_file_changes(monkeypatch, tmp_path):
    rel = "multilabel/PPI.mat"
    path = fake_mirror(tmp_path, rel, b"x" * downloads.SIZES[rel]) / rel
    calls = []
    real = downloads.sha256_file
    monkeypatch.setattr(downloads, "sha256_file", lambda p: calls.append(p) or real(p))
    assert not downloads.matches_registry(path, rel)
    assert not downloads.matches_registry(path, rel)
    assert len(calls) == 1  # hashed once
    os.utime(path, ns=(1, 1))
    assert not downloads.matches_registry(path, rel)
    assert len(calls) == 2  # a new mtime: hashed again
    path.write_bytes(b"short")
    assert not downloads.matches_registry(path, rel) and len(calls) == 2  # wrong size: no hash


def test_a_directory_where_a_file_should_be_is_named(monkeypatch, tmp_path):
    (tmp_path / "d" / "multilabel" / "PPI.mat").mkdir(parents=True)
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", OFFLINE)
    with pytest.raises(InputError, match=r"PPI\.mat: a directory where the file PPI\.mat should"):
        datasets.fetch("ppi", tmp_path / "d")


def test_a_data_folder_that_cannot_be_written_says_so(monkeypatch, tmp_path):
    mirror = fake_mirror(tmp_path / "mirror", "multilabel/PPI.mat", b"x")
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(mirror))

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(downloads, "open", refuse, raising=False)  # the folder refuses new files
    with pytest.raises(InputError) as err:
        datasets.fetch("ppi", tmp_path / "d")
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'd' / 'multilabel'}: the data folder is not writable")
    assert "Permission denied" in msg and "mirror" not in msg and "put it at" not in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_data_folder_says_so(monkeypatch, tmp_path):
    mirror = fake_mirror(tmp_path / "mirror", "multilabel/PPI.mat", b"x")
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(mirror))
    (tmp_path / "d" / "multilabel").mkdir(parents=True)
    (tmp_path / "d" / "multilabel").chmod(0o555)
    try:
        with pytest.raises(InputError, match="the data folder is not writable"):
            datasets.fetch("ppi", tmp_path / "d")
    finally:
        (tmp_path / "d" / "multilabel").chmod(0o755)


class Server:
    """A loopback HTTP server in a thread whose GET handler is ``serve(handler)``."""

    def __init__(self, serve):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                try:
                    serve(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_mirror_serving_too_much_is_cut_at_size_plus_one(monkeypatch, tmp_path):
    size = downloads.SIZES["multilabel/PPI.mat"]
    sent = []

    def serve(h):
        h.send_response(200)
        h.end_headers()
        for _ in range(40):  # 40 MiB, 40x the registry's size
            h.wfile.write(b"\0" * (1 << 20))
            sent.append(1 << 20)

    with Server(serve) as server:
        monkeypatch.setenv("CAPS2NE_DATA_MIRROR", server.url)
        with pytest.raises(InputError, match=rf"more than the {size} bytes of multilabel/PPI\.mat"):
            datasets.fetch("ppi", tmp_path / "d", timeout=10)
    assert sum(sent) < 40 << 20  # the client hung up long before the end
    assert not list((tmp_path / "d").rglob("*.part"))


def test_a_trickling_server_is_stopped_by_the_deadline(monkeypatch, tmp_path):
    stop = threading.Event()

    def serve(h):
        h.send_response(200)
        h.send_header("Content-Length", str(downloads.SIZES["multilabel/PPI.mat"]))
        h.end_headers()
        while not stop.is_set():  # one byte every 50 ms: every read succeeds
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.05)

    with Server(serve) as server:
        monkeypatch.setenv("CAPS2NE_DATA_MIRROR", server.url)
        t0 = time.monotonic()
        try:
            with pytest.raises(InputError, match="download not finished in time"):
                datasets.fetch("ppi", tmp_path / "d", timeout=5, deadline=1.0)
        finally:
            stop.set()
        assert time.monotonic() - t0 < 10


def test_stale_part_files_of_dead_fetches_are_removed(monkeypatch, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "d" / "multilabel"
    folder.mkdir(parents=True)
    stale = folder / f".PPI.mat.{dead.pid}.part"
    alive = folder / f".PPI.mat.{os.getppid()}.part"  # a running process: its fetch goes on
    stale.write_bytes(b"half")
    alive.write_bytes(b"half")
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", OFFLINE)
    with pytest.raises(InputError, match="cannot get it from the mirror"):
        datasets.fetch("ppi", tmp_path / "d")
    assert not stale.exists() and alive.exists()
