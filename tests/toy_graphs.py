"""Small graphs several test files train on."""

import numpy as np
import scipy.sparse as sp


def ring_of_cliques(n_cliques=4, size=6, drop_zeros=False):
    """``n_cliques`` cliques of ``size`` nodes, clique c joined to clique c + 1 by one
    edge (node c * size to node (c + 1) * size + 1, around the ring); symmetric CSR with
    sorted indices.  ``drop_zeros``: without the explicit zeros the clique blocks' empty
    diagonals leave in the matrix."""
    blocks = sp.block_diag([np.ones((size, size)) - np.eye(size)] * n_cliques, format="lil")
    for c in range(n_cliques):
        u, v = c * size, ((c + 1) % n_cliques) * size + 1
        blocks[u, v] = blocks[v, u] = 1
    A = blocks.tocsr()
    if drop_zeros:
        A.eliminate_zeros()
    A.sort_indices()
    return A
