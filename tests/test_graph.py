"""Edge-list / matrix readers and the CSR Graph (caps2ne_np.graphs.graph), and the no-break
spaces an id may hold. Damaged compressed files are input errors."""

import bz2
import gzip
import lzma
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from caps2ne_np.errors import GraphFormatError, InputError, InputWarning
from caps2ne_np.graphs import graph
from caps2ne_np.graphs.csr import Graph, from_edges, from_scipy
from caps2ne_np.graphs.graph import read_edgelist, read_graph


def write(tmp_path, content, name="g.txt"):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def read_quiet(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return read_edgelist(path, **kwargs)


def neighbours(g, node):
    i = g.index_of(node)[0]
    return [g.node_ids[j] for j in g.indices[g.indptr[i] : g.indptr[i + 1]]]


def assert_valid(g):
    n = g.n_nodes
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    assert g.indptr[0] == 0 and g.indptr[-1] == g.n_edges and np.all(np.diff(g.indptr) >= 0)
    assert np.all((g.indices >= 0) & (g.indices < n))
    for i in range(n):
        row = g.indices[g.indptr[i] : g.indptr[i + 1]]
        assert np.all(np.diff(row) > 0)  # sorted, no duplicates
    if g.weights is not None:
        assert g.weights.dtype == np.float32 and g.weights.shape == g.indices.shape
        assert np.all(np.isfinite(g.weights) & (g.weights > 0))
    assert len(g.node_ids) == n and len(set(g.node_ids)) == n


# ---- parsing -----------------------------------------------------------------


def test_parses_comments_blank_lines_and_string_ids(tmp_path):
    path = write(tmp_path, "# a comment\n\nalice bob   # trailing\n  bob\tcarol \n\n07 7\r\n")
    g = read_edgelist(path)
    assert g.node_ids == [
        "alice",
        "bob",
        "carol",
        "07",
        "7",
    ]  # order of first appearance, '07' != '7'
    assert g.weights is None and not g.directed
    assert neighbours(g, "bob") == ["alice", "carol"]
    assert neighbours(g, "7") == ["07"]
    assert g.stats == {
        "lines": 6,
        "edges_read": 3,
        "self_loops": 0,
        "duplicates": 0,
        "isolated_nodes": 0,
    }
    assert_valid(g)


def test_mixed_weight_columns_default_to_one(tmp_path):
    g = read_quiet(write(tmp_path, "a b\nb c 2.5\nc d 1e-3\n"), directed=True)
    assert g.weights is not None
    assert g.to_scipy()[g.index_of("a")[0], g.index_of("b")[0]] == 1.0
    np.testing.assert_array_equal(g.weights, np.float32([1.0, 2.5, 1e-3]))


def test_all_weights_one_store_none(tmp_path):
    g = read_edgelist(write(tmp_path, "a b 1\nb c 1.0\n"))
    assert g.weights is None


def test_undirected_is_symmetric(tmp_path):
    g = read_edgelist(write(tmp_path, "a b 2\nb c 3\nc a 0.5\nc d 4\n"))
    A = g.to_scipy().toarray()
    assert A.dtype == np.float32
    np.testing.assert_array_equal(A, A.T)
    assert g.n_edges == 8
    np.testing.assert_array_equal(g.degree(), [2, 2, 3, 1])
    assert A[g.index_of("c")[0], g.index_of("d")[0]] == 4.0


def test_directed_keeps_only_u_to_v(tmp_path):
    with pytest.warns(InputWarning, match="1 node"):
        g = read_edgelist(write(tmp_path, "a b\nb c\na c\n"), directed=True)
    assert g.directed and g.n_edges == 3
    assert neighbours(g, "a") == ["b", "c"] and neighbours(g, "c") == []
    assert g.stats["isolated_nodes"] == 1  # the sink c
    np.testing.assert_array_equal(g.degree(), [2, 1, 0])


def test_self_loops_dropped_with_count_and_warning(tmp_path):
    path = write(tmp_path, "a a\nb b\na b\n")
    with pytest.warns(InputWarning, match="dropped 2 self loop"):
        g = read_edgelist(path)
    assert g.stats["self_loops"] == 2 and g.n_edges == 2


def test_self_loops_kept_on_request(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        g = read_edgelist(write(tmp_path, "a a 3\na b\n"), keep_self_loops=True)
    assert neighbours(g, "a") == ["a", "b"]
    assert g.to_scipy()[0, 0] == 3.0  # an undirected self loop is stored once, not doubled
    assert g.stats["self_loops"] == 1


def test_dropped_self_loop_leaves_isolated_node(tmp_path):
    path = write(tmp_path, "a b\nc c\n")
    with pytest.warns(InputWarning) as record:
        g = read_edgelist(path)
    messages = " | ".join(str(w.message) for w in record)
    assert "dropped 1 self loop" in messages and "1 node(s) have no out-edges" in messages
    assert g.n_nodes == 3 and g.degree()[g.index_of("c")[0]] == 0
    assert g.stats["isolated_nodes"] == 1


def test_unweighted_duplicates_merge_to_weight_one(tmp_path):
    path = write(tmp_path, "a b\nb a\na b\nb c\n")
    with pytest.warns(InputWarning, match="merged 2 duplicate"):
        g = read_edgelist(path)
    assert g.weights is None and g.n_edges == 4
    assert g.stats["duplicates"] == 2 and g.stats["edges_read"] == 4


def test_weighted_duplicates_are_summed(tmp_path):
    with pytest.warns(InputWarning, match="merged 1 duplicate.*summed"):
        g = read_edgelist(write(tmp_path, "a b 1.5\nb a 2\n"))
    np.testing.assert_array_equal(g.weights, np.float32([3.5, 3.5]))


def test_directed_reverse_edge_is_not_a_duplicate(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)
        g = read_edgelist(write(tmp_path, "a b\nb a\n"), directed=True)
    assert g.n_edges == 2 and g.stats["duplicates"] == 0


def test_utf8_ids_and_bom(tmp_path):
    g = read_edgelist(write(tmp_path, "\ufeffköln 東京\n"))
    assert g.node_ids == ["köln", "東京"]


def test_index_of_and_unknown_id(tmp_path):
    g = read_edgelist(write(tmp_path, "x y\ny z\n"))
    np.testing.assert_array_equal(g.index_of(["z", "x"]), [2, 0])
    assert g.index_of(["z"]).dtype == np.int64
    with pytest.raises(InputError, match="'w'"):
        g.index_of(["x", "w"])


def test_accepts_pathlike_and_str(tmp_path):
    path = write(tmp_path, "1 2\n")
    assert read_edgelist(str(path)).node_ids == read_edgelist(path).node_ids == ["1", "2"]


# ---- errors: one line, path:line ----------------------------------------------

LINE_ERRORS = [
    ("a b\nlonely\n", 2, "1 field"),
    ("a b\n\nc d e f\n", 3, "4 fields"),
    ("a b x\n", 1, "not a number"),
    ("a b 1\nb c nan\n", 2, "finite"),
    ("a b inf\n", 1, "finite"),
    ("a b 0\n", 1, "finite"),
    ("a b -2\n", 1, "finite"),
    ("a b 1e39\n", 1, "float32"),
    ("a b 1e-50\n", 1, "float32"),
    (b"a b\nc\x00d e\n", 2, "binary"),
    (b"a b\nc \xff\xfe\n", 2, "UTF-8"),
    (b"a b\n\n\xc3\x28 b\n", 3, "UTF-8"),
]


@pytest.mark.parametrize("content,lineno,what", LINE_ERRORS)
def test_bad_lines_name_path_and_line(tmp_path, content, lineno, what):
    path = write(tmp_path, content)
    with pytest.raises(GraphFormatError, match=what) as err:
        read_quiet(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{lineno}: ") and "\n" not in message and "; " in message


HEADERS = [
    ("source target\n1 2\n2 3\n3 1\n", 1, "its ids are not numbers"),
    ("# edges\n\nid_1 id_2\n1 2\n2 3\n", 3, "its ids are not numbers"),
    ("node_id\tnode_id\n1\t2\n2\t3\n", 1, "its ids are not numbers"),  # a self loop
    ("source target\nalice bob\nbob carol\n", 1, "its ids are column names"),
    ("Source,Target\n1,2\n", 1, "not commas"),
    ("source target weight\n1 2 0.5\n", 1, "if it is a header line, remove it"),
]


@pytest.mark.parametrize("content,lineno,what", HEADERS)
def test_a_header_line_is_an_error_naming_it_not_an_edge(tmp_path, content, lineno, what):
    path = write(tmp_path, content)
    with pytest.raises(GraphFormatError, match=what) as err:
        read_quiet(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{lineno}: ") and "\n" not in message


@pytest.mark.parametrize(
    "content",
    [
        "a b\n1 2\na 1\n",  # 'a' is named by another edge: an edge of mixed ids
        "u v\nv w\n",  # 'u v' names node v again: an edge
        "source target\ntarget x\n",
        "a b 2\n1 2\n",  # a weight: an edge of string ids (bench/scale.py's warm-up graph)
    ],
)
def test_ids_that_only_look_like_a_header_are_read(tmp_path, content):
    assert read_quiet(write(tmp_path, content)).n_edges >= 1


@pytest.mark.parametrize(
    "content,what",
    [
        ("", "no edges"),
        ("# only\n\n   \n", "no edges"),
        ("a a\nb b\n", "no edges left after dropping 2 self loops"),
    ],
)
def test_files_without_edges(tmp_path, content, what):
    path = write(tmp_path, content)
    with pytest.raises(GraphFormatError, match=what) as err:
        read_quiet(path)
    assert str(err.value).startswith(f"{path}: ")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(GraphFormatError, match="no such file") as err:
        read_edgelist(tmp_path / "nope.txt")
    assert str(tmp_path / "nope.txt") in str(err.value)
    with pytest.raises(GraphFormatError, match="is a directory"):
        read_edgelist(tmp_path)


# ---- matrices -----------------------------------------------------------------


def test_from_scipy_round_trip_keeps_isolated_nodes():
    A = sp.csr_matrix(
        np.array([[0, 2, 0, 0], [2, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=np.float64)
    )
    with pytest.warns(InputWarning, match="1 node"):
        g = from_scipy(A)
    assert g.node_ids == ["0", "1", "2", "3"] and g.stats["duplicates"] == 0
    assert_valid(g)
    np.testing.assert_array_equal(g.to_scipy().toarray(), A.toarray())
    with pytest.warns(InputWarning, match="1 node"):
        h = from_scipy(g.to_scipy().tocoo(), node_ids=["a", "b", "c", "d"])
    assert h.node_ids == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(h.indptr, g.indptr)
    np.testing.assert_array_equal(h.indices, g.indices)
    np.testing.assert_array_equal(h.weights, g.weights)


def test_from_scipy_directed_and_asymmetric_undirected():
    A = sp.coo_matrix(([1.0, 1.0, 1.0], ([0, 1, 1], [1, 0, 2])), shape=(3, 3))
    with pytest.warns(InputWarning, match="1 node"):  # node 2 is a sink
        g = from_scipy(A, directed=True)
    np.testing.assert_array_equal(g.to_scipy().toarray(), A.toarray())
    with pytest.warns(InputWarning, match="merged 1 duplicate"):
        u = from_scipy(A)
    assert u.weights is None
    np.testing.assert_array_equal(u.to_scipy().toarray(), [[0, 1, 0], [1, 0, 1], [0, 1, 0]])


def test_from_scipy_rejects_bad_input():
    with pytest.raises(InputError, match="square"):
        from_scipy(sp.csr_matrix((2, 3)))
    with pytest.raises(InputError, match="finite"):
        from_scipy(sp.csr_matrix(np.array([[0, -1.0], [-1.0, 0]])))
    with pytest.raises(InputError, match="whitespace"):
        from_scipy(sp.eye(2, format="csr"), node_ids=["a b", "c"], keep_self_loops=True)
    with pytest.raises(InputError, match="twice"):
        from_scipy(sp.eye(2, format="csr"), node_ids=["a", "a"], keep_self_loops=True)


def test_from_edges_matches_reader(tmp_path):
    g = read_edgelist(write(tmp_path, "p q 2\nq r 3\n"))
    h = from_edges(np.array([0, 1]), np.array([1, 2]), np.array([2.0, 3.0]), ["p", "q", "r"])
    assert isinstance(h, Graph) and h.node_ids == g.node_ids
    for name in ("indptr", "indices", "weights"):
        np.testing.assert_array_equal(getattr(h, name), getattr(g, name))
    with pytest.raises(InputError, match="outside"):
        from_edges(np.array([0]), np.array([5]), None, ["p", "q"])


def test_read_graph_npz_and_mat(tmp_path):
    A = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], dtype=np.float64))
    sp.save_npz(tmp_path / "g.npz", A)
    scipy.io.savemat(tmp_path / "g.mat", {"network": A, "group": np.eye(3)})
    for name in ("g.npz", "g.mat"):
        g = read_graph(tmp_path / name)
        np.testing.assert_array_equal(g.to_scipy().toarray(), A.toarray())
    bad = write(tmp_path, b"not a zip", name="bad.npz")
    with pytest.raises(GraphFormatError, match="bad.npz"):
        read_graph(bad)
    assert read_graph(write(tmp_path, "a b\n")).node_ids == ["a", "b"]


@pytest.mark.parametrize(
    "text,what",
    [
        ("a\u00a0x b\nb c\n", "weight 'b' is not a number"),  # 3 fields: a, x, b
        ("a\u00a0x b 2\nb c\n", "line has 4 fields"),
    ],
)
def test_a_no_break_space_in_an_id_is_named_in_the_error(tmp_path, text, what):
    from caps2ne_np.errors import GraphFormatError
    from caps2ne_np.graphs.graph import read_edgelist

    path = tmp_path / "g.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GraphFormatError) as err:
        read_edgelist(path)
    message = str(err.value)
    assert f"{path}:1: {what}" in message and "\n" not in message
    assert "U+00A0" in message and "NO-BREAK SPACE" in message
    assert "separates fields" in message


def test_a_no_break_space_read_as_a_separator_is_a_warning(tmp_path):
    from caps2ne_np.errors import InputWarning
    from caps2ne_np.graphs.graph import read_edgelist

    path = tmp_path / "g.txt"
    path.write_text("a b\nb\u00a0c 2\n# c\u00a0d in a comment\n", encoding="utf-8")
    with pytest.warns(InputWarning, match=r"g\.txt:2: .*U\+00A0 \(NO-BREAK SPACE\)"):
        g = read_edgelist(path)
    assert g.node_ids == ["a", "b", "c"]


def test_an_ascii_edge_list_gives_no_space_warning(tmp_path, recwarn):
    from caps2ne_np.graphs.graph import read_edgelist

    path = tmp_path / "g.txt"
    path.write_text("a b\nb c 2\n# c\u00a0d in a comment\n", encoding="utf-8")
    read_edgelist(path)
    assert not [w for w in recwarn if "U+00A0" in str(w.message)]


ROOT = Path(__file__).resolve().parents[1]


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
