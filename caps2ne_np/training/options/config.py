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

from dataclasses import asdict, dataclass

from ...defaults import DEFAULTS
from ...model.model_config import ModelConfig
from .memory import check_step_memory

__all__ = ["TrainConfig"]


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
    spectral_precision   'float32' or 'float64': the arithmetic of the spectral start and
                         the propagation
    spectrum_power       'auto', '0.5', '0.75' or '1': the written rows rownorm(U S^p) when
                         propagated (propagation.py)
    row_norm             the length of the written rows when propagated (propagation.py)
    propagate            'none', 'on' or 'auto': ProNE's propagation of the written o_v
                         (propagation.py; the same order and filter)
    stop                 'none', 'auto': end before ``epochs`` when the o_v stop
                         moving, 'holdout': when held-out edges stop gaining AUC,
                         or 'loglik': when contexts through them stop gaining
                         log-likelihood (budget.py); None with an explicit ``epochs``: 'none'
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
    spectral_precision: str = DEFAULTS["spectral_precision"]
    spectrum_power: str = DEFAULTS["spectrum_power"]
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
        """``memory.check_step_memory`` of this run on ``n_nodes`` nodes (sparse features: the
        check validation.validate runs before any allocation, through the config, since
        validation.py sits below this module)."""
        check_step_memory(self, n_nodes, self.feat_dim, sparse=True)
