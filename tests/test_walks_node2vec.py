"""node2vec's second-order walks: return parameter p, in-out q."""

import hashlib

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import naive_walks as naive
from caps2ne_np.kernels.rng import quiet_wraparound
from caps2ne_np.walks.walk_args import walk_graph
from caps2ne_np.walks.walk_steps import NODE2VEC_TRIES, walk_contexts
from caps2ne_np.walks.walks import WalkSource, uniform_walks

# A tiny directed graph: 0 -> {1, 2, 3}, 1 -> {0}, 2 -> {0, 3}, 3 -> {} (a sink), 4 isolated.
INDPTR = np.array([0, 3, 4, 6, 6, 6], dtype=np.int64)
INDICES = np.array([1, 2, 3, 0, 0, 3], dtype=np.int32)
WEIGHTS = np.array([1.0, 2.0, 5.0, 1.5, 0.25, 4.0], dtype=np.float32)

# An undirected graph on 6 nodes where a step from (t, v) has all three kinds of x:
# back to t, a common neighbour of t and v, and a node farther from t.
EDGES = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (3, 4), (4, 5), (2, 5), (1, 1)]


def undirected(weighted, edges=EDGES, n=6):
    src, dst = zip(*(edges + [(b, a) for a, b in edges if a != b]))
    w = np.ones(len(src), dtype=np.float32)
    if weighted:
        w = np.random.default_rng(1).uniform(0.5, 3.0, len(src)).astype(np.float32)
        half = len(edges)  # the same weight both ways
        w[half:] = [w[edges.index((b, a))] for a, b in zip(src[half:], dst[half:])]
    adj = sp.csr_matrix((w, (src, dst)), shape=(n, n))
    adj.sort_indices()
    return adj.indptr.astype(np.int64), adj.indices.astype(np.int32), adj.data


def random_graph(n=30, seed=0):
    r = np.random.default_rng(seed)
    upper = np.triu(r.random((n, n)) < 0.2, 1)
    adj = sp.csr_matrix(upper | upper.T, dtype=np.float32)
    adj.data = r.uniform(0.5, 2.0, adj.nnz).astype(np.float32)
    return adj.indptr.astype(np.int64), adj.indices.astype(np.int32), adj.data


@pytest.fixture
def restore_threads():
    saved = numba.get_num_threads()
    yield
    numba.set_num_threads(saved)


# --------------------------------------------------------------------------- p = q = 1


FIRST_ORDER_DIGEST = "c5d0a7a1a7f6277c4fbab2a3588e344e09e3b17dbb1736bb1118918d4d2d6776"
"""sha256 of the walks and inference contexts below, computed with the code before
node2vec was added (commit 76140ee).  A recorded hash is kept only for these integer
outputs: the walk kernels draw from integer streams (kernels/rng.py) and their only float
arithmetic (the weights' running sums, compared with a uniform draw) is exact IEEE with
fastmath off, so the bits are the same on every CPU -- unlike trained float parameters,
whose bits depend on the BLAS and SIMD kernels a CPU gets."""


@pytest.mark.parametrize("pq", [{}, dict(node2vec_p=1.0, node2vec_q=1)])
def test_p_q_one_gives_todays_walks_bit_for_bit(pq):
    ip, ix, data = random_graph()
    h = hashlib.sha256()
    for w in (None, data):
        h.update(uniform_walks(ip, ix, w, 3, 7, 11, **pq).tobytes())
        h.update(WalkSource(ip, ix, w, 3, 7, 11, **pq).walks(np.arange(0, 90, 7)).tobytes())
    g = walk_graph(ip, ix, data)
    ctx = np.empty((30 * 4, 6), dtype=np.int32)
    nodes, pos = np.arange(30, dtype=np.int64), np.arange(7, dtype=np.int64)
    with quiet_wraparound():
        walk_contexts(g, g, nodes, pos, 5, ctx)
    h.update(ctx.tobytes())
    assert h.hexdigest() == FIRST_ORDER_DIGEST


def test_p_q_not_one_changes_the_walks():
    ip, ix, _ = random_graph()
    first = uniform_walks(ip, ix, None, 3, 7, 11)
    assert not np.array_equal(first, uniform_walks(ip, ix, None, 3, 7, 11, node2vec_p=0.5))
    assert not np.array_equal(first, uniform_walks(ip, ix, None, 3, 7, 11, node2vec_q=2.0))


# --------------------------------------------------------------------------- the naive reference


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("p, q", [(0.5, 2.0), (4.0, 0.25), (1.0, 3.0)])
@pytest.mark.parametrize("graph", ["directed", "undirected", "random"])
def test_node2vec_walks_equal_naive(graph, weighted, p, q):
    if graph == "directed":
        ip, ix, data = INDPTR, INDICES, WEIGHTS
    elif graph == "undirected":
        ip, ix, data = undirected(weighted)
    else:
        ip, ix, data = random_graph(12, seed=3)
    w = data if weighted else None
    fast = uniform_walks(ip, ix, w, 4, 8, 5, node2vec_p=p, node2vec_q=q)
    np.testing.assert_array_equal(fast, naive.node2vec_walks(ip, ix, w, 4, 8, 5, p, q))
    src = WalkSource(ip, ix, w, 4, 8, 5, node2vec_p=p, node2vec_q=q)
    ids = np.array([3, 0, 3, len(fast) - 1], dtype=np.int64)
    np.testing.assert_array_equal(src.walks(ids), fast[ids])


@pytest.mark.parametrize("weighted", [False, True])
def test_second_order_transition_frequencies_match_exact_probabilities(weighted):
    """Every (t, v) -> x frequency of 60,000 walks against P(x | t, v) from the naive
    formula: one chi-square over all (t, v).  The seed is fixed, so the test gives the
    same verdict on every run; it fails for first-order probabilities (next test)."""
    ip, ix, data = undirected(weighted)
    w = data if weighted else None
    p, q = 0.5, 3.0
    walks = uniform_walks(ip, ix, w, 10_000, 3, seed=7, node2vec_p=p, node2vec_q=q)
    chi2 = dof = 0
    chi2_first_order = 0.0
    for t in range(6):
        for v in ix[ip[t] : ip[t + 1]]:
            nxt = walks[(walks[:, 0] == t) & (walks[:, 1] == v), 2]
            exact = naive.node2vec_probs(ip, ix, w, p, q, t, int(v))
            first = naive.node2vec_probs(ip, ix, w, 1.0, 1.0, t, int(v))
            xs = sorted(exact)
            observed = np.array([np.sum(nxt == x) for x in xs])
            assert observed.sum() == nxt.size > 500  # every step lands on a neighbour of v
            expected = nxt.size * np.array([exact[x] for x in xs])
            chi2 += np.sum((observed - expected) ** 2 / expected)
            expected1 = nxt.size * np.array([first[x] for x in xs])
            chi2_first_order += np.sum((observed - expected1) ** 2 / expected1)
            dof += len(xs) - 1
    assert stats.chi2.sf(chi2, dof) > 1e-3
    assert stats.chi2.sf(chi2_first_order, dof) < 1e-12  # the test has the power to fail


def test_return_parameter_and_in_out_parameter_move_the_walk_as_described():
    """Low p: walks return to t often; low q: walks leave t's neighbourhood (DFS-like)."""
    ip, ix, _ = undirected(False)

    def back_rate(p, q):
        walks = uniform_walks(ip, ix, None, 2000, 3, seed=1, node2vec_p=p, node2vec_q=q)
        return np.mean(walks[:, 2] == walks[:, 0])

    assert back_rate(0.1, 1.0) > 2 * back_rate(1.0, 1.0) > 4 * back_rate(10.0, 1.0)


def test_unsorted_rows_are_sorted_first():
    ip, ix, data = random_graph(15, seed=4)
    r = np.random.default_rng(0)
    shuffled_ix, shuffled_w = ix.copy(), data.copy()
    for v in range(15):
        order = ip[v] + r.permutation(ip[v + 1] - ip[v])
        shuffled_ix[ip[v] : ip[v + 1]] = ix[order]
        shuffled_w[ip[v] : ip[v + 1]] = data[order]
    assert not np.array_equal(shuffled_ix, ix)
    for w, sw in ((None, None), (data, shuffled_w)):
        expect = uniform_walks(ip, ix, w, 3, 6, 2, node2vec_p=0.5, node2vec_q=2.0)
        got = uniform_walks(ip, shuffled_ix, sw, 3, 6, 2, node2vec_p=0.5, node2vec_q=2.0)
        np.testing.assert_array_equal(got, expect)
        src = WalkSource(ip, shuffled_ix, sw, 3, 6, 2, node2vec_p=0.5, node2vec_q=2.0)
        np.testing.assert_array_equal(src.walks(np.arange(45)), expect)


def test_sinks_and_isolated_nodes_stay_put():
    walks = uniform_walks(INDPTR, INDICES, None, 20, 6, 3, node2vec_p=0.25, node2vec_q=4.0)
    edges = {(v, int(u)) for v in range(5) for u in INDICES[INDPTR[v] : INDPTR[v + 1]]}
    for walk in walks:
        for a, b in zip(walk[:-1], walk[1:]):
            assert (a, b) in edges or (INDPTR[a] == INDPTR[a + 1] and a == b)
    assert np.all(walks[walks[:, 0] == 4] == 4) and np.all(walks[walks[:, 0] == 3] == 3)
    zero = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)  # 0 -> 2 only; 2 stays
    walks = uniform_walks(INDPTR, INDICES, zero, 5, 4, 3, node2vec_p=0.25, node2vec_q=4.0)
    assert np.all(walks[walks[:, 0] == 0, 1:] == 2)


@pytest.mark.parametrize("weighted", [False, True])
def test_walks_and_contexts_identical_on_one_and_two_threads(weighted, restore_threads):
    ip, ix, data = random_graph(40, seed=2)
    w = data if weighted else None
    g = walk_graph(ip, ix, w, node2vec_p=0.5, node2vec_q=2.0)
    nodes, pos = np.arange(40, dtype=np.int64), np.arange(6, dtype=np.int64)
    results = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        ctx = np.empty((40 * 6, 5), dtype=np.int32)
        with quiet_wraparound():
            walk_contexts(g, g, nodes, pos, 3, ctx)
        src = WalkSource(ip, ix, w, 8, 6, 9, node2vec_p=0.5, node2vec_q=2.0)
        big = np.arange(src.n_walks, dtype=np.int64)  # enough work for the parallel kernel
        results.append(
            (uniform_walks(ip, ix, w, 8, 6, 9, node2vec_p=0.5, node2vec_q=2.0), src.walks(big), ctx)
        )
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("weighted", [False, True])
def test_inference_contexts_equal_naive(weighted):
    ip, ix, data = INDPTR, INDICES, WEIGHTS  # directed: in-edges differ from out-edges
    t = sp.csr_matrix((data, ix, ip), shape=(5, 5)).T.tocsr()
    t.sort_indices()
    in_ip, in_ix, in_w = t.indptr.astype(np.int64), t.indices.astype(np.int32), t.data
    pq = dict(node2vec_p=0.5, node2vec_q=2.0)
    g = walk_graph(ip, ix, data if weighted else None, **pq)
    g_in = walk_graph(in_ip, in_ix, in_w if weighted else None, **pq)
    nodes, pos = np.array([0, 2, 1, 4], dtype=np.int64), np.array([0, 3, 5], dtype=np.int64)
    ctx = np.empty((4 * 5, 5), dtype=np.int32)
    with quiet_wraparound():
        walk_contexts(g, g_in, nodes, pos, 8, ctx)
    ref = naive.node2vec_walk_contexts(
        (ip, ix, data), (in_ip, in_ix, in_w), weighted, 0.5, 2.0, nodes, pos, 8, 6, 5
    )
    np.testing.assert_array_equal(ctx, ref)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), 1e-4, 2e3, "2", True, None])
@pytest.mark.parametrize("name", ["node2vec_p", "node2vec_q"])
def test_bad_p_and_q_are_refused_by_name(name, value):
    with pytest.raises(ValueError, match=name):
        uniform_walks(INDPTR, INDICES, None, 1, 3, 0, **{name: value})
    with pytest.raises(ValueError, match=name):
        WalkSource(INDPTR, INDICES, None, 1, 3, 0, **{name: value})


# --------------------------------------------------------------------------- options and wiring

TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, epochs=1, walk_length=5)


def ring_adj():
    """Two 5-cliques joined by an edge: a CSR adjacency (sorted rows)."""
    block = np.ones((5, 5)) - np.eye(5)
    A = sp.lil_matrix(sp.block_diag([block, block]))
    A[4, 5] = A[5, 4] = 1
    return sp.csr_matrix(A, dtype=np.float32)


def csr_of(adj):
    return adj.indptr.astype(np.int64), adj.indices.astype(np.int32), None


def test_training_walks_follow_the_options():
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    ip, ix, _ = csr_of(ring_adj())
    O = {}
    for pq in ((), (1.0, 1.0), (0.25, 4.0)):
        cfg = TrainConfig(**TINY, **dict(zip(("node2vec_p", "node2vec_q"), pq)))
        O[pq] = fit(ip, ix, None, cfg).params.O
    np.testing.assert_array_equal(O[()], O[(1.0, 1.0)])  # p = q = 1: today's run, bit for bit
    assert not np.array_equal(O[()], O[(0.25, 4.0)])


def test_ray_batch_worker_makes_the_same_node2vec_walks():
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve
    from caps2ne_np.training.ray.worker import BatchWorker
    from caps2ne_np.training.step.batch import walk_seed

    adj = ring_adj()
    ip, ix, _ = csr_of(adj)
    cfg = resolve(TrainConfig(**TINY, node2vec_p=0.5, node2vec_q=2.0), 10, adj.nnz)[0]
    worker = BatchWorker(0, ip, ix, None, cfg, None, 1, None)
    source = worker.stream.source
    ids = np.arange(source.n_walks, dtype=np.int64)
    expect = uniform_walks(ip, ix, None, 2, 5, walk_seed(0, 0), node2vec_p=0.5, node2vec_q=2.0)
    np.testing.assert_array_equal(source.walks(ids), expect)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(node2vec_p=float("nan")), "--node2vec-p: must be a finite number"),
        (dict(node2vec_q=0.0), "--node2vec-q: must be a finite number"),
        (dict(node2vec_q="2"), "--node2vec-q: must be a number, got '2'"),
    ],
)
def test_training_refuses_bad_p_and_q_in_one_line(options, message):
    from caps2ne_np.errors import InputError
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve
    from caps2ne_np.training.options.validation import validate

    with pytest.raises(InputError, match=message) as err:
        validate(resolve(TrainConfig(**TINY, **options), 10, 20)[0], 10)
    assert "\n" not in str(err.value)


def test_cli_options_and_their_range(tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    result = CliRunner().invoke(cli, ["train", "--help"], terminal_width=100)
    assert "--node2vec-p" in result.output and "--node2vec-q" in result.output
    edges = tmp_path / "g.txt"
    edges.write_text("0 1\n1 2\n2 0\n")
    bad = CliRunner().invoke(cli, ["train", "--graph", str(edges), "--node2vec-q", "0"])
    assert bad.exit_code == 2 and "--node2vec-q" in bad.output


def test_model_file_keeps_p_q_and_inference_uses_them(tmp_path, monkeypatch):
    """The estimator stores p and q in the model file; inference grows its contexts with
    them; a model file without them (older) infers with p = q = 1."""
    from caps2ne_np.estimator.caps2ne import Caps2NE
    from caps2ne_np.inference import infer

    adj = ring_adj()
    model = Caps2NE(**TINY, node2vec_p=0.5, node2vec_q=2.0).fit(adj)
    assert model.config_["node2vec_p"] == 0.5 and model.config_["node2vec_q"] == 2.0
    model.save(tmp_path / "m.npz")
    loaded = Caps2NE.load(tmp_path / "m.npz")
    assert (loaded.node2vec_p, loaded.node2vec_q) == (0.5, 2.0)

    seen = []
    real = infer.sample_contexts

    def spy(*args, **kwargs):
        seen.append(args[6] if len(args) > 6 else kwargs.get("node2vec", (1, 1)))
        return real(*args, **kwargs)

    monkeypatch.setattr(infer, "sample_contexts", spy)
    E = loaded.transform(adj, nodes=[0, 7], aggregate="mean")
    assert seen == [(0.5, 2.0)]
    # A model file written before the options existed: its config has no p and q.
    import json

    with np.load(tmp_path / "m.npz") as f:
        arrays = dict(f)
    config = json.loads(str(arrays["config"]))
    arrays["config"] = np.asarray(
        json.dumps({k: v for k, v in config.items() if not k.startswith("node2vec")})
    )
    del arrays["run"]  # (stored in newer files)
    np.savez(tmp_path / "old.npz", **arrays)
    old = Caps2NE.load(tmp_path / "old.npz")
    assert (old.node2vec_p, old.node2vec_q) == (1.0, 1.0)
    E_old = old.transform(adj, nodes=[0, 7], aggregate="mean")
    assert seen[1] == (1.0, 1.0)
    assert not np.array_equal(E, E_old)


def test_sample_contexts_with_p_q_equal_the_kernel_on_sorted_rows():
    """infer.sample_contexts passes p and q to the kernel, on rows it sorts first."""
    from caps2ne_np.graphs.csr import Graph
    from caps2ne_np.inference.infer import sample_contexts

    ip, ix, _ = random_graph(12, seed=5)
    shuffled = ix.copy()
    for v in range(12):
        shuffled[ip[v] : ip[v + 1]] = ix[ip[v] : ip[v + 1]][::-1]
    g = Graph(ip, shuffled, None, [f"n{v}" for v in range(12)], directed=False)
    nodes = np.array([3, 0, 11], dtype=np.int64)
    got = sample_contexts(g, nodes, 6, 4, 9, node2vec=(0.5, 2.0))
    ctx = np.empty_like(got)
    pos, g_sorted = np.arange(6, dtype=np.int64), walk_graph(ip, ix, None, 0.5, 2.0)
    with quiet_wraparound():
        walk_contexts(g_sorted, g_sorted, nodes, pos, 9, ctx)
    np.testing.assert_array_equal(got, ctx)
    assert not np.array_equal(got, sample_contexts(g, nodes, 6, 4, 9))
    with pytest.raises(ValueError, match="node2vec_q"):
        sample_contexts(g, nodes, 6, 4, 9, node2vec=(1.0, -2.0))


# --------------------------------------------------------------------------- the exact fallback


def test_steps_that_proposals_almost_never_pass_are_drawn_exactly():
    """p = 0.001, q = 1000 on a directed graph: from (0, 1) both out-neighbours 2 and 3 are
    'outward' (alpha = 1/q), so a proposal passes one time in 10^6 (such
    runs were 30x slower, and a signal waited ~30 s for the kernel).  After NODE2VEC_TRIES
    proposals the step is drawn exactly: the naive reference's walks bit for bit, and the
    exact probabilities (edge weights 1 and 3)."""
    src, dst = [0, 1, 1, 2, 3], [1, 2, 3, 0, 0]
    adj = sp.csr_matrix((np.array([1, 1, 3, 1, 1], np.float32), (src, dst)), shape=(4, 4))
    ip, ix, w = adj.indptr.astype(np.int64), adj.indices.astype(np.int32), adj.data
    pq = dict(node2vec_p=0.001, node2vec_q=1000.0)
    fast = uniform_walks(ip, ix, w, 300, 6, 5, **pq)
    want = naive.node2vec_walks(ip, ix, w, 300, 6, 5, 0.001, 1000.0)
    np.testing.assert_array_equal(fast, want)
    many = uniform_walks(ip, ix, w, 4000, 3, 9, **pq)
    from_0 = many[many[:, 0] == 0]
    assert np.all(from_0[:, 1] == 1)
    share_3 = float(np.mean(from_0[:, 2] == 3))
    assert abs(share_3 - 0.75) < 5 * np.sqrt(0.75 * 0.25 / len(from_0)), share_3
    assert NODE2VEC_TRIES == naive.NODE2VEC_TRIES
