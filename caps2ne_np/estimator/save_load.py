"""The estimator's model file: ``Caps2NE.save`` and ``Caps2NE.load`` through
io/modelfile.py (``save_estimator``, ``load_estimator``), and the record of the
parameters as the user gave them that the file keeps (``given_params``)."""

import numpy as np

from ..io.modelcheck import default_run
from ..io.modelfile import read_model, save_model
from ..training.options.config import TrainConfig
from .signature import ESTIMATOR_NAMES


def save_estimator(model, path, overwrite=False):
    """Write fitted ``model``'s parameters, config, node ids, history, ``calibration_``
    and ``propagation_`` (when set) and its run record to one .npz (``Caps2NE.save``)."""
    save_model(
        path,
        model.params_(),
        model.node_ids_,
        model.config_,
        model.lr_,
        model.history_,
        overwrite=overwrite,
        calibration=getattr(model, "calibration_", None),
        run=getattr(model, "run_", None),
        propagation=getattr(model, "propagation_", None),
    )


def load_estimator(cls, path):
    """A ``cls`` (Caps2NE) fitted from the model file at ``path`` (``Caps2NE.load``)."""
    m = read_model(path)
    run = m["run"] if m["run"] is not None else default_run()
    names = set(cls().get_params())
    if run["params"] is not None:  # the parameters as the user gave them
        params = {k: v for k, v in run["params"].items() if k in names}
    else:  # an older file: its resolved config, but what resolve set from the graph
        # (the rate, the epoch budget, |V'| = N - 1, the spectral start) left unset
        keys = set(TrainConfig.__dataclass_fields__) - {"lr", "epochs", "num_sampled"}
        params = {
            ESTIMATOR_NAMES.get(k, k): v
            for k, v in m["config"].items()
            if k in keys and not (k == "spectral" and v == "none")
        }
    model = cls(**params)
    model.directed_, model.keep_self_loops_ = run["directed"], run["keep_self_loops"]
    model.run_ = run
    model.O_, model.W_, model.bias_, model.X_ = m["O"], m["W"], m["bias"], m["X"]
    model.fixed_features_ = m["fixed_features"]
    model.node_ids_ = list(m["node_labels"])
    model.nodes_ = model.node_ids_
    model.history_ = m["history"]
    model.config_ = m["config"]
    model.lr_ = m["lr_used"]
    if m["calibration"] is not None:
        model.calibration_ = m["calibration"]
    if m.get("propagation") is not None:
        from ..spectral.propagation import Propagated

        model.propagation_ = Propagated(**m["propagation"])
    return model


def given_params(model):
    """``model.get_params()`` as JSON values (for the model file's ``run``): a
    ``random_state`` that is not an int or None is stored as the seed it gave."""
    out = {}
    for key, value in model.get_params().items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, tuple):
            value = [v.item() if isinstance(v, np.generic) else v for v in value]
        if key == "random_state" and not (value is None or isinstance(value, int)):
            value = model.seed_
        out[key] = value
    return out
