r"""Embeddings for new, unseen nodes (Algorithm 3).

A trained Caps2NE maps any context C_v = (v_1, ..., v_{q-1}) of input features to a
second-layer capsule e.  For a node v that was not in the training graph there is
no output vector o_v, so Algorithm 3 samples Z pairs (C_v, v) from random walks of
length q through v on the graph that contains v, runs the trained capsule layers
forward and averages the Z capsule outputs::

    for z in 0 .. Z-1:
        j   = positions[z mod len(positions)]        # v's position in walk z (0-based)
        walk: v_j = v; v_{t-1} ~ N_in(v_t) for t = j..1; v_{t+1} ~ N_out(v_t) for t = j..q-2
        C_v = (v_t : t != j), walk order              # slot i uses W_i, as in training
        e_z = Routing(W_i squash(x_{v_i}))            # capsules.route, Algorithm 1
    e_v = (1/Z) sum_z e_z                             # Algorithm 3, "Average"

Pipeline (each step names its function)::

    ctx = sample_contexts(graph, nodes, q, Z, seed)    # (V*Z, q-1) int32, Numba, prange
    e   = capsule_outputs(W, X, ctx, cfg)              # (V*Z, k) batch_forward.forward, in chunks
    E   = e.reshape(V, Z, k).mean(axis=1)              # (V, k)
    E   = aggregate_samples(E, Z, aggregate, cal)      # mean | sum = Z E | calibrated = E A + b

The default aggregate, 'calibrated', maps the mean onto the o_v with a map fitted on
the training nodes (``calibrate``, which embeds them by Algorithm 3 and fits the map of
inference/calibration.py; per dimension by default), so a classifier fitted on o_v applies to new
nodes.  The defaults were chosen on validation, by a rule that reads no test accuracy
(``defaults.DEFAULT_AGGREGATE``, docs/inductive.md).  The inductive split of the
experiments (Sec. 4.3) is ``inductive.inductive_split``.

Choices (docs/inductive.md explains each):

* **Position of v.**  Sample z puts v at position ``positions[z mod L]``; by default
  positions = 0..q-1, so Z = q gives every position once (the authors' code takes, for
  each position k, one walk of the full graph with the test node at k).  The walk is
  built outwards from v: j steps backwards along in-edges (for an undirected graph
  the same edges) and q-1-j steps forwards.  On an undirected graph this is exactly
  a stationary random walk conditioned on passing v at step j (reversibility).
* **Randomness.**  Sample z of node v draws only from ``stream3(seed', TAG_INFER, v, z)``
  (v = the node's index in the graph, seed' = ``derive_seed(seed, 'infer')``), so an
  embedding depends on neither the thread count nor the other requested nodes.
* **Isolated nodes** (no in- or out-edges): their walks stay on them (walk_steps.walk_step), so
  the context is the node itself q-1 times and e comes from its own features
  (``isolated='self'``, default, with an ``InputWarning``); ``isolated='error'`` raises.
* **Featureless models** (x trained): only training nodes have an x.  A context slot
  holding a node the model has not seen gets x = 0, so u = squash(0) = 0 and the slot
  adds nothing to s_v.  v itself is the target, so its own x is never needed.  A node
  none of whose Z contexts holds an encodable node (e.g. an isolated node) would get
  e = 0: that is an ``InputError``, never a silent zero vector.
"""

import logging
import warnings

import numba
import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ..defaults import AGGREGATES, DEFAULT_AGGREGATE, DEFAULT_CALIBRATION, ISOLATED
from ..errors import InputError, InputWarning, check_int, check_memory
from ..graphs.csr import Graph, from_scipy
from ..kernels.rng import derive_seed, quiet_wraparound
from ..model.batch_forward import forward
from ..model.features import SparseFeatures, prepare_features
from ..model.model_config import ModelConfig
from ..model.params import Params, slot_major
from ..walks.walk_args import check_positions, check_seed, walk_graph
from ..walks.walk_steps import walk_contexts
from .calibration import (
    CALIBRATION_NODES,
    apply_calibration,
    calibration_nodes,
    check_settings,
    fit_calibration,
)

log = logging.getLogger(__name__)

PAIRS_BUDGET = 2**25
"""Upper bound on the elements of the (I, P, max(d, k)) intermediates of one chunk."""


# --------------------------------------------------------------------------- functional core


def as_graph(graph):
    """A csr.Graph; a scipy.sparse (N, N) adjacency is read as ``Caps2NE.fit`` reads it."""
    if isinstance(graph, Graph):
        return graph
    if sp.issparse(graph):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            return from_scipy(graph, directed=True, keep_self_loops=False)
    raise InputError(
        f"graph must be a caps2ne_np.graphs.csr.Graph or a scipy.sparse adjacency, "
        f"got {type(graph).__name__}"
    )


def in_edges(graph):
    """(indptr, indices, weights) of the in-edges of ``graph`` (its transpose; the graph's
    own arrays when it is undirected, whose CSR is symmetric)."""
    if not graph.directed:
        return graph.indptr, graph.indices, graph.weights
    t = graph.to_scipy().T.tocsr()
    t.sort_indices()
    weights = None if graph.weights is None else np.ascontiguousarray(t.data, dtype=np.float32)
    return (
        np.ascontiguousarray(t.indptr, dtype=np.int64),
        np.ascontiguousarray(t.indices, dtype=np.int32),
        weights,
    )


def context_positions(spec, walk_length):
    """0-based positions of v in the sampled walks, int64 (L,).

    'all' -> 0..q-1 (the authors: one walk with v at each position); a sequence of ints
    -> those positions (e.g. the model's training targets (3, 4, 5, 6)).
    """
    q = check_int("walk_length", walk_length, 2)
    if isinstance(spec, str):
        if spec == "all":
            return np.arange(q, dtype=np.int64)
        raise InputError(f"positions must be 'all' or a list of 0-based positions, got {spec!r}")
    return check_positions("positions", spec, q, "'all' or a list of 0-based positions")


def sample_contexts(graph, nodes, walk_length, samples, seed, positions="all", node2vec=(1, 1)):
    """Z contexts C_v per node from walks of length q through it: int32 (V*Z, q-1).

    graph     : csr.Graph (out-edges; in-edges are its transpose)
    nodes     : int (V,) graph indices of the nodes to embed
    walk_length : q (the model's); samples : Z >= 1; seed : int in [0, 2**63)
    positions : 'all' or 0-based positions; sample z puts v at positions[z mod L]
    node2vec  : (p, q) of the model's node2vec walks; (1, 1): first-order walks
                (``walk_steps.walk_contexts`` takes either)

    Row a*Z + z is sample z of nodes[a]; it depends only on (seed, nodes[a], z).
    """
    q = check_int("walk_length", walk_length, 2)
    Z = check_int("samples", samples, 1)
    seed = check_seed("seed", seed)
    pos = context_positions(positions, q)
    graph_out = walk_graph(graph.indptr, graph.indices, graph.weights, *node2vec)
    graph_in = walk_graph(*in_edges(graph), *node2vec)  # the same p, q and weighting
    nodes = np.asarray(nodes)
    if nodes.ndim != 1 or not np.issubdtype(nodes.dtype, np.integer):
        raise InputError(
            f"nodes must be a 1-D integer array of graph indices, got {nodes.dtype} {nodes.shape}"
        )
    n = graph_out.indptr.shape[0] - 1
    if nodes.size and (nodes.min() < 0 or nodes.max() >= n):
        raise InputError(f"nodes must be graph indices in [0, {n})")
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    ctx = np.empty((nodes.shape[0] * Z, q - 1), dtype=np.int32)
    if nodes.shape[0] == 0:
        return ctx
    with quiet_wraparound():
        walk_contexts(graph_out, graph_in, nodes, pos, seed, ctx)
    return ctx


def capsule_outputs(W, X, ctx, cfg, chunk=None):
    """e for every context row: squash -> W_i u -> routing (batch_forward.forward), float32 (P, k).

    W   : (q-1, k, d) trained capsule weights
    X   : (N, d) input features of the graph's nodes: dense array or SparseFeatures
    ctx : (P, q-1) int graph indices, walk order
    cfg : model_config.ModelConfig (routing iterations, rule, scale)
    chunk : pairs per forward pass; None -> bounded so that the (q-1, P, max(d, k))
            intermediates stay below PAIRS_BUDGET elements

    Each row is computed independently of the others, so the chunking changes no value.
    """
    W = slot_major(W)  # the layout training uses: no transpose per chunk
    n_slots, k, d = W.shape
    ctx = np.asarray(ctx)
    if ctx.ndim != 2 or ctx.shape[1] != n_slots:
        raise InputError(f"ctx must have q-1 = {n_slots} columns, got shape {ctx.shape}")
    if X.shape[1] != d:
        raise InputError(
            f"features have d = {X.shape[1]} columns; the model was trained with d = {d}"
        )
    dense_d = k if isinstance(X, SparseFeatures) else max(d, k)
    m = int(cfg.routing_iters)  # routing keeps c, s and e of every iteration
    per_pair = n_slots * dense_d + m * (n_slots + 2 * k)
    if chunk is None:
        chunk = max(1, PAIRS_BUDGET // per_pair)
    check_memory(
        4 * per_pair * min(chunk, max(1, ctx.shape[0])),
        f"routing_iters m = {m} with k = {k} (the routing intermediates of one chunk)",
        "the model's routing_iters is out of range: retrain it or repair its config",
    )
    params = Params(
        W, np.empty((0, k), dtype=W.dtype), np.empty(0, dtype=W.dtype), X, fixed_features=True
    )
    e = np.empty((ctx.shape[0], k), dtype=W.dtype)
    for a in range(0, ctx.shape[0], chunk):
        e[a : a + chunk] = forward(params, ctx[a : a + chunk], cfg).e
    return e


def average_samples(e, samples):
    """e_v = (1/Z) sum_z e_(v,z)   [Algorithm 3]: (V*Z, k) -> (V, k), float64 sums, float32 out."""
    V = e.shape[0] // samples
    return e.reshape(V, samples, e.shape[1]).mean(axis=1, dtype=np.float64).astype(e.dtype)


# --------------------------------------------------------------------------- aggregation


def aggregate_samples(E_mean, samples, aggregate, calibration=None):
    """The embedding from the mean capsule output of Z samples (Algorithm 3's average).

    'mean' -> E_mean (the paper); 'sum' -> Z E_mean (the authors' code sums the Z
    outputs); 'calibrated' -> ``apply_calibration(E_mean, calibration)`` (the o_v scale).
    """
    if aggregate not in AGGREGATES:
        raise InputError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if aggregate == "mean":
        return E_mean
    if aggregate == "sum":
        return (E_mean.astype(np.float64) * samples).astype(E_mean.dtype)
    if calibration is None:
        raise InputError("aggregate='calibrated' needs a calibration (infer.calibrate)")
    return apply_calibration(E_mean, calibration)


def nodes_count(nodes):
    """Number of nodes in ``nodes`` (an array or a sequence)."""
    return int(np.size(nodes))


def capsule_embeddings(
    W,
    X,
    graph,
    nodes,
    cfg,
    samples=None,
    seed=0,
    positions="all",
    isolated="self",
    known=None,
    node2vec=(1, 1),
    unencodable="error",
):
    """Algorithm 3 for the graph indices ``nodes``: float32 (V, k), row a = nodes[a].

    W, X, cfg : as ``capsule_outputs`` (X in graph order, already prepared)
    graph     : csr.Graph holding the nodes and their edges
    samples   : Z; None -> q (each position once with positions='all')
    isolated  : 'self' (context = the node repeated; InputWarning) or 'error'
    known     : bool (N,) nodes that have an input x (featureless models); None = all
    node2vec  : (p, q) of the walks the model was trained on (``sample_contexts``)
    unencodable : a node whose every sampled context is unencodable (e = 0): 'error'
                raises InputError; 'zero' leaves its row zero (for nodes nobody asked
                for: inference/propagated.py)

    The seed is used as given (``infer_embeddings`` passes ``derive_seed(seed, 'infer')``).
    """
    q = W.shape[0] + 1
    Z = q if samples is None else check_int("samples", samples, 1)
    check_memory(
        nodes_count(nodes) * Z * (4 * (q - 1) + 4 * W.shape[1] + 1),
        f"--samples {Z} for {nodes_count(nodes)} node(s) (contexts and capsule outputs)",
        "lower --samples",
    )
    if isolated not in ISOLATED:
        raise InputError(f"isolated must be one of {ISOLATED}, got {isolated!r}")
    nodes = np.asarray(nodes, dtype=np.int64)
    lone = nodes[(np.diff(graph.indptr)[nodes] == 0) & (np.diff(in_edges(graph)[0])[nodes] == 0)]
    if lone.size:
        first = graph.node_ids[int(lone[0])]
        if isolated == "error":
            raise InputError(
                f"node {first!r} has no edges ({lone.size} such node(s)); a new "
                "node needs edges to be embedded, or pass isolated='self' (--isolated "
                "self) to encode it from its own features"
            )
        warnings.warn(
            f"{lone.size} node(s) without edges, e.g. {first!r}: each is embedded from "
            "its own features alone (its walks stay on it)",
            InputWarning,
            stacklevel=3,
        )
    ctx = sample_contexts(graph, nodes, q, Z, seed, positions, node2vec)
    e = capsule_outputs(W, X, ctx, cfg)
    E = average_samples(e, Z)
    empty = ~np.any(E != 0, axis=1)
    if known is not None:
        # No slot of any context holds a node with an x: nothing was encoded.
        empty |= ~known[ctx].reshape(nodes.shape[0], -1).any(axis=1)
    if empty.any() and unencodable == "zero":
        E[empty] = 0
    elif empty.any():
        a = int(np.flatnonzero(empty)[0])
        first = graph.node_ids[int(nodes[a])]
        why = (
            "its contexts hold only nodes the featureless model has never seen (no learned x)"
            if known is not None
            else "every node in its contexts has an all-zero feature row"
        )
        raise InputError(
            f"node {first!r} ({int(empty.sum())} such node(s)) would get a zero "
            f"embedding: {why}; give it edges to known nodes or non-zero features"
        )
    return E


# --------------------------------------------------------------------- a trained model's inputs


def graph_nodes(graph, nodes):
    """Graph indices (int64) of ``nodes``: id strings, or ints taken as graph indices."""
    if isinstance(nodes, str):
        nodes = [nodes]
    arr = np.asarray(nodes)
    if arr.size == 0:
        raise InputError("nodes is empty; list at least one node to embed")
    if np.issubdtype(arr.dtype, np.integer):
        if arr.ndim != 1 or arr.min() < 0 or arr.max() >= graph.n_nodes:
            raise InputError(f"integer nodes must be graph indices in [0, {graph.n_nodes})")
        idx = arr.astype(np.int64)
    else:
        idx = graph.index_of([str(x) for x in nodes])
    if np.unique(idx).size != idx.size:
        values, counts = np.unique(idx, return_counts=True)
        raise InputError(
            f"node {graph.node_ids[int(values[counts > 1][0])]!r} is listed twice; "
            "list each node once"
        )
    return idx


def model_inputs(params, config, node_ids, graph, features):
    """(W, X in graph order, ModelConfig, known or None) for inference with trained parameters.

    params   : params.Params of the trained model (W, O, bias; X when it was trained)
    config   : the model's TrainConfig as a dict (``TrainConfig.to_dict()``, a model file's)
    node_ids : id strings of the model's training nodes (the rows of O and of a trained X)

    Fixed-feature model: ``features`` (N_graph, d) are required (the model file does not
    store them) and prepared as in training (row normalisation when the model used it).
    Featureless model: ``features`` must be None; each graph node the model knows (by
    id) gets its learned x, every other node x = 0 (``known`` marks the former).
    """
    cfg = ModelConfig(
        config["routing_iters"],
        config["routing_rule"],
        config["routing_scale"],
        config["grad_mode"],
    )
    W = slot_major(np.asarray(params.W, dtype=np.float32))
    d = W.shape[2]
    spectral = config.get("spectral", "none")  # a model file older than it: 'none'
    if params.fixed_features and spectral == "features" and features is None:
        raise InputError(
            "the model was trained with --spectral features: its x is ProNE of the "
            "training graph, computed at the start and not stored, and ProNE of another "
            "graph is in another basis than the one W was trained on; give features for "
            "every node of the graph in that same space (--features), or train with "
            "--spectral init"
        )
    if params.fixed_features:
        if features is None:
            raise InputError(
                "the model was trained with fixed features, which it does not store; "
                "give features for every node of the graph (old and new, --features)"
            )
        if features.shape[1] != d:
            raise InputError(
                f"features have d = {features.shape[1]} columns; the model was trained with d = {d}"
            )
        normalize = config.get("normalize_features", True) and spectral != "features"
        X = prepare_features(features, graph.n_nodes, normalize)  # ProNE's: used as they are
        return W, X, cfg, None
    if features is not None:
        raise InputError(
            "the model was trained without fixed features (it learned its own x), so "
            "other features are not in the space W was trained on; omit --features"
        )
    where = {nid: r for r, nid in enumerate(node_ids)}
    rows = np.fromiter(
        (where.get(nid, -1) for nid in graph.node_ids), dtype=np.int64, count=graph.n_nodes
    )
    known = rows >= 0
    if not known.any():
        raise InputError(
            "no node of the graph is a training node of this featureless model (ids "
            "compared as strings); its learned x cannot encode any context"
        )
    X = np.zeros((graph.n_nodes, d), dtype=np.float32)
    X[known] = params.X[rows[known]]
    return W, X, cfg, known


def _node2vec(config):
    """(p, q) of the model's node2vec walks; (1, 1), first-order walks, for a model
    file written before the options existed."""
    return config.get("node2vec_p", 1.0), config.get("node2vec_q", 1.0)


def _positions(config, positions):
    if isinstance(positions, str) and positions == "train":
        targets = config.get("targets", "all")
        return "all" if isinstance(targets, str) else tuple(targets)
    return positions


def _run_threads(threads, fn, *args):
    """``fn(*args)`` on ``threads`` Numba threads (restored after) and one BLAS thread."""
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(limits=1):  # products run on Numba's threads (blas.py)
            return fn(*args)
    finally:
        numba.set_num_threads(old)


def _embed(
    threads, inputs, config, graph, idx, samples, seed, positions, isolated, unencodable="error"
):
    """Algorithm 3 for the graph indices ``idx`` (``capsule_embeddings``) on ``threads``
    threads: ``inputs`` are ``model_inputs``' (W, X, cfg, known), ``config`` the model's
    (its node2vec walks); the contexts are seeded by ``derive_seed(seed, 'infer')``."""
    W, X, cfg, known = inputs
    return _run_threads(
        threads,
        capsule_embeddings,
        W,
        X,
        graph,
        idx,
        cfg,
        samples,
        derive_seed(seed, "infer"),
        positions,
        isolated,
        known,
        _node2vec(config),
        unencodable,
    )


def calibrate(
    params,
    config,
    node_ids,
    graph,
    features,
    samples=None,
    seed=0,
    threads=1,
    positions="all",
    method=DEFAULT_CALIBRATION,
    max_nodes=CALIBRATION_NODES,
):
    """Fit the map from Algorithm 3's mean e to o_v on the model's training nodes.

    params, config, node_ids : the trained model (``model_inputs``); ``Caps2NE.calibrate``
        passes its fitted state
    features, samples, seed, threads, positions : as ``infer_embeddings``; use the values
        inference will use (the norm of a mean of Z outputs depends on Z)
    graph  : a graph holding the training nodes and their edges: the training graph
             (best), or the full graph given to ``infer``
    method : 'diag' (default), 'scale' or 'linear' (``fit_calibration``)

    Returns the calibration dict (``fit_calibration``'s, plus samples, positions, seed);
    ``infer_embeddings(..., calibration=cal)`` uses it with ``aggregate='calibrated'``,
    and ``modelfile.save_calibration(path, cal)`` stores it in a model file.
    """
    graph = as_graph(graph)
    threads = check_int("threads", threads, 1)
    seed = check_seed("seed", seed)
    node_ids = [str(x) for x in node_ids]  # labels (Caps2NE.node_ids_) as the graph's ids
    W, X, cfg, known = model_inputs(params, config, node_ids, graph, features)
    q = W.shape[0] + 1
    Z = q if samples is None else check_int("samples", samples, 1)
    positions = _positions(config, positions)
    pos = context_positions(positions, q)
    idx = calibration_nodes(node_ids, graph, max_nodes, seed)
    rows = {nid: r for r, nid in enumerate(node_ids)}
    O = np.asarray(params.O)[[rows[graph.node_ids[int(i)]] for i in idx]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)  # edgeless training nodes: own features
        E = _embed(threads, (W, X, cfg, known), config, graph, idx, Z, seed, positions, "self")
    cal = fit_calibration(E, O, method)
    cal.update(samples=int(Z), positions=[int(p) for p in pos], seed=int(seed))
    return cal


def infer_embeddings(
    params,
    config,
    node_ids,
    graph,
    features,
    nodes,
    samples=None,
    seed=0,
    threads=1,
    positions="all",
    isolated="self",
    aggregate=DEFAULT_AGGREGATE,
    calibration=None,
):
    """Embeddings of (new) nodes from a trained model, Algorithm 3: ``(node_ids, E)``.

    params   : params.Params of the trained model (``Caps2NE.params_()``, or built from
               ``modelfile.read_model``)
    config   : its TrainConfig as a dict (``Caps2NE.config_``, a model file's ``config``)
    node_ids : id strings of its training nodes (``Caps2NE.node_ids_``)
    graph    : csr.Graph (or scipy.sparse adjacency) holding the nodes to embed and
               their edges to old and new nodes
    features : (N_graph, d) fixed features in graph order (dense or scipy.sparse) for
               a fixed-feature model; None for a featureless one
    nodes    : node ids (str) or graph indices (int) to embed; old nodes are allowed
               (their capsule-path embedding)
    samples  : Z contexts per node; None -> q (each position once)
    seed     : int; threads : Numba threads (restored afterwards; BLAS runs on one, as in
               training)
    positions: 'all' (0..q-1), 'train' (the model's training target positions; 'all'
               when it trained on every or random positions) or 0-based positions
    isolated : 'self' or 'error' (see the module docstring)
    aggregate: how the Z capsule outputs e of a node become its embedding:
               'calibrated' (default) the mean mapped onto the scale of the o_v by
               ``calibration`` (``calibrate``, or a model file's stored one); without one
               it is fitted here on the training nodes in ``graph`` with the same Z,
               positions and seed; for a classifier fitted on o_v.
               'mean' the paper's average (Algorithm 3); 'sum' the authors' code, Z x mean.

    Returns ``node_ids`` (list of str, in the order of ``nodes``) and ``E`` float32 (V, k).
    ``Caps2NE.transform`` and the ``infer`` command call this.
    """
    graph = as_graph(graph)
    threads = check_int("threads", threads, 1)
    seed = check_seed("seed", seed)
    if aggregate not in AGGREGATES:
        raise InputError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    idx = graph_nodes(graph, nodes)
    node_ids = [str(x) for x in node_ids]  # labels (Caps2NE.node_ids_) as the graph's ids
    W, X, cfg, known = model_inputs(params, config, node_ids, graph, features)
    positions = _positions(config, positions)
    q = W.shape[0] + 1
    Z = q if samples is None else check_int("samples", samples, 1)
    cal = None
    if aggregate == "calibrated":
        cal = calibration
        if cal is None:
            log.info("no stored calibration: fitting one on the training nodes in the graph")
            cal = calibrate(params, config, node_ids, graph, features, Z, seed, threads, positions)
        else:
            check_settings(cal, Z, [int(p) for p in context_positions(positions, q)])
    E = _embed(threads, (W, X, cfg, known), config, graph, idx, Z, seed, positions, isolated)
    return [graph.node_ids[int(i)] for i in idx], aggregate_samples(E, Z, aggregate, cal)
