"""The trained-model file: every parameter, the config, node ids and history in
one ``.npz`` (no pickles), written atomically.  Used by ``estimator.Caps2NE.save`` /
``load`` and by the CLI (which stays clear of scikit-learn's import cost).

Arrays: ``W`` (I, k, d), ``O`` (N, k), ``bias`` (N,), ``X`` (N, d) when the
features were trained (fixed features are the user's data and are not stored),
``node_ids`` (N,) str, ``config`` (JSON of config.TrainConfig plus ``lr_used``; its
``spectral`` says how x started, spectral.py: a file without it reads as 'none'),
``history`` (JSON), ``fixed_features`` (bool), ``format`` and ``version``.

Optional (added without a version bump: older readers ignore them, files without
them still load): ``node_labels`` (N,) int64 when every node label given to
``Caps2NE.fit`` was an int (``Caps2NE.load`` gives them back as ints); the
calibration of Algorithm 3's outputs onto the o_v (``infer.calibrate``):
``calibration_A`` (k, k), ``calibration_b`` (k,) and ``calibration`` (JSON: method,
n, samples, positions, seed); ``run`` (JSON, ``RUN_KEYS``): how the graph was read
(``directed``, ``keep_self_loops``: ``infer`` and ``Caps2NE.transform`` read a graph the
same way), the ``parallel`` mode, and ``params``, the estimator's parameters as the user
gave them (``Caps2NE.load`` gives those back, not the values a preset filled in; the
config holds those).  A file without ``run``: undirected, no self loops, 'sync'.  The
spectral propagation of the written embeddings (``--propagate``,
spectral/propagation.py): ``propagated`` (N, k) float32, the written embeddings, and
``propagation_P`` (k, k) float64, the map infer sends new nodes through.

``read_model`` checks all of it (``check_model``, io/modelcheck.py) before anything is
used: the format and version, the arrays, unique node ids, the config by the rows of
``defaults.OPTIONS`` (the ranges and choices ``validation.validate`` applies) and the
calibration; one line naming the first problem.
"""

import json
import os

import numpy as np

from .modelcheck import (
    CHECKPOINT_FORMAT,
    HUGE,
    MODEL_FORMAT,
    MODEL_VERSION,
    RECALIBRATE,
    RUN_KEYS,
    check_calibration,
    check_config,
    check_model,
    check_option,
    check_run,
    default_run,
    read_propagation,
    stored_json,
)
from .npy import load_npz, save_npz

__all__ = [
    "save_model",
    "save_calibration",
    "read_model",
    "read_calibration",
    "integer_labels",
    # the checks (io/modelcheck.py), where the callers import them from
    "CHECKPOINT_FORMAT",
    "HUGE",
    "MODEL_FORMAT",
    "MODEL_VERSION",
    "RECALIBRATE",
    "RUN_KEYS",
    "check_calibration",
    "check_config",
    "check_model",
    "check_option",
    "default_run",
]


def _calibration_arrays(calibration):
    meta = {key: value for key, value in calibration.items() if key not in ("A", "b")}
    return dict(
        calibration=np.asarray(json.dumps(meta)),
        calibration_A=np.asarray(calibration["A"], dtype=np.float32),
        calibration_b=np.asarray(calibration["b"], dtype=np.float32),
    )


def integer_labels(labels):
    """int64 array of ``labels`` when every one is an int (not a bool), else None."""
    labels = list(labels)
    if labels and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in labels):
        return np.asarray(labels, dtype=np.int64)
    return None


def save_model(
    path,
    params,
    node_ids,
    config,
    lr,
    history,
    overwrite=False,
    calibration=None,
    run=None,
    propagation=None,
):
    """Write ``params`` (params.Params) and their context to ``path`` (atomic); with
    ``calibration`` (``infer.calibrate``) also that; ``run``: a dict of ``RUN_KEYS``;
    with ``propagation`` (a ``propagation.Propagated``) the propagated embeddings and
    their map.

    ``node_ids``: each row's node, as strings or as the labels the input gave (stored
    as ``str(label)``; when every label is an int, the ints are stored too, as
    ``node_labels``, so ``Caps2NE.load`` gives them back as ints)."""
    node_ids = list(node_ids)
    arrays = dict(
        W=np.ascontiguousarray(params.W),
        O=params.O,
        bias=params.bias,
        node_ids=np.asarray([str(x) for x in node_ids], dtype=str),
        format=np.asarray(MODEL_FORMAT),
        version=np.int64(MODEL_VERSION),
        config=np.asarray(json.dumps(dict(config, lr_used=lr))),
        history=np.asarray(json.dumps(history)),
        fixed_features=np.bool_(params.fixed_features),
    )
    labels = integer_labels(node_ids)
    if labels is not None:
        arrays["node_labels"] = labels
    if not params.fixed_features:
        arrays["X"] = params.X
    if calibration is not None:
        check_calibration(calibration, params.O.shape[1])
        arrays.update(_calibration_arrays(calibration))
    if run is not None:
        arrays["run"] = np.asarray(json.dumps(check_run(path, run)))
    if propagation is not None:
        arrays.update(
            propagated=np.asarray(propagation.E, dtype=np.float32),
            propagation_P=np.asarray(propagation.P, dtype=np.float64),
        )
    save_npz(path, overwrite=overwrite, **arrays)


def save_calibration(path, calibration):
    """Store ``calibration`` (``infer.calibrate``) in the model file ``path``, replacing
    any stored one; the file is checked, then rewritten atomically, everything else
    unchanged.  A symbolic link is written through (its target is replaced, the link
    stays)."""
    target = os.path.realpath(path)
    arrays = load_npz(target)
    check_model(path, arrays)
    check_calibration(calibration, arrays["O"].shape[1], "the new calibration")
    arrays.update(_calibration_arrays(calibration))
    save_npz(target, overwrite=True, **arrays)


def read_calibration(path):
    """The calibration stored in the model file ``path`` (a dict with A, b, method, n,
    samples, positions, seed), or None for a file without one (older files)."""
    return read_model(path)["calibration"]


def read_model(path):
    """Read a model file: dict with W, O, bias, X (or None), fixed_features, node_ids,
    node_labels (the ids as the input named them: ints for integer labels), config,
    lr_used, history, calibration (or None), run (RUN_KEYS; None for a file without it:
    ``default_run()`` then says what the run most likely was), propagation (dict(E, P):
    the written embeddings and their map, ``--propagate``; or None).

    The whole file is checked first (``check_model``): InputError, one line, for
    anything that is not a model this version can use."""
    arrays = load_npz(path)
    config, history, calibration = check_model(path, arrays)
    node_ids = [str(s) for s in arrays["node_ids"]]
    labels = node_ids
    if "node_labels" in arrays:
        labels = [int(x) for x in arrays["node_labels"]]
    config.setdefault("skipgram_weight", 0.0)  # older files: the paper's loss
    config.setdefault("spectral", "none")  # files written before the spectral start
    propagation = None
    if "propagated" in arrays or "propagation_P" in arrays:
        propagation = read_propagation(path, arrays)
    return dict(
        W=arrays["W"],
        O=arrays["O"],
        bias=arrays["bias"],
        X=arrays.get("X"),
        fixed_features=bool(arrays["fixed_features"]),
        node_ids=node_ids,
        node_labels=labels,
        lr_used=config.pop("lr_used", None),
        config=config,
        history=history,
        calibration=calibration,
        run=check_run(path, stored_json(path, arrays, "run")) if "run" in arrays else None,
        propagation=propagation,
    )
