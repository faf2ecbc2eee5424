"""The ``Caps2NE`` estimator: a thin scikit-learn style shell over ``train.fit``,
and the model file (all parameters, config, node ids, format version in one .npz).

>>> model = Caps2NE(dim=128, walks_per_node=32, epochs=10, n_jobs=2).fit(adj)
>>> O = model.get_embedding()          # (N, k) float32, row i = node i
"""

from sklearn.base import BaseEstimator

from . import graph as graph_mod
from .core import Params
from .defaults import PLAIN
from .modelfile import read_model, save_model
from .train import TrainConfig, fit



class Caps2NE(BaseEstimator):
    """Caps2NE node embeddings (Nguyen et al., CIKM 2020).

    Hyperparameters are those of ``train.TrainConfig`` (paper symbols there); those
    left None (the default) come from ``preset`` (``defaults.PRESETS``: 'auto' is
    'converge' for a featureless graph, 'paper' with fixed features X), the same
    defaults as the command line; ``config_`` holds the values used.
    ``n_jobs`` is the thread count (Numba and BLAS, restored after ``fit``) and
    ``random_state`` the seed.  Fitted state: ``O_`` (the embeddings), ``W_``,
    ``bias_``, ``X_`` (trained or fixed input features), ``node_ids_``,
    ``history_`` (per-epoch loss and throughput).

    ``engine='ray'`` trains on a Ray cluster instead (``distributed.fit``): ``workers``
    P, ``servers`` S, ``ray_address`` (None: a local instance); lazy Adam only.
    """

    def __init__(self, dim=PLAIN["dim"], feat_dim=PLAIN["feat_dim"],
                 walk_length=PLAIN["walk_length"], walks_per_node=None, epochs=None,
                 batch_size=None, lr=None, num_sampled=None, sampler=None,
                 routing_iters=PLAIN["routing_iters"], routing_rule=PLAIN["routing_rule"],
                 routing_scale=None, grad_mode=PLAIN["grad_mode"], targets=PLAIN["targets"],
                 batch_mode=PLAIN["batch_mode"], normalize_features=True, adam=None,
                 walk_chunk=PLAIN["walk_chunk"], n_jobs=1, random_state=0, progress=False,
                 preset="auto", lr_schedule=None, lr_floor=PLAIN["lr_floor"], walks=None,
                 engine="single", workers=1, servers=1, ray_address=None):
        self.dim = dim
        self.feat_dim = feat_dim
        self.walk_length = walk_length
        self.walks_per_node = walks_per_node
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.num_sampled = num_sampled
        self.sampler = sampler
        self.routing_iters = routing_iters
        self.routing_rule = routing_rule
        self.routing_scale = routing_scale
        self.grad_mode = grad_mode
        self.targets = targets
        self.batch_mode = batch_mode
        self.normalize_features = normalize_features
        self.adam = adam
        self.walk_chunk = walk_chunk
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.progress = progress
        self.preset = preset
        self.lr_schedule = lr_schedule
        self.lr_floor = lr_floor
        self.walks = walks
        self.engine = engine              # 'ray': sharded training (distributed.py, issue 18)
        self.workers = workers
        self.servers = servers
        self.ray_address = ray_address

    def train_config(self):
        """The TrainConfig these hyperparameters describe."""
        return TrainConfig(
            dim=self.dim, feat_dim=self.feat_dim, walk_length=self.walk_length,
            walks_per_node=self.walks_per_node, epochs=self.epochs, batch_size=self.batch_size,
            lr=self.lr, num_sampled=self.num_sampled, sampler=self.sampler,
            routing_iters=self.routing_iters, routing_rule=self.routing_rule,
            routing_scale=self.routing_scale, grad_mode=self.grad_mode,
            targets=self.targets if isinstance(self.targets, str) else tuple(self.targets),
            batch_mode=self.batch_mode, normalize_features=self.normalize_features,
            adam=self.adam, walk_chunk=self.walk_chunk, preset=self.preset,
            lr_schedule=self.lr_schedule, lr_floor=self.lr_floor, walks=self.walks,
            threads=_threads(self.n_jobs),
            seed=0 if self.random_state is None else int(self.random_state))

    def fit(self, graph, X=None, epoch_callback=None, checkpoint_dir=None, checkpoint_every=0,
            resume_from=None, step_callback=None):
        """Learn embeddings for ``graph``: a ``graph.Graph`` or a scipy.sparse (N, N)
        adjacency (rows = source nodes; an undirected graph must be symmetric).
        ``X`` (N, d) fixed input features (dense, or scipy.sparse kept sparse), or
        None to train them.  ``checkpoint_dir``, ``checkpoint_every``, ``resume_from``
        and the callbacks are those of ``train.fit``.  Returns self."""
        if not isinstance(graph, graph_mod.Graph):
            graph = graph_mod.from_scipy(graph, directed=True, keep_self_loops=False)
        run, extra = fit, {}
        if self.engine == "ray":
            from .distributed import fit as run
            extra = dict(workers=self.workers, servers=self.servers, address=self.ray_address)
        elif self.engine != "single":
            raise ValueError(f"engine must be 'single' or 'ray', got {self.engine!r}")
        result = run(graph.indptr, graph.indices, graph.weights, self.train_config(),
                     features=X, progress=self.progress, epoch_callback=epoch_callback,
                     checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                     resume_from=resume_from, step_callback=step_callback, **extra)
        p = result.params
        self.O_, self.W_, self.bias_, self.X_ = p.O, p.W, p.bias, p.X
        self.fixed_features_ = p.fixed_features
        self.node_ids_ = list(graph.node_ids)
        self.history_ = result.history
        self.config_ = result.config.to_dict()
        self.lr_ = result.optimizer.lr
        return self

    def get_embedding(self):
        """The node embeddings o_v: (N, k) float32, row i = node i."""
        _check_fitted(self)
        return self.O_

    def transform(self, graph, X=None, nodes=None, samples=None, random_state=0, aggregate=None):
        """Embeddings of (new) nodes through the capsule path, Algorithm 3.

        ``graph`` holds the nodes and their edges (Graph or scipy.sparse adjacency),
        ``X`` their fixed features in graph order (None for a featureless model),
        ``nodes`` the ids or indices to embed (default: every node of ``graph``).
        ``aggregate``: 'calibrated' (None: the default; on the scale of the o_v), 'mean'
        (the paper's average) or 'sum' (infer.infer_embeddings).
        Returns (V, k) float32 from e over Z sampled contexts (infer.py).
        """
        from .infer import DEFAULT_AGGREGATE, infer_embeddings

        _check_fitted(self)
        if nodes is None:
            n = graph.n_nodes if isinstance(graph, graph_mod.Graph) else graph.shape[0]
            nodes = list(range(n))
        _, E = infer_embeddings(self, graph, X, nodes, samples=samples,
                                seed=0 if random_state is None else int(random_state),
                                threads=_threads(self.n_jobs),
                                aggregate=DEFAULT_AGGREGATE if aggregate is None else aggregate)
        return E

    def save(self, path, overwrite=False):
        """Write every parameter, the config, node ids and history to one .npz (atomic)."""
        _check_fitted(self)
        save_model(path, self.params_(), self.node_ids_, self.config_, self.lr_, self.history_,
                   overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """Read a model written by ``save`` (or ``caps2ne train --model-out``)."""
        m = read_model(path)
        keys = set(TrainConfig.__dataclass_fields__)
        params = {k: v for k, v in m["config"].items() if k in keys}
        model = cls(**{("n_jobs" if k == "threads" else "random_state" if k == "seed" else k): v
                       for k, v in params.items()})
        model.O_, model.W_, model.bias_, model.X_ = m["O"], m["W"], m["bias"], m["X"]
        model.fixed_features_ = m["fixed_features"]
        model.node_ids_ = m["node_ids"]
        model.history_ = m["history"]
        model.config_ = m["config"]
        model.lr_ = m["lr_used"]
        return model

    def params_(self):
        """The fitted parameters as a ``core.Params``."""
        _check_fitted(self)
        return Params(self.W_, self.O_, self.bias_, self.X_, fixed_features=self.fixed_features_)


def _threads(n_jobs):
    import os

    if n_jobs is None or n_jobs == 0:
        return 1
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return int(n_jobs)


def _check_fitted(model):
    if not hasattr(model, "O_"):
        raise ValueError("this Caps2NE model is not fitted yet; call fit() first")
