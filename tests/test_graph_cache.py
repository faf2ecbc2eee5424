"""The binary graph cache (caps2ne_np/graphs/graph_cache.py) is keyed on the content: a
same-size edit with the old mtime is noticed, a cache planted beside another graph is not
used, and standard input has no file to cache."""

import os

from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.graphs.graph import read_graph
from caps2ne_np.graphs.graph_cache import cache_path
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
