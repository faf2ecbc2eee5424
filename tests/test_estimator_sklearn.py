"""The estimator as a scikit-learn user holds it (caps2ne_np/estimator/caps2ne.py): fit takes y
and ignores it, a pipeline with a classifier fits and predicts, features go by keyword, and
get_params / clone keep what the user gave."""

import numpy as np
import pytest

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
