"""The binary graph cache (caps2ne_np/graphs/graph_cache.py) is keyed on the content: a
same-size edit with the old mtime is noticed, a cache planted beside another graph is not
used, and standard input has no file to cache. A cache round trip is exact and warns the
same, a stale, damaged or foreign cache is refused and rebuilt, and the cache is tied to the
read options."""

import os
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import GraphFormatError, InputError, InputWarning
from caps2ne_np.graphs import graph as G
from caps2ne_np.graphs.graph import read_graph
from caps2ne_np.graphs.graph_cache import (
    StaleCacheError,
    cache_path,
    load_graph_cache,
    save_graph_cache,
)
from clirun import (
    GRAPH,
    TINY,
    assert_error,
    run,  # noqa: F401 (fixtures)
)


def test_cache_notices_a_same_size_edit_with_the_old_mtime(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("a b\nb c\n")
    read_graph(path, cache="write")
    st = os.stat(path)
    path.write_text("a b\nb d\n")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r
    assert read_graph(path, cache="use").node_ids == ["a", "b", "d"]


def test_cache_planted_next_to_another_graph_is_not_used(tmp_path):
    (tmp_path / "g1.txt").write_text("a b\nb c\n")
    (tmp_path / "g2.txt").write_text("x y\ny z\n")
    read_graph(tmp_path / "g1.txt", cache="write")
    cache_path(tmp_path / "g1.txt").rename(cache_path(tmp_path / "g2.txt"))
    st = os.stat(tmp_path / "g1.txt")
    os.utime(tmp_path / "g2.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert read_graph(tmp_path / "g2.txt", cache="use").node_ids == ["x", "y", "z"]


def test_stdin_with_graph_cache_is_refused(run, tmp_path):
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", "-", "--out", str(tmp_path / "o.emb"), "--graph-cache", "use", *TINY],
        input=GRAPH,
    )
    assert_error(result, "<stdin>: a pipe, FIFO or device has no file to cache")


def assert_same_graph(a, b):
    assert a.node_ids == b.node_ids
    assert a.directed == b.directed
    assert a.stats == b.stats and list(a.stats) == list(b.stats)
    assert a.indptr.dtype == b.indptr.dtype == np.int64
    assert a.indices.dtype == b.indices.dtype == np.int32
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert (a.weights is None) == (b.weights is None)
    if a.weights is not None:
        assert a.weights.dtype == b.weights.dtype == np.float32
        assert a.weights.tobytes() == b.weights.tobytes()  # bit for bit


def write(tmp_path, content, name="g.txt"):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def test_cache_round_trip_is_exact_and_warns_the_same(tmp_path):
    path = write(tmp_path, "a b 2\nb a 1.5\nc c\nd e 0.25\n# x\n")
    with warnings.catch_warnings(record=True) as w_read:
        warnings.simplefilter("always")
        g = read_graph(path, cache="write")
    assert cache_path(path) == tmp_path / "g.txt.cache.npz" and cache_path(path).is_file()
    with warnings.catch_warnings(record=True) as w_load:
        warnings.simplefilter("always")
        h = load_graph_cache(path)
    assert_same_graph(g, h)
    assert [str(w.message) for w in w_load] == [str(w.message) for w in w_read]
    assert all(w.filename == __file__ for w in w_load + w_read)


def test_cache_use_loads_without_reading_the_file(tmp_path, monkeypatch):
    path = write(tmp_path, "1 2\n2 3\n3 1\n")
    g = read_graph(path, cache="use")  # no cache yet: reads and writes it
    assert cache_path(path).is_file()

    def no_read(*args, **kwargs):
        raise AssertionError("the graph file was read although the cache is fresh")

    monkeypatch.setattr(G, "_read_graph_file", no_read)
    assert_same_graph(read_graph(path, cache="use"), g)


def test_stale_cache_is_refused_and_rebuilt(tmp_path):
    path = write(tmp_path, "a b\nb c\n")
    read_graph(path, cache="write")
    stamp = os.stat(path)
    with open(path, "a") as f:
        f.write("c d\n")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same mtime, another size
    with pytest.raises(StaleCacheError, match="stale"):
        load_graph_cache(path)
    g = read_graph(path, cache="use")
    assert g.node_ids == ["a", "b", "c", "d"]
    assert load_graph_cache(path).node_ids == g.node_ids  # rebuilt
    stamp = os.stat(path)
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # touched, same content:
    assert load_graph_cache(path).node_ids == g.node_ids  # still fresh (keyed on content)
    path.write_text("a b\nb c\nc e\n")  # same size, other content,
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same mtime (touch -r)
    with pytest.raises(StaleCacheError, match="stale"):
        load_graph_cache(path)
    os.unlink(path)
    with pytest.raises(StaleCacheError, match="is gone"):
        load_graph_cache(path)


def test_cache_is_tied_to_the_read_options(tmp_path):
    path = write(tmp_path, "a b\nb c\nc c\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        read_graph(path, cache="write")
        with pytest.raises(StaleCacheError, match="directed"):
            load_graph_cache(path, directed=True)
        with pytest.raises(StaleCacheError, match="keep_self_loops"):
            load_graph_cache(path, keep_self_loops=True)
        g = read_graph(path, keep_self_loops=True, cache="use")  # rebuilt for these options
        assert g.n_edges == 5
        assert load_graph_cache(path, keep_self_loops=True).n_edges == 5
        save_graph_cache(g, path)  # the public writer infers the option from the stored loop
        with pytest.raises(StaleCacheError, match="keep_self_loops"):
            load_graph_cache(path, keep_self_loops=False)


def test_damaged_or_foreign_cache(tmp_path):
    path = write(tmp_path, "a b\n")
    with pytest.raises(GraphFormatError, match="no such file"):
        load_graph_cache(path)
    cache_path(path).write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(GraphFormatError):
        load_graph_cache(path)
    with pytest.raises(InputError, match="not a graph cache"):
        read_graph(path, cache="write")  # never replaces a file it did not write
    with pytest.warns(InputWarning, match="not written"):
        g = read_graph(path, cache="use")
    assert g.node_ids == ["a", "b"]
    with pytest.raises(InputError, match="cache must be"):
        read_graph(path, cache="yes")


def test_cache_of_a_matrix_file(tmp_path):
    import scipy.sparse as sp

    path = tmp_path / "g.npz"
    sp.save_npz(path, sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]], dtype=np.float32)))
    g = read_graph(path, cache="write")
    assert_same_graph(load_graph_cache(path), g)
    assert g.weights is not None
