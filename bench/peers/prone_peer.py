"""ProNE as the second peer of the panel: the ``nodevectors`` package's ProNE.

    python bench/peers/prone_peer.py --graph edges.txt --emb prone.emb --threads 2 [--seed 0]

ProNE (Zhang et al., IJCAI 2019): a sparse randomized SVD of a shifted-log proximity
matrix, then Chebyshev spectral propagation; nodevectors' defaults but for the size:
128 dimensions, order (``step``) 10, mu 0.2, theta 0.5.  The graph is read as caps2ne
reads it (caps2ne_np.graphs.graph.read_graph, undirected) and handed to nodevectors as a scipy
CSR matrix in the graph's node order; the embeddings are written in word2vec text format
(caps2ne_np.io.word2vec.write_word2vec).  nodevectors 0.1.23 needs two fixes, applied here as a
monkeypatch (``patch_nodevectors``), not by editing the package:

* networkx 3 removed ``nx.adj_matrix``, which csrgraph calls for a networkx input: it is
  put back as ``nx.adjacency_matrix`` converted to a scipy ``csr_matrix`` (networkx 3
  returns the ``csr_array`` type, whose ``*`` is elementwise);
* nodevectors calls ``scipy.special.iv`` after a bare ``import scipy``: current scipy
  loads submodules lazily, older ones did not: ``scipy.special`` is imported first.

nodevectors' randomized SVD is unseeded (``random_state=None``: NumPy's global
generator): it is seeded with ``np.random.seed(--seed)``.  BLAS runs on ``--threads``
threads.  Prints the seconds of each phase on stdout, one ``key: value`` line each, as
bench/deepwalk_peer.py.  caps2ne_np/spectral/prone.py is this project's own ProNE
(tests/test_prone.py checks it against this package with the same seed).
"""

import os
import sys
import time

T0 = time.perf_counter()

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
import harness  # noqa: E402 -- bench/harness.py: the shared flags, imports nothing else

del sys.path[0]  # bench/'s other modules stay out of nodevectors' way
# the checkout's package (its graph reader), installed or not, as bench/common.py does
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def patch_nodevectors():
    """The two fixes of the module docstring; returns the nodevectors module."""
    import networkx as nx
    import scipy.sparse as sp
    import scipy.special  # noqa: F401 -- nodevectors.prone uses scipy.special.iv

    if not hasattr(nx, "adj_matrix"):
        nx.adj_matrix = lambda G, *a, **k: sp.csr_matrix(nx.adjacency_matrix(G, *a, **k))
    import nodevectors

    return nodevectors


def main(argv=None):
    ap = harness.parser(__doc__, threads=1, threads_help="BLAS threads")
    ap.add_argument("--graph", required=True, help="edge list 'u v [w]' (read undirected)")
    ap.add_argument("--emb", required=True, help="embeddings, word2vec text format (overwritten)")
    ap.add_argument("--seed", type=int, default=0, help="NumPy's global seed (the random SVD)")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--order", type=int, default=10, help="Chebyshev order (nodevectors' step)")
    ap.add_argument("--mu", type=float, default=0.2)
    ap.add_argument("--theta", type=float, default=0.5)
    args = ap.parse_args(argv)

    import numpy as np
    import scipy.sparse as sp
    from threadpoolctl import threadpool_limits

    from caps2ne_np.graphs.graph import read_graph
    from caps2ne_np.io.word2vec import write_word2vec

    nodevectors = patch_nodevectors()
    t_imports = time.perf_counter() - T0
    t0 = time.perf_counter()
    g = read_graph(args.graph, directed=False)
    n = g.n_nodes
    data = np.ones(g.indices.shape[0]) if g.weights is None else g.weights.astype(np.float64)
    adj = sp.csr_matrix((data, g.indices, g.indptr), shape=(n, n))
    t_read = time.perf_counter() - t0

    t0 = time.perf_counter()
    np.random.seed(args.seed)
    with threadpool_limits(limits=args.threads):
        model = nodevectors.ProNE(
            n_components=args.dim, step=args.order, mu=args.mu, theta=args.theta, verbose=False
        )
        vectors = np.asarray(model.fit_transform(adj), dtype=np.float32)
    t_train = time.perf_counter() - t0

    t0 = time.perf_counter()
    write_word2vec(args.emb, g.node_ids, vectors, overwrite=True)
    t_write = time.perf_counter() - t0
    print(f"nodes: {n}")
    print(f"imports_s: {t_imports:.3f}")
    print(f"read_s: {t_read:.3f}")
    print(f"train_s: {t_train:.3f}")
    print(f"write_s: {t_write:.3f}")
    print(f"total_s: {time.perf_counter() - T0:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
