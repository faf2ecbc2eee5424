"""The graph's own structure (caps2ne_np/spectral/structure.py): the label-free measure
that the stop rule and ``--spectrum-power auto`` read, of a matrix or of a csr.Graph."""

import numpy as np
import scipy.sparse as sp

from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.spectral import prone, structure
from caps2ne_np.training import budget
from caps2ne_np.training.options.config import TrainConfig


def planted(n=200, blocks=4, p_in=0.2, p_out=0.01, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(blocks), n // blocks)
    prob = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    upper = np.triu(rng.random((n, n)) < prob, 1)
    return sp.csr_matrix((upper | upper.T).astype(np.float32))


def test_of_graph_measures_the_graphs_adjacency():
    g = from_scipy(planted(), directed=False, keep_self_loops=False)
    A = prone.adjacency(g.indptr, g.indices, g.weights, g.n_nodes)
    value = structure.of_graph(g, 5)
    assert value is not None and 0.5 < value <= 1.0
    assert value == structure.measure(A, 5)


def test_the_stop_rule_reads_the_graphs_structure():
    g = from_scipy(planted(), directed=False, keep_self_loops=False)
    cfg = TrainConfig(stop="auto", propagate="none", seed=1)
    from caps2ne_np.kernels.rng import derive_seed

    seed = derive_seed(1, "stop structure") % (2**32)
    assert budget.graph_structure(cfg, g) == structure.of_graph(g, seed)


def test_too_small_a_graph_is_not_measured():
    g = from_scipy(planted(n=4 * structure.RANK - 4), directed=False, keep_self_loops=False)
    assert structure.of_graph(g, 0) is None
