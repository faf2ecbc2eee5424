"""Candidate samplers for the sampled softmax (TensorFlow's unique=True semantics)."""

import numpy as np
import pytest
from scipy import stats

import naive_walks as naive
from caps2ne_np.training.step.samplers import (
    LogUniformSampler,
    UniformSampler,
    UnigramSampler,
    build_alias,
    make_sampler,
)

N = 8
COUNTS = np.array([40, 1, 7, 0, 12, 3, 25, 9], dtype=np.int64)  # node 3 never occurs


def samplers():
    return [UniformSampler(N), LogUniformSampler(N), UnigramSampler(COUNTS)]


@pytest.fixture(params=["uniform", "log_uniform", "unigram"])
def sampler(request):
    return make_sampler(request.param, N, counts=COUNTS)


def test_probs_are_the_documented_distributions():
    ids = np.arange(N)
    np.testing.assert_allclose(UniformSampler(N).probs(ids), np.full(N, 1 / N))
    np.testing.assert_allclose(
        LogUniformSampler(N).probs(ids), np.log((ids + 2) / (ids + 1)) / np.log(N + 1)
    )
    w = COUNTS**0.75
    np.testing.assert_allclose(UnigramSampler(COUNTS).probs(ids), w / w.sum())
    for s in samplers():
        assert s.probs(ids).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("num_sampled", [1, 3, 6])
def test_sample_is_unique_in_range_and_counts_tries(sampler, num_sampled):
    for key in range(5):
        sampled, num_tries = sampler.sample(num_sampled, seed=1, key=key)
        assert sampled.dtype == np.int64 and sampled.shape == (num_sampled,)
        assert len(np.unique(sampled)) == num_sampled
        assert sampled.min() >= 0 and sampled.max() < N
        assert isinstance(num_tries, int) and num_tries >= num_sampled


def test_sample_equals_naive_and_is_deterministic(sampler):
    sampled, num_tries = sampler.sample(5, seed=2, key=7)
    ref, ref_tries = naive.sample(sampler, 5, 2, 7)
    np.testing.assert_array_equal(sampled, ref)
    assert num_tries == ref_tries
    again, again_tries = sampler.sample(5, seed=2, key=7)
    np.testing.assert_array_equal(sampled, again)
    assert num_tries == again_tries
    others = [sampler.sample(5, seed=2, key=k)[0] for k in range(8, 14)]
    assert any(not np.array_equal(sampled, o) for o in others)


def test_sample_is_the_distinct_prefix_of_draw(sampler):
    sampled, num_tries = sampler.sample(4, seed=0, key=3)
    draws = sampler.draw(num_tries, seed=0, key=3)
    _, first = np.unique(draws, return_index=True)
    np.testing.assert_array_equal(sampled, draws[np.sort(first)])
    assert draws[-1] not in draws[:-1]  # the last try found the last new node


def test_draw_frequencies_match_probs(sampler):
    draws = sampler.draw(20000, seed=4, key=0)
    observed = np.bincount(draws, minlength=N)
    p = sampler.probs(np.arange(N))
    support = p > 0
    assert observed[~support].sum() == 0
    assert stats.chisquare(observed[support], 20000 * p[support]).pvalue > 1e-3


def test_chi_square_can_reject_a_wrong_distribution():
    draws = LogUniformSampler(N).draw(20000, seed=4, key=0)
    assert stats.chisquare(np.bincount(draws, minlength=N)).pvalue < 1e-6


def test_expected_count_matches_formula_and_tensorflow_shortcut(sampler):
    ids = np.array([0, 2, 7, 2])
    p = sampler.probs(ids)
    np.testing.assert_allclose(
        sampler.expected_count(ids, 9), naive.expected_count(p, 9), rtol=1e-12
    )
    np.testing.assert_allclose(sampler.expected_count(ids, 5, num_sampled=5), 5 * p)
    np.testing.assert_allclose(
        sampler.expected_count(ids, 9, num_sampled=5), naive.expected_count(p, 9), rtol=1e-12
    )


def test_the_compiled_step_reads_the_samplers_expected_counts(sampler):
    """training/step/fused.py evaluates the same helpers (samplers.node_probability,
    expected_count_of) on the tables ``tables`` hands over: the Python values to float32."""
    from caps2ne_np.training.step.fused_batch import _expected_count

    tables = sampler.tables(seed=5, num_sampled=3)
    assert (tables.seed, tables.num_sampled, tables.n) == (5, 3, N)
    ids = np.array([0, 2, 7])
    compiled = [_expected_count(tables, int(c), 9) for c in ids]
    np.testing.assert_allclose(
        compiled, sampler.expected_count(ids, 9).astype(np.float32), rtol=1e-6
    )


def test_expected_count_is_stable_for_tiny_probabilities():
    s = LogUniformSampler(10**9)
    p = s.probs([10**9 - 1])
    q = s.expected_count([10**9 - 1], 300)
    np.testing.assert_allclose(
        q, 300 * p, rtol=1e-6
    )  # 1 - (1-p)^300 ~ 300 p; the naive form loses digits


@pytest.mark.parametrize("name", ["uniform", "log_uniform", "unigram"])
def test_expected_count_roughly_matches_monte_carlo_inclusion(name):
    """Q(c) averaged over calls vs the frequency with which c is in V'; TF's Q is an
    approximation."""
    n, num_sampled, trials = 20, 4, 1500
    counts = np.arange(1, n + 1) ** 2
    sampler = make_sampler(name, n, counts=counts)
    included = np.zeros(n)
    q = np.zeros(n)
    for key in range(trials):
        sampled, num_tries = sampler.sample(num_sampled, seed=5, key=key)
        included[sampled] += 1
        q += sampler.expected_count(np.arange(n), num_tries)
    np.testing.assert_allclose(included / trials, q / trials, atol=0.05)


def test_alias_table_reproduces_probabilities():
    rng = np.random.default_rng(0)
    for p in (
        np.array([1.0]),
        np.array([0.5, 0.5]),
        np.array([0.0, 0.7, 0.0, 0.3]),
        rng.dirichlet(np.ones(13)),
    ):
        prob = np.empty(len(p), dtype=np.float64)
        alias = np.empty(len(p), dtype=np.int64)
        build_alias(p, prob, alias)
        assert np.all((0 <= prob) & (prob <= 1)) and np.all((0 <= alias) & (alias < len(p)))
        np.testing.assert_allclose(naive.alias_probs(prob, alias), p, atol=1e-12)


@pytest.mark.parametrize("num_sampled", [0, N, N + 1])
def test_sample_rejects_num_sampled_without_room_for_the_target(sampler, num_sampled):
    with pytest.raises(ValueError, match="num_sampled"):
        sampler.sample(num_sampled, seed=0, key=0)


def test_unigram_rejects_more_samples_than_its_support():
    counts = np.where(np.arange(N) == 5, 0, COUNTS)  # nodes 3 and 5 never occur
    with pytest.raises(ValueError, match="num_sampled"):
        UnigramSampler(counts).sample(N - 1, seed=0, key=0)
    sampled, _ = UnigramSampler(counts).sample(N - 2, seed=0, key=0)
    np.testing.assert_array_equal(np.sort(sampled), [0, 1, 2, 4, 6, 7])


def test_make_sampler_validates():
    with pytest.raises(ValueError, match="sampler"):
        make_sampler("zipf", N)
    with pytest.raises(ValueError, match="counts"):
        make_sampler("unigram", N)
    with pytest.raises(ValueError, match="counts"):
        make_sampler("unigram", N, counts=COUNTS[:3])
    with pytest.raises(ValueError, match="counts"):
        UnigramSampler(-COUNTS)
    with pytest.raises(ValueError, match="ids"):
        UniformSampler(N).probs([N])
