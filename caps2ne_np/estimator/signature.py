"""The estimator's parameters, derived from the one table of a run's options
(``defaults.OPTIONS``, whose keys are config.TrainConfig's fields): each option under
its own name, with its default, but ``threads`` (``n_jobs``, default 1, scikit-learn's
convention) and ``seed`` (``random_state``); then ``progress`` and the engine's options
with engines.fit's defaults.  ``SIGNATURE`` is the keyword-only signature
``Caps2NE.__init__`` shows (scikit-learn's ``get_params``, ``set_params``, ``clone``
and the repr read it); ``config_values`` maps the parameters back onto a TrainConfig's
fields.  No scikit-learn here: the command line reads ``ESTIMATOR_NAMES``."""

import inspect

from ..defaults import DEFAULTS, OPTIONS
from ..training.engines import ENGINE_OPTIONS
from ..training.engines import fit as engine_fit

ESTIMATOR_NAMES = {"threads": "n_jobs", "seed": "random_state"}
"""TrainConfig fields whose estimator parameter has another name."""

CONFIG_NAMES = {name: field for field, name in ESTIMATOR_NAMES.items()}
"""The other way: an estimator parameter -> its TrainConfig field."""

OWN_DEFAULTS = {"progress": False} | {
    name: inspect.signature(engine_fit).parameters[name].default for name in ENGINE_OPTIONS
}
"""The estimator's parameters that are no TrainConfig field, with their defaults (the
engine's: engines.fit's)."""

DEFAULTS_BY_NAME = {ESTIMATOR_NAMES.get(k, k): DEFAULTS[k] for k in OPTIONS} | OWN_DEFAULTS
"""Every parameter of ``Caps2NE.__init__`` -> its default, in the signature's order."""

SIGNATURE = inspect.Signature(
    [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    + [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
        for name, default in DEFAULTS_BY_NAME.items()
    ]
)


def config_values(params, threads, seed, power):
    """TrainConfig's keyword arguments from the estimator's parameters ``params`` (a
    dict by parameter name): the fields under their own names, ``targets`` a string or
    a tuple, and ``threads``, ``seed`` and ``power`` (functions of ``n_jobs``,
    ``random_state`` and ``spectrum_power``: inputs.threads_of, seed_of and power_of)
    converting the three that differ in kind."""
    values = {field: params[ESTIMATOR_NAMES.get(field, field)] for field in OPTIONS}
    targets = values["targets"]
    values["targets"] = targets if isinstance(targets, str) else tuple(targets)
    values["spectrum_power"] = power(values["spectrum_power"])
    values["threads"] = threads(values["threads"])
    values["seed"] = seed(values["seed"])
    return values
