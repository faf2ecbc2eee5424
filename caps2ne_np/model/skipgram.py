r"""The skip-gram term: each context node's input x also predicts the target's o_v.

Beyond the paper (the prototype and its measurements are in
docs/results/aux_skipgram/).  For a training pair (context u_1..u_{q-1}, target v) and
each slot i, the first-layer input x_{u_i} meets the output embedding o_v directly,
not only through the capsules.  The loss trained is

    L = L_caps + lambda * mean over the M = P (q - 1) (pair, slot) items m of l_m

with one of two forms of l_m (docs/math.md#the-skip-gram-term):

* ``negatives = 0``, the capsule loss's own sampled softmax (same V', same log-Q
  correction, accidental hits removed), logit x_u . o + b:

      z_t = x_u . o_t + b_t - log Q(t),   z_s = x_u . o_s + b_s - log Q(s)  (s in V')
      l_m = -z_t + log(exp(z_t) + sum_{s in V', s != t} exp(z_s))

  The V' logits depend on the item only through u, so they are formed once per
  distinct context node: G x |V'| dot products instead of M x |V'|.

* ``negatives = K > 0``, word2vec's negative sampling: K negatives n_1..n_K per item,
  drawn uniformly from the batch's V' (itself drawn from the run's sampler) with the
  counter-based stream (seed, TAG_SKIPGRAM, step, m) of rng.py; no log-Q correction:

      l_m = -log sigma(x_u . o_t + b_t) - sum_k log sigma(-(x_u . o_{n_k} + b_{n_k}))

  with a negative equal to the target left out (an accidental hit).

x is the trained first-layer input, so the term needs d == k (feat_dim == dim) and a
featureless graph.  ``loss_and_row_grads`` returns the term's mean loss and its
row-sparse gradients over the rows core.loss_and_row_grads already has: the distinct
context nodes for X, the distinct nodes of V' and the targets for O and the biases.

Every kernel is parallel over independent items only (distinct context nodes, pairs,
sampled nodes); each sum into a shared row runs inside one iteration in a fixed order,
so the bits are the same on any number of threads.

Each kernel has a public wrapper of the same name (as in capsules.py and grads.py) that
checks the shapes, dtypes and index ranges, makes the outputs left as None, and calls
the compiled ``_<name>``, whose decorator states its work; ``loss_and_row_grads`` calls
the wrappers.
"""

import numpy as np
from numba import prange

from ..errors import InputError
from ..kernels.blas import row_matmul, row_matmul_tn
from ..kernels.jit import REASSOC, check_array, fast_exp, kernel, out_array
from ..kernels.rng import TAG_SKIPGRAM, quiet_wraparound, rand_below, stream3
from .capsules import mean_loss
from .grads import column_sums, scatter_add_rows

# --------------------------------------------------------------------------- forward


def _check_index(name, a, n, low=0):
    """ValueError unless every entry of the integer array ``a`` lies in [low, n): an index
    out of range would make a kernel read or write memory it does not own."""
    if not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name}: expected integer indices, got dtype {a.dtype}")
    if a.size and not (low <= a.min() and a.max() < n):
        raise ValueError(f"{name}: an index lies outside [{low}, {n})")
    return a


def node_logits(Z, bias_s, log_q_s, c=None, w=None, w_sum=None):
    """z_s = x_g . o_s + b_s - log Q(s);  c_g = max_s z_s;  w_gs = exp(z_s - c_g)
    [the V' logits of the softmax form, once per distinct context node g]

    Z        (G, S)  x_g . o_s on entry (blas.row_matmul)
    bias_s   (S,)    b_s of V';  log_q_s (S,) log Q(s)
    c        (G,)    out: max_s z_s
    w        (G, S)  out: exp(z_s - c_g)
    w_sum    (G,)    out: sum_s w_gs, accidental hits included (removed per item)

    Returns ``(c, w, w_sum)``, each made when None.
    """
    G, S = check_array("node_logits: Z", Z, (None, None)).shape
    if S < 1:
        raise ValueError("node_logits: Z: expected at least one sampled node (S >= 1)")
    dtype = Z.dtype
    check_array("node_logits: bias_s", bias_s, (S,), dtype)
    check_array("node_logits: log_q_s", log_q_s, (S,), dtype)
    c = out_array("node_logits: c", c, (G,), dtype)
    w = out_array("node_logits: w", w, (G, S), dtype)
    w_sum = out_array("node_logits: w_sum", w_sum, (G,), dtype)
    _node_logits(Z, bias_s, log_q_s, c, w, w_sum)
    return c, w, w_sum


@kernel(parallel=True, fastmath=REASSOC, work=lambda Z, *_: 4 * Z.size)
def _node_logits(Z, bias_s, log_q_s, c, w, w_sum):
    """``node_logits``'s kernel."""
    G, S = Z.shape
    for g in prange(G):
        mx = Z[g, 0] + bias_s[0] - log_q_s[0]
        for j in range(S):
            z = Z[g, j] + bias_s[j] - log_q_s[j]
            w[g, j] = z
            if z > mx:
                mx = z
        c[g] = mx
        for j in range(S):
            w[g, j] = fast_exp(w[g, j] - mx)
        tot = 0.0
        for j in range(S):
            tot += w[g, j]
        w_sum[g] = tot


def _check_item_args(name, x, item_x, O, bias, targets):
    """The arguments both item losses take (``softmax_items``, ``negative_items``), checked
    with ValueError naming ``name``'s argument: ``(G, P, I, N, dtype)``."""
    G, k = check_array(f"{name}: x", x, (None, None)).shape
    dtype = x.dtype
    P, I = check_array(f"{name}: item_x", item_x, (None, None)).shape
    N = check_array(f"{name}: O", O, (None, k), dtype).shape[0]
    check_array(f"{name}: bias", bias, (N,), dtype)
    _check_index(f"{name}: item_x", item_x, G)
    _check_index(f"{name}: targets", check_array(f"{name}: targets", targets, (P,)), N)
    return G, P, I, N, dtype


def softmax_items(
    x, item_x, O, bias, targets, log_q_t, hit, c, w, w_sum, inv_m, loss=None, d_t=None, a=None
):
    """l_m = shift + log(exp(z_t - shift) + (sum_{s != t} exp(z_s - c_u)) exp(c_u - shift)) - z_t
    with z_t = x_u . o_t + b_t - log Q(t), shift = max(z_t, c_u)   [per (pair, slot) item]

    x        (G, d)   the distinct context nodes' x;  item_x (P, I) row of x of item (p, i)
    O, bias  (N, k), (N,);  targets (P,);  log_q_t (P,) log Q(t_p)
    hit      (P,)     position of t_p in V', or -1 (accidental hit)
    c, w, w_sum       from ``node_logits``
    inv_m             1 / M (the term is a mean over the M = P I items)
    loss     (P, I)   out: l_m
    d_t      (P, I)   out: dl/dz_t / M = (p_t - 1) / M
    a        (P, I)   out: exp(c_u - shift) / (total M): dl/dz_s / M = w_us a_m (s != t)

    Returns ``(loss, d_t, a)``, each made when None.
    """
    G, P, I, N, dtype = _check_item_args("softmax_items", x, item_x, O, bias, targets)
    check_array("softmax_items: log_q_t", log_q_t, (P,), dtype)
    S = check_array("softmax_items: w", w, (G, None), dtype).shape[1]
    _check_index("softmax_items: hit", check_array("softmax_items: hit", hit, (P,)), S, low=-1)
    check_array("softmax_items: c", c, (G,), dtype)
    check_array("softmax_items: w_sum", w_sum, (G,), dtype)
    loss = out_array("softmax_items: loss", loss, (P, I), dtype)
    d_t = out_array("softmax_items: d_t", d_t, (P, I), dtype)
    a = out_array("softmax_items: a", a, (P, I), dtype)
    _softmax_items(
        x, item_x, O, bias, targets, log_q_t, hit, c, w, w_sum, dtype.type(inv_m), loss, d_t, a
    )
    return loss, d_t, a


@kernel(
    parallel=True,
    fastmath=REASSOC,
    work=lambda x, item_x, *_: item_x.size * x.shape[1],
)
def _softmax_items(x, item_x, O, bias, targets, log_q_t, hit, c, w, w_sum, inv_m, loss, d_t, a):
    """``softmax_items``'s kernel."""
    P, I = item_x.shape
    k = x.shape[1]
    for p in prange(P):
        t = targets[p]
        h = hit[p]
        for i in range(I):
            g = item_x[p, i]
            dot = 0.0
            for j in range(k):
                dot += x[g, j] * O[t, j]
            z_t = dot + bias[t] - log_q_t[p]
            rest = w_sum[g]
            if h >= 0:
                rest -= w[g, h]
                if rest < 0.0:  # rounding: the hit was (nearly) all of the sum
                    rest = 0.0
            shift = max(z_t, c[g])
            scale = fast_exp(c[g] - shift)
            w_t = fast_exp(z_t - shift)
            total = w_t + rest * scale
            loss[p, i] = shift + np.log(total) - z_t
            d_t[p, i] = (w_t / total - 1.0) * inv_m
            a[p, i] = scale / total * inv_m


def softmax_node_weights(w, item_ptr, item_ids, n_slots, hit, a, D=None):
    """D_gs = w_gs (sum_{m: u_m = g} a_m) - sum_{m: u_m = g, t_m = s} w_gs a_m = dL/dz_gs
    [the softmax form's gradient of the V' logits, per distinct context node]

    item_ptr (G + 1,), item_ids (M,): the items of node g, ascending (m = p I + i)
    D        (G, S)   out, made when None; returned
    """
    G, S = check_array("softmax_node_weights: w", w, (None, None)).shape
    P, I = check_array("softmax_node_weights: a", a, (None, int(n_slots)), w.dtype).shape
    _check_items("softmax_node_weights", item_ptr, item_ids, G, P * I)
    hit = check_array("softmax_node_weights: hit", hit, (P,))
    _check_index("softmax_node_weights: hit", hit, S, low=-1)
    D = out_array("softmax_node_weights: D", D, (G, S), w.dtype)
    _softmax_node_weights(w, item_ptr, item_ids, I, hit, a, D)
    return D


def _check_items(where, item_ptr, item_ids, n_groups, n_items):
    """The checks of a grouping of ``n_items`` entries into ``n_groups`` (``group_items``):
    ptr (G + 1,) from 0 to the number of ids, ids in [0, n_items)."""
    check_array(f"{where}: item_ptr", item_ptr, (n_groups + 1,))
    n_ids = check_array(f"{where}: item_ids", item_ids, (None,)).shape[0]
    _check_index(f"{where}: item_ptr", item_ptr, n_ids + 1)
    _check_index(f"{where}: item_ids", item_ids, n_items)


@kernel(parallel=True, work=lambda w, *_: w.size)
def _softmax_node_weights(w, item_ptr, item_ids, n_slots, hit, a, D):
    """``softmax_node_weights``'s kernel."""
    G, S = w.shape
    for g in prange(G):
        total = 0.0
        for r in range(item_ptr[g], item_ptr[g + 1]):
            m = item_ids[r]
            total += a[m // n_slots, m % n_slots]
        for j in range(S):
            D[g, j] = w[g, j] * total
        for r in range(item_ptr[g], item_ptr[g + 1]):
            m = item_ids[r]
            h = hit[m // n_slots]
            if h >= 0:
                D[g, h] -= w[g, h] * a[m // n_slots, m % n_slots]


def negative_positions(seed, step, n_items, n_negatives, n_sampled, out=None):
    """out[m, j] ~ Uniform{0 .. |V'| - 1}, from the stream (seed, TAG_SKIPGRAM, step, m):
    the positions in V' of item m's K negatives.  Serial (a few thousand draws); keyed
    by the item, never by a thread.

    out  (n_items, n_negatives) int64, made when None; returned
    """
    n_items, n_negatives, n_sampled = int(n_items), int(n_negatives), int(n_sampled)
    if n_items < 0 or n_negatives < 0 or n_sampled < 1:
        raise ValueError(
            "negative_positions: expected n_items >= 0, n_negatives >= 0 and n_sampled >= 1, "
            f"got {n_items}, {n_negatives}, {n_sampled}"
        )
    out = out_array("negative_positions: out", out, (n_items, n_negatives), np.int64)
    with quiet_wraparound():  # uint64 wrap-around, when the kernels run as Python
        _negative_positions(int(seed), int(step), n_items, n_negatives, n_sampled, out)
    return out


@kernel
def _negative_positions(seed, step, n_items, n_negatives, n_sampled, out):
    """``negative_positions``'s kernel."""
    for m in range(n_items):
        state = stream3(seed, TAG_SKIPGRAM, step, m)
        for j in range(n_negatives):
            state, out[m, j] = rand_below(state, n_sampled)


def negative_items(x, item_x, O, bias, targets, sampled, neg, inv_m, loss=None, d_t=None, d_n=None):
    """l_m = -log sigma(z_t) - sum_j log sigma(-z_j),  z = x_u . o + b
    [word2vec's negative sampling, per (pair, slot) item]

    neg   (M, K)  positions in V' of each item's negatives (``negative_positions``)
    loss  (P, I)  out: l_m
    d_t   (P, I)  out: dl/dz_t / M = (sigma(z_t) - 1) / M
    d_n   (M, K)  out: dl/dz_j / M = sigma(z_j) / M; 0 where the negative is the target
    -log sigma(z) = max(-z, 0) + log(1 + exp(-|z|)), stable for any z; the K + 1 terms
    log(1 + exp(-|z|)) of an item are summed as one log of their product (each factor
    in [1, 2], so the product stays below 2^(K+1)): one log per item instead of K + 1.

    Returns ``(loss, d_t, d_n)``, each made when None.
    """
    _, P, I, N, dtype = _check_item_args("negative_items", x, item_x, O, bias, targets)
    S = check_array("negative_items: sampled", sampled, (None,)).shape[0]
    _check_index("negative_items: sampled", sampled, N)
    K = check_array("negative_items: neg", neg, (P * I, None)).shape[1]
    _check_index("negative_items: neg", neg, S)
    loss = out_array("negative_items: loss", loss, (P, I), dtype)
    d_t = out_array("negative_items: d_t", d_t, (P, I), dtype)
    d_n = out_array("negative_items: d_n", d_n, (P * I, K), dtype)
    _negative_items(x, item_x, O, bias, targets, sampled, neg, dtype.type(inv_m), loss, d_t, d_n)
    return loss, d_t, d_n


@kernel(
    parallel=True,
    fastmath=REASSOC,
    work=lambda x, item_x, O, bias, targets, sampled, neg, *_: (
        item_x.size * (neg.shape[1] + 1) * x.shape[1]
    ),
)
def _negative_items(x, item_x, O, bias, targets, sampled, neg, inv_m, loss, d_t, d_n):
    """``negative_items``'s kernel."""
    P, I = item_x.shape
    k = x.shape[1]
    K = neg.shape[1]
    for p in prange(P):
        t = targets[p]
        for i in range(I):
            g = item_x[p, i]
            m = p * I + i
            dot = 0.0
            for j in range(k):
                dot += x[g, j] * O[t, j]
            z = dot + bias[t]
            e = fast_exp(-abs(z))
            total = max(-z, 0.0)
            prod = 1.0 + e
            sig = 1.0 / (1.0 + e) if z >= 0 else e / (1.0 + e)
            d_t[p, i] = (sig - 1.0) * inv_m
            for jj in range(K):
                s = sampled[neg[m, jj]]
                if s == t:
                    d_n[m, jj] = 0.0
                    continue
                dot = 0.0
                for j in range(k):
                    dot += x[g, j] * O[s, j]
                z = dot + bias[s]
                e = fast_exp(-abs(z))
                total += max(z, 0.0)
                prod *= 1.0 + e
                sig = 1.0 / (1.0 + e) if z >= 0 else e / (1.0 + e)
                d_n[m, jj] = sig * inv_m
            loss[p, i] = total + np.log(prod)


# --------------------------------------------------------------------------- backward


def target_to_x(item_ptr, item_ids, n_slots, d_t, O, targets, d_x):
    """d_x_g += sum_{m: u_m = g} dL/dz_t,m o_{t_m}   (items of g in ascending order)

    d_x (G, k) is added to in place and returned."""
    G, k = check_array("target_to_x: d_x", d_x, (None, None)).shape
    N = check_array("target_to_x: O", O, (None, k), d_x.dtype).shape[0]
    P, I = check_array("target_to_x: d_t", d_t, (None, int(n_slots)), d_x.dtype).shape
    _check_index("target_to_x: targets", check_array("target_to_x: targets", targets, (P,)), N)
    _check_items("target_to_x", item_ptr, item_ids, G, P * I)
    _target_to_x(item_ptr, item_ids, I, d_t, O, targets, d_x)
    return d_x


@kernel(
    parallel=True,
    fastmath=REASSOC,
    work=lambda item_ptr, item_ids, n_slots, d_t, O, *_: item_ids.shape[0] * O.shape[1],
)
def _target_to_x(item_ptr, item_ids, n_slots, d_t, O, targets, d_x):
    """``target_to_x``'s kernel."""
    k = O.shape[1]
    for g in prange(item_ptr.shape[0] - 1):
        for r in range(item_ptr[g], item_ptr[g + 1]):
            m = item_ids[r]
            p = m // n_slots
            wt = d_t[p, m % n_slots]
            t = targets[p]
            for j in range(k):
                d_x[g, j] += wt * O[t, j]


def x_to_target(x, item_x, d_t, v=None, v_bias=None):
    """v_p = sum_i dL/dz_t,(p,i) x_{u_pi},  v_bias_p = sum_i dL/dz_t,(p,i)
    [pair p's gradient of o_{t_p} and b_{t_p}; scattered onto the rows afterwards]

    Returns ``(v (P, k), v_bias (P,))``, each made when None."""
    G, k = check_array("x_to_target: x", x, (None, None)).shape
    P, I = check_array("x_to_target: item_x", item_x, (None, None)).shape
    _check_index("x_to_target: item_x", item_x, G)
    check_array("x_to_target: d_t", d_t, (P, I), x.dtype)
    v = out_array("x_to_target: v", v, (P, k), x.dtype)
    v_bias = out_array("x_to_target: v_bias", v_bias, (P,), x.dtype)
    _x_to_target(x, item_x, d_t, v, v_bias)
    return v, v_bias


@kernel(parallel=True, fastmath=REASSOC, work=lambda x, item_x, *_: item_x.size * x.shape[1])
def _x_to_target(x, item_x, d_t, v, v_bias):
    """``x_to_target``'s kernel."""
    P, I = item_x.shape
    k = x.shape[1]
    for p in prange(P):
        for j in range(k):
            v[p, j] = 0.0
        vb = 0.0
        for i in range(I):
            wt = d_t[p, i]
            vb += wt
            g = item_x[p, i]
            for j in range(k):
                v[p, j] += wt * x[g, j]
        v_bias[p] = vb


def negatives_to_x(item_ptr, item_ids, neg, d_n, O, sampled, d_x):
    """d_x_g += sum_{m: u_m = g} sum_j dL/dz_j,m o_{n_j}   (negative sampling)

    d_x (G, k) is added to in place and returned."""
    G, k = check_array("negatives_to_x: d_x", d_x, (None, None)).shape
    N = check_array("negatives_to_x: O", O, (None, k), d_x.dtype).shape[0]
    M, K = check_array("negatives_to_x: neg", neg, (None, None)).shape
    check_array("negatives_to_x: d_n", d_n, (M, K), d_x.dtype)
    S = check_array("negatives_to_x: sampled", sampled, (None,)).shape[0]
    _check_index("negatives_to_x: sampled", sampled, N)
    _check_index("negatives_to_x: neg", neg, S)
    _check_items("negatives_to_x", item_ptr, item_ids, G, M)
    _negatives_to_x(item_ptr, item_ids, neg, d_n, O, sampled, d_x)
    return d_x


@kernel(
    parallel=True,
    fastmath=REASSOC,
    work=lambda item_ptr, item_ids, neg, d_n, O, *_: neg.size * O.shape[1],
)
def _negatives_to_x(item_ptr, item_ids, neg, d_n, O, sampled, d_x):
    """``negatives_to_x``'s kernel."""
    k = O.shape[1]
    K = neg.shape[1]
    for g in prange(item_ptr.shape[0] - 1):
        for r in range(item_ptr[g], item_ptr[g + 1]):
            m = item_ids[r]
            for jj in range(K):
                wn = d_n[m, jj]
                s = sampled[neg[m, jj]]
                for j in range(k):
                    d_x[g, j] += wn * O[s, j]


def negatives_to_sampled(x, item_x, neg_ptr, neg_ids, d_n, n_slots, d_O_s=None, d_b_s=None):
    """d_o_s = sum_{(m, j): n_j = s} dL/dz_j,m x_{u_m},  d_b_s likewise (negative sampling)

    neg_ptr (S + 1,), neg_ids: the entries m K + j drawing V' position s, ascending.
    Returns ``(d_O_s (S, k), d_b_s (S,))``, each made when None."""
    G, k = check_array("negatives_to_sampled: x", x, (None, None)).shape
    P, I = check_array("negatives_to_sampled: item_x", item_x, (None, int(n_slots))).shape
    _check_index("negatives_to_sampled: item_x", item_x, G)
    K = check_array("negatives_to_sampled: d_n", d_n, (P * I, None), x.dtype).shape[1]
    S = check_array("negatives_to_sampled: neg_ptr", neg_ptr, (None,)).shape[0] - 1
    _check_items("negatives_to_sampled", neg_ptr, neg_ids, S, P * I * K)
    d_O_s = out_array("negatives_to_sampled: d_O_s", d_O_s, (S, k), x.dtype)
    d_b_s = out_array("negatives_to_sampled: d_b_s", d_b_s, (S,), x.dtype)
    _negatives_to_sampled(x, item_x, neg_ptr, neg_ids, d_n, I, d_O_s, d_b_s)
    return d_O_s, d_b_s


@kernel(
    parallel=True,
    fastmath=REASSOC,
    work=lambda x, item_x, neg_ptr, neg_ids, d_n, *_: d_n.size * x.shape[1],
)
def _negatives_to_sampled(x, item_x, neg_ptr, neg_ids, d_n, n_slots, d_O_s, d_b_s):
    """``negatives_to_sampled``'s kernel."""
    K = d_n.shape[1]
    k = x.shape[1]
    for s in prange(neg_ptr.shape[0] - 1):
        for j in range(k):
            d_O_s[s, j] = 0.0
        b = 0.0
        for r in range(neg_ptr[s], neg_ptr[s + 1]):
            e = neg_ids[r]
            m = e // K
            wn = d_n[m, e % K]
            b += wn
            g = item_x[m // n_slots, m % n_slots]
            for j in range(k):
                d_O_s[s, j] += wn * x[g, j]
        d_b_s[s] = b


# --------------------------------------------------------------------------- the term


@kernel
def _counting_sort(keys, n_groups, ptr, ids):
    """ptr (G + 1,) and ids (M,): the positions of each key value, ascending (stable)."""
    ptr[:] = 0
    for m in range(keys.shape[0]):
        ptr[keys[m] + 1] += 1
    for g in range(n_groups):
        ptr[g + 1] += ptr[g]
    fill = ptr[:-1].copy()
    for m in range(keys.shape[0]):
        ids[fill[keys[m]]] = m
        fill[keys[m]] += 1


def group_items(item_x, n_groups):
    """(ptr (G + 1,), ids (M,)): the items m = p I + i of each row g of x, ascending m
    (a stable counting sort: the fixed order of every sum over a node's items)."""
    flat = np.ascontiguousarray(item_x, dtype=np.int64).reshape(-1)
    ptr = np.empty(n_groups + 1, dtype=np.int64)
    ids = np.empty(flat.shape[0], dtype=np.int64)
    _counting_sort(flat, n_groups, ptr, ids)
    return ptr, ids


def loss_and_row_grads(
    x, item_x, O, bias, targets, sampled, log_q_t, log_q_s, negatives=0, key=(0, 0)
):
    """The skip-gram term's mean loss and its gradients on the rows it touches.

    x         (G, d)  x of the batch's distinct context nodes (d == k)
    item_x    (P, I)  int64, the row of x of pair p's slot i
    O, bias   (N, k), (N,)   output embeddings and biases (N: the rows the caller holds)
    targets   (P,) int64;  sampled (S,) int64: V' (distinct)
    log_q_t   (P,), log_q_s (S,): log of the expected counts Q (softmax form only)
    negatives 0: the sampled softmax over V'; K > 0: K negatives per item from V'
    key       (seed, step) of the negatives' stream (negative sampling only)

    Returns ``(loss, d_x (G, d), o_rows, d_O (n, k), d_bias (n,))`` where ``o_rows`` are
    the distinct nodes of V' and the targets, ascending (the rows of
    grads.sampled_softmax_backward_rows), and every gradient is of the mean over items.
    """
    dtype = O.dtype
    x = np.ascontiguousarray(x, dtype=dtype)
    item_x = np.ascontiguousarray(item_x, dtype=np.int64)
    P, I = item_x.shape
    G, k = x.shape
    S = sampled.shape[0]
    M = P * I
    inv_m = dtype.type(1.0 / M)
    o_rows, inverse = np.unique(np.concatenate([sampled, targets]), return_inverse=True)
    item_ptr, item_ids = group_items(item_x, G)
    loss = np.empty((P, I), dtype=dtype)
    d_t = np.empty((P, I), dtype=dtype)
    if negatives == 0:
        O_s = np.ascontiguousarray(O[sampled])
        hit = _hit_positions(targets, sampled)
        Z = row_matmul(x, O_s, trans_b=True)  # (G, S)
        c, w, w_sum = node_logits(Z, np.ascontiguousarray(bias[sampled]), log_q_s.astype(dtype))
        log_q_t = log_q_t.astype(dtype)
        a = np.empty((P, I), dtype=dtype)
        softmax_items(x, item_x, O, bias, targets, log_q_t, hit, c, w, w_sum, inv_m, loss, d_t, a)
        D = softmax_node_weights(w, item_ptr, item_ids, I, hit, a)
        d_x = row_matmul(D, O_s)  # sum_s D_gs o_s
        d_O_s = row_matmul_tn(D, x)  # sum_g D_gs x_g
        d_b_s = np.empty(S, dtype=dtype)
        column_sums(D, d_b_s)
    else:
        K = int(negatives)
        neg = negative_positions(key[0], key[1], M, K, S)
        d_n = np.empty((M, K), dtype=dtype)
        negative_items(x, item_x, O, bias, targets, sampled, neg, inv_m, loss, d_t, d_n)
        d_x = negatives_to_x(item_ptr, item_ids, neg, d_n, O, sampled, np.zeros((G, k), dtype))
        neg_ptr, neg_ids = group_items(neg, S)
        d_O_s, d_b_s = negatives_to_sampled(x, item_x, neg_ptr, neg_ids, d_n, I)
    target_to_x(item_ptr, item_ids, I, d_t, O, targets, d_x)
    v, v_bias = x_to_target(x, item_x, d_t)
    d_O = np.zeros((o_rows.shape[0], k), dtype=dtype)
    d_bias = np.zeros(o_rows.shape[0], dtype=dtype)
    d_O[inverse[:S]] += d_O_s  # V' holds distinct nodes
    d_bias[inverse[:S]] += d_b_s
    scatter_add_rows(d_O, inverse[S:], v)
    scatter_add_rows(d_bias, inverse[S:], v_bias)
    return float(mean_loss(loss.reshape(-1))), d_x, o_rows, d_O, d_bias


def _hit_positions(targets, sampled):
    """(P,) int64: the position of each target in V', or -1."""
    order = np.argsort(sampled, kind="stable")
    pos = np.minimum(np.searchsorted(sampled[order], targets), sampled.shape[0] - 1)
    return np.where(sampled[order][pos] == targets, order[pos], -1).astype(np.int64)


# --------------------------------------------------------------------------- in the capsule step


def check_skipgram(params_like, cfg):
    """Raise InputError (one line) when the skip-gram term cannot apply: it needs a
    trained x (no fixed features) of the embedding's size (feat_dim == dim).
    ``params_like``: (fixed_features, feat_dim, dim)."""
    fixed, feat_dim, dim = params_like
    if not cfg.skipgram_weight:
        return
    if fixed:
        raise InputError(
            "--skipgram-weight: the skip-gram term trains x, so it needs a featureless "
            "graph (no --features); use --skipgram-weight 0 with fixed features"
        )
    if feat_dim != dim:
        raise InputError(
            f"--skipgram-weight: the skip-gram term needs --feat-dim equal to --dim "
            f"(x_u . o_v), got feat-dim {feat_dim} and dim {dim}"
        )


def skipgram_term(params, fw, targets, sampled, log_q_true, log_q_sampled, cfg, key):
    """The skip-gram term (``loss_and_row_grads``) on the capsule forward pass's rows
    (``fw``, batch_forward.Forward): what core.loss_and_row_grads adds, times lambda."""
    check_skipgram((params.fixed_features, params.X.shape[1], params.O.shape[1]), cfg)
    rws = fw.rows
    item_x = np.ascontiguousarray(fw.x_of_row[rws.inv].T)  # (P, I)
    loss, d_x, o_rows, d_O, d_bias = loss_and_row_grads(
        fw.x,
        item_x,
        params.O,
        params.bias,
        targets,
        sampled,
        log_q_true,
        log_q_sampled,
        negatives=int(cfg.skipgram_negatives),
        key=key,
    )
    return dict(loss=loss, d_x=d_x, o_rows=o_rows, d_O=d_O, d_bias=d_bias)
