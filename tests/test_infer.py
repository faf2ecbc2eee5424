"""Inference for new nodes (Algorithm 3) and the inductive split.

The context sampler is checked draw for draw against a slow reference; the capsule
outputs against caps2ne_np/model/reference.py in float64; then the behaviour: deterministic for a
seed, independent of threads and of the other requested nodes, invariant to
relabelling, a node attached to one community lands next to it, test nodes never
reach training, and the CLI writes what the API returns.
"""

import warnings

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputError, InputWarning
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.evaluation.inductive import inductive_split
from caps2ne_np.graphs.csr import from_edges, from_scipy
from caps2ne_np.inference.infer import capsule_outputs, infer_embeddings, sample_contexts
from caps2ne_np.io.word2vec import read_word2vec
from caps2ne_np.kernels import rng
from caps2ne_np.kernels.rng import TAG_INFER
from caps2ne_np.model import reference
from caps2ne_np.model.features import SparseFeatures
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.walks.walks import uniform_walks
from naive_walks import pyrng

# --------------------------------------------------------------------------- naive reference


def _naive_step(indptr, indices, weights, state, v):
    lo, hi = int(indptr[v]), int(indptr[v + 1])
    if hi > lo and weights is None:
        state, j = pyrng.rand_below(state, hi - lo)
        return state, int(indices[lo + j])
    if hi > lo:
        cum = np.cumsum(np.asarray(weights[lo:hi], dtype=np.float32).astype(np.float64))
        if cum[-1] > 0:
            state, u = pyrng.rand_uniform(state)
            x = u * cum[-1]
            e = [e for e in range(hi - lo) if cum[e] > x][0]
            return state, int(indices[lo + e])
    return state, v


def naive_sample_contexts(graph, nodes, walk_length, samples, seed, positions):
    """Sample z of node v: v at position j = positions[z mod L]; j steps back along
    in-edges, then q-1-j steps forward; the context is the walk without v_j."""
    adj = graph.to_scipy()
    t = adj.T.tocsr()
    t.sort_indices()
    in_w = None if graph.weights is None else t.data
    ctx = np.zeros((len(nodes) * samples, walk_length - 1), dtype=np.int32)
    with rng.quiet_wraparound():
        for a, v in enumerate(nodes):
            for z in range(samples):
                j = positions[z % len(positions)]
                state = pyrng.stream3(seed, TAG_INFER, int(v), z)
                walk = [0] * walk_length
                walk[j] = cur = int(v)
                for step in range(j - 1, -1, -1):
                    state, cur = _naive_step(t.indptr, t.indices, in_w, state, cur)
                    walk[step] = cur
                cur = int(v)
                for step in range(j + 1, walk_length):
                    state, cur = _naive_step(graph.indptr, graph.indices, graph.weights, state, cur)
                    walk[step] = cur
                ctx[a * samples + z] = [walk[s] for s in range(walk_length) if s != j]
    return ctx


# --------------------------------------------------------------------------- fixtures


def planted_partition(seed=0, size=15, p_in=0.5, p_out=0.02):
    """Two communities of ``size`` nodes, ids 'n0'.. ; node 'new' joins community 0 by 3 edges."""
    r = np.random.default_rng(seed)
    n = 2 * size
    src, dst = [], []
    for i in range(n):
        for j in range(i + 1, n):
            if r.random() < (p_in if (i < size) == (j < size) else p_out):
                src.append(i)
                dst.append(j)
    src += [n, n, n]
    dst += [1, 4, 7]
    ids = [f"n{i}" for i in range(n)] + ["new"]
    return from_edges(np.array(src), np.array(dst), None, ids)


def fit_quiet(graph, X=None, **kw):
    opts = dict(
        dim=8, feat_dim=8, walks_per_node=16, epochs=8, num_sampled=12, lr=5e-3, random_state=0
    )
    opts["propagate"] = "none"  # Algorithm 3 itself; propagated models: test_propagation.py
    opts.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return Caps2NE(**opts).fit(graph, X=X)


def fitted(model):
    """The trained state inference/infer.py takes: (params, config, training node ids)."""
    return model.params_(), model.config_, model.node_ids_


@pytest.fixture(scope="module")
def full():
    return planted_partition()


@pytest.fixture(scope="module")
def features(full):
    return np.random.default_rng(1).standard_normal((full.n_nodes, 6)).astype(np.float32)


@pytest.fixture(scope="module")
def featureless_model(full):
    sub, _ = inductive_split(full, ["new"])
    return fit_quiet(sub)


@pytest.fixture(scope="module")
def fixed_model(full, features):
    sub, kept = inductive_split(full, ["new"])
    return fit_quiet(sub, X=features[kept], normalize_features=False)


@pytest.fixture
def restore_threads():
    saved = numba.get_num_threads()
    yield
    numba.set_num_threads(saved)


def small_graph(weighted=False, directed=False):
    r = np.random.default_rng(3)
    ring = np.arange(12)  # every node but 12 has in- and out-edges
    src = np.concatenate([r.integers(0, 12, 30), ring])
    dst = np.concatenate([r.integers(0, 12, 30), (ring + 1) % 12])
    w = r.uniform(0.5, 3.0, src.size) if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        # node 12 is isolated
        return from_edges(src, dst, w, [str(i) for i in range(13)], directed=directed)


# --------------------------------------------------------------------------- the sampler


@pytest.mark.parametrize(
    "weighted,directed", [(False, False), (True, False), (False, True), (True, True)]
)
@pytest.mark.parametrize("positions", [(0, 1, 2, 3, 4), (4, 1)])
def test_contexts_match_naive_reference(weighted, directed, positions):
    g = small_graph(weighted, directed)
    nodes = np.array([0, 5, 12, 3], dtype=np.int64)
    fast = sample_contexts(g, nodes, 5, 7, seed=11, positions=positions)
    slow = naive_sample_contexts(g, nodes, 5, 7, 11, positions)
    np.testing.assert_array_equal(fast, slow)


@pytest.mark.parametrize("directed", [False, True])
def test_every_context_is_a_walk_through_the_node(directed):
    g = small_graph(directed=directed)
    adj = g.to_scipy().tolil()
    q, Z = 6, 12
    nodes = np.arange(12)
    ctx = sample_contexts(g, nodes, q, Z, seed=4)
    for a, v in enumerate(nodes):
        for z in range(Z):
            j = z % q  # positions 'all': z mod q
            walk = list(ctx[a * Z + z, :j]) + [v] + list(ctx[a * Z + z, j:])
            for s, t in zip(walk[:-1], walk[1:]):
                assert adj[s, t] != 0, (v, z, walk)  # each step follows an out-edge


def test_isolated_node_context_is_itself():
    g = small_graph()
    ctx = sample_contexts(g, np.array([12]), 4, 4, seed=0)
    assert np.all(ctx == 12)


# --------------------------------------------------------------------------- the capsule layers


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("iters,rule", [(1, "paper"), (3, "paper"), (2, "sabour")])
def test_capsule_outputs_match_naive(sparse, iters, rule):
    r = np.random.default_rng(7)
    I, k, d, n, P = 4, 5, 6, 9, 11
    W = r.normal(0, 0.5, (I, k, d)).astype(np.float32)
    Xd = r.standard_normal((n, d)).astype(np.float32)
    Xd[Xd < 0.3] = 0.0
    X = SparseFeatures.from_scipy(sp.csr_matrix(Xd)) if sparse else Xd
    ctx = r.integers(0, n, (P, I)).astype(np.int32)
    cfg = ModelConfig(routing_iters=iters, routing_rule=rule)
    e = capsule_outputs(W, X, ctx, cfg, chunk=4)  # chunks of 4 pairs: 4 + 4 + 3
    ref, _ = reference.capsule_output(
        W.astype(np.float64), Xd.astype(np.float64), ctx, iters, float(I), rule
    )
    np.testing.assert_allclose(e, ref, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- behaviour


def test_deterministic_for_a_seed(full, featureless_model):
    a = infer_embeddings(*fitted(featureless_model), full, None, ["new", "n3"], seed=5)[1]
    b = infer_embeddings(*fitted(featureless_model), full, None, ["new", "n3"], seed=5)[1]
    c = infer_embeddings(*fitted(featureless_model), full, None, ["new", "n3"], seed=6)[1]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32 and a.shape == (2, 8)


def test_identical_on_one_and_two_threads(full, fixed_model, features, restore_threads):
    one = infer_embeddings(
        *fitted(fixed_model), full, features, ["new", "n20"], samples=40, threads=1
    )[1]
    two = infer_embeddings(
        *fitted(fixed_model), full, features, ["new", "n20"], samples=40, threads=2
    )[1]
    np.testing.assert_array_equal(one, two)


def test_a_node_does_not_depend_on_the_other_requested_nodes(full, fixed_model, features):
    alone = infer_embeddings(*fitted(fixed_model), full, features, ["new"], samples=30)[1]
    ids, many = infer_embeddings(
        *fitted(fixed_model), full, features, ["n9", "new", "n21"], samples=30
    )
    assert ids == ["n9", "new", "n21"]
    np.testing.assert_array_equal(alone[0], many[1])


def test_scipy_adjacency_and_indices_as_input(full, fixed_model, features):
    """A scipy adjacency is read as Caps2NE.fit reads it; integer nodes are graph indices."""
    new = int(full.index_of("new")[0])
    # 'mean': the ids of a scipy adjacency ('0', '1', ...) are not the model's, so no
    # calibration can be fitted on it (tests/test_infer_aggregate.py)
    ids, a = infer_embeddings(
        *fitted(fixed_model), full.to_scipy(), features, [new, 3], samples=12, aggregate="mean"
    )
    assert ids == [str(new), "3"]
    b = infer_embeddings(
        *fitted(fixed_model), full, features, ["new", "n3"], samples=12, aggregate="mean"
    )[1]
    np.testing.assert_array_equal(a, b)


def test_samples_average_the_capsule_outputs(full, fixed_model, features):
    """E = (1/Z) sum_z e_z over the contexts sample_contexts draws (Algorithm 3)."""
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.model.features import prepare_features

    E = infer_embeddings(
        *fitted(fixed_model), full, features, ["new"], samples=13, seed=2, aggregate="mean"
    )[1]
    ctx = sample_contexts(full, full.index_of("new"), 10, 13, derive_seed(2, "infer"))
    X = prepare_features(features, full.n_nodes, normalize=False)
    e = capsule_outputs(fixed_model.W_, X, ctx, ModelConfig())
    np.testing.assert_allclose(E[0], e.mean(axis=0), rtol=1e-6, atol=1e-7)


def _relabelled(graph, perm, names):
    """The same graph with node i renamed names[i] and stored at index perm[i]."""
    adj = sp.triu(graph.to_scipy()).tocoo()  # each undirected edge once
    inv_ids = [None] * graph.n_nodes
    for i, p in enumerate(perm):
        inv_ids[p] = names[i]
    return from_edges(perm[adj.row], perm[adj.col], None, inv_ids)


def test_renaming_ids_gives_identical_embeddings(full, featureless_model):
    """Rename every id (graph, model, requested nodes), keep the node order: bit for bit."""
    names = [f"v{7 * i % 31}_{i}" for i in range(full.n_nodes)]
    rename = dict(zip(full.node_ids, names))
    renamed_graph = _relabelled(full, np.arange(full.n_nodes), names)
    model = featureless_model
    renamed_model = Caps2NE(**featureless_model.get_params())
    for attr in ("W_", "O_", "bias_", "X_", "fixed_features_", "config_", "history_", "lr_"):
        setattr(renamed_model, attr, getattr(model, attr))
    renamed_model.node_ids_ = [rename[i] for i in model.node_ids_]
    a = infer_embeddings(*fitted(model), full, None, ["new", "n2", "n17"], samples=20)[1]
    ids, b = infer_embeddings(
        *fitted(renamed_model),
        renamed_graph,
        None,
        [rename["new"], rename["n2"], rename["n17"]],
        samples=20,
    )
    assert ids == [rename["new"], rename["n2"], rename["n17"]]
    np.testing.assert_array_equal(a, b)


def test_permuting_node_order_gives_the_same_embedding_in_distribution(full, fixed_model, features):
    """Renumbering the graph changes which walks are drawn but not their distribution:
    with many contexts the two averages agree to within the sampling error."""
    perm = np.random.default_rng(9).permutation(full.n_nodes)
    names = [f"m{i}" for i in range(full.n_nodes)]
    g2 = _relabelled(full, perm, names)
    X2 = np.empty_like(features)
    X2[perm] = features
    new2 = names[full.index_of("new")[0]]
    Z = 10000  # max |a - b| ~ 0.005 here
    a = infer_embeddings(
        *fitted(fixed_model), full, features, ["new"], samples=Z, aggregate="mean"
    )[1][0]
    b = infer_embeddings(*fitted(fixed_model), g2, X2, [new2], samples=Z, aggregate="mean")[1][0]
    assert not np.array_equal(a, b)  # different walks were drawn...
    np.testing.assert_allclose(a, b, atol=0.02)  # ...from the same distribution
    assert np.linalg.norm(a) > 0.1  # so the tolerance is meaningful


@pytest.mark.parametrize("kind", ["featureless", "fixed"])
def test_new_node_lands_next_to_its_community(kind, full, featureless_model, fixed_model, features):
    model, X = (featureless_model, None) if kind == "featureless" else (fixed_model, features)
    old = [f"n{i}" for i in range(30)]
    ids, E = infer_embeddings(*fitted(model), full, X, ["new"] + old, samples=50)
    e_new, E_old = E[0], E[1:]
    cos = E_old @ e_new / (np.linalg.norm(E_old, axis=1) * np.linalg.norm(e_new))
    assert np.argmax(cos) < 15  # nearest old node: community 0
    assert cos[:15].mean() > cos[15:].mean() + 0.5
    # and it predicts community-0 targets: e . o_v is larger on community 0
    dots = model.O_ @ e_new
    assert dots[:15].mean() > dots[15:].mean()


# --------------------------------------------------------------------------- isolated / featureless


def _with_isolated(full):
    adj = full.to_scipy()
    adj = sp.block_diag([adj, sp.csr_matrix((1, 1))]).tocsr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return from_scipy(adj, full.node_ids + ["alone"])


def test_isolated_node_error_or_own_features(full, fixed_model, features):
    g = _with_isolated(full)
    X = np.vstack([features, np.full((1, features.shape[1]), 0.5, dtype=np.float32)])
    with pytest.raises(InputError, match="'alone' has no edges"):
        infer_embeddings(*fitted(fixed_model), g, X, ["alone"], isolated="error")
    with pytest.warns(InputWarning, match="without edges"):
        E = infer_embeddings(
            *fitted(fixed_model), g, X, ["alone"], isolated="self", aggregate="mean"
        )[1]
    ctx = np.full((1, 9), g.n_nodes - 1, dtype=np.int32)  # the node itself in every slot
    e = capsule_outputs(fixed_model.W_, X, ctx, ModelConfig())
    np.testing.assert_allclose(E, e, rtol=1e-6)
    assert np.linalg.norm(E) > 0


def test_isolated_node_of_featureless_model_is_an_error_not_a_zero_vector(full, featureless_model):
    g = _with_isolated(full)
    with pytest.raises(InputError, match="zero embedding"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            infer_embeddings(*fitted(featureless_model), g, None, ["alone"])


def test_zero_feature_contexts_are_an_error(full, fixed_model, features):
    X = features.copy()
    X[:] = 0.0
    with pytest.raises(InputError, match="all-zero feature row"):
        infer_embeddings(*fitted(fixed_model), full, X, ["new"])


def test_featureless_model_masks_unknown_nodes(full, featureless_model):
    """A slot holding a node the model never saw contributes u = 0: the same e as an x of zeros."""
    from caps2ne_np.inference.infer import model_inputs

    W, X, cfg, known = model_inputs(*fitted(featureless_model), full, None)
    new = full.index_of("new")[0]
    assert not known[new] and known.sum() == 30
    assert np.all(X[new] == 0)
    np.testing.assert_array_equal(
        X[full.index_of("n4")[0]], featureless_model.X_[featureless_model.node_ids_.index("n4")]
    )


@pytest.mark.parametrize(
    "case,match",
    [
        ("featureless+features", "without fixed features"),
        ("fixed-no-features", "does not store"),
        ("fixed-wrong-d", "d = 3"),
        ("unknown-node", "not in the graph"),
        ("repeated-node", "listed twice"),
    ],
)
def test_clear_errors(case, match, full, featureless_model, fixed_model, features):
    with pytest.raises(InputError, match=match):
        if case == "featureless+features":
            infer_embeddings(*fitted(featureless_model), full, features, ["new"])
        elif case == "fixed-no-features":
            infer_embeddings(*fitted(fixed_model), full, None, ["new"])
        elif case == "fixed-wrong-d":
            infer_embeddings(*fitted(fixed_model), full, features[:, :3], ["new"])
        elif case == "unknown-node":
            infer_embeddings(*fitted(fixed_model), full, features, ["nope"])
        else:
            infer_embeddings(*fitted(fixed_model), full, features, ["new", "new"])


def test_positions_train_uses_the_models_target_positions(full, features):
    sub, kept = inductive_split(full, ["new"])
    model = fit_quiet(sub, X=features[kept], targets=(3, 4), epochs=1, walks_per_node=2)
    a = infer_embeddings(*fitted(model), full, features, ["new"], samples=6, positions="train")[1]
    b = infer_embeddings(*fitted(model), full, features, ["new"], samples=6, positions=(3, 4))[1]
    c = infer_embeddings(*fitted(model), full, features, ["new"], samples=6)[1]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


# --------------------------------------------------------------------------- inductive split


@pytest.mark.parametrize("weighted,directed", [(False, False), (True, False), (True, True)])
def test_inductive_split_removes_every_edge_and_walk_through_test_nodes(weighted, directed):
    g = small_graph(weighted, directed)
    test = np.array([2, 5, 9])
    with pytest.warns(InputWarning, match="left without edges by removing the test nodes"):
        sub, kept = inductive_split(g, test)  # node 12's only neighbours are test nodes
    np.testing.assert_array_equal(kept, np.setdiff1d(np.arange(g.n_nodes), test))
    assert sub.node_ids == [g.node_ids[i] for i in kept] and sub.directed == directed
    A, S = g.to_scipy().toarray(), sub.to_scipy().toarray()
    # every edge between kept nodes survives with its weight, and nothing else does
    np.testing.assert_array_equal(S, A[np.ix_(kept, kept)])
    touches = np.zeros_like(A, dtype=bool)
    touches[test] = touches[:, test] = True
    assert np.count_nonzero(S) == np.count_nonzero(A[~touches]) > 0
    # no walk on the subgraph ever visits a test node or uses an edge touching one
    walks = kept[uniform_walks(sub.indptr, sub.indices, sub.weights, 20, 8, seed=1)]
    assert not np.isin(walks, test).any()
    s, t = walks[:, :-1], walks[:, 1:]
    sink = np.zeros(g.n_nodes, dtype=bool)
    sink[kept] = np.diff(sub.indptr) == 0  # stays put: no edges left in sub
    assert np.all((A[s, t] > 0) | ((s == t) & sink[s]))


def test_inductive_split_accepts_ids_and_scipy(full):
    sub, kept = inductive_split(full, ["new", "n0"])
    assert "new" not in sub.node_ids and "n0" not in sub.node_ids and sub.n_nodes == 29
    adj_sub, kept2 = inductive_split(full.to_scipy(), full.index_of(["new", "n0"]))
    np.testing.assert_array_equal(kept, kept2)
    assert (adj_sub != sub.to_scipy()).nnz == 0
    with pytest.raises(InputError):
        inductive_split(full, [99])


def test_training_on_the_split_never_sees_test_nodes(full, fixed_model, featureless_model):
    for model in (fixed_model, featureless_model):
        assert "new" not in model.node_ids_
        assert model.O_.shape[0] == full.n_nodes - 1
    assert featureless_model.X_.shape[0] == full.n_nodes - 1


# --------------------------------------------------------------------------- the CLI


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory, full, features, featureless_model, fixed_model):
    d = tmp_path_factory.mktemp("infer")
    adj = full.to_scipy().tocoo()
    lines = [f"{full.node_ids[u]} {full.node_ids[v]}" for u, v in zip(adj.row, adj.col) if u < v]
    (d / "full.txt").write_text("\n".join(lines[::-1]) + "\n")  # another line order
    (d / "nodes.txt").write_text("new\nn3\n")
    order = np.random.default_rng(0).permutation(full.n_nodes)
    np.save(d / "x.npy", features[order])
    (d / "x.ids").write_text("\n".join(full.node_ids[i] for i in order) + "\n")
    featureless_model.save(d / "featureless.npz")
    fixed_model.save(d / "fixed.npz")
    return d


def _invoke(*args):
    return CliRunner().invoke(cli, ["infer", *map(str, args)])


def test_cli_infer_matches_api(cli_files, featureless_model):
    from caps2ne_np.graphs.graph import read_graph

    d = cli_files
    out = d / "new.emb"
    r = _invoke(
        "--model",
        d / "featureless.npz",
        "--graph",
        d / "full.txt",
        "--nodes",
        d / "nodes.txt",
        "--samples",
        10,
        "--seed",
        3,
        "--out",
        out,
    )
    assert r.exit_code == 0, r.output
    ids, E = read_word2vec(out)
    assert ids == ["new", "n3"]
    g = read_graph(d / "full.txt")
    np.testing.assert_array_equal(
        E, infer_embeddings(*fitted(featureless_model), g, None, ids, samples=10, seed=3)[1]
    )


def test_cli_infer_with_features_and_ids(cli_files, fixed_model, features, full):
    from caps2ne_np.graphs.graph import read_graph

    d = cli_files
    out = d / "fixed.emb"
    r = _invoke(
        "--model",
        d / "fixed.npz",
        "--graph",
        d / "full.txt",
        "--features",
        d / "x.npy",
        "--feature-ids",
        d / "x.ids",
        "--nodes",
        d / "nodes.txt",
        "--out",
        out,
        "--threads",
        2,
    )
    assert r.exit_code == 0, r.output
    ids, E = read_word2vec(out)
    g = read_graph(d / "full.txt")
    X = features[full.index_of(g.node_ids)]
    np.testing.assert_array_equal(E, infer_embeddings(*fitted(fixed_model), g, X, ids)[1])


@pytest.mark.parametrize(
    "case,match",
    [
        ("no-features", "does not store"),
        ("unknown", "nodes.bad:2: node 'ghost' is not in"),
        ("exists", "--overwrite"),
    ],
)
def test_cli_infer_errors_are_one_line(cli_files, case, match):
    d = cli_files
    (d / "nodes.bad").write_text("new\nghost\n")
    (d / "taken.emb").write_text("keep\n")
    args = {
        "no-features": [
            "--model",
            d / "fixed.npz",
            "--nodes",
            d / "nodes.txt",
            "--out",
            d / "x1.emb",
        ],
        "unknown": [
            "--model",
            d / "featureless.npz",
            "--nodes",
            d / "nodes.bad",
            "--out",
            d / "x2.emb",
        ],
        "exists": [
            "--model",
            d / "featureless.npz",
            "--nodes",
            d / "nodes.txt",
            "--out",
            d / "taken.emb",
        ],
    }[case]
    r = _invoke(*args, "--graph", d / "full.txt")
    assert r.exit_code == 1
    assert match in r.output and len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output
    assert (d / "taken.emb").read_text() == "keep\n"


def test_cli_infer_through_the_dataset_loader(tmp_path):
    """--dataset: train (API) on the bundled Cora graph without 5 nodes, embed them by CLI."""
    from caps2ne_np.graphs.datasets import load_dataset

    ds = load_dataset("cora-bundled")
    g = from_scipy(ds.adj, ds.node_ids)
    test = ds.splits[0]["test"][:5]
    with pytest.warns(InputWarning, match="left without edges by removing the test nodes"):
        sub, _ = inductive_split(g, test)  # node 913's only neighbour is a test node
    model = fit_quiet(sub, dim=4, feat_dim=4, walks_per_node=1, epochs=1, num_sampled=8)
    model.save(tmp_path / "m.npz")
    ids = [ds.node_ids[i] for i in test]
    (tmp_path / "nodes.txt").write_text("\n".join(ids) + "\n")
    r = _invoke(
        "--model",
        tmp_path / "m.npz",
        "--dataset",
        "cora-bundled",
        "--nodes",
        tmp_path / "nodes.txt",
        "--out",
        tmp_path / "o.emb",
        "--quiet",
    )
    assert r.exit_code == 0, r.output
    got_ids, E = read_word2vec(tmp_path / "o.emb")
    assert got_ids == ids and E.shape == (5, 4)
    np.testing.assert_array_equal(E, infer_embeddings(*fitted(model), g, None, ids)[1])


def test_cli_dataset_choices_are_the_dataset_registry():
    from caps2ne_np.cli import cli as group
    from caps2ne_np.graphs.datasets import NAMES

    for name in ("train", "infer", "evaluate"):
        option = next(p for p in group.commands[name].params if p.name == "dataset")
        assert tuple(option.type.choices) == NAMES, name


def test_estimator_transform_delegates_to_infer_embeddings():
    import scipy.sparse as sp

    from caps2ne_np.estimator.caps2ne import Caps2NE
    from caps2ne_np.inference.infer import infer_embeddings

    rng = np.random.default_rng(0)
    upper = np.triu(rng.random((30, 30)) < 0.2, 1)
    adj = sp.csr_matrix((upper | upper.T).astype(np.float32))
    X = rng.random((30, 6)).astype(np.float32)
    model = Caps2NE(dim=8, walks_per_node=2, epochs=1, num_sampled=8, random_state=1).fit(adj, X=X)
    E = model.transform(adj, X, nodes=[3, 7], random_state=2)
    _, ref = infer_embeddings(*fitted(model), adj, X, [3, 7], seed=2)
    np.testing.assert_array_equal(E, ref)
