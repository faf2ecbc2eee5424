"""Training end to end: the loss falls, planted communities separate, the run is
reproducible and thread-count invariant, and the sampled softmax meets the full one;
the first run's compile note and the thread trial's one-thread rounds."""

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from caps2ne_np.errors import InputError
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.model import reference
from caps2ne_np.model.batch_forward import forward
from caps2ne_np.model.core import loss_and_grads
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import Params
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.step.samplers import make_sampler
from caps2ne_np.training.train import fit


def planted_partition(blocks=4, size=50, p_in=0.2, p_out=0.005, seed=0):
    rng = np.random.default_rng(seed)
    n = blocks * size
    labels = np.repeat(np.arange(blocks), size)
    prob = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    adj = sp.csr_matrix((upper | upper.T).astype(np.float32))
    return adj, labels


SMALL = dict(dim=16, feat_dim=16, walks_per_node=4, epochs=3, num_sampled=16, lr=5e-3)


@pytest.fixture(scope="module")
def partition():
    return planted_partition()


def test_loss_falls_and_planted_blocks_separate(partition):
    adj, labels = partition
    model = Caps2NE(
        dim=32,
        feat_dim=32,
        walks_per_node=8,
        epochs=5,
        num_sampled=32,
        lr=5e-3,
        n_jobs=2,
        random_state=0,
    ).fit(adj)
    losses = [h["loss"] for h in model.history_]
    assert losses[-1] < 0.85 * losses[0]
    emb = model.get_embedding()
    assert emb.shape == (200, 32) and emb.dtype == np.float32
    x_tr, x_te, y_tr, y_te = train_test_split(
        emb, labels, test_size=0.5, random_state=0, stratify=labels
    )
    acc = LogisticRegression(max_iter=2000).fit(x_tr, y_tr).score(x_te, y_te)
    assert acc >= 0.95


@pytest.fixture
def always_parallel(monkeypatch):
    """Run every kernel's parallel version, however small the work (tiny test sizes
    would otherwise all take the serial one)."""
    import caps2ne_np.kernels.jit as jit

    monkeypatch.setattr(jit, "PAR_MIN_WORK", 0)


@pytest.mark.parametrize("threshold", ["always_parallel", "default"])
def test_same_seed_same_embeddings_and_thread_count_invariant(partition, request, threshold):
    if threshold == "always_parallel":
        request.getfixturevalue("always_parallel")
    adj, _ = partition
    runs = [
        Caps2NE(**SMALL, n_jobs=t, random_state=3, routing_iters=2).fit(adj).O_ for t in (1, 2, 1)
    ]
    np.testing.assert_array_equal(runs[0], runs[2])
    np.testing.assert_array_equal(runs[0], runs[1])
    other = Caps2NE(**SMALL, n_jobs=1, random_state=4, routing_iters=2).fit(adj).O_
    assert not np.array_equal(runs[0], other)


@pytest.mark.parametrize(
    "options",
    [
        dict(targets=(3, 4, 5, 6), routing_iters=3, grad_mode="stop"),
        dict(
            targets="random",
            sampler="unigram",
            batch_mode="shuffle",
            routing_rule="sabour",
            routing_iters=2,
        ),
        dict(sampler="uniform", routing_scale=1.0),
    ],
)
def test_every_option_trains_and_lowers_the_loss(partition, options):
    adj, _ = partition
    model = Caps2NE(**dict(SMALL, epochs=4), **options, random_state=0).fit(adj)
    losses = [h["loss"] for h in model.history_]
    assert np.all(np.isfinite(model.O_)) and losses[-1] < losses[0]


def test_fixed_features_are_not_trained(partition):
    adj, labels = partition
    X = np.eye(4, dtype=np.float32)[labels] + 0.1
    model = Caps2NE(**SMALL, normalize_features=False, random_state=0).fit(adj, X=X)
    np.testing.assert_array_equal(model.X_, X)
    assert model.W_.shape == (9, 16, 4)
    normalized = Caps2NE(**SMALL, random_state=0).fit(adj, X=X)
    np.testing.assert_allclose(normalized.X_.sum(axis=1), 1.0, rtol=1e-6)


def test_sparse_bag_of_words_features_train_like_dense(partition):
    """Sparse features stay sparse and give the same embeddings as the same
    features given dense (up to float32 summation order)."""
    adj, labels = partition
    rng = np.random.default_rng(0)
    words = (rng.random((200, 300)) < 0.02) | (np.arange(300)[None, :] // 75 == labels[:, None]) & (
        rng.random((200, 300)) < 0.1
    )
    X = sp.csr_matrix(words.astype(np.float32))
    sparse = Caps2NE(**SMALL, random_state=0).fit(adj, X=X)
    dense = Caps2NE(**SMALL, random_state=0).fit(adj, X=X.toarray())
    assert sparse.params_().sparse and not dense.params_().sparse
    np.testing.assert_allclose(sparse.O_, dense.O_, rtol=1e-4, atol=1e-5)
    x_tr, x_te, y_tr, y_te = train_test_split(
        sparse.O_, labels, test_size=0.5, random_state=0, stratify=labels
    )
    assert LogisticRegression(max_iter=2000).fit(x_tr, y_tr).score(x_te, y_te) >= 0.9


def test_sampled_softmax_approaches_full_softmax_as_sampled_set_grows():
    """Uniform sampler: all expected counts are equal, so the log-Q shift cancels; with
    |V'| = N - 1 the pair's softmax misses at most one node of the full one, so the
    sampled loss is within a few percent of the full softmax loss (and never above it),
    and closer than with a small V'."""
    rng = np.random.default_rng(0)
    n, k, d, slots, pairs = 100, 5, 4, 3, 6
    params = Params(
        rng.normal(0, 0.5, (slots, k, d)),
        rng.normal(0, 0.5, (n, k)),
        rng.normal(0, 0.1, n),
        rng.normal(0, 0.8, (n, d)),
    )
    ctx = rng.integers(0, n, (pairs, slots))
    targets = rng.integers(0, n, pairs)
    sampler = make_sampler("uniform", n)
    cfg = ModelConfig()
    full = reference.full_softmax_loss(forward(params, ctx, cfg).e, params.O, params.bias, targets)
    gaps = {}
    for num_sampled in (10, n - 1):
        gap = []
        for key in range(20):
            sampled, tries = sampler.sample(num_sampled, 7, key)
            loss, _ = loss_and_grads(
                params,
                ctx,
                targets,
                sampled,
                sampler.expected_count(targets, tries),
                sampler.expected_count(sampled, tries),
                cfg,
            )
            gap.append(full - loss)
        gaps[num_sampled] = np.mean(np.abs(gap))
        if num_sampled == n - 1:
            assert min(gap) >= -1e-12
    assert gaps[n - 1] < 0.02 * full
    assert gaps[n - 1] < 0.2 * gaps[10]


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(num_sampled=200), "num-sampled"),
        (dict(walk_length=1), "walk-length"),
        (dict(targets=(0, 12)), "target"),
        (dict(threads=0), "threads"),
        (dict(lr=-1.0), "lr"),
    ],
)
def test_out_of_range_options_raise_input_error(partition, bad, match):
    adj, _ = partition
    cfg = TrainConfig(**dict(dict(SMALL, epochs=1), **bad))
    with pytest.raises(InputError, match=match):
        fit(adj.indptr.astype(np.int64), adj.indices.astype(np.int32), None, cfg)


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("every", [0, 7])
def test_run_killed_in_epoch_3_resumes_to_bitwise_identical_embeddings(partition, tmp_path, every):
    """Checkpoints at epoch ends (and every 7 steps); a run interrupted mid-epoch 3
    and resumed from its checkpoint ends exactly where the uninterrupted run does."""
    adj, _ = partition
    opts = dict(SMALL, epochs=4, routing_iters=2)
    full = Caps2NE(**opts, random_state=5).fit(adj)

    def kill(epoch, batch, step):
        if epoch == 2 and batch == 10:
            raise Interrupt

    with pytest.raises(Interrupt):
        Caps2NE(**opts, random_state=5).fit(
            adj, checkpoint_dir=tmp_path, checkpoint_every=every, step_callback=kill
        )
    resumed = Caps2NE(**opts, random_state=5, n_jobs=2).fit(
        adj, resume_from=tmp_path, checkpoint_dir=tmp_path
    )
    np.testing.assert_array_equal(resumed.O_, full.O_)
    np.testing.assert_array_equal(resumed.W_, full.W_)
    assert [h["loss"] for h in resumed.history_] == [h["loss"] for h in full.history_]


def test_resume_refuses_other_options_or_graph(partition, tmp_path):
    adj, _ = partition
    Caps2NE(**dict(SMALL, epochs=1), random_state=5).fit(adj, checkpoint_dir=tmp_path)
    with pytest.raises(InputError, match="dim"):
        Caps2NE(**dict(SMALL, epochs=2, dim=8), random_state=5).fit(adj, resume_from=tmp_path)
    other = adj.copy().tolil()
    other[0, 199] = other[199, 0] = 1.0
    with pytest.raises(InputError, match="graph"):
        Caps2NE(**dict(SMALL, epochs=2), random_state=5).fit(
            sp.csr_matrix(other), resume_from=tmp_path
        )
    with pytest.raises(InputError, match="checkpoint"):
        Caps2NE(**SMALL).fit(adj, resume_from=tmp_path / "nothing")


def test_divergence_stops_with_epoch_and_step_and_keeps_last_good_checkpoint(
    partition, tmp_path, monkeypatch
):
    """A NaN loss in step 12 (injected) stops the run with a message naming the epoch
    and step; the checkpoints written before it hold finite parameters."""
    from caps2ne_np.training.loop import TrainingDiverged
    from caps2ne_np.training.step.fused import FusedStep

    adj, _ = partition
    real = FusedStep.train

    def poisoned(self, epoch, batches, steps, rates, parallel=True):
        out = real(self, epoch, batches, steps, rates, parallel)
        steps = list(steps)
        if 11 in steps:  # the compiled step stops after a non-finite loss
            n = steps.index(11)
            out = out[:n] + [(float("nan"), out[n][1])]
        return out

    monkeypatch.setattr(FusedStep, "train", poisoned)
    with pytest.raises(TrainingDiverged, match=r"epoch 1, step 12.*checkpoint"):
        Caps2NE(**dict(SMALL, epochs=3), random_state=0).fit(
            adj, checkpoint_dir=tmp_path, checkpoint_every=5
        )
    from caps2ne_np.training import checkpoint

    ck = checkpoint.load(tmp_path)
    assert ck["state"]["step"] == 10
    for name in ("param_W", "param_O", "param_X"):
        assert np.all(np.isfinite(ck["arrays"][name]))


def test_lazy_adam_trains_separates_blocks_and_is_thread_invariant(partition, always_parallel):
    adj, labels = partition
    runs = [
        Caps2NE(
            dim=32,
            feat_dim=32,
            walks_per_node=8,
            epochs=5,
            num_sampled=32,
            lr=5e-3,
            adam="lazy",
            n_jobs=t,
            random_state=0,
        ).fit(adj)
        for t in (1, 2)
    ]
    np.testing.assert_array_equal(runs[0].O_, runs[1].O_)
    losses = [h["loss"] for h in runs[0].history_]
    assert losses[-1] < 0.85 * losses[0]
    x_tr, x_te, y_tr, y_te = train_test_split(
        runs[0].O_, labels, test_size=0.5, random_state=0, stratify=labels
    )
    assert LogisticRegression(max_iter=2000).fit(x_tr, y_tr).score(x_te, y_te) >= 0.95


def test_row_sparse_gradients_equal_dense_gradients():
    from caps2ne_np.model.core import loss_and_row_grads
    from caps2ne_np.model.params import slot_major
    from caps2ne_np.model.row_grad import row_matrix

    rng = np.random.default_rng(4)
    params = Params(
        rng.normal(0, 0.5, (3, 5, 4)),
        rng.normal(0, 0.5, (20, 5)),
        rng.normal(0, 0.1, 20),
        rng.normal(0, 0.8, (20, 4)),
    )
    ctx, targets = rng.integers(0, 20, (6, 3)), rng.integers(0, 20, 6)
    sampled = rng.choice(20, 7, replace=False)
    q_t, q_s = rng.uniform(0.2, 1, 6), rng.uniform(0.2, 1, 7)
    cfg = ModelConfig(routing_iters=2)
    loss, g = loss_and_grads(params, ctx, targets, sampled, q_t, q_s, cfg)
    loss2, rg = loss_and_row_grads(params, ctx, targets, sampled, q_t, q_s, cfg)
    assert loss == loss2 and list(rg) == params.trainable()
    d_W = row_matrix(slot_major(g.W))  # row i * d + j: column j of W_i
    np.testing.assert_array_equal(rg["W"].rows, np.arange(d_W.shape[0]))  # every row
    np.testing.assert_array_equal(rg["W"].values, d_W)
    for name in ("O", "bias", "X"):
        dense = getattr(g, name)
        touched = np.flatnonzero(np.abs(dense.reshape(len(dense), -1)).sum(axis=1))
        assert set(touched) <= set(rg[name].rows)
        np.testing.assert_array_equal(rg[name].to_dense(np.empty_like(dense)), dense)


def test_lazy_adam_with_sparse_features_updates_only_touched_columns_of_W(
    partition, always_parallel
):
    adj, labels = partition
    rng = np.random.default_rng(0)
    words = (rng.random((200, 300)) < 0.02) | (np.arange(300)[None, :] // 75 == labels[:, None]) & (
        rng.random((200, 300)) < 0.1
    )
    words[:, 299] = False  # a word no node uses
    X = sp.csr_matrix(words.astype(np.float32))
    runs = [Caps2NE(**SMALL, adam="lazy", n_jobs=t, random_state=0).fit(adj, X=X) for t in (1, 2)]
    np.testing.assert_array_equal(runs[0].W_, runs[1].W_)
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.model.params import init_params

    W0 = init_params(200, 16, 300, 9, np.random.default_rng(derive_seed(0, "init")), features=X).W
    np.testing.assert_array_equal(runs[0].W_[:, :, 299], W0[:, :, 299])  # never touched
    assert not np.array_equal(runs[0].W_[:, :, 0], W0[:, :, 0])
    losses = [h["loss"] for h in runs[0].history_]
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("threshold", ["always_parallel", "default"])
def test_fused_sparse_W_update_trains_bit_for_bit_as_the_separate_kernels(
    partition, request, threshold, monkeypatch
):
    """Sparse fixed features with dense Adam: W's update fused with the next batch's
    sparse product (step.FusedSparseW, that batch's W_i u computed ahead) gives the
    same parameters, bit for bit, as the separate kernels, on 1 and 2 threads."""
    if threshold == "always_parallel":
        request.getfixturevalue("always_parallel")
    import caps2ne_np.training.step.python_step as step_mod

    adj, _ = partition
    feats = sp.random(200, 60, density=0.1, format="csr", random_state=1, dtype=np.float32)
    calls = []
    real = step_mod._adam_W_predict

    def spy(*args):  # counts the fused kernel's calls
        calls.append(real.work(*args))
        return real(*args)

    monkeypatch.setattr(step_mod, "_adam_W_predict", spy)
    import caps2ne_np.model.capsules as capsules

    products = []
    real_product = capsules.predict_sparse

    def product_spy(cols, W_t, u_hat):  # counts the separate sparse products
        products.append(cols.ent_row.shape[0])
        return real_product(cols, W_t, u_hat)

    monkeypatch.setattr(capsules, "predict_sparse", product_spy)

    def run(fused, n_jobs):
        monkeypatch.setattr(step_mod.TrainStep.__init__, "__defaults__", (False, fused))
        return Caps2NE(**dict(SMALL, lr=1e-3, batch_size=64), n_jobs=n_jobs, random_state=0).fit(
            adj, X=feats
        )

    ref = run(False, 1)
    assert not calls
    n_steps = len(products)  # one product per step
    for n_jobs in (1, 2):
        products.clear()
        got = run(True, n_jobs)
        assert len(products) == 3  # only each epoch's first batch
        for name in ("O_", "W_", "bias_"):
            np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))
        assert [h["loss"] for h in got.history_] == [h["loss"] for h in ref.history_]
    assert len(calls) == 2 * n_steps and n_steps >= 3 * 10  # every step fused


def reference_sample(sampler, num_sampled, seed, key):
    """V' and the number of tries, counted from the sampler's plain draw stream: draw
    until ``num_sampled`` distinct nodes have appeared."""
    draws = sampler.draw(64 * num_sampled, seed, key)
    seen = []
    for tries, node in enumerate(draws, start=1):
        if node not in seen:
            seen.append(int(node))
            if len(seen) == num_sampled:
                return np.array(seen), tries
    raise AssertionError("64 draws per sampled node were not enough")


@pytest.mark.parametrize("sampler_name", ["log_uniform", "unigram"])
def test_training_batch_feeds_the_loss_the_expected_counts_of_the_tries(partition, sampler_name):
    """batch.BatchStream's glue, on a real batch of a real graph: its loss equals the
    float64 reference loss with Q(c) = 1 - (1 - P(c))^tries, where tries counts every
    draw (repeats included) until |V'| distinct nodes appeared.  Passing num_sampled
    instead of the tries (a wrong log-Q correction) changes the loss far beyond rtol."""
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.step.batch import BatchStream

    adj, _ = partition
    n, num_sampled, q = adj.shape[0], 40, 6
    cfg = TrainConfig(
        walk_length=q,
        walks_per_node=2,
        batch_size=32,
        num_sampled=num_sampled,
        sampler=sampler_name,
        walks="fixed",
        seed=11,
    )
    stream = BatchStream(adj.indptr.astype(np.int64), adj.indices.astype(np.int64), None, cfg)
    if sampler_name == "unigram":
        stream.set_counts(stream.source.node_counts())
    sampler = stream.sampler
    batch = stream.batch(1, 2, 7)

    sampled, tries = reference_sample(sampler, num_sampled, stream.seed_sample, 7)
    np.testing.assert_array_equal(batch.sampled, sampled)
    assert tries > num_sampled  # repeats were drawn: the two counts differ
    p_t, p_s = sampler.probs(batch.targets), sampler.probs(sampled)
    q_true, q_sampled = 1.0 - (1.0 - p_t) ** tries, 1.0 - (1.0 - p_s) ** tries

    rng = np.random.default_rng(1)
    k, d = 5, 4
    W = rng.normal(0, 0.5, (q - 1, k, d))
    O, bias, X = rng.normal(0, 0.5, (n, k)), rng.normal(0, 0.1, n), rng.normal(0, 0.8, (n, d))
    args = (batch.ctx, batch.targets, batch.sampled, batch.q_true, batch.q_sampled)
    loss, _ = loss_and_grads(Params(W, O, bias, X), *args, ModelConfig())
    ref = reference.loss(
        W, O, bias, X, batch.ctx, batch.targets, sampled, q_true, q_sampled, 1, q - 1.0, "paper"
    )
    assert loss == pytest.approx(ref, rel=1e-9)
    wrong = reference.loss(
        W, O, bias, X, batch.ctx, batch.targets, sampled,
        1.0 - (1.0 - p_t) ** num_sampled, 1.0 - (1.0 - p_s) ** num_sampled, 1, q - 1.0, "paper",
    )  # fmt: skip
    assert abs(wrong - ref) > 1e-5 * abs(ref)  # 10^4 times the tolerance above


def _rewrite_checkpoint_config(directory, edit):
    """Change the config stored in ``directory``'s checkpoint as an older version wrote it."""
    import json

    from caps2ne_np.io.npy import load_npz, save_npz
    from caps2ne_np.training import checkpoint

    path = Path(directory) / checkpoint.LATEST
    arrays = dict(load_npz(path))
    config = json.loads(str(arrays["config"]))
    edit(config)
    arrays["config"] = np.asarray(json.dumps(config))
    save_npz(path, overwrite=True, **arrays)


def test_a_checkpoint_from_before_node2vec_resumes_only_with_p_q_one(partition, tmp_path):
    """A checkpoint without p, q in its config was written by first-order walks: a resume
    with other p, q is refused, not recorded as if the whole run used them."""
    adj, _ = partition
    opts = dict(SMALL, epochs=1)
    Caps2NE(**opts, random_state=5).fit(adj, checkpoint_dir=tmp_path)

    def drop_p_q(config):
        del config["node2vec_p"], config["node2vec_q"]

    _rewrite_checkpoint_config(tmp_path, drop_p_q)
    later = dict(opts, epochs=2)
    with pytest.raises(InputError, match=r"node2vec_p 1 \(now 0\.01\), node2vec_q 1 \(now 50\)"):
        Caps2NE(**later, node2vec_p=0.01, node2vec_q=50, random_state=5).fit(
            adj, resume_from=tmp_path
        )
    resumed = Caps2NE(**later, random_state=5).fit(adj, resume_from=tmp_path)
    assert len(resumed.history_) == 2


def test_a_changed_option_is_shown_with_the_digits_that_differ(partition, tmp_path):
    adj, _ = partition
    Caps2NE(**dict(SMALL, epochs=1), node2vec_p=0.5, random_state=5).fit(
        adj, checkpoint_dir=tmp_path
    )
    with pytest.raises(InputError, match=r"node2vec_p 0\.5 \(now 0\.5000000001\)"):
        Caps2NE(**dict(SMALL, epochs=2), node2vec_p=0.5000000001, random_state=5).fit(
            adj, resume_from=tmp_path
        )


@pytest.mark.parametrize("parallel", ["sync", "async"])
def test_a_parameter_that_turns_nan_with_a_finite_loss_stops_the_run_at_the_epoch_end(
    partition, tmp_path, parallel
):
    """The end-of-epoch check that every parameter is finite (removing it
    failed no test; the tests injected a NaN loss only).  O turns NaN after the last step
    of epoch 2, so no later loss sees it: only that check can stop the run, and the last
    checkpoint stays the finite one of epoch 1."""
    from caps2ne_np.training import checkpoint
    from caps2ne_np.training.loop import TrainingDiverged
    from caps2ne_np.training.train import fit
    from caps2ne_np.walks.walks import batches_per_epoch

    adj, _ = partition
    cfg = TrainConfig(**dict(SMALL, threads=1, batch_size=256))
    n_batches = batches_per_epoch(adj.shape[0] * cfg.walks_per_node, cfg.batch_size)
    live = []

    def keep(epoch, result):
        live[:] = [result]

    def poison(epoch, batch, step):
        if epoch == 1 and batch == n_batches - 1:
            live[0].params.O[...] = np.nan

    args = (adj.indptr.astype(np.int64), adj.indices.astype(np.int32), None, cfg)
    with pytest.raises(TrainingDiverged, match="a parameter became NaN or infinite at epoch 2"):
        fit(*args, epoch_callback=keep, step_callback=poison, checkpoint_dir=tmp_path,
            parallel=parallel)  # fmt: skip
    ck = checkpoint.load(tmp_path)
    assert ck["state"]["epoch"] == 1 and np.all(np.isfinite(ck["arrays"]["param_O"]))


ROOT = Path(__file__).resolve().parents[1]


def _chunk_indexes():
    """The on-disk cache index of each version of the compiled step's chunk kernel."""
    from caps2ne_np.training.step import fused

    return {
        v: v._cache._cache_file._index_path
        for v in (fused._train_chunk.parallel, fused._train_chunk.serial)
    }


def test_no_compile_note_once_the_compiled_step_is_cached(monkeypatch):
    # a fresh clone after its first default run: the chunk kernel is cached, kernels the
    # default path never calls (the skip-gram term's, the Python step's) are not
    import numba

    from caps2ne_np.training import train

    cached = set(_chunk_indexes().values())
    real = os.path.exists
    monkeypatch.setattr(
        os.path, "exists", lambda p: p in cached if str(p).endswith(".nbi") else real(p)
    )
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    assert not train._kernels_cold(fused_run=True)


def test_the_compile_note_when_the_compiled_step_is_not_cached(monkeypatch):
    from caps2ne_np.kernels.jit import Kernel
    from caps2ne_np.training import train
    from caps2ne_np.training.step import fused

    fresh = Kernel(fused._train_chunk.py_func)  # compiled neither here nor on disk
    monkeypatch.setattr(fused, "_train_chunk", fresh)
    indexes = [v._cache._cache_file._index_path for v in (fresh.parallel, fresh.serial)]
    real = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: False if p in indexes else real(p))
    assert train._kernels_cold(fused_run=True)


def test_the_thread_trial_runs_the_parallel_chunk_on_one_thread(monkeypatch):
    # on more than one thread, the trial's one-thread rounds call the chunk kernel's
    # parallel version (on one thread: the same bits), so a first run compiles one
    # version of it, not two
    import numba

    from caps2ne_np.graphs.graph import read_edgelist
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.step import fused
    from caps2ne_np.training.train import fit

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two Numba threads")
    calls = []
    original = fused.FusedStep.train

    def spy(self, *args, parallel=False, **kwargs):
        calls.append((numba.get_num_threads(), parallel))
        return original(self, *args, parallel=parallel, **kwargs)

    monkeypatch.setattr(fused.FusedStep, "train", spy)
    g = read_edgelist(ROOT / "caps2ne_np" / "data" / "cora.edgelist")
    cfg = TrainConfig(dim=8, feat_dim=8, walks_per_node=4, epochs=1, threads=2, stop="none")
    fit(g.indptr, g.indices, g.weights, cfg)
    assert (1, True) in calls  # a trial round on one thread, with the parallel version
    assert all(parallel for _, parallel in calls)


class TrialNext:
    """StepThreads' answer to 'is the next round a trial round?'."""

    def __init__(self, trial):
        self.trial = trial

    def trial_next(self):
        return self.trial


def engine_timing(width=1, trial=False):
    """A LocalEngine's round sizing (``_next_round``) without a graph."""
    from caps2ne_np.training.train import LocalEngine

    engine = object.__new__(LocalEngine)
    engine.width, engine.checkpoint_every = width, 0
    engine._chunk, engine._n, engine._rounds = None, 1, 0
    engine.threads = TrialNext(trial)
    return engine


def next_size(engine, seconds, trial=False):
    engine._next_round(0, seconds, trial)
    engine._n = engine.round_size
    return engine.round_size


@pytest.mark.parametrize("width", [1, 2])
def test_probe_and_trial_rounds_keep_within_the_chunk_time_bound(width):
    """A batch of 1 s (--batch-size 8192 on a large graph): after the first round (one
    batch, 2 s with the kernels loading) the probe round and every thread-trial round
    are one batch per thread, not fused.PROBE (4 s between signals); batches of 10 ms
    still get PROBE batches a round."""
    from caps2ne_np.training.step import fused

    engine = engine_timing(width)
    assert next_size(engine, 2.0) == width  # the probe round: 1 batch, not PROBE
    engine.threads.trial = True
    assert next_size(engine, 1.0 * 1, trial=False) == width  # a trial round follows
    assert next_size(engine, 1.0 * 1, trial=True) == width
    engine.threads.trial = False
    assert next_size(engine, 1.0 * 1, trial=True) == width  # the chunk: 1 batch too
    fast = engine_timing(width, trial=True)
    assert next_size(fast, 2.0) == width  # after the first round: its time a batch
    assert next_size(fast, 0.01 * 1, trial=True) == fused.PROBE * width
    assert next_size(fast, 0.01 * fused.PROBE, trial=True) == fused.PROBE * width


def test_the_compile_note_reads_only_numbas_public_face(monkeypatch, tmp_path):
    """_kernels_cold asks a dispatcher only for its documented ``signatures`` and
    ``py_func`` and looks for the index file where Numba's documentation puts the cache
    (here NUMBA_CACHE_DIR): a stand-in with nothing else is cold until its index is
    there."""
    from types import SimpleNamespace

    import numba

    from caps2ne_np.training import train
    from caps2ne_np.training.step import fused

    py_func = fused._train_chunk.serial.py_func
    stand_in = SimpleNamespace(py_func=py_func, signatures=[])
    monkeypatch.setattr(fused, "_train_chunk", SimpleNamespace(parallel=stand_in, serial=stand_in))
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))
    assert train._kernels_cold(True)
    name = f"fused.{py_func.__qualname__}-{py_func.__code__.co_firstlineno}"
    name += f".py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}.nbi"
    (tmp_path / "step_0123abcd").mkdir()
    (tmp_path / "step_0123abcd" / name).write_bytes(b"")
    assert train.cached_on_disk(py_func)
    assert not train._kernels_cold(True)
