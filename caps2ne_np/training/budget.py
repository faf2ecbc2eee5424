"""A budget that stops when the embedding is done (``--stop auto``), and the label-free
measures of an embedding it and the ``--propagate auto`` rule read.  docs/training.md,
"When to stop".

Measures (none reads a label):

* ``drift(O_prev, O)``: |O_t - O_{t-1}|_F / |O_t|_F, how much an epoch moved the o_v;
* ``propagation.holdout`` and ``propagation.edge_measures`` (model/propagation.py): the
  link-prediction AUC of held-out edges by the o_v, by their directions, and by the
  o_v propagated over the graph without those edges.

* ``structure(A, seed)``: how clearly the graph itself holds its edges, before any
  training: the link-prediction AUC of held-out edges by a rank-STOP_RANK factorisation
  of the graph without them (ProNE's first stage, ``propagation.spectral_test``).

The stop rule (``StopRule``, built by ``stop_rule(cfg, structure)`` from the
``graph_structure`` that ``loop.set_up`` measures) has two parts:

1. after epoch 1, stop when structure >= STOP_STRUCTURE: on such graphs the spectral
   start and one epoch hold what the later epochs would add (their written score did
   not rise after epoch 1 on any of the panel's graphs of this kind);
2. after each epoch t >= 2, stop when drift_t < STOP_DRIFT.

docs/training.md, "When to stop", has the panel that chose the measures and thresholds.
``run_epochs`` (loop.py) asks the rule after every epoch; the run keeps the schedule of
its full budget (the rate of the epochs it trains does not change), so a stopped run is
the first epochs of the full one.
"""

import logging
import time

import numpy as np

log = logging.getLogger(__name__)

STOP_DRIFT = 0.2
"""--stop auto ends the run after the first epoch whose drift is below this.  Chosen on
the panel (docs/results/propagate_panel.md, "The stop rule"): the largest threshold
that keeps every graph measured within 0.5 point of its full budget's propagated score
(0.3 stops POS after 5 of 13 epochs, 0.78 below)."""


STOP_STRUCTURE = 0.68
"""--stop auto ends the run after its first epoch when ``structure`` is at least this.
Chosen on the panel (docs/results/stop_structure.md, 3 seeds each): 0.70 to 0.86 on the
graphs whose written score did not rise after the first epoch (Cora, Citeseer, Pubmed,
PPI, LFR 1k at mixing 0.3 and 3k at 0.5), 0.43 to 0.66 on those where later epochs
added 1 to 2 points (POS, BlogCatalog, LFR at mixing 0.6 and 0.7): the middle of the
gap."""
STOP_RANK = 32
"""The rank of the factorisation ``structure`` measures (graphs of fewer than 4 x this
many nodes are not measured): 32 separates the panel's graphs as 64 and 128 do (gaps of
0.04 between the groups' seed ranges at each rank), at the least cost: 0.05 to 0.25 s up
to 5,000 nodes, 1 s at 30,000 (docs/results/stop_structure.md)."""


def structure(A, seed, progress=None):
    """The link-prediction AUC (float) of a seeded sample of held-out edges of ``A``
    (symmetric scipy.sparse, ``propagation.holdout``) by the rank-``STOP_RANK`` ProNE
    factorisation of the graph without them, or None when it cannot tell: fewer than
    4 STOP_RANK nodes or 20 edges, no edge that can be held out (every edge has an end
    of degree 1), or no non-edge found (a nearly complete graph).  ``progress``: a
    spectral.Stage told how far along it is (None: a Stage of its own, which logs)."""
    from ..model import propagation, spectral

    n = A.shape[0]
    if n < 4 * STOP_RANK or A.nnz < 40:
        return None
    if progress is None:
        progress = spectral.Stage(
            "stop rule",
            f"a rank-{STOP_RANK} factorisation of the graph ({n:,} nodes) without a sample "
            "of its edges, to measure how well it predicts them",
        )
    test = propagation.spectral_test(A, STOP_RANK, seed, factor_only=True, progress=progress)
    value = test["auc_factor"]
    return value if np.isfinite(value) else None


def drift(O_prev, O):
    """|O - O_prev|_F / |O|_F (float): the relative change of the o_v over an epoch."""
    O_prev = np.asarray(O_prev, dtype=np.float64)
    O = np.asarray(O, dtype=np.float64)
    norm = float(np.linalg.norm(O))
    return float(np.linalg.norm(O - O_prev)) / max(norm, 1e-300)


class StopRule:
    """``rule(epoch, params) -> bool``: True to end the run after ``epoch`` (1-based):
    after epoch 1 when the graph's ``structure`` (None: not measured) is at least
    ``first`` (default STOP_STRUCTURE); after a later epoch when the drift of the o_v
    over it is below ``threshold`` (default STOP_DRIFT).  ``drifts`` keeps what it
    measured; ``stopped`` is True once it ended the run.  Its state goes into every
    checkpoint (``checkpoint``, ``resume``), so that a resumed run stops where the
    uninterrupted one does."""

    def __init__(self, threshold=None, structure=None, first=None):
        self.threshold = float(STOP_DRIFT if threshold is None else threshold)
        self.structure = structure
        self.first = float(STOP_STRUCTURE if first is None else first)
        self.previous = None
        self.drifts = []
        self.stopped = False

    def epochs_at_most(self, epochs):
        """The epochs a run of ``epochs`` trains at most, as known before training: 1
        when the structure part will end it after epoch 1."""
        if self.structure is not None and self.structure >= self.first:
            return min(epochs, 1)
        return epochs

    def checkpoint(self, mid_epoch):
        """The rule's state for a checkpoint: (a JSON-able dict: whether it ended the run
        and the drifts so far; arrays: ``stop_previous``, the o_v of the last epoch end
        as float32, exactly the trained ones, only ``mid_epoch``: at an epoch end they
        are the checkpoint's own o_v)."""
        stored = {"stopped": self.stopped, "drifts": list(self.drifts)}
        arrays = {}
        if mid_epoch and self.previous is not None:
            arrays["stop_previous"] = self.previous.astype(np.float32)
        return stored, arrays

    def resume(self, state, params, arrays=None):
        """Before the first epoch (``run_epochs``): the rule as the resumed run left it.
        ``state``: the checkpoint's (``LoopState.to_dict`` and, as ``stop``, the dict of
        ``checkpoint``); ``arrays``: the checkpoint's extra arrays.  A run resumed at the
        end of an epoch compares its next epoch with the o_v it resumed from, one resumed
        within an epoch with the ``stop_previous`` it stored, as the uninterrupted run
        would; a checkpoint of a run the rule ended says so (``stopped``).  A checkpoint
        written without the rule's state (by a ``--stop none`` run, or before it was
        stored) resumed within an epoch decides from the epoch after its first."""
        stored = state.get("stop") or {}
        self.stopped = bool(stored.get("stopped", False))
        self.drifts = [float(d) for d in stored.get("drifts", [])]
        if state["epoch"] > 0 and state["batch"] == 0:
            self.previous = np.array(params.O, dtype=np.float64)
        elif arrays is not None and "stop_previous" in arrays:
            self.previous = np.array(arrays["stop_previous"], dtype=np.float64)

    def __call__(self, epoch, params):
        if epoch == 1 and self.structure is not None and self.structure >= self.first:
            log.info(
                "stop after epoch 1: the graph's own rank-%d factors predict held-out "
                "edges with AUC %.3f (>= %g, --stop auto; --epochs N trains exactly N)",
                STOP_RANK,
                self.structure,
                self.first,
            )
            self.stopped = True
            return True
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
            self.stopped = True
            return True
        return False


def stop_rule(cfg, structure=None):
    """The run's stop rule (a new ``StopRule``), or None for ``cfg.stop`` 'none'.
    ``structure``: the graph's (``graph_structure``), which the rule's first part reads;
    None, the drift part alone."""
    if getattr(cfg, "stop", "none") != "auto":
        return None
    return StopRule(structure=structure)


def graph_structure(cfg, graph):
    """``structure`` of the graph (indptr, indices, weights) of a run with options
    ``cfg``, seeded by ``cfg.seed`` and logged; None when ``cfg.stop`` is not 'auto'
    (nothing measured) or the graph is too small to tell."""
    if getattr(cfg, "stop", "none") != "auto":
        return None
    from ..kernels.rng import derive_seed
    from ..model import spectral

    indptr, indices, weights = graph
    n = int(np.asarray(indptr).shape[0] - 1)
    t0 = time.perf_counter()
    value = structure(
        spectral.adjacency(indptr, indices, weights, n),
        derive_seed(cfg.seed, "stop structure") % (2**32),
    )
    if value is not None:
        then = (
            "one epoch"
            if value >= STOP_STRUCTURE
            else f"below {STOP_STRUCTURE:g}: until an epoch moves the o_v less than "
            f"{STOP_DRIFT:g} of their norm"
        )
        log.info(
            "stop rule: the graph's own rank-%d factors predict held-out edges with AUC "
            "%.3f (%.2f s), so %s",
            STOP_RANK,
            value,
            time.perf_counter() - t0,
            then,
        )
    return value
