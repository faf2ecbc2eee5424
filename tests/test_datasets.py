"""Dataset loaders: counts from shared/data/README.md, safe unpickling, user files, bundled
Cora. A truncated .mat says fetch again."""

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from benchdata import DATA, REASON, have, needs_data
from caps2ne_np.errors import InputError
from caps2ne_np.graphs import datasets, downloads, more_graphs, planetoid
from caps2ne_np.graphs.datasets import (
    load_bundled_cora,
    load_dataset,
    load_mat,
    load_planetoid,
)
from caps2ne_np.graphs.downloads import default_data_dir
from caps2ne_np.graphs.nodefiles import load_features, load_labels, load_splits
from caps2ne_np.graphs.planetoid import RestrictedUnpickler

CITESEER_UNLABELLED = [
    2407,
    2489,
    2553,
    2682,
    2781,
    2953,
    3042,
    3063,
    3212,
    3214,
    3250,
    3292,
    3305,
    3306,
    3309,
]


# --------------------------------------------------------------------------- naive reference


def naive_planetoid(name, pdir):
    """README section 1 recipe, step by step: vstack, pad (Citeseer), reorder, argmax."""

    def read(part):
        with open(pdir / f"ind.{name}.{part}", "rb") as fh:
            return RestrictedUnpickler(fh).load()

    allx, ally = planetoid._as_csr(read("allx"), "allx"), read("ally")
    tx, ty = planetoid._as_csr(read("tx"), "tx"), read("ty")
    test_idx = np.loadtxt(pdir / f"ind.{name}.test.index", dtype=np.int64)
    test_sorted = np.sort(test_idx)
    full = np.arange(test_sorted.min(), test_sorted.max() + 1)
    if full.size != test_idx.size:  # step 3: pad tx/ty, row k at sorted_test_idx[k] - min
        tx_ext = sp.lil_matrix((full.size, tx.shape[1]), dtype=np.float32)
        tx_ext[test_sorted - test_sorted.min(), :] = tx
        ty_ext = np.zeros((full.size, ty.shape[1]), dtype=ty.dtype)
        ty_ext[test_sorted - test_sorted.min(), :] = ty
        tx, ty = tx_ext.tocsr(), ty_ext
    features = sp.vstack([allx, tx]).tolil()
    features[test_idx, :] = features[test_sorted, :]
    labels = np.vstack([ally, ty])
    labels[test_idx, :] = labels[test_sorted, :]
    cls = np.where(labels.sum(axis=1) > 0, labels.argmax(axis=1), -1)
    return features.tocsr(), cls


# --------------------------------------------------------------------------- Planetoid

PLANETOID = {
    # name: N, d, feature nnz, class sizes, undirected edges (no loops), self-loop nodes
    "cora": (2708, 1433, 31261 + 17955, [351, 217, 418, 818, 426, 298, 180], 5278, 0),
    "citeseer": (3327, 3703, 73173 + 31992, [249, 590, 668, 701, 596, 508], 4552, 124),
}


@needs_data
@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_counts_match_readme(name):
    n, d, nnz, sizes, edges, loops = PLANETOID[name]
    ds = load_planetoid(name, DATA)
    assert ds.n_nodes == n and ds.node_ids[:2] == ["0", "1"] and len(ds.node_ids) == n
    assert isinstance(ds.adj, sp.csr_matrix) and isinstance(ds.features, sp.csr_matrix)
    assert ds.adj.dtype == np.float32 and ds.adj.shape == (n, n)
    assert (
        ds.features.shape == (n, d) and ds.features.nnz == nnz and ds.features.dtype == np.float32
    )
    assert np.all(ds.features.data == 1.0)  # binary bag of words, not row-normalised
    assert ds.labels.dtype == np.int64 and not ds.multilabel
    assert np.bincount(ds.labels[ds.labels >= 0]).tolist() == sizes
    assert sp.triu(ds.adj, k=1).nnz == edges
    assert np.count_nonzero(ds.adj.diagonal()) == loops
    assert np.all(ds.adj.data == 1.0) and (ds.adj != ds.adj.T).nnz == 0


@needs_data
@pytest.mark.parametrize("name", sorted(PLANETOID))
def test_planetoid_assembly_matches_naive_recipe(name):
    ds = load_planetoid(name, DATA, splits=False)
    features, labels = naive_planetoid(name, DATA / "planetoid")
    assert (ds.features != features).nnz == 0
    np.testing.assert_array_equal(ds.labels, labels)
    assert ds.splits is None


@needs_data("citeseer")
def test_citeseer_has_the_15_unlabelled_zero_feature_nodes():
    ds = load_planetoid("citeseer", DATA)
    assert np.flatnonzero(ds.labels < 0).tolist() == CITESEER_UNLABELLED
    assert ds.features[CITESEER_UNLABELLED].nnz == 0
    assert np.all(np.diff(ds.adj.indptr)[CITESEER_UNLABELLED] >= 1)  # not isolated


@needs_data(features=False)
@pytest.mark.parametrize(
    "name,n_train,n_classes", [("cora", 140, 7), ("citeseer", 120, 6), ("pubmed", 60, 3)]
)
def test_splits_sizes_disjoint_and_balanced(name, n_train, n_classes):
    ds = load_planetoid(name, DATA, features=False)
    assert len(ds.splits) == 10
    for split in ds.splits:
        assert [split[p].size for p in ("train", "val", "test")] == [n_train, 1000, 1000]
        assert all(split[p].dtype == np.int64 for p in split)
        assert np.unique(np.concatenate(list(split.values()))).size == n_train + 2000
        assert np.bincount(ds.labels[split["train"]]).tolist() == [20] * n_classes
    assert len({tuple(s["test"]) for s in ds.splits}) == 10


@pytest.fixture
def pubmed_without_allx(tmp_path):
    """A Planetoid folder with every Pubmed file except allx (symlinks), plus the splits."""
    if not have("pubmed", features=False):
        pytest.skip(REASON)
    (tmp_path / "planetoid").mkdir()
    for part in ("x", "y", "tx", "ty", "ally", "graph", "test.index"):
        os.symlink(
            DATA / "planetoid" / f"ind.pubmed.{part}", tmp_path / "planetoid" / f"ind.pubmed.{part}"
        )
    return tmp_path


@needs_data("pubmed", features=False)
def test_pubmed_without_allx_names_the_missing_file(pubmed_without_allx):
    with pytest.raises(InputError, match=r"ind\.pubmed\.allx: file not found.*features=False"):
        load_planetoid("pubmed", pubmed_without_allx)
    with pytest.raises(InputError, match=r"ind\.pubmed\.allx"):
        load_dataset("pubmed", pubmed_without_allx)


@needs_data("pubmed", features=False)
def test_pubmed_featureless_mode(pubmed_without_allx):
    ds = load_dataset("pubmed", pubmed_without_allx, features=False)
    assert ds.features is None and ds.n_nodes == 19717
    assert len(ds.splits) == 10 and ds.splits[0]["train"].size == 60  # the package's copy
    assert load_dataset("pubmed", pubmed_without_allx, features=False, splits=False).splits is None
    assert np.bincount(ds.labels).tolist() == [4103, 7739, 7875]
    assert sp.triu(ds.adj, k=1).nnz == 44324
    assert np.count_nonzero(ds.adj.diagonal()) == 3


def test_missing_planetoid_file_is_named(tmp_path):
    (tmp_path / "ind.cora.graph").write_bytes(b"")
    with pytest.raises(InputError, match=r"ind\.cora\.ally: file not found"):
        load_planetoid("cora", tmp_path)


# --------------------------------------------------------------------------- restricted unpickler


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"echo pwned > {self.marker}",))


def test_restricted_unpickler_refuses_os_system_before_it_runs(tmp_path, capfd):
    marker = tmp_path / "pwned"
    path = tmp_path / "ind.cora.allx"
    path.write_bytes(pickle.dumps(_Evil(marker), protocol=2))
    with pytest.raises(
        InputError, match=r"ind\.cora\.allx: refusing to unpickle global (posix|os|nt)\.system"
    ):
        planetoid._unpickle(path)
    assert not marker.exists()
    assert "pwned" not in capfd.readouterr().out


def test_restricted_unpickler_refuses_globals_outside_the_list():
    with pytest.raises(
        InputError, match=r"refusing to unpickle global (builtins|__builtin__)\.set"
    ):
        RestrictedUnpickler(io.BytesIO(pickle.dumps({1, 2}, protocol=2)), "f.pkl").load()


def test_corrupt_pickle_is_an_input_error_naming_the_file(tmp_path):
    path = tmp_path / "ind.cora.ty"
    path.write_bytes(pickle.dumps([1, 2, 3], protocol=2)[:-4])
    with pytest.raises(InputError, match=r"ind\.cora\.ty: not a readable Planetoid pickle"):
        planetoid._unpickle(path)


def test_restricted_unpickler_reads_csr_and_arrays_under_old_module_paths():
    x = sp.random(
        5, 4, density=0.5, format="csr", dtype=np.float32, random_state=np.random.default_rng(0)
    )
    blob = pickle.dumps(
        (x, np.arange(6, dtype=np.int32).reshape(2, 3)), protocol=3
    )  # text GLOBALs, no framing
    blob = blob.replace(
        b"scipy.sparse._csr\n", b"scipy.sparse.csr\n"
    )  # the paths the Planetoid files use
    blob = blob.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    assert b"scipy.sparse.csr\n" in blob and b"numpy.core.multiarray\n" in blob
    obj, arr = RestrictedUnpickler(io.BytesIO(blob), "f.pkl").load()
    assert (planetoid._as_csr(obj, "f.pkl") != x).nnz == 0
    np.testing.assert_array_equal(arr, np.arange(6).reshape(2, 3))


# --------------------------------------------------------------------------- .mat


@needs_data
@pytest.mark.parametrize(
    "name,n,n_labels,nnz,label_nnz,loops",
    [
        ("ppi", 3890, 50, 76584, 6640, 894),
        ("pos", 4777, 40, 184812, 6770, 222),
        ("blogcatalog", 10312, 39, 667966, 14476, 0),
    ],
)
def test_mat_counts_match_readme(name, n, n_labels, nnz, label_nnz, loops):
    ds = load_dataset(name, DATA)
    assert ds.multilabel and ds.features is None and ds.splits is None
    assert ds.adj.shape == (n, n) and ds.adj.nnz == nnz and ds.adj.dtype == np.float32
    assert ds.labels.shape == (n, n_labels) and ds.labels.nnz == label_nnz
    assert sp.issparse(ds.labels) and set(np.unique(ds.labels.data)) == {1}
    assert np.count_nonzero(ds.adj.diagonal()) == loops
    assert (ds.adj != ds.adj.T).nnz == 0


@needs_data
@pytest.mark.parametrize(
    "name,n,edges,majority",
    [("musae-wikipedia", 11631, 170773, 0.715), ("musae-github", 37700, 289003, 0.742)],
)
def test_musae_counts_match_readme(name, n, edges, majority):
    # wikipedia's 180,020 lines hold 145 self loops and 9,102 repeats (an edge listed both
    # ways): 170,773 edges remain
    ds = load_dataset(name, DATA)
    assert not ds.multilabel and ds.features is None and ds.splits is None
    assert ds.adj.shape == (n, n) and ds.adj.nnz == 2 * edges and ds.adj.dtype == np.float32
    assert (ds.adj != ds.adj.T).nnz == 0 and ds.adj.diagonal().sum() == 0
    assert set(np.unique(ds.adj.data)) == {1.0}
    assert ds.labels.shape == (n,) and set(np.unique(ds.labels)) == {0, 1}
    assert np.mean(ds.labels == 0) == pytest.approx(majority, abs=5e-4)


def test_musae_loader_reads_a_small_copy_and_names_bad_lines(tmp_path):
    folder = tmp_path / "musae" / "wikipedia"
    folder.mkdir(parents=True)
    (folder / "edges.csv").write_text("id_1,id_2\n0,1\n1,2\n2,1\n3,3\n")
    (folder / "target.csv").write_text("id,target\n0,1\n1,0\n2,0\n3,1\n")
    ds = datasets.load_musae("musae-wikipedia", tmp_path)
    assert ds.adj.nnz == 4 and ds.adj[0, 1] == ds.adj[1, 2] == 1.0  # 1-2 once, no loop
    assert ds.labels.tolist() == [1, 0, 0, 1]
    (folder / "edges.csv").write_text("id_1,id_2\n0,9\n")
    with pytest.raises(InputError, match="node 9 has no class in target.csv"):
        datasets.load_musae("musae-wikipedia", tmp_path)
    (folder / "edges.csv").write_text("source,target\n0,1\n")
    with pytest.raises(InputError, match="expected 'id_1,id_2'"):
        datasets.load_musae("musae-wikipedia", tmp_path)
    (folder / "edges.csv").write_text("id_1,id_2\n0,x\n")
    with pytest.raises(InputError, match="not a CSV of two integer columns"):
        datasets.load_musae("musae-wikipedia", tmp_path)


@needs_data("pos")
def test_pos_keeps_edge_weights():
    ds = load_mat(DATA / "multilabel" / "POS.mat")
    assert ds.name == "pos"
    assert ds.adj.data.min() == 0.5 and ds.adj.data.max() == 1941.5


def test_mat_without_group_is_an_input_error(tmp_path):
    import scipy.io

    path = tmp_path / "g.mat"
    scipy.io.savemat(path, {"network": sp.eye(3, format="csc")})
    with pytest.raises(InputError, match=r"g\.mat: no variable 'group'"):
        load_mat(path)


# --------------------------------------------------------------------------- user files: splits


def _write_json(path, obj):
    path.write_text(json.dumps(obj))
    return path


def test_load_splits_reads_int64_in_file_order(tmp_path):
    path = _write_json(tmp_path / "s.json", [{"train": [3, 0], "val": [1], "test": [4, 2]}])
    (split,) = load_splits(path, 5)
    assert split["train"].tolist() == [3, 0] and split["test"].dtype == np.int64


def test_load_splits_maps_node_ids(tmp_path):
    path = _write_json(tmp_path / "s.json", [{"train": ["b", "a"], "val": [], "test": [7]}])
    (split,) = load_splits(path, None, node_ids=["a", "b", "7"])
    assert split["train"].tolist() == [1, 0] and split["test"].tolist() == [2]


@pytest.mark.parametrize(
    "content,match",
    [
        ([{"train": [0], "val": [1], "test": [5]}], r"split 0 'test': node 5 out of range 0\.\.4"),
        (
            [{"train": [0], "val": [1], "test": [2]}, {"train": [0, 1], "val": [1], "test": [2]}],
            r"split 1: 'train' and 'val' share 1 node",
        ),
        ([{"train": [0], "val": [1], "test": [0]}], r"split 0: 'train' and 'test' share"),
        ([{"train": [0], "test": [2]}], r"split 0: expected exactly the keys train, val, test"),
        ([{"train": [0, 0], "val": [1], "test": [2]}], r"split 0 'train': node 0 listed twice"),
        (
            [{"train": [0.5], "val": [1], "test": [2]}],
            r"split 0 'train': expected integer node indices",
        ),
        ({"no": 1}, r"split 0: expected exactly the keys"),
    ],
)
def test_load_splits_errors_name_file_and_split(tmp_path, content, match):
    path = _write_json(tmp_path / "bad.json", content)
    with pytest.raises(InputError, match=r"bad\.json: " + match):
        load_splits(path, 5)


def test_load_splits_malformed_json(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[{"train": [0,')
    with pytest.raises(InputError, match=r"bad\.json: malformed JSON"):
        load_splits(path, 5)


def test_load_splits_unknown_node_id(tmp_path):
    path = _write_json(tmp_path / "bad.json", [{"train": ["zz"], "val": [], "test": []}])
    with pytest.raises(InputError, match=r"bad\.json: split 0 'train': unknown node id 'zz'"):
        load_splits(path, None, node_ids=["a"])


# --------------------------------------------------------------------------- user files: features


def test_load_features_reorders_rows_by_id_file(tmp_path):
    x = np.arange(6, dtype=np.float64).reshape(3, 2)
    np.save(tmp_path / "f.npy", x)
    (tmp_path / "ids.txt").write_text("c\na\nb\n")
    out = load_features(tmp_path / "f.npy", tmp_path / "ids.txt", node_ids=["a", "b", "c"])
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x[[1, 2, 0]])
    sp.save_npz(tmp_path / "f.npz", sp.csr_matrix(x))
    out = load_features(tmp_path / "f.npz", tmp_path / "ids.txt", node_ids=["a", "b", "c"])
    assert sp.issparse(out) and out.dtype == np.float32
    np.testing.assert_array_equal(out.toarray(), x[[1, 2, 0]])


@pytest.mark.parametrize(
    "ids,node_ids,match",
    [
        ("a\nb\n", ["a", "b", "c"], r"ids\.txt: 2 node ids for 3 feature rows"),
        ("a\nb\nz\n", ["a", "b", "c"], r"ids\.txt: node 'z' is not in the graph"),
        ("a\nb\nc\n", ["a", "b", "c", "d"], r"ids\.txt: no feature row for node 'd'"),
        ("a\na\nb\n", ["a", "b"], r"ids\.txt:2: node id 'a' repeats line 1"),
    ],
)
def test_load_features_id_errors(tmp_path, ids, node_ids, match):
    np.save(tmp_path / "f.npy", np.ones((3, 2)))
    (tmp_path / "ids.txt").write_text(ids)
    with pytest.raises(InputError, match=match):
        load_features(tmp_path / "f.npy", tmp_path / "ids.txt", node_ids=node_ids)


def test_load_features_row_count_without_id_file(tmp_path):
    np.save(tmp_path / "f.npy", np.ones((3, 2)))
    with pytest.raises(InputError, match=r"f\.npy: 3 feature rows for 4 nodes"):
        load_features(tmp_path / "f.npy", node_ids=list("abcd"))


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e300])
def test_load_features_rejects_non_finite(tmp_path, bad):
    x = np.ones((3, 2))
    x[1, 1] = bad
    np.save(tmp_path / "f.npy", x)
    with pytest.raises(InputError, match=r"f\.npy: features contain NaN or inf"):
        load_features(tmp_path / "f.npy")
    sp.save_npz(tmp_path / "f.npz", sp.csr_matrix(x))
    with pytest.raises(InputError, match=r"f\.npz: features contain NaN or inf"):
        load_features(tmp_path / "f.npz")


def test_load_features_wrong_format(tmp_path):
    np.savez(tmp_path / "dense.npz", a=np.ones(3))
    with pytest.raises(InputError, match=r"dense\.npz: not a scipy\.sparse\.save_npz file"):
        load_features(tmp_path / "dense.npz")
    (tmp_path / "f.csv").write_text("1,2\n")
    with pytest.raises(InputError, match=r"f\.csv: unknown feature format"):
        load_features(tmp_path / "f.csv")
    with pytest.raises(InputError, match=r"nope\.npy: file not found"):
        load_features(tmp_path / "nope.npy")


# --------------------------------------------------------------------------- user files: labels


def test_load_labels_single_and_multi(tmp_path):
    path = tmp_path / "l.txt"
    path.write_text("# comment\na 10\nc 2\n\n")
    labels, multi = load_labels(path, ["a", "b", "c"])
    assert not multi and labels.dtype == np.int64
    assert labels.tolist() == [1, -1, 0]  # classes sorted numerically: '2' -> 0, '10' -> 1
    path.write_text("a x\na y\nb y\nb y\n")
    labels, multi, classes = load_labels(path, ["a", "b", "c"], return_classes=True)
    assert multi and classes == ["x", "y"]
    assert labels.toarray().tolist() == [[1, 1], [0, 1], [0, 0]]


@pytest.mark.parametrize(
    "text,match",
    [
        ("a 1\nq 2\n", r"l\.txt:2: node 'q' is not in the graph"),
        ("a 1 2\n", r"l\.txt:1: expected 'node label'"),
        ("# only\n", r"l\.txt: no labels"),
    ],
)
def test_load_labels_errors_give_path_and_line(tmp_path, text, match):
    path = tmp_path / "l.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        load_labels(path, ["a", "b"])


# ------------------------------------------------------------------------ dispatch and bundled data


def test_default_data_dir_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("CAPS2NE_DATA", str(tmp_path))
    assert default_data_dir() == str(tmp_path)
    monkeypatch.delenv("CAPS2NE_DATA")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == str(tmp_path / "xdg" / "caps2ne_np")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_data_dir() == os.path.join(os.path.expanduser("~"), ".cache", "caps2ne_np")


# --------------------------------------------------------------------------- downloads (offline)


def _fake_mirror(root, rel, content):
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(content)
    return root


def test_one_registry_names_every_set_in_order_and_imports_light():
    assert datasets.NAMES == (
        "cora",
        "citeseer",
        "pubmed",
        "ppi",
        "pos",
        "blogcatalog",
        "musae-wikipedia",
        "musae-github",
        "wiki",
        "actor",
        "brazil-airports",
        "europe-airports",
        "cora-bundled",
    )
    assert datasets.NAMES == datasets.PLANETOID_NAMES + tuple(datasets.MAT_FILES) + tuple(
        datasets.MUSAE_NAMES
    ) + tuple(more_graphs.MORE_FILES) + ("cora-bundled",)
    assert all(isinstance(datasets.dataset_files(name), list) for name in datasets.NAMES)
    with pytest.raises(
        InputError, match="choose one of cora, citeseer, pubmed, ppi, pos, blogcatalog"
    ):
        datasets.dataset_files("flickr")
    code = (
        "import sys, caps2ne_np.graphs.datasets\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'\n"
        "             or m in ('caps2ne_np.graphs.planetoid', 'caps2ne_np.io.npy',\n"
        "                      'caps2ne_np.graphs.graph')))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr[-2000:]


def test_registry_covers_every_file_the_loaders_read():
    sets = datasets.NAMES[:-1]  # all but cora-bundled
    assert sets[-1] == "europe-airports"
    for name in sets:
        files = datasets.dataset_files(name)
        assert files and all(rel in downloads.FILES for rel in files)
    assert datasets.dataset_files("cora", features=False) == [
        "planetoid/ind.cora.ally",
        "planetoid/ind.cora.ty",
        "planetoid/ind.cora.graph",
        "planetoid/ind.cora.test.index",
    ]
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for _, sha in downloads.FILES.values())
    assert downloads.UPSTREAM.startswith("https://raw.githubusercontent.com/daiquocnguyen/Caps2NE/")
    if (DATA / "planetoid").is_dir():  # the hashes held in the code are those of the data
        for rel, (_, sha) in downloads.FILES.items():
            if (DATA / rel).is_file():
                assert downloads.sha256_file(DATA / rel) == sha, rel


@needs_data("cora")
@pytest.mark.parametrize("as_url", [False, True])
def test_fetch_copies_from_a_local_mirror_and_checks_sha256(monkeypatch, tmp_path, as_url):
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", DATA.resolve().as_uri() if as_url else str(DATA))
    cache = tmp_path / "cache"
    assert datasets.available("cora", cache) and not (cache / "planetoid").exists()
    assert datasets.fetch("cora", cache) == str(cache)
    for rel in datasets.dataset_files("cora"):
        assert (cache / rel).read_bytes() == (DATA / rel).read_bytes()
    assert not list(cache.rglob("*.part"))
    ds = load_dataset("cora", cache)
    assert ds.n_nodes == 2708 and ds.features.shape == (2708, 1433) and len(ds.splits) == 10


@needs_data("ppi")
def test_fetch_over_http_from_a_loopback_server(monkeypatch, tmp_path):
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(DATA))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("CAPS2NE_DATA_MIRROR", f"http://127.0.0.1:{server.server_address[1]}/")
        ds = load_dataset("ppi", tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert ds.n_nodes == 3890 and ds.multilabel
    assert (
        downloads.sha256_file(tmp_path / "multilabel" / "PPI.mat")
        == downloads.FILES["multilabel/PPI.mat"][1]
    )


def test_fetch_refuses_a_copy_whose_sha256_differs(monkeypatch, tmp_path):
    mirror = _fake_mirror(tmp_path / "mirror", "multilabel/PPI.mat", b"not the PPI graph")
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(mirror))
    with pytest.raises(
        InputError,
        match=r"PPI\.mat: SHA-256 [0-9a-f]{64} differs from the expected "
        r"8a32b88b.*put it at .*cache/multilabel/PPI\.mat",
    ):
        load_dataset("ppi", tmp_path / "cache")
    assert not (tmp_path / "cache" / "multilabel" / "PPI.mat").exists()
    assert not list((tmp_path / "cache").rglob("*.part"))


def test_fetch_without_network_says_which_file_to_put_where(monkeypatch, tmp_path):
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", "http://127.0.0.1:9/")  # the discard port: refused
    with pytest.raises(InputError) as err:
        load_dataset("citeseer", tmp_path)
    msg = str(err.value)
    assert msg.startswith(
        "planetoid/ind.citeseer.ally: cannot get it from the mirror http://127.0.0.1:9/"
    )
    assert f"put it at {tmp_path / 'planetoid' / 'ind.citeseer.ally'}" in msg
    assert downloads.UPSTREAM + "data/ind.citeseer.ally" in msg
    assert "then the same for ind.citeseer.ty, ind.citeseer.graph" in msg and "\n" not in msg


def test_files_placed_by_hand_are_used_without_any_download(monkeypatch, tmp_path):
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(tmp_path / "empty"))
    assert not datasets.available("ppi", tmp_path / "cache")
    mirror = _fake_mirror(tmp_path / "mirror", "multilabel/PPI.mat", b"")
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", str(mirror))
    assert datasets.available("ppi", tmp_path / "cache")  # a local mirror counts
    monkeypatch.setenv("CAPS2NE_DATA_MIRROR", "http://127.0.0.1:9/")
    import scipy.io

    (tmp_path / "cache" / "multilabel").mkdir(parents=True)
    scipy.io.savemat(
        tmp_path / "cache" / "multilabel" / "PPI.mat",
        {"network": sp.csc_matrix(np.ones((3, 3)) - np.eye(3)), "group": sp.csc_matrix(np.eye(3))},
    )
    assert datasets.available("ppi", tmp_path / "cache")
    # a file under a registry name is checked against the registry: a
    # copy that differs is fetched again, or refused with the command that fetches it ...
    with pytest.raises(InputError, match=r"PPI\.mat: cannot get it from the mirror"):
        load_dataset("ppi", tmp_path / "cache")
    with pytest.raises(
        InputError,
        match=r"PPI\.mat: differs from the original file .*'caps2ne fetch-data ppi --data-dir ",
    ):
        load_dataset("ppi", tmp_path / "cache", download=False)
    # ... while load_mat reads a user's own .mat file as it is
    assert load_mat(tmp_path / "cache" / "multilabel" / "PPI.mat").n_nodes == 3


def test_paper_splits_ship_with_the_package():
    sizes = {"cora": 140, "citeseer": 120, "pubmed": 60}
    for name, n_train in sizes.items():
        path = datasets.paper_splits(name)
        data = json.loads(Path(path).read_text())
        assert len(data) == 10 and len(data[0]["train"]) == n_train and len(data[0]["test"]) == 1000
        if (DATA / "splits" / f"{name}.json").is_file():
            assert Path(path).read_bytes() == (DATA / "splits" / f"{name}.json").read_bytes()
    assert (
        datasets.paper_splits("cora") == datasets.bundled_cora_splits()
        or Path(datasets.paper_splits("cora")).read_bytes()
        == Path(datasets.bundled_cora_splits()).read_bytes()
    )


def test_unknown_dataset_name():
    with pytest.raises(InputError, match=r"unknown dataset 'karate'; choose one of cora, citeseer"):
        load_dataset("karate")


def test_bundled_cora_files_parse():
    edges_path, labels_path = load_bundled_cora()
    assert os.path.isfile(edges_path) and os.path.isfile(labels_path)
    assert all(
        os.path.getsize(p) < 100_000
        for p in (edges_path, labels_path, datasets.bundled_cora_splits())
    )
    edges = np.loadtxt(edges_path, dtype=np.int64, comments="#")
    assert edges.shape == (5278, 2) and np.all(edges[:, 0] < edges[:, 1])
    assert np.unique(edges, axis=0).shape[0] == 5278 and edges.max() == 2707
    ds = load_dataset("cora-bundled")
    assert ds.n_nodes == 2708 and sp.triu(ds.adj, k=1).nnz == 5278 and ds.adj.diagonal().sum() == 0
    assert ds.n_classes == 7 and ds.labels.min() == 0 and ds.features is None
    assert len(ds.splits) == 10 and ds.splits[0]["train"].size == 140


@needs_data("cora")
def test_bundled_cora_equals_planetoid_cora():
    bundled, full = load_dataset("cora-bundled"), load_planetoid("cora", DATA)
    assert (bundled.adj != full.adj).nnz == 0
    np.testing.assert_array_equal(bundled.labels, full.labels)
    for a, b in zip(bundled.splits, full.splits):
        assert all(np.array_equal(a[p], b[p]) for p in ("train", "val", "test"))


def fake_mirror(root, rel, content):
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(content)
    return root


@needs_data("ppi")
def test_a_truncated_mat_says_fetch_again_not_savemat(tmp_path):
    data = tmp_path / "d"
    fake_mirror(data, "multilabel/PPI.mat", (DATA / "multilabel" / "PPI.mat").read_bytes()[:5000])
    with pytest.raises(InputError) as err:
        datasets.load_mat("ppi", data)
    assert "fetch it again with 'caps2ne fetch-data ppi --data-dir" in str(err.value)
    assert "savemat" not in str(err.value)
