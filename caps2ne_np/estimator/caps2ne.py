"""The ``Caps2NE`` estimator: a thin scikit-learn style shell over the training driver
(training/trainer.py, which ``caps2ne train`` calls too), its one concern the
estimator's fitted state.  Its helpers have modules of their own: its parameters,
derived from the one table of options (estimator/signature.py), the inputs converted and
checked (estimator/inputs.py) and the model file (estimator/save_load.py, through
io/modelfile.py).

>>> model = Caps2NE(dim=128, walks_per_node=32, epochs=10, n_jobs=2).fit(adj)
>>> O = model.get_embedding()          # (N, k) float32, row i = node model.node_ids_[i]
>>> model.embedding_dict()[5]          # the vector of the node the input called 5

Node labels are kept as the input gave them (any hashable: ints, strings with spaces,
tuples) in ``node_ids_``, ``embedding_dict()`` and ``to_keyedvectors()``; only the text
writers (word2vec, ``.nodes.txt``) need tokens, and they say which labels are not.
"""

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from ..errors import InputError
from ..graphs import graph as graph_mod
from ..model.params import Params
from ..training import trainer
from ..training.engines import ENGINE_OPTIONS
from ..training.options.config import TrainConfig
from .inputs import (
    api_errors,
    check_y,
    graph_key,
    node_indices,
    power_of,
    seed_of,
    threads_of,
)
from .save_load import given_params, load_estimator, save_estimator
from .signature import DEFAULTS_BY_NAME, SIGNATURE, config_values


class Caps2NE(BaseEstimator):
    """Caps2NE node embeddings (Nguyen et al., CIKM 2020).

    Hyperparameters are those of ``config.TrainConfig`` (paper symbols there), with the
    defaults of ``defaults.OPTIONS``, as on the command line.  Those left None come from
    ``preset`` (``defaults.PRESETS``: 'auto' is 'converge' for a featureless graph,
    'paper' with fixed features X); ``config_`` holds the values used.
    ``n_jobs`` is the thread count (Numba and BLAS, restored after ``fit``).
    ``random_state``: an int seed (same seed and input, same embeddings on any thread
    count), a ``numpy.random.Generator`` (one seed is drawn from it), or None: a fresh
    seed from the operating system's entropy, so every fit differs; ``seed_`` records
    the seed used, so such a run can be repeated.

    Defaults: every hyperparameter's default is the command line's (``defaults.OPTIONS``)
    except the thread count: ``n_jobs=1`` here (one thread, the scikit-learn
    convention; -1 = every core), all cores this process may use on the command line.
    Results do not depend on it.

    Fitted state: ``O_`` (the embeddings), ``W_``, ``bias_``, ``X_`` (trained or fixed
    input features), ``node_ids_`` (each row's node as the input named it: an int stays
    an int, a networkx label stays that label; the id strings of a file or a
    ``Graph``; a loaded model's as saved: ints when every label was an int, else
    strings), ``nodes_`` (the same list), ``seed_``, ``history_`` (per-epoch loss and
    throughput), ``calibration_`` (after ``calibrate`` or ``load`` of a file that
    stores one: what ``transform`` uses), ``config_`` (every option as the run resolved
    it: the preset's lr, epochs, |V'|), ``run_`` (``directed``, ``keep_self_loops``,
    ``parallel`` and ``params``, the parameters as given to the fit: ``load`` restores
    those, so ``clone(loaded).fit(other_graph)`` resolves afresh).  An unfitted model
    raises scikit-learn's ``NotFittedError``.  Errors name the parameters (``dim``), as given here.

    ``engine='ray'`` trains on a Ray cluster instead (``training.ray.fit``): ``workers``
    P, ``servers`` S, ``ray_address`` (None: a local instance), ``round_walks`` (walks
    per node of a round between merges of the workers' replicas), ``sync_moments``
    (when their Adam moments merge: 'auto', 'round', 'checkpoint'); lazy Adam only.
    ``parallel='async'``: ``n_jobs`` threads train their own batches on the shared tables
    without locks (``train.AsyncEngine``; faster, not reproducible).  ``spectral``: the
    ProNE start (spectral/prone.py: none, features, init, init_xo); ``propagate``: ProNE's
    propagation of the written o_v (spectral/propagation.py); ``stop``: 'auto' (structure,
    then drift), 'holdout' (held-out edges' AUC) or 'loglik' (their contexts'
    log-likelihood; training/budget.py); ``node2vec_p``,
    ``node2vec_q``: node2vec's p and q, second-order walks (walks/walks.py).
    """

    def __init__(self, **params):
        # every parameter stored unchanged under its own name, nothing else:
        # scikit-learn's contract (``get_params`` reads them back through the signature,
        # ``clone`` and ``set_params`` rebuild from them)
        bound = SIGNATURE.bind(self, **params)
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            if name != "self":
                setattr(self, name, value)

    __init__.__signature__ = SIGNATURE

    def train_config(self):
        """The TrainConfig these hyperparameters describe."""
        params = {name: getattr(self, name) for name in DEFAULTS_BY_NAME}
        return TrainConfig(**config_values(params, threads_of, seed_of, power_of))

    def fit(
        self,
        graph,
        y=None,
        *,
        X=None,
        epoch_callback=None,
        checkpoint_dir=None,
        checkpoint_every=0,
        resume_from=None,
        step_callback=None,
        directed=None,
        keep_self_loops=False,
        labels=None,
        splits=None,
        overwrite=False,
    ):
        """Learn embeddings for ``graph``; returns self.

        ``graph`` is any input of ``graph.coerce_graph``: a scipy.sparse (N, N)
        adjacency (row = source node), a networkx graph (labels kept), an edge array
        (m, 2) or (m, 3) ``u v [weight]``, a pandas DataFrame of edges (any ids), or a
        ``csr.Graph`` (``read_edgelist``).  As on the command line, edges are
        undirected unless ``directed=True`` and self loops are dropped unless
        ``keep_self_loops=True``: a matrix gives the same stored edges as
        ``caps2ne train --graph matrix.npz``; ``directed=None`` (the default) follows
        a networkx graph's ``is_directed()`` (a ``DiGraph`` is directed) and is False
        for every other input.  Rows of the result follow the graph's
        node order (``node_ids_``): matrix rows, ``G.nodes``, or first appearance in
        an edge list or array.  ``y`` is ignored (scikit-learn's unsupervised
        convention: ``make_pipeline(Caps2NE(), LogisticRegression()).fit(G, y)``); a
        real-valued matrix there is refused, features go by keyword.  ``X`` (N, d)
        fixed input features in that order (dense, or scipy.sparse kept sparse), or
        None to train them; every argument after ``y`` is a keyword.
        ``checkpoint_dir``, ``checkpoint_every``, ``resume_from`` and the callbacks are
        those of the training driver (training/trainer.py: loop.Run and loop.LoopOptions);
        as ``caps2ne train`` does, a ``checkpoint_dir`` holding another run's checkpoint
        is refused unless ``overwrite=True``.

        ``labels`` (N,) int classes in the graph's node order (-1: unlabelled) with
        ``splits`` (a list of ``{'train', 'val', 'test'}`` index arrays): select the
        epoch on validation, as ``caps2ne train --eval-every-epoch``: the rows ``fit``
        would keep for each epoch (the o_v, propagated as ``propagate`` says) are
        scored after every epoch (logistic regression, evaluate.classify_splits) and
        the fitted parameters are those of the epoch with the best mean validation
        accuracy (epoch_selection.EpochSelector); ``best_epoch_`` (1-based) and
        ``epoch_scores_`` (one classify_splits result per epoch) record the choice.
        Both are checked before training, as the command line checks its files
        (epoch_selection.check_labels_and_splits): a ValueError naming the argument.
        """
        if directed is None:
            is_directed = getattr(graph, "is_directed", None)
            directed = type(graph).__module__.startswith("networkx") and bool(is_directed())
        with api_errors():
            check_y(y)
            graph, nodes = graph_mod.coerce_graph(
                graph, directed=directed, keep_self_loops=keep_self_loops, tokens=False
            )
            cfg = self.train_config()
            trainer.check_fresh(checkpoint_dir, resume_from, overwrite, self.engine)
            selector = _selector(labels, splits, graph)
            trained = trainer.train(
                graph,
                cfg,
                X,
                resume_from=resume_from,
                selector=selector,
                engine={name: getattr(self, name) for name in ENGINE_OPTIONS},
                progress=self.progress,
                epoch_callback=epoch_callback,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=checkpoint_every,
                step_callback=step_callback,
            )
        self._fitted(trained, selector, nodes, directed, keep_self_loops, cfg.seed)
        self.run_["graph"] = graph_key(graph)
        if hasattr(self, "calibration_"):
            del self.calibration_  # fitted for the parameters a refit replaces
        return self

    def partial_fit(
        self,
        graph,
        y=None,
        *,
        X=None,
        old_graph=None,
        hops=1,
        epochs=None,
        budget=None,
        checkpoint_dir=None,
        checkpoint_every=0,
        resume_from=None,
    ):
        """Follow a changed graph (edges or nodes added or removed): the fitted model is
        updated to ``graph`` as ``caps2ne update`` does (update/update.py, docs/update.md):
        known nodes keep their rows, new ones start from the new graph's spectrum (or
        Algorithm 3), and walks start near the change: ``budget`` 'change' (from each
        node in proportion to the share of its edges that changed), 'hops' (from
        every node within ``hops`` hops of it) or 'auto' ('change' for a few changed
        edges, else 'hops'; None: defaults.UPDATE_BUDGET), for
        ``epochs`` (None: a budget that grows with the change).  ``old_graph``: the graph
        the model was fitted on, read as ``fit`` read it; the estimator keeps the graph
        of a ``partial_fit`` (``graph_``), not of a ``fit``, so the first update after
        ``fit`` needs it.  ``X``: the new graph's fixed features (a model fitted with
        them), else None.  Returns self; the fitted state is the new graph's."""
        from ..update import update as upd

        _check_fitted(self)
        with api_errors():
            check_y(y)
            old = getattr(self, "graph_", None) if old_graph is None else old_graph
            if old is None:
                raise ValueError(
                    "old_graph: the graph the model was fitted on is needed (the estimator "
                    "keeps only the graph of a partial_fit)"
                )
            old, _ = self._graph(old)
            fitted_on = self.run_.get("graph")
            if fitted_on is not None and graph_key(old) != fitted_on:
                raise ValueError(
                    "old_graph: not the graph the model was fitted on (its nodes, edges or "
                    "weights differ); give that graph"
                )
            new, nodes = self._graph(graph)
            options = upd.UpdateOptions(
                hops, epochs, self.train_config().threads, budget or upd.BUDGET
            )
            done = upd.update(
                self._model(),
                old,
                new,
                X,
                options,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=checkpoint_every,
                resume_from=resume_from,
                progress=self.progress,
            )
        history = list(self.history_) + [dict(h, update=True) for h in done.trained.result.history]
        directed, loops = self.directed_, self.keep_self_loops_
        self._fitted(done.trained, None, nodes, directed, loops, self.seed_)
        self.history_, self.graph_ = history, new
        self.run_["graph"] = graph_key(new)
        if hasattr(self, "calibration_"):
            del self.calibration_  # fitted for the parameters the update replaced
        return self

    def _model(self):
        """The fitted state as update.update reads a model (modelfile.read_model's dict)."""
        propagated = getattr(self, "propagation_", None)
        return dict(
            W=self.W_,
            O=self.O_,
            bias=self.bias_,
            X=None if self.fixed_features_ else self.X_,
            fixed_features=bool(self.fixed_features_),
            node_ids=[str(x) for x in self.node_ids_],
            config=dict(self.config_),
            history=list(self.history_),
            calibration=getattr(self, "calibration_", None),
            run=dict(self.run_),
            propagation=None if propagated is None else dict(E=propagated.E, P=propagated.P),
        )

    def _fitted(self, trained, selector, nodes, directed, keep_self_loops, seed):
        """The fitted state of a ``trained`` run (trainer.Trained: the kept epoch's
        parameters when ``selector`` chose one, their propagation)."""
        p, result = trained.params, trained.result
        self.propagation_ = trained.propagated
        if selector is not None:
            self.best_epoch_, self.epoch_scores_ = selector.best_epoch, selector.results
        else:
            for name in ("best_epoch_", "epoch_scores_"):
                if hasattr(self, name):
                    delattr(self, name)
        self.O_, self.W_, self.bias_, self.X_ = p.O, p.W, p.bias, p.X
        self.fixed_features_ = p.fixed_features
        self.node_ids_ = list(nodes)
        self.nodes_ = self.node_ids_
        self.directed_, self.keep_self_loops_ = bool(directed), bool(keep_self_loops)
        self.seed_ = seed
        self.run_ = dict(
            directed=self.directed_,
            keep_self_loops=self.keep_self_loops_,
            parallel=self.parallel,
            params=given_params(self),
        )
        self.history_ = result.history
        self.config_ = result.config.to_dict()
        self.lr_ = result.lr

    def fit_transform(self, graph, y=None, **fit_params):
        """``fit(graph, y, **fit_params).get_embedding()``: the written embeddings (the o_v,
        propagated when ``propagate`` says so), (N, k) float32, rows in the graph's node
        order (``y`` ignored; features as ``X=``).  ``transform(graph)`` of the same
        graph gives them back."""
        return self.fit(graph, y, **fit_params).get_embedding()

    def get_embedding(self):
        """The node embeddings: (N, k) float32; row i is node ``node_ids_[i]``: the o_v, or
        the o_v propagated when ``propagate`` said so (``propagation_`` is then set; its
        ``E`` is this, unit rows; spectral/propagation.py).

        The order is the graph's, not sorted ids: matrix rows, ``G.nodes`` for
        networkx, first appearance for an edge list or edge array (so row 5 is node
        5 only when the ids are 0..N-1 in that order).  ``embedding_dict()`` keys
        the rows by node.
        """
        _check_fitted(self)
        propagated = getattr(self, "propagation_", None)
        return self.O_ if propagated is None else propagated.E

    def embedding_dict(self):
        """``{node: o_v}``: each node as the input named it (``nodes_``) to its (k,) vector.

        Keys are ``node_ids_``: the labels given to ``fit`` (networkx labels, edge-array
        or DataFrame values, matrix rows as ints; the id strings for a file).
        """
        _check_fitted(self)
        return dict(zip(self.node_ids_, self.get_embedding()))

    def to_keyedvectors(self):
        """The embeddings as gensim ``KeyedVectors`` keyed by ``node_ids_``, as
        ``embedding_dict`` (ints stay ints; needs gensim).  Writing them in word2vec
        text format needs labels without whitespace (``str(label)`` is written)."""
        _check_fitted(self)
        try:
            from gensim.models import KeyedVectors
        except ImportError:
            raise ImportError("to_keyedvectors needs gensim: pip install gensim") from None
        kv = KeyedVectors(vector_size=self.O_.shape[1])
        kv.add_vectors(list(self.node_ids_), np.asarray(self.get_embedding(), dtype=np.float32))
        return kv

    def _graph(self, graph):
        """(Graph, labels) of a graph given to ``transform`` / ``calibrate``: any input
        ``fit`` takes, read with the edge policies of the fit (a loaded model: the
        command line's, undirected without self loops)."""
        return graph_mod.coerce_graph(
            graph,
            directed=getattr(self, "directed_", False),
            keep_self_loops=getattr(self, "keep_self_loops_", False),
            tokens=False,
        )

    def transform(self, graph, X=None, nodes=None, samples=None, random_state=0, aggregate=None):
        """Embeddings of (new) nodes through the capsule path, Algorithm 3; of the graph
        the model was fitted on, its fitted embedding.

        ``transform(graph)`` alone (``X``, ``nodes``, ``samples`` and ``aggregate`` left
        None) of the very graph ``fit`` read (same nodes, edges and weights; a loaded
        model's too) returns ``get_embedding()``, as scikit-learn's ``fit_transform``
        and a pipeline's ``predict(G)`` expect; any of those arguments, or another
        graph, runs Algorithm 3.

        ``graph`` holds the nodes and their edges: any input ``fit`` takes (networkx
        graph, scipy.sparse adjacency, edge array, DataFrame, ``Graph``), read with the
        fit's ``directed`` / ``keep_self_loops``; nodes match the training nodes by
        ``str(label)``.  ``X`` their fixed features in graph order (None for a
        featureless model).  ``nodes``: the labels to embed as the graph names them
        (for a ``Graph``: id strings, or ints as graph indices); default every node of
        ``graph``.
        ``aggregate``: None (the default, ``defaults.DEFAULT_AGGREGATE``: 'calibrated'),
        'calibrated' (on the scale of the o_v, with ``calibration_`` when set -- by
        ``calibrate`` or a loaded model file that stores one -- else a calibration fitted
        on the training nodes in ``graph``), 'mean' (the paper's average) or 'sum'
        (infer.infer_embeddings).
        Returns (V, k) float32 from e over Z sampled contexts (inference/infer.py); row a is
        ``nodes[a]``.  A propagated model (``propagation_``) sends the calibrated outputs
        through the run's filter and map (inference/propagated.py): rows in the space of
        ``get_embedding()``.
        """
        from ..defaults import DEFAULT_AGGREGATE
        from ..inference.infer import infer_embeddings

        _check_fitted(self)
        run = infer_embeddings
        given, aggregate = aggregate, DEFAULT_AGGREGATE if aggregate is None else aggregate
        if getattr(self, "propagation_", None) is not None and aggregate == "calibrated":
            import functools

            from ..inference.propagated import infer_propagated

            run = functools.partial(infer_propagated, propagated=self.propagation_)
        with api_errors():
            g, labels = self._graph(graph)
            if (
                X is None
                and nodes is None
                and samples is None
                and given is None
                and getattr(self, "run_", {}).get("graph") == graph_key(g)
            ):
                return self.get_embedding().copy()
            idx = node_indices(graph, g, labels, nodes)
            _, E = run(
                self.params_(),
                self.config_,
                self.node_ids_,
                g,
                X,
                idx,
                samples=samples,
                seed=seed_of(random_state),
                threads=threads_of(self.n_jobs),
                aggregate=aggregate,
                calibration=getattr(self, "calibration_", None),
            )
        return E

    def calibrate(self, graph, X=None, samples=None, random_state=0, positions="all", method=None):
        """Fit the map from Algorithm 3's mean capsule output e onto the o_v (infer.calibrate)
        on the training nodes in ``graph`` (best: the training graph; any input ``fit``
        takes), set ``calibration_`` to it (``transform`` and ``save`` use it) and return
        it.  ``method``: None (the default, 'diag'), 'scale' or 'linear'."""
        from ..defaults import DEFAULT_CALIBRATION
        from ..inference.infer import calibrate

        _check_fitted(self)
        with api_errors():
            g, _ = self._graph(graph)
            self.calibration_ = calibrate(
                self.params_(),
                self.config_,
                self.node_ids_,
                g,
                X,
                samples=samples,
                seed=seed_of(random_state),
                threads=threads_of(self.n_jobs),
                positions=positions,
                method=DEFAULT_CALIBRATION if method is None else method,
            )
        return self.calibration_

    def save(self, path, overwrite=False):
        """Write every parameter, the config, node ids, history and ``calibration_`` (when
        set) to one .npz (atomic; ``overwrite=True`` to replace a file).  Labels are
        stored as ``str(label)`` (and as ints when every one is an int)."""
        _check_fitted(self)
        with api_errors():
            save_estimator(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """Read a model written by ``save`` (or ``caps2ne train --model-out``), with the
        calibration ``infer --save-calibration`` or ``save`` stored in it (``calibration_``)."""
        return load_estimator(cls, path)

    def params_(self):
        """The fitted parameters as a ``core.Params``."""
        _check_fitted(self)
        return Params(self.W_, self.O_, self.bias_, self.X_, fixed_features=self.fixed_features_)


def _selector(labels, splits, graph):
    """The epoch_selection.EpochSelector of ``fit(labels=, splits=)`` on the coerced
    ``graph`` (it scores the rows ``fit`` keeps, propagated as ``propagate`` says), or
    None; the labels and splits checked before any training."""
    if labels is None and splits is None:
        return None
    if labels is None or splits is None:
        raise InputError("labels and splits: give both to select the epoch on validation")
    from ..evaluation.epoch_selection import EpochSelector, check_labels_and_splits

    return EpochSelector(*check_labels_and_splits(labels, splits, graph.n_nodes), graph)


def _check_fitted(model):
    if not hasattr(model, "O_"):
        raise NotFittedError("this Caps2NE model is not fitted yet; call fit() first")
