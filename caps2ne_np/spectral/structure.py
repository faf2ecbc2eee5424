"""How clearly a graph holds its own edges, before any training and without labels:
the link-prediction AUC of a seeded sample of held-out edges by a rank-``RANK``
factorisation of the graph without them (ProNE's first stage,
``propagation.spectral_test``).  The stop rule's first part (training/budget.py,
``--stop auto``) and ``--spectrum-power auto`` (propagation.written_power) read it.
docs/training.md, "When to stop"."""

import numpy as np

RANK = 32
"""The rank of the factorisation ``measure`` takes (graphs of fewer than 4 x this many
nodes are not measured): 32 separates the panel's graphs as 64 and 128 do (gaps of
0.04 between the groups' seed ranges at each rank), at the least cost: 0.05 to 0.25 s up
to 5,000 nodes, 1 s at 30,000 (docs/results/stop_structure.md)."""


def measure(A, seed, progress=None, stage="stop rule"):
    """The link-prediction AUC (float) of a seeded sample of held-out edges of ``A``
    (symmetric scipy.sparse, ``propagation.holdout``) by the rank-``RANK`` ProNE
    factorisation of the graph without them, or None when it cannot tell: fewer than
    4 RANK nodes or 20 edges, no edge that can be held out (every edge has an end
    of degree 1), or no non-edge found (a nearly complete graph).  ``progress``: a
    prone.Stage told how far along it is (None: a Stage of its own named ``stage``,
    which logs that the measure starts once the graph is large enough to measure)."""
    from . import prone, propagation

    n = A.shape[0]
    if n < 4 * RANK or A.nnz < 40:
        return None
    if progress is None:
        progress = prone.Stage(
            stage,
            f"a rank-{RANK} factorisation of the graph ({n:,} nodes) without a sample "
            "of its edges, to measure how well it predicts them",
        )
    test = propagation.spectral_test(A, RANK, seed, factor_only=True, progress=progress)
    value = test["auc_factor"]
    return value if np.isfinite(value) else None


def of_graph(graph, seed, stage="stop rule"):
    """``measure`` of a csr.Graph's symmetric adjacency (prone.adjacency), seeded by
    ``seed``, its progress under the name ``stage``."""
    from . import prone

    A = prone.adjacency(graph.indptr, graph.indices, graph.weights, graph.n_nodes)
    return measure(A, seed, stage=stage)
