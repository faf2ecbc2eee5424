"""The estimator's parameters (caps2ne_np/estimator/signature.py), derived from the one
table of options: scikit-learn's get_params, set_params, clone and repr read the
generated signature; the parameters map back onto every TrainConfig field; and the
estimator's modules import no other module's private names."""

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest
from sklearn.base import clone

from caps2ne_np.defaults import DEFAULTS, OPTIONS
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.estimator.signature import DEFAULTS_BY_NAME, ESTIMATOR_NAMES, OWN_DEFAULTS
from caps2ne_np.training.options.config import TrainConfig

PACKAGE = Path(__file__).resolve().parents[1] / "caps2ne_np"


def test_the_parameters_are_the_options_under_their_estimator_names():
    names = {ESTIMATOR_NAMES.get(k, k) for k in OPTIONS} | set(OWN_DEFAULTS)
    assert set(Caps2NE().get_params()) == names
    assert {f.name for f in fields(TrainConfig)} == set(OPTIONS)
    params = Caps2NE().get_params()
    for option, default in DEFAULTS.items():
        assert params[ESTIMATOR_NAMES.get(option, option)] == default, option
    assert params["engine"] == "single" and params["parallel"] == "sync"
    assert params["progress"] is False and params["ray_address"] is None


def test_get_params_set_params_clone_and_repr():
    model = Caps2NE(dim=16, n_jobs=2, targets=(1, 2), random_state=3)
    assert model.get_params()["dim"] == 16 and model.get_params()["targets"] == (1, 2)
    assert repr(model) == "Caps2NE(dim=16, n_jobs=2, random_state=3, targets=(1, 2))"
    twin = clone(model)
    assert twin is not model and twin.get_params() == model.get_params()
    twin.set_params(dim=8, engine="ray")
    assert (twin.dim, twin.engine, model.dim) == (8, "ray", 16)
    assert repr(Caps2NE()) == "Caps2NE()"
    with pytest.raises(TypeError, match="dim"):
        Caps2NE(dimension=3)
    signature = inspect.signature(Caps2NE)
    assert list(signature.parameters) == list(DEFAULTS_BY_NAME)
    with pytest.raises(ValueError, match="Invalid parameter"):
        Caps2NE().set_params(dimension=3)


def test_train_config_maps_every_parameter_onto_its_field():
    model = Caps2NE(dim=24, n_jobs=3, random_state=7, spectrum_power=0.75, targets=[1, 2])
    cfg = model.train_config()
    assert (cfg.dim, cfg.threads, cfg.seed) == (24, 3, 7)
    assert cfg.spectrum_power == "0.75" and cfg.targets == (1, 2)
    default = Caps2NE(random_state=0).train_config()
    for option in OPTIONS:
        if option not in ("threads", "seed"):
            assert getattr(default, option) == DEFAULTS[option], option


def _private_imports(path):
    """(module, name) of every ``from M import _name`` in the file at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


@pytest.mark.parametrize(
    "module",
    [
        "estimator/caps2ne.py",
        "estimator/save_load.py",
        "estimator/inputs.py",
        "estimator/signature.py",
        "cli/train.py",
        "training/trainer.py",
        "training/engines.py",
        "training/train.py",
        "training/loop.py",
        "training/budget.py",
        "spectral/structure.py",
    ],
)
def test_no_private_name_crosses_a_module(module):
    assert _private_imports(PACKAGE / module) == []
