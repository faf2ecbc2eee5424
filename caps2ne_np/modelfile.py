"""The trained-model file: every parameter, the config, node ids and history in
one ``.npz`` (no pickles), written atomically.  Used by ``model.Caps2NE.save`` /
``load`` and by the CLI (which stays clear of scikit-learn's import cost).

Arrays: ``W`` (I, k, d), ``O`` (N, k), ``bias`` (N,), ``X`` (N, d) when the
features were trained (fixed features are the user's data and are not stored),
``node_ids`` (N,) str, ``config`` (JSON of train.TrainConfig plus ``lr_used``),
``history`` (JSON), ``fixed_features`` (bool), ``format`` and ``version``.
"""

import json

import numpy as np

from .errors import InputError
from .io import load_npz, save_npz

MODEL_FORMAT = "caps2ne_np.model"
MODEL_VERSION = 1


def save_model(path, params, node_ids, config, lr, history, overwrite=False):
    """Write ``params`` (core.Params) and their context to ``path`` (atomic)."""
    arrays = dict(W=np.ascontiguousarray(params.W), O=params.O, bias=params.bias,
                  node_ids=np.asarray(list(node_ids), dtype=str),
                  format=np.asarray(MODEL_FORMAT), version=np.int64(MODEL_VERSION),
                  config=np.asarray(json.dumps(dict(config, lr_used=lr))),
                  history=np.asarray(json.dumps(history)),
                  fixed_features=np.bool_(params.fixed_features))
    if not params.fixed_features:
        arrays["X"] = params.X
    save_npz(path, overwrite=overwrite, **arrays)


def read_model(path):
    """Read a model file: dict with W, O, bias, X (or None), fixed_features, node_ids,
    config, lr_used, history.  InputError for anything that is not one."""
    arrays = load_npz(path)
    if str(arrays.get("format", "")) != MODEL_FORMAT:
        raise InputError(f"{path}: not a caps2ne_np model file (no format tag)")
    if int(arrays["version"]) > MODEL_VERSION:
        raise InputError(f"{path}: model format version {int(arrays['version'])} is newer "
                         f"than this caps2ne_np supports ({MODEL_VERSION}); upgrade caps2ne_np")
    config = json.loads(str(arrays["config"]))
    return dict(W=arrays["W"], O=arrays["O"], bias=arrays["bias"], X=arrays.get("X"),
                fixed_features=bool(arrays["fixed_features"]),
                node_ids=[str(s) for s in arrays["node_ids"]],
                lr_used=config.pop("lr_used", None), config=config,
                history=json.loads(str(arrays["history"])))
