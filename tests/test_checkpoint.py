"""Training checkpoints (caps2ne_np/training/checkpoint.py) as a resume sees them: which
options a resumed run may change, what it keeps of the checkpointed run, and the folder and
argument checks around them. A checkpoint killed between its renames still resumes."""

import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.training import checkpoint
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import fit
from clirun import _save_checkpoint
from toy_graphs import ring_of_cliques

TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, batch_size=8, threads=1)

MAY_CHANGE = {"epochs", "stop", "propagate", "spectrum_power", "row_norm", "threads"}
"""The options a resume may change (written out here, not read from checkpoint.py, so
that adding one there fails this file's tests until the list and the docs say so)."""
MESSAGE = (
    "resume with the same options (only --epochs, --stop, --propagate, --spectrum-power, "
    "--row-norm and --threads may change)"
)
"""The refusal's words as docs/reliability.md quotes them."""

CHANGED = dict(
    dim=6,
    feat_dim=6,
    walk_length=6,
    walks_per_node=3,
    batch_size=4,
    lr=0.01,
    lr_schedule="constant",
    lr_floor=0.5,
    walks="fixed",
    num_sampled=6,
    sampler="uniform",
    routing_iters=2,
    routing_rule="sabour",
    routing_scale=2.0,
    grad_mode="stop",
    targets="random",
    batch_mode="shuffle",
    seed=1,
    normalize_features=False,
    adam="dense",
    walk_chunk=1000,
    preset="paper",
    skipgram_weight=0.5,
    skipgram_negatives=2,
    spectral="none",
    spectral_dim=6,
    prone_order=5,
    prone_mu=0.3,
    prone_theta=0.7,
    spectral_precision="float64",
    node2vec_p=0.5,
    node2vec_q=2.0,
)
"""A valid value other than the checkpointed run's for every option a resume may not
change."""
WITH = dict(spectral_dim=dict(spectral="features"))
"""What else an option's changed value needs to be valid (--spectral-dim: ProNE features,
which the options, not the input files, change: the options are named, not the input)."""


def fit_on(A, cfg, **kw):
    return fit(A.indptr, A.indices.astype(np.int32), None, cfg, **kw)


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory):
    """A checkpoint of a finished 1-epoch run on the ring of cliques."""
    folder = tmp_path_factory.mktemp("ck")
    fit_on(ring_of_cliques(), TrainConfig(**TINY, epochs=1), checkpoint_dir=folder)
    return folder


def test_every_option_is_either_free_to_change_on_resume_or_tested_as_refused():
    assert set(checkpoint.RESUMABLE_CHANGES) == MAY_CHANGE
    names = {f.name for f in fields(TrainConfig)}
    assert names == MAY_CHANGE | set(CHANGED)
    assert not MAY_CHANGE & set(CHANGED)


@pytest.mark.parametrize("name", sorted(CHANGED))
def test_every_option_but_the_free_ones_changed_on_resume_is_refused(one_epoch, name):
    """Each TrainConfig field outside MAY_CHANGE, changed on resume, is refused with the
    documented message naming it, before a step is trained."""
    steps = []
    cfg = TrainConfig(**dict(TINY, epochs=2, **WITH.get(name, {}), **{name: CHANGED[name]}))
    with pytest.raises(InputError) as err:
        fit_on(ring_of_cliques(), cfg, resume_from=one_epoch,
               step_callback=lambda e, b, s: steps.append(s))  # fmt: skip
    message = str(err.value)
    flag = "--" + name.replace("_", "-")
    assert "options differ from the checkpointed run" in message
    assert re.search(rf"(: |, ){flag} [^;,]+ \(now [^;,]+\)", message), message
    assert message.endswith(MESSAGE)
    assert steps == []


@pytest.mark.parametrize(
    "name,value",
    [
        ("epochs", 2),
        ("stop", "auto"),
        ("propagate", "on"),
        ("spectrum_power", "1"),
        ("row_norm", 3.0),
    ],  # fmt: skip
)
def test_the_free_options_may_change_on_resume(one_epoch, name, value):
    cfg = TrainConfig(**dict(TINY, **dict(dict(epochs=2), **{name: value})))
    resumed = fit_on(ring_of_cliques(), cfg, resume_from=one_epoch)
    assert getattr(resumed.config, name) == value


# ------------------------------------------------------------ what a resume keeps


def test_a_resume_without_epochs_or_stop_keeps_the_checkpointed_runs(one_epoch):
    """The checkpointed run trained --epochs 1 (--stop none); resumed with both unset it
    ends there, not at the preset's budget under --stop auto."""
    steps = []
    resumed = fit_on(ring_of_cliques(), TrainConfig(**TINY), resume_from=one_epoch,
                     step_callback=lambda e, b, s: steps.append(s))  # fmt: skip
    assert (resumed.config.epochs, resumed.config.stop) == (1, "none")
    assert steps == [] and len(resumed.history) == 1


def test_a_resume_with_stop_alone_keeps_the_checkpointed_epochs(one_epoch):
    resumed = fit_on(ring_of_cliques(), TrainConfig(**TINY, stop="auto"), resume_from=one_epoch)
    assert (resumed.config.epochs, resumed.config.stop) == (1, "auto")


def test_a_resume_with_epochs_alone_trains_exactly_that_many(one_epoch):
    resumed = fit_on(ring_of_cliques(), TrainConfig(**TINY, epochs=2), resume_from=one_epoch)
    assert (resumed.config.epochs, resumed.config.stop) == (2, "none")
    assert len(resumed.history) == 2


def test_keep_budget_reads_the_previous_checkpoint_when_the_latest_is_unreadable(tmp_path):
    fit_on(ring_of_cliques(), TrainConfig(**TINY, epochs=2), checkpoint_dir=tmp_path)
    (tmp_path / checkpoint.LATEST).write_bytes(b"not a zip")
    kept = checkpoint.keep_budget(TrainConfig(**TINY), tmp_path)
    assert (kept.epochs, kept.stop) == (2, "none")
    assert checkpoint.keep_budget(TrainConfig(**TINY), tmp_path / "none") == TrainConfig(**TINY)


# ------------------------------------------------------------ what a run may replace


@pytest.mark.parametrize("name", ["checkpoint.npz", "driver.npz"])
def test_a_run_resumed_from_another_folder_may_not_replace_a_checkpoint(tmp_path, name):
    """checkpoint.check_fresh, and the Ray engine's for its driver file: a folder holding
    another run's checkpoint is refused to a new run and to one resumed from elsewhere,
    not to a resume of that folder itself, nor with overwrite."""
    from caps2ne_np.training.ray import check_fresh as ray_check_fresh

    def check(directory, overwrite, resume_from):
        if name == "driver.npz":
            ray_check_fresh(directory, resume_from, overwrite)
        else:
            checkpoint.check_fresh(directory, overwrite, resume_from)

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / name).write_bytes(b"another run's")
    with pytest.raises(InputError, match=f"b/{name}: exists; pass --resume"):
        check(tmp_path / "b", False, None)
    with pytest.raises(InputError, match=f"b/{name}: exists, the checkpoint of another run"):
        check(tmp_path / "b", False, tmp_path / "a")
    check(tmp_path / "b", False, tmp_path / "b" / ".")  # its own folder
    check(tmp_path / "b", True, tmp_path / "a")
    check(tmp_path / "a", False, None)  # nothing to replace


# ------------------------------------------------------------ the Python API's arguments


@pytest.mark.parametrize(
    "kw,message",
    [
        (dict(checkpoint_dir=""), "checkpoint_dir: an empty path; give a folder"),
        (dict(resume_from=""), "resume_from: an empty path; give a folder"),
        (dict(checkpoint_every=3), "checkpoint_every=3 needs checkpoint_dir"),
    ],  # fmt: skip
)
def test_fit_refuses_checkpoint_arguments_that_cannot_be_meant(tmp_path, monkeypatch, kw, message):
    """From Python as on the command line: checkpoint_dir='' wrote into the current
    folder, and checkpoint_every without a folder was ignored."""
    from caps2ne_np.estimator.caps2ne import Caps2NE

    monkeypatch.chdir(tmp_path)
    A = ring_of_cliques()
    with pytest.raises(ValueError, match=message):
        fit_on(A, TrainConfig(**TINY, epochs=1), **kw)
    with pytest.raises(ValueError, match=message):
        Caps2NE(dim=8, feat_dim=8, epochs=1).fit(A, **kw)
    assert list(tmp_path.iterdir()) == []


def test_the_estimator_does_not_replace_another_runs_checkpoint(tmp_path):
    from caps2ne_np.estimator.caps2ne import Caps2NE

    A = ring_of_cliques()
    model = Caps2NE(dim=8, feat_dim=8, epochs=1, walks_per_node=2, propagate="none")
    model.fit(A, checkpoint_dir=tmp_path)
    before = (tmp_path / checkpoint.LATEST).read_bytes()
    with pytest.raises(InputError, match=r"exists; pass resume_from .* or overwrite=True"):
        Caps2NE(
            dim=8, feat_dim=8, epochs=1, walks_per_node=2, propagate="none", random_state=1
        ).fit(A, checkpoint_dir=tmp_path)
    assert (tmp_path / checkpoint.LATEST).read_bytes() == before
    model.fit(A, checkpoint_dir=tmp_path, resume_from=tmp_path)  # its own: goes on
    Caps2NE(dim=8, feat_dim=8, epochs=1, walks_per_node=2, propagate="none", random_state=1).fit(
        A, checkpoint_dir=tmp_path, overwrite=True
    )
    assert (tmp_path / checkpoint.LATEST).read_bytes() != before


class Interrupt(Exception):
    pass


def test_propagate_may_change_on_resume(tmp_path):
    """--propagate acts on the written o_v after training: no trained bit depends on it."""
    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1, propagate="on"), checkpoint_dir=tmp_path)
    resumed = fit_on(A, TrainConfig(**TINY, epochs=2, propagate="none"), resume_from=tmp_path)
    assert len(resumed.history) == 2


def test_the_written_rows_options_may_change_on_resume(tmp_path):
    """--spectrum-power and --row-norm shape the propagated rows after training: a
    resume that changes them trains the o_v of a run without the change and carries
    the new values to the written rows (propagation.apply reads the run's config)."""
    A = ring_of_cliques()
    kw = dict(TINY, propagate="on")
    straight = fit_on(A, TrainConfig(**kw, epochs=2, spectrum_power="1", row_norm=3.0))

    def interrupt(epoch, result):
        if epoch == 2:  # before epoch 2's checkpoint: epoch 1's is kept
            raise Interrupt

    with pytest.raises(Interrupt):
        fit_on(A, TrainConfig(**kw, epochs=2), checkpoint_dir=tmp_path, epoch_callback=interrupt)
    resumed = fit_on(
        A, TrainConfig(**kw, epochs=2, spectrum_power="1", row_norm=3.0), resume_from=tmp_path
    )
    assert resumed.params.O.tobytes() == straight.params.O.tobytes()
    assert (resumed.config.spectrum_power, resumed.config.row_norm) == ("1", 3.0)


def test_other_options_are_still_refused_and_the_message_lists_what_may_change(tmp_path):
    from caps2ne_np.errors import InputError

    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1), checkpoint_dir=tmp_path)
    may = r"only --epochs, --stop, --propagate, --spectrum-power, --row-norm and"
    with pytest.raises(InputError, match=r"--lr .*" + may):
        fit_on(A, TrainConfig(**TINY, epochs=2, lr=0.01), resume_from=tmp_path)


def test_a_resumed_run_frees_the_checkpoints_arrays_once_copied(tmp_path, monkeypatch):
    import weakref

    from caps2ne_np.training import checkpoint

    A = ring_of_cliques()
    fit_on(A, TrainConfig(**TINY, epochs=1), checkpoint_dir=tmp_path)
    real, refs = checkpoint.load, []

    def load(directory):
        ckpt = real(directory)
        refs.append(weakref.ref(ckpt["arrays"]["param_O"]))
        return ckpt

    monkeypatch.setattr(checkpoint, "load", load)
    alive = []
    fit_on(A, TrainConfig(**TINY, epochs=2), resume_from=tmp_path,
           epoch_callback=lambda epoch, result: alive.append(refs[0]() is not None))  # fmt: skip
    assert alive == [False]


def test_checkpoint_killed_between_renames_still_resumes(tmp_path, monkeypatch):
    import os

    _save_checkpoint(tmp_path, 1.0)
    real_replace = os.replace

    def replace(src, dst):  # killed just before the new checkpoint takes the name checkpoint.npz
        if Path(dst).name == checkpoint.LATEST:
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        _save_checkpoint(tmp_path, 2.0)
    monkeypatch.undo()
    assert checkpoint.load(tmp_path)["state"]["epoch"] in (1, 2)
