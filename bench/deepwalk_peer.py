"""DeepWalk as the panel's peer: this project's uniform walks fed to gensim's Word2Vec.

    python bench/deepwalk_peer.py --graph edges.txt --emb dw.emb --threads 2 [--seed 0]

DeepWalk (Perozzi et al. 2014) is uniform random walks plus skip-gram.  The walks are
the project's own (caps2ne_np.walks.walks.uniform_walks: 10 per node, length 80, DeepWalk's
defaults), the skip-gram is gensim's Word2Vec with negative sampling (sg=1, hs=0,
negative=5, window 10, 128 dimensions, min_count 0, gensim's default 5 epochs: the
DeepWalk reference code runs gensim with its default iteration count).  The graph is
read as caps2ne reads it (caps2ne_np.graphs.graph.read_graph, undirected), node ids are the
tokens of the edge list, and the embeddings are written in word2vec text format
(caps2ne_np.io.word2vec.write_word2vec) in the graph's node order.

Prints the seconds taken by the walks (generation and conversion to token lists) and
by Word2Vec (vocabulary and training) on stdout, one ``key: value`` line each.
"""

import os
import sys
import time

T0 = time.perf_counter()

import harness  # noqa: E402 -- bench/harness.py: the shared flags, imports nothing else

# the checkout's package (its reader and walks), installed or not, as bench/common.py does
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    ap = harness.parser(
        __doc__, threads=1, threads_help="gensim workers (walks use Numba's default)"
    )
    ap.add_argument("--graph", required=True, help="edge list 'u v [w]' (read undirected)")
    ap.add_argument("--emb", required=True, help="embeddings, word2vec text format (overwritten)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--walks-per-node", type=int, default=10)
    ap.add_argument("--walk-length", type=int, default=80)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=5, help="gensim epochs (gensim's default: 5)")
    ap.add_argument("--dim", type=int, default=128)
    args = ap.parse_args(argv)

    import numpy as np
    from gensim.models import Word2Vec

    from caps2ne_np.graphs.graph import read_graph
    from caps2ne_np.io.word2vec import write_word2vec
    from caps2ne_np.walks.walks import uniform_walks

    t_imports = time.perf_counter() - T0
    t0 = time.perf_counter()
    g = read_graph(args.graph, directed=False)
    t_read = time.perf_counter() - t0

    t0 = time.perf_counter()
    walks = uniform_walks(
        g.indptr, g.indices, None, args.walks_per_node, args.walk_length, args.seed
    )
    tokens = np.array(g.node_ids, dtype=object)
    sentences = []
    for a in range(0, walks.shape[0], 1 << 15):  # chunks bound the object array's size
        sentences.extend(tokens[walks[a : a + (1 << 15)]].tolist())
    del walks
    t_walks = time.perf_counter() - t0

    t0 = time.perf_counter()
    model = Word2Vec(
        sentences,
        vector_size=args.dim,
        window=args.window,
        min_count=0,
        sg=1,
        hs=0,
        negative=5,
        workers=args.threads,
        seed=args.seed,
        epochs=args.epochs,
    )
    t_train = time.perf_counter() - t0

    t0 = time.perf_counter()
    vectors = np.stack([model.wv[node] for node in g.node_ids]).astype(np.float32)
    write_word2vec(args.emb, g.node_ids, vectors, overwrite=True)
    t_write = time.perf_counter() - t0
    print(f"nodes: {g.n_nodes}")
    print(f"imports_s: {t_imports:.3f}")
    print(f"read_s: {t_read:.3f}")
    print(f"walks_s: {t_walks:.3f}")
    print(f"train_s: {t_train:.3f}")
    print(f"write_s: {t_write:.3f}")
    print(f"total_s: {time.perf_counter() - T0:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
