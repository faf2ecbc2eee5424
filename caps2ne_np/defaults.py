"""Every default of a training run, in one place: ``OPTIONS``, one row per option of
``config.TrainConfig``, gives its default, its range or choices and its help text.
``TrainConfig``'s field defaults, the ``Caps2NE`` estimator's ``__init__`` defaults and
the command line's ``train`` options (``cli/options.py``) are all read from it, and
``validation.validate`` checks ranges and choices against it (tests/test_defaults.py checks
that the three agree).  No import, so ``caps2ne --help`` stays instant.

Two kinds of defaults:

* a value: options with one default whatever the graph (the model's shape, routing).
* None, marked [preset]: the options a preset fills when they are left unset: batch
  size, walks per node, learning rate and its schedule, walk reuse, sampler, Adam
  variant and the number of epochs.  ``preset='auto'`` (the default) is 'converge' on a
  featureless graph and 'paper' with fixed input features; ``presets.resolve`` fills
  them and says where each value came from.
"""

from typing import NamedTuple

SAMPLERS = ("log_uniform", "unigram", "uniform")
ADAM_MODES = ("dense", "lazy")
BATCH_MODES = ("random", "shuffle")
WALK_MODES = ("fresh", "fixed")
LR_SCHEDULES = ("linear", "constant")
ROUTING_RULES = ("paper", "sabour")
GRAD_MODES = ("exact", "stop")
SPECTRAL_MODES = ("none", "features", "init", "init_xo")
PROPAGATE_MODES = ("none", "on", "auto")
SPECTRAL_PRECISIONS = ("float32", "float64")
STOP_MODES = ("none", "auto", "holdout", "loglik")
HELD_OUT_STOPS = ("holdout", "loglik")
"""The --stop modes that hold a sample of edges out of training (training/budget.py)."""

LR_FEATURELESS = 5e-4
"""The 'paper' preset's Adam lr when the input features x are trained (no fixed
features): the authors' rate for featureless graphs.  Measured on the bundled Cora
graph (docs/results/lr_defaults.md): 5e-4 reaches 70.4% after 5 epochs at T = 16, ahead of 1e-3
(69.9%) and 1e-4 (63.6% after 10, still climbing)."""
LR_FIXED_FEATURES = 1e-4
"""Default Adam lr with fixed input features (the paper's best for citation graphs)."""


SKIPGRAM_WEIGHT_CONVERGE = 0.0
"""The 'converge' preset's weight lambda of the skip-gram term (skipgram.py):
0, the paper's loss, because the panel said so (docs/results/skipgram.md): at weight 1
the term gained 1.6 points on Cora and 10-12 on LFR 3k at mixing 0.7, but lost 1.1-2.0
on Citeseer (1.0 at weight 0.3) and, with the softmax form, 1.25 on PPI, beyond the 0.5
the adoption rule allows.  The 'paper' preset's is 0 too."""
SPECTRAL_CONVERGE = "init_xo"
"""The 'converge' preset's spectral start (spectral.py): ProNE starts the
trainable x and the output embeddings O.  On the panel (docs/results/spectral_start.md,
one seed each) it scored -0.18 (Citeseer) to +13.8 points (LFR 3k at mixing 0.7: 44.81
-> 58.57) against the same preset without it on Cora, Citeseer, PPI, POS, Pubmed,
BlogCatalog and four LFR graphs, above 'init' (x only) on all but Citeseer and PPI, and
Cora 72.51; 'features' (ProNE as fixed x) lost 0.74 on PPI.  The 'paper' preset's is
'none'; with fixed features it is 'none' whatever the preset (presets.resolve)."""
PRONE_THETA_MAX = 100.0
"""The largest --prone-theta: ProNE's Chebyshev coefficients I_i(theta) grow as
e^theta / sqrt(2 pi theta), so the filtered rows reach e^theta (4e43 at 100) before the
SVD; near 710 they overflow float64 (NaN, or an SVD that does not return)."""
ROW_NORM = 2.0
"""The length of the written rows when propagated (--row-norm).  Chosen on the tuning
graphs of the panel (Cora, Citeseer, Pubmed, PPI, POS, LFR 1k at mixing 0.3, 3k at 0.5
and 0.7; 3 seeds) by the rule: the length whose worst shortfall at C = 1 below the same
rows' tuned-C score is smallest, among 0.5, 1, 2, 4 and 8: 2 (worst 1.79 points, on
Citeseer), where unit rows fell 6.14 short (LFR 3k at 0.7).  Checked on the MUSAE
graphs, which chose nothing: docs/training.md, 'The written scale';
docs/results/panel_protocols.md."""
ROW_NORM_MIN = 1e-30
"""The shortest --row-norm: the written rows are float32, whose normal numbers end at
1.2e-38, so a row of length 1e-30 keeps its largest entries (at least 1e-30 / sqrt(k))
to their digits up to k = 10^14; at 1e-45 every entry rounds to zero (the whole row)."""
ROUND_WALKS = 2
"""Ray's replica rounds (--round-walks, training/ray/engine.py): the walks per node a
round trains between two merges of the workers' replicas (a round is at most a quarter
of an epoch).  More walks: fewer bytes per trained pair, staler reads at P > 1; 0: the
parameter server's rounds (a batch per worker on rows pulled for it).  2: at P = 2
within a point of one machine on Cora, PPI and Wiki, where 4 left PPI 1.03 below
(docs/distributed.md, 'Replica rounds')."""
SYNC_MOMENTS_CHOICES = ("auto", "round", "checkpoint")
SYNC_MOMENTS = "auto"
SYNC_ROUND_MAX_WORKERS = 4
"""When Ray's replica rounds merge the workers' Adam moments (--sync-moments): 'round',
every round with the values (three times the bytes: a value and two moments a
parameter); 'checkpoint', only before a checkpoint (each worker steps with its own
moments between); 'auto', every round at 2 to SYNC_ROUND_MAX_WORKERS workers, where the
projected network share stays near a tenth of a round, else at checkpoints.  At P = 1
every choice gives the single machine's bits.  docs/distributed.md."""
UPDATE_BUDGETS = ("auto", "change", "hops")
UPDATE_BUDGET = "auto"
"""How an update chooses its walks (``caps2ne update --budget``, update/update.py):
'change', each node starts walks in proportion to the share of its edges that changed
(``change_starts``: in expectation E T s_u over one epoch, what training gave it times
its share s_u), and only new nodes take the new graph's spectral start; 'hops', T walks
from every node within ``--hops`` of the change for E_u = ceil(E S / N) epochs
(``update_epochs``), those nodes restarted from the new graph's spectral start; 'auto',
'change' for a change of edges only, at most UPDATE_AUTO_CHANGE_MAX of them, else
'hops'.  docs/update.md, docs/results/update_budget_auto.md."""
UPDATE_AUTO_CHANGE_MAX = 0.07
"""--budget auto takes 'change' up to this share of changed edges (update.py
``changed_edge_share``) when no node is added or removed, else 'hops': between the 5%
and the 10% of the studies (none ran between), above the 5% studies' own spread (their
edges leave at random: 4.5 to 5.3% on Cora, Citeseer and Wiki).  With 1% and 5%
new edges 'change' was within 0.5 point of retraining at C = 1 on Cora, Wiki, Citeseer,
PPI and the 100k-node LFR graph (3 seeds; its 'hops' 1; with C tuned Cora at 1% and
Citeseer at 5% were 0.71 and 0.59 below) at 0.06 to 0.12x its wall, where 'hops' took
0.22 to 1.41x: every node of the dense graphs, whose link AUC it lowered by 2 points;
on sparse Citeseer 'hops' was the better by 0.5 to 2 points at 0.42x.  At 10% and 20%
'hops' was the closer on Cora and Citeseer (10%: -0.83 against -1.21, +0.34 against
-1.07), not on PPI's link AUC (-1.76 against -0.09).  Chosen on Cora, Wiki and the 100k
graph; Citeseer and PPI ran after it was written; chosen again with each graph left
out (the largest threshold keeping every 'change' update within 0.5 point at C = 1 on
the others), every fold gives 7%, with a regret of at most 0.69 / 0.80 points against
the left-out graph's better budget (docs/results/update_budget_auto.md).
New nodes take 'hops': with 10% new nodes 'change' was the further from retraining on
Cora and Wiki (-1.87 and -0.45 against -1.13 and -0.12)."""
SPECTRUM_POWERS = ("auto", "0.5", "0.75", "1")
SPECTRUM_POWER = "0.75"
"""The written rows of a propagated run (--spectrum-power), rownorm(U S^p) of the
filtered o_v's SVD: p = 0.75 on every graph, between ProNE's 0.5 and the filtered o_v's
own 1.  Chosen by leaving each graph out (docs/results/written_loo.md, bench/written.py;
12 panel graphs whose labels follow communities or text, 3 seeds, both protocols): the
one option chosen on the others (p = 0.75 at length 2 in every fold) lost at most 2.1
points to the left-out graph's best written option (LFR 3k at mixing 0.7 at C = 1, 1.7
with C tuned; Pubmed 1.9), where the best threshold rule on the structure measure or
the mean degree lost 2.9 (Wiki, dense with 17 classes, which the other graphs put with
the sparse citation graphs: p = 1) and 'auto', the structure rule of before, 2.9 there
too.  'auto' keeps that rule (propagation.POWER_STRUCTURE).  On the role graphs
(airports) the o_v as trained beat every propagated option by 4 to 11 points, and no
label-free measure of the panel told them apart: ``caps2ne choose`` picks the written
rows from a user's labels (evaluation/written.py)."""
PRONE_THETA_MIN = 0.01
"""The smallest --prone-theta: the filter g(lambda) = exp(-theta X), X in [-1, 1], varies
by a factor e^(2 theta) over the spectrum (2% at 0.01); below, O - g(L) O is theta times
a fixed signal (the limit theta -> 0), and float64 cancels its digits (at 1e-20 all of
them: every propagated row was zero)."""
PRONE_ORDER_MAX = 200
"""The largest --prone-order: the Chebyshev term i has weight I_i(theta) ~ I_0(theta)
exp(-i^2 / (2 theta)), below 1e-15 of the first past i = 86 at the largest theta (100);
more terms only cost time (two sparse products each: order 1e7 ran infer for 198 s)."""
PROPAGATE_CONVERGE = "on"
"""The 'converge' preset's spectral propagation of the written o_v (propagation.py):
'on', by the panel's net gain (docs/results/propagate_panel.md: +0.6 to +2.5 points
on the five graphs measured, none lower); the label-free rule of 'auto' (propagation.decide)
chose 'on' on all of them too, so no rule was shown to separate graphs (docs/training.md,
"Spectral propagation").  The 'paper' preset's is 'none'."""
STOP_CONVERGE = "auto"
"""The 'converge' preset's stop rule (training/budget.py): 'auto' ends the run before
its budget, after the first epoch on a graph whose own low-rank structure predicts
held-out edges well, else once an epoch moves the o_v little (docs/training.md, "When
to stop"); an explicit --epochs N trains exactly N.  The 'paper' preset's is 'none'."""
SKIPGRAM_NEGATIVES = 5
"""The skip-gram term's negatives when it is on: 5 per (context node, target), word2vec's
negative sampling, which scored as well as or better than the sampled softmax over V' on
Cora, Citeseer and LFR 3k at mixing 0.7 (docs/results/skipgram.md)."""


PRESETS = {
    # Defaults for a featureless graph, measured against DeepWalk on a panel of graphs
    # (docs/training.md, docs/results/vs_deepwalk.md): fresh walks every epoch, a peak
    # rate set by the graph's mean degree (``rates.converge_lr``) decayed linearly to 1%
    # of it, small batches, the walk-frequency^0.75 sampler (node ids of a user's edge
    # list carry no frequency order for the log-uniform one), lazy Adam (a step's cost
    # does not grow with N) and a budget of training pairs per node (``budget_epochs``).
    "converge": dict(
        walks_per_node=16,
        epochs=None,
        batch_size=16,
        lr=None,
        lr_schedule="linear",
        walks="fresh",
        sampler="unigram",
        adam="lazy",
        skipgram_weight=SKIPGRAM_WEIGHT_CONVERGE,
        spectral=SPECTRAL_CONVERGE,
        propagate=PROPAGATE_CONVERGE,
        stop=STOP_CONVERGE,
    ),
    # The authors' settings (and this project's defaults before 'converge'): the same
    # N*T walks every epoch, a constant rate, B = 64, dense Adam, 5 epochs.  The paper's
    # tables are reproduced with these (bench/reproduce.py) plus the per-dataset T,
    # epochs and lr of docs/results/transductive.md.
    "paper": dict(
        walks_per_node=16,
        epochs=5,
        batch_size=64,
        lr=None,
        lr_schedule="constant",
        walks="fixed",
        sampler="log_uniform",
        adam="dense",
        skipgram_weight=0.0,
        spectral="none",
        propagate="none",
        stop="none",
    ),
}
"""Named sets of the options a preset fills (every option left None).  'auto' is
'converge' for a featureless graph and 'paper' with fixed features, where the
paper's settings already reach its accuracy (docs/results/transductive.md)."""
PRESET_NAMES = ("auto",) + tuple(PRESETS)

BUDGET_PAIRS_PER_NODE = 800
"""Training pairs per node in the 'converge' preset's budget (``presets.budget_epochs``)."""
BUDGET_MAX_STRETCH = 3.0
"""Where the degree rule asks for a rate above LR_RANGE's cap, the budget grows by the
missing factor instead, up to this many times BUDGET_PAIRS_PER_NODE."""

LR_PER_DEGREE = 2.5e-4
LR_RANGE = (5e-4, 4e-3)
"""The 'converge' preset's peak rate: LR_PER_DEGREE * mean degree, clipped to LR_RANGE
(``rates.converge_lr``)."""


def preset_summary(name):
    """One line saying what preset ``name`` sets (the --preset help)."""
    p = PRESETS[name]
    if p["lr"] is not None:
        lr = f"{p['lr']:g}"
    elif name == "converge":  # rates.converge_lr
        lr = f"{LR_PER_DEGREE:g} x mean degree, within {LR_RANGE[0]:g}..{LR_RANGE[1]:g},"
    else:
        lr = f"{LR_FEATURELESS:g} ({LR_FIXED_FEATURES:g} with fixed features)"
    return (
        f"lr {lr} {p['lr_schedule']}, batch {p['batch_size']}, T {p['walks_per_node']} "
        f"{p['walks']} walks, {p['adam']} Adam, {p['sampler']} sampler"
        + (f", {p['epochs']} epochs" if p["epochs"] else "")
        + (f", skip-gram term x {p['skipgram_weight']:g}" if p["skipgram_weight"] else "")
        + "".join(
            f", --{key} {p[key]}" for key in ("spectral", "propagate", "stop") if p[key] != "none"
        )
    )


# --------------------------------------------------------------------------- the options


class Option(NamedTuple):
    """One option of a training run (a ``TrainConfig`` field).

    default : the value when it is not given (None: from the preset, or a rule in help)
    kind    : 'int', 'float', 'choice', 'flag' or 'positions' (``walks.target_positions``)
    help    : the command line's help text (units and paper symbol); a 'flag' is on by
              default and its help is that of the --no-<name> flag that turns it off
    low, high : the range of an int or float; ``open`` names the open ends ('low', 'high')
    choices : the values of a 'choice'
    """

    default: object
    kind: str
    help: str
    low: float | None = None
    high: float | None = None
    open: tuple = ()
    choices: tuple = ()


OPTIONS = {
    "dim": Option(128, "int", "Embedding size k (size of e_v and o_v).", low=1),
    "feat_dim": Option(
        128, "int", "Size d of the trainable input features x (featureless graphs).", low=1
    ),
    "walk_length": Option(10, "int", "Walk length q (q - 1 context nodes per target).", low=2),
    "node2vec_p": Option(
        1.0,
        "float",
        "node2vec's return parameter p (Grover & Leskovec 2016): from a walk's second "
        "step on, going back to the node it came from has weight 1/p (low p: walks "
        "stay local). p = q = 1: DeepWalk's walks, the paper's. docs/walks.md.",
        low=1e-3,
        high=1e3,
    ),
    "node2vec_q": Option(
        1.0,
        "float",
        "node2vec's in-out parameter (its q, not the walk length q): a step to a node "
        "not adjacent to the previous one has weight 1/q, to a common neighbour 1 "
        "(q < 1: outward, like DFS; q > 1: inward, like BFS).",
        low=1e-3,
        high=1e3,
    ),
    "preset": Option(
        "auto",
        "choice",
        "Where the options marked [preset] come from when not "
        f"given: 'converge' ({preset_summary('converge')}; epochs from the graph), "
        f"'paper' (the authors' settings: {preset_summary('paper')}); 'auto' is "
        "'converge' without and 'paper' with fixed --features. docs/training.md.",
        choices=PRESET_NAMES,
    ),
    "walks_per_node": Option(
        None, "int", "Random walks T started from every node in each epoch. [preset]", low=1
    ),
    "epochs": Option(
        None,
        "int",
        "Epochs: exactly this many, or at most with a --stop rule given; each is "
        "ceil(N T / batch-size) batches [preset converge: a budget set by the graph, "
        "printed at the start].",
        low=1,
    ),
    "batch_size": Option(
        None,
        "int",
        "Walks per batch B (each walk gives one pair per target position). [preset]",
        low=1,
    ),
    "lr": Option(
        None,
        "float",
        "Adam learning rate (the peak rate with --lr-schedule linear) "
        "[preset; paper: 5e-4 with trained features x, 1e-4 with fixed features; the "
        "paper's grid is 1e-5, 5e-5, 1e-4]. At most 1 (Adam moves each parameter by "
        "about the rate per step); above 10x the converge preset's cap a warning.",
        low=0,
        high=1,
        open=("low",),
    ),
    "lr_schedule": Option(
        None,
        "choice",
        "linear: decay from --lr to --lr x --lr-floor over "
        "the run (word2vec); constant: the authors'. [preset]",
        choices=LR_SCHEDULES,
    ),
    "lr_floor": Option(
        1e-2,
        "float",
        "Last rate of the linear schedule, as a fraction of --lr.",
        low=0,
        high=1,
        open=("low",),
    ),
    "walks": Option(
        None,
        "choice",
        "fresh: new walks every epoch; fixed: the same N x T walks every epoch (authors). [preset]",
        choices=WALK_MODES,
    ),
    "num_sampled": Option(
        None,
        "int",
        "Sampled nodes |V'| per batch in the sampled softmax, < "
        "number of nodes [default: 256, or N - 1 on graphs of at most 256 "
        "nodes].",
        low=1,
    ),
    "sampler": Option(
        None,
        "choice",
        "Candidate sampler for V': TensorFlow's log-uniform (by "
        "node index), walk-frequency^0.75, or uniform. [preset]",
        choices=SAMPLERS,
    ),
    "routing_iters": Option(
        1,
        "int",
        "Routing iterations m (Algorithm 1; the routing settles in a few: Sabour et al. use 3).",
        low=1,
        high=100,
    ),
    "routing_rule": Option(
        "paper",
        "choice",
        "Logit update: paper b_i = u_hat_i.e, or Sabour et al. b_i += u_hat_i.e.",
        choices=ROUTING_RULES,
    ),
    "routing_scale": Option(
        None,
        "float",
        "c = scale * softmax(b) [default: q - 1 as the authors' code; 1 = plain softmax].",
        low=0,
        open=("low",),
    ),
    "grad_mode": Option(
        "exact",
        "choice",
        "exact: true gradient through routing; stop: c treated as constant (authors).",
        choices=GRAD_MODES,
    ),
    "targets": Option(
        "all",
        "positions",
        "Target positions in each walk: all, random (one per "
        "walk), or 0-based positions such as 3,4,5,6 (authors, citation graphs).",
    ),
    "batch_mode": Option(
        "random",
        "choice",
        "random: B walks drawn with replacement (authors); shuffle: each walk once.",
        choices=BATCH_MODES,
    ),
    "adam": Option(
        None,
        "choice",
        "dense: every row each step (authors); lazy: only rows a "
        "batch touches, so a step costs nothing per untouched node (large graphs). "
        "[preset]",
        choices=ADAM_MODES,
    ),
    "walk_chunk": Option(
        1 << 20,
        "int",
        "Walks per chunk when counting node frequencies for "
        "--sampler unigram (memory about 40 bytes x chunk x q); training walks "
        "are made per batch.",
        low=1,
    ),
    "threads": Option(
        1,
        "int",
        "Threads for the Numba kernels (BLAS runs single-threaded "
        "inside them) [default: all cores this process may use, at most "
        "NUMBA_NUM_THREADS]. With --parallel sync (the default) results do not depend on it.",
        low=1,
    ),
    "seed": Option(0, "int", "Seed of every random stream.", low=0),
    "skipgram_weight": Option(
        None,
        "float",
        "Weight lambda of the skip-gram term (each context node's x also predicts the "
        "target's o_v; beyond the paper; needs --feat-dim = --dim and no --features); "
        "0 = the paper's loss. [preset: converge "
        f"{SKIPGRAM_WEIGHT_CONVERGE:g} (docs/results/skipgram.md), paper 0; 0 with "
        "--features unless given]",
        low=0,
    ),
    "skipgram_negatives": Option(
        SKIPGRAM_NEGATIVES,
        "int",
        "Negatives of the skip-gram term: 0 = the capsule loss's sampled softmax over "
        "V' (log-Q corrected); K > 0 = word2vec's negative sampling, K nodes of V' per "
        "(context node, target).",
        low=0,
    ),
    "normalize_features": Option(
        True,
        "flag",
        "Use fixed features as given (default: divide each row by its sum, as the authors).",
    ),
    "spectral": Option(
        None,
        "choice",
        "A spectral start from ProNE (spectral.py): features: ProNE embeddings as "
        "fixed input features x (unit rows, not normalised); init: they start the "
        "trainable x; init_xo: x and O; none: random x. Featureless graphs only "
        "(with --features: none). [preset] docs/training.md.",
        choices=SPECTRAL_MODES,
    ),
    "propagate": Option(
        None,
        "choice",
        "ProNE's spectral propagation of the trained o_v (propagation.py): on: the "
        "embeddings written (--out, --npy, get_embedding) are the o_v filtered over the "
        "graph, then factorised (rows of length --row-norm); auto: on when a held-out "
        "sample of edges "
        "says it helps (no labels read); none: the o_v as trained. [preset: converge "
        f"{PROPAGATE_CONVERGE}, paper none] docs/training.md.",
        choices=PROPAGATE_MODES,
    ),
    "stop": Option(
        None,
        "choice",
        "auto: end the run before --epochs, after the first epoch when a rank-32 "
        "factorisation of the graph predicts held-out edges with AUC >= 0.68, else once an "
        "epoch, from 0.4 of the budget's epochs on, moves the o_v by less than 0.225 of "
        "their norm (training/budget.py; no labels read); holdout: hold out 5% of the edges"
        " (at most 2,000) from training and end the run once an epoch raises their link AUC"
        " by less than 0.002 (measured; not the default); loglik: hold out the same edges "
        "and end the run once an epoch raises the mean log-likelihood of a context through "
        "each held-out edge predicting its other end by less than 0.01; none: train every "
        "epoch. [preset: converge auto, paper none; none when --epochs is given] "
        "docs/training.md.",
        choices=STOP_MODES,
    ),
    "spectral_dim": Option(
        None,
        "int",
        "--spectral features: size d of the ProNE features [default: --feat-dim].",
        low=1,
    ),
    "prone_order": Option(
        10,
        "int",
        "ProNE: order of the Chebyshev expansion (1: no propagation).",
        low=1,
        high=PRONE_ORDER_MAX,
    ),
    "prone_mu": Option(
        0.2,
        "float",
        "ProNE: centre mu of the band-pass filter, within the spectrum [0, 2] of the "
        "normalised Laplacian (outside it the Chebyshev expansion diverges).",
        low=0,
        high=2,
    ),
    "prone_theta": Option(
        0.5,
        "float",
        "ProNE: width theta of the band-pass filter (its Bessel coefficients grow as "
        "e^theta; below 0.01 the filter is flat and cancels to zero).",
        low=PRONE_THETA_MIN,
        high=PRONE_THETA_MAX,
    ),
    "spectral_precision": Option(
        "float32",
        "choice",
        "The arithmetic of the spectral start and of the propagation (--spectral, "
        "--propagate): float32 (half the memory, about twice as fast) or float64 "
        "(scikit-learn's and ProNE's bits).  float32's rows are float64's to float32 "
        "rounding up to the signs of their columns, which no SVD fixes (the start's differ "
        "in about half), but for the start's rows of nodes its rank-d factorisation barely "
        "represents, whose direction float32 cannot resolve. docs/training.md.",
        choices=SPECTRAL_PRECISIONS,
    ),
    "spectrum_power": Option(
        SPECTRUM_POWER,
        "choice",
        "The written rows when the o_v are propagated (--propagate): rownorm(U S^p) of the "
        "filtered o_v's SVD U S V^T.  0.5: ProNE's (a flatter spectrum); 1: the filtered "
        "o_v's own (rotated); 0.75: between the two, chosen by leaving each panel graph "
        "out; auto: 1 when the graph's rank-32 factors predict held-out edges with AUC "
        ">= 0.75, else 0.5 (the rule of before; docs/training.md, 'The written "
        "spectrum').  With labels, 'caps2ne choose' picks from them.",
        choices=SPECTRUM_POWERS,
    ),
    "row_norm": Option(
        ROW_NORM,
        "float",
        "The length of every written row when the o_v are propagated (--propagate): "
        "ProNE writes unit rows (1).  A classifier at a fixed C regularises rows of "
        "length r as it would unit rows at C r^2, so the length decides scores at "
        "scikit-learn's default C = 1 (docs/training.md, 'The written scale').  At least "
        f"{ROW_NORM_MIN:g}: float32 rounds shorter rows to zero.",
        low=ROW_NORM_MIN,
        high=1000,
    ),
}
"""The options of a training run, in the command line's order.  ``threads`` is 1 in
``TrainConfig`` and the estimator (``n_jobs``) but all cores on the command line (its
help says so); the estimator calls ``seed`` ``random_state``."""

DEFAULTS = {name: option.default for name, option in OPTIONS.items()}
"""name -> default of every option in OPTIONS."""


# ------------------------------------------------------------------ inference (inference/infer.py)

AGGREGATES = ("mean", "sum", "calibrated")
DEFAULT_AGGREGATE = "calibrated"
"""Chosen by a rule fixed without test accuracy: the best validation accuracy,
mean over Cora and Citeseer, of the o-path with the val nodes embedded as new nodes
(column val_infer_mean of docs/results/inductive.json), and within 0.1 point of the best
the simplest variant (mean, sum, then the calibrations scale, diag, linear).  The rule
gives 'calibrated' with method 'diag'; docs/inductive.md has the numbers."""
CALIBRATION_METHODS = ("scale", "diag", "linear")
DEFAULT_CALIBRATION = "diag"
"""By the same rule as DEFAULT_AGGREGATE, among the three methods."""
ISOLATED = ("self", "error")
"""What ``infer`` does with a node without edges: encode it from its own features, or refuse."""
