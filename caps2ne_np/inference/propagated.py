"""New nodes of a model whose written embeddings were propagated (``--propagate``,
spectral/propagation.py): Algorithm 3 calibrated onto the o_v (inference/infer.py), then
the training run's spectral propagation, so that they land in the space of the written embeddings.

For a graph holding the training nodes and new ones, every node gets a filter input:
a training node its o_v, any other node its calibrated Algorithm 3 output (the o-path,
docs/inductive.md); the input is filtered over the whole graph with the run's order,
mu and theta and mapped by the run's P (propagation.embed_new).  A node of the graph
that the model was trained on, when listed, gets its filtered o_v (not its capsule
path): the written embeddings' map applied to the graph as it is now.
"""

import warnings

import numpy as np

from ..errors import InputError, InputWarning
from ..spectral import prone as spectral
from ..spectral import propagation
from . import infer
from .infer import as_graph, graph_nodes, model_inputs


def infer_propagated(
    params, config, node_ids, graph, features, nodes, propagated, isolated="self", **kwargs
):
    """``(node_ids, E)``: ``infer.infer_embeddings``'s result for a propagated model
    (``propagated``: the run's ``propagation.Propagated``; its P is used); ``kwargs``:
    samples, seed, threads, positions, aggregate, calibration.  With aggregate
    'calibrated' (the default) E (V, k) float32 has unit rows in the space of the model's
    written embeddings; 'mean' and 'sum' are Algorithm 3's outputs, as for any model.

    Only the requested nodes decide success: the filter of a node reads only its own
    connected component, so new nodes of other components are not embedded, and a new
    node nobody asked for that Algorithm 3 cannot encode (no encodable node in its
    contexts) adds a zero filter input instead of an error.  A requested one is an
    InputError (``infer.capsule_embeddings``), and so is a requested row that the
    propagation sends to zero or to NaN (``check_rows``)."""
    aggregate = kwargs.get("aggregate", "calibrated")
    if aggregate != "calibrated":  # Algorithm 3's own space (the e-path): no o_v involved
        return infer.infer_embeddings(
            params, config, node_ids, graph, features, nodes, isolated=isolated, **kwargs
        )
    graph = as_graph(graph)
    node_ids = [str(x) for x in node_ids]  # labels (Caps2NE.node_ids_) as the graph's ids
    inputs = model_inputs(params, config, node_ids, graph, features)  # its checks first
    idx = graph_nodes(graph, nodes)
    A = spectral.adjacency(graph.indptr, graph.indices, graph.weights, graph.n_nodes)
    rows = {str(nid): r for r, nid in enumerate(node_ids)}
    O_model = np.asarray(params.O, dtype=np.float64)
    O = np.zeros((graph.n_nodes, O_model.shape[1]))
    known = np.array([rows.get(nid, -1) for nid in graph.node_ids], dtype=np.int64)
    old = np.flatnonzero(known >= 0)
    O[old] = O_model[known[old]]
    new = np.flatnonzero((known < 0) & requested_components(A, idx))
    if new.size:
        if kwargs.get("calibration") is None:  # fitted once for both parts below
            kwargs["calibration"] = infer.calibrate(
                params,
                config,
                node_ids,
                graph,
                features,
                kwargs.get("samples"),
                kwargs.get("seed", 0),
                kwargs.get("threads", 1),
                kwargs.get("positions", "all"),
            )
        asked = np.intersect1d(new, idx)
        if asked.size:
            _, O[asked] = infer.infer_embeddings(
                params, config, node_ids, graph, features, asked, isolated=isolated, **kwargs
            )
        rest = np.setdiff1d(new, asked)
        if rest.size:
            O[rest] = _unrequested(inputs, config, graph, rest, kwargs)
    cfg = dict(config)
    E = propagation.embed_new(
        A,
        O,
        idx,
        np.asarray(propagated.P, dtype=np.float64),
        cfg.get("prone_order", 10),
        cfg.get("prone_mu", 0.2),
        cfg.get("prone_theta", 0.5),
        cfg.get("row_norm", 1.0),  # a model file written before the option: unit rows
        np.dtype(cfg.get("spectral_precision", "float64")),  # before it: float64
    )
    ids = [graph.node_ids[int(i)] for i in idx]
    check_rows(ids, E)
    return ids, E


def requested_components(A, idx):
    """bool (N,): the nodes in the connected components of the graph indices ``idx``
    (``A`` symmetric).  The filter is a polynomial of A, so a row of O~ reads only
    its own component."""
    from scipy.sparse.csgraph import connected_components

    _, label = connected_components(A, directed=False)
    return np.isin(label, label[idx])


def _unrequested(inputs, config, graph, rest, kwargs):
    """The filter inputs (V, k) of new nodes nobody asked for: their calibrated Algorithm
    3 outputs (as ``infer.infer_embeddings`` with ``kwargs``), and a zero row (no signal)
    for a node none of whose contexts holds an encodable node; nothing is said about
    them (no InputWarning)."""
    q = inputs[0].shape[0] + 1
    samples = kwargs.get("samples")
    Z = q if samples is None else samples
    positions = infer._positions(config, kwargs.get("positions", "all"))
    seed, threads = kwargs.get("seed", 0), kwargs.get("threads", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        E = infer._embed(threads, inputs, config, graph, rest, Z, seed, positions, "self", "zero")
    out = np.zeros(E.shape)
    ok = E.any(axis=1)
    out[ok] = infer.aggregate_samples(E[ok], Z, "calibrated", kwargs["calibration"])
    return out


def check_rows(ids, E):
    """InputError (one line) when a requested propagated row is zero or not finite: the
    propagation's map (the model file's ``propagation_P``) sends that node's filtered row
    O~ to zero, or the numbers overflowed; never written as an embedding."""
    finite = np.isfinite(E).all(axis=1)
    for bad, what in ((~finite, "NaN or infinite"), (finite & ~E.any(axis=1), "zero")):
        if bad.any():
            first = ids[int(np.flatnonzero(bad)[0])]
            raise InputError(
                f"node {first!r} ({int(bad.sum())} of {len(ids)} requested node(s)): its "
                f"propagated row came out {what} (the model's propagation map P sends its "
                "filtered row there); --aggregate mean gives Algorithm 3's output "
                "instead, or retrain with --propagate none"
            )
