"""A run's options: ``TrainConfig``, every option with its default from
``defaults.OPTIONS`` (the model's own, ``ModelConfig``, live in model/model_config.py).

A second concern, to move later to a module of its own: the memory estimate
(``step_memory``, ``check_step_memory``, ``spectral_memory``, ``check_run_memory``).

The rest of a run's configuration has its own module, re-exported here where callers
import it: the preset rules that fill unset options (presets.py: ``resolve``,
``preset_for``, ``budget_epochs``, ``sampled_size``), the checks (validation.py:
``check_types``, ``validate``, ``range_text``), the learning rate (rates.py:
``converge_lr``, ``learning_rate``, ``LR_TINY``) and the thread count a run uses by
default (kernels/_threads.py: ``usable_cores``).
"""

from dataclasses import asdict, dataclass

from ..defaults import DEFAULTS
from ..kernels._threads import usable_cores
from ..model.model_config import ModelConfig
from .presets import budget_epochs, preset_for, resolve, sampled_size
from .rates import LR_TINY, converge_lr, learning_rate
from .validation import check_types, range_text, validate

__all__ = [  # the names callers import from here (their modules: the docstring)
    "LR_TINY",
    "ModelConfig",
    "TrainConfig",
    "budget_epochs",
    "check_run_memory",
    "check_step_memory",
    "check_types",
    "converge_lr",
    "learning_rate",
    "preset_for",
    "range_text",
    "resolve",
    "sampled_size",
    "spectral_memory",
    "step_memory",
    "usable_cores",
    "validate",
]


@dataclass
class TrainConfig:
    """Every option of a training run.  Paper symbols in brackets; the defaults, ranges
    and choices are those of ``defaults.OPTIONS``.

    dim [k]              size of e_v and o_v (the embeddings)
    feat_dim [d]         size of the trainable input features x (featureless graphs)
    walk_length [q]      nodes per walk; I = q - 1 context slots
    walks_per_node [T]   walks started from every node in each epoch
    epochs               passes, each of ceil(#walks / batch_size) batches
    batch_size [B]       walks per batch
    lr                   Adam learning rate (the peak of a linear schedule)
    (these four, lr_schedule, walks, sampler and adam: None -> from ``preset``)
    preset               'auto' ('converge' without fixed features, 'paper' with them),
                         'converge' or 'paper' (defaults.PRESETS; ``resolve``)
    num_sampled [|V'|]   sampled nodes per batch in the sampled softmax; None -> min(256, N - 1)
    sampler              'log_uniform' (TensorFlow's default), 'unigram' (walk
                         counts^0.75), 'uniform'
    routing_iters [m]    iterations of Algorithm 1
    routing_rule         'paper' (b_i = u_hat_i . e) or 'sabour' (b_i += u_hat_i . e)
    routing_scale        c = scale softmax(b); None -> q - 1 (authors' code)
    grad_mode            'exact' or 'stop' (c constant, authors' code)
    targets              'all', 'random' or a tuple of 0-based walk positions
    batch_mode           'random' (with replacement, authors) or 'shuffle'
    threads              Numba and BLAS threads
    seed                 seed of every random stream
    normalize_features   divide each fixed feature row by its sum (authors' code)
    adam                 'dense' (every row every step, as the authors' TensorFlow) or
                         'lazy' (only the rows of O, biases and x a batch touches: a step
                         then costs nothing per untouched node; optim.py)
    lr_schedule          'constant' (authors) or 'linear': from lr down to lr * lr_floor at
                         the last step, as word2vec's decay
    lr_floor             the linear schedule's last rate, as a fraction of lr
    walks                'fixed': the same N*T walks every epoch (authors); 'fresh': new
                         walks every epoch (walk w of epoch e is keyed by (seed, e, w))
    walk_chunk           walks per chunk when counting node frequencies for the unigram
                         sampler (walks are otherwise generated per batch, never stored)
    skipgram_weight      lambda of the skip-gram term (skipgram.py; 0: the paper's loss)
    skipgram_negatives   0: the term's softmax over V'; K: K negatives per item
    spectral             'none', 'features' (ProNE as fixed x), 'init' (ProNE starts x),
                         'init_xo' (x and O): spectral.start
    spectral_dim         d of --spectral features (None: feat_dim)
    prone_order, prone_mu, prone_theta   ProNE's Chebyshev order and filter (spectral.py)
    row_norm        the length of the written rows when propagated (propagation.py)
    propagate            'none', 'on' or 'auto': ProNE's propagation of the written o_v
                         (propagation.py; the same order and filter)
    stop                 'none', 'auto': end before ``epochs`` when the o_v stop
                         moving, or 'holdout': when held-out edges stop gaining AUC
                         (budget.py); None with an explicit ``epochs``: 'none'
    node2vec_p, node2vec_q  node2vec's return and in-out parameters of second-order
                         walks (walk_kernels.node2vec_step); 1, 1: first-order walks (the paper)
    """

    dim: int = DEFAULTS["dim"]
    feat_dim: int = DEFAULTS["feat_dim"]
    walk_length: int = DEFAULTS["walk_length"]
    walks_per_node: int | None = DEFAULTS["walks_per_node"]
    epochs: int | None = DEFAULTS["epochs"]
    batch_size: int | None = DEFAULTS["batch_size"]
    lr: float | None = DEFAULTS["lr"]
    lr_schedule: str | None = DEFAULTS["lr_schedule"]
    lr_floor: float = DEFAULTS["lr_floor"]
    walks: str | None = DEFAULTS["walks"]
    num_sampled: int | None = DEFAULTS["num_sampled"]
    sampler: str | None = DEFAULTS["sampler"]
    routing_iters: int = DEFAULTS["routing_iters"]
    routing_rule: str = DEFAULTS["routing_rule"]
    routing_scale: float | None = DEFAULTS["routing_scale"]
    grad_mode: str = DEFAULTS["grad_mode"]
    targets: object = DEFAULTS["targets"]
    batch_mode: str = DEFAULTS["batch_mode"]
    threads: int = DEFAULTS["threads"]
    seed: int = DEFAULTS["seed"]
    normalize_features: bool = DEFAULTS["normalize_features"]
    adam: str | None = DEFAULTS["adam"]
    walk_chunk: int = DEFAULTS["walk_chunk"]
    preset: str = DEFAULTS["preset"]
    skipgram_weight: float | None = DEFAULTS["skipgram_weight"]
    skipgram_negatives: int = DEFAULTS["skipgram_negatives"]
    spectral: str | None = DEFAULTS["spectral"]
    spectral_dim: int | None = DEFAULTS["spectral_dim"]
    prone_order: int = DEFAULTS["prone_order"]
    prone_mu: float = DEFAULTS["prone_mu"]
    prone_theta: float = DEFAULTS["prone_theta"]
    row_norm: float = DEFAULTS["row_norm"]
    propagate: str | None = DEFAULTS["propagate"]
    stop: str | None = DEFAULTS["stop"]
    node2vec_p: float = DEFAULTS["node2vec_p"]
    node2vec_q: float = DEFAULTS["node2vec_q"]

    def model_config(self):
        return ModelConfig(
            self.routing_iters,
            self.routing_rule,
            self.routing_scale,
            self.grad_mode,
            float(self.skipgram_weight or 0.0),
            int(self.skipgram_negatives),
        )

    def to_dict(self):
        d = asdict(self)
        if not isinstance(d["targets"], str):
            d["targets"] = [int(t) for t in d["targets"]]
        return d

    def check_step_memory(self, n_nodes):
        """``check_step_memory`` of this run on ``n_nodes`` nodes (sparse features: the
        check validation.validate runs before any allocation, through the config, since
        validation.py sits below this module)."""
        check_step_memory(self, n_nodes, self.feat_dim, sparse=True)


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
    from ..errors import check_memory

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
    """Bytes the spectral stages of a run need at their peaks, estimated from the float64
    blocks model/spectral.py and model/propagation.py hold at once (docs/scaling.md,
    "The spectral stages"): ``(before, after)``, before training (the spectral start and
    the stop rule's structure measure, one after the other) and after it
    (``--propagate``, beside the trained tables).  With N nodes, S = (2 x edges + N) x 12
    bytes a float64 sparse matrix of the symmetric adjacency (values and int32 indices)
    and b = spectral.FILTER_COLUMNS, the columns the Chebyshev filter takes at a time:

    * the spectral start (``cfg.spectral``; on resume only 'features', the others come
      from the checkpoint) at rank K: the randomized SVD holds 3 (N, K + 10) blocks (the
      basis Q, B = Q^T F and gesdd's V^T), the propagation 2 (N, K) (R and the filtered
      signal, then the filtered signal and the SVD's U) and 6 (N, b) of the filter, the
      larger of the two; 5 S (A, F's values, I + A, M and a temporary of building M) and
      the float32 outputs;
    * the structure measure (``--stop auto``): the randomized SVD at rank
      budget.STOP_RANK, 3 (N, STOP_RANK + 10) blocks, and 6 S (A, its held-out copy,
      their index lists);
    * the held-out sample (``--stop holdout``, budget.held_out): 6 S (A, its upper
      triangle, the held-out pairs, A without them and the temporaries between);
    * ``--propagate`` on the trained o_v (N, k): 2 (N, k) blocks (the filtered o_v and
      its copy the SVD factorises; the filter: one and 6 (N, b)) and 4 S; 'auto' first
      measures held-out edges, 5 (N, k) blocks (the o_v in float64, their directions and
      the propagation over the held-out graph) and 6 S, whichever is more."""
    from ..model.spectral import FILTER_COLUMNS as b

    N, k = int(n_nodes), int(cfg.dim)
    S = 12 * (2 * int(n_edges) + N)
    before = 0
    if cfg.spectral not in (None, "none") and not (resume and cfg.spectral != "features"):
        K = (cfg.spectral_dim or cfg.feat_dim) if cfg.spectral == "features" else cfg.feat_dim
        if cfg.spectral == "init_xo":
            K = max(K, k)
        blocks = max(3 * (K + 10), 2 * K + 6 * min(b, K) if cfg.prone_order > 1 else 0)
        before = 5 * S + 8 * N * blocks + 3 * 4 * N * K
    if cfg.stop == "auto":
        from .budget import STOP_RANK

        before = max(before, 6 * S + 8 * N * 3 * (STOP_RANK + 10))
    if cfg.stop == "holdout":
        before = max(before, 6 * S)
    after = 0
    if cfg.propagate in ("on", "auto"):
        after = 4 * S + 8 * N * max(2 * k, k + 6 * min(b, k))
        if cfg.propagate == "auto":
            after = max(after, 6 * S + 8 * N * 5 * k)
    return before, after


def check_run_memory(cfg, n_nodes, n_edges, feat_dim, sparse=False, resume=False):
    """InputError with the figure when the whole run needs more than the available memory:
    the training (``step_memory``) with the spectral propagation after it, beside the
    trained tables, or the spectral stages before it (``spectral_memory``), whichever
    is more."""
    from ..errors import check_memory

    step = step_memory(cfg, n_nodes, feat_dim, sparse)
    before, after = spectral_memory(cfg, n_nodes, n_edges, resume)
    if step + after <= before:
        stages, fixes = [], []
        if cfg.spectral not in (None, "none"):
            stages.append(f"--spectral {cfg.spectral}")
            fixes.append("--spectral none")
        if cfg.stop == "auto":
            stages.append("--stop auto's structure measure")
            fixes.append("--epochs N (no --stop auto)")
        if cfg.stop == "holdout":
            stages.append("--stop holdout's held-out sample")
            fixes.append("--stop none")
        what = f"the spectral stages before training ({', '.join(stages)}) on {n_nodes} nodes"
        fix = "use " + " and ".join(fixes)
        check_memory(before, what, fix)
        return
    check_step_memory(cfg, n_nodes, feat_dim, sparse)  # the training alone: its message
    if not after:
        return
    check_memory(
        step + after,
        f"training with --batch-size {cfg.batch_size}, --walk-length {cfg.walk_length}, "
        f"--dim {cfg.dim}, --routing-iters {cfg.routing_iters} on {n_nodes} nodes, then "
        f"--propagate {cfg.propagate} beside the trained tables",
        "lower them (--batch-size first), or use --propagate none (a resumed run may change it)",
    )
