"""``--parallel async`` (train.AsyncEngine): threads train their own batches on the
shared tables without locks.  With one thread it is the synchronous run bit for bit
(the same batches, rates and Adam steps); with two it trains as well; what cannot
combine is refused in one line."""

import sys

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from caps2ne_np.errors import InputError
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import AsyncEngine, fit
from test_train import planted_partition

OPTS = dict(
    dim=32,
    feat_dim=32,
    walks_per_node=8,
    epochs=5,
    num_sampled=32,
    lr=5e-3,
    adam="lazy",
    batch_size=8,
    spectral="none",
)


@pytest.fixture(scope="module")
def partition():
    return planted_partition()


def run(adj, parallel, threads, **extra):
    cfg = TrainConfig(**dict(OPTS, threads=threads, **extra))
    return fit(adj.indptr, adj.indices.astype(np.int32), None, cfg, parallel=parallel, **{})


def score(O, labels):
    x_tr, x_te, y_tr, y_te = train_test_split(
        O, labels, test_size=0.5, random_state=0, stratify=labels
    )
    return LogisticRegression(max_iter=2000).fit(x_tr, y_tr).score(x_te, y_te)


def test_one_async_thread_is_the_synchronous_run_bit_for_bit(partition):
    adj, _ = partition
    sync = run(adj, "sync", 1)
    one = run(adj, "async", 1)
    for name in ("O", "W", "X", "bias"):
        np.testing.assert_array_equal(getattr(one.params, name), getattr(sync.params, name))
    assert [h["loss"] for h in one.history] == [h["loss"] for h in sync.history]


def test_one_async_thread_with_the_skipgram_term_is_the_synchronous_run(partition):
    adj, _ = partition
    sync = run(adj, "sync", 1, skipgram_weight=1.0, epochs=2)
    one = run(adj, "async", 1, skipgram_weight=1.0, epochs=2)
    np.testing.assert_array_equal(one.params.O, sync.params.O)
    assert one.history[-1]["loss_skipgram"] == sync.history[-1]["loss_skipgram"]


def test_two_async_threads_train_as_well(partition, monkeypatch):
    adj, labels = partition
    seen = set()
    real = AsyncEngine.train

    def spy(self, epoch, b, step, rates):
        import threading

        out = real(self, epoch, b, step, rates)
        seen.add(threading.active_count())
        return out

    monkeypatch.setattr(AsyncEngine, "train", spy)
    switch = sys.getswitchinterval()
    two = run(adj, "async", 2)
    assert sys.getswitchinterval() == switch  # the GIL's switch interval restored
    assert max(seen) >= 2  # the pool's thread ran beside this one
    losses = [h["loss"] for h in two.history]
    assert all(np.isfinite(losses)) and losses[-1] < 0.85 * losses[0]
    # the same number of batches and pairs per epoch as the synchronous run
    sync = run(adj, "sync", 2)
    assert [h["pairs"] for h in two.history] == [h["pairs"] for h in sync.history]
    assert score(two.params.O, labels) >= 0.95


def test_async_checkpoints_and_resumes(partition, tmp_path):
    adj, labels = partition

    class Interrupt(Exception):
        pass

    def kill(epoch, batch, step):
        if epoch == 2:
            raise Interrupt

    cfg = TrainConfig(**dict(OPTS, threads=2))
    args = (adj.indptr, adj.indices.astype(np.int32), None, cfg)
    with pytest.raises(Interrupt):
        fit(*args, parallel="async", checkpoint_dir=tmp_path, step_callback=kill)
    resumed = fit(*args, parallel="async", checkpoint_dir=tmp_path, resume_from=tmp_path)
    assert len(resumed.history) == OPTS["epochs"]
    assert score(resumed.params.O, labels) >= 0.95
    # the checkpoint records the mode: a resume in the other is refused (only
    # --epochs and --threads may change), either way
    with pytest.raises(InputError, match=r"--parallel async \(now sync\)") as info:
        fit(*args, parallel="sync", resume_from=tmp_path)
    assert str(tmp_path) in str(info.value)
    sync_dir = tmp_path / "sync"
    one_epoch = TrainConfig(**dict(OPTS, epochs=1, threads=2))
    fit(*args[:3], one_epoch, parallel="sync", checkpoint_dir=sync_dir)
    with pytest.raises(InputError, match=r"--parallel sync \(now async\)"):
        fit(*args, parallel="async", resume_from=sync_dir)
    resumed_sync = fit(*args, parallel="sync", resume_from=sync_dir)  # the same mode: fine
    assert len(resumed_sync.history) == OPTS["epochs"]


def test_what_cannot_combine_is_refused_in_one_line(partition):
    adj, _ = partition
    with pytest.raises(InputError, match="--parallel: must be one of"):
        run(adj, "hogwild", 2)
    with pytest.raises(InputError, match="engine='ray'"):
        Caps2NE(engine="ray", parallel="async").fit(adj)


def test_cli_async_and_its_refusal_with_ray(tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli as main

    adj, _ = planted_partition(blocks=2, size=30, seed=1)
    rows, cols = adj.nonzero()
    edges = tmp_path / "g.txt"
    edges.write_text("".join(f"{u} {v}\n" for u, v in zip(rows, cols) if u < v))
    out = tmp_path / "g.emb"
    args = ["train", "--graph", str(edges), "--epochs", "1", "--dim", "8", "--feat-dim", "8"]
    r = CliRunner().invoke(main, args + ["--out", str(out), "--parallel", "async", "-q"])
    assert r.exit_code == 0, r.output
    assert out.read_text().splitlines()[0] == "60 8"
    r = CliRunner().invoke(
        main, args + ["--out", str(out), "--parallel", "async", "--engine", "ray", "--overwrite"]
    )
    assert r.exit_code != 0 and "--parallel async" in r.output
    assert "Traceback" not in r.output


def test_every_async_update_uses_its_own_steps_t_and_rate(partition, monkeypatch):
    """Each thread's Adam step uses the t and rate of its batch's global step, every step
    once (threads sharing one optimizer object instead of a copy each
    failed no test -- one thread is bit for bit, two only scored -- though one thread's
    t then overwrites another's between its gradient and its update)."""
    import threading

    from caps2ne_np.training.options.rates import learning_rate
    from caps2ne_np.training.step.fused import FusedStep
    from caps2ne_np.walks.walks import batches_per_epoch

    adj, _ = partition
    used, threads = [], set()
    real = FusedStep.train

    def spy(self, epoch, batches, steps, rates, parallel=True):
        # the compiled chunk's Adam takes each batch's step t and rate from these
        used.extend(zip(steps, rates))
        if len(steps):
            threads.add(threading.get_ident())
        return real(self, epoch, batches, steps, rates, parallel)

    monkeypatch.setattr(FusedStep, "train", spy)
    result = run(adj, "async", 2, epochs=2)
    cfg = result.config
    total = cfg.epochs * batches_per_epoch(adj.shape[0] * cfg.walks_per_node, cfg.batch_size)
    assert len(threads) == 2  # both threads trained
    assert sorted(t for t, _ in used) == list(range(total))
    for t, lr in used:
        assert lr == learning_rate(cfg, cfg.lr, t, total), t
