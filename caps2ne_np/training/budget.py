"""A budget that stops when the embedding is done (``--stop auto``), and the label-free
measures of an embedding it and the ``--propagate auto`` rule read.  docs/training.md,
"When to stop".

Measures (none reads a label):

* ``drift(O_prev, O)``: |O_t - O_{t-1}|_F / |O_t|_F, how much an epoch moved the o_v;
* ``propagation.holdout`` and ``propagation.edge_measures`` (model/propagation.py): the
  link-prediction AUC of held-out edges by the o_v, by their directions, and by the
  o_v propagated over the graph without those edges.

The stop rule (``StopRule``, built by ``stop_rule(cfg)``): after each epoch t >= 2, stop
when drift_t < STOP_DRIFT (docs/training.md has the panel that chose the measure and the
threshold).  ``run_epochs`` (loop.py) asks it after every epoch; the run keeps the
schedule of its full budget (the rate of the epochs it trains does not change).
"""

import logging

import numpy as np

log = logging.getLogger(__name__)

STOP_DRIFT = 0.2
"""--stop auto ends the run after the first epoch whose drift is below this.  Chosen on
the panel (bench/results/propagate_panel.md, "The stop rule"): the largest threshold
that keeps every graph measured within 0.5 point of its full budget's propagated score
(0.3 stops POS after 5 of 13 epochs, 0.78 below)."""


def drift(O_prev, O):
    """|O - O_prev|_F / |O|_F (float): the relative change of the o_v over an epoch."""
    O_prev = np.asarray(O_prev, dtype=np.float64)
    O = np.asarray(O, dtype=np.float64)
    norm = float(np.linalg.norm(O))
    return float(np.linalg.norm(O - O_prev)) / max(norm, 1e-300)


class StopRule:
    """``rule(epoch, params) -> bool``: True to end the run after ``epoch`` (1-based),
    when the drift of the o_v over that epoch is below ``threshold`` (epoch >= 2; the
    first epoch has no previous o_v).  ``drifts`` keeps what it measured."""

    def __init__(self, threshold=None):
        self.threshold = float(STOP_DRIFT if threshold is None else threshold)
        self.previous = None
        self.drifts = []

    def resume(self, state, params):
        """Before the first epoch (``run_epochs``): a run resumed at the end of an epoch
        compares its next epoch with the o_v it resumed from, as the uninterrupted run
        would; a fresh run, or one resumed within an epoch, decides from the epoch after
        its first (the o_v of the last epoch end are not at hand)."""
        if state["epoch"] > 0 and state["batch"] == 0:
            self.previous = np.array(params.O, dtype=np.float64)

    def __call__(self, epoch, params):
        O = np.array(params.O, dtype=np.float64)
        previous, self.previous = self.previous, O
        if previous is None:
            return False
        d = drift(previous, O)
        self.drifts.append(d)
        if d < self.threshold:
            log.info(
                "stop after epoch %d: the o_v moved %.3f of their norm (< %g, --stop auto; "
                "--epochs N trains exactly N)",
                epoch,
                d,
                self.threshold,
            )
            return True
        return False


def stop_rule(cfg):
    """The run's stop rule (a ``StopRule``), or None for ``cfg.stop`` 'none'."""
    return StopRule() if getattr(cfg, "stop", "none") == "auto" else None
