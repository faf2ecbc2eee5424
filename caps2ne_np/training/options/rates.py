"""The learning rate: the 'converge' preset's peak rate from the graph's mean degree
(``converge_lr``) and the rate at each step of a run (``learning_rate``, the schedule)."""

import numpy as np

from ...defaults import LR_PER_DEGREE, LR_RANGE

LR_TINY = 1e-8  # below it, an Adam step (about lr per element) is under float32's resolution


def converge_lr(n_nodes, n_edges):
    """The 'converge' preset's peak rate: (lr, reason).

    lr = LR_PER_DEGREE * n_edges / n_nodes (the mean degree; n_edges counts stored
    directed entries, an undirected edge twice), clipped to LR_RANGE.  A node of degree
    D has D neighbourhood relations to learn in the same number of updates (T q per
    epoch), so a denser graph needs a larger step.  Measured on the panel
    (docs/training.md): Cora (mean degree 3.9) is best at a peak near 1e-3 and declines
    above it; PPI (19.7) needs about 4e-3 in the same budget."""
    degree = n_edges / max(n_nodes, 1)
    lr = float(np.clip(LR_PER_DEGREE * degree, *LR_RANGE))
    return lr, (
        f"{LR_PER_DEGREE:g} x mean degree {degree:.1f}, within {LR_RANGE[0]:g}..{LR_RANGE[1]:g}"
    )


def learning_rate(cfg, lr, step, total_steps):
    """Adam's rate at global step ``step`` (0-based) of ``total_steps``.

    'constant': lr.  'linear': lr (1 - (1 - lr_floor) step / (total_steps - 1)), from lr
    at the first step down to lr * lr_floor at the last, as word2vec decays its rate."""
    if cfg.lr_schedule == "constant":
        return lr
    done = min(step / max(total_steps - 1, 1), 1.0)
    return lr * (1.0 - (1.0 - cfg.lr_floor) * done)
