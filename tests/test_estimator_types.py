"""One API, one set of types: any hashable node label is
accepted and kept; node_ids_, embedding_dict() and to_keyedvectors() agree on the
user's type; transform takes the inputs fit takes; errors name the estimator's
parameters; fit_transform; only text writers need tokens, and they say which ids
they cannot write."""

from pathlib import Path

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.graphs.csr import from_edges
from caps2ne_np.io.npy import save_npy
from caps2ne_np.io.word2vec import write_word2vec

nx = pytest.importorskip("networkx")
pytestmark = pytest.mark.filterwarnings("ignore::caps2ne_np.errors.InputWarning")
ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(dim=8, feat_dim=8, walks_per_node=2, epochs=1, num_sampled=5, random_state=0)


@pytest.fixture(scope="module")
def women():
    """networkx's Davis Southern women graph: labels such as 'Evelyn Jefferson'."""
    G = nx.davis_southern_women_graph()
    return G, Caps2NE(**SMALL).fit(G)


def test_networkx_labels_with_spaces_are_accepted_and_kept(women):
    G, model = women
    assert model.node_ids_ == list(G.nodes)
    emb = model.embedding_dict()
    np.testing.assert_array_equal(emb["Evelyn Jefferson"], model.get_embedding()[0])


def test_transform_takes_the_networkx_graph_fit_took(women):
    G, model = women
    by_label = model.transform(G, nodes=["Evelyn Jefferson", "E3"], aggregate="mean")
    g = from_edges(
        *zip(*[(list(G).index(u), list(G).index(v)) for u, v in G.edges]),
        None,
        list(G.nodes),
        tokens=False,
    )
    ref = model.transform(g, nodes=["Evelyn Jefferson", "E3"], aggregate="mean")
    np.testing.assert_array_equal(by_label, ref)
    with pytest.raises(InputError, match="'Nobody' is not a node of the graph"):
        model.transform(G, nodes=["Nobody"])


def test_text_writers_name_the_ids_they_cannot_write(women, tmp_path):
    _, model = women
    for write in (write_word2vec, save_npy):
        with pytest.raises(InputError) as info:
            write(tmp_path / "w.out", node_ids=model.node_ids_, vectors=model.get_embedding())
        message = str(info.value)
        assert "\n" not in message
        assert "18 of 32 node ids cannot be written as text tokens" in message
        assert "'Evelyn Jefferson', 'Laura Mandeville', 'Theresa Anderson'" in message
    assert not list(tmp_path.iterdir())


def test_model_file_keeps_labels_with_spaces(women, tmp_path):
    _, model = women
    model.save(tmp_path / "w.npz")
    again = Caps2NE.load(tmp_path / "w.npz")
    assert again.node_ids_ == model.node_ids_
    np.testing.assert_array_equal(again.get_embedding(), model.get_embedding())


@pytest.mark.parametrize("kind", ["matrix", "edges", "networkx"])
def test_integer_labels_have_one_type_everywhere(kind, tmp_path):
    pytest.importorskip("gensim")
    import scipy.sparse as sp

    pairs = np.array([[5, 3], [3, 7], [7, 5], [7, 9], [9, 11], [11, 3]])
    if kind == "matrix":
        graph = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(12, 12))
    elif kind == "edges":
        graph = pairs
    else:
        graph = nx.Graph([tuple(map(int, p)) for p in pairs])
    model = Caps2NE(**{**SMALL, "num_sampled": 3}).fit(graph)
    ids = model.node_ids_
    assert all(type(x) is int for x in ids)
    assert list(model.embedding_dict()) == ids
    assert list(model.to_keyedvectors().index_to_key) == ids
    model.save(tmp_path / "m.npz")
    assert Caps2NE.load(tmp_path / "m.npz").node_ids_ == ids
    write_word2vec(tmp_path / "m.emb", ids, model.get_embedding())  # written as str(label)
    assert (tmp_path / "m.emb").read_text().splitlines()[1].split()[0] == str(ids[0])


def test_errors_name_the_estimators_parameters():
    G = nx.path_graph(6)
    with pytest.raises(InputError) as info:
        Caps2NE(dim=0).fit(G)
    assert str(info.value).startswith("dim: must be >= 1") and "--" not in str(info.value)
    with pytest.raises(InputError, match=r"^walk_length: must be >= 2"):
        Caps2NE(walk_length=1).fit(G)
    with pytest.raises(InputError, match=r"^num_sampled: must be smaller"):
        Caps2NE(num_sampled=50).fit(G)


def test_fit_transform_is_fit_then_get_embedding():
    G = nx.karate_club_graph()
    O = Caps2NE(**SMALL).fit_transform(G)
    np.testing.assert_array_equal(O, Caps2NE(**SMALL).fit(G).get_embedding())


def test_readme_says_what_each_thread_default_is():
    """The README's Python example no longer calls n_jobs=2 'the CLI's defaults': the
    estimator defaults to one thread, the command line to every core."""
    text = (ROOT / "README.md").read_text()
    assert "the CLI's defaults" not in text
    assert "n_jobs=1" in text and "all cores" in text
    assert Caps2NE().n_jobs == 1
