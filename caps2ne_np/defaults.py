"""Every default of a training run, in one place (the command line, the ``Caps2NE``
estimator and ``train.TrainConfig`` all read them from here).  No heavy import, so
``caps2ne --help`` stays instant.

Two kinds of defaults:

* PLAIN: options with one default whatever the graph (the model's shape, routing).
* PRESETS: the options a preset fills when they are left unset (None): batch size,
  walks per node, learning rate and its schedule, walk reuse, sampler, Adam variant
  and the number of epochs.  ``preset='auto'`` (the default) is 'converge' on a
  featureless graph and 'paper' with fixed input features; ``train.resolve`` fills
  them and says where each value came from.
"""

SAMPLERS = ("log_uniform", "unigram", "uniform")
ADAM_MODES = ("dense", "lazy")
BATCH_MODES = ("random", "shuffle")
WALK_MODES = ("fresh", "fixed")
LR_SCHEDULES = ("linear", "constant")
ROUTING_RULES = ("paper", "sabour")
GRAD_MODES = ("exact", "stop")

PLAIN = dict(dim=128, feat_dim=128, walk_length=10, routing_iters=1, routing_rule="paper",
             grad_mode="exact", targets="all", batch_mode="random", lr_floor=1e-2,
             walk_chunk=1 << 20)

LR_FEATURELESS = 5e-4
"""The 'paper' preset's Adam lr when the input features x are trained (no fixed
features): the authors' rate for featureless graphs.  Measured on the bundled Cora
graph (docs/training.md): 5e-4 reaches 70.4% after 5 epochs at T = 16, ahead of 1e-3
(69.9%) and 1e-4 (63.6% after 10, still climbing)."""
LR_FIXED_FEATURES = 1e-4
"""Default Adam lr with fixed input features (the paper's best for citation graphs)."""


PRESETS = {
    # Defaults for a featureless graph, measured against DeepWalk on a panel of graphs
    # (docs/training.md, bench/results/vs_deepwalk.md): fresh walks every epoch, a peak
    # rate set by the graph's mean degree (``train.converge_lr``) decayed linearly to 1%
    # of it, small batches, the walk-frequency^0.75 sampler (node ids of a user's edge
    # list carry no frequency order for the log-uniform one), lazy Adam (a step's cost
    # does not grow with N) and a budget of training pairs per node (``budget_epochs``).
    "converge": dict(walks_per_node=16, epochs=None, batch_size=16, lr=None,
                     lr_schedule="linear", walks="fresh", sampler="unigram", adam="lazy"),
    # The authors' settings (and this project's defaults before session 5): the same
    # N*T walks every epoch, a constant rate, B = 64, dense Adam, 5 epochs.  The paper's
    # tables are reproduced with these (bench/reproduce.py) plus the per-dataset T,
    # epochs and lr of bench/results/transductive.md.
    "paper": dict(walks_per_node=16, epochs=5, batch_size=64, lr=None, lr_schedule="constant",
                  walks="fixed", sampler="log_uniform", adam="dense"),
}
"""Named sets of the options a preset fills (every option left None).  'auto' is
'converge' for a featureless graph and 'paper' with fixed features, where the
paper's settings already reach its accuracy (bench/results/transductive.md)."""
PRESET_NAMES = ("auto",) + tuple(PRESETS)

BUDGET_PAIRS_PER_NODE = 800
"""Training pairs per node in the 'converge' preset's budget (``train.budget_epochs``)."""
BUDGET_MAX_STRETCH = 3.0
"""Where the degree rule asks for a rate above LR_RANGE's cap, the budget grows by the
missing factor instead, up to this many times BUDGET_PAIRS_PER_NODE."""

LR_PER_DEGREE = 2.5e-4
LR_RANGE = (5e-4, 4e-3)
"""The 'converge' preset's peak rate: LR_PER_DEGREE * mean degree, clipped to LR_RANGE
(``train.converge_lr``)."""
