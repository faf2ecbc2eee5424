"""The checks of a model file's contents (io/modelfile.py reads and writes the file):
the format tag and version, the arrays, unique node ids, the config by the rows of
``defaults.OPTIONS`` (the ranges and choices ``validation.validate`` applies), the ``run``
member, the calibration and the propagation.  Each raises InputError with one line
naming the first problem; nothing a model holds is used before ``check_model`` passed.
"""

import json
import math

import numpy as np

from ..defaults import CALIBRATION_METHODS, OPTIONS
from ..errors import InputError
from .files import first_repeat

MODEL_FORMAT = "caps2ne_np.model"
CHECKPOINT_FORMAT = "caps2ne_np.checkpoint"  # training/checkpoint.py's FORMAT
MODEL_VERSION = 1


CALIBRATION_KEYS = ("calibration", "calibration_A", "calibration_b")

RUN_KEYS = {
    "directed": (bool, False),
    "keep_self_loops": (bool, False),
    "parallel": (str, "sync"),
    "params": (dict, None),
}
"""The keys of a model file's ``run`` member: type, and the value of a file without it."""


def default_run():
    """The ``run`` of a file written before it was stored (RUN_KEYS' defaults)."""
    return {key: default for key, (_, default) in RUN_KEYS.items()}


def check_run(path, run):
    """``run`` (RUN_KEYS) with the defaults of the keys it lacks; InputError if damaged."""
    if not isinstance(run, dict):
        _bad(path, f"run is a JSON {type(run).__name__}, expected an object")
    out = default_run()
    for key, value in run.items():
        kind = RUN_KEYS.get(key, (None,))[0]
        if kind is not None and not isinstance(value, kind) and value is not None:
            _bad(path, f"run {key} is {value!r}, expected a {kind.__name__}")
        out[key] = value
    if out["parallel"] not in ("sync", "async"):
        _bad(path, f"run parallel is {out['parallel']!r}, expected 'sync' or 'async'")
    return out


def stored_json(path, arrays, name):
    """The JSON value stored in the scalar string array ``name``; InputError if damaged."""
    a = arrays[name]
    if np.ndim(a) != 0 or a.dtype.kind != "U":
        _bad(path, f"{name} is a {a.dtype} array of shape {a.shape}, not a JSON string")
    try:
        return json.loads(str(a))
    except ValueError as err:
        _bad(path, f"{name} is not JSON: {' '.join(str(err).split())}")


def _bad(path, what):
    raise InputError(f"{path}: damaged model file ({what}); write it again (train --model-out)")


# --------------------------------------------------------------------------- the config

REQUIRED_CONFIG = ("routing_iters", "routing_rule", "routing_scale", "grad_mode")
"""Config keys inference cannot do without (``infer.model_inputs``): a model file without
one is damaged.  Every other key of ``defaults.OPTIONS`` is checked when present (files
written before it existed load; a new option is checked by its row, nothing to add
here); keys that are in no row are kept as they are."""


def check_option(name, value):
    """``value`` of option ``name`` checked by its row of ``defaults.OPTIONS`` (the kind,
    range and choices ``validation.validate`` applies): the value (an integral float of an
    'int' option as int), or a ValueError saying what is wrong."""
    option = OPTIONS[name]
    if value is None and option.default is None:
        return None  # filled by a preset or a rule (routing_scale: q - 1)
    kind = option.kind
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be an integer, got {value!r}")
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"must be finite, got {value!r}")
    elif kind == "choice":
        if value not in option.choices:
            raise ValueError(f"must be one of {option.choices}, got {value!r}")
    elif kind == "flag":
        if not isinstance(value, bool):
            raise ValueError(f"must be true or false, got {value!r}")
    elif kind == "positions":
        if not (
            value in ("all", "random")
            or (
                isinstance(value, list)
                and value
                and all(isinstance(p, int) and not isinstance(p, bool) for p in value)
            )
        ):
            raise ValueError(f"must be 'all', 'random' or a list of positions, got {value!r}")
    if kind in ("int", "float"):
        low_open, high_open = "low" in option.open, "high" in option.open
        if option.low is not None and (value <= option.low if low_open else value < option.low):
            raise ValueError(f"must be {'>' if low_open else '>='} {option.low:g}, got {value!r}")
        if option.high is not None and (value >= option.high if high_open else value > option.high):
            raise ValueError(f"must be {'<' if high_open else '<='} {option.high:g}, got {value!r}")
    return value


def check_config(path, config, k, n_slots, d=None):
    """The config of a model file checked as training checks its options (``check_option``)
    and against the arrays (dim = k, walk_length = q = n_slots + 1, feat_dim = d of a
    trained x; ``d`` None: fixed features, whose size the config does not set); InputError,
    one line."""
    if not isinstance(config, dict):
        _bad(path, f"config is a JSON {type(config).__name__}, expected an object")
    missing = [key for key in REQUIRED_CONFIG if key not in config]
    if missing:
        _bad(path, f"config has no {', '.join(missing)}")
    config = dict(config)
    for name in OPTIONS:
        if name in config:
            try:
                config[name] = check_option(name, config[name])
            except ValueError as err:
                _bad(path, f"config {name} {err}")
    if config.get("dim", k) != k:
        _bad(path, f"config dim is {config['dim']} but O has k = {k} columns")
    if d is not None and config.get("feat_dim", d) != d:
        _bad(path, f"config feat_dim is {config['feat_dim']} but W and X have d = {d}")
    if config.get("walk_length", n_slots + 1) != n_slots + 1:
        _bad(path, f"config walk_length is {config['walk_length']} but W has {n_slots} slots")
    targets = config.get("targets")
    if isinstance(targets, list) and not all(0 <= t < n_slots + 1 for t in targets):
        _bad(path, f"config targets {targets} are not positions 0..{n_slots}")
    return config


# --------------------------------------------------------------------------- the calibration

CALIBRATION_META = {
    "method": lambda v: v in CALIBRATION_METHODS,
    "samples": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
    "positions": lambda v: (
        isinstance(v, list)
        and v != []
        and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in v)
    ),
}
"""Keys a stored calibration's JSON must hold, and their rule (``infer.calibrate`` writes
them; ``n`` and ``seed`` are informative)."""

RECALIBRATE = (
    "recalibrate: caps2ne infer --model MODEL --graph TRAINING_GRAPH --save-calibration "
    "(Caps2NE.calibrate in Python)"
)


def check_calibration(calibration, k, where="the calibration"):
    """A calibration (``infer.calibrate``: A (k, k), b (k,), method, samples, positions)
    checked for embeddings with k columns: finite, below ``HUGE``, A not all zero;
    InputError, one line,
    naming the shapes found or saying how to recalibrate."""
    if not isinstance(calibration, dict):
        raise InputError(
            f"{where} is a {type(calibration).__name__}, expected a dict (infer.calibrate)"
        )
    if "A" not in calibration or "b" not in calibration:
        raise InputError(f"{where} has no {'A' if 'A' not in calibration else 'b'}; {RECALIBRATE}")
    A, b = np.asarray(calibration["A"]), np.asarray(calibration["b"])
    if A.shape != (k, k) or b.shape != (k,):
        raise InputError(
            f"{where} has A of shape {A.shape} and b of shape {b.shape}; embeddings with "
            f"k = {k} need A ({k}, {k}) and b ({k},); {RECALIBRATE}"
        )
    for name, a in (("A", A), ("b", b)):
        if not np.issubdtype(a.dtype, np.number):
            raise InputError(f"{where}: {name} holds {a.dtype}, not numbers; {RECALIBRATE}")
        finite = np.isfinite(a)
        if not finite.all():
            raise InputError(
                f"{where}: {name} holds {int((~finite).sum())} NaN or infinite value(s); "
                f"{RECALIBRATE}"
            )
        top = float(np.max(np.abs(a))) if a.size else 0.0
        if top > HUGE:
            raise InputError(
                f"{where}: {name} holds values up to {top:.3g}, beyond {HUGE:g} (a fitted "
                f"map is of the order of |o_v| / |e|); {RECALIBRATE}"
            )
    if not A.any():
        raise InputError(
            f"{where}: A is all zero (every node would get the same row b); {RECALIBRATE}"
        )
    for key, ok in CALIBRATION_META.items():
        if key in calibration and not ok(calibration[key]):
            raise InputError(f"{where}: {key} = {calibration[key]!r} is not valid; {RECALIBRATE}")
    return calibration


def _read_calibration(path, arrays, k):
    present = [key for key in CALIBRATION_KEYS if key in arrays]
    if not present:
        return None
    if len(present) != len(CALIBRATION_KEYS):
        missing = ", ".join(key for key in CALIBRATION_KEYS if key not in arrays)
        raise InputError(f"{path}: damaged calibration (no {missing}); {RECALIBRATE}")
    meta = stored_json(path, arrays, "calibration")
    if not isinstance(meta, dict):
        raise InputError(
            f"{path}: damaged calibration (a JSON {type(meta).__name__}, expected an object); "
            f"{RECALIBRATE}"
        )
    missing = [key for key in CALIBRATION_META if key not in meta]
    if missing:
        raise InputError(f"{path}: damaged calibration (no {', '.join(missing)}); {RECALIBRATE}")
    cal = dict(meta, A=arrays["calibration_A"], b=arrays["calibration_b"])
    return check_calibration(cal, k, f"{path}: the stored calibration")


# --------------------------------------------------------------------------- the model


def check_model(path, arrays):
    """``(config, history, calibration)`` of the arrays of a model file, after checking
    all of it (format, version, arrays, node ids, config, calibration); InputError with
    one line naming the first problem."""
    fmt = arrays.get("format")
    if fmt is None or np.ndim(fmt) != 0 or str(fmt) != MODEL_FORMAT:
        if fmt is not None and np.ndim(fmt) == 0 and str(fmt) == CHECKPOINT_FORMAT:
            raise InputError(
                f"{path}: a training checkpoint, not a model file; continue it with train "
                "--resume DIR, or write a model with train --model-out"
            )
        raise InputError(f"{path}: not a caps2ne_np model file (no format tag)")
    version = arrays.get("version")
    if version is None:
        _bad(path, "no version")
    if np.ndim(version) != 0 or version.dtype.kind not in "iu":
        _bad(path, f"version is {version.tolist()!r} ({version.dtype}), expected an integer")
    if int(version) > MODEL_VERSION:
        raise InputError(
            f"{path}: model format version {int(version)} is newer "
            f"than this caps2ne_np supports ({MODEL_VERSION}); upgrade caps2ne_np"
        )
    if int(version) < 1:
        _bad(path, f"version is {int(version)}, expected 1..{MODEL_VERSION}")
    _check_model_arrays(path, arrays)
    ids = arrays["node_ids"]
    if ids.dtype.kind != "U":
        _bad(path, f"node_ids is a {ids.dtype} array, expected strings")
    repeat = first_repeat(ids.tolist())
    if repeat is not None:
        _bad(
            path, f"node id {str(ids[repeat[1]])!r} occurs twice (rows {repeat[0]} and {repeat[1]})"
        )
    if "node_labels" in arrays:
        labels = arrays["node_labels"]
        if labels.dtype.kind not in "iu" or labels.shape != ids.shape:
            _bad(path, f"node_labels is a {labels.dtype} array of shape {labels.shape}")
        if [str(x) for x in labels.tolist()] != ids.tolist():
            _bad(path, "node_labels do not match node_ids")
    k, n_slots = arrays["O"].shape[1], arrays["W"].shape[0]
    d = None if bool(arrays["fixed_features"]) else arrays["W"].shape[2]
    config = check_config(path, stored_json(path, arrays, "config"), k, n_slots, d)
    lr = config.get("lr_used")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float))):
        _bad(path, f"config lr_used is {lr!r}, expected a number")
    history = stored_json(path, arrays, "history")
    if not isinstance(history, list):
        _bad(path, f"history is a JSON {type(history).__name__}, expected a list")
    return config, history, _read_calibration(path, arrays, k)


# Trained parameters are of order 0.01-100; beyond this a product of two overflows float32.
HUGE = 1e18


def _check_model_arrays(path, arrays):
    """InputError (one line) unless the arrays form a model: W (I, k, d), O (N, k),
    bias (N,), X (N, d) unless fixed features, N node ids, all finite and below HUGE."""
    required = ["W", "O", "bias", "node_ids", "config", "history", "fixed_features"]
    missing = [name for name in required if name not in arrays]
    if missing:
        _bad(path, f"no {', '.join(missing)}")
    fixed = arrays["fixed_features"]
    if np.ndim(fixed) != 0 or fixed.dtype.kind != "b":
        _bad(path, f"fixed_features is {fixed.tolist()!r} ({fixed.dtype}), expected a boolean")
    W, O, bias = arrays["W"], arrays["O"], arrays["bias"]
    X = arrays.get("X") if not bool(fixed) else None

    def bad(what):
        _bad(path, what)

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
    if X is None and not bool(fixed):
        bad("no X, though the features were trained (fixed_features is false)")


def read_propagation(path, arrays):
    """The stored propagation, checked: dict(E, P) (spectral/propagation.py's ``Propagated``
    takes them).  Both real numbers, finite, not all zero; P's largest entry within
    [1 / HUGE, HUGE] (E = rownorm(O~ P) does not depend on P's scale, but beyond these
    O~ P overflows or vanishes: a P scaled by 1e300 gave zero rows)."""
    E, P = arrays.get("propagated"), arrays.get("propagation_P")
    n, k = arrays["O"].shape
    if E is None or P is None:
        _bad(path, "one of propagated and propagation_P without the other")
    for name, a in (("propagated", E), ("propagation_P", P)):
        if a.dtype.kind not in "fiu":
            _bad(path, f"{name} holds {a.dtype}, not real numbers")
    if E.shape != (n, k) or P.shape != (k, k):
        _bad(
            path,
            f"propagated {E.shape} and propagation_P {P.shape}: expected ({n}, {k}), ({k}, {k})",
        )
    if not (np.isfinite(E).all() and np.isfinite(P).all()):
        _bad(path, "propagated or propagation_P holds NaN or infinite values")
    for name, a in (("propagated", E), ("propagation_P", P)):
        top = float(np.max(np.abs(a))) if a.size else 0.0
        if top == 0:
            _bad(path, f"{name} is all zero")
        if top > HUGE:
            _bad(path, f"{name} holds values up to {top:.3g}, beyond {HUGE:g}")
    top = float(np.max(np.abs(P)))
    if top < 1 / HUGE:
        _bad(path, f"propagation_P holds values only up to {top:.3g}, below {1 / HUGE:g}")
    return dict(E=np.asarray(E, dtype=np.float32), P=np.asarray(P, dtype=np.float64))
