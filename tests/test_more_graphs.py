"""caps2ne_np/graphs/more_graphs.py and the registry entries of the graphs of more/ (Wiki,
Actor, the Brazil and Europe airports): counts from shared/data/README.md section 5, the node
order of the airports, the file formats, SHA-256 checks and fetch-data through a mirror."""

import shutil

import numpy as np
import pytest

from benchdata import DATA, needs_data
from caps2ne_np.errors import InputError
from caps2ne_np.graphs import datasets, downloads
from caps2ne_np.graphs.datasets import load_dataset, load_more
from caps2ne_np.graphs.more_graphs import MORE_FILES, node_order

NAMES = ("wiki", "actor", "brazil-airports", "europe-airports")

# name: nodes, edge lines, self-loop lines, undirected pairs without loops, classes, majority
# (shared/data/README.md, section 5)
COUNTS = {
    "wiki": (2405, 17981, 1996, 11596, 17, 0.169),
    "actor": (7600, 33391, 122, 26659, 5, 0.259),
    "brazil-airports": (131, 1074, 71, 1003, 4, 0.267),
    "europe-airports": (399, 5995, 2, 5993, 4, 0.256),
}


def naive_edges(name):
    """(u, v) int arrays of the edge lines of ``name`` read with numpy (ids are 0..N-1)."""
    rel = MORE_FILES[name][0]
    skip = 1 if name == "actor" else 0
    rows = np.loadtxt(DATA / rel, dtype=np.int64, skiprows=skip, ndmin=2)
    return rows[:, 0], rows[:, 1]


def copy_set(name, dest):
    for rel in datasets.dataset_files(name):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / rel, dest / rel)
    return dest


def write(root, name, edges, labels):
    """A small copy of ``name``'s two files under ``root``."""
    for rel, text in zip(MORE_FILES[name], (edges, labels)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


# --------------------------------------------------------------------------- the real graphs


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_counts_match_readme(name):
    n, lines, loop_lines, pairs, classes, majority = COUNTS[name]
    ds = load_dataset(name, DATA)
    assert ds.name == name and not ds.multilabel and ds.features is None and ds.splits is None
    assert ds.adj.shape == (n, n) and ds.adj.dtype == np.float32 and ds.n_nodes == n
    assert ds.node_ids == [str(i) for i in range(n)]  # the upstream ids are 0..N-1
    assert ds.labels.dtype == np.int64 and ds.labels.shape == (n,) and ds.n_classes == classes
    assert set(np.unique(ds.labels)) == set(range(classes))
    assert np.bincount(ds.labels).max() / n == pytest.approx(majority, abs=5e-4)
    u, v = naive_edges(name)
    assert u.size == lines and np.count_nonzero(u == v) == loop_lines
    loops = np.unique(u[u == v])
    assert ds.adj.nnz == 2 * pairs + loops.size  # symmetric, duplicates collapsed, loops kept
    assert (ds.adj != ds.adj.T).nnz == 0 and set(np.unique(ds.adj.data)) == {1.0}
    np.testing.assert_array_equal(np.flatnonzero(ds.adj.diagonal()), loops)
    upper = ds.adj.tocoo()
    got = {(a, b) for a, b in zip(upper.row.tolist(), upper.col.tolist()) if a <= b}
    assert got == {(min(a, b), max(a, b)) for a, b in zip(u.tolist(), v.tolist())}


@needs_data("europe-airports")
def test_fetch_data_copies_a_graph_from_the_mirror(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli as main

    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(DATA))
    result = CliRunner().invoke(
        main, ["fetch-data", "europe-airports", "--data-dir", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert f"europe-airports: {tmp_path}" in result.output
    for rel in datasets.dataset_files("europe-airports"):
        assert (tmp_path / rel).read_bytes() == (DATA / rel).read_bytes()
    assert load_dataset("europe-airports", tmp_path, download=False).n_nodes == 399


@needs_data("brazil-airports")
def test_a_modified_label_file_is_refused_by_its_sha256_then_repaired(monkeypatch, tmp_path):
    data = copy_set("brazil-airports", tmp_path / "d")
    labels = data / "more" / "airports" / "labels-brazil-airports.txt"
    text = labels.read_text()
    labels.write_text(text.replace("\n0 0\n", "\n0 3\n", 1))  # same size: one class changed
    assert labels.stat().st_size == downloads.SIZES["more/airports/labels-brazil-airports.txt"]
    with pytest.raises(
        InputError,
        match=r"labels-brazil-airports\.txt: differs from the original file .*"
        rf"'caps2ne fetch-data brazil-airports --data-dir {data}'",
    ):
        load_dataset("brazil-airports", data, download=False)
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(DATA))
    ds = load_dataset("brazil-airports", data)  # fetched again from the mirror
    assert labels.read_text() == text and ds.labels[0] == 0


def test_a_mirror_copy_whose_sha256_differs_is_refused(monkeypatch, tmp_path):
    rel = "more/wiki/Wiki_edgelist.txt"
    (tmp_path / "mirror" / rel).parent.mkdir(parents=True)
    (tmp_path / "mirror" / rel).write_text("0 1\n")
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(tmp_path / "mirror"))
    with pytest.raises(
        InputError,
        match=r"Wiki_edgelist\.txt: SHA-256 [0-9a-f]{64} differs from the expected 72fccd28.*"
        r"download https://raw\.githubusercontent\.com/thunlp/OpenNE/"
        r"7b86f4ca25fca3f441f593335fa57dc7dffb3b29/data/wiki/Wiki_edgelist\.txt",
    ):
        load_dataset("wiki", tmp_path / "cache")
    assert not (tmp_path / "cache" / rel).exists()


def test_registry_names_the_pinned_upstream_files():
    assert datasets.NAMES[-5:] == NAMES + ("cora-bundled",)
    pinned = {
        "wiki": "thunlp/OpenNE/7b86f4ca25fca3f441f593335fa57dc7dffb3b29/data/wiki/",
        "actor": "graphdml-uiuc-jlu/geom-gcn/f1fc0d14b3b019c562737240d06ec83b07d16a8f/"
        "new_data/film/",
        "brazil-airports": "leoribeiro/struc2vec/77b4cc63e79a37b1496f340c7772d932038417ec/graph/",
    }
    pinned["europe-airports"] = pinned["brazil-airports"]
    for name in NAMES:
        for rel in datasets.dataset_files(name):
            url, sha = downloads.FILES[rel]
            base = rel.rsplit("/", 1)[1]
            assert url == "https://raw.githubusercontent.com/" + pinned[name] + base
            assert len(sha) == 64 and downloads.SIZES[rel] > 0


# --------------------------------------------------------------------------- small copies


def test_airport_ids_become_nodes_in_increasing_order(tmp_path):
    write(
        tmp_path,
        "brazil-airports",
        "100 4\n4 30\n30 4\n4 4\n",
        "node label\n30 1\n4 0\n100 3\n",
    )
    ds = load_more("brazil-airports", tmp_path)
    assert ds.node_ids == ["4", "30", "100"]  # numeric order, not the file's or the strings'
    assert ds.labels.tolist() == [0, 1, 3]
    assert ds.adj.toarray().tolist() == [[1, 1, 1], [1, 0, 0], [1, 0, 0]]  # 4-30 once, loop kept
    assert node_order(["GRU", "BSB", "10"]) == ["10", "BSB", "GRU"]  # codes: string order


def test_actor_reads_the_last_column_and_not_the_features(tmp_path):
    header = "node_id\tfeature(feature_amount:931)\tlabel\n"
    write(
        tmp_path,
        "actor",
        "node_id\tnode_id\n1\t0\n2\t1\n",
        header + "2\t5,7\t4\n0\t1\t0\n1\t\t2\n",
    )
    ds = load_more("actor", tmp_path)
    assert ds.node_ids == ["0", "1", "2"] and ds.labels.tolist() == [0, 2, 4]
    assert ds.features is None and ds.adj.nnz == 4


@pytest.mark.parametrize(
    "name,edges,labels,message",
    [
        ("wiki", "0 1\n1 9\n", "0 0\n1 1\n", r"Wiki_edgelist\.txt:2: node '9' has no class in"),
        ("wiki", "0 1 2\n", "0 0\n1 1\n", r"Wiki_edgelist\.txt:1: 3 fields; expected 2"),
        ("wiki", "0 1\n", "0 0\n1 x\n", r"Wiki_category\.txt:2: class 'x' is not a non-neg"),
        ("wiki", "0 1\n", "0 0\n0 1\n", r"Wiki_category\.txt:2: node '0' has a second class"),
        ("brazil-airports", "0 1\n", "0 0\n1 1\n", r"first line '0 0'; expected 'node label'"),
        ("actor", "0 1\n", "x\n", r"out1_graph_edges\.txt: first line '0 1'; expected"),
    ],
)
def test_bad_lines_are_one_line_errors_naming_the_line(tmp_path, name, edges, labels, message):
    if name == "actor":
        labels = "node_id\tfeature(feature_amount:931)\tlabel\n0\t\t0\n1\t\t1\n"
    write(tmp_path, name, edges, labels)
    with pytest.raises(InputError, match=message) as err:
        load_more(name, tmp_path)
    assert "\n" not in str(err.value)


def test_missing_files_and_unknown_names(tmp_path):
    with pytest.raises(InputError, match=r"Wiki_category\.txt: file not found"):
        load_more("wiki", tmp_path)
    with pytest.raises(InputError, match="unknown graph 'cora' of more/; choose one of wiki"):
        load_more("cora", tmp_path)
