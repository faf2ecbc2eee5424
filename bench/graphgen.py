"""Planted-community graphs with power-law degrees and community sizes (LFR-like, simplified).

A seeded NumPy/SciPy generator in the spirit of Lancichinetti, Fortunato & Radicchi
(2008), used by bench/vs_deepwalk.py as graphs whose labels (the communities) are known:

1. degrees k_v ~ power law P(k) ~ k^-gamma on [k_min, max_degree], k_min solved so that
   the mean is ``avg_degree`` (continuous law, rounded);
2. community sizes s ~ power law P(s) ~ s^-beta on [min_community, max_community],
   drawn until they hold n nodes (the remainder is spread over the communities);
3. each node splits its degree into external stubs k_out = mu k (rounded at random, so
   the expectation is exactly mu k) and internal stubs k_in = k - k_out;
4. nodes go to communities at random, except that a node whose k_in does not fit
   (k_in >= community size) is placed first, in a community large enough for it
   (if none is, its k_in is cut to the largest community's size - 1);
5. internal stubs are matched at random inside each community, external stubs at
   random over the whole graph (a few rounds; a pair inside one community is put back
   and matched again), a configuration model in both cases;
6. self loops and duplicate edges are dropped, and a node left without an edge is
   joined to a random member of its community.

Departures from LFR: no rewiring to make the realized degrees exact, so degrees and
mixing come out slightly below the targets (duplicates are dropped, not rewired);
the test suite checks the realized mixing is within a few points of mu.

    adj, labels = lfr_like(10_000, mu=0.3, seed=0)     # CSR float32 (N, N), int64 (N,)
    write_edgelist("g.txt", adj); write_labels("g.labels", labels)

A module, not a script (the panel, vs_deepwalk.py and tests/test_bench_graphgen.py import it).
"""

import numpy as np
import scipy.sparse as sp

__all__ = ["lfr_like", "write_edgelist", "write_labels", "mixing", "default_sizes"]


def default_sizes(n):
    """(min_community, max_community, max_degree) used when not given: communities of
    max(20, n/200) .. max(100, n/20) nodes, degrees up to max(50, 4 sqrt(n))."""
    return max(20, n // 200), max(100, n // 20), max(50, int(round(4 * np.sqrt(n))))


def _powerlaw_mean(x_min, x_max, exponent):
    """Mean of the continuous law p(x) ~ x^-exponent on [x_min, x_max] (exponent != 1, 2)."""
    a, b = 1.0 - exponent, 2.0 - exponent
    return (a / b) * (x_max**b - x_min**b) / (x_max**a - x_min**a)


def _powerlaw_sample(rng, size, x_min, x_max, exponent):
    """Inverse-CDF draws of the continuous law p(x) ~ x^-exponent on [x_min, x_max]."""
    a = 1.0 - exponent
    u = rng.random(size)
    return (x_min**a + u * (x_max**a - x_min**a)) ** (1.0 / a)


def _solve_x_min(mean, x_max, exponent):
    """x_min with _powerlaw_mean(x_min, x_max, exponent) = mean (bisection)."""
    lo, hi = 1.0, float(x_max)
    if _powerlaw_mean(lo, x_max, exponent) > mean:
        return lo
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if _powerlaw_mean(mid, x_max, exponent) < mean:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _community_sizes(rng, n, s_min, s_max, beta):
    """Power-law sizes summing to n, each in [s_min, s_max] (a last partial community is
    spread over the others, one node each, starting with the smallest)."""
    sizes = []
    total = 0
    while total < n:
        batch = np.floor(_powerlaw_sample(rng, 64, s_min, s_max + 1, beta)).astype(np.int64)
        for s in np.minimum(batch, s_max):
            sizes.append(int(s))
            total += int(s)
            if total >= n:
                break
    sizes = np.array(sizes, dtype=np.int64)
    excess = total - n
    if sizes[-1] - excess >= s_min or sizes.size == 1:
        sizes[-1] -= excess
    else:
        rest = sizes[-1] - excess
        sizes = sizes[:-1]
        order = np.argsort(sizes, kind="stable")
        for j in range(rest):
            sizes[order[j % sizes.size]] += 1
    return sizes


def _assign(rng, k_in, sizes):
    """Community of each node: nodes whose k_in does not fit everywhere are placed first
    (largest k_in first) in a random community with room and size > k_in; the others fill
    the remaining places in random order.  Returns (labels, k_in possibly cut)."""
    n = k_in.size
    labels = np.full(n, -1, dtype=np.int64)
    free = sizes.copy()
    k_in = k_in.copy()
    hard = np.flatnonzero(k_in >= sizes.min())
    hard = hard[np.argsort(-k_in[hard], kind="stable")]
    for v in hard:
        ok = np.flatnonzero((sizes > k_in[v]) & (free > 0))
        if ok.size == 0:
            ok = np.flatnonzero(free > 0)
            c = ok[np.argmax(sizes[ok])]
            k_in[v] = min(k_in[v], sizes[c] - 1)
        else:
            c = rng.choice(ok, p=free[ok] / free[ok].sum())
        labels[v] = c
        free[c] -= 1
    rest = np.flatnonzero(labels < 0)
    slots = np.repeat(np.arange(sizes.size, dtype=np.int64), free)
    labels[rest] = rng.permutation(slots)
    return labels, k_in


def _match_within(rng, stubs, groups):
    """Random pairs of stubs inside each group: sort by (group, random key), pair positions
    0-1, 2-3, ... of each group (an odd group leaves its last stub out)."""
    order = np.lexsort((rng.random(stubs.size), groups))
    stubs, groups = stubs[order], groups[order]
    start = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    first = np.repeat(start, np.diff(np.r_[start, groups.size]))
    pos = np.arange(groups.size) - first
    last = np.r_[groups[1:] != groups[:-1], True]
    left = (pos % 2 == 0) & ~last
    i = np.flatnonzero(left)
    return stubs[i], stubs[i + 1]


def _in_sorted(x, table):
    """x in table, for a sorted table (binary search; np.isin re-sorts the table)."""
    if table.size == 0:
        return np.zeros(x.size, dtype=bool)
    i = np.minimum(np.searchsorted(table, x), table.size - 1)
    return table[i] == x


def _match(rng, stubs, labels, n, rounds, internal):
    """Configuration-model matching of ``stubs`` (a node once per stub): internal stubs in
    pairs inside the node's community, external ones over the graph with both ends in
    different communities.  A pair that is a self loop, repeats an edge already made or
    (external) stays inside one community is undone and its stubs matched again, up to
    ``rounds`` rounds; what is left then is dropped.  Returns (u, v) with u < v."""
    us, vs = [], []
    made = np.empty(0, dtype=np.int64)
    for _ in range(rounds):
        if stubs.size < 2:
            break
        if internal:
            a, b = _match_within(rng, stubs, labels[stubs])
        else:
            stubs = rng.permutation(stubs)
            a, b = stubs[: stubs.size // 2], stubs[stubs.size // 2 : 2 * (stubs.size // 2)]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        key = lo * n + hi
        ok = (lo != hi) & ~_in_sorted(key, made)
        if not internal:
            ok &= labels[a] != labels[b]
        order = np.argsort(key, kind="stable")  # one copy of a pair repeated in this round
        repeat = np.zeros(key.size, dtype=bool)
        repeat[order[1:]] = key[order[1:]] == key[order[:-1]]
        ok &= ~repeat
        us.append(lo[ok])
        vs.append(hi[ok])
        made = np.sort(np.concatenate([made, key[ok]]))
        # the stubs of the undone pairs (and an odd one out) are matched again
        kept = np.concatenate([lo[ok], hi[ok]])
        left = np.bincount(stubs, minlength=n) - np.bincount(kept, minlength=n)
        stubs = np.repeat(np.arange(n, dtype=np.int64), left)
    if not us:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(us), np.concatenate(vs)


def lfr_like(
    n,
    mu=0.3,
    avg_degree=15.0,
    max_degree=None,
    degree_exponent=2.5,
    community_exponent=1.5,
    min_community=None,
    max_community=None,
    seed=0,
    external_rounds=8,
):
    """A planted-community graph: (adj, labels).

    Parameters
    ----------
    n : int, nodes.
    mu : float in [0, 1), the fraction of each node's edges that leave its community.
    avg_degree : float, target mean degree (realized a little lower: duplicates dropped).
    max_degree : int, default ``max(50, 4 sqrt(n))`` (capped at n - 1).
    degree_exponent : gamma of P(k) ~ k^-gamma.
    community_exponent : beta of P(s) ~ s^-beta.
    min_community, max_community : community size range, default
        ``max(20, n/200)`` .. ``max(100, n/20)`` (see :func:`default_sizes`).
    seed : int; the result depends only on the arguments.
    external_rounds : int, how many times external stubs left in one community are
        matched again before they are dropped.

    Returns
    -------
    adj : scipy.sparse.csr_matrix (n, n) float32, symmetric, ones, no self loops,
        sorted indices, every node with degree >= 1.
    labels : int64 (n,), the community of each node, 0 .. C-1.
    """
    if n < 4:
        raise ValueError(f"n: expected >= 4 nodes, got {n}")
    if not 0.0 <= mu < 1.0:
        raise ValueError(f"mu: expected a fraction in [0, 1), got {mu}")
    d_min, d_max, d_kmax = default_sizes(n)
    s_min = int(min_community if min_community is not None else d_min)
    s_max = int(max_community if max_community is not None else d_max)
    s_max = min(s_max, n)
    s_min = min(s_min, s_max)
    if s_min < 2:
        raise ValueError(f"min_community: expected >= 2, got {s_min}")
    k_max = int(min(max_degree if max_degree is not None else d_kmax, n - 1))
    if not 1 <= avg_degree < k_max:
        raise ValueError(f"avg_degree: expected in [1, max_degree={k_max}), got {avg_degree}")
    rng = np.random.default_rng(seed)

    # 1. degrees: continuous power law on [x_min, k_max + 0.5), rounded
    x_min = _solve_x_min(avg_degree + 0.0, k_max + 0.5, degree_exponent)
    k = np.clip(np.rint(_powerlaw_sample(rng, n, x_min, k_max + 0.5, degree_exponent)), 1, k_max)
    k = k.astype(np.int64)
    # 3. external part mu*k, rounded at random (unbiased)
    mk = mu * k
    k_out = np.floor(mk).astype(np.int64)
    k_out += rng.random(n) < (mk - k_out)
    k_in = k - k_out
    # 2. + 4. communities
    sizes = _community_sizes(rng, n, s_min, s_max, community_exponent)
    labels, k_in = _assign(rng, k_in, sizes)

    # 5. internal stubs matched inside each community, external ones globally
    nodes = np.arange(n, dtype=np.int64)
    u_in, v_in = _match(rng, np.repeat(nodes, k_in), labels, n, external_rounds, internal=True)
    u_ex, v_ex = _match(rng, np.repeat(nodes, k_out), labels, n, external_rounds, internal=False)
    u = np.concatenate([u_in, u_ex])
    v = np.concatenate([v_in, v_ex])

    # 6. isolated nodes get one internal edge (self loops and duplicates are gone already)
    deg = np.bincount(np.concatenate([u, v]), minlength=n)
    lonely = np.flatnonzero(deg == 0)
    if lonely.size:
        members = np.argsort(labels, kind="stable")
        start = np.r_[0, np.cumsum(np.bincount(labels, minlength=sizes.size))]
        c = labels[lonely]
        size_c = start[c + 1] - start[c]
        where = np.empty(n, dtype=np.int64)
        where[members] = np.arange(n)
        # a random other member: one of the size_c - 1 places, skipping the node's own
        pick = start[c] + np.floor(rng.random(lonely.size) * (size_c - 1)).astype(np.int64)
        partner = members[pick + (pick >= where[lonely])]
        u = np.concatenate([u, lonely])
        v = np.concatenate([v, partner])
    rows = np.concatenate([u, v])
    cols = np.concatenate([v, u])
    adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0
    adj.sort_indices()
    return adj, labels


def mixing(adj, labels):
    """Per-node fraction of edges that leave the node's community, averaged over nodes
    (the realized mu), and the same over all edges."""
    adj = sp.csr_matrix(adj)
    rows = np.repeat(np.arange(adj.shape[0]), np.diff(adj.indptr))
    out = labels[rows] != labels[adj.indices]
    deg = np.diff(adj.indptr)
    per_node = np.bincount(rows, weights=out, minlength=adj.shape[0]) / np.maximum(deg, 1)
    return float(per_node[deg > 0].mean()), float(out.mean())


def undirected_edges(adj):
    """(E, 2) int64 array of the edges u < v of a symmetric adjacency, sorted by u then v
    (self loops dropped; an asymmetric input is symmetrized)."""
    adj = sp.csr_matrix(adj)
    upper = sp.triu(adj + adj.T, k=1, format="csr")
    upper.sort_indices()
    u = np.repeat(np.arange(upper.shape[0], dtype=np.int64), np.diff(upper.indptr))
    return np.stack([u, upper.indices.astype(np.int64)], axis=1)


def write_edgelist(path, adj):
    """Write each undirected edge once as ``u v`` (u < v, sorted by u then v); returns E."""
    edges = undirected_edges(adj)
    with open(path, "w") as f:
        for a in range(0, edges.shape[0], 1 << 16):
            f.write("".join(f"{u} {v}\n" for u, v in edges[a : a + (1 << 16)].tolist()))
    return edges.shape[0]


def write_labels(path, labels):
    """Write ``node label`` lines, node 0 .. N-1 (single-label)."""
    labels = np.asarray(labels)
    with open(path, "w") as f:
        f.write("".join(f"{i} {c}\n" for i, c in enumerate(labels.tolist())))
