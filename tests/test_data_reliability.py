"""Registry files checked when used and repaired by fetch-data, an
unwritable data folder, decompression bombs and memory limits, damaged compressed
files, and downloads that are killed, too long or too slow."""

import bz2
import gzip
import http.server
import lzma
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from benchdata import DATA, needs_data
from caps2ne_np import errors
from caps2ne_np.errors import GraphFormatError, InputError
from caps2ne_np.graphs import datasets, downloads, graph

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = "http://127.0.0.1:9/"  # the discard port: connection refused


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


def fake_mirror(root, rel, content):
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(content)
    return root


# ---------------------------------------------------------------- 1. registry files checked


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


@needs_data("ppi")
def test_a_truncated_mat_says_fetch_again_not_savemat(tmp_path):
    data = tmp_path / "d"
    fake_mirror(data, "multilabel/PPI.mat", (DATA / "multilabel" / "PPI.mat").read_bytes()[:5000])
    with pytest.raises(InputError) as err:
        datasets.load_mat("ppi", data)
    assert "fetch it again with 'caps2ne fetch-data ppi --data-dir" in str(err.value)
    assert "savemat" not in str(err.value)


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


# ---------------------------------------------------------------- 2. unwritable data folder


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


# ---------------------------------------------------------------- 3. decompression bombs


def test_the_stream_cap_is_the_memory_over_the_readers_need(monkeypatch):
    monkeypatch.setattr(errors, "available_memory", lambda: 400 << 20)
    assert graph.max_stream_bytes() == (400 << 20) // graph.READER_BYTES_PER_BYTE


def test_a_bomb_stops_at_the_cap_with_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(errors, "available_memory", lambda: 40 << 20)  # cap: 2 MiB of text
    bomb = tmp_path / "g.txt.gz"
    bomb.write_bytes(gzip.compress(b"1 2\n" * (4 << 20), 9))  # 16 MiB of text in 16 kB
    assert bomb.stat().st_size < 100_000
    with pytest.raises(GraphFormatError) as err:
        graph.read_edgelist(bomb)
    msg = str(err.value)
    assert "more than 2.1 MB of text after decompression" in msg and "\n" not in msg


@pytest.mark.parametrize("v1", [False, True], ids=["cgroup-v2", "cgroup-v1"])
def test_the_cgroup_limit_is_honoured(monkeypatch, tmp_path, v1):
    root = tmp_path / "cg"
    folder = root / "memory" if v1 else root
    folder.mkdir(parents=True)
    limit, usage = (
        ("memory.limit_in_bytes", "memory.usage_in_bytes")
        if v1
        else (
            "memory.max",
            "memory.current",
        )
    )
    (folder / limit).write_text(f"{300 << 20}\n")
    (folder / usage).write_text(f"{100 << 20}\n")
    monkeypatch.setattr(errors, "CGROUP_ROOT", str(root))
    assert errors.available_memory() <= 200 << 20
    (folder / limit).write_text("max\n" if not v1 else f"{1 << 62}\n")  # no limit
    assert errors._cgroup_available() is None


def test_ulimit_v_caps_the_stream_instead_of_a_memory_error(tmp_path):
    bomb = tmp_path / "g.txt.gz"
    bomb.write_bytes(gzip.compress(b"1 2\n" * (10 << 20), 9))  # 40 MiB of text in 41 kB
    code = (
        "import resource, sys\n"
        "from caps2ne_np.graphs import graph\n"
        "vm = [int(l.split()[1]) * 1024 for l in open('/proc/self/status')"
        " if l.startswith('VmSize')][0]\n"
        "resource.setrlimit(resource.RLIMIT_AS, (vm + (300 << 20), resource.RLIM_INFINITY))\n"
        "try:\n"
        "    graph.read_edgelist(sys.argv[1])\n"
        "except Exception as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(bomb)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert proc.stdout.startswith("GraphFormatError "), proc.stdout + proc.stderr[-2000:]
    assert "of text after decompression" in proc.stdout and "ulimit -v" in proc.stdout


def test_memory_error_while_reading_is_one_line(monkeypatch, tmp_path):
    (tmp_path / "g.txt").write_text("a b\nb c\n")

    def out_of_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(graph, "_read_edgelist_fast", out_of_memory)
    with pytest.raises(GraphFormatError, match=r"g\.txt: out of memory while reading"):
        graph.read_edgelist(tmp_path / "g.txt")


# ---------------------------------------------------------------- 4. damaged compressed files

GRAPH = b"a b\nb c\nc d\nd a\n" * 50


def _flip(data):
    data = bytearray(data)
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize(
    "suffix,content",
    [
        (".xz", GRAPH),  # plain text named .xz
        (".xz", _flip(lzma.compress(GRAPH))),
        (".gz", _flip(gzip.compress(GRAPH))),
        (".bz2", _flip(bz2.compress(GRAPH))),
        (".bz2", GRAPH),
    ],
    ids=["xz-plain", "xz-flipped", "gz-flipped", "bz2-flipped", "bz2-plain"],
)
def test_damaged_compressed_files_are_input_errors(tmp_path, suffix, content):
    path = tmp_path / f"g.txt{suffix}"
    path.write_bytes(content)
    with pytest.raises(InputError, match=rf"g\.txt\{suffix}: a damaged \{suffix} file"):
        graph.read_edgelist(path)
    proc = cli("train", "--graph", path, "--out", "e.emb", "-q", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {path}: a damaged {suffix} file"), proc.stderr
    assert "internal error" not in proc.stderr


# ---------------------------------------------------------------- 5. downloads


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


# ---------------------------------------------------------------- 20. perf.py --smoke offline


def test_perf_smoke_without_its_data_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "perf.py"), "--smoke", "--no-peer"],
        cwd=tmp_path,
        env=dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            CAPS2NE_DATA=str(tmp_path / "none"),
            CAPS2NE_DATA_MIRROR=OFFLINE,
            CAPS2NE_BENCH_RESULTS=str(tmp_path / "results"),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("bench/perf.py:")]
    assert len(lines) == 1 and "needs the cora data set ('caps2ne fetch-data cora')" in lines[0]


def test_the_cli_turns_memory_error_into_one_line(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli as main
    from caps2ne_np.graphs import datasets as ds_module

    def out_of_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(ds_module, "fetch", out_of_memory)
    result = CliRunner().invoke(main, ["fetch-data", "cora", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: out of memory"), result.output
    assert "internal error" not in result.output
