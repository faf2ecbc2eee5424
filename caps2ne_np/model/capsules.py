r"""Forward math of Caps2NE (Nguyen et al., CIKM 2020, section 2; docs/math.md).

Symbols (paper -> code), for a batch of P (context, target) pairs taken from walks
of length q, with I = q - 1 context slots per pair:

====================  ===========  ==============  ==========================================
paper                 code         shape           meaning
====================  ===========  ==============  ==========================================
x_{v_i}               ``x``        (I, P, d)       feature vector of the context node in slot i
u^{(i)}               ``u``        (I, P, d)       first capsule layer, ``squash(x)``       (Eq. 1)
W_i                   ``W``        (I, k, d)       one matrix per context slot i
\hat u^{(i)}          ``u_hat``    (I, P, k)       ``W_i u^{(i)}``                          (Eq. 2)
b_i, c = softmax(b)   ``b``, ``c`` (m, P, I)       routing logits / coupling coefficients   (Alg. 1)
s_v                   ``s``        (m, P, k)       ``sum_i c_i \hat u^{(i)}``               (Eq. 2)
e_v                   ``e``        (P, k)          second capsule, ``squash(s_v)``          (Eq. 2)
o_v                   ``O``        (N, k)          output embeddings = the node embeddings  (Eq. 3)
V', Q                 ``sampled``  (S,)            sampled nodes, expected counts           (Eq. 3)
====================  ===========  ==============  ==========================================

Arrays are *position-major*: slot i of every pair is contiguous.  Training computes
``W_i u`` once per distinct (slot, node) row of a batch (``rows.share_slots``): one
matrix product (BLAS) per slot over that slot's rows (``blas.segment_matmul``, called
from ``batch_forward.forward``), or ``predict_sparse`` for sparse features; ``gather_rows``
expands the rows to every (slot, pair).  Everything that is not a matrix product
(squash, routing, the softmax rows) is a Numba kernel with ``prange`` over rows or
pairs.  Every function here works in float32 (training) and float64 (gradient
checks); the matching backward functions are in ``grads.py``, with the same names
plus ``_backward``.

Departures from the paper, all following the authors' code (daiquocnguyen/Caps2NE):

* the squash divides by ``sqrt(|s|^2 + 1e-9)`` rather than ``|s|``, so it is
  finite (and zero) at the zero vector;
* the coupling coefficients are ``c = scale * softmax(b)`` with ``scale = q - 1``
  by default, so that one routing iteration gives ``c_i = 1`` (``scale = 1`` is
  the paper's plain softmax);
* the output layer has a bias per node, as TensorFlow's ``sampled_softmax_loss``.
"""

import numpy as np
from numba import prange
from numba.extending import overload

from ..kernels.blas import row_matmul
from ..kernels.jit import REASSOC, check_array, fast_exp, inline, kernel, out_array
from .rows import check_columns

EPS = 1e-9
"""The epsilon inside the squash's square root (authors' code)."""

RULE_PAPER = 0
"""Routing update ``b_i = u_hat_i . e`` (the paper's Algorithm 1, default)."""
RULE_SABOUR = 1
"""Routing update ``b_i = b_i + u_hat_i . e`` (Sabour et al., 2017)."""

ROUTING_RULES = {"paper": RULE_PAPER, "sabour": RULE_SABOUR}
"""Kernel code of each rule name (the names, and the option's choices, are defaults.ROUTING_RULES;
tests/test_defaults.py keeps the two in step)."""


def squash(s, out=None):
    """e = g(|s|^2) s,  g(r2) = r2 / ((1 + r2) sqrt(r2 + EPS))   [Eq. 1; docs/math.md#squash]

    Row-wise over a 2-D array ``s`` of shape (n, k); writes ``out`` (same shape and
    dtype; made when None) and returns it.  With EPS = 1e-9 (authors' code) the squash
    of the zero vector is zero.
    """
    check_array("squash: s", s, (None, None))
    out = np.empty_like(s) if out is None else check_array("squash: out", out, s.shape, s.dtype)
    _squash(s, out)
    return out


@kernel(parallel=True, fastmath=REASSOC, work=lambda s, out: 4 * s.size)
def _squash(s, out):
    """``squash``'s kernel."""
    for r in prange(s.shape[0]):
        squash_vector(s[r], out[r])


def squash_vector(s, out):
    """e = g(|s|^2) s for one vector ``s`` (k,) into ``out`` (k,): Eq. 1, inlined into
    the kernels that call it (``_squash``, training/step/fused.py), which take their compile
    options."""
    r2 = 0.0
    for j in range(s.shape[0]):
        r2 += s[j] * s[j]
    g = r2 / ((1.0 + r2) * np.sqrt(r2 + EPS))
    for j in range(s.shape[0]):
        out[j] = g * s[j]


@overload(squash_vector, inline="always")
def _squash_vector_in_kernels(s, out):
    return squash_vector  # the Python function, compiled and inlined into the calling kernel


def route(u_hat, iters, scale, rule, c=None, s=None, e=None):
    """Algorithm 1: b = 0; repeat m times: c = scale softmax(b); s = sum_i c_i u_hat_i;
    e = squash(s); b_i = u_hat_i . e ('paper') or b_i += u_hat_i . e ('sabour').

    [docs/math.md#routing]

    u_hat : (I, P, k)   predictions of the first-layer capsules
    iters : m >= 1      routing iterations
    scale : float       c = scale * softmax(b); the authors' code uses q - 1
    rule  : 'paper' or 'sabour' (or its code, RULE_PAPER or RULE_SABOUR)
    c     : (m, P, I)   out: coupling coefficients of every iteration
    s     : (m, P, k)   out: s_v of every iteration
    e     : (m, P, k)   out: e_v of every iteration; ``e[m - 1]`` is the capsule output

    Returns ``(c, s, e)``, each made when None.  All iterations are kept because the
    exact backward pass needs them.  The logits are not updated after the last
    iteration (their value is unused).
    """
    n_slots, n_pairs, k = check_array("route: u_hat", u_hat, (None, None, None)).shape
    iters = int(iters)
    if iters < 1:
        raise ValueError(f"route: iters must be >= 1, got {iters}")
    dtype = u_hat.dtype
    c = out_array("route: c", c, (iters, n_pairs, n_slots), dtype)
    s = out_array("route: s", s, (iters, n_pairs, k), dtype)
    e = out_array("route: e", e, (iters, n_pairs, k), dtype)
    _route(u_hat, iters, dtype.type(scale), rule_code(rule), c, s, e)
    return c, s, e


def rule_code(rule):
    """The kernel code of a routing rule given by name ('paper', 'sabour') or code."""
    code = ROUTING_RULES.get(rule, rule) if isinstance(rule, str) else rule
    if code not in (RULE_PAPER, RULE_SABOUR):
        raise ValueError(f"routing rule must be one of {sorted(ROUTING_RULES)}, got {rule!r}")
    return int(code)


@kernel(parallel=True, fastmath=REASSOC, work=lambda u_hat, iters, *_: 3 * iters * u_hat.size)
def _route(u_hat, iters, scale, rule, c, s, e):
    """``route``'s kernel."""
    n_slots, n_pairs, k = u_hat.shape
    b_all = np.zeros((n_pairs, n_slots), dtype=u_hat.dtype)  # one allocation, not P
    for p in prange(n_pairs):
        route_pair(u_hat, p, iters, scale, rule, c, s, e, b_all[p])


def route_pair(u_hat, p, iters, scale, rule, c, s, e, b):
    """``route`` for pair p: Algorithm 1 with the logits b (I,), zeros on entry; inlined
    into the kernel that calls it (``_route``), which takes
    their compile options.  A Python function with a Numba overload, not a dispatcher
    (as the other inlined helpers here and in grads.py): a dispatcher without an
    on-disk cache would stop train._kernels_cold's scan of these modules."""
    n_slots = u_hat.shape[0]
    k = u_hat.shape[2]
    for r in range(iters):
        # c = scale * softmax(b), max-shifted for stability
        b_max = b[0]
        for i in range(1, n_slots):
            b_max = max(b_max, b[i])
        total = 0.0
        for i in range(n_slots):
            c[r, p, i] = np.exp(b[i] - b_max)
            total += c[r, p, i]
        for i in range(n_slots):
            c[r, p, i] = scale * c[r, p, i] / total
        # s = sum_i c_i u_hat_i, slot by slot (the loop over j is contiguous and vectorises)
        for j in range(k):
            s[r, p, j] = 0.0
        for i in range(n_slots):
            ci = c[r, p, i]
            for j in range(k):
                s[r, p, j] += ci * u_hat[i, p, j]
        squash_vector(s[r, p], e[r, p])  # e = squash(s)
        if r < iters - 1:
            for i in range(n_slots):
                agree = 0.0
                for j in range(k):
                    agree += u_hat[i, p, j] * e[r, p, j]
                if rule == RULE_SABOUR:
                    b[i] += agree
                else:
                    b[i] = agree


@overload(route_pair, inline="always")
def _route_pair_in_kernels(
    u_hat, p, iters, scale, rule, c, s, e, b,
):  # fmt: skip
    return route_pair  # the Python function, compiled and inlined into the calling kernel


def softmax_rows(
    logits_true, logits_sampled, targets, sampled, loss=None, d_true=None, d_sampled=None
):
    """Per pair p: loss_p = -z_t + log(exp(z_t) + sum_{s in V', s != t_p} exp(z_s))
    and its gradient with respect to the logits, divided by P (mean loss).

    [Eq. 3 as TensorFlow's sampled_softmax_loss; docs/math.md#sampled-softmax]

    logits_true    : (P,)    z_t = e . o_t + b_t - log Q(t)
    logits_sampled : (P, S)  z_s = e . o_s + b_s - log Q(s)
    targets        : (P,)    target node t_p of each pair
    sampled        : (S,)    the sampled set V' (distinct nodes)
    loss           : (P,)    out: per-pair loss
    d_true         : (P,)    out: dL/dz_t with L = mean_p loss_p
    d_sampled      : (P, S)  out: dL/dz_s (zero for accidental hits)

    Returns ``(loss, d_true, d_sampled)``, each made when None.  Accidental hits
    (s == t_p) are removed from pair p's softmax, as TensorFlow's
    ``remove_accidental_hits=True``.  The log-sum-exp is max-shifted.
    """
    n_pairs, n_sampled = check_array(
        "softmax_rows: logits_sampled", logits_sampled, (None, None)
    ).shape
    dtype = logits_sampled.dtype
    check_array("softmax_rows: logits_true", logits_true, (n_pairs,), dtype)
    check_array("softmax_rows: targets", targets, (n_pairs,))
    check_array("softmax_rows: sampled", sampled, (n_sampled,))
    loss = out_array("softmax_rows: loss", loss, (n_pairs,), dtype)
    d_true = out_array("softmax_rows: d_true", d_true, (n_pairs,), dtype)
    d_sampled = out_array("softmax_rows: d_sampled", d_sampled, (n_pairs, n_sampled), dtype)
    _softmax_rows(logits_true, logits_sampled, targets, sampled, loss, d_true, d_sampled)
    return loss, d_true, d_sampled


@kernel(parallel=True, fastmath=REASSOC, work=lambda z_t, z_s, *_: 8 * z_s.size)
def _softmax_rows(logits_true, logits_sampled, targets, sampled, loss, d_true, d_sampled):
    """``softmax_rows``'s kernel."""
    inv_p = 1.0 / logits_sampled.shape[0]
    for p in prange(logits_sampled.shape[0]):
        loss[p], d_true[p] = softmax_pair(
            logits_true[p], logits_sampled[p], targets[p], sampled, inv_p, d_sampled[p]
        )


def softmax_pair(z_t, z_s, t, sampled, inv_p, d_s):
    """One pair of ``softmax_rows``: its loss -z_t + log(exp(z_t) + sum_{s != t} exp(z_s))
    and dL/dz_t, returned, and dL/dz_s into ``d_s`` (S,) (zero for an accidental hit),
    with L the mean over the batch's pairs (``inv_p`` = 1 / P).  Inlined into the kernels
    that call it (``_softmax_rows``, training/step/fused.py)."""
    n_sampled = z_s.shape[0]
    z_max = z_t
    for j in range(n_sampled):
        if sampled[j] != t and z_s[j] > z_max:
            z_max = z_s[j]
    # one exp per logit, kept in d_s and normalised below; the exp loop has no
    # reduction in it, so it vectorises (fast_exp); the sum runs separately
    w_true = fast_exp(z_t - z_max)
    for j in range(n_sampled):
        d_s[j] = fast_exp(z_s[j] - z_max)
    total = w_true
    for j in range(n_sampled):
        if sampled[j] != t:
            total += d_s[j]
        else:
            d_s[j] = 0.0
    scale = inv_p / total
    for j in range(n_sampled):
        d_s[j] *= scale
    return z_max + np.log(total) - z_t, (w_true / total - 1.0) * inv_p


@overload(softmax_pair, inline="always")
def _softmax_pair_in_kernels(z_t, z_s, t, sampled, inv_p, d_s):
    return softmax_pair  # the Python function, compiled and inlined into the calling kernel


@kernel
def mean_loss(loss):
    """L = (1/P) sum_p loss_p: the batch's loss (Eq. 3), from the per-pair losses ``loss``
    (P,) of ``softmax_rows`` / ``softmax_pair``, the pairs added in order p = 0, 1, ...
    in float64 whatever the dtype of ``loss``; returned as a float64.  The one mean
    every driver reports: training/step/fused.py's step, core.loss_and_row_grads (and the
    skip-gram term's mean over its items, skipgram.py)."""
    total = 0.0
    for p in range(loss.shape[0]):
        total += loss[p]
    return total / loss.shape[0]


def output_logits(e, O, bias, targets, sampled, log_q_true, log_q_sampled):
    """z_t = e . o_t + b_t - log Q(t),  z_s = e . o_s + b_s - log Q(s)
    [Eq. 3; docs/math.md#sampled-softmax]

    Returns ``(logits_true (P,), logits_sampled (P, S))``.  The subtraction of the
    log expected counts is TensorFlow's ``subtract_log_q=True``.
    """
    e = np.ascontiguousarray(e)
    logits_true = np.empty(e.shape[0], dtype=e.dtype)
    _target_logits(e, O, bias, targets, log_q_true, logits_true)
    logits_sampled = row_matmul(e, O[sampled], trans_b=True)
    _add_to_rows(logits_sampled, (bias[sampled] - log_q_sampled).astype(e.dtype))
    return logits_true, logits_sampled


@kernel(parallel=True, fastmath=REASSOC, work=lambda e, *_: e.size)
def _target_logits(e, O, bias, targets, log_q_true, out):
    """out[p] = e[p] . O[targets[p]] + bias[targets[p]] - log_q_true[p]"""
    for p in prange(e.shape[0]):
        out[p] = target_logit(e, p, O, bias, targets[p], log_q_true[p])


@inline
def target_logit(e, p, O, bias, t, log_q):
    """z_t = e_p . o_t + b_t - log Q(t) of pair p and its target t (Eq. 3), the dot
    product summed in float64; ``_target_logits`` and training/step/fused.py's output layer
    evaluate it."""
    acc = 0.0
    for j in range(e.shape[1]):
        acc += e[p, j] * O[t, j]
    return acc + bias[t] - log_q


@kernel(parallel=True, work=lambda a, v: a.size)
def _add_to_rows(a, v):
    """a[p, :] += v for every row p (in place)."""
    for p in prange(a.shape[0]):
        add_to_row(a, p, v)


@inline
def add_to_row(a, p, v):
    """a[p, :] += v: the offsets b_s - log Q(s) onto pair p's sampled logits (Eq. 3)."""
    for j in range(a.shape[1]):
        a[p, j] += v[j]


@kernel(parallel=True)
def squash_csr(indptr, data, out_data):
    """u = g(|x|^2) x for every row of a CSR matrix (x given by ``indptr``, ``data``):
    the squash only rescales a row, so u keeps x's sparsity pattern.   [Eq. 1]

    Writes the values of u into ``out_data`` (same shape as ``data``).
    """
    n = indptr.shape[0] - 1
    for r in prange(n):
        r2 = 0.0
        for nz in range(indptr[r], indptr[r + 1]):
            r2 += data[nz] * data[nz]
        g = r2 / ((1.0 + r2) * np.sqrt(r2 + EPS))
        for nz in range(indptr[r], indptr[r + 1]):
            out_data[nz] = g * data[nz]


def predict_sparse(cols, W_t, u_hat):
    """u_hat^{(i)} = W_i u^{(i)} = sum_{j in nnz(u)} u_j W_i[:, j] for sparse fixed
    features: O(nnz(u) k) per context node instead of O(d k).
    [Eq. 2; docs/math.md#sparse-features]

    Column by column (``rows.batch_columns``): each touched column j of W_i is read
    once and added, scaled, to every row that has feature j.  Per row the terms
    arrive in ascending j, as in the row-wise sum.  Parallel over the slots, whose
    rows are disjoint.

    cols  : rows.BatchColumns  the batch's rows of u by column of W
    W_t   : (I, d, k)  W transposed, so that column j of W_i is contiguous
    u_hat : (R, k)     zeros on entry (a row without nonzeros stays 0), out; returned
    """
    n_slots, d, k = check_array("predict_sparse: W_t", W_t, (None, None, None)).shape
    check_array("predict_sparse: u_hat", u_hat, (None, k), W_t.dtype)
    check_columns("predict_sparse", cols, n_slots, u_hat.shape[0], d)
    _predict_sparse(
        cols.keys, cols.slot_key_ptr, cols.key_ptr, cols.ent_row, cols.ent_val, W_t, u_hat
    )
    return u_hat


@kernel(
    parallel=True,
    work=lambda keys, slot_key_ptr, key_ptr, ent_row, ent_val, W_t, u_hat: (
        ent_row.shape[0] * W_t.shape[2]
    ),
)
def _predict_sparse(keys, slot_key_ptr, key_ptr, ent_row, ent_val, W_t, u_hat):
    """``predict_sparse``'s kernel."""
    n_slots, d, k = W_t.shape
    for i in prange(n_slots):
        for kk in range(slot_key_ptr[i], slot_key_ptr[i + 1]):
            col = keys[kk] - i * d
            for e in range(key_ptr[kk], key_ptr[kk + 1]):
                r = ent_row[e]
                val = ent_val[e]
                for j in range(k):
                    u_hat[r, j] += val * W_t[i, col, j]


def gather_rows(src, inv, out=None):
    """out[i, p] = src[inv[i, p]]: expand the distinct (slot, node) rows of a batch
    (``rows.share_slots``) back to one row per (slot, pair).

    src : (R, k)   inv : (I, P) int   out : (I, P, k), made when None; returned
    """
    n_rows, k = check_array("gather_rows: src", src, (None, None)).shape
    n_slots, n_pairs = check_array("gather_rows: inv", inv, (None, None)).shape
    if inv.size and not (0 <= inv.min() and inv.max() < n_rows):
        raise ValueError(f"gather_rows: a row of inv lies outside [0, {n_rows})")
    out = out_array("gather_rows: out", out, (n_slots, n_pairs, k), src.dtype)
    _gather_rows(src, inv, out)
    return out


@kernel(parallel=True, work=lambda src, inv, out: out.size)
def _gather_rows(src, inv, out):
    """``gather_rows``'s kernel."""
    for p in prange(inv.shape[1]):
        gather_pair(src, inv, p, out)


@inline
def gather_pair(src, inv, p, out):
    """out[i, p] = src[inv[i, p]] for every slot i: pair p's rows of u_hat from the
    distinct (slot, node) rows."""
    for i in range(inv.shape[0]):
        out[i, p] = src[inv[i, p]]
