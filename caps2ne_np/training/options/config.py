"""A run's options: ``TrainConfig``, every option with its default from
``defaults.OPTIONS`` (the model's own, ``ModelConfig``, live in model/model_config.py).

The rest of a run's configuration has a module each, imported from there: the memory
estimate a run checks before it allocates (memory.py: ``step_memory``,
``check_step_memory``, ``spectral_memory``, ``check_run_memory``), the preset rules that
fill unset options (presets.py: ``resolve``, ``preset_for``, ``budget_epochs``,
``sampled_size``), the checks (validation.py: ``check_types``, ``validate``,
``range_text``), the learning rate (rates.py: ``converge_lr``, ``learning_rate``,
``LR_TINY``) and the thread count a run uses by default (kernels/thread_layer.py:
``usable_cores``).
"""

from dataclasses import asdict, field, make_dataclass

from ...defaults import OPTIONS
from ...model.model_config import ModelConfig
from .memory import check_step_memory

__all__ = ["TrainConfig"]

KIND_TYPES = {"int": int, "float": float, "choice": str, "flag": bool, "positions": object}
"""The field type of each kind of ``defaults.Option`` (None is allowed wherever a preset
or a rule fills the value)."""


class _Methods:
    """What a TrainConfig does beyond holding the options."""

    def model_config(self):
        """The options that change the math (model/model_config.py)."""
        return ModelConfig(
            self.routing_iters,
            self.routing_rule,
            self.routing_scale,
            self.grad_mode,
            float(self.skipgram_weight or 0.0),
            int(self.skipgram_negatives),
        )

    def to_dict(self):
        """The options by name, JSON-ready (``targets`` as a list when positions)."""
        d = asdict(self)
        if not isinstance(d["targets"], str):
            d["targets"] = [int(t) for t in d["targets"]]
        return d

    def check_step_memory(self, n_nodes):
        """``memory.check_step_memory`` of this run on ``n_nodes`` nodes (sparse
        features: the check validation.validate runs before any allocation, through the
        config, since validation.py sits below this module)."""
        check_step_memory(self, n_nodes, self.feat_dim, sparse=True)


TrainConfig = make_dataclass(
    "TrainConfig",
    [
        (name, KIND_TYPES[option.kind] | None, field(default=option.default))
        for name, option in OPTIONS.items()
    ],
    bases=(_Methods,),
)
TrainConfig.__module__ = __name__  # (make_dataclass names its own caller from 3.12 on)
TrainConfig.__doc__ = """Every option of a training run: one field per row of
``defaults.OPTIONS``, in its order, with its default; each row's help text says what the
option is, its unit and its paper symbol (``caps2ne train --help`` prints them).  None
marks an option a preset or a rule fills (``presets.resolve``)."""
