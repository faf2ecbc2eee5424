"""The memory a run needs, estimated before anything is allocated: one training step's
and the parameters' (``step_memory``), the spectral stages' before and after training
(``spectral_memory``), and the checks that refuse a run that does not fit with the
figure (``check_step_memory``, ``check_run_memory``; docs/scaling.md)."""

import numpy as np

from ...defaults import HELD_OUT_STOPS
from .presets import sampled_size


def step_memory(cfg, n_nodes, feat_dim, sparse_features=False):
    """Bytes a run of ``cfg`` needs, estimated before anything is allocated: the
    parameters with Adam's two moments, and one step's intermediates (float32; indices
    int64).  P = B x targets per walk pairs, I = q - 1 slots, m routing iterations:
    x and u (I, P, d) with their gradients, u_hat and its gradient (I, P, k), the
    routing's c (m, P, I), s and e (m, P, k), the sampled logits (P, |V'|) twice; with
    the skip-gram term's negative sampling, K negatives per (slot, pair) item: their
    positions, scores and gradients (I P K)."""
    q, k, B, m = cfg.walk_length, cfg.dim, cfg.batch_size, cfg.routing_iters
    I = q - 1
    per_walk = q if cfg.targets == "all" else 1 if cfg.targets == "random" else len(cfg.targets)
    P = B * per_walk
    S = sampled_size(cfg, n_nodes)
    d = 0 if sparse_features else feat_dim
    K = int(cfg.skipgram_negatives) if cfg.skipgram_weight else 0
    floats = (
        4 * I * P * d
        + 2 * I * P * k
        + m * P * I
        + 2 * m * P * k
        + 2 * P * S
        + 3 * n_nodes * (k + 1 + (feat_dim if not sparse_features and d else 0))
        + 4 * I * k * feat_dim
        + 3 * I * P * K
    )
    ints = B * q + 3 * I * P + (n_nodes * cfg.walks_per_node if cfg.batch_mode == "shuffle" else 0)
    return 4 * floats + 8 * (ints + 2 * I * P * K)


def check_step_memory(cfg, n_nodes, feat_dim, sparse=False):
    """InputError with the figure when ``step_memory`` exceeds the available memory."""
    from ...errors import check_memory

    check_memory(
        step_memory(cfg, n_nodes, feat_dim, sparse),
        f"training with --batch-size {cfg.batch_size}, --walk-length {cfg.walk_length}, "
        f"--dim {cfg.dim}, --routing-iters {cfg.routing_iters}"
        + (
            f", --skipgram-negatives {cfg.skipgram_negatives}"
            if cfg.skipgram_weight and cfg.skipgram_negatives
            else ""
        )
        + f" on {n_nodes} nodes",
        "lower them (--batch-size first)",
    )


def spectral_memory(cfg, n_nodes, n_edges, resume=False):
    """Bytes the spectral stages of a run need at their peaks, estimated from the dense
    blocks spectral/prone.py and spectral/propagation.py hold at once, each of w bytes an
    entry (``cfg.spectral_precision``: 4 or 8; the float32 stages add their matrices'
    float32 values, 2 S32 with S32 = (2 x edges + N) x 4, and the spectral start frees
    its float64 temporaries first: 4 S in place of 5 S) (docs/scaling.md,
    "The spectral stages"): ``(before, after)``, before training (the spectral start and
    the stop rule's structure measure, one after the other) and after it
    (``--propagate``, beside the trained tables).  With N nodes, S = (2 x edges + N) x 12
    bytes a float64 sparse matrix of the symmetric adjacency (values and int32 indices)
    and b = spectral.FILTER_COLUMNS, the columns the Chebyshev filter takes at a time:

    * the spectral start (``cfg.spectral``; on resume only 'features', the others come
      from the checkpoint) at rank K: the randomized SVD holds 2 (N, K + 10) blocks (the
      basis Q and B = Q^T F: spectral.wide_svd; float32: 3, the product written into the
      block of the one before beside LU's copy), the propagation 2 (N, K) (R and the filtered
      signal, then the filtered signal and the SVD's U) and 6 (N, b) of the filter, the
      larger of the two; 5 S (A, F's values, I + A, M and a temporary of building M) and
      the float32 outputs;
    * the structure measure (``--stop auto``): the randomized SVD at rank
      structure.RANK, 2 (N, RANK + 10) blocks, and 6 S (A, its held-out copy,
      their index lists);
    * the held-out sample (``--stop holdout`` or ``loglik``, budget.held_out): 6 S (A, its upper
      triangle, the held-out pairs, A without them and the temporaries between);
    * ``--propagate`` on the trained o_v (N, k): 2 (N, k) blocks (the filtered o_v and
      its copy the SVD factorises; the filter: one and 6 (N, b)) and 4 S; 'auto' first
      measures held-out edges, 5 (N, k) blocks (the o_v in float64, their directions and
      the propagation over the held-out graph) and 6 S, whichever is more."""
    from ...spectral.prone import FILTER_COLUMNS as b

    N, k = int(n_nodes), int(cfg.dim)
    S = 12 * (2 * int(n_edges) + N)
    w = np.dtype(getattr(cfg, "spectral_precision", "float64")).itemsize
    S32 = (4 * (2 * int(n_edges) + N)) if w == 4 else 0  # a matrix's float32 values
    before = 0
    if cfg.spectral not in (None, "none") and not (resume and cfg.spectral != "features"):
        K = (cfg.spectral_dim or cfg.feat_dim) if cfg.spectral == "features" else cfg.feat_dim
        if cfg.spectral == "init_xo":
            K = max(K, k)
        svd = (2 if w == 8 else 3) * (K + 10)  # float32 writes each product in a spare
        blocks = max(svd, 2 * K + 6 * min(b, K) if cfg.prone_order > 1 else 0)
        before = (5 * S if w == 8 else 4 * S + 2 * S32) + w * N * blocks + 3 * 4 * N * K
    if cfg.stop == "auto":
        from ...spectral.structure import RANK

        before = max(before, 6 * S + 8 * N * 2 * (RANK + 10))
    if cfg.stop in HELD_OUT_STOPS:
        before = max(before, 6 * S)
    after = 0
    if cfg.propagate in ("on", "auto"):
        after = 4 * S + 2 * S32 + w * N * max(2 * k, k + 6 * min(b, k))
        if cfg.propagate == "auto":
            after = max(after, 6 * S + 8 * N * 5 * k)
    return before, after


def table_memory(cfg, n_nodes, feat_dim, sparse_features=False):
    """Bytes of the trained tables without Adam's moments, which a finished run frees
    before the propagation (cli/train.py, the estimator): O, the biases and a trained
    x (N (k + 1 + d) float32) and W (q - 1, k, d)."""
    d = 0 if sparse_features else feat_dim
    return 4 * (n_nodes * (cfg.dim + 1 + d) + (cfg.walk_length - 1) * cfg.dim * feat_dim)


def check_run_memory(cfg, n_nodes, n_edges, feat_dim, sparse=False, resume=False):
    """InputError with the figure when the whole run needs more than the available memory:
    the training (``step_memory``), the spectral propagation after it beside the trained
    tables (``table_memory``: Adam's moments are freed by then), or the spectral stages
    before it (``spectral_memory``), whichever is most."""
    from ...errors import check_memory

    step = step_memory(cfg, n_nodes, feat_dim, sparse)
    before, after = spectral_memory(cfg, n_nodes, n_edges, resume)
    propagation = table_memory(cfg, n_nodes, feat_dim, sparse) + after if after else 0
    if max(step, propagation) <= before:
        stages, fixes = [], []
        if cfg.spectral not in (None, "none"):
            stages.append(f"--spectral {cfg.spectral}")
            fixes.append("--spectral none")
        if cfg.stop == "auto":
            stages.append("--stop auto's structure measure")
            fixes.append("--epochs N (no --stop auto)")
        if cfg.stop in HELD_OUT_STOPS:
            stages.append(f"--stop {cfg.stop}'s held-out sample")
            fixes.append("--stop none")
        what = f"the spectral stages before training ({', '.join(stages)}) on {n_nodes} nodes"
        fix = "use " + " and ".join(fixes)
        check_memory(before, what, fix)
        return
    check_step_memory(cfg, n_nodes, feat_dim, sparse)  # the training alone: its message
    if not after:
        return
    check_memory(
        propagation,
        f"--propagate {cfg.propagate} on {n_nodes} nodes beside the trained tables "
        f"(--dim {cfg.dim}, --feat-dim {feat_dim})",
        "lower --dim, or use --propagate none (a resumed run may change it)",
    )
