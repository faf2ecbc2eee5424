"""Training checkpoints: the full state of a run in one ``.npz``, written atomically.

A checkpoint holds every parameter, the Adam moments and step counter, the
position in the run (epoch, batch within the epoch, global step, the epoch's
running loss), the run's config and history, and a fingerprint of the graph and
features.  Every random choice of a run is keyed by (seed, epoch, step)
(docs/training.md), so these counters *are* the random state: a run resumed from
a checkpoint takes exactly the steps the uninterrupted run would have taken and
ends with bitwise identical embeddings.

Files: ``<dir>/checkpoint.npz`` (the latest) is replaced atomically; the previous
one is kept as ``<dir>/checkpoint.prev.npz`` (a hard link made before the
replacement), so at every instant ``checkpoint.npz`` is a complete checkpoint, and
``load`` falls back to the previous one (with an ``InputWarning``, which the CLI
shows even with ``-q``) if the latest is missing
or damaged: not a readable ``.npz``, a missing array, bad JSON, a state that does
not parse, or (``fall_back``, called by ``train.fit``) arrays of the wrong shape.

A run holds ``<dir>/lock`` (its pid, and an ``flock`` on the file, which the system
releases when the process dies) for as long as it writes checkpoints there; a
second run on the same folder is refused with the holder's pid.  Taking the lock
also removes what a killed run may have left: ``checkpoint.new.npz``,
``checkpoint.prev.new.npz`` and hidden ``.checkpoint*.tmp`` files.

``extra`` arrays (``save(..., extra=)``, returned by ``load`` as ``ckpt["extra"]``)
carry state of the caller's, such as the CLI's best-epoch tracker.
"""

import hashlib
import json
import logging
import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..defaults import HELD_OUT_STOPS
from ..errors import InputError, InputWarning
from ..io.npy import load_npz, save_npz

log = logging.getLogger(__name__)

FORMAT = "caps2ne_np.checkpoint"
VERSION = 1
LATEST = "checkpoint.npz"
PREVIOUS = "checkpoint.prev.npz"
NEW = "checkpoint.new.npz"
PREVIOUS_NEW = "checkpoint.prev.new.npz"
LOCK = "lock"
REQUIRED = ("format", "version", "config", "history", "state", "graph_hash", "adam_t", "adam_lr")
STATE_KEYS = ("epoch", "batch", "step", "loss_sum", "n_pairs", "seconds")

RESUMABLE_CHANGES = ("epochs", "stop", "propagate", "spectrum_power", "row_norm", "threads")
"""Options that may change between the interrupted run and its resumption: none changes a
bit trained so far (--epochs and --stop say when the run ends; --epochs N alone trains
exactly N, --stop none; --propagate, --spectrum-power and --row-norm act on the written
o_v after training; --threads gives the same bits), except --stop to or from a held-out
mode (holdout, loglik), which trains on another graph.  Left unset, --epochs and --stop
keep the checkpointed run's (``keep_budget``)."""
_FLAGS = [f"--{k.replace('_', '-')}" for k in RESUMABLE_CHANGES]
MAY_CHANGE = f"only {', '.join(_FLAGS[:-1])} and {_FLAGS[-1]} may change"  # the message's words
FILLED_BY_RESOLVE = ("num_sampled",)
"""Options that ``presets.resolve`` fills from the graph when unset: a checkpoint written
before ``resolve`` filled them stores None, which means the same derived value."""


def keep_budget(cfg, directory):
    """``cfg`` (a TrainConfig) with the --epochs and --stop of the run checkpointed in
    ``directory`` where the resumed run leaves them unset: a resume continues that run,
    not one the preset would start now (its budget and --stop auto).  --epochs N given
    alone still trains exactly N (--stop none), as in a new run.  ``cfg`` itself when
    nothing is kept or the checkpoint cannot be read (``load`` then says why)."""
    if cfg.epochs is not None:
        return cfg
    saved = saved_config(directory)
    kept = {
        k: saved.get(k)
        for k in ("epochs", "stop")
        if saved is not None and getattr(cfg, k) is None and saved.get(k) is not None
    }
    if not kept:
        return cfg
    log.info(
        "resuming with %s of the checkpointed run (give %s to change %s)",
        " and ".join(f"--{k} {v}" for k, v in kept.items()),
        " or ".join(f"--{k}" for k in kept),
        "them" if len(kept) > 1 else "it",
    )
    return replace(cfg, **kept)


def saved_config(directory):
    """The options (dict) stored in the checkpoint in ``directory`` (the latest, else the
    previous one, else an ``--engine ray`` driver's file), read without its arrays; None
    when none is readable."""
    return _saved(directory, "config", dict)


def saved_history(directory):
    """The history (a list of per-epoch dicts) stored in the checkpoint in ``directory``,
    as ``saved_config`` reads it; None when none is readable."""
    return _saved(directory, "history", list)


def _saved(directory, key, kind):
    for name in (LATEST, PREVIOUS, "driver.npz"):  # distributed.DRIVER_FILE
        try:
            with np.load(Path(directory) / name, allow_pickle=False) as z:
                value = json.loads(str(z[key]))
        except Exception:  # noqa: BLE001 -- missing or damaged: load() says which
            continue
        if isinstance(value, kind):
            return value
    return None


def fingerprint(indptr, indices, weights, features, starts=None):
    """SHA-256 of the graph (and fixed features, and the nodes walks start from when a
    run has them: an update's): a resumed run must see the same input."""
    h = hashlib.sha256()
    for a in (indptr, indices, weights):
        if a is not None:
            h.update(np.ascontiguousarray(a).tobytes())
    if features is not None:
        for a in (
            (features.indptr, features.indices, features.data)
            if hasattr(features, "u_data")
            else (features,)
        ):
            h.update(np.ascontiguousarray(a).tobytes())
    if starts is not None:
        h.update(b"starts")
        h.update(np.ascontiguousarray(starts, dtype=np.int64).tobytes())
    return h.hexdigest()


def save(directory, params, optimizer, state, config, history, graph_hash, extra=None, *, lr):
    """Write the run's state to ``directory/checkpoint.npz`` (atomic; previous kept).

    ``optimizer``: Adam's moments and step count; ``lr``: the rate of the last step
    trained (schedule.Schedule.last), stored as ``adam_lr``.  ``extra``: more named
    arrays, stored as ``extra_<name>`` (``load`` gives them back in ``ckpt["extra"]``)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {
        "format": np.asarray(FORMAT),
        "version": np.int64(VERSION),
        "config": np.asarray(json.dumps(config)),
        "history": np.asarray(json.dumps(history)),
        "state": np.asarray(json.dumps(state)),
        "graph_hash": np.asarray(graph_hash),
        "adam_t": np.int64(optimizer.t),
        "adam_lr": np.float64(lr),
    }
    for name in params.trainable():
        arrays[f"param_{name}"] = getattr(params, name)
        arrays[f"m_{name}"] = optimizer.m[name]
        arrays[f"v_{name}"] = optimizer.v[name]
    for name, value in (extra or {}).items():
        arrays[f"extra_{name}"] = value
    latest = directory / LATEST
    tmp = directory / NEW
    prev_tmp = directory / PREVIOUS_NEW
    try:
        save_npz(tmp, overwrite=True, **arrays)
        if latest.exists():  # keep the current one as .prev, without
            if prev_tmp.exists():  # ever unlinking checkpoint.npz
                prev_tmp.unlink()
            try:
                os.link(latest, prev_tmp)
            except OSError:  # no hard links here: copy instead
                import shutil

                shutil.copyfile(latest, prev_tmp)
            os.replace(prev_tmp, directory / PREVIOUS)
        os.replace(tmp, latest)
    except BaseException:  # Ctrl-C, SIGTERM, a full disk: leave no
        for leftover in (tmp, prev_tmp):  # half-done files (the old ones stay)
            try:
                os.unlink(leftover)
            except OSError:
                pass
        raise
    return latest


def check_arguments(checkpoint_dir, checkpoint_every, resume_from):
    """ValueError naming the argument of ``train.fit`` (or the Ray engine's ``fit``) that
    cannot be meant: an empty folder name (the current folder, or none, silently), or
    ``checkpoint_every`` without a ``checkpoint_dir`` for its checkpoints."""
    for name, value in (("checkpoint_dir", checkpoint_dir), ("resume_from", resume_from)):
        if value is not None and os.fspath(value) == "":
            raise ValueError(f"{name}: an empty path; give a folder (None: {_NONE[name]})")
    if checkpoint_every and checkpoint_dir is None:
        raise ValueError(
            f"checkpoint_every={checkpoint_every} needs checkpoint_dir, the folder its "
            "checkpoints go to"
        )


_NONE = {"checkpoint_dir": "no checkpoints", "resume_from": "a new run"}


def check_fresh(directory, overwrite, resume_from=None, name=LATEST):
    """InputError if ``directory`` already holds a checkpoint (its file ``name``) that a
    run would replace: a new run's, or one resumed from another folder
    (``resume_from``), unless ``overwrite``."""
    path = Path(directory) / name
    if overwrite or not path.exists():
        return
    if not resume_from:
        raise InputError(
            f"{path}: exists; pass --resume {directory} to continue that run, "
            "or --overwrite to start a new one there"
        )
    if _same_folder(directory, resume_from):
        return
    raise InputError(
        f"{path}: exists, the checkpoint of another run, which --resume {resume_from} "
        f"would replace with its own; leave out --checkpoint-dir to keep checkpointing in "
        f"{resume_from}, choose another folder, or pass --overwrite to replace it"
    )


def _same_folder(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return os.path.realpath(a) == os.path.realpath(b)


def load(directory):
    """Read ``directory/checkpoint.npz``, or ``checkpoint.prev.npz`` when the latest is
    missing or damaged (a WARNING names the reason); InputError when neither is a
    usable checkpoint."""
    path = Path(directory) / LATEST
    prev = Path(directory) / PREVIOUS
    if not path.is_file() and not prev.is_file():
        if (Path(directory) / "driver.npz").is_file():  # distributed.DRIVER_FILE
            raise InputError(
                f"{directory}: a checkpoint of --engine ray (driver.npz and shards); resume "
                "it with --engine ray and the same --workers and --servers"
            )
        raise InputError(
            f"{directory}: no {LATEST} to resume from; was the run started with --checkpoint-dir?"
        )
    try:
        return _load_one(path)
    except InputError as err:
        if not prev.is_file():
            raise
        reason = err
    _warn(f"{reason}; resuming from the previous checkpoint {prev} instead")
    return _load_one(prev)


def _load_one(path):
    """One checkpoint file, its structure checked; InputError (one line) otherwise."""
    if not path.is_file():
        raise InputError(f"{path}: missing")
    arrays = load_npz(path)
    if str(arrays.get("format", "")) != FORMAT:
        raise InputError(f"{path}: not a caps2ne_np checkpoint")
    missing = [k for k in REQUIRED if k not in arrays]
    if missing:
        raise InputError(
            f"{path}: damaged checkpoint (no {', '.join(missing)}); resume from an "
            "earlier copy or start a new run"
        )
    try:
        version = int(arrays["version"])
        parsed = {k: json.loads(str(arrays[k])) for k in ("config", "history", "state")}
        adam_t, adam_lr = int(arrays["adam_t"]), float(arrays["adam_lr"])
    except (TypeError, ValueError) as err:
        raise InputError(
            f"{path}: damaged checkpoint ({type(err).__name__}: "
            f"{' '.join(str(err).split())}); resume from an earlier copy or start "
            "a new run"
        ) from None
    if version > VERSION:
        raise InputError(
            f"{path}: checkpoint version {version} is newer than "
            f"this caps2ne_np supports ({VERSION})"
        )
    state = parsed["state"]
    if (
        not isinstance(parsed["config"], dict)
        or not isinstance(parsed["history"], list)
        or not isinstance(state, dict)
        or any(
            not isinstance(state[k], (int, float))
            or isinstance(state[k], bool)
            or not np.isfinite(state[k])
            or state[k] < 0
            for k in STATE_KEYS
            if k in state
        )
        or any(
            not float(state[k]).is_integer()
            for k in ("epoch", "batch", "step", "n_pairs")
            if k in state
        )
        or adam_t < 0
        or not np.isfinite(adam_lr)
    ):
        raise InputError(
            f"{path}: damaged checkpoint (config, history or state of the wrong "
            "form); resume from an earlier copy or start a new run"
        )
    return {
        "config": parsed["config"],
        "history": parsed["history"],
        "state": state,
        "graph_hash": str(arrays["graph_hash"]),
        "adam_t": adam_t,
        "adam_lr": adam_lr,
        "arrays": arrays,
        "path": str(path),
        "extra": {k[len("extra_") :]: v for k, v in arrays.items() if k.startswith("extra_")},
    }


def fall_back(ckpt, err):
    """The previous checkpoint, after ``err`` (an InputError) made ``ckpt`` unusable;
    re-raises ``err`` when ``ckpt`` is already the previous one or there is none."""
    prev = Path(ckpt["path"]).with_name(PREVIOUS)
    if Path(ckpt["path"]).name == PREVIOUS or not prev.is_file():
        raise err
    _warn(f"{err}; resuming from the previous checkpoint {prev} instead")
    return _load_one(prev)


def _warn(message):
    """An InputWarning: the CLI prints it as a ``warning:`` line whatever the log level
    (-q hides log records, not these)."""
    import warnings

    warnings.warn(message, InputWarning, stacklevel=3)


def check_arrays(ckpt, params, names):
    """InputError unless the checkpoint holds parameter and Adam arrays of the run's shapes."""
    arrays = ckpt["arrays"]
    for name in names:
        want = getattr(params, name).shape
        for prefix in ("param", "m", "v"):
            key = f"{prefix}_{name}"
            if key not in arrays:
                raise InputError(
                    f"{ckpt['path']}: damaged checkpoint (no {key}); resume from an "
                    "earlier copy or start a new run"
                )
            got = np.shape(arrays[key])
            if got != want or not np.issubdtype(arrays[key].dtype, np.floating):
                raise InputError(
                    f"{ckpt['path']}: {key} has shape {got} {arrays[key].dtype}, this "
                    f"run needs {want} floats; the checkpoint is damaged or from "
                    "another run"
                )


def check_compatible(ckpt, config, graph_hash):
    """InputError naming every option (or the input) that differs from the checkpoint.

    When the latest checkpoint differs but the previous one (written by the same run,
    so with the same options and input) does not, the latest is damaged: the previous
    one is returned instead, with a warning.  Returns the checkpoint to resume from."""
    try:
        _check_same_run(ckpt, config, graph_hash)
    except InputError as err:
        prev = Path(ckpt["path"]).with_name(PREVIOUS)
        if Path(ckpt["path"]).name == PREVIOUS or not prev.is_file():
            raise
        try:
            older = _load_one(prev)
            _check_same_run(older, config, graph_hash)
        except InputError:
            raise err from None
        _warn(
            f"{ckpt['path']}: its options or input fingerprint differ from those of "
            f"{prev}, written by the same run; it is damaged, resuming from {prev} instead"
        )
        ckpt = older
    _check_epochs(ckpt, config)
    return ckpt


def _check_same_run(ckpt, config, graph_hash):
    before, now = ckpt["config"].get("stop"), config.get("stop")
    held = HELD_OUT_STOPS
    if (before in held or now in held) and before != now:  # before the fingerprint it changes
        mode = before if before in held else now
        raise InputError(
            f"{ckpt['path']}: --stop {_shown(before)} (now {_shown(now)}): --stop {mode} "
            "trains on the graph without its held-out edges, so a run cannot switch to or "
            "from it on resume; resume with the same --stop"
        )
    saved = dict(ckpt["config"])
    config = dict(config)
    for key, value in RECORDED_LATER.items():  # older checkpoints trained with these
        saved.setdefault(key, value)
        config.setdefault(key, value)
    diff = [
        k
        for k in saved
        if k not in RESUMABLE_CHANGES
        and saved[k] != config.get(k)
        and not (saved[k] is None and k in FILLED_BY_RESOLVE)
    ]
    if diff:
        shown = ", ".join(
            f"--{k.replace('_', '-')} {_shown(saved[k])} (now {_shown(config.get(k))})"
            for k in diff
        )
        raise InputError(
            f"{ckpt['path']}: options differ from the checkpointed run: {shown}; "
            f"resume with the same options ({MAY_CHANGE})"
        )
    if ckpt["graph_hash"] != graph_hash:  # after the options: --spectral features derive
        raise InputError(  # the features from them
            f"{ckpt['path']}: the graph or features differ from the run that wrote "
            "this checkpoint; resume with the same input"
        )


RECORDED_LATER = {
    "skipgram_weight": 0.0,
    "node2vec_p": 1.0,
    "node2vec_q": 1.0,
    "spectral_precision": "float64",
}
"""Options added after the first checkpoints, with the value every run before them used
(the paper's loss; first-order walks; float64 spectral stages): a checkpoint without
them resumes only with these."""


class RecordsParallel:
    """The ``checkpoint_extra`` of ``train.fit``: stores the run's ``parallel`` mode
    ('sync' or 'async') in every checkpoint next to the caller's ``inner`` extra state,
    and refuses a resume in another mode (a checkpoint without it: 'sync').  ``source``:
    the resumed folder, for the message."""

    def __init__(self, parallel, inner=None, source=None):
        self.parallel, self.inner, self.source = parallel, inner, source

    def checkpoint_arrays(self):
        arrays = dict(self.inner.checkpoint_arrays()) if self.inner is not None else {}
        arrays["parallel"] = np.asarray(self.parallel)
        return arrays

    def restore_checkpoint(self, arrays):
        arrays = dict(arrays)
        recorded = str(arrays.pop("parallel", "sync"))
        if recorded != self.parallel:
            raise InputError(
                f"{self.source}: options differ from the checkpointed run: --parallel "
                f"{recorded} (now {self.parallel}); resume with the same options "
                f"({MAY_CHANGE})"
            )
        if self.inner is not None:
            self.inner.restore_checkpoint(arrays)


def _check_epochs(ckpt, config):
    done = int(ckpt["state"].get("epoch", 0)) + (1 if ckpt["state"].get("batch") else 0)
    if config.get("epochs") is not None and int(config["epochs"]) < done:
        raise InputError(
            f"{ckpt['path']}: the checkpointed run is at epoch {done}, more than "
            f"--epochs {config['epochs']}; pass --epochs {done} or more (or start a "
            "new run)"
        )


def _shown(value):
    """An option's value as the user would type it (None: the preset's choice)."""
    if value is None:
        return "unset (the preset's value)"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):  # 0.5, but 0.5000000001 when :g would hide the change
        return f"{value:g}" if float(f"{value:g}") == value else repr(value)
    return str(value)


@contextmanager
def locked(directory):
    """Hold ``directory/lock`` for the block (re-entrant within a process).

    InputError naming the holder's pid when another live process holds it; a lock
    left by a dead process is taken over (its flock died with it).  Stale files of a
    killed run are removed once the lock is held."""
    directory = Path(directory)
    key = os.path.realpath(directory)
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    directory.mkdir(parents=True, exist_ok=True)
    fd = _acquire(directory / LOCK)
    _HELD[key] = [fd, 1]
    try:
        _remove_leftovers(directory)
        yield
    finally:
        del _HELD[key]
        try:
            os.unlink(directory / LOCK)
        except OSError:
            pass
        os.close(fd)


_HELD = {}


def _acquire(path):
    import fcntl

    for _ in range(10):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise InputError(
                f"{path}: cannot create the lock file ({err.strerror or err}); "
                "choose a writable --checkpoint-dir"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise InputError(
                f"{path.parent}: in use by process {holder} (lock file {path}); "
                "wait for that run to end or stop it, or choose another folder"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # removed by its last holder meanwhile: retry
            os.close(fd)
            continue
        old = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if old and old != str(os.getpid()):
            _warn(f"{path}: taking over the lock of process {old}, which is gone")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        return fd
    raise InputError(f"{path}: could not take the lock; retry")


def _remove_leftovers(directory):
    """Files a killed run may have left in its checkpoint folder (ours now: we hold the lock)."""
    for name in (NEW, PREVIOUS_NEW):
        try:
            os.unlink(directory / name)
        except FileNotFoundError:
            pass
    for tmp in directory.glob(".checkpoint*.tmp"):
        try:
            tmp.unlink()
        except OSError:
            pass
