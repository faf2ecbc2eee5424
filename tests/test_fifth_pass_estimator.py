"""The estimator as a scikit-learn user holds it, the test extra, the edge-list reader's
memory and ``caps2ne evaluate`` on ``infer``'s output (fifth pass of hostile use)."""

import configparser
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _extra(name):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options.extras_require"][name].split("\n")
    return {re.split(r"[<>=!~ \[]", line.strip())[0] for line in lines if line.strip()}


def test_test_extra_installs_what_the_api_tests_import():
    """``pip install -e ".[test]"`` (the README's test command) must run the networkx,
    pandas and gensim tests of test_estimator_types.py and test_estimator_inputs.py, not skip
    them."""
    imported = set()
    for name in ("test_estimator_types.py", "test_estimator_inputs.py"):
        text = (ROOT / "tests" / name).read_text()
        imported |= set(re.findall(r'importorskip\("([a-z_]+)"', text))
    assert imported >= {"networkx", "pandas", "gensim"}
    assert imported <= _extra("test"), imported - _extra("test")


# ---- the edge-list reader's memory on string ids ---------------------------------


def _peak_per_byte(path):
    """Peak traced memory of the NumPy reader over the file's size (NumPy reports its
    arrays to tracemalloc; the interpreter's own baseline is not counted)."""
    import tracemalloc
    import warnings

    from caps2ne_np.graphs import graph as G

    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = G._read_edgelist_fast(str(path), False, False, stacklevel=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert g is not None  # the NumPy reader took the file
    return peak / path.stat().st_size


@pytest.mark.parametrize("line", ["a b 1.5\n", "a b\n"])
def test_string_id_reader_peaks_well_below_the_stream_cap(tmp_path, line):
    """Weighted string-id lines peaked at 26 bytes per byte of text (2.1 GB for 80 MB),
    above the stream cap's READER_BYTES_PER_BYTE = 20: the string path held the whole
    file as one loadtxt string table (twice, while it grew) and every weight as a Python
    str and float at once.  It now parses a bounded piece at a time."""
    from caps2ne_np.graphs import graph as G

    path = tmp_path / "g.txt"
    path.write_text(line * 300_000)
    assert _peak_per_byte(path) < 0.75 * G.READER_BYTES_PER_BYTE


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("piece", [1, 7, 64])
def test_string_reader_in_small_pieces_equals_the_careful_reader(
    tmp_path, monkeypatch, seed, piece
):
    """Pieces of a line or a few (blank-only pieces, a last line without a newline,
    comments, CRLF, ids first seen in a later piece) give the careful reader's Graph."""
    import test_graph_fast as fast_tests
    from caps2ne_np.graphs import graph as G

    monkeypatch.setattr(G, "_STRING_PIECE", piece)
    rng = np.random.default_rng(seed)
    ids = fast_tests.STR_IDS + fast_tests.INT_IDS
    weighted = [False, "all"][seed % 2]
    path = fast_tests.write(tmp_path, fast_tests.random_edge_list(rng, 120, ids, weighted))
    fast, careful, w_fast, w_careful = fast_tests.read_both(path)
    assert fast is not None
    fast_tests.assert_same_graph(fast, careful)
    assert w_fast == w_careful


# ---- scikit-learn habits: fit(G, y), pipelines, get_params after fit --------------

TINY = dict(dim=8, feat_dim=8, walks_per_node=2, epochs=2, num_sampled=5)


def _two_cliques():
    """Two 6-cliques joined by one edge, and each node's clique as its label."""
    import scipy.sparse as sp

    edges = [(u, v) for b in (0, 6) for u in range(b, b + 6) for v in range(u + 1, b + 6)]
    edges.append((5, 6))
    u, v = np.array(edges).T
    adj = sp.csr_matrix((np.ones(len(u)), (u, v)), shape=(12, 12))
    return adj + adj.T, np.repeat([0, 1], 6)


@pytest.mark.parametrize("as_list", [False, True])
def test_fit_takes_y_and_ignores_it(as_list):
    """Caps2NE().fit(G, y) took y for the features (IndexError for an array,
    AttributeError for a list); an unsupervised estimator takes y and ignores it."""
    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj, y = _two_cliques()
    with_y = Caps2NE(**TINY, random_state=0).fit(adj, y.tolist() if as_list else y)
    without = Caps2NE(**TINY, random_state=0).fit(adj)
    np.testing.assert_array_equal(with_y.get_embedding(), without.get_embedding())
    np.testing.assert_array_equal(
        Caps2NE(**TINY, random_state=0).fit_transform(adj, y), without.get_embedding()
    )


def test_pipeline_of_embedding_and_classifier_fits_and_predicts():
    """make_pipeline(Caps2NE(), LogisticRegression()).fit(G, y): what a scikit-learn user
    writes first.  transform(G) on the fitted graph is the fitted embedding, so
    predict(G) classifies the rows fit_transform gave the classifier."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj, y = _two_cliques()
    pipe = make_pipeline(Caps2NE(**TINY, random_state=0), LogisticRegression())
    pipe.fit(adj, y)
    model, clf = pipe[0], pipe[-1]
    E = model.get_embedding()
    np.testing.assert_array_equal(model.transform(adj), E)
    np.testing.assert_array_equal(pipe.predict(adj), clf.predict(E))
    assert pipe.predict(adj).shape == (12,)
    # another graph, or nodes asked for, is Algorithm 3 (new nodes), not the fitted rows
    assert model.transform(adj, nodes=[0, 1]).shape == (2, 8)


def test_features_go_by_keyword_and_a_feature_matrix_as_y_is_refused():
    """Features are X=...; real-valued features given in y's place (fit's second
    positional before) are refused with the fix, not silently ignored."""
    from caps2ne_np.errors import InputError
    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj, _ = _two_cliques()
    X = np.random.default_rng(0).random((12, 3)).astype(np.float32)
    model = Caps2NE(**TINY, random_state=0).fit(adj, X=X)
    assert model.fixed_features_
    with pytest.raises(InputError, match="X="):
        Caps2NE(**TINY, random_state=0).fit(adj, X)


def _fitted_small(random_state):
    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj, _ = _two_cliques()
    return adj, Caps2NE(**TINY, random_state=random_state).fit(adj)


@pytest.mark.parametrize("kind", ["none", "generator"])
def test_get_params_after_fit_and_load_are_what_the_user_gave(tmp_path, kind):
    """get_params() after fit returns random_state as given (None, the Generator itself),
    and a loaded model's too for None; seed_ records the seed used."""
    from caps2ne_np.estimator.caps2ne import Caps2NE

    given = None if kind == "none" else np.random.default_rng(3)
    adj, model = _fitted_small(given)
    assert model.get_params()["random_state"] is given
    assert model.random_state is given
    assert isinstance(model.seed_, int)
    model.save(tmp_path / "m.npz")
    loaded = Caps2NE.load(tmp_path / "m.npz")
    if kind == "none":
        assert loaded.get_params()["random_state"] is None
    else:  # a Generator cannot be stored: the seed it gave stands for it
        assert loaded.get_params()["random_state"] == model.seed_


def test_clone_of_a_fit_without_random_state_draws_a_fresh_seed(tmp_path):
    """clone(fitted).fit(g) with random_state=None draws a new seed (a fit that stored the
    resolved seed as random_state would repeat the first run), also after save/load."""
    from sklearn.base import clone

    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj, model = _fitted_small(None)
    again = clone(model).fit(adj)
    assert again.seed_ != model.seed_
    assert not np.array_equal(again.get_embedding(), model.get_embedding())
    model.save(tmp_path / "m.npz")
    reloaded = clone(Caps2NE.load(tmp_path / "m.npz")).fit(adj)
    assert reloaded.seed_ not in (model.seed_, again.seed_)


# ---- caps2ne evaluate on infer's output ------------------------------------------


def test_evaluate_scores_infers_output_in_one_command(tmp_path):
    """infer writes only the new nodes; scoring them took a hand-built embeddings file
    (train's and infer's rows) and a splits file.  ``--inferred`` takes infer's file as
    it is: the classifier is fitted on the -e nodes' embeddings (the training nodes)
    and tested on the inferred nodes, with the whole labels file."""
    import json

    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.io.word2vec import write_word2vec

    rng = np.random.default_rng(0)
    centre = {"x": np.array([4.0, 0, 0]), "y": np.array([0, 4.0, 0])}
    label = {f"n{i}": "x" if i % 2 else "y" for i in range(30)}
    old, new = [f"n{i}" for i in range(20)], [f"n{i}" for i in range(20, 30)]

    def rows(ids):
        return np.stack([centre[label[i]] + rng.normal(0, 0.3, 3) for i in ids])

    write_word2vec(tmp_path / "train.emb", old, rows(old).astype(np.float32))
    E_new = rows(new)
    E_new[:5] = np.stack([centre["y" if label[i] == "x" else "x"] for i in new[:5]])  # wrong
    write_word2vec(tmp_path / "new.emb", new, E_new.astype(np.float32))
    (tmp_path / "labels.txt").write_text("".join(f"{n} {c}\n" for n, c in label.items()))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli,
        ["evaluate", "-e", str(tmp_path / "train.emb"), "--inferred", str(tmp_path / "new.emb")]
        + ["--labels", str(tmp_path / "labels.txt"), "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    (r,) = json.loads(out.read_text())
    assert r["test_mean"] == pytest.approx(0.5)  # 5 of the 10 inferred nodes, trained on 20
