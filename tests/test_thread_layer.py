"""The per-step thread rule (caps2ne_np/kernels/thread_layer.py, StepThreads): more threads
never make a run slower than fewer.  The logic is tested with a fake clock, not timings."""

import numpy as np
import pytest

from caps2ne_np.kernels.thread_layer import StepThreads


class FakeMachine:
    """A clock whose steps take ``cost[n]`` seconds on n threads, and the thread setter."""

    def __init__(self, cost):
        self.cost, self.now, self.n, self.counts = cost, 0.0, None, []

    def clock(self):
        return self.now

    def set_threads(self, n):
        self.n = n
        self.counts.append(n)

    def run(self, chooser, steps):
        for _ in range(steps):
            chooser.begin()
            self.now += self.cost[self.n]
            chooser.end()
        return self.counts


def chooser_on(machine, max_threads, **kw):
    return StepThreads(max_threads, clock=machine.clock, set_threads=machine.set_threads, **kw)


@pytest.mark.parametrize(
    "cost,expected",
    [
        ({1: 1.7e-3, 2: 2.4e-3}, 1),  # B = 16 today: 2 threads slower -> 1
        ({1: 8.3e-3, 2: 7.3e-3}, 2),  # B = 128: 2 threads 1.14x faster -> 2
        ({1: 4.50e-3, 2: 4.45e-3}, 1),  # 1% faster: within the margin -> fewer
    ],
)
def test_two_threads_are_kept_only_when_faster(cost, expected):
    m = FakeMachine(cost)
    ch = chooser_on(m, 2, warmup=3, rounds=4, recheck=100)
    counts = m.run(ch, 50)
    assert counts[:3] == [2, 2, 2]  # warm-up on the full count
    trial = counts[3 : 3 + 8]
    assert sorted(trial) == [1, 1, 1, 1, 2, 2, 2, 2]
    assert set(counts[11:]) == {expected} and ch.chosen == expected
    assert ch.history == [(10, expected)]


def test_many_threads_pick_the_fastest_count_and_never_a_slower_one():
    # 8 cores whose speed-up stops at 4 threads: 8 is no faster than 4 -> 4
    cost = {1: 10.0, 2: 5.5, 4: 3.2, 8: 3.2}
    m = FakeMachine(cost)
    ch = chooser_on(m, 8, warmup=0, rounds=3)
    assert ch.candidates == [1, 2, 4, 8]
    m.run(ch, 40)
    assert ch.chosen == 4
    assert StepThreads.candidate_counts(6) == [1, 2, 4, 6]


def test_the_trial_repeats_and_follows_a_change_of_load():
    m = FakeMachine({1: 2.0, 2: 1.0})
    ch = chooser_on(m, 2, warmup=0, rounds=2, recheck=20)
    m.run(ch, 10)
    assert ch.chosen == 2
    m.cost = {1: 2.0, 2: 3.0}  # other processes now occupy the second core
    m.run(ch, 30)
    assert ch.chosen == 1
    assert [c for _, c in ch.history] == [2, 1]
    assert ch.history[1][0] == 4 + 20 + 3  # first trial: steps 0-3; next 20 steps later


def test_the_median_ignores_one_slow_step():
    times = {1: [1.0, 1.0, 1.0], 2: [0.6, 0.6, 50.0]}
    assert StepThreads.choose(times, 0.03) == 2


def test_one_thread_and_always_parallel_keep_the_full_count(monkeypatch):
    m = FakeMachine({1: 1.0, 2: 5.0})
    assert set(m.run(chooser_on(m, 1, warmup=0), 20)) == {1}
    import numba

    import caps2ne_np.kernels.jit as jit
    from caps2ne_np.model.model_config import ModelConfig
    from caps2ne_np.model.params import init_params
    from caps2ne_np.training.step.optim import Adam
    from caps2ne_np.training.step.python_step import TrainStep

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    old = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        params = init_params(10, 4, 4, 3, np.random.default_rng(0))
        opt = Adam({"O": params.O}, lr=0.1)
        assert TrainStep(params, opt, ModelConfig()).threads is not None
        monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)  # tests force every kernel parallel
        assert TrainStep(params, opt, ModelConfig()).threads is None
    finally:
        numba.set_num_threads(old)


def test_train_step_chooses_threads_and_results_do_not_depend_on_it():
    """TrainStep with the rule on 2 threads gives the same parameters, bit for bit, as
    on 1 thread without it; the rule ran its trial (both counts used)."""
    import numba

    from caps2ne_np.model.model_config import ModelConfig
    from caps2ne_np.model.params import init_params
    from caps2ne_np.training.step.batch import Batch
    from caps2ne_np.training.step.optim import Adam
    from caps2ne_np.training.step.python_step import TrainStep

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 Numba threads")
    n, q, P, S = 40, 5, 12, 10

    def train(threads, adaptive):
        old = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            rng = np.random.default_rng(0)
            params = init_params(n, 8, 6, q - 1, rng)
            opt = Adam({k: getattr(params, k) for k in params.trainable()}, lr=1e-2)
            step = TrainStep(params, opt, ModelConfig(), lazy=True, adaptive_threads=adaptive)
            if step.threads is not None:
                step.threads.warmup, step.threads.rounds = 1, 2
            used = []
            for t in range(12):
                r = np.random.default_rng(t)
                batch = Batch(
                    r.integers(0, n, (P, q - 1)),
                    r.integers(0, n, P),
                    np.sort(r.choice(n, S, replace=False)),
                    np.full(P, 0.5, np.float32),
                    np.full(S, 0.5, np.float32),
                )
                _, grads = step.gradients(batch)
                used.append(numba.get_num_threads())
                step.update(grads)
            return params, used
        finally:
            numba.set_num_threads(old)

    p1, _ = train(1, False)
    p2, used = train(2, True)
    assert {1, 2} <= set(used)
    for name in p1.trainable():
        np.testing.assert_array_equal(getattr(p1, name), getattr(p2, name))


def test_a_step_time_drift_starts_a_new_trial_before_the_recheck():
    # two threads chosen; then another process takes the second core: the steps on 2
    # threads (a worker spinning on a busy core) become 10x slower, and the rule moves
    # to one thread after ``watch`` steps instead of waiting ``recheck`` steps
    m = FakeMachine({1: 2.0, 2: 1.0})
    ch = chooser_on(m, 2, warmup=0, rounds=2, recheck=1000, watch=10, drift=0.5)
    m.run(ch, 30)
    assert ch.history == [(3, 2)]
    m.cost = {1: 2.2, 2: 10.0}
    m.run(ch, 30)
    assert [c for _, c in ch.history] == [2, 1]
    # at most two watch windows (one may straddle the change) and a 4-step trial later
    assert ch.history[1][0] <= 30 + 2 * 10 + 4


def test_steady_steps_do_not_start_a_trial_before_the_recheck():
    m = FakeMachine({1: 2.0, 2: 1.0})
    ch = chooser_on(m, 2, warmup=0, rounds=2, recheck=1000, watch=10, drift=0.5)
    m.run(ch, 30)
    m.cost = {1: 2.0, 2: 1.4}  # 40% slower: within the drift
    m.run(ch, 200)
    assert ch.history == [(3, 2)]


def test_one_far_slower_round_starts_a_new_trial_at_once_with_spike():
    # the compiled step's rounds are long: with ``spike`` one round 3x slower than the
    # trial said is enough to try again (without it, ``watch`` rounds would pass first)
    m = FakeMachine({1: 2.0, 2: 1.0})
    ch = chooser_on(m, 2, warmup=0, rounds=2, recheck=1000, watch=10, spike=3.0)
    m.run(ch, 10)
    assert ch.history == [(3, 2)]
    m.cost = {1: 2.2, 2: 20.0}  # a busy process on the second core
    m.run(ch, 6)
    assert [c for _, c in ch.history] == [2, 1]
    assert ch.history[1][0] == 10 + 4  # one slow round, then the 4-round trial
    ch2 = chooser_on(m, 2, warmup=0, rounds=2, recheck=1000, watch=10, spike=3.0)
    m.cost = {1: 2.0, 2: 1.0}
    m.run(ch2, 10)
    m.cost = {1: 2.0, 2: 2.9}  # 2.9x slower on 2 than the trial said: not a spike
    m.run(ch2, 5)
    assert ch2.history == [(3, 2)]


def test_trials_that_confirm_the_choice_back_off_and_a_change_resets():
    m = FakeMachine({1: 1.0, 2: 5.0})
    ch = chooser_on(m, 2, warmup=0, rounds=1, recheck=10, backoff=4)
    m.run(ch, 2 + 10 + 2 + 20 + 2 + 40 + 2 + 40 + 2)
    # trials end at steps 1, 13, 35, 77, 119: intervals 10, 20, 40, then capped at 40
    assert [s for s, _ in ch.history] == [1, 13, 35, 77, 119]
    assert all(c == 1 for _, c in ch.history)
    m.cost = {1: 1.0, 2: 0.5}
    m.run(ch, 40 + 2 + 10 + 2)
    assert [c for _, c in ch.history][-2:] == [2, 2]
    assert ch.history[-1][0] - ch.history[-2][0] == 10 + 2  # back to ``recheck``
    # without backoff the interval stays at recheck
    m2 = FakeMachine({1: 1.0, 2: 5.0})
    ch2 = chooser_on(m2, 2, warmup=0, rounds=1, recheck=10)
    m2.run(ch2, 50)
    assert [s for s, _ in ch2.history] == [1, 13, 25, 37, 49]


def test_trial_next_says_which_step_is_a_trial_step():
    m = FakeMachine({1: 2.0, 2: 1.0})
    ch = chooser_on(m, 2, warmup=1, rounds=2, recheck=5)
    seen = []
    for _ in range(12):
        predicted = ch.trial_next()
        ch.begin()
        seen.append((predicted, ch.timed))
        m.now += m.cost[m.n]
        ch.end()
    assert all(p == t for p, t in seen)
    assert [t for _, t in seen] == [False] + [True] * 4 + [False] * 5 + [True] * 2


def test_the_compiled_steps_trial_rounds_are_short_and_chunks_follow_the_load():
    # train.LocalEngine._next_round: trial rounds are up to fused.PROBE batches (a trial round
    # may run on the slower count), chunks are sized from the last round that was not
    # a trial, and every round ends at a multiple of checkpoint_every
    from caps2ne_np.training.step import fused
    from caps2ne_np.training.train import LocalEngine

    class Threads:
        next_is_trial = False

        def trial_next(self):
            return self.next_is_trial

    eng = LocalEngine.__new__(LocalEngine)
    eng.threads, eng.width, eng.checkpoint_every = Threads(), 1, 0
    eng._chunk, eng._rounds, eng._n = None, 0, 1
    eng._next_round(1, 0.01)  # the first round: loading (cached kernels, fast)
    assert eng.round_size == fused.PROBE and eng._chunk is None  # (slow: fewer, within
    # the chunk time bound; tests/test_train.py)
    eng._n = fused.PROBE
    eng._next_round(5, fused.PROBE * fused.CHUNK_SECONDS / 10)  # 10 batches a chunk
    assert eng._chunk == 10 and eng.round_size == 10
    eng.threads.next_is_trial = True
    eng._n = 10
    eng._next_round(15, 10 * fused.CHUNK_SECONDS / 20)
    assert eng.round_size == fused.PROBE and eng._chunk == 20
    eng._n = fused.PROBE
    eng._next_round(19, 1000.0, trial=True)  # a trial round on the slow count
    assert eng._chunk == 20  # kept
    eng.threads.next_is_trial = False
    eng._next_round(23, fused.PROBE * fused.CHUNK_SECONDS / 1000, trial=True)
    assert eng.round_size == 20
    eng._n = 20
    eng._next_round(43, 20 * 1000.0)  # a chunk far slower: the next is one batch
    assert eng.round_size == 1
    eng._next_round(44, 1e-9)  # far faster: at most fused.CHUNK
    assert eng.round_size == fused.CHUNK
    eng.checkpoint_every = 50
    eng._next_round(44, 1e-9)
    assert eng.round_size == 6  # ends at step 50
