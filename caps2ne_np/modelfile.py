"""The trained-model file: every parameter, the config, node ids and history in
one ``.npz`` (no pickles), written atomically.  Used by ``model.Caps2NE.save`` /
``load`` and by the CLI (which stays clear of scikit-learn's import cost).

Arrays: ``W`` (I, k, d), ``O`` (N, k), ``bias`` (N,), ``X`` (N, d) when the
features were trained (fixed features are the user's data and are not stored),
``node_ids`` (N,) str, ``config`` (JSON of config.TrainConfig plus ``lr_used``; its
``spectral`` says how x started, spectral.py: a file without it reads as 'none'),
``history`` (JSON), ``fixed_features`` (bool), ``format`` and ``version``.

Optional (added without a version bump: older readers ignore it, files without it
still load): the calibration of Algorithm 3's outputs onto the o_v
(``infer.calibrate``): ``calibration_A`` (k, k), ``calibration_b`` (k,) and
``calibration`` (JSON: method, n, samples, positions, seed).
"""

import json

import numpy as np

from .errors import InputError
from .io import load_npz, save_npz

MODEL_FORMAT = "caps2ne_np.model"
MODEL_VERSION = 1


CALIBRATION_KEYS = ("calibration", "calibration_A", "calibration_b")


def _calibration_arrays(calibration):
    meta = {key: value for key, value in calibration.items() if key not in ("A", "b")}
    return dict(
        calibration=np.asarray(json.dumps(meta)),
        calibration_A=np.asarray(calibration["A"], dtype=np.float32),
        calibration_b=np.asarray(calibration["b"], dtype=np.float32),
    )


def save_model(path, params, node_ids, config, lr, history, overwrite=False, calibration=None):
    """Write ``params`` (core.Params) and their context to ``path`` (atomic); with
    ``calibration`` (``infer.calibrate``) also that."""
    arrays = dict(
        W=np.ascontiguousarray(params.W),
        O=params.O,
        bias=params.bias,
        node_ids=np.asarray(list(node_ids), dtype=str),
        format=np.asarray(MODEL_FORMAT),
        version=np.int64(MODEL_VERSION),
        config=np.asarray(json.dumps(dict(config, lr_used=lr))),
        history=np.asarray(json.dumps(history)),
        fixed_features=np.bool_(params.fixed_features),
    )
    if not params.fixed_features:
        arrays["X"] = params.X
    if calibration is not None:
        arrays.update(_calibration_arrays(calibration))
    save_npz(path, overwrite=overwrite, **arrays)


def save_calibration(path, calibration):
    """Store ``calibration`` (``infer.calibrate``) in the model file ``path``, replacing
    any stored one; the file is rewritten atomically, everything else unchanged."""
    arrays = load_npz(path)
    if str(arrays.get("format", "")) != MODEL_FORMAT:
        raise InputError(f"{path}: not a caps2ne_np model file (no format tag)")
    k = arrays["O"].shape[1]
    if np.shape(calibration["A"]) != (k, k):
        raise InputError(
            f"{path}: the calibration is for k = {np.shape(calibration['A'])[0]}, "
            f"the model has k = {k}"
        )
    arrays.update(_calibration_arrays(calibration))
    save_npz(path, overwrite=True, **arrays)


def read_calibration(path):
    """The calibration stored in the model file ``path`` (a dict with A, b, method, n,
    samples, positions, seed), or None for a file without one (older files)."""
    arrays = load_npz(path)
    if str(arrays.get("format", "")) != MODEL_FORMAT:
        raise InputError(f"{path}: not a caps2ne_np model file (no format tag)")
    return _read_calibration(arrays)


def _read_calibration(arrays):
    if "calibration" not in arrays:
        return None
    cal = json.loads(str(arrays["calibration"]))
    cal.update(A=arrays["calibration_A"], b=arrays["calibration_b"])
    return cal


def read_model(path):
    """Read a model file: dict with W, O, bias, X (or None), fixed_features, node_ids,
    config, lr_used, history, calibration (or None).  InputError for anything that is not one."""
    arrays = load_npz(path)
    if str(arrays.get("format", "")) != MODEL_FORMAT:
        raise InputError(f"{path}: not a caps2ne_np model file (no format tag)")
    if int(arrays["version"]) > MODEL_VERSION:
        raise InputError(
            f"{path}: model format version {int(arrays['version'])} is newer "
            f"than this caps2ne_np supports ({MODEL_VERSION}); upgrade caps2ne_np"
        )
    _check_model_arrays(path, arrays)
    try:
        config = json.loads(str(arrays["config"]))
        history = json.loads(str(arrays["history"]))
        calibration = _read_calibration(arrays)
    except (TypeError, ValueError) as err:
        raise InputError(
            f"{path}: damaged model file (config, history or calibration is not "
            f"JSON: {' '.join(str(err).split())}); write it again"
        ) from None
    if not isinstance(config, dict):
        raise InputError(f"{path}: damaged model file (config is not a JSON object)")
    config.setdefault("skipgram_weight", 0.0)  # older files: the paper's loss
    config.setdefault("spectral", "none")  # files written before the spectral start
    return dict(
        W=arrays["W"],
        O=arrays["O"],
        bias=arrays["bias"],
        X=arrays.get("X"),
        fixed_features=bool(arrays["fixed_features"]),
        node_ids=[str(s) for s in arrays["node_ids"]],
        lr_used=config.pop("lr_used", None),
        config=config,
        history=history,
        calibration=calibration,
    )


# Trained parameters are of order 0.01-100; beyond this a product of two overflows float32.
HUGE = 1e18


def _check_model_arrays(path, arrays):
    """InputError (one line) unless the arrays form a model: W (I, k, d), O (N, k),
    bias (N,), X (N, d) unless fixed features, N node ids, all finite and below HUGE."""
    required = ["W", "O", "bias", "node_ids", "config", "history", "fixed_features"]
    missing = [name for name in required if name not in arrays]
    if not missing and not bool(arrays["fixed_features"]) and "X" not in arrays:
        missing.append("X")
    if missing:
        raise InputError(
            f"{path}: damaged model file (no {', '.join(missing)}); write it again "
            "(train --model-out)"
        )
    W, O, bias = arrays["W"], arrays["O"], arrays["bias"]
    X = arrays.get("X") if not bool(arrays["fixed_features"]) else None

    def bad(what):
        raise InputError(f"{path}: damaged model file ({what}); write it again (train --model-out)")

    for name, a, ndim in (("W", W, 3), ("O", O, 2), ("bias", bias, 1), ("X", X, 2)):
        if a is not None and (a.ndim != ndim or not np.issubdtype(a.dtype, np.floating)):
            bad(f"{name} has shape {a.shape} {a.dtype}, expected a {ndim}-D float array")
    n, k = O.shape
    if W.shape[1] != k:
        bad(f"W has shape {W.shape}, O {O.shape}: W must be (q-1, k, d) with k = {k}")
    if bias.shape != (n,):
        bad(f"bias has shape {bias.shape}, expected ({n},)")
    if X is not None and X.shape != (n, W.shape[2]):
        bad(f"X has shape {X.shape}, expected ({n}, {W.shape[2]})")
    if np.shape(arrays["node_ids"]) != (n,):
        bad(f"{np.size(arrays['node_ids'])} node ids for the {n} rows of O")
    for name, a in (("W", W), ("O", O), ("bias", bias), ("X", X)):
        if a is None or a.size == 0:
            continue
        finite = np.isfinite(a)
        if not finite.all():
            bad(f"{name} holds {int((~finite).sum())} NaN or infinite values")
        top = float(np.max(np.abs(a)))
        if top > HUGE:
            bad(f"{name} holds values up to {top:.3g}, beyond {HUGE:g}")
