"""The training driver (caps2ne_np/training/trainer.py): the one function that both
``caps2ne train`` and ``Caps2NE.fit`` call, which owns the run's bundle (loop.Run),
the freeing of the training state and the propagation; and the run's signature,
spelled once (loop.LoopOptions and loop.Run), which every engine takes."""

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.training import engines, loop, trainer
from caps2ne_np.training.options.config import TrainConfig

ROOT = Path(__file__).resolve().parents[1]
CORA = ROOT / "caps2ne_np" / "data" / "cora.edgelist"
TINY = dict(dim=8, feat_dim=8, walks_per_node=1, epochs=1, num_sampled=8, threads=1)


@pytest.fixture(scope="module")
def cora():
    return read_edgelist(CORA)


@pytest.mark.parametrize("keep_model", [True, False])
def test_the_driver_frees_the_training_state_and_propagates(cora, keep_model):
    cfg = TrainConfig(**TINY, propagate="on", stop="none", spectral="none")
    trained = trainer.train(cora, cfg, keep_model=keep_model)
    assert trained.result.optimizer is None  # Adam's moments: freed
    assert (trained.params.W is not None) == keep_model  # x and W only when kept
    assert trained.propagated is not None
    assert trained.written is trained.propagated.E
    assert trained.written.shape == (cora.n_nodes, 8)


def test_both_callers_go_through_the_driver(cora, tmp_path, monkeypatch):
    from caps2ne_np.cli.train import run_train, train_params
    from caps2ne_np.estimator.caps2ne import Caps2NE

    calls, real = [], trainer.train

    def spy(graph, cfg, *args, **kwargs):
        calls.append(type(graph).__name__)
        return real(graph, cfg, *args, **kwargs)

    monkeypatch.setattr(trainer, "train", spy)
    options = dict(TINY, propagate="none", stop="none", spectral="none")
    run_train(train_params(graph=str(CORA), out=str(tmp_path / "c.emb"), quiet=True, **options))
    model = Caps2NE(
        **{k: v for k, v in options.items() if k != "threads"}, n_jobs=1, random_state=0
    )
    model.fit(cora)
    assert calls == ["Graph", "Graph"]
    assert model.get_embedding().shape == (cora.n_nodes, 8)


def test_every_engine_takes_the_run_bundle():
    from caps2ne_np.training import train
    from caps2ne_np.training.ray import driver as ray_driver

    for fit in (engines.fit, train.fit_run, ray_driver.fit_run):
        assert next(iter(inspect.signature(fit).parameters)) == "run"
    # the loop's options are spelled once: the arrays' faces take them by name
    loop_fields = set(loop.LoopOptions.__dataclass_fields__)
    for fit in (train.fit, ray_driver.fit, trainer.train):
        assert not loop_fields & set(inspect.signature(fit).parameters)


def test_the_graph_travels_as_a_graph(cora):
    cfg = TrainConfig(**TINY, stop="holdout", propagate="none", spectral="none")
    run = loop.Run(cora, cfg)
    setup = loop.set_up(run)
    assert type(setup.graph) is type(cora) and setup.graph.n_edges < cora.n_edges
    assert setup.graph.node_ids is cora.node_ids


def test_a_small_train_run_imports_no_scikit_learn(tmp_path):
    code = (
        "import sys\n"
        "from caps2ne_np.cli.train import run_train, train_params\n"
        f"run_train(train_params(graph={str(CORA)!r}, out={str(tmp_path / 'c.emb')!r}, "
        "quiet=True, dim=4, feat_dim=4, walks_per_node=1, epochs=1, num_sampled=4, threads=1))\n"
        "print('sklearn' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "False"
    assert np.loadtxt(tmp_path / "c.emb", skiprows=1, usecols=1).size > 0


def test_both_callers_check_the_checkpoint_folder_through_the_driver(cora, tmp_path, monkeypatch):
    from caps2ne_np.cli.train import run_train, train_params
    from caps2ne_np.estimator.caps2ne import Caps2NE

    class Checked(Exception):
        pass

    seen = []

    def check(checkpoint_dir, resume_from, overwrite, engine="single"):
        seen.append((str(checkpoint_dir), resume_from, overwrite, engine))
        raise Checked

    monkeypatch.setattr(trainer, "check_fresh", check)
    folder = str(tmp_path / "ckpt")
    with pytest.raises(Checked):
        run_train(
            train_params(
                graph=str(CORA), out=str(tmp_path / "c.emb"), checkpoint_dir=folder, engine="ray"
            )
        )
    with pytest.raises(Checked):
        Caps2NE(epochs=1).fit(cora, checkpoint_dir=folder, overwrite=True)
    assert seen == [(folder, None, False, "ray"), (folder, None, True, "single")]
