"""An update of a trained model to a changed graph (caps2ne_np/update/update.py): the
rows carried over by node id, the walk ids of the nodes walks start from, the budget,
walks that start only near the change, the same bits on 1 and 2 threads, a resume that
ends where the uninterrupted update ends, and the clear errors."""

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.errors import InputError
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.training import trainer
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.step.batch import start_walk_ids
from caps2ne_np.update import update as upd

TINY = dict(
    dim=4,
    feat_dim=4,
    walk_length=4,
    walks_per_node=2,
    epochs=1,
    batch_size=8,
    num_sampled=6,
    threads=1,
    seed=3,
    stop="none",
    propagate="none",
    spectral="none",
)


# -- naive references ------------------------------------------------------------------


def naive_start_walk_ids(starts, n_nodes, T):
    """Walk j of an epoch: the t = (j // S)-th walk of the c-th copy of node
    starts[j % S] (c: its copies before position j % S), whose id in a run from every
    node (walk id w starts at w mod N) is starts[j % S] + N (c T + t)."""
    S = len(starts)
    out = []
    for j in range(S * T):
        s, t = j % S, j // S
        c = list(starts[:s]).count(starts[s])
        out.append(starts[s] + n_nodes * (c * T + t))
    return np.array(out, dtype=np.int64)


def naive_change_shares(old_edges, new_edges, old_ids, new_ids):
    """Per node of the new graph (by id): 1 if new, else its changed edges over the larger
    of its degrees (undirected edges, each end counted), by sets and loops."""

    def norm(edges):
        return {tuple(sorted(e)) for e in edges}

    old_e, new_e = norm(old_edges), norm(new_edges)
    out = []
    for v in new_ids:
        if v not in old_ids:
            out.append(1.0)
            continue
        changed = sum(v in e for e in old_e ^ new_e)
        deg = max(sum(v in e for e in old_e), sum(v in e for e in new_e), 1)
        out.append(min(1.0, changed / deg))
    return np.array(out)


def naive_changed_share(old_edges, new_edges):
    """Undirected edges in one graph and not the other over the larger graph's edges,
    by sets."""
    old_e = {tuple(sorted(e)) for e in old_edges}
    new_e = {tuple(sorted(e)) for e in new_edges}
    return len(old_e ^ new_e) / max(len(old_e), len(new_e))


def naive_neighbour_mean(edges, known, values, node):
    """The mean of ``values`` over the known neighbours of ``node``, by a loop."""
    nbrs = {v for u, v in edges if u == node} | {u for u, v in edges if v == node}
    rows = [values[v] for v in sorted(nbrs) if known[v]]
    return np.mean(rows, axis=0) if rows else None


def interrupted_then_resumed(model, graphs, options, tmp_path, at_step, every):
    """An update stopped (KeyboardInterrupt) at step ``at_step`` with checkpoints every
    ``every`` steps, then resumed from its folder: the resumed ``Updated``."""
    old, new = graphs
    folder = tmp_path / "ckpt"

    def stop(epoch, batch, step):
        if step == at_step:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        upd.update(
            model, old, new, None, options, checkpoint_dir=folder, checkpoint_every=every,
            step_callback=stop,
        )  # fmt: skip
    return upd.update(model, old, new, None, options, checkpoint_dir=folder, resume_from=folder)


# -- graphs ----------------------------------------------------------------------------


def ring(nodes):
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


def graph_of(edges, ids):
    """A csr.Graph of undirected ``edges`` between positions of ``ids``."""
    n = len(ids)
    e = np.asarray(edges, dtype=np.int64)
    A = sp.coo_matrix((np.ones(len(e), np.float32), (e[:, 0], e[:, 1])), shape=(n, n))
    return from_scipy((A + A.T).tocsr(), [str(x) for x in ids])


# B first: walks that ignored their start nodes (walk w from node w mod N) would start there
A_NODES, B_NODES = list(range(14, 26)), list(range(0, 12))
OLD_EDGES = ring(A_NODES) + [(20, 12), (12, 13), (13, 0)] + ring(B_NODES)  # A - bridge - B
NEW_EDGES = OLD_EDGES + [(26, 14), (26, 15), (26, 27), (27, 25)]  # two new nodes, on ring A


@pytest.fixture(scope="module")
def graphs():
    old = graph_of(OLD_EDGES, list(range(26)))
    new = graph_of(NEW_EDGES, list(range(28)))
    return old, new


@pytest.fixture(scope="module")
def model(graphs):
    old, _ = graphs
    trained = trainer.train(old, TrainConfig(**TINY))
    return upd.model_of(trained, old)


# -- tests -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "starts,n,T",
    [([0], 5, 1), ([1, 4, 7], 9, 3), ([2, 3], 4, 2), ([1, 1, 4], 9, 2), ([0, 0, 0], 3, 3)],
)
def test_start_walk_ids_match_the_naive_reference(starts, n, T):
    ids = start_walk_ids(np.array(starts), n, T)
    assert np.array_equal(ids, naive_start_walk_ids(starts, n, T))
    assert np.array_equal(ids % n, np.tile(starts, T))  # walk j starts at starts[j % S]
    assert np.unique(ids).size == ids.size  # a repeated node: other walks, not the same


def test_change_shares_match_the_naive_reference():
    """Edges added, removed, and a node removed (its edges count for its neighbours),
    against sets and loops."""
    old_edges = ring(list(range(8))) + [(0, 4), (8, 1)]
    new_edges = [e for e in ring(list(range(8))) if e != (2, 3)] + [(0, 5), (9, 6), (9, 7)]
    old_ids, new_ids = list(range(9)), [9, 7, 6, 5, 4, 3, 2, 1, 0]  # 8 gone, 9 new
    old = graph_of(old_edges, old_ids)
    new_pos = {v: i for i, v in enumerate(new_ids)}
    new = graph_of([(new_pos[u], new_pos[v]) for u, v in new_edges], new_ids)
    old = graph_of(old_edges, old_ids)
    from caps2ne_np.graphs.changes import diff

    got = upd.change_shares(diff(old, new), old, new)
    want = naive_change_shares(old_edges, new_edges, set(old_ids), new_ids)
    np.testing.assert_allclose(got, want)


def test_change_starts_repeat_each_node_its_share_of_the_trainings_epochs():
    shares = np.array([0.0, 1.0, 0.5, 0.25, 0.0])
    starts = upd.change_starts(shares, 4, seed=0)  # E s_u = 0, 4, 2, 1, 0: whole numbers
    assert starts.tolist() == [1, 1, 1, 1, 2, 2, 3]
    many = np.full(20000, 0.1)  # E s_u = 0.3: 0 or 1, 1 with probability 0.3
    counts = np.bincount(upd.change_starts(many, 3, seed=1), minlength=many.size)
    assert set(counts.tolist()) <= {0, 1} and abs(counts.mean() - 0.3) < 0.02
    assert np.array_equal(upd.change_starts(many, 3, seed=1), upd.change_starts(many, 3, 1))
    assert upd.change_starts(np.array([0.0, 0.01]), 1, seed=0).tolist() == [1]  # never none


@pytest.mark.parametrize(
    "trained,starts,n,expected", [(8, 10, 100, 1), (8, 30, 100, 3), (8, 100, 100, 8), (3, 0, 10, 1)]
)
def test_the_budget_grows_with_the_change(trained, starts, n, expected):
    assert upd.update_epochs(trained, starts, n) == expected


def test_the_start_carries_every_kept_row_by_id(graphs, model):
    old, new = graphs
    # the model's rows in another order than the graph's: rows go by id, not position
    perm = np.random.default_rng(0).permutation(old.n_nodes)
    shuffled = dict(model, node_ids=[model["node_ids"][i] for i in perm])
    for key in ("O", "bias", "X"):
        shuffled[key] = model[key][perm]
    p = upd.plan(shuffled, old, new, None, upd.UpdateOptions(budget="hops", hops=1))
    params = upd.start_params(shuffled, p, new)
    row_of = {nid: r for r, nid in enumerate(shuffled["node_ids"])}
    kept = np.array([nid in row_of for nid in new.node_ids])
    for j, nid in enumerate(new.node_ids):
        if nid in row_of:
            r = row_of[nid]
            assert np.array_equal(params.O[j], shuffled["O"][r])
            assert np.array_equal(params.X[j], shuffled["X"][r])
            assert params.bias[j] == shuffled["bias"][r]
    assert np.array_equal(params.W, model["W"])
    X_new = np.zeros((new.n_nodes, model["X"].shape[1]), np.float32)
    X_new[kept] = [shuffled["X"][row_of[nid]] for nid in np.array(new.node_ids)[kept]]
    for j in np.flatnonzero(~kept):  # a new node's x: its kept neighbours' mean
        want = naive_neighbour_mean(NEW_EDGES, kept, X_new, j)
        np.testing.assert_allclose(params.X[j], want, rtol=1e-6, atol=1e-7)


def test_the_start_near_the_change_is_the_new_spectrum_in_the_models_space(graphs, model):
    """--spectral init_xo: the rows of the nodes walks start from are the new graph's
    ProNE start times the least-squares map onto the model's rows (a pseudo-inverse,
    the obvious reference); every other kept row is the model's."""
    from caps2ne_np.spectral import prone

    old, new = graphs
    xo = dict(model, config=dict(model["config"], spectral="init_xo"))
    p = upd.plan(xo, old, new, None, upd.UpdateOptions(budget="hops", hops=1))
    params = upd.start_params(xo, p, new)
    start = prone.start(new.indptr, new.indices, new.weights, p.cfg)
    kept = p.rows >= 0
    other = kept & ~np.isin(np.arange(new.n_nodes), p.starts)
    for name, S in (("X", start.X), ("O", start.O)):
        table = np.zeros((new.n_nodes, S.shape[1]))
        table[kept] = xo[name][p.rows[kept]]
        M = np.linalg.pinv(S[kept].astype(np.float64)) @ table[kept]
        got = getattr(params, name)
        np.testing.assert_allclose(got[p.starts], S[p.starts] @ M, rtol=1e-4, atol=1e-5)
        assert np.array_equal(got[other], xo[name][p.rows[other]])


def test_walks_start_only_near_the_change(graphs, model):
    """Ring B is far from the change (at least 6 hops from a node walks start at, walks
    of q = 4 nodes): no walk of the update reaches it, so its trained x keep their
    bits; walks from every node (hops large) move them."""
    old, new = graphs
    far = [new.node_ids.index(str(v)) for v in B_NODES]
    rows = [model["node_ids"].index(str(v)) for v in B_NODES]
    near = upd.update(model, old, new, None, upd.UpdateOptions(budget="hops", hops=1))
    assert not np.isin(far, near.plan.starts).any()
    assert np.array_equal(near.trained.params.X[far], model["X"][rows])
    everywhere = upd.update(model, old, new, None, upd.UpdateOptions(budget="hops", hops=30))
    assert not np.array_equal(everywhere.trained.params.X[far], model["X"][rows])


def test_the_change_budget_keeps_every_kept_row_and_starts_at_the_touched_nodes(graphs, model):
    """--budget change with --spectral init_xo: only the new nodes take the new graph's
    spectral start (mapped onto the model's rows); every kept row is the model's; walks
    start at the touched nodes, a new node E = 1 times (the model trained one epoch)."""
    from caps2ne_np.graphs.changes import diff
    from caps2ne_np.spectral import prone

    old, new = graphs
    xo = dict(model, config=dict(model["config"], spectral="init_xo"))
    p = upd.plan(xo, old, new, None, upd.UpdateOptions(budget="change"))
    change = diff(old, new)
    assert np.isin(p.starts, change.touched).all() and p.cfg.epochs == 1
    assert np.isin(change.added, p.starts).all()
    params = upd.start_params(xo, p, new)
    start = prone.start(new.indptr, new.indices, new.weights, p.cfg)
    kept = p.rows >= 0
    for name, S in (("X", start.X), ("O", start.O)):
        assert np.array_equal(getattr(params, name)[kept], xo[name][p.rows[kept]])
        M = np.linalg.pinv(S[kept].astype(np.float64)) @ xo[name][p.rows[kept]]
        np.testing.assert_allclose(getattr(params, name)[~kept], S[~kept] @ M, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "added, removed, expected",
    [([(2, 7)], [], "change"), ([], [(0, 1)], "change"), ([(2, 7), (3, 9)], [], "change"),
     ([(2, 7), (3, 9), (4, 11)], [], "hops"), ([(2, 7)], [(0, 1)], "hops")],
)  # fmt: skip
def test_auto_takes_the_change_budget_for_a_few_changed_edges(
    graphs, model, added, removed, expected
):
    """--budget auto on a change of edges only: 'change' while at most AUTO_CHANGE_MAX of
    the edges changed (1 of 27 or 28, 2 of 29 edges: 6.9%), 'hops' beyond (2 of 27:
    7.4%, 3 of 30), the same starts and epochs as that budget asked by name; the share
    is the naive one."""
    from caps2ne_np.graphs.changes import diff

    old, _ = graphs
    edges = [e for e in OLD_EDGES if e not in removed] + added
    new = graph_of(edges, list(range(26)))
    share = upd.changed_edge_share(diff(old, new), old, new)
    assert share == pytest.approx(naive_changed_share(OLD_EDGES, edges))
    assert (share <= upd.AUTO_CHANGE_MAX) == (expected == "change")
    auto = upd.plan(model, old, new, None, upd.UpdateOptions(budget="auto"))
    named = upd.plan(model, old, new, None, upd.UpdateOptions(budget=expected))
    assert auto.budget == expected
    assert np.array_equal(auto.starts, named.starts) and auto.cfg.epochs == named.cfg.epochs


def test_auto_takes_the_hops_budget_when_nodes_are_added(graphs, model):
    """--budget auto with two new nodes: 'hops', as named."""
    old, new = graphs
    auto = upd.plan(model, old, new, None, upd.UpdateOptions(budget="auto"))
    named = upd.plan(model, old, new, None, upd.UpdateOptions(budget="hops"))
    assert auto.budget == "hops" and np.array_equal(auto.starts, named.starts)


def test_the_change_budget_trains_its_share_and_resumes(graphs, model, tmp_path):
    """An update with --budget change runs (the same bits on 1 and 2 threads), trains
    T walks per start, and resumes from its checkpoint to the same bits."""
    old, new = graphs
    options = upd.UpdateOptions(budget="change", epochs=2)
    one = upd.update(model, old, new, None, options)
    two = upd.update(model, old, new, None, upd.UpdateOptions(budget="change", epochs=2, threads=2))
    assert np.array_equal(one.written, two.written)
    cfg = model["config"]  # batches of B walks, ceil(T S / B) an epoch, q pairs a walk
    T, q, B = cfg["walks_per_node"], cfg["walk_length"], cfg["batch_size"]
    batches = -(-T * one.plan.starts.size // B)
    assert one.trained.result.history[-1]["pairs"] == batches * B * q
    resumed = interrupted_then_resumed(model, graphs, options, tmp_path, at_step=1, every=1)
    assert np.array_equal(resumed.written, one.written)


@pytest.mark.parametrize("spectral", ["none", "init_xo"])
def test_an_update_gives_the_same_bits_on_1_and_2_threads(graphs, model, spectral):
    old, new = graphs
    model = dict(model, config=dict(model["config"], spectral=spectral))
    one = upd.update(model, old, new, None, upd.UpdateOptions(threads=1, epochs=2))
    two = upd.update(model, old, new, None, upd.UpdateOptions(threads=2, epochs=2))
    assert np.array_equal(one.written, two.written)
    assert np.array_equal(one.trained.params.X, two.trained.params.X)


def test_an_interrupted_update_resumes_where_it_stopped(graphs, model, tmp_path):
    old, new = graphs
    options = upd.UpdateOptions(epochs=2)
    whole = upd.update(model, old, new, None, options)
    resumed = interrupted_then_resumed(model, graphs, options, tmp_path, at_step=3, every=2)
    assert np.array_equal(resumed.written, whole.written)


def test_a_resume_with_other_hops_is_refused(graphs, model, tmp_path):
    old, new = graphs
    folder = tmp_path / "ckpt"
    upd.update(
        model, old, new, None, upd.UpdateOptions(budget="hops", hops=1), checkpoint_dir=folder
    )
    with pytest.raises(InputError, match="not a checkpoint of this update.*--hops"):
        upd.update(
            model, old, new, None, upd.UpdateOptions(budget="hops", hops=2), checkpoint_dir=folder,
            resume_from=folder,
        )  # fmt: skip


def test_an_old_graph_of_other_nodes_is_refused(graphs, model):
    _, new = graphs
    with pytest.raises(InputError, match="not the same ones.*graph the model was trained on"):
        upd.plan(model, new, new)


def test_an_unchanged_graph_is_refused(graphs, model):
    old, _ = graphs
    with pytest.raises(InputError, match="nothing to update"):
        upd.plan(model, old, old)


def test_the_budget_counts_the_trainings_epochs_not_earlier_updates(graphs, model):
    old, new = graphs
    history = [dict(epoch=1)] * 4 + [dict(epoch=1, update=True)] * 3
    p = upd.plan(
        dict(model, history=history), old, new, None, upd.UpdateOptions(budget="hops", hops=40)
    )
    assert p.starts.size == new.n_nodes and p.cfg.epochs == 4  # every node: E = 4


def test_features_for_a_featureless_model_are_refused(graphs, model):
    old, new = graphs
    with pytest.raises(InputError, match="without fixed features.*omit --features"):
        upd.plan(model, old, new, np.ones((new.n_nodes, 4), np.float32))


def test_a_model_of_spectral_features_is_refused(graphs, model):
    old, new = graphs
    spectral = dict(model, config=dict(model["config"], spectral="features"))
    with pytest.raises(InputError, match="--spectral features.*train it again"):
        upd.plan(spectral, old, new)


def test_a_fixed_feature_model_needs_features_of_its_width(graphs, model):
    old, new = graphs
    fixed = dict(model, fixed_features=True, X=None)
    with pytest.raises(InputError, match="fixed features.*--features"):
        upd.plan(fixed, old, new)
    with pytest.raises(InputError, match="d = 4"):
        upd.plan(fixed, old, new, np.ones((new.n_nodes, 3), np.float32))


def test_partial_fit_follows_the_graph_and_keeps_it_for_the_next(graphs):
    from caps2ne_np.estimator.caps2ne import Caps2NE

    old, new = graphs
    params = {k: v for k, v in TINY.items() if k not in ("threads", "seed")}
    model = Caps2NE(**params, n_jobs=1, random_state=3).fit(old)
    with pytest.raises(ValueError, match="old_graph: the graph the model was fitted on"):
        model.partial_fit(new)
    with pytest.raises(ValueError, match="old_graph: not the graph the model was fitted on"):
        model.partial_fit(new, old_graph=new)
    kept = {nid: model.get_embedding()[i] for i, nid in enumerate(model.node_ids_)}
    model.partial_fit(new, old_graph=old)
    assert model.get_embedding().shape == (new.n_nodes, 4)
    assert model.node_ids_ == new.node_ids
    assert model.history_[-1]["update"] and not model.history_[0].get("update")
    far = [str(v) for v in B_NODES]  # propagate none: the far rows are the o_v, whose
    O = dict(zip(model.node_ids_, model.O_))  # rows move only as sampled negatives
    assert all(np.linalg.norm(O[v] - kept[v]) < np.linalg.norm(kept[v]) for v in far)
    newer = graph_of(NEW_EDGES + [(28, 26), (28, 3)], list(range(29)))
    model.partial_fit(newer)  # the graph of the last partial_fit
    assert model.get_embedding().shape == (29, 4)
