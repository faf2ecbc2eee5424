"""A run's schedule: the batches of an epoch and the learning rate of every step.

``Schedule`` is the one owner of both.  ``n_batches`` (ceil(N T / B), the authors'
epoch) is computed once per run, by ``for_walks`` from the resolved configuration;
the rate of global step t is ``rates.learning_rate``'s.  The epoch loop
(loop.run_epochs) asks it for the rates of each round and hands them to the engine,
which passes each step's rate to its Adam step (optim.Adam.step's ``lr``: the
engines' optimizers hold no rate); after the round the loop records the rate of the
last step trained (``last``), which the history, the progress bar, the estimator's
``lr_``, the model file and the checkpoints (``adam_lr``) read.  The engines read the
batches per epoch here too: nothing else computes them.
"""

from dataclasses import dataclass

from ..walks import walks as walks_mod
from .options.rates import learning_rate


@dataclass
class Schedule:
    """The steps of a run of ``cfg`` (resolved: presets.resolve) and their rates.

    cfg        the resolved TrainConfig (epochs, lr, lr_schedule, lr_floor)
    n_batches  batches per epoch
    last       the rate of the last step trained (set by the loop: ``cfg.lr`` before the
               first step, a resumed run's from its checkpoint)
    """

    cfg: object
    n_batches: int
    last: float | None = None

    @classmethod
    def for_walks(cls, cfg, n_walks):
        """The schedule of ``n_walks`` walks per epoch (N T) in batches of
        ``cfg.batch_size``."""
        return cls(cfg, walks_mod.batches_per_epoch(n_walks, cfg.batch_size))

    @classmethod
    def for_graph(cls, cfg, n_nodes):
        """The schedule of a graph of ``n_nodes`` nodes: T = ``cfg.walks_per_node`` walks
        start from every node in an epoch."""
        return cls.for_walks(cfg, n_nodes * cfg.walks_per_node)

    @property
    def total_steps(self):
        return self.cfg.epochs * self.n_batches

    def rate(self, step):
        """Adam's rate at global step ``step`` (0-based; rates.learning_rate)."""
        return learning_rate(self.cfg, self.cfg.lr, step, self.total_steps)

    def rates(self, step, n):
        """The rates of the ``n`` steps from ``step`` on (a round)."""
        return [self.rate(step + r) for r in range(n)]

    def trained(self, step):
        """Record that global step ``step`` was the last one trained."""
        self.last = self.rate(step)
