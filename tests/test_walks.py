"""Walks, (context, target) pairs, batches and the random streams behind them."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import naive_walks as naive
from caps2ne_np.kernels import rng
from caps2ne_np.walks.walk_args import cumulative_weights
from caps2ne_np.walks.walks import (
    batch_walk_ids,
    batches_per_epoch,
    epoch_permutation,
    node_counts,
    target_positions,
    training_pairs,
    uniform_walks,
)

# A tiny directed graph: 0 -> {1, 2, 3}, 1 -> {0}, 2 -> {0, 3}, 3 -> {} (a sink), 4 isolated.
INDPTR = np.array([0, 3, 4, 6, 6, 6], dtype=np.int64)
INDICES = np.array([1, 2, 3, 0, 0, 3], dtype=np.int32)
WEIGHTS = np.array([1.0, 2.0, 5.0, 1.5, 0.25, 4.0], dtype=np.float32)
N = 5


@pytest.fixture
def restore_threads():
    saved = numba.get_num_threads()
    yield
    numba.set_num_threads(saved)


def edge_set():
    return {(v, int(u)) for v in range(N) for u in INDICES[INDPTR[v] : INDPTR[v + 1]]}


# --------------------------------------------------------------------------- rng


def test_rng_kernels_equal_their_python_bodies():
    with rng.quiet_wraparound():  # uint64 wrap-around is intended (rng docstring)
        state = np.uint64(rng.stream(7, 11))  # compiled uint64 results come back as Python ints
        py_state = naive.pyrng.stream(7, 11)
        assert state == int(py_state)
        assert rng.stream3(1, 2, 3, 4) == int(naive.pyrng.stream3(1, 2, 3, 4))
        for n in (1, 3, 1000):
            assert rng.rand_below(state, n) == tuple(
                int(x) for x in naive.pyrng.rand_below(py_state, n)
            )
        assert rng.rand_uniform(state)[1] == naive.pyrng.rand_uniform(py_state)[1]


def test_streams_differ_across_keys_and_seeds():
    with rng.quiet_wraparound():
        starts = {int(rng.stream(s, k)) for s in range(4) for k in range(50)}
        starts |= {int(rng.stream2(0, k, 0)) for k in range(50)}
    assert len(starts) == 4 * 50 + 50


def test_rand_below_is_uniform_and_rand_uniform_in_unit_interval():
    with rng.quiet_wraparound():
        state = naive.pyrng.stream(3, 0)
        draws, us = [], []
        for _ in range(3000):
            state, j = naive.pyrng.rand_below(state, 6)
            state, u = naive.pyrng.rand_uniform(state)
            draws.append(int(j))
            us.append(float(u))
    assert min(draws) >= 0 and max(draws) < 6
    assert stats.chisquare(np.bincount(draws, minlength=6)).pvalue > 1e-3
    assert 0.0 <= min(us) and max(us) < 1.0
    assert stats.kstest(us, "uniform").pvalue > 1e-3


# --------------------------------------------------------------------------- walks


@pytest.mark.parametrize("weighted", [False, True])
def test_walks_equal_naive(weighted):
    weights = WEIGHTS if weighted else None
    fast = uniform_walks(INDPTR, INDICES, weights, 3, 6, seed=5)
    assert fast.dtype == np.int32 and fast.shape == (N * 3, 6)
    np.testing.assert_array_equal(fast, naive.uniform_walks(INDPTR, INDICES, weights, 3, 6, 5))


@pytest.mark.parametrize("weighted", [False, True])
def test_every_step_follows_an_edge_or_stays_at_a_sink(weighted):
    walks = uniform_walks(INDPTR, INDICES, WEIGHTS if weighted else None, 4, 8, seed=1)
    edges = edge_set()
    np.testing.assert_array_equal(walks[:, 0], np.arange(walks.shape[0]) % N)
    for walk in walks:
        for a, b in zip(walk[:-1], walk[1:]):
            sink = INDPTR[a] == INDPTR[a + 1]
            assert (a, b) in edges or (sink and a == b)
    assert np.all(walks[walks[:, 0] == 4] == 4)  # isolated node: its own context
    assert np.all(walks[walks[:, 0] == 3] == 3)


def test_zero_weight_edges_are_never_taken_and_all_zero_rows_are_sinks():
    weights = np.array([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=np.float32)  # 0 -> 2 only; 1, 2 stay
    walks = uniform_walks(INDPTR, INDICES, weights, 20, 4, seed=2)
    from_zero = walks[walks[:, 0] == 0]
    assert np.all(from_zero[:, 1:] == 2)
    assert np.all(walks[walks[:, 0] == 1] == 1)


@pytest.mark.parametrize("weighted", [False, True])
def test_transition_frequencies_match_chi_square(weighted):
    walks = uniform_walks(INDPTR, INDICES, WEIGHTS if weighted else None, 3000, 2, seed=3)
    steps = walks[walks[:, 0] == 0, 1]  # 3000 steps out of node 0 -> {1, 2, 3}
    observed = np.array([np.sum(steps == u) for u in (1, 2, 3)])
    assert observed.sum() == 3000
    p = WEIGHTS[:3] / WEIGHTS[:3].sum() if weighted else np.full(3, 1 / 3)
    assert stats.chisquare(observed, 3000 * p).pvalue > 1e-3


def test_weighted_and_uniform_differ_detectably():
    """The chi-square test above can fail: uniform steps do not fit the weights."""
    walks = uniform_walks(INDPTR, INDICES, None, 3000, 2, seed=3)
    observed = np.bincount(walks[walks[:, 0] == 0, 1], minlength=4)[1:]
    p = WEIGHTS[:3] / WEIGHTS[:3].sum()
    assert stats.chisquare(observed, 3000 * p).pvalue < 1e-6


def test_same_seed_same_walks_different_seed_different_walks():
    a = uniform_walks(INDPTR, INDICES, None, 8, 6, seed=0)
    np.testing.assert_array_equal(a, uniform_walks(INDPTR, INDICES, None, 8, 6, seed=0))
    assert not np.array_equal(a, uniform_walks(INDPTR, INDICES, None, 8, 6, seed=1))


@pytest.mark.parametrize("weighted", [False, True])
def test_walks_identical_on_one_and_two_threads(weighted, restore_threads):
    weights = WEIGHTS if weighted else None
    numba.set_num_threads(1)
    one = uniform_walks(INDPTR, INDICES, weights, 16, 6, seed=9)
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    two = uniform_walks(INDPTR, INDICES, weights, 16, 6, seed=9)
    np.testing.assert_array_equal(one, two)


def test_cumulative_weights_restart_per_row():
    cum = cumulative_weights(INDPTR, WEIGHTS)
    np.testing.assert_allclose(cum, [1.0, 3.0, 8.0, 1.5, 0.25, 4.25])
    assert cum.dtype == np.float64


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(walks_per_node=0, walk_length=5), "walks_per_node"),
        (dict(walks_per_node=2, walk_length=1), "walk_length"),
        (dict(walks_per_node=2, walk_length=5.0), "walk_length"),
        (dict(walks_per_node=2, walk_length=5, seed=-1), "seed"),
        (dict(walks_per_node=2, walk_length=5, weights=-WEIGHTS), "weights"),
        (dict(walks_per_node=2, walk_length=5, weights=WEIGHTS[:3]), "weights"),
        (dict(walks_per_node=2, walk_length=5, indices=INDICES + 5), "indices"),
    ],
)
def test_uniform_walks_rejects_bad_arguments_by_name(kwargs, name):
    args = dict(indptr=INDPTR, indices=INDICES, weights=None, seed=0) | kwargs
    with pytest.raises(ValueError, match=name):
        uniform_walks(**args)


# --------------------------------------------------------------------------- pairs


@pytest.fixture
def walks():
    return uniform_walks(INDPTR, INDICES, None, 4, 5, seed=4)


@pytest.mark.parametrize("spec", ["all", [3], [0, 2, 4], [4, 1]])
def test_pairs_equal_naive(walks, spec):
    ids = np.array([0, 7, 7, 19, 3], dtype=np.int64)
    ctx, tgt = training_pairs(walks, ids, spec)
    positions = list(range(5)) if spec == "all" else spec
    ref_ctx, ref_tgt = naive.make_pairs(walks, ids, positions)
    assert ctx.dtype == np.int32 and tgt.dtype == np.int32
    np.testing.assert_array_equal(ctx, ref_ctx)
    np.testing.assert_array_equal(tgt, ref_tgt)


def test_random_pairs_equal_naive(walks):
    ids = np.array([1, 2, 2, 18, 5, 0], dtype=np.int64)
    ctx, tgt = training_pairs(walks, ids, "random", seed=3, key=12)
    ref_ctx, ref_tgt = naive.make_random_pairs(walks, ids, 3, 12)
    np.testing.assert_array_equal(ctx, ref_ctx)
    np.testing.assert_array_equal(tgt, ref_tgt)


def test_context_drops_exactly_the_target_slot_in_order():
    distinct = np.arange(12, dtype=np.int32).reshape(2, 6)  # every slot a different node
    ctx, tgt = training_pairs(distinct, [1, 0], "all")
    for p in range(12):
        b, j = divmod(p, 6)
        w = [1, 0][b]
        assert tgt[p] == distinct[w, j]
        np.testing.assert_array_equal(ctx[p], np.delete(distinct[w], j))


def test_random_positions_cover_all_slots():
    distinct = np.arange(5 * 40, dtype=np.int32).reshape(40, 5)
    _, tgt = training_pairs(distinct, np.arange(40), "random", seed=0, key=1)
    assert set(tgt % 5) == set(range(5))


def test_pairs_identical_on_one_and_two_threads(walks, restore_threads):
    ids = batch_walk_ids(walks.shape[0], 64, seed=0, epoch=1, step=2)
    results = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        results.append(
            training_pairs(walks, ids, "all") + training_pairs(walks, ids, "random", seed=1, key=2)
        )
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_target_positions_parsing():
    np.testing.assert_array_equal(target_positions("all", 4), [0, 1, 2, 3])
    assert target_positions("random", 4) is None
    np.testing.assert_array_equal(target_positions((3, 4, 5, 6), 10), [3, 4, 5, 6])
    for bad in ([10], [1, 1], [], "some", [0.5]):
        with pytest.raises(ValueError, match="target_positions"):
            target_positions(bad, 10)


# --------------------------------------------------------------------------- batches and epochs


def test_batch_ids_in_range_deterministic_and_equal_naive():
    ids = batch_walk_ids(37, 50, seed=2, epoch=3, step=4)
    assert ids.dtype == np.int64 and ids.shape == (50,)
    assert ids.min() >= 0 and ids.max() < 37
    np.testing.assert_array_equal(ids, batch_walk_ids(37, 50, seed=2, epoch=3, step=4))
    np.testing.assert_array_equal(ids, naive.batch_walk_ids(37, 50, 2, 3, 4))
    assert not np.array_equal(ids, batch_walk_ids(37, 50, seed=2, epoch=3, step=5))
    assert not np.array_equal(ids, batch_walk_ids(37, 50, seed=2, epoch=4, step=4))


def test_batch_ids_are_drawn_with_replacement_uniformly():
    ids = np.concatenate([batch_walk_ids(10, 100, seed=0, epoch=0, step=s) for s in range(30)])
    assert stats.chisquare(np.bincount(ids, minlength=10)).pvalue > 1e-3


def test_permutation_is_a_permutation_and_equals_naive():
    perm = epoch_permutation(23, seed=1, epoch=2)
    np.testing.assert_array_equal(np.sort(perm), np.arange(23))
    np.testing.assert_array_equal(perm, naive.epoch_permutation(23, 1, 2))
    assert not np.array_equal(perm, epoch_permutation(23, seed=1, epoch=3))
    np.testing.assert_array_equal(epoch_permutation(1, 0, 0), [0])


def test_batches_per_epoch_is_ceil_and_node_counts_count():
    assert batches_per_epoch(10, 3) == 4 and batches_per_epoch(9, 3) == 3
    walks = np.array([[0, 1, 1], [2, 1, 0]], dtype=np.int32)
    np.testing.assert_array_equal(node_counts(walks, 4), [2, 3, 1, 0])
    with pytest.raises(ValueError, match="batch_size"):
        batch_walk_ids(10, 0, 0, 0, 0)


def test_walk_source_generates_exactly_the_stored_walks_and_chunk_invariant_counts():
    from caps2ne_np.walks.walks import WalkSource, node_counts, uniform_walks

    rng = np.random.default_rng(0)
    upper = np.triu(rng.random((25, 25)) < 0.2, 1)
    adj = sp.csr_matrix(upper | upper.T, dtype=np.float32)
    adj.data = rng.uniform(0.5, 2.0, adj.nnz).astype(np.float32)
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int32)
    for weights in (None, adj.data):
        stored = uniform_walks(indptr, indices, weights, 3, 7, 11)
        src = WalkSource(indptr, indices, weights, 3, 7, 11)
        ids = rng.integers(0, src.n_walks, 40)
        np.testing.assert_array_equal(src.walks(ids), stored[ids])
        full = node_counts(stored, 25)
        for chunk in (1, 7, 1000):
            np.testing.assert_array_equal(src.node_counts(chunk), full)


# --------------------------------------------------------------------------- the package's names


def _imports_of(path, package_dir):
    """(importing module, imported module, name) of every ``from X import name`` in the
    file at ``path``, X resolved to a dotted module name."""
    import ast

    rel = path.relative_to(package_dir.parent).with_suffix("")
    module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
    here = module.split(".") if rel.name == "__init__" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                yield module, target, alias.name


def test_no_module_imports_a_private_walks_name_nor_do_the_walks():
    """A name another module imports from walks/ is public, walks/ imports no private name,
    and walks/ re-exports nothing (each name has one import path)."""
    from pathlib import Path

    import caps2ne_np

    package_dir = Path(caps2ne_np.__file__).parent
    private = [
        f"{module} imports {name} from {target}"
        for path in sorted(package_dir.rglob("*.py"))
        for module, target, name in _imports_of(path, package_dir)
        if name.startswith("_")
        and (target.startswith("caps2ne_np.walks") or module.startswith("caps2ne_np.walks"))
    ]
    assert not private
    reexports = [p.name for p in (package_dir / "walks").glob("*.py") if "F401" in p.read_text()]
    assert not reexports
