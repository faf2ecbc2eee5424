"""Edge lists that are not plain files (caps2ne_np/graphs/graph.py): standard input, real pipes
and FIFOs (read once, in full, never hanging on a bad line), compressed files and damaged
ones, /dev/zero, overlong lines and streams past the memory cap; an empty path.
Decompression bombs stop at the stream cap (the memory over the reader's need, ulimit -v
included) and a MemoryError while reading is one line."""

import bz2
import gzip
import lzma
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np import errors
from caps2ne_np.cli import cli
from caps2ne_np.errors import GraphFormatError, InputWarning
from caps2ne_np.graphs import graph
from caps2ne_np.graphs.graph import read_graph
from caps2ne_np.io.word2vec import read_word2vec
from clirun import (
    GRAPH,
    LOUD,
    TINY,
    _big_graph,
    assert_error,
    process,
    put,
    run,  # noqa: F401 (fixtures)
    train,
)


def test_graph_dash_reads_stdin_once_through_both_readers(run, tmp_path):
    data = _big_graph(unusual_at=3500)  # late: the fast reader declines after reading it all
    result = run_input = CliRunner().invoke(
        cli, ["train", "--graph", "-", "--out", str(tmp_path / "o.emb"), *LOUD], input=data
    )
    assert run_input.exit_code == 0, result.stderr
    assert "graph: 3002 nodes" in result.stderr
    assert read_word2vec(tmp_path / "o.emb")[1].shape == (3002, 4)


def test_graph_dash_needs_out(run, tmp_path):
    assert_error(
        run("train", "--graph", "-", *TINY), "--graph - (standard input) needs --out", code=2
    )


def test_graph_from_a_real_pipe_is_read_in_full(tmp_path):
    (tmp_path / "g.txt").write_bytes(_big_graph(unusual_at=3500))
    cat = subprocess.Popen(["cat", str(tmp_path / "g.txt")], stdout=subprocess.PIPE)
    result = process(
        "train",
        "--graph",
        "/dev/stdin",
        "--out",
        "o.emb",
        *LOUD,
        cwd=tmp_path,
        stdin=cat.stdout,
        timeout=600,
    )
    cat.wait()
    assert result.returncode == 0, result.stderr
    assert b"graph: 3002 nodes" in result.stderr


def _read_through_fifo(tmp_path, data, **kwargs):
    """read_graph of a FIFO fed by a thread; fails (instead of hanging) if the reader blocks."""
    fifo = tmp_path / "g.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as fh:
            fh.write(data)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    out = {}

    def read():
        try:
            out["graph"] = read_graph(fifo, **kwargs)
        except Exception as err:  # noqa: BLE001 -- handed to the test
            out["error"] = err

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    if reader.is_alive():  # reopened the FIFO: unblock it, then fail
        with open(fifo, "wb"):
            pass
        reader.join(10)
        pytest.fail("reading the FIFO blocked: the careful reader reopened it")
    return out


def test_fifo_with_a_malformed_line_gives_its_error_not_a_hang(tmp_path):
    out = _read_through_fifo(tmp_path, b"a b\nb c\nc\n")
    assert isinstance(out.get("error"), GraphFormatError)
    assert str(out["error"]).startswith(f"{tmp_path / 'g.fifo'}:3: line has 1 field 'c'")


def test_fifo_with_an_unusual_weight_reads_every_node(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        out = _read_through_fifo(tmp_path, _big_graph(unusual_at=10))
    assert out["graph"].n_nodes == 3002


@pytest.mark.parametrize(
    "suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)]
)
def test_compressed_edge_lists_are_read(tmp_path, suffix, opener):
    with opener(tmp_path / f"g.txt{suffix}", "wb") as fh:
        fh.write(GRAPH.encode())
    (tmp_path / "g.txt").write_text(GRAPH)
    g, plain = read_graph(tmp_path / f"g.txt{suffix}"), read_graph(tmp_path / "g.txt")
    assert g.node_ids == plain.node_ids and np.array_equal(g.indices, plain.indices)


def test_damaged_gzip_is_one_line(run, tmp_path):
    data = gzip.compress(GRAPH.encode() * 50)
    put(tmp_path, "g.txt.gz", data[: len(data) // 2])
    assert_error(train(run, graph="g.txt.gz"), "g.txt.gz: a damaged .gz file")


def test_dev_zero_is_refused_at_once(run, tmp_path):
    t0 = time.perf_counter()
    assert_error(train(run, graph="/dev/zero"), "/dev/zero:1: binary content (NUL byte)")
    assert time.perf_counter() - t0 < 30


def test_overlong_line_in_a_stream_is_refused(run, tmp_path, monkeypatch):
    from caps2ne_np.graphs import graph

    monkeypatch.setattr(graph, "MAX_LINE_BYTES", 1000)
    put(tmp_path, "g.txt.gz", gzip.compress(b"a b\n" + b"x" * 5000 + b" y\n"))
    assert_error(train(run, graph="g.txt.gz"), "g.txt.gz: a line longer than 1000 bytes")


def test_stream_larger_than_the_cap_is_refused(tmp_path, monkeypatch):
    from caps2ne_np.graphs import graph

    monkeypatch.setattr(graph, "max_stream_bytes", lambda: 100)
    monkeypatch.setattr(graph, "_STREAM_CHUNK", 64)
    (tmp_path / "g.txt.gz").write_bytes(gzip.compress(GRAPH.encode() * 20))
    with pytest.raises(
        GraphFormatError,
        match="more than 100 bytes of text after decompression: reading it needs about 20 times",
    ):
        read_graph(tmp_path / "g.txt.gz")


def test_empty_graph_path_says_so(run, tmp_path):
    assert_error(run("train", "--graph", "", "--out", "o.emb", *TINY), "graph path is empty")


ROOT = Path(__file__).resolve().parents[1]


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
