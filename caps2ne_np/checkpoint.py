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
``load`` falls back to the previous one if the latest is missing or damaged.
"""

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .errors import InputError
from .io import load_npz, save_npz

FORMAT = "caps2ne_np.checkpoint"
VERSION = 1
LATEST = "checkpoint.npz"
PREVIOUS = "checkpoint.prev.npz"

# Options that may change between the interrupted run and its resumption.
RESUMABLE_CHANGES = ("epochs", "threads")


def fingerprint(indptr, indices, weights, features):
    """SHA-256 of the graph (and fixed features): a resumed run must see the same input."""
    h = hashlib.sha256()
    for a in (indptr, indices, weights):
        if a is not None:
            h.update(np.ascontiguousarray(a).tobytes())
    if features is not None:
        for a in ((features.indptr, features.indices, features.data)
                  if hasattr(features, "u_data") else (features,)):
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def save(directory, params, optimizer, state, config, history, graph_hash):
    """Write the run's state to ``directory/checkpoint.npz`` (atomic; previous kept)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {"format": np.asarray(FORMAT), "version": np.int64(VERSION),
              "config": np.asarray(json.dumps(config)),
              "history": np.asarray(json.dumps(history)),
              "state": np.asarray(json.dumps(state)),
              "graph_hash": np.asarray(graph_hash),
              "adam_t": np.int64(optimizer.t), "adam_lr": np.float64(optimizer.lr)}
    for name in params.trainable():
        arrays[f"param_{name}"] = getattr(params, name)
        arrays[f"m_{name}"] = optimizer.m[name]
        arrays[f"v_{name}"] = optimizer.v[name]
    latest = directory / LATEST
    tmp = directory / "checkpoint.new.npz"
    save_npz(tmp, overwrite=True, **arrays)
    if latest.exists():                       # keep the current one as .prev, without
        prev_tmp = directory / "checkpoint.prev.new.npz"   # ever unlinking checkpoint.npz
        if prev_tmp.exists():
            prev_tmp.unlink()
        try:
            os.link(latest, prev_tmp)
        except OSError:                       # no hard links here: copy instead
            import shutil

            shutil.copyfile(latest, prev_tmp)
        os.replace(prev_tmp, directory / PREVIOUS)
    os.replace(tmp, latest)
    return latest


def check_fresh(directory, overwrite):
    """InputError if ``directory`` already holds a checkpoint a new run would replace."""
    path = Path(directory) / LATEST
    if path.exists() and not overwrite:
        raise InputError(f"{path}: exists; pass --resume {directory} to continue that run, "
                         "or --overwrite to start a new one there")


def load(directory):
    """Read ``directory/checkpoint.npz``; InputError for a missing or foreign file."""
    path = Path(directory) / LATEST
    prev = Path(directory) / PREVIOUS
    if not path.is_file() and not prev.is_file():
        raise InputError(f"{directory}: no {LATEST} to resume from; was the run started with "
                         "--checkpoint-dir?")
    try:
        arrays = load_npz(path)
    except InputError:
        if not prev.is_file():
            raise
        path = prev                           # the latest was lost or damaged mid-write
        arrays = load_npz(path)
    if str(arrays.get("format", "")) != FORMAT:
        raise InputError(f"{path}: not a caps2ne_np checkpoint")
    if int(arrays["version"]) > VERSION:
        raise InputError(f"{path}: checkpoint version {int(arrays['version'])} is newer than "
                         f"this caps2ne_np supports ({VERSION})")
    return {"config": json.loads(str(arrays["config"])),
            "history": json.loads(str(arrays["history"])),
            "state": json.loads(str(arrays["state"])),
            "graph_hash": str(arrays["graph_hash"]),
            "adam_t": int(arrays["adam_t"]), "adam_lr": float(arrays["adam_lr"]),
            "arrays": arrays, "path": str(path)}


def check_compatible(ckpt, config, graph_hash):
    """InputError naming every option (or the input) that differs from the checkpoint."""
    if ckpt["graph_hash"] != graph_hash:
        raise InputError(f"{ckpt['path']}: the graph or features differ from the run that wrote "
                         "this checkpoint; resume with the same input")
    saved = ckpt["config"]
    diff = [k for k in saved if k not in RESUMABLE_CHANGES and saved[k] != config.get(k)]
    if diff:
        shown = ", ".join(f"--{k.replace('_', '-')} {saved[k]!r} (now {config.get(k)!r})"
                          for k in diff)
        raise InputError(f"{ckpt['path']}: options differ from the checkpointed run: {shown}")
