"""An update of a trained model to a changed graph (``caps2ne update``,
``Caps2NE.partial_fit``): ``update``, the model's tables carried over to the new graph
and trained where the graph changed, then written as ``train`` writes them.

The steps (docs/update.md says why each is so, and the alternatives):

1. The change (graphs/changes.py ``diff``): the nodes kept, added and removed (by id)
   and the edges added and removed.  The old graph is the graph the model was trained
   on; the model file does not store it, the caller reads it (``--old-graph``).
2. The start (``start_params``): every kept node keeps its rows of x, o_v and the bias,
   W is kept whole; a removed node's rows go.  A new node's o_v is where Algorithm 3
   puts it (inference/infer.py: the mean capsule output of contexts sampled through it,
   calibrated onto the o_v), its trained x (featureless models) the mean x of its kept
   neighbours, its bias theirs; a new node without a kept neighbour keeps the random
   start of a fresh run.  Adam's moments start at zero (the model file has none).
3. The walks (``plan``): they start only at the nodes within ``hops`` hops of the
   change (``changes.hops_from`` of the touched nodes), T = walks_per_node from each
   of them per epoch (walk w of the epoch starts at ``starts[w mod S]``); epochs: E_u =
   ceil(E |S| / N) in [1, E], E the epochs the model trained: the budget grows with
   the change, and a change that reaches every node trains as many epochs as training.
   With ``budget='change'`` (``change_shares``, ``change_starts``) each node starts
   walks in proportion to the share of its edges that changed, for one epoch, and only
   the new nodes take the spectral start (step 2 keeps every kept row).  With
   ``budget='auto'`` (``auto_budget``) the plan takes 'change' for a change of a few
   edges (at most AUTO_CHANGE_MAX of them, no node added or removed), else 'hops'.
4. The run: a resumed run (training/trainer.py) from a checkpoint made of the start
   (``write_start``), on the new graph, with the model's options, ``epochs`` E_u and no
   stop rule.  Its checkpoints go to ``checkpoint_dir`` like a training run's, and an
   interrupted update resumes from there (``resume_from``) as ``train --resume`` does.
   The written stage (ProNE's propagation, its spectrum and row length) runs again on
   the new graph as the model's options say.

Deterministic: the same inputs give the same bits on any thread count (the run's
streams are keyed by (seed, epoch, step); the start's by the model's seed).
"""

import logging
import math
import shutil
import tempfile
from dataclasses import dataclass, replace

import numpy as np
from threadpoolctl import threadpool_limits

from ..defaults import UPDATE_AUTO_CHANGE_MAX, UPDATE_BUDGET, UPDATE_BUDGETS
from ..errors import InputError
from ..graphs.changes import diff, hops_from
from ..kernels.rng import derive_seed
from ..model.features import prepare_features
from ..model.params import Params, init_params
from ..training import checkpoint
from ..training.loop import LoopState
from ..training.options.config import TrainConfig
from ..training.options.presets import resolve
from ..training.step.optim import Adam

log = logging.getLogger(__name__)

HOPS = 1
"""The default hops around the change that walks start from (``UpdateOptions.hops``)."""
BUDGETS, BUDGET = UPDATE_BUDGETS, UPDATE_BUDGET  # defaults.py says why
AUTO_CHANGE_MAX = UPDATE_AUTO_CHANGE_MAX


@dataclass(frozen=True)
class UpdateOptions:
    """What an update may choose: ``budget`` ('change' or 'hops', ``BUDGET``), ``hops``
    (with 'hops': walks start at most this many hops from a changed edge or node),
    ``epochs`` (None: the budget rule, module docstring), and ``threads`` (Numba
    threads; the bits do not depend on it)."""

    hops: int = HOPS
    epochs: int | None = None
    threads: int = 1
    budget: str = BUDGET


@dataclass
class Plan:
    """What an update trains (``plan``): ``change`` (changes.GraphChange), ``rows``
    (N_new,) int64, the model's row of each node of the new graph (-1: a new node),
    ``starts`` (S,) int64 the nodes walks start from (sorted; with the budget 'change'
    a node may repeat), ``cfg`` the resolved options of the run (config.TrainConfig),
    ``features`` the fixed features prepared (or None), ``budget`` the rule that chose
    the starts (``BUDGETS``)."""

    change: object
    rows: np.ndarray
    starts: np.ndarray
    cfg: object
    features: object = None
    budget: str = BUDGET


def model_of(trained, graph, calibration=None, run=None):
    """The model (modelfile.read_model's dict, what ``update`` reads) of a finished
    run ``trained`` (trainer.Trained, with its model kept) on ``graph``: to update a
    model without a file (``Caps2NE.partial_fit``, the benchmark)."""
    p, result = trained.params, trained.result
    propagated = trained.propagated
    return dict(
        W=p.W,
        O=p.O,
        bias=p.bias,
        X=None if p.fixed_features else p.X,
        fixed_features=bool(p.fixed_features),
        node_ids=[str(x) for x in graph.node_ids],
        config=result.config.to_dict(),
        history=list(result.history),
        calibration=calibration,
        run=run,
        propagation=None if propagated is None else dict(E=propagated.E, P=propagated.P),
    )


def check_model(model, old_graph, new_graph, features):
    """InputError, one line, when the model cannot be updated with these inputs: the
    old graph's nodes are not the model's, fixed features missing or of another width
    (or given to a featureless model), a model whose x was ProNE of the old graph
    (--spectral features), or graphs read another way than the model's training."""
    ids, old_ids = model["node_ids"], old_graph.node_ids
    if len(ids) != len(old_ids) or set(ids) != set(old_ids):
        missing = sorted(set(ids) - set(old_ids))[:1] or sorted(set(old_ids) - set(ids))[:1]
        raise InputError(
            f"the old graph has {len(old_ids)} nodes and the model {len(ids)}, not the "
            f"same ones (e.g. node {missing[0]!r}); give the graph the model was trained "
            "on as the old graph"
        )
    cfg = model["config"]
    if cfg.get("spectral") == "features":
        raise InputError(
            "the model was trained with --spectral features: its x is ProNE of the old "
            "graph, which a changed graph moves to another basis; train it again on the "
            "new graph (or train with --spectral init_xo, which an update can follow)"
        )
    d = int(model["W"].shape[2])
    if model["fixed_features"]:
        if features is None:
            raise InputError(
                "the model was trained with fixed features, which it does not store; "
                "give features for every node of the new graph (--features)"
            )
        if features.shape[0] != new_graph.n_nodes or features.shape[1] != d:
            raise InputError(
                f"the features are {features.shape[0]} x {features.shape[1]}; the new "
                f"graph has {new_graph.n_nodes} nodes and the model was trained with "
                f"d = {d}: give one row of d = {d} per node of the new graph"
            )
    elif features is not None:
        raise InputError(
            "the model was trained without fixed features (it learned its own x); omit --features"
        )
    run = model.get("run")
    if run is not None:
        for g, which in ((old_graph, "old"), (new_graph, "new")):
            if bool(g.directed) != bool(run["directed"]):
                how = "directed" if run["directed"] else "undirected"
                raise InputError(
                    f"the model was trained on a graph read as {how}; read the {which} "
                    f"graph the same way ({'add' if run['directed'] else 'drop'} --directed)"
                )


def model_rows(model_ids, graph):
    """(N,) int64: the model's row of each node of ``graph`` (by id), -1 for a node the
    model does not know."""
    where = {nid: r for r, nid in enumerate(model_ids)}
    return np.fromiter(
        (where.get(nid, -1) for nid in graph.node_ids), dtype=np.int64, count=graph.n_nodes
    )


def update_epochs(trained_epochs, n_starts, n_nodes):
    """E_u = ceil(E S / N) within [1, E]: the epochs of an update whose walks start at
    S of the N nodes, after a training of E epochs (module docstring)."""
    E = max(1, int(trained_epochs))
    return int(min(E, max(1, math.ceil(E * n_starts / max(n_nodes, 1)))))


def change_shares(change, old_graph, new_graph):
    """(N_new,) float64 in [0, 1]: the share of each node's edges that changed, 1 for an
    added node; for a kept node, its stored edges added or removed (either end; its
    edges to removed and to added nodes too) over the larger of its degrees (in plus
    out, as stored) in the two graphs: 0 for a node the change does not touch."""
    n = new_graph.n_nodes
    changed = np.zeros(n, dtype=np.float64)
    for edges in (change.edges_added, change.edges_removed):
        if len(edges):
            changed += np.bincount(np.asarray(edges).ravel(), minlength=n)
    to_new = np.full(old_graph.n_nodes, -1, dtype=np.int64)
    to_new[change.kept_old] = change.kept_new
    if change.removed_old.size:  # edges to and from removed nodes, at their kept ends
        A = old_graph.to_scipy()
        ends = np.r_[A[change.removed_old].indices, A[:, change.removed_old].tocoo().row]
        ends = to_new[ends]
        changed += np.bincount(ends[ends >= 0], minlength=n)
    if change.added.size:  # edges to and from added nodes, at their kept ends
        A = new_graph.to_scipy()
        ends = np.r_[A[change.added].indices, A[:, change.added].tocoo().row]
        changed += np.bincount(ends, minlength=n)
    deg_new = np.diff(new_graph.indptr) + np.bincount(new_graph.indices, minlength=n)
    deg_old = np.zeros(n, dtype=np.int64)
    m = old_graph.n_nodes
    old_deg = np.diff(old_graph.indptr) + np.bincount(old_graph.indices, minlength=m)
    deg_old[change.kept_new] = old_deg[change.kept_old]
    share = np.minimum(1.0, changed / np.maximum(np.maximum(deg_new, deg_old), 1))
    share[change.added] = 1.0
    return share


def change_starts(shares, trained_epochs, seed):
    """(S,) int64 sorted, nodes repeated: the walk starts of an update whose budget
    follows the change (``BUDGET`` 'change'): node u appears c_u times, c_u = E s_u
    rounded up or down at random (up with probability its fraction; seeded), E the
    epochs the model trained and s_u its share of changed edges (``change_shares``).
    Over the update's one epoch node u then starts c_u T walks, in expectation E T s_u:
    its share of what training gave it (an added node: all of it).  At least one start
    (the node with the largest share) when every c_u rounds to 0."""
    x = np.asarray(shares, dtype=np.float64) * max(1, int(trained_epochs))
    whole = np.floor(x)
    rng = np.random.default_rng(derive_seed(seed, "update starts"))
    count = (whole + (rng.random(x.size) < x - whole)).astype(np.int64)
    if count.sum() == 0 and x.size and x.max() > 0:
        count[int(np.argmax(x))] = 1
    return np.repeat(np.arange(x.size, dtype=np.int64), count)


def changed_edge_share(change, old_graph, new_graph):
    """The stored edges added or removed between kept nodes over the larger graph's
    stored edges (an undirected edge counts twice in both)."""
    changed = len(change.edges_added) + len(change.edges_removed)
    return changed / max(old_graph.n_edges, new_graph.n_edges, 1)


def auto_budget(change, old_graph, new_graph):
    """``(budget, why)``: the budget ``--budget auto`` takes for ``change``: 'change'
    when no node is added or removed and at most AUTO_CHANGE_MAX of the edges changed
    (``changed_edge_share``), else 'hops' (defaults.UPDATE_BUDGET says where the
    threshold comes from)."""
    share = changed_edge_share(change, old_graph, new_graph)
    nodes = change.added.size + change.removed_old.size
    if nodes:
        return "hops", f"{nodes} node(s) added or removed"
    if share > AUTO_CHANGE_MAX:
        return "hops", f"{100 * share:.1f}% of the edges changed, over {100 * AUTO_CHANGE_MAX:g}%"
    return "change", f"{100 * share:.1f}% of the edges changed, no node added or removed"


def plan(model, old_graph, new_graph, features=None, options=UpdateOptions()):
    """The ``Plan`` of updating ``model`` (modelfile.read_model's dict) from
    ``old_graph`` to ``new_graph`` (csr.Graph); InputError when they do not match
    (``check_model``)."""
    if int(options.hops) < 0:
        raise InputError(f"--hops must be >= 0, got {options.hops}")
    if options.budget not in BUDGETS:
        raise InputError(f"--budget: one of {', '.join(BUDGETS)}; got {options.budget!r}")
    check_model(model, old_graph, new_graph, features)
    change = diff(old_graph, new_graph)
    budget = options.budget
    if budget == "auto":
        budget, why = auto_budget(change, old_graph, new_graph)
        log.info("--budget auto: %s (%s)", budget, why)
    rows = model_rows(model["node_ids"], new_graph)
    stored = dict(model["config"])
    history = model.get("history") or []  # the training's epochs, not earlier updates'
    trained = sum(not h.get("update") for h in history) or stored.get("epochs") or 1
    if budget == "change":
        shares = change_shares(change, old_graph, new_graph)
        starts = change_starts(shares, trained, int(stored.get("seed", 0)))
    else:
        dist = hops_from(new_graph, change.touched, options.hops)
        starts = np.flatnonzero(dist >= 0).astype(np.int64)
    if starts.size == 0:
        raise InputError(
            "nothing to update: the new graph has the old one's nodes and edges"
            + (" (only nodes without edges were removed)" if change.removed_old.size else "")
        )
    epochs = options.epochs
    if epochs is None and budget == "change":
        epochs = 1
    if epochs is None:
        epochs = update_epochs(trained, starts.size, new_graph.n_nodes)
    fixed = model["fixed_features"]
    cfg = TrainConfig(**dict(stored, epochs=int(epochs), stop="none", threads=options.threads))
    cfg, _ = resolve(cfg, new_graph.n_nodes, new_graph.n_edges, fixed_features=fixed)
    prepared = None
    if features is not None:
        prepared = prepare_features(features, new_graph.n_nodes, cfg.normalize_features)
    where = (
        f"{cfg.walks_per_node} x {starts.size} walks from {np.unique(starts).size} node(s) "
        "by their share of changed edges"
        if budget == "change"
        else f"walks start at {starts.size} node(s) within {options.hops} hop(s) of it"
    )
    log.info(
        "the change: %d node(s) added, %d removed, %d stored edge(s) added, %d removed; "
        "%s, %d epoch(s)",
        change.added.size,
        change.removed_old.size,
        len(change.edges_added),
        len(change.edges_removed),
        where,
        cfg.epochs,
    )
    return Plan(change, rows, starts, cfg, prepared, budget)


def neighbour_mean(graph, known, values):
    """(N, c) float32: each node's mean of ``values`` (N, c) over its neighbours (either
    direction) where ``known`` (N,) bool; rows of nodes without a known neighbour are
    zero, and ``has`` (N,) bool says which have one."""
    A = graph.to_scipy()
    A = (A + A.T).tocsr()
    A.data[:] = 1.0
    A = A.multiply(known[None, :].astype(np.float32)).tocsr()
    count = np.asarray(A.sum(axis=1)).ravel()
    total = A @ np.where(known[:, None], values, 0).astype(np.float64)
    has = count > 0
    mean = np.zeros_like(total)
    mean[has] = total[has] / count[has, None]
    return mean.astype(np.float32), has


def start_params(model, plan_, new_graph):
    """The tables an update starts from (params.Params on the new graph's nodes): the
    model's rows of every kept node, W whole, and a start for every new node (module
    docstring, step 2)."""
    cfg, rows = plan_.cfg, plan_.rows
    kept = rows >= 0
    n, q = new_graph.n_nodes, cfg.walk_length
    rng = np.random.default_rng(derive_seed(cfg.seed, "update start"))
    d = int(model["W"].shape[2])
    fresh = init_params(n, cfg.dim, d, q - 1, rng, plan_.features)  # new nodes' fallback
    W = np.array(model["W"], dtype=np.float32)
    O, bias = fresh.O, fresh.bias
    O[kept] = model["O"][rows[kept]]
    bias[kept] = model["bias"][rows[kept]]
    X = fresh.X
    if not model["fixed_features"]:
        X[kept] = model["X"][rows[kept]]
    new = np.flatnonzero(~kept)
    # the rows the new graph's spectral start replaces: the walks' starts ('hops'), or
    # the new nodes only ('change': every kept node keeps its rows)
    remap = plan_.starts if plan_.budget == "hops" else new
    spectral = _spectral_start(cfg, new_graph, any_rows=remap.size > 0)
    if new.size:
        if not model["fixed_features"] and spectral.X is None:
            x_mean, has = neighbour_mean(new_graph, kept, X)
            X[new[has[new]]] = x_mean[new[has[new]]]
        b_mean, _ = neighbour_mean(new_graph, kept, bias[:, None])
        bias[new] = b_mean[new, 0]
        if spectral.O is None:
            O[new] = _inferred_o(model, new_graph, plan_.features, new, O[new])
    with threadpool_limits(limits=1):  # the same bits on any thread count
        if spectral.X is not None:
            X[remap] = mapped_rows(spectral.X, X, kept, remap)
        if spectral.O is not None:
            O[remap] = mapped_rows(spectral.O, O, kept, remap)
    return Params(W, O, bias, X, fixed_features=bool(model["fixed_features"]))


def _spectral_start(cfg, graph, any_rows=True):
    """The spectral start of a training of ``cfg`` on ``graph`` (spectral/prone.py: its
    X with --spectral init, X and O with init_xo; nothing with none, or when no row
    takes it: ``any_rows`` False)."""
    from ..spectral import prone

    if cfg.spectral not in ("init", "init_xo") or not any_rows:
        return prone.SpectralStart()
    return prone.start(graph.indptr, graph.indices, graph.weights, cfg)


def mapped_rows(S, T, known, rows):
    """(len(rows), c) float32: the rows ``rows`` of the spectral start ``S`` (N, c') in
    the space of the table ``T`` (N, c): S[rows] M, M the least-squares map with
    S[known] M ~ T[known] (float64; ``known`` (N,) bool)."""
    S64 = np.asarray(S, dtype=np.float64)
    M, *_ = np.linalg.lstsq(S64[known], np.asarray(T, dtype=np.float64)[known], rcond=None)
    return (S64[rows] @ M).astype(np.float32)


def _inferred_o(model, graph, features, new, fallback):
    """(len(new), k) float32: Algorithm 3's calibrated o_v of the new nodes (indices of
    ``graph``), from the model as trained (inference/infer.py); a node whose contexts
    hold no node the model knows keeps its row of ``fallback``."""
    from ..inference.infer import (
        aggregate_samples,
        calibrate,
        capsule_embeddings,
        model_inputs,
    )

    fixed = model["fixed_features"]
    params = Params(model["W"], model["O"], model["bias"], model["X"], fixed_features=fixed)
    cfg, ids = model["config"], model["node_ids"]
    W, X, mcfg, known = model_inputs(params, cfg, ids, graph, features)
    Z = W.shape[0] + 1  # q: each position once
    seed = derive_seed(int(cfg.get("seed", 0)), "update infer") % (2**31)
    walks = (cfg.get("node2vec_p", 1.0), cfg.get("node2vec_q", 1.0))
    E = capsule_embeddings(
        W, X, graph, new, mcfg, Z, seed, "all", "self", known, walks, unencodable="zero"
    )
    cal = model.get("calibration")
    if cal is None or int(cal.get("samples", -1)) != Z:
        cal = calibrate(params, cfg, ids, graph, features, Z, seed)
    O_new = aggregate_samples(E, Z, "calibrated", cal).astype(np.float32)
    empty = ~np.any(E, axis=1)
    O_new[empty] = fallback[empty]
    return O_new


def start_fingerprint(plan_, new_graph):
    """The input fingerprint of an update's run (checkpoint.fingerprint): the new graph,
    its features and the nodes its walks start from."""
    g = new_graph
    return checkpoint.fingerprint(g.indptr, g.indices, g.weights, plan_.features, plan_.starts)


def check_resumed(directory, plan_, new_graph):
    """InputError unless the checkpoint in ``directory`` is one of an update of these
    inputs (the new graph, its features, the nodes near the change); its options are
    compared when the run resumes (checkpoint.check_compatible)."""
    ckpt = checkpoint.load(directory)
    if ckpt["graph_hash"] != start_fingerprint(plan_, new_graph):
        raise InputError(
            f"{ckpt['path']}: not a checkpoint of this update: the new graph, its "
            "features or the nodes near the change (--budget, --hops) differ from those "
            "of the run that wrote it; resume with the same inputs, --budget and --hops"
        )


def write_start(directory, params, plan_, new_graph, parallel="sync"):
    """A checkpoint in ``directory`` that a run on ``new_graph`` resumes from as if it
    had trained up to there: ``params``, Adam at step 0 with zero moments, no epoch
    done, the plan's options and the new graph's fingerprint."""
    cfg = plan_.cfg
    names = params.trainable()
    opt = Adam({name: getattr(params, name) for name in names}, lr=None)
    checkpoint.save(
        directory,
        params,
        opt,
        LoopState().to_dict(bool(cfg.skipgram_weight)),
        cfg.to_dict(),
        [],
        start_fingerprint(plan_, new_graph),
        dict(parallel=np.asarray(parallel)),
        lr=cfg.lr,
    )


@dataclass
class Updated:
    """A finished update: ``trained`` (trainer.Trained on the new graph: its params,
    written rows, propagation, result) and ``plan`` (the Plan it followed)."""

    trained: object
    plan: Plan

    @property
    def written(self):
        return self.trained.written


def update(
    model,
    old_graph,
    new_graph,
    features=None,
    options=UpdateOptions(),
    *,
    checkpoint_dir=None,
    checkpoint_every=0,
    resume_from=None,
    progress=False,
    keep_model=True,
    **loop_options,
):
    """Update ``model`` (modelfile.read_model's dict) from ``old_graph`` to
    ``new_graph`` (csr.Graph, read as the model's training read its graph), with
    ``features`` the new graph's fixed features (or None); returns an ``Updated``.

    ``checkpoint_dir``: the run's checkpoints, the start first (a folder that holds
    one already is refused, as ``train`` refuses it, unless it is ``resume_from``);
    ``resume_from``: the folder of an interrupted update of the same inputs and
    options, continued.  ``loop_options``: more of loop.LoopOptions' fields
    (epoch_callback, step_callback)."""
    from ..training import trainer

    p = plan(model, old_graph, new_graph, features, options)
    p.cfg = replace(p.cfg, threads=options.threads)
    own = None
    if resume_from is not None:
        check_resumed(resume_from, p, new_graph)
    else:
        params = start_params(model, p, new_graph)
        if checkpoint_dir is None:
            own = tempfile.mkdtemp(prefix="caps2ne-update-")
        start = checkpoint_dir if checkpoint_dir is not None else own
        write_start(start, params, p, new_graph)
        del params
        resume_from = start
    try:
        trained = trainer.train(
            new_graph,
            p.cfg,
            p.features,
            resume_from=resume_from,
            keep_model=keep_model,
            starts=p.starts,
            progress=progress,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            **loop_options,
        )
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
    return Updated(trained, p)
