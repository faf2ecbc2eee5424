"""The ``Caps2NE`` estimator: a thin scikit-learn style shell over ``train.fit``,
and the model file (all parameters, config, node ids, format version in one .npz).

>>> model = Caps2NE(dim=128, walks_per_node=32, epochs=10, n_jobs=2).fit(adj)
>>> O = model.get_embedding()          # (N, k) float32, row i = node model.node_ids_[i]
>>> model.embedding_dict()[5]          # the vector of the node the input called 5
"""

import numbers

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from . import graph as graph_mod
from .core import Params
from .defaults import DEFAULTS as D
from .errors import InputError
from .modelfile import read_model, save_model
from .train import TrainConfig, fit


class Caps2NE(BaseEstimator):
    """Caps2NE node embeddings (Nguyen et al., CIKM 2020).

    Hyperparameters are those of ``train.TrainConfig`` (paper symbols there), with the
    defaults of ``defaults.OPTIONS``, as on the command line.  Those left None come from
    ``preset`` (``defaults.PRESETS``: 'auto' is 'converge' for a featureless graph,
    'paper' with fixed features X); ``config_`` holds the values used.
    ``n_jobs`` is the thread count (Numba and BLAS, restored after ``fit``).
    ``random_state``: an int seed (same seed and input, same embeddings on any thread
    count), a ``numpy.random.Generator`` (one seed is drawn from it), or None: a fresh
    seed from the operating system's entropy, so every fit differs; ``seed_`` records
    the seed used, so such a run can be repeated.

    Fitted state: ``O_`` (the embeddings), ``W_``, ``bias_``, ``X_`` (trained or fixed
    input features), ``node_ids_`` (the id string of each row), ``nodes_`` (each row's
    node as the input named it: an int stays an int), ``seed_``, ``history_``
    (per-epoch loss and throughput).  An unfitted model raises scikit-learn's
    ``NotFittedError``.

    ``engine='ray'`` trains on a Ray cluster instead (``distributed.fit``): ``workers``
    P, ``servers`` S, ``ray_address`` (None: a local instance); lazy Adam only.
    """

    def __init__(
        self,
        dim=D["dim"],
        feat_dim=D["feat_dim"],
        walk_length=D["walk_length"],
        walks_per_node=D["walks_per_node"],
        epochs=D["epochs"],
        batch_size=D["batch_size"],
        lr=D["lr"],
        num_sampled=D["num_sampled"],
        sampler=D["sampler"],
        routing_iters=D["routing_iters"],
        routing_rule=D["routing_rule"],
        routing_scale=D["routing_scale"],
        grad_mode=D["grad_mode"],
        targets=D["targets"],
        batch_mode=D["batch_mode"],
        normalize_features=D["normalize_features"],
        adam=D["adam"],
        walk_chunk=D["walk_chunk"],
        n_jobs=D["threads"],
        random_state=D["seed"],
        progress=False,
        preset=D["preset"],
        lr_schedule=D["lr_schedule"],
        lr_floor=D["lr_floor"],
        walks=D["walks"],
        engine="single",
        workers=1,
        servers=1,
        ray_address=None,
        node2vec_p=D["node2vec_p"],
        node2vec_q=D["node2vec_q"],
    ):
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
        self.engine = engine  # 'ray': sharded training (distributed.py, issue 18)
        self.workers = workers
        self.servers = servers
        self.ray_address = ray_address
        self.node2vec_p = node2vec_p  # node2vec's p and q: second-order walks (walks.py)
        self.node2vec_q = node2vec_q

    def train_config(self):
        """The TrainConfig these hyperparameters describe."""
        return TrainConfig(
            dim=self.dim,
            feat_dim=self.feat_dim,
            walk_length=self.walk_length,
            walks_per_node=self.walks_per_node,
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            num_sampled=self.num_sampled,
            sampler=self.sampler,
            routing_iters=self.routing_iters,
            routing_rule=self.routing_rule,
            routing_scale=self.routing_scale,
            grad_mode=self.grad_mode,
            targets=self.targets if isinstance(self.targets, str) else tuple(self.targets),
            batch_mode=self.batch_mode,
            normalize_features=self.normalize_features,
            adam=self.adam,
            walk_chunk=self.walk_chunk,
            preset=self.preset,
            lr_schedule=self.lr_schedule,
            lr_floor=self.lr_floor,
            walks=self.walks,
            threads=_threads(self.n_jobs),
            seed=_seed(self.random_state),
            node2vec_p=self.node2vec_p,
            node2vec_q=self.node2vec_q,
        )

    def fit(
        self,
        graph,
        X=None,
        epoch_callback=None,
        checkpoint_dir=None,
        checkpoint_every=0,
        resume_from=None,
        step_callback=None,
        *,
        directed=False,
        keep_self_loops=False,
    ):
        """Learn embeddings for ``graph``; returns self.

        ``graph`` is any input of ``graph.coerce_graph``: a scipy.sparse (N, N)
        adjacency (row = source node), a networkx graph (labels kept), an edge array
        (m, 2) or (m, 3) ``u v [weight]``, a pandas DataFrame of edges (any ids), or a
        ``graph.Graph`` (``read_edgelist``).  As on the command line, edges are
        undirected unless ``directed=True`` and self loops are dropped unless
        ``keep_self_loops=True``: a matrix gives the same stored edges as
        ``caps2ne train --graph matrix.npz``.  Rows of the result follow the graph's
        node order (``node_ids_``): matrix rows, ``G.nodes``, or first appearance in
        an edge list or array.  ``X`` (N, d) fixed input features in that order
        (dense, or scipy.sparse kept sparse), or None to train them.
        ``checkpoint_dir``, ``checkpoint_every``, ``resume_from`` and the callbacks are
        those of ``train.fit``.
        """
        graph, nodes = graph_mod.coerce_graph(
            graph, directed=directed, keep_self_loops=keep_self_loops
        )
        cfg = self.train_config()
        run, extra = fit, {}
        if self.engine == "ray":
            from .distributed import fit as run

            extra = dict(workers=self.workers, servers=self.servers, address=self.ray_address)
        elif self.engine != "single":
            raise ValueError(f"engine must be 'single' or 'ray', got {self.engine!r}")
        result = run(
            graph.indptr,
            graph.indices,
            graph.weights,
            cfg,
            features=X,
            progress=self.progress,
            epoch_callback=epoch_callback,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            resume_from=resume_from,
            step_callback=step_callback,
            **extra,
        )
        p = result.params
        self.O_, self.W_, self.bias_, self.X_ = p.O, p.W, p.bias, p.X
        self.fixed_features_ = p.fixed_features
        self.node_ids_ = list(graph.node_ids)
        self.nodes_ = nodes
        self.seed_ = cfg.seed
        self.history_ = result.history
        self.config_ = result.config.to_dict()
        self.lr_ = result.optimizer.lr
        return self

    def get_embedding(self):
        """The node embeddings o_v: (N, k) float32; row i is node ``node_ids_[i]``.

        The order is the graph's, not sorted ids: matrix rows, ``G.nodes`` for
        networkx, first appearance for an edge list or edge array (so row 5 is node
        5 only when the ids are 0..N-1 in that order).  ``embedding_dict()`` keys
        the rows by node.
        """
        _check_fitted(self)
        return self.O_

    def embedding_dict(self):
        """``{node: o_v}``: each node as the input named it (``nodes_``) to its (k,) vector.

        Keys are the labels given to ``fit`` (networkx labels, edge-array or DataFrame
        values; the id strings for a file, and for a loaded model).
        """
        _check_fitted(self)
        nodes = getattr(self, "nodes_", None) or self.node_ids_
        return dict(zip(nodes, self.O_))

    def to_keyedvectors(self):
        """The embeddings as gensim ``KeyedVectors`` keyed by the id strings (needs gensim)."""
        _check_fitted(self)
        try:
            from gensim.models import KeyedVectors
        except ImportError:
            raise ImportError("to_keyedvectors needs gensim: pip install gensim") from None
        kv = KeyedVectors(vector_size=self.O_.shape[1])
        kv.add_vectors(list(self.node_ids_), np.asarray(self.O_, dtype=np.float32))
        return kv

    def transform(self, graph, X=None, nodes=None, samples=None, random_state=0, aggregate=None):
        """Embeddings of (new) nodes through the capsule path, Algorithm 3.

        ``graph`` holds the nodes and their edges (Graph or scipy.sparse adjacency),
        ``X`` their fixed features in graph order (None for a featureless model),
        ``nodes`` the ids or indices to embed (default: every node of ``graph``).
        ``aggregate``: 'calibrated' (None: the default; on the scale of the o_v, with
        ``calibration_`` when set, else a calibration fitted on the training nodes in
        ``graph``), 'mean' (the paper's average) or 'sum' (infer.infer_embeddings).
        Returns (V, k) float32 from e over Z sampled contexts (infer.py).
        """
        from .infer import DEFAULT_AGGREGATE, infer_embeddings

        _check_fitted(self)
        if nodes is None:
            n = graph.n_nodes if isinstance(graph, graph_mod.Graph) else graph.shape[0]
            nodes = list(range(n))
        _, E = infer_embeddings(
            self.params_(),
            self.config_,
            self.node_ids_,
            graph,
            X,
            nodes,
            samples=samples,
            seed=_seed(random_state),
            threads=_threads(self.n_jobs),
            aggregate=DEFAULT_AGGREGATE if aggregate is None else aggregate,
            calibration=getattr(self, "calibration_", None),
        )
        return E

    def calibrate(self, graph, X=None, samples=None, random_state=0, positions="all", method=None):
        """Fit the map from Algorithm 3's mean capsule output e onto the o_v (infer.calibrate)
        on the training nodes in ``graph`` (best: the training graph) and return it; set
        ``calibration_`` to it for ``transform``.  ``method``: None (the default, 'diag'),
        'scale' or 'linear'."""
        from .infer import DEFAULT_CALIBRATION, calibrate

        _check_fitted(self)
        return calibrate(
            self.params_(),
            self.config_,
            self.node_ids_,
            graph,
            X,
            samples=samples,
            seed=_seed(random_state),
            threads=_threads(self.n_jobs),
            positions=positions,
            method=DEFAULT_CALIBRATION if method is None else method,
        )

    def save(self, path, overwrite=False):
        """Write every parameter, the config, node ids and history to one .npz (atomic)."""
        _check_fitted(self)
        save_model(
            path,
            self.params_(),
            self.node_ids_,
            self.config_,
            self.lr_,
            self.history_,
            overwrite=overwrite,
        )

    @classmethod
    def load(cls, path):
        """Read a model written by ``save`` (or ``caps2ne train --model-out``)."""
        m = read_model(path)
        keys = set(TrainConfig.__dataclass_fields__)
        params = {k: v for k, v in m["config"].items() if k in keys}
        model = cls(
            **{
                ("n_jobs" if k == "threads" else "random_state" if k == "seed" else k): v
                for k, v in params.items()
            }
        )
        model.O_, model.W_, model.bias_, model.X_ = m["O"], m["W"], m["bias"], m["X"]
        model.fixed_features_ = m["fixed_features"]
        model.node_ids_ = m["node_ids"]
        model.nodes_ = list(m["node_ids"])
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


def _seed(random_state):
    """The run seed for ``random_state``: an int as it is; a Generator or RandomState
    draws one; None draws one from the operating system's entropy."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if (
        isinstance(random_state, numbers.Integral)
        and not isinstance(random_state, bool)
        and random_state >= 0
    ):
        return int(random_state)
    raise InputError(
        f"random_state must be None, an int >= 0 or a numpy Generator, got {random_state!r}"
    )


def _check_fitted(model):
    if not hasattr(model, "O_"):
        raise NotFittedError("this Caps2NE model is not fitted yet; call fit() first")
