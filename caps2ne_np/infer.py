r"""Embeddings for new, unseen nodes (Algorithm 3) and the inductive split (Sec. 4.3).

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
    e   = capsule_outputs(W, X, ctx, cfg)              # (V*Z, k) core.forward, in chunks
    E   = e.reshape(V, Z, k).mean(axis=1)              # (V, k)
    E   = aggregate_samples(E, Z, aggregate, cal)      # mean | sum = Z E | calibrated = E A + b

The default aggregate, 'calibrated', maps the mean onto the o_v with a map fitted on
the training nodes (``calibrate``; per dimension by default), so a classifier fitted
on o_v applies to new nodes.  The defaults were chosen on validation, by a rule that
reads no test accuracy (``defaults.DEFAULT_AGGREGATE``, docs/inductive.md).

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
* **Isolated nodes** (no in- or out-edges): their walks stay on them (walks.py), so
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

from .defaults import (
    AGGREGATES,
    CALIBRATION_METHODS,
    DEFAULT_AGGREGATE,
    DEFAULT_CALIBRATION,
    ISOLATED,
)
from .errors import InputError, InputWarning, check_int, check_memory
from .graphs.csr import Graph, from_scipy
from .io.modelfile import RECALIBRATE, check_calibration
from .kernels.rng import derive_seed, quiet_wraparound
from .model.core import Params, SparseFeatures, forward, prepare_features, slot_major
from .training.config import ModelConfig
from .training.walks import (
    check_csr,
    check_seed,
    cumulative_weights,
    node2vec_params,
    node2vec_walk_contexts,
    sorted_rows,
    walk_contexts,
)

log = logging.getLogger(__name__)

PAIRS_BUDGET = 2**25
"""Upper bound on the elements of the (I, P, max(d, k)) intermediates of one chunk."""


# --------------------------------------------------------------------------- functional core


def _as_graph(graph):
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
    try:
        values = [check_int("positions", p, 0, q - 1) for p in spec]
    except TypeError:
        raise InputError(
            f"positions must be 'all' or a list of 0-based positions, got {spec!r}"
        ) from None
    if not values or len(set(values)) != len(values):
        raise InputError(f"positions must be non-empty and distinct, got {values}")
    return np.asarray(values, dtype=np.int64)


def sample_contexts(graph, nodes, walk_length, samples, seed, positions="all", node2vec=(1, 1)):
    """Z contexts C_v per node from walks of length q through it: int32 (V*Z, q-1).

    graph     : csr.Graph (out-edges; in-edges are its transpose)
    nodes     : int (V,) graph indices of the nodes to embed
    walk_length : q (the model's); samples : Z >= 1; seed : int in [0, 2**63)
    positions : 'all' or 0-based positions; sample z puts v at positions[z mod L]
    node2vec  : (p, q) of the model's node2vec walks; (1, 1): first-order walks
                (``walks.walk_contexts``), else ``walks.node2vec_walk_contexts``

    Row a*Z + z is sample z of nodes[a]; it depends only on (seed, nodes[a], z).
    """
    q = check_int("walk_length", walk_length, 2)
    Z = check_int("samples", samples, 1)
    seed = check_seed("seed", seed)
    pos = context_positions(positions, q)
    inv_p, inv_q, second_order = node2vec_params(*node2vec)
    indptr, indices, weights = check_csr(graph.indptr, graph.indices, graph.weights)
    in_indptr, in_indices, in_weights = check_csr(*in_edges(graph))
    if second_order:  # the membership test needs sorted rows
        indices, weights = sorted_rows(indptr, indices, weights)
        in_indices, in_weights = sorted_rows(in_indptr, in_indices, in_weights)
    nodes = np.asarray(nodes)
    if nodes.ndim != 1 or not np.issubdtype(nodes.dtype, np.integer):
        raise InputError(
            f"nodes must be a 1-D integer array of graph indices, got {nodes.dtype} {nodes.shape}"
        )
    n = indptr.shape[0] - 1
    if nodes.size and (nodes.min() < 0 or nodes.max() >= n):
        raise InputError(f"nodes must be graph indices in [0, {n})")
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    ctx = np.empty((nodes.shape[0] * Z, q - 1), dtype=np.int32)
    if nodes.shape[0] == 0:
        return ctx
    weighted = weights is not None
    if weighted:
        cum, in_cum = cumulative_weights(indptr, weights), cumulative_weights(in_indptr, in_weights)
    else:
        cum = in_cum = np.empty(0, dtype=np.float64)
    with quiet_wraparound():
        if second_order:
            node2vec_walk_contexts(
                indptr,
                indices,
                cum,
                in_indptr,
                in_indices,
                in_cum,
                weighted,
                inv_p,
                inv_q,
                nodes,
                pos,
                seed,
                ctx,
            )
        else:
            walk_contexts(
                indptr, indices, cum, in_indptr, in_indices, in_cum, weighted, nodes, pos, seed, ctx
            )
    return ctx


def capsule_outputs(W, X, ctx, cfg, chunk=None):
    """e for every context row: squash -> W_i u -> routing (core.forward), float32 (P, k).

    W   : (q-1, k, d) trained capsule weights
    X   : (N, d) input features of the graph's nodes: dense array or SparseFeatures
    ctx : (P, q-1) int graph indices, walk order
    cfg : config.ModelConfig (routing iterations, rule, scale)
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


CALIBRATION_NODES = 10000
"""At most this many training nodes (a seeded sample) are embedded to fit a calibration."""


def fit_calibration(E, O, method=DEFAULT_CALIBRATION):
    """A map from mean capsule outputs e to the output vectors o of the same training nodes.

    E, O   : (n, k) the Algorithm 3 mean e and the trained o_v of n training nodes
    method : 'scale'  o ~ s e,  s = mean_v |o_v| / mean_v |e_v|  (recovers o_v's scale)
             'diag'   o_j ~ a_j e_j + b_j per dimension j (least squares; the default,
                      chosen on validation: docs/inductive.md)
             'linear' o ~ A^T e + b (ridge least squares, lambda = 1e-3 tr(E^T E) / k)

    Returns a dict: method, ``A`` float32 (k, k) (diagonal for 'scale' and 'diag'), ``b``
    float32 (k,), and n.  ``apply_calibration`` computes e A + b.
    """
    if method not in CALIBRATION_METHODS:
        raise InputError(f"calibration method must be one of {CALIBRATION_METHODS}, got {method!r}")
    E = np.asarray(E, dtype=np.float64)
    O = np.asarray(O, dtype=np.float64)
    if E.ndim != 2 or E.shape != O.shape or E.shape[0] < 2:
        raise InputError(
            f"calibration needs two (n, k) arrays with n >= 2, got {E.shape} and {O.shape}"
        )
    n, k = E.shape
    b = np.zeros(k)
    if method == "scale":
        norm_e = np.linalg.norm(E, axis=1).mean()
        if not norm_e > 0:
            raise InputError(
                "every capsule output of the calibration nodes is zero; cannot calibrate"
            )
        A = np.eye(k) * (np.linalg.norm(O, axis=1).mean() / norm_e)
    elif method == "diag":
        Ec, Oc = E - E.mean(axis=0), O - O.mean(axis=0)
        var = np.einsum("ij,ij->j", Ec, Ec)
        a = np.where(var > 0, np.einsum("ij,ij->j", Ec, Oc) / np.where(var > 0, var, 1.0), 0.0)
        A = np.diag(a)
        b = O.mean(axis=0) - a * E.mean(axis=0)
    else:
        Em = E.mean(axis=0)
        Ec, Oc = E - Em, O - O.mean(axis=0)
        G = Ec.T @ Ec
        lam = 1e-3 * np.trace(G) / k
        A = np.linalg.solve(G + lam * np.eye(k), Ec.T @ Oc)
        b = O.mean(axis=0) - Em @ A
    return dict(method=method, A=A.astype(np.float32), b=b.astype(np.float32), n=int(n))


def apply_calibration(E, calibration):
    """e A + b (float64 products, float32 out): E (V, k) in the space of the o_v.

    The calibration is checked first (``modelfile.check_calibration``: shapes, finite,
    below 1e18); InputError when the result would not be finite in float32."""
    check_calibration(calibration, E.shape[1])
    A, b = np.asarray(calibration["A"]), np.asarray(calibration["b"])
    with np.errstate(over="ignore", invalid="ignore"):
        out = (np.asarray(E, dtype=np.float64) @ A.astype(np.float64) + b).astype(np.float32)
    if not np.isfinite(out).all():
        top = float(np.max(np.abs(A)))
        raise InputError(
            f"the calibration (A up to {top:.3g}) maps these embeddings beyond float32's "
            f"range; {RECALIBRATE}"
        )
    return out


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
):
    """Algorithm 3 for the graph indices ``nodes``: float32 (V, k), row a = nodes[a].

    W, X, cfg : as ``capsule_outputs`` (X in graph order, already prepared)
    graph     : csr.Graph holding the nodes and their edges
    samples   : Z; None -> q (each position once with positions='all')
    isolated  : 'self' (context = the node repeated; InputWarning) or 'error'
    known     : bool (N,) nodes that have an input x (featureless models); None = all
    node2vec  : (p, q) of the walks the model was trained on (``sample_contexts``)

    The seed is used as given (``infer_embeddings`` passes ``derive_seed(seed, 'infer')``).
    Raises InputError for a node whose every sampled context is unencodable (e = 0).
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
    if empty.any():
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


def _graph_nodes(graph, nodes):
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

    params   : core.Params of the trained model (W, O, bias; X when it was trained)
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
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        with threadpool_limits(limits=1):  # products run on Numba's threads (blas.py)
            return fn(*args)
    finally:
        numba.set_num_threads(old)


def calibration_nodes(node_ids, graph, max_nodes=CALIBRATION_NODES, seed=0):
    """Graph indices of the model's training nodes used to fit a calibration, int64.

    node_ids : id strings of the model's training nodes

    The training nodes present in ``graph`` (ids compared as strings) that have an edge
    there (an edgeless node's o_v was learned from its own features alone); all present
    training nodes if none has one.  More than ``max_nodes``: a seeded sample of them.
    """
    index = {nid: i for i, nid in enumerate(graph.node_ids)}
    idx = np.array(sorted(index[nid] for nid in node_ids if nid in index), dtype=np.int64)
    if idx.size < 2:
        raise InputError(
            f"the graph holds {idx.size} of the model's training nodes; calibration "
            "needs the training nodes and their edges (at least 2)"
        )
    deg = np.diff(graph.indptr)[idx] + np.diff(in_edges(graph)[0])[idx]
    if np.count_nonzero(deg) >= 2:
        idx = idx[deg > 0]
    if idx.size > max_nodes:
        idx = np.sort(np.random.default_rng(seed).choice(idx, max_nodes, replace=False))
    return idx


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
    graph = _as_graph(graph)
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
        E = _run_threads(
            threads,
            capsule_embeddings,
            W,
            X,
            graph,
            idx,
            cfg,
            Z,
            derive_seed(seed, "infer"),
            positions,
            "self",
            known,
            _node2vec(config),
        )
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

    params   : core.Params of the trained model (``Caps2NE.params_()``, or built from
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
    graph = _as_graph(graph)
    threads = check_int("threads", threads, 1)
    seed = check_seed("seed", seed)
    if aggregate not in AGGREGATES:
        raise InputError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    idx = _graph_nodes(graph, nodes)
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
        elif "samples" not in cal or "positions" not in cal:
            warnings.warn(
                f"the calibration does not say with which Z and positions it was fitted "
                f"(no 'samples' or 'positions'); inferring with Z = {Z}: the scale of the "
                "outputs may differ (fit it with infer.calibrate)",
                InputWarning,
                stacklevel=2,
            )
        elif cal.get("samples") != Z or cal.get("positions") != [
            int(p) for p in context_positions(positions, q)
        ]:
            warnings.warn(
                f"the calibration was fitted with Z = {cal.get('samples')} at positions "
                f"{cal.get('positions')}; inferring with Z = {Z}: the scale of the "
                "outputs may differ (recalibrate with the same settings)",
                InputWarning,
                stacklevel=2,
            )
    E = _run_threads(
        threads,
        capsule_embeddings,
        W,
        X,
        graph,
        idx,
        cfg,
        Z,
        derive_seed(seed, "infer"),
        positions,
        isolated,
        known,
        _node2vec(config),
    )
    return [graph.node_ids[int(i)] for i in idx], aggregate_samples(E, Z, aggregate, cal)


# --------------------------------------------------------------------------- inductive split


def inductive_split(graph_or_adj, test_nodes):
    """Remove the test nodes and every edge touching them: ``(subgraph, kept)``.

    graph_or_adj : csr.Graph, or a scipy.sparse (N, N) adjacency
    test_nodes   : graph indices (int), or node ids (str) of a Graph

    Returns the subgraph on the other nodes (a Graph with their ids, or a CSR matrix)
    and ``kept`` int64 (N - |test|,): subgraph node i is original node kept[i] (kept is
    sorted, so the remaining nodes keep their relative order).  Nodes left without
    edges stay in the subgraph (their walks stay in place, so their o_v is learned from
    their own features alone); an ``InputWarning`` gives their count.  Train on the subgraph,
    then embed the test nodes with ``infer_embeddings`` on the full graph.
    """
    is_graph = isinstance(graph_or_adj, Graph)
    if is_graph:
        adj, n = graph_or_adj.to_scipy(), graph_or_adj.n_nodes
    elif (
        sp.issparse(graph_or_adj)
        and graph_or_adj.ndim == 2
        and graph_or_adj.shape[0] == graph_or_adj.shape[1]
    ):
        adj, n = sp.csr_matrix(graph_or_adj), graph_or_adj.shape[0]
    else:
        raise InputError(
            "graph_or_adj must be a caps2ne_np.graphs.csr.Graph or a square scipy.sparse matrix"
        )
    test = np.asarray(test_nodes)
    if test.size and not np.issubdtype(test.dtype, np.integer):
        if not is_graph:
            raise InputError("test_nodes of a scipy adjacency must be integer node indices")
        test = graph_or_adj.index_of([str(t) for t in test_nodes])
    test = np.unique(test.astype(np.int64))
    if test.size and (test[0] < 0 or test[-1] >= n):
        raise InputError(f"test_nodes must be node indices in [0, {n})")
    keep = np.ones(n, dtype=bool)
    keep[test] = False
    kept = np.flatnonzero(keep).astype(np.int64)
    if kept.size < 2:
        raise InputError(
            f"removing {test.size} test nodes leaves {kept.size} node(s); training needs at least 2"
        )
    sub = adj[kept][:, kept].tocsr()
    sub.sort_indices()
    indptr = np.ascontiguousarray(sub.indptr, dtype=np.int64)
    lone = np.flatnonzero((np.diff(indptr) == 0) & (np.diff(sub.tocsc().indptr) == 0))
    if lone.size:
        first = graph_or_adj.node_ids[int(kept[lone[0]])] if is_graph else int(kept[lone[0]])
        warnings.warn(
            f"{lone.size} node(s) left without edges by removing the test nodes, e.g. "
            f"{first!r}: training learns their o_v from their own features alone (an "
            "edge list of the subgraph would drop them); infer_embeddings on the full "
            "graph embeds them from their edges",
            InputWarning,
            stacklevel=2,
        )
    if not is_graph:
        return sub, kept
    weights = None
    if graph_or_adj.weights is not None:
        weights = np.ascontiguousarray(sub.data, dtype=np.float32)
        if np.all(weights == 1.0):
            weights = None
    isolated = int(np.count_nonzero(np.diff(indptr) == 0))  # as graph.py counts them
    stats = dict(
        removed_nodes=int(test.size),
        removed_edges=int(graph_or_adj.n_edges - sub.nnz),
        isolated_nodes=isolated,
    )
    log.info(
        "inductive split: removed %d nodes and %d stored edges; %d nodes left without edges",
        test.size,
        stats["removed_edges"],
        isolated,
    )
    ids = graph_or_adj.node_ids
    return Graph(
        indptr=indptr,
        indices=np.ascontiguousarray(sub.indices, dtype=np.int32),
        weights=weights,
        node_ids=[ids[i] for i in kept],
        directed=graph_or_adj.directed,
        stats=stats,
    ), kept
