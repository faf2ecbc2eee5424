"""Link prediction on embeddings: a seeded edge split that keeps every node, sampled
non-edges (uniform and hard), and the scores of held-out edges against them
(docs/links.md has the protocol step by step).

The protocol, as the functions below run it:

1. ``split_edges``: hold out a seeded ``fraction`` of the graph's edges (10% by default,
   as CogDL's table).  A random spanning forest of the graph is never held out, so every
   node keeps at least one training edge and the training graph has the components of the
   whole graph.  ``split_files`` gives the two edge lists (train the embeddings on
   ``train_edges.txt``), ``read_split`` reads them back and checks them against the graph.
2. ``sample_non_edges``: as many node pairs that are not edges of the whole graph as there
   are held-out edges, of one kind: ``uniform`` (both ends uniform over the nodes: the easy
   negatives that flatter every method), ``degree`` (both ends drawn in proportion to their
   degree, so that degree alone no longer tells edges from non-edges) or ``two-hop`` (a
   node and the end of a two-step uniform walk from it in the training graph: pairs with a
   common neighbour, the hard negatives).
3. ``score_links``: each held-out edge and each non-edge gets a score, by the embeddings
   alone (``cosine``, ``dot``: nothing trained) and by logistic regression on the Hadamard
   product o_u * o_v (``logistic``: k-fold over the scored pairs, each pair scored by the
   model of the folds it was not in, as node2vec's protocol); then ROC-AUC (``auc`` of
   spectral/propagation.py: ties count one half), average precision and Hits@K (the share
   of held-out edges scored above the K-th best non-edge, as OGB's).

Weights: the split ignores them (every edge equally likely to be held out); the training
edge list keeps them as a third column; the scores never read them.  Directed graphs: an
edge is an ordered pair (u, v); the forest is that of the undirected skeleton; a
non-edge is an ordered pair (u, v) with no edge u -> v (v -> u may be one); the three
scorers are symmetric, so they cannot tell u -> v from v -> u (and a held-out u -> v
whose reverse stays in training is easy).  Self-loops are never held out nor sampled.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..spectral.propagation import auc

NEGATIVE_KINDS = ("uniform", "degree", "two-hop")
SCORERS = ("cosine", "dot", "logistic")
TRAIN_FILE = "train_edges.txt"
HELD_FILE = "held_edges.txt"
MAX_ROUNDS = 200  # rounds of sampled candidates before sample_non_edges gives up


class EdgeSplit(NamedTuple):
    """A graph's edges in two parts: ``train`` (m, 2) and ``held`` (h, 2) int64 node
    indices (undirected: u < v, each edge once; directed: u -> v), ``train_weights`` and
    ``held_weights`` (float32), the graph's ``n_nodes``, ``directed``, and ``wanted``: the
    number of held-out edges asked for (more than ``len(held)`` when the forest left too
    few edges to hold out)."""

    train: np.ndarray
    held: np.ndarray
    train_weights: np.ndarray
    held_weights: np.ndarray
    n_nodes: int
    directed: bool
    wanted: int

    def train_adjacency(self):
        """The training graph as a scipy CSR (n, n), weights kept (undirected: symmetric)."""
        return adjacency(self.train, self.n_nodes, self.directed, self.train_weights)


def adjacency(pairs, n, directed=False, weights=None):
    """The CSR (n, n) float64 of the edges ``pairs`` (m, 2) (undirected: both directions)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    w = np.ones(len(pairs)) if weights is None else np.asarray(weights, dtype=np.float64)
    u, v = pairs[:, 0], pairs[:, 1]
    if not directed:
        u, v, w = np.r_[u, v], np.r_[v, u], np.r_[w, w]
    return sp.csr_matrix((w, (u, v)), shape=(n, n))


def edge_pairs(A, directed=False):
    """(pairs (m, 2) int64, weights (m,) float32) of the adjacency ``A`` (scipy.sparse):
    undirected, each edge once as u < v (``A`` must then be symmetric); directed, every
    stored u -> v.  Self-loops are left out."""
    A = sp.coo_matrix(A)
    keep = A.row != A.col if directed else A.row < A.col
    pairs = np.stack([A.row[keep], A.col[keep]], axis=1).astype(np.int64)
    weights = A.data[keep].astype(np.float32)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return pairs[order], weights[order]


def spanning_forest(pairs, n):
    """A bool mask (m,) of the edges ``pairs`` (m, 2) that Kruskal's rule keeps in the
    order given: an edge joins two trees of the forest so far, or is left out.  Shuffled
    pairs give a random spanning forest of the undirected skeleton."""
    parent = np.arange(n, dtype=np.int64)

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving
            x = parent[x]
        return x

    keep = np.zeros(len(pairs), dtype=bool)
    for e, (u, v) in enumerate(pairs.tolist()):
        ru, rv = root(u), root(v)
        if ru != rv:
            parent[ru] = rv
            keep[e] = True
    return keep


def split_edges(A, fraction=0.1, seed=0, directed=False):
    """The ``EdgeSplit`` of the graph ``A`` (scipy.sparse (n, n); symmetric unless
    ``directed``): ``round(fraction x edges)`` edges held out, drawn in a seeded random
    order among the edges outside a random spanning forest (same order), so that every
    node with an edge keeps one in training; fewer when the forest leaves fewer (a tree
    has none to hold out: ``held`` is then empty).  Weights are not read for the draw."""
    if not 0 < fraction < 1:
        raise InputError(f"fraction: the share of edges to hold out, in (0, 1); got {fraction}")
    A = sp.csr_matrix(A)
    if A.shape[0] != A.shape[1]:
        raise InputError(f"the adjacency must be square, got shape {A.shape}")
    if not directed and (abs(A - A.T) > 0).nnz:
        raise InputError("an undirected split needs a symmetric adjacency; pass directed=True")
    pairs, weights = edge_pairs(A, directed)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    forest = np.zeros(len(pairs), dtype=bool)
    forest[order] = spanning_forest(pairs[order], A.shape[0])
    wanted = int(round(fraction * len(pairs)))
    free = order[~forest[order]]
    held = np.zeros(len(pairs), dtype=bool)
    held[free[:wanted]] = True
    return EdgeSplit(
        train=pairs[~held],
        held=pairs[held],
        train_weights=weights[~held],
        held_weights=weights[held],
        n_nodes=A.shape[0],
        directed=directed,
        wanted=wanted,
    )


def _keys(pairs, n, directed):
    """One int64 per pair (undirected: of the pair as min, max)."""
    u, v = pairs[:, 0], pairs[:, 1]
    if not directed:
        u, v = np.minimum(u, v), np.maximum(u, v)
    return u * np.int64(n) + v


def _candidates(kind, rng, size, deg, train):
    """``size`` candidate pairs (size, 2) of one kind (sample_non_edges)."""
    n = len(deg)
    if kind == "uniform":
        nodes = np.flatnonzero(deg > 0)
        return nodes[rng.integers(0, len(nodes), size=(size, 2))]
    if kind == "degree":
        p = deg / deg.sum()
        return rng.choice(n, size=(size, 2), p=p)
    indptr, indices = train.indptr, train.indices
    tdeg = np.diff(indptr)
    nodes = np.flatnonzero(tdeg > 0)
    u = nodes[rng.integers(0, len(nodes), size=size)]
    x = indices[indptr[u] + (rng.random(size) * tdeg[u]).astype(np.int64)]
    w = indices[indptr[x] + (rng.random(size) * tdeg[x]).astype(np.int64)]
    return np.stack([u, w], axis=1)


def sample_non_edges(split, count, kind="uniform", seed=0):
    """Up to ``count`` distinct node pairs (c, 2) int64 that are not edges of the whole
    graph (``split``'s training and held-out edges) nor self-pairs, of the ``kind``:

    * ``uniform``: both ends uniform over the nodes that have an edge;
    * ``degree``: both ends drawn with probability proportional to their degree in the
      whole graph (the distribution of an edge's ends: degree alone cannot tell);
    * ``two-hop``: u uniform over the nodes, then two steps of a uniform walk over the
      training graph (its undirected skeleton): u and w share a neighbour.

    Fewer than ``count`` when ``MAX_ROUNDS`` rounds of candidates find no more (a dense
    graph has few non-edges; a forest of stars has few two-hop pairs)."""
    if kind not in NEGATIVE_KINDS:
        raise InputError(f"kind: one of {', '.join(NEGATIVE_KINDS)}; got {kind!r}")
    n, directed = split.n_nodes, split.directed
    both = np.concatenate([split.train, split.held])
    edges = np.unique(_keys(both, n, directed))
    deg = np.bincount(both.ravel(), minlength=n).astype(np.float64)
    train = adjacency(split.train, n, directed=False).tocsr()
    rng = np.random.default_rng(seed)
    taken = np.zeros(0, dtype=np.int64)
    out = []
    for _ in range(MAX_ROUNDS):
        need = count - len(taken)
        if need <= 0 or not deg.any():
            break
        cand = _candidates(kind, rng, 2 * need + 16, deg, train)
        cand = cand[cand[:, 0] != cand[:, 1]]
        if not directed:
            cand = np.sort(cand, axis=1)
        keys = _keys(cand, n, directed)
        _, first = np.unique(keys, return_index=True)
        first = np.sort(first)  # the first draw of each pair, in the order drawn
        cand, keys = cand[first], keys[first]
        fresh = ~np.isin(keys, edges) & ~np.isin(keys, taken)
        cand, keys = cand[fresh][:need], keys[fresh][:need]
        out.append(cand)
        taken = np.concatenate([taken, keys])
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), np.int64)


# --------------------------------------------------------------------------- scores and metrics


def pair_scores(E, pairs, scorer="cosine"):
    """The score of each pair (u, v) of ``pairs`` (m, 2) from the embeddings ``E`` (n, k):
    ``dot`` o_u . o_v, ``cosine`` o_u . o_v / (|o_u| |o_v|) (0 where a row is zero);
    float64 (m,)."""
    if scorer not in ("cosine", "dot"):
        raise InputError(f"scorer: 'cosine' or 'dot' (logistic: logistic_scores); got {scorer!r}")
    a = np.asarray(E[pairs[:, 0]], dtype=np.float64)
    b = np.asarray(E[pairs[:, 1]], dtype=np.float64)
    dot = np.einsum("ij,ij->i", a, b)
    if scorer == "dot":
        return dot
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide(dot, norms, out=np.zeros_like(dot), where=norms > 0)


def hadamard(E, pairs):
    """The edge features o_u * o_v (m, k) float64 of ``pairs`` (node2vec's Hadamard
    operator)."""
    return np.asarray(E[pairs[:, 0]], np.float64) * np.asarray(E[pairs[:, 1]], np.float64)


def logistic_scores(E, pos, neg, folds=3, seed=0, C=1.0):
    """(scores of ``pos``, scores of ``neg``): the decision values of a logistic regression
    on the Hadamard features (L2, ``C``), by stratified ``folds``-fold cross-validation
    over the pairs (shuffled, ``seed``): each pair is scored by the model fitted on the
    other folds.  The out-of-fold scores of all folds are then ranked together."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    if not 2 <= folds <= min(len(pos), len(neg)):
        raise InputError(
            f"folds: at least 2 and at most the smaller of {len(pos)} held-out edges and "
            f"{len(neg)} non-edges; got {folds}"
        )
    X = hadamard(E, np.concatenate([pos, neg]))
    y = np.r_[np.ones(len(pos)), np.zeros(len(neg))]
    out = np.empty(len(y))
    for tr, te in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y):
        model = LogisticRegression(C=C, max_iter=1000).fit(X[tr], y[tr])
        out[te] = model.decision_function(X[te])
    return out[: len(pos)], out[len(pos) :]


def average_precision(pos_scores, neg_scores):
    """Average precision of the ranking of positives ``pos_scores`` above negatives
    ``neg_scores``: the mean, over the positives, of the precision among the pairs scored
    at least as high (sklearn's average_precision_score; ties count as one threshold)."""
    from sklearn.metrics import average_precision_score

    y = np.r_[np.ones(len(pos_scores)), np.zeros(len(neg_scores))]
    return float(average_precision_score(y, np.r_[pos_scores, neg_scores]))


def hits_at_k(pos_scores, neg_scores, k):
    """Hits@K: the share of positives scored strictly above the K-th highest negative (OGB's
    definition); ``k`` in 1 .. len(neg_scores)."""
    neg = np.asarray(neg_scores, dtype=np.float64)
    if not 1 <= k <= len(neg):
        raise InputError(f"Hits@K: K must be in 1..{len(neg)} (the non-edges scored); got {k}")
    kth = np.partition(neg, len(neg) - k)[len(neg) - k]
    return float(np.mean(np.asarray(pos_scores, dtype=np.float64) > kth))


def metrics(pos_scores, neg_scores, k):
    """dict(auc, ap, hits) of one scorer's scores (fractions in [0, 1])."""
    return dict(
        auc=auc(pos_scores, neg_scores),
        ap=average_precision(pos_scores, neg_scores),
        hits=hits_at_k(pos_scores, neg_scores, k),
    )


def score_links(E, pos, neg, k=50, folds=3, seed=0, C=1.0, scorers=SCORERS):
    """{scorer: dict(auc, ap, hits)} of the held-out edges ``pos`` (m, 2) against the
    non-edges ``neg`` (c, 2) for the embeddings ``E`` (n, k_dim), row i = node i."""
    out = {}
    for scorer in scorers:
        if scorer == "logistic":
            p, q = logistic_scores(E, pos, neg, folds, seed, C)
        else:
            p, q = pair_scores(E, pos, scorer), pair_scores(E, neg, scorer)
        out[scorer] = metrics(p, q, k)
    return out


def evaluate_links(E, split, kinds=NEGATIVE_KINDS, k=50, folds=3, seed=0, C=1.0):
    """The whole protocol on the embeddings ``E`` (n, k_dim; trained on ``split.train``):
    for each negative kind, ``len(split.held)`` non-edges (``sample_non_edges``, seeded by
    ``seed`` and the kind) and ``score_links``.  Returns dict(held, kinds: {kind:
    dict(negatives, scores: {scorer: dict(auc, ap, hits)})})."""
    E = np.asarray(E)
    if E.ndim != 2 or E.shape[0] != split.n_nodes:
        raise InputError(f"E: one row per node, ({split.n_nodes}, k); got shape {E.shape}")
    if not len(split.held):
        raise InputError("no held-out edge to score (the split held out none)")
    out = dict(held=len(split.held), k=k, folds=folds, kinds={})
    for i, kind in enumerate(kinds):
        neg = sample_non_edges(split, len(split.held), kind, seed=[seed, i])
        if len(neg) < max(k, folds):
            raise InputError(
                f"{kind} non-edges: found {len(neg)}, fewer than Hits@K's K = {k} or "
                f"the {folds} folds; give a smaller K, or another kind"
            )
        scores = score_links(E, split.held, neg, k, folds, seed, C)
        out["kinds"][kind] = dict(negatives=len(neg), scores=scores)
    return out


# --------------------------------------------------------------------------- the split's files


def split_files(split, node_ids, source=""):
    """The two edge lists of ``split`` as text, {file name: text}, in node ids:
    ``train_edges.txt`` ('u v', or 'u v w' when a weight differs from 1: train on it)
    and ``held_edges.txt`` ('u v'), each opening with a '#' line saying what it holds.
    (``split-edges`` writes them atomically into its --out folder.)"""
    weighted = bool(np.any(split.train_weights != 1) or np.any(split.held_weights != 1))
    kind = "directed u -> v" if split.directed else "undirected"
    of = f" of {source}" if source else ""
    total = len(split.held) + len(split.train)
    ids = np.asarray([str(i) for i in node_ids], dtype=object)
    out = {}
    for name, head, pairs, w in (
        (TRAIN_FILE, "train the embeddings on this file", split.train, split.train_weights),
        (HELD_FILE, f"{len(split.held)} of {total}, never in {TRAIN_FILE}", split.held, None),
    ):
        u, v = ids[pairs[:, 0]], ids[pairs[:, 1]]
        what = "training" if name == TRAIN_FILE else "held-out"
        lines = [f"# {what} edges{of} ({kind}): {head}\n"]
        if weighted and w is not None:
            lines += [f"{a} {b} {c:.9g}\n" for a, b, c in zip(u, v, w.tolist())]
        else:
            lines += [f"{a} {b}\n" for a, b in zip(u, v)]
        out[name] = "".join(lines)
    return out


def _read_pairs(path, index):
    """(pairs (m, 2) int64, line numbers) of an edge list of node ids ('#' comments)."""
    pairs, lines = [], []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            tokens = line.split("#", 1)[0].split()
            if not tokens:
                continue
            if len(tokens) not in (2, 3):
                raise InputError(
                    f"{path}:{lineno}: expected 'u v' or 'u v w', got {line.strip()!r}"
                )
            for t in tokens[:2]:
                if t not in index:
                    raise InputError(
                        f"{path}:{lineno}: node {t!r} is not in the graph; give the graph "
                        "the split was written from"
                    )
            pairs.append((index[tokens[0]], index[tokens[1]]))
            lines.append(lineno)
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2), np.asarray(lines, dtype=np.int64)


def read_split(folder, A, node_ids, directed=False):
    """The ``EdgeSplit`` whose ``split_files`` are in ``folder``, checked against the
    graph ``A`` (scipy.sparse, node i = ``node_ids[i]``): every line an edge of the graph,
    no edge twice, every edge of the graph (self-loops aside) in one of the two files.
    InputError naming the file and line otherwise."""
    paths = [os.path.join(folder, name) for name in (TRAIN_FILE, HELD_FILE)]
    for path in paths:
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such file; write the split first (split-edges --out)")
    n = A.shape[0]
    index = {str(nid): i for i, nid in enumerate(node_ids)}
    pairs, weights = edge_pairs(A, directed)
    keys = _keys(pairs, n, directed)
    seen = np.zeros(len(keys), dtype=bool)
    parts = []
    for path in paths:
        got, lines = _read_pairs(path, index)
        want = _keys(got, n, directed)
        where = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        found = keys[where] == want
        if not found.all():
            bad = int(np.flatnonzero(~found)[0])
            raise InputError(
                f"{path}:{lines[bad]}: not an edge of the graph (self-loops are never in a "
                "split); give the graph the split was written from"
            )
        first = np.zeros(len(where), dtype=bool)
        first[np.unique(where, return_index=True)[1]] = True
        again = np.flatnonzero(seen[where] | ~first)
        if len(again):
            raise InputError(f"{path}:{lines[again[0]]}: an edge already listed in the split")
        seen[where] = True
        parts.append(where)
    if not seen.all():
        raise InputError(
            f"{folder}: the split lists {int(seen.sum())} of the graph's {len(keys)} edges; "
            "give the graph the split was written from"
        )
    train, held = parts
    return EdgeSplit(
        train=pairs[train],
        held=pairs[held],
        train_weights=weights[train],
        held_weights=weights[held],
        n_nodes=n,
        directed=directed,
        wanted=len(held),
    )
