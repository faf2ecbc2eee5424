"""New nodes of a model whose written embeddings were propagated (``--propagate``,
model/propagation.py): Algorithm 3 calibrated onto the o_v (infer.py), then the training
run's spectral propagation, so that they land in the space of the written embeddings.

For a graph holding the training nodes and new ones, every node gets a filter input:
a training node its o_v, any other node its calibrated Algorithm 3 output (the o-path,
docs/inductive.md); the input is filtered over the whole graph with the run's order,
mu and theta and mapped by the run's P (propagation.embed_new).  A node of the graph
that the model was trained on, when listed, gets its filtered o_v (not its capsule
path): the written embeddings' map applied to the graph as it is now.
"""

import numpy as np

from . import infer
from .infer import _as_graph, _graph_nodes, model_inputs
from .model import propagation, spectral


def infer_propagated(
    params, config, node_ids, graph, features, nodes, propagated, isolated="self", **kwargs
):
    """``(node_ids, E)``: ``infer.infer_embeddings``'s result for a propagated model
    (``propagated``: the run's ``propagation.Propagated``; its P is used); ``kwargs``:
    samples, seed, threads, positions, aggregate, calibration.  With aggregate
    'calibrated' (the default) E (V, k) float32 has unit rows in the space of the model's
    written embeddings; 'mean' and 'sum' are Algorithm 3's outputs, as for any model."""
    aggregate = kwargs.get("aggregate", "calibrated")
    if aggregate != "calibrated":  # Algorithm 3's own space (the e-path): no o_v involved
        return infer.infer_embeddings(
            params, config, node_ids, graph, features, nodes, isolated=isolated, **kwargs
        )
    graph = _as_graph(graph)
    node_ids = [str(x) for x in node_ids]  # labels (Caps2NE.node_ids_) as the graph's ids
    model_inputs(params, config, node_ids, graph, features)  # its checks, before any work
    idx = _graph_nodes(graph, nodes)
    rows = {str(nid): r for r, nid in enumerate(node_ids)}
    O_model = np.asarray(params.O, dtype=np.float64)
    O = np.zeros((graph.n_nodes, O_model.shape[1]))
    known = np.array([rows.get(nid, -1) for nid in graph.node_ids], dtype=np.int64)
    old = np.flatnonzero(known >= 0)
    O[old] = O_model[known[old]]
    new = np.flatnonzero(known < 0)
    if new.size:
        if kwargs.get("calibration") is None:  # fitted once for both calls below
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
        rest = np.setdiff1d(new, asked)
        for part, how in ((asked, isolated), (rest, "self")):
            if part.size:
                _, E = infer.infer_embeddings(
                    params, config, node_ids, graph, features, part, isolated=how, **kwargs
                )
                O[part] = E
    A = spectral.adjacency(graph.indptr, graph.indices, graph.weights, graph.n_nodes)
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
    )
    return [graph.node_ids[int(i)] for i in idx], E
