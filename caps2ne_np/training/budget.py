"""A budget that stops when the embedding is done (``--stop auto``), and the stop rules
that read held-out evidence instead.  docs/training.md, "When to stop".

Measures (none reads a label):

* ``drift(O_prev, O)``: |O_t - O_{t-1}|_F / |O_t|_F, how much an epoch moved the o_v;
* ``propagation.holdout`` and ``propagation.edge_measures`` (spectral/propagation.py): the
  link-prediction AUC of held-out edges by the o_v, by their directions, and by the
  o_v propagated over the graph without those edges;
* the graph's structure (spectral/structure.py, ``structure.measure``): how clearly the
  graph itself holds its edges, before any training.

The stop rule (``StopRule``, built by ``stop_rule(cfg, structure)`` from the
``graph_structure`` that ``loop.set_up`` measures) has two parts:

1. after epoch 1, stop when structure >= STOP_STRUCTURE: on such graphs the spectral
   start and one epoch hold what the later epochs would add (their written score did
   not rise after epoch 1 on any of the panel's graphs of this kind);
2. after each epoch t >= 2, and not before ceil(STOP_FLOOR x the budget's epochs), stop
   when drift_t < STOP_DRIFT.

docs/training.md, "When to stop", has the panel that chose the measures and thresholds.

``--stop holdout`` (``HoldoutRule``) is a validation set instead: ``held_out`` draws a
seeded sample of edges before training (``propagation.holdout``: edges whose ends keep
another edge, and as many non-edges), the run trains on the graph without them, and
after each epoch t >= 2 it stops when the link AUC of those edges by the cosine of the
o_v rose less than HOLDOUT_MIN_GAIN over epoch t.
``--stop loglik`` (``LoglikRule``) holds out the same edges and scores the model by its
own objective instead: a context walk from one end of each held-out edge
(``held_contexts``) and the other end as its target, and after each epoch t >= 2 it
stops when their mean log-likelihood under the full softmax over every node rose less
than LOGLIK_MIN_GAIN over epoch t's.
``run_epochs`` (loop.py) asks the rule after every epoch; the run keeps the schedule of
its full budget (the rate of the epochs it trains does not change), so a stopped run is
the first epochs of the full one.
"""

import dataclasses
import logging
import math
import time

import numpy as np

from ..defaults import HELD_OUT_STOPS
from ..spectral.structure import RANK

log = logging.getLogger(__name__)

STOP_DRIFT = 0.225
"""--stop auto ends the run after the first epoch whose drift is below this.  Chosen on
the tuning graphs whose runs the drift part ends (docs/results/heldout_stop.md: POS,
BlogCatalog, LFR 1k at mixing 0.6 and 3k at 0.7, every epoch scored under both
protocols, 3 seeds but BlogCatalog's 1).  The drift falls with the rate, to the same
value at each epoch on every seed of a graph, so a threshold is a number of epochs per
graph.  POS needs one epoch fewer than the 7 of the threshold before (0.2) to meet its
time target (2x DeepWalk's one epoch; points first: its epoch 6 is 0.34 point below
its full budget, epoch 7 0.20, epoch 5 0.43), so the threshold is the middle of the
gap between POS's epoch-6 drift (0.218 to 0.219 in whole-graph runs, 3 seeds) and the
tuning graphs' next drift above it (BlogCatalog's epoch 4, 0.231 to 0.232).  Every
tuning graph stays within 0.5 point of its full budget under both protocols (LFR 1k at
0.6, which now stops after epoch 3 at drift 0.207, -0.13 / -0.32)."""
STOP_FLOOR = 0.4
"""The drift part ends a run no earlier than after epoch ceil(STOP_FLOOR x the budget's
epochs) (the budget, or --epochs N given with --stop auto: the cap).  The drift alone
cannot meet the tuning graphs' two targets together: BlogCatalog's o_v settle sooner
than POS's while its written score still rises, so it needs a sixth epoch of its 15
(drift 0.185 after epoch 5; 0.51 point below its full budget after 5, 0.45 after 6, 3
seeds) where POS must stop after its sixth of 13 (drift 0.218, time target 2x DeepWalk's
one epoch).  A floor of 0.4 gives BlogCatalog 6 and leaves POS at the 6 the drift gives
it (any share in (1/3, 6/13] does both; 0.4 lies in it); the LFR graphs' budgets of 5
floor at epoch 2, where the rule starts anyway.  docs/training.md, "When to stop"."""


STOP_STRUCTURE = 0.68
"""--stop auto ends the run after its first epoch when ``structure`` is at least this.
Chosen on the panel (docs/results/stop_structure.md, 3 seeds each): 0.70 to 0.86 on the
graphs whose written score did not rise after the first epoch (Cora, Citeseer, Pubmed,
PPI, LFR 1k at mixing 0.3 and 3k at 0.5), 0.43 to 0.66 on those where later epochs
added 1 to 2 points (POS, BlogCatalog, LFR at mixing 0.6 and 0.7): the middle of the
gap."""
HOLDOUT_MIN_GAIN = 0.002
"""--stop holdout ends the run after the first epoch t >= 2 whose held-out AUC rose less
than this over epoch t's (``HoldoutRule``).  Provisional, not measured on the panel:
chosen from two graphs' AUC per epoch (docs/training.md, "When to stop"): Cora 0.9005,
0.9023, 0.9033, 0.9031 stops after epoch 2; an e-mail graph 0.805, 0.828, 0.837, 0.840,
0.839 after epoch 5."""


LOGLIK_MIN_GAIN = 0.01
"""--stop loglik ends the run after the first epoch t >= 2 whose held-out contexts' mean
log-likelihood (nats) rose less than this over epoch t's (``LoglikRule``).  Not the
default: on the graphs the drift part ends (docs/results/heldout_stop.md) the held-out
log-likelihood falls from epoch 1 on POS and the LFR graphs while their score rises, so
at any gain from 0 to 0.05 it stops them after epoch 2, 0.36 to 1.03 points below their
full budgets."""
LOGLIK_CHUNK = 256
"""Held-out contexts scored at a time: a (chunk, N) block of logits, and at most
LOGLIK_LOGITS // N contexts (so 128 MiB of float64 logits at most, on any graph)."""
LOGLIK_LOGITS = 1 << 24


DRIFT_ROWS = 1 << 15
"""Rows per block of ``drift``'s sums: float64 blocks of at most 32 MiB at k = 128,
where whole-table float64 copies cost 3 GB at 1M nodes (docs/results/scale_1m.md)."""


def drift(O_prev, O):
    """|O - O_prev|_F / |O|_F (float): the relative change of the o_v over an epoch; the
    sums of squares in float64, ``DRIFT_ROWS`` rows at a time."""
    O_prev, O = np.asarray(O_prev), np.asarray(O)
    change = total = 0.0
    for a in range(0, O.shape[0], DRIFT_ROWS):
        x = np.asarray(O[a : a + DRIFT_ROWS], dtype=np.float64)
        d = x - np.asarray(O_prev[a : a + DRIFT_ROWS], dtype=np.float64)
        change += float(np.einsum("ij,ij->", d, d))
        total += float(np.einsum("ij,ij->", x, x))
    return float(np.sqrt(change)) / max(float(np.sqrt(total)), 1e-300)


def _drifts_of(epoch):
    """'the drift(s) of epoch(s) 2 (to ``epoch``) was/were' for the log."""
    return "the drift of epoch 2 was" if epoch == 2 else f"the drifts of epochs 2 to {epoch} were"


class StopRule:
    """``rule(epoch, params) -> bool``: True to end the run after ``epoch`` (1-based):
    after epoch 1 when the graph's ``structure`` (None: not measured) is at least
    ``first`` (default STOP_STRUCTURE); after a later epoch, from epoch ``floor`` on
    (``floor_epoch``: ceil(STOP_FLOOR x the budget's epochs); default 2), when the drift
    of the o_v over it is below ``threshold`` (default STOP_DRIFT).  ``drifts`` keeps what it
    measured; ``stopped`` is True once it ended the run.  Its state goes into every
    checkpoint (``checkpoint``, ``resume``), so that a resumed run stops where the
    uninterrupted one does."""

    def __init__(self, threshold=None, structure=None, first=None, floor=2):
        self.threshold = float(STOP_DRIFT if threshold is None else threshold)
        self.structure = structure
        self.first = float(STOP_STRUCTURE if first is None else first)
        self.floor = max(2, int(floor))
        self.previous = None
        self.drifts = []
        self.stopped = False
        self.due = None  # the epoch a late first part ends the run after (_judge_late)

    option = "--stop auto"

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
        stored) is judged where it can be and the log says which epochs cannot
        (``_judge_late``)."""
        stored = state.get("stop")
        self.stopped = bool((stored or {}).get("stopped", False))
        self.drifts = [float(d) for d in (stored or {}).get("drifts", [])]
        epoch, batch = int(state["epoch"]), int(state["batch"])
        if epoch > 0 and batch == 0:
            self.previous = np.array(params.O)  # a copy in the o_v's dtype
        elif arrays is not None and "stop_previous" in arrays:
            self.previous = np.array(arrays["stop_previous"])
        if stored is None and (epoch > 0 or batch > 0):
            self._judge_late(epoch, batch)
        elif epoch > 0 and batch > 0 and self.previous is None:
            self._cannot_measure(epoch, batch)

    def _judge_late(self, epoch, batch):
        """A resume under ``--stop auto`` from a checkpoint written without the rule, at
        ``epoch`` epochs done (and ``batch`` batches into the next): the first part,
        which ends a run after epoch 1, ends it now when the checkpoint is past epoch 1
        (at the end of the epoch it is in, if within one); else the log says which
        epochs' drift the checkpoint cannot give."""
        late = "--stop auto on a checkpoint written without it:"
        if self.structure is not None and self.structure >= self.first and epoch > 0:
            self.due = end = epoch + (batch > 0)
            self.stopped = not batch
            where = f"within epoch {end}" if batch else f"at the end of epoch {epoch}"
            log.info(
                f"{late} the graph's own rank-{RANK} factors predict held-out edges "
                f"with AUC {self.structure:.3f} (>= {self.first:g}), so the rule ends the "
                f"run after epoch 1; this one is {where}, so it ends after epoch {end}"
            )
        elif batch and epoch:
            self._cannot_measure(epoch, batch)
        elif epoch >= 2:
            log.info(
                f"{late} {_drifts_of(epoch)} not measured (the o_v it compares are not in "
                f"it); the rule judges from epoch {epoch + 1} on"
            )

    def _cannot_measure(self, epoch, batch):
        """The log line of a resume within epoch ``epoch`` + 1 without the o_v of its
        start, which that epoch's drift compares with."""
        log.info(
            f"--stop auto: the checkpoint, {batch} batches into epoch {epoch + 1}, holds no "
            f"o_v of epoch {epoch}'s end, so the drift of epoch {epoch + 1} cannot be "
            f"measured{f' (and {_drifts_of(epoch)} not)' if epoch >= 2 else ''}; the rule "
            f"judges from epoch {epoch + 2} on"
        )

    def __call__(self, epoch, params):
        if epoch == self.due:  # resumed within an epoch past the first part's (_judge_late)
            log.info("stop after epoch %d, the end of the epoch the run resumed in", epoch)
            self.stopped = True
            return True
        if epoch == 1 and self.structure is not None and self.structure >= self.first:
            log.info(
                "stop after epoch 1: the graph's own rank-%d factors predict held-out "
                "edges with AUC %.3f (>= %g, --stop auto; --stop none trains every epoch)",
                RANK,
                self.structure,
                self.first,
            )
            self.stopped = True
            return True
        O = np.array(params.O)  # a copy in the o_v's dtype (a float64 one doubled it)
        previous, self.previous = self.previous, O
        if previous is None:
            return False
        d = drift(previous, O)
        self.drifts.append(d)
        if d < self.threshold and epoch < self.floor:
            log.info(
                "epoch %d moved the o_v %.3f of their norm (< %g, but --stop auto trains at "
                "least %d epochs, %g of the budget): training on",
                epoch,
                d,
                self.threshold,
                self.floor,
                STOP_FLOOR,
            )
            return False
        if d < self.threshold:
            log.info(
                "stop after epoch %d: the o_v moved %.3f of their norm (< %g, --stop auto; "
                "--stop none trains every epoch)",
                epoch,
                d,
                self.threshold,
            )
            self.stopped = True
            return True
        log.info(
            "epoch %d moved the o_v %.3f of their norm (>= %g, --stop auto): training on",
            epoch,
            d,
            self.threshold,
        )
        return False


class HeldOutRule:
    """A stop rule that reads evidence held out of training: ``rule(epoch, params) ->
    bool``, True to end the run after ``epoch`` (1-based) when ``score(params)`` rose less
    than ``min_gain`` over the previous epoch's.  ``scores[t - 1]`` is epoch t's (None:
    not measured); ``stopped`` is True once it ended the run.  Its state goes into every
    checkpoint (``checkpoint``, ``resume``), as ``StopRule``'s does.  Subclasses say what
    they score (``score``; ``what`` and ``unit`` for the log; ``key``: the name their
    scores have in a checkpoint)."""

    option = key = what = unit = None
    digits = 4

    def __init__(self, min_gain):
        self.min_gain = float(min_gain)
        self.scores = []
        self.stopped = False

    def epochs_at_most(self, epochs):
        """Nothing is known before training: the run's ``epochs``."""
        return epochs

    def score(self, params):  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def checkpoint(self, mid_epoch):
        """The rule's state for a checkpoint: (a JSON-able dict: whether it ended the run
        and the scores so far; no arrays)."""
        return {"stopped": self.stopped, self.key: list(self.scores)}, {}

    def resume(self, state, params, arrays=None):
        """Before the first epoch (``run_epochs``): the rule as the resumed run left it.
        A run resumed at the end of an epoch the rule did not measure (the last of a run
        whose --epochs grows on resume) measures it from the parameters it resumed from,
        as the uninterrupted run would have."""
        stored = state.get("stop") or {}
        self.stopped = bool(stored.get("stopped", False))
        self.scores = [None if a is None else float(a) for a in stored.get(self.key, [])]
        epoch = int(state["epoch"])
        if epoch > 0 and state["batch"] == 0 and len(self.scores) < epoch:
            self.scores += [None] * (epoch - 1 - len(self.scores))
            self.scores.append(self.score(params))

    def __call__(self, epoch, params):
        value = self.score(params)
        self.scores += [None] * (epoch - 1 - len(self.scores))
        self.scores[epoch - 1 :] = [value]
        previous = self.scores[epoch - 2] if epoch >= 2 else None
        f = f"%.{self.digits}f"
        if previous is None:
            log.info(f"%s after epoch %d: %s {f}", self.what, epoch, self.unit, value)
            return False
        gain = value - previous
        if gain < self.min_gain:
            log.info(
                f"stop after epoch %d: the %s' %s went from {f} to {f} "
                f"(%+.{self.digits}f < %g, %s; --stop none trains every epoch)",
                epoch,
                self.what,
                self.unit,
                previous,
                value,
                gain,
                self.min_gain,
                self.option,
            )
            self.stopped = True
            return True
        log.info(
            f"%s after epoch %d: %s {f} (%+.{self.digits}f over epoch %d's, >= %g): training on",
            self.what,
            epoch,
            self.unit,
            value,
            gain,
            epoch - 1,
            self.min_gain,
        )
        return False


class HoldoutRule(HeldOutRule):
    """``--stop holdout``: ends the run after the first epoch t >= 2 whose link AUC of the
    held-out edges ``held`` (``held_out``: dict pos, neg of (m, 2) node pairs) by the
    cosine of the o_v rose less than ``min_gain`` (default HOLDOUT_MIN_GAIN) over epoch
    t - 1's (``HeldOutRule``); ``aucs`` are its scores."""

    option = "--stop holdout"
    key = "aucs"
    what, unit = "held-out edges", "AUC"

    def __init__(self, held, min_gain=None):
        super().__init__(HOLDOUT_MIN_GAIN if min_gain is None else min_gain)
        self.pos = np.asarray(held["pos"], dtype=np.int64).reshape(-1, 2)
        self.neg = np.asarray(held["neg"], dtype=np.int64).reshape(-1, 2)

    @property
    def aucs(self):
        return self.scores

    def score(self, params):
        """The link AUC (float) of the held-out edges against the non-edges by the cosine
        similarity of their ends' o_v (``params.O``, or the (N, k) o_v themselves)."""
        from ..spectral import prone as spectral
        from ..spectral import propagation

        O = getattr(params, "O", params)
        U = spectral.rownorm(np.asarray(O, dtype=np.float64))
        return propagation.auc(
            np.einsum("ij,ij->i", U[self.pos[:, 0]], U[self.pos[:, 1]]),
            np.einsum("ij,ij->i", U[self.neg[:, 0]], U[self.neg[:, 1]]),
        )


class LoglikRule(HeldOutRule):
    """``--stop loglik``: ends the run after the first epoch t >= 2 whose held-out
    contexts' mean log-likelihood (``loglik``) rose less than ``min_gain`` (default
    LOGLIK_MIN_GAIN) over epoch t - 1's (``HeldOutRule``).  ``held``: ``held_out``'s
    sample with its contexts (ctx (P, q - 1), tgt (P,): ``held_contexts``); ``cfg``: the
    run's options (the routing the forward pass runs)."""

    option = "--stop loglik"
    key = "logliks"
    what, unit = "held-out contexts", "log-likelihood"

    def __init__(self, held, cfg, min_gain=None):
        super().__init__(LOGLIK_MIN_GAIN if min_gain is None else min_gain)
        self.ctx = np.ascontiguousarray(held["ctx"], dtype=np.int32)
        self.tgt = np.asarray(held["tgt"], dtype=np.int64)
        self.model = cfg.model_config()

    def score(self, params):
        return loglik(params, self.ctx, self.tgt, self.model)


def loglik(params, ctx, tgt, model, chunk=None):
    """The mean log-likelihood (float, nats) of the targets ``tgt`` (P,) given their
    contexts ``ctx`` (P, q - 1) under the model's full softmax over every node, the
    distribution the sampled softmax of training estimates (Eq. 3 without V'):
    log p(v | C) = o_v . e_C + b_v - log sum_j exp(o_j . e_C + b_j), e_C the second
    capsule of the context (batch_forward.forward with the ``model``'s routing, a
    model_config.ModelConfig), in the parameters' dtype, the log-sum-exp in float64;
    ``chunk`` (default LOGLIK_CHUNK) contexts at a time, fewer on a graph of over
    LOGLIK_LOGITS / chunk nodes.  Its cost, O(P N k) per call, is that of P full-softmax
    rows: about 4,000 contexts over every node."""
    from ..model.batch_forward import forward

    O = params.O
    chunk = LOGLIK_CHUNK if chunk is None else int(chunk)
    chunk = max(1, min(chunk, LOGLIK_LOGITS // max(int(O.shape[0]), 1)))
    bias = params.bias
    total = 0.0
    for lo in range(0, ctx.shape[0], chunk):
        e = forward(params, ctx[lo : lo + chunk], model).e
        z = (e @ O.T + bias).astype(np.float64)
        top = z.max(axis=1)
        lse = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
        total += float((z[np.arange(z.shape[0]), tgt[lo : lo + chunk]] - lse).sum())
    return total / max(ctx.shape[0], 1)


def stop_rule(cfg, structure=None, held=None):
    """The run's stop rule: a new ``StopRule`` for ``cfg.stop`` 'auto', a ``HoldoutRule``
    over ``held`` (``held_out``) for 'holdout' and a ``LoglikRule`` for 'loglik' (None
    when nothing could be held out), None for 'none'.  ``structure``: the graph's
    (``graph_structure``), which the ``StopRule``'s first part reads; None, the drift part
    alone."""
    mode = getattr(cfg, "stop", "none")
    if mode == "holdout":
        return None if held is None else HoldoutRule(held)
    if mode == "loglik":
        return None if held is None else LoglikRule(held, cfg)
    if mode != "auto":
        return None
    return StopRule(structure=structure, floor=floor_epoch(cfg.epochs))


def floor_epoch(epochs):
    """The first epoch the drift part may end a run of ``epochs`` after:
    ceil(STOP_FLOOR x epochs), at least 2 (None: 2)."""
    if not epochs:
        return 2
    return max(2, math.ceil(round(STOP_FLOOR * int(epochs), 9)))  # 0.4 x 15 is 6, not 6.000..1


def held_out(cfg, graph):
    """The validation sample of ``--stop holdout`` and ``--stop loglik`` and the graph the
    run trains on: ``(held, train_graph)``.  ``held``: ``propagation.holdout`` of the
    graph's symmetric adjacency, seeded by ``derive_seed(cfg.seed, "stop holdout")`` (its
    defaults: HOLDOUT_FRACTION of the edges, at most HOLDOUT_MAX; an edge only while both
    its ends keep another, so no node loses its last edge), with 'loglik' also the
    contexts of ``held_contexts`` (ctx, tgt); None when ``cfg.stop`` is neither or
    nothing can be measured (no edge can be held out, or for 'holdout' no non-edge).
    ``graph`` and ``train_graph``: csr.Graph; ``train_graph`` is ``graph`` without the
    held-out pairs in either direction (``graph`` itself when ``held`` is None); the
    other entries keep their order, weights and dtypes."""
    mode = getattr(cfg, "stop", "none")
    if mode not in HELD_OUT_STOPS:
        return None, graph
    from ..kernels.rng import derive_seed
    from ..spectral import prone as spectral
    from ..spectral import propagation

    t0 = time.perf_counter()
    held = propagation.holdout(
        spectral.adjacency(graph.indptr, graph.indices, graph.weights, graph.n_nodes),
        derive_seed(cfg.seed, "stop holdout") % (2**32),
    )
    pos, neg = held["pos"], held["neg"]
    if not len(pos) or (mode == "holdout" and not len(neg)):
        what = "no edge can be held out" if not len(pos) else "no non-edge to set against"
        log.info(
            "--stop %s: %s, so nothing measures the epochs: training the whole "
            "budget on the whole graph",
            mode,
            what,
        )
        return None, graph
    train_graph = without_pairs(graph, pos)
    held = dict(pos=pos, neg=neg, A_rest=held["A_rest"])
    if mode == "loglik":
        held.update(held_contexts(cfg, train_graph, pos))
    log.info(
        "--stop %s: %d edges held out (and %d non-edges) in %.2f s; training on the other %d",
        mode,
        len(pos),
        len(neg),
        time.perf_counter() - t0,
        train_graph.n_edges,
    )
    return held, train_graph


def held_contexts(cfg, train_graph, pos):
    """``--stop loglik``'s held-out contexts: dict(ctx (2m, q - 1) int32, tgt (2m,)
    int64), for each held-out edge (u, v) of ``pos`` (m, 2) the target v with a context
    reached through u alone, and u with one through v.  The target sits at the run's
    first target position t (0 for 'random'); the context's positions after t are a
    walk of the run's kind (uniform or node2vec, weighted as the graph) from the other
    end over ``train_graph`` (a csr.Graph), those before t a second such walk reversed,
    so that the held-out edge is the only way from the context to its target: the walk
    ... -> u -> v -> u -> ... of q nodes, with the u -> v steps the training never saw.
    Seeded by ``derive_seed(cfg.seed, "stop loglik")``."""
    from ..kernels.rng import derive_seed
    from ..walks import walks as walks_mod

    g = train_graph
    q = int(cfg.walk_length)
    positions = walks_mod.target_positions(cfg.targets, q)
    t = 0 if positions is None else int(positions[0])
    ends = np.r_[pos[:, 0], pos[:, 1]]  # the context's end
    tgt = np.r_[pos[:, 1], pos[:, 0]].astype(np.int64)
    seed = derive_seed(cfg.seed, "stop loglik") % (2**62)

    def walks_from(length, salt):
        if length == 1:
            return ends[:, None].astype(np.int32)
        every = walks_mod.uniform_walks(
            g.indptr, g.indices, g.weights, 1, length, seed + salt, cfg.node2vec_p,
            cfg.node2vec_q,
        )  # fmt: skip
        return every[ends]

    parts = []
    if t > 0:
        parts.append(walks_from(max(t, 1), 1)[:, :t][:, ::-1])
    if t < q - 1:
        parts.append(walks_from(q - 1 - t, 0))
    ctx = np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.int32)
    return dict(ctx=ctx, tgt=tgt)


def without_pairs(graph, pairs):
    """The csr.Graph ``graph`` without its entries (u, v) and (v, u) for every row of
    ``pairs`` (m, 2); the others keep their order, values and dtypes, and the graph its
    node ids."""
    indptr = np.asarray(graph.indptr)
    indices = np.asarray(graph.indices)
    n = np.int64(indptr.shape[0] - 1)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    keys = rows * n + indices.astype(np.int64)
    u, v = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
    keep = ~np.isin(keys, np.r_[u * n + v, v * n + u])
    counts = np.bincount(rows[keep], minlength=int(n))
    new_indptr = np.zeros_like(indptr)
    new_indptr[1:] = np.cumsum(counts)
    weights = graph.weights
    new_weights = None if weights is None else np.asarray(weights)[keep]
    return dataclasses.replace(graph, indptr=new_indptr, indices=indices[keep], weights=new_weights)


def graph_structure(cfg, graph):
    """The structure (spectral/structure.py, ``structure.of_graph``) of the csr.Graph
    ``graph`` of a run with options ``cfg``, seeded by ``cfg.seed`` and logged; None when
    no rule of the run reads it (``cfg.stop`` is not 'auto', and the written spectrum is
    not chosen by ``--spectrum-power auto`` of a propagated run:
    propagation.written_power) or the graph is too small to tell."""
    stop = getattr(cfg, "stop", "none") == "auto"
    spectrum = (getattr(cfg, "propagate", None) or "none") != "none" and getattr(
        cfg, "spectrum_power", "0.5"
    ) == "auto"
    if not (stop or spectrum):
        return None
    from ..kernels.rng import derive_seed
    from ..spectral.structure import of_graph

    t0 = time.perf_counter()
    value = of_graph(
        graph,
        derive_seed(cfg.seed, "stop structure") % (2**32),
        stage="stop rule" if stop else "written spectrum",
    )
    if value is None:
        return None
    measured = (
        f"the graph's own rank-{RANK} factors predict held-out edges with AUC "
        f"{value:.3f} ({time.perf_counter() - t0:.2f} s)"
    )
    if stop:
        then = (
            "one epoch"
            if value >= STOP_STRUCTURE
            else f"below {STOP_STRUCTURE:g}: until an epoch from epoch "
            f"{floor_epoch(cfg.epochs)} on ({STOP_FLOOR:g} of the budget) moves the o_v less "
            f"than {STOP_DRIFT:g} of their norm"
        )
        log.info("stop rule: %s, so %s", measured, then)
    else:
        log.info("written spectrum (--spectrum-power auto): %s", measured)
    return value
