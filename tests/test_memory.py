"""The up-front memory check of the spectral stages (memory.spectral_memory) against
what the stages allocate: the formula must bound each stage's peak of traced NumPy
memory, by no more than 1.8 times (the formula of the previous layout, with twice the
dense blocks, was 1.98 to 2.45 times the peaks of the structure measure and the
propagations here)."""

import gc
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.spectral import prone as spectral
from caps2ne_np.spectral import propagation, structure
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.options.memory import spectral_memory
from caps2ne_np.training.train import fit
from toy_graphs import ring_of_cliques

N, K = 12000, 48


@pytest.fixture(scope="module")
def graph():
    """A seeded random graph of N nodes, about 10 N edges, symmetric CSR."""
    rng = np.random.default_rng(0)
    u, v = rng.integers(0, N, size=(2, 10 * N))
    A = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(N, N)).tocsr()
    A = spectral.adjacency(A.indptr, A.indices, None, N)
    spectral.matmat(A, np.ones((N, 2)))  # loads the kernel: no compiler objects in the peaks
    return A, A.nnz // 2


def traced_peak(run, warm=False):
    """Peak bytes NumPy and Python allocate during ``run()`` above what was live before.
    ``warm``: run it once untraced first, so that what a first call alone allocates (a
    module imported inside the stage, a library's first scan of the process) is not
    taken for the stage's own memory; a full test session otherwise measured 42.0 MB
    for a propagation that takes 36.9 MB once warm (38.9 MB on its first call)."""
    if warm:
        run()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        run()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def stage(name, A):
    O = np.random.default_rng(1).standard_normal((N, K)).astype(np.float32)
    if name == "start":
        cfg = TrainConfig(spectral="init_xo", dim=K, feat_dim=K, stop="none", propagate="none")
        return cfg, lambda: spectral.start(A.indptr, A.indices, None, cfg), 0
    if name == "structure":
        cfg = TrainConfig(spectral="none", dim=K, feat_dim=K, stop="auto", propagate="none")
        return cfg, lambda: structure.measure(A, 3), 0
    cfg = TrainConfig(spectral="none", dim=K, feat_dim=K, stop="none", propagate=name)
    return cfg, lambda: propagation.apply(A.indptr, A.indices, None, cfg, O), 1


@pytest.mark.parametrize("name", ["start", "structure", "on", "auto"])
def test_the_memory_formula_bounds_each_spectral_stage(graph, name):
    A, edges = graph
    cfg, run, which = stage(name, A)
    measured = traced_peak(run, warm=True)
    formula = spectral_memory(cfg, N, edges)[which]
    assert measured <= formula <= 1.8 * measured, (measured, formula)


def test_the_filter_takes_a_block_of_columns_at_a_time(graph, monkeypatch):
    """The filter's memory does not grow with the columns past FILTER_COLUMNS, and the
    blocks give the bits of the whole (N, d) recurrence."""
    A, _ = graph
    R = np.random.default_rng(2).standard_normal((N, 64))
    peaks, outs = [], []
    for width in (64, 16):
        monkeypatch.setattr(spectral, "FILTER_COLUMNS", width)
        peaks.append(traced_peak(lambda: outs.append(spectral.filtered(A, R, 10, 0.2, 0.5))))
    np.testing.assert_array_equal(outs[1], outs[0])
    block = 8 * N * 64
    assert peaks[1] < peaks[0] - 3 * block, [p / block for p in peaks]


@pytest.mark.parametrize("edges", [5_000_000, 50_000_000])
def test_the_propagation_is_checked_beside_the_tables_without_adams_moments(monkeypatch, edges):
    # a finished run frees Adam's two moments before the propagation: its check counts
    # the trained tables, not the training step's memory (which held the moments too)
    from caps2ne_np import errors
    from caps2ne_np.training.options import memory

    n = 1_000_000
    cfg = TrainConfig(dim=128, feat_dim=128, batch_size=16, walks_per_node=16, num_sampled=256)
    cfg = cfg.__class__(**{**cfg.__dict__, "spectral": "none", "stop": "none", "propagate": "on"})
    step = memory.step_memory(cfg, n, 128)
    tables = 4 * (n * (128 + 1 + 128) + 9 * 128 * 128)  # O, biases, x; W: float32
    after = memory.spectral_memory(cfg, n, edges)[1]
    assert step - tables > 2 * 4 * n * (128 + 1 + 128)  # the moments: in the step only
    need = max(step, tables + after)
    assert need < step + after  # the old sum refused runs that fit
    monkeypatch.setattr(errors, "available_memory", lambda: need)
    memory.check_run_memory(cfg, n, edges, 128)  # fits: no error
    monkeypatch.setattr(errors, "available_memory", lambda: need - 1)
    says = "beside the trained tables" if tables + after > step else "training with"
    with pytest.raises(errors.InputError, match=says):
        memory.check_run_memory(cfg, n, edges, 128)


TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, batch_size=8, threads=1)


def fit_on(A, cfg, **kw):
    return fit(A.indptr, A.indices.astype(np.int32), None, cfg, **kw)


def resolved(A, **options):
    from caps2ne_np.training.options.presets import resolve

    return resolve(TrainConfig(**TINY, **options), A.shape[0], A.nnz)[0]


def test_the_memory_check_counts_the_propagation_after_training(monkeypatch):
    """With room for the training alone, a run that propagates is refused before its
    first step (it would die in the propagation with nothing written); the same run
    with --propagate none trains."""
    from caps2ne_np import errors
    from caps2ne_np.errors import InputError
    from caps2ne_np.training.options.memory import step_memory

    A = ring_of_cliques(n_cliques=50)  # 300 nodes
    plain = dict(epochs=1, spectral="none", propagate="none")
    room = step_memory(resolved(A, **plain), A.shape[0], 8) + 1000
    monkeypatch.setattr(errors, "available_memory", lambda: room)
    steps = []
    with pytest.raises(InputError, match="--propagate on .*--propagate none"):
        fit_on(A, TrainConfig(**TINY, **dict(plain, propagate="on")),
               step_callback=lambda *a: steps.append(a))  # fmt: skip
    assert steps == []
    assert len(fit_on(A, TrainConfig(**TINY, **plain)).history) == 1


def test_the_memory_check_counts_the_spectral_start(monkeypatch):
    from caps2ne_np import errors
    from caps2ne_np.errors import InputError
    from caps2ne_np.training.options.memory import step_memory

    A = ring_of_cliques(n_cliques=50)
    plain = dict(epochs=1, spectral="none", propagate="none")
    room = step_memory(resolved(A, **plain), A.shape[0], 8) + 1000
    monkeypatch.setattr(errors, "available_memory", lambda: room)
    with pytest.raises(InputError, match="spectral stages before training"):
        fit_on(A, TrainConfig(**TINY, **dict(plain, spectral="init")))
