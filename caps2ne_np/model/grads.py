r"""Backward math of Caps2NE, derived by hand (docs/math.md).

One ``<name>_backward`` per forward function of ``capsules.py``, in the same order
and with the same symbols; ``d_<symbol>`` is dL/d<symbol>.  The loss L is the mean
over the batch's P pairs of the sampled-softmax loss (Eq. 3).

Two gradient modes for the routing (``exact`` argument of ``route_backward``;
docs/math.md#routing-backward):

* exact (default): the true gradient of L, through every routing iteration:
  the coupling coefficients c depend on u_hat through the logits b;
* stop (``exact=False``): the authors' code, where the inner iterations see
  ``tf.stop_gradient(u_hat)`` and the logits start from a constant, so c is a
  constant and the gradient flows only through ``s = sum_i c_i u_hat_i`` of the
  last iteration.
"""

import numpy as np
from numba import prange
from numba.extending import overload

from ..kernels.blas import row_matmul, row_matmul_tn
from ..kernels.jit import REASSOC, check_array, inline, kernel, out_array
from .capsules import EPS, RULE_SABOUR, rule_code
from .rows import check_columns


def squash_backward(s, d_e, d_s=None):
    """d_s = g d_e + 2 g'(|s|^2) (s . d_e) s,  g(r2) = r2 / ((1 + r2) sqrt(r2 + EPS))
    [e = g(|s|^2) s, Eq. 1; docs/math.md#squash]

    Row-wise over (n, k) arrays.  With h = 1 / ((1 + r2) sqrt(r2 + EPS)):
    g = r2 h and g' = h (1 / (1 + r2) - r2 / (2 (r2 + EPS))), finite at s = 0
    (there g' = 1/sqrt(EPS) but it multiplies s = 0, so d_s = 0).  Returns ``d_s``,
    made when None.
    """
    check_array("squash_backward: s", s, (None, None))
    check_array("squash_backward: d_e", d_e, s.shape, s.dtype)
    d_s = out_array("squash_backward: d_s", d_s, s.shape, s.dtype)
    _squash_backward(s, d_e, d_s)
    return d_s


@kernel(parallel=True, fastmath=REASSOC, work=lambda s, d_e, d_s: 6 * d_e.size)
def _squash_backward(s, d_e, d_s):
    """``squash_backward``'s kernel."""
    for r in prange(s.shape[0]):
        squash_backward_vector(s[r], d_e[r], d_s[r])


def squash_backward_vector(s, d_e, d_s):
    """``squash_backward`` for one vector: ``s``, ``d_e`` (k,) -> ``d_s`` (k,); inlined
    into the kernels that call it (``_squash_backward``, training/step/fused.py)."""
    k = s.shape[0]
    r2 = 0.0
    s_dot = 0.0
    for j in range(k):
        r2 += s[j] * s[j]
        s_dot += s[j] * d_e[j]
    h = 1.0 / ((1.0 + r2) * np.sqrt(r2 + EPS))
    g = r2 * h
    g_prime = h * (1.0 / (1.0 + r2) - 0.5 * r2 / (r2 + EPS))
    coef = 2.0 * g_prime * s_dot
    for j in range(k):
        d_s[j] = g * d_e[j] + coef * s[j]


@overload(squash_backward_vector, inline="always")
def _squash_backward_vector_in_kernels(s, d_e, d_s):
    return squash_backward_vector  # the Python function, compiled and inlined


def route_backward(u_hat, c, s, e, d_e, scale, rule, exact, d_u_hat=None):
    """Backward pass of Algorithm 1, from d_e = dL/de_v (of the last iteration) to
    d_u_hat.   [docs/math.md#routing-backward]

    Going back over the iterations r = m-1, ..., 0 of one pair, with d_b the
    gradient of the logits b^{(r+1)} that iteration r produced:

    * b^{(r+1)}_i = [b^{(r)}_i +] u_hat_i . e^{(r)}  gives
      d_e^{(r)} = sum_i d_b_i u_hat_i  and  d_u_hat_i += d_b_i e^{(r)}
      (at r = m-1, d_e^{(r)} is the incoming d_e and d_b = 0);
    * e^{(r)} = squash(s^{(r)}):  d_s = squash_backward(s^{(r)}, d_e^{(r)});
    * s^{(r)} = sum_i c_i u_hat_i:  d_u_hat_i += c_i d_s,  d_c_i = u_hat_i . d_s;
    * c = scale softmax(b^{(r)}):  d_b^{(r)}_i = c_i (d_c_i - sum_j c_j d_c_j / scale),
      plus the d_b of b^{(r+1)} itself under the Sabour rule (b^{(r+1)} = b^{(r)} + ...).

    b^{(0)} = 0 is a constant, so the recursion stops there.  With ``exact=False``
    (the authors' code) c is a constant: only the last iteration's
    ``d_u_hat_i = c_i d_s`` is kept.

    u_hat (I, P, k); c (m, P, I); s, e (m, P, k) from ``route``; d_e (P, k); the
    ``scale`` and ``rule`` of the forward pass ('paper', 'sabour' or its code); d_u_hat
    (I, P, k) out, made when None; returned.
    """
    n_slots, n_pairs, k = check_array("route_backward: u_hat", u_hat, (None, None, None)).shape
    dtype = u_hat.dtype
    m = check_array("route_backward: c", c, (None, n_pairs, n_slots), dtype).shape[0]
    check_array("route_backward: s", s, (m, n_pairs, k), dtype)
    check_array("route_backward: e", e, (m, n_pairs, k), dtype)
    check_array("route_backward: d_e", d_e, (n_pairs, k), dtype)
    d_u_hat = out_array("route_backward: d_u_hat", d_u_hat, u_hat.shape, dtype)
    _route_backward(u_hat, c, s, e, d_e, dtype.type(scale), rule_code(rule), bool(exact), d_u_hat)
    return d_u_hat


@kernel(
    parallel=True,
    fastmath=REASSOC,
    work=lambda u_hat, c, *_: 5 * c.shape[0] * u_hat.size,
)
def _route_backward(u_hat, c, s, e, d_e, scale, rule, exact, d_u_hat):
    """``route_backward``'s kernel."""
    n_slots, n_pairs, k = u_hat.shape
    # per-pair scratch, allocated once for the batch (row p is pair p's)
    d_b_all = np.zeros((n_pairs, n_slots), dtype=u_hat.dtype)
    d_c_all = np.empty((n_pairs, n_slots), dtype=u_hat.dtype)
    d_er_all = np.empty((n_pairs, k), dtype=u_hat.dtype)
    d_s_all = np.empty((n_pairs, k), dtype=u_hat.dtype)
    for p in prange(n_pairs):
        route_backward_pair(
            u_hat, c, s, e, d_e, p, scale, rule, exact, d_u_hat, d_b_all[p], d_c_all[p],
            d_er_all[p], d_s_all[p],
        )  # fmt: skip


def route_backward_pair(u_hat, c, s, e, d_e, p, scale, rule, exact, d_u_hat, d_b, d_c, d_er, d_s):
    """``route_backward`` for pair p, with its scratch d_b (I,) zeros on entry, d_c (I,),
    d_er, d_s (k,); inlined into the kernel that calls it (``_route_backward``), which
    takes its compile options."""
    n_slots = u_hat.shape[0]
    k = u_hat.shape[2]
    iters = c.shape[0]
    for i in range(n_slots):
        for j in range(k):
            d_u_hat[i, p, j] = 0.0
    for j in range(k):
        d_er[j] = d_e[p, j]
    last = iters - 1
    first = 0 if exact else last
    for r in range(last, first - 1, -1):
        if r < last:
            # b^{(r+1)}_i = [b^{(r)}_i +] u_hat_i . e^{(r)}   (loops over j contiguous)
            for j in range(k):
                d_er[j] = 0.0
            for i in range(n_slots):
                dbi = d_b[i]
                for j in range(k):
                    d_er[j] += dbi * u_hat[i, p, j]
                    d_u_hat[i, p, j] += dbi * e[r, p, j]
        squash_backward_vector(s[r, p], d_er, d_s)  # e^{(r)} = squash(s^{(r)})
        # s^{(r)} = sum_i c_i u_hat_i
        for i in range(n_slots):
            ci = c[r, p, i]
            for j in range(k):
                d_u_hat[i, p, j] += ci * d_s[j]
        if r > 0:
            for i in range(n_slots):
                acc = 0.0
                for j in range(k):
                    acc += u_hat[i, p, j] * d_s[j]
                d_c[i] = acc
            # c = scale softmax(b^{(r)})
            mean_dc = 0.0
            for i in range(n_slots):
                mean_dc += c[r, p, i] * d_c[i]
            mean_dc /= scale
            for i in range(n_slots):
                grad = c[r, p, i] * (d_c[i] - mean_dc)
                if rule == RULE_SABOUR:
                    d_b[i] = d_b[i] + grad
                else:
                    d_b[i] = grad


@overload(route_backward_pair, inline="always")
def _route_backward_pair_in_kernels(
    u_hat, c, s, e, d_e, p, scale, rule, exact, d_u_hat, d_b, d_c, d_er, d_s,
):  # fmt: skip
    return route_backward_pair  # the Python function, compiled and inlined into the calling kernel


@kernel(parallel=True, work=lambda rows, values, out: values.size)
def _scatter_rows_serial(rows, values, out):
    """out[rows[n]] += values[n], in the order n = 0, 1, ... for every column block.

    Parallel over column blocks of 16 (disjoint memory), serial over n, so the sum
    order is fixed and the result is the same on any number of threads.
    """
    n_rows, k = values.shape
    n_blocks = (k + 15) // 16
    for blk in prange(n_blocks):
        lo = blk * 16
        hi = min(k, lo + 16)
        for n in range(n_rows):
            add_row(out, rows[n], values, n, lo, hi)


@inline
def add_row(out, r, a, q, lo, hi):
    """out[r, lo:hi] += a[q, lo:hi]: one term of the sum of a gather's gradient over the
    places that read row r (``scatter_add_rows``; training/step/fused.py's d_u of a node)."""
    for j in range(lo, hi):
        out[r, j] += a[q, j]


@kernel
def scatter_scalars(rows, values, out):
    """out[rows[n]] += values[n], serially in order n = 0, 1, ..."""
    for n in range(rows.shape[0]):
        out[rows[n]] += values[n]


def scatter_add_rows(out, rows, values):
    """out[rows] += values with repeated rows summed, in a fixed order (thread-count
    invariant): the gradient of a gather (docs/math.md#prediction).  ``out`` (N, k) or
    (N,), ``rows`` (n,), ``values`` (n, k) or (n,)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    values = np.ascontiguousarray(values, dtype=out.dtype)
    if out.ndim == 1:
        scatter_scalars(rows, values, out)
    else:
        _scatter_rows_serial(rows, values, out)


@inline
def add_scaled_row(out, r, w, a, q, lo, hi):
    """out[r, lo:hi] += w a[q, lo:hi]: a target's term of the output layer's backward
    pass, d_e_p += d_z_t o_t and d_o_t += d_z_t e_p (on columns [lo, hi))."""
    for j in range(lo, hi):
        out[r, j] += w * a[q, j]


@kernel(parallel=True, work=lambda d_e, d_true, O, targets: d_e.size)
def _add_scaled_rows(d_e, d_true, O, targets):
    """d_e[p] += d_true[p] * O[targets[p]] for every pair p (in place)."""
    for p in prange(d_e.shape[0]):
        add_scaled_row(d_e, p, d_true[p], O, targets[p], 0, d_e.shape[1])


@kernel(parallel=True, work=lambda rows, w, values, out: values.size)
def _scatter_scaled_rows(rows, w, values, out):
    """out[rows[n]] += w[n] values[n], in the order n = 0, 1, ... for every block of 16
    columns (parallel over blocks: the same sums on any number of threads)."""
    n_rows, k = values.shape
    for blk in prange((k + 15) // 16):
        lo = blk * 16
        for n in range(n_rows):
            add_scaled_row(out, rows[n], w[n], values, n, lo, min(k, lo + 16))


@inline
def sampled_bias_grads(d_z, lo, hi, acc, d_b):
    """d_b_s = sum_p d_z_{p,s} for the sampled nodes s in [lo, hi): their bias gradients
    from dL/dz_s (``d_z`` (P, S)), the pairs added in order p = 0, 1, ... into the
    float64 ``acc`` (hi - lo,), each rounded once into ``d_b[s]``.  Column by column the
    sums of a serial loop; the loop over s inside vectorises without reordering any.
    ``column_sums`` and training/step/fused.py's output layer evaluate it."""
    for s in range(lo, hi):
        acc[s - lo] = 0.0
    for p in range(d_z.shape[0]):
        for s in range(lo, hi):
            acc[s - lo] += d_z[p, s]
    for s in range(lo, hi):
        d_b[s] = acc[s - lo]


@kernel(parallel=True, work=lambda a, out: a.size)
def column_sums(a, out):
    """out[j] = sum_p a[p, j] (``sampled_bias_grads``) in blocks of 16 columns, parallel
    over the blocks, each column summed in order: the same sums on any number of threads."""
    n_cols = a.shape[1]
    acc = np.empty(n_cols, dtype=np.float64)
    for blk in prange((n_cols + 15) // 16):
        lo = blk * 16
        hi = min(n_cols, lo + 16)
        sampled_bias_grads(a, lo, hi, acc[lo:hi], out)


def sampled_softmax_backward_rows(e, O, targets, sampled, d_true, d_sampled):
    """Gradients of the sampled-softmax logits with respect to e, o and the biases,
    for the rows of O the batch touches only.
    [z_t = e . o_t + b_t - log Q(t), z_s = e . o_s + b_s - log Q(s); docs/math.md#sampled-softmax]

    d_e_p = d_z_{p,t} o_{t_p} + sum_s d_z_{p,s} o_s
    d_o_t += sum_{p: t_p = t} d_z_{p,t} e_p,    d_o_s += sum_p d_z_{p,s} e_p
    d_b_t += sum_{p: t_p = t} d_z_{p,t},        d_b_s += sum_p d_z_{p,s}

    Returns ``(d_e (P, k), rows, d_O_rows (n, k), d_bias_rows (n,))`` where ``rows``
    are the distinct nodes of V' and the targets, ascending.  The sampled set holds
    distinct nodes, so its rows are added with one fancy-indexed update; targets can
    repeat and go through the fixed-order scatter.  Cost O((|V'| + P) k): nothing
    here grows with the number of nodes.
    """
    n_sampled = sampled.shape[0]
    rows, inverse = np.unique(np.concatenate([sampled, targets]), return_inverse=True)
    O_s = O[sampled]
    d_e = row_matmul(d_sampled, O_s)
    _add_scaled_rows(d_e, d_true, O, targets)
    d_O = np.zeros((rows.shape[0], O.shape[1]), dtype=O.dtype)
    d_bias = np.zeros(rows.shape[0], dtype=O.dtype)
    d_O[inverse[:n_sampled]] += row_matmul_tn(d_sampled, np.ascontiguousarray(e))
    col = np.empty(n_sampled, dtype=d_sampled.dtype)
    column_sums(d_sampled, col)
    d_bias[inverse[:n_sampled]] += col
    _scatter_scaled_rows(
        np.ascontiguousarray(inverse[n_sampled:], dtype=np.int64),
        d_true,
        np.ascontiguousarray(e),
        d_O,
    )
    scatter_add_rows(d_bias, inverse[n_sampled:], d_true)
    return d_e, rows, d_O, d_bias


def predict_sparse_backward_cols(cols, d_u_hat, values=None):
    """d_W for sparse fixed features, row-sparse: only the columns j of W_i that some
    context node of slot i has among its nonzeros.   [docs/math.md#sparse-features]

    ``values[kk]`` = sum over the entries e of key kk (``rows.BatchColumns``) of
    ``ent_val[e] * d_u_hat[ent_row[e]]``: the gradient of row ``keys[kk]`` of W stored
    slot-major, summed over the rows in ascending order, each output row written once,
    in parallel over the keys: O(nnz(x) k) per context node and nothing per untouched
    feature.

    cols : rows.BatchColumns   d_u_hat : (R, k)   values : (K, k), K = len(cols.keys),
    made when None; returned.
    """
    n_rows, k = check_array("predict_sparse_backward_cols: d_u_hat", d_u_hat, (None, None)).shape
    n_keys = cols.keys.shape[0]
    check_columns("predict_sparse_backward_cols", cols, cols.slot_key_ptr.shape[0] - 1, n_rows)
    values = out_array("predict_sparse_backward_cols: values", values, (n_keys, k), d_u_hat.dtype)
    _predict_sparse_backward_cols(cols.key_ptr, cols.ent_row, cols.ent_val, d_u_hat, values)
    return values


@kernel(
    parallel=True,
    work=lambda key_ptr, ent_row, ent_val, d_u_hat, values: ent_row.shape[0] * values.shape[1],
)
def _predict_sparse_backward_cols(key_ptr, ent_row, ent_val, d_u_hat, values):
    """``predict_sparse_backward_cols``'s kernel."""
    k = values.shape[1]
    for kk in prange(values.shape[0]):
        for j in range(k):
            values[kk, j] = 0.0
        for e in range(key_ptr[kk], key_ptr[kk + 1]):
            r = ent_row[e]
            val = ent_val[e]
            for j in range(k):
                values[kk, j] += val * d_u_hat[r, j]


def gather_rows_backward(d_out, inv, slot_ptr, d_src=None):
    """d_src[r] = sum of d_out[i, p] over the (i, p) with inv[i, p] = r: the gradient
    of ``capsules.gather_rows``.

    Rows of slot i lie in [slot_ptr[i], slot_ptr[i + 1]) (``rows.share_slots``), so
    the slots own disjoint rows: parallel over slots, pairs summed in order p = 0,
    1, ... (the same sums on any number of threads).  ``d_src`` (R, k) is
    overwritten, or made when None (R = slot_ptr[I]); returned.
    """
    n_slots, n_pairs, k = check_array(
        "gather_rows_backward: d_out", d_out, (None, None, None)
    ).shape
    check_array("gather_rows_backward: inv", inv, (n_slots, n_pairs))
    check_array("gather_rows_backward: slot_ptr", slot_ptr, (n_slots + 1,))
    n_rows = int(slot_ptr[n_slots])
    d_src = out_array("gather_rows_backward: d_src", d_src, (n_rows, k), d_out.dtype)
    if inv.size and not (0 <= inv.min() and inv.max() < n_rows):
        raise ValueError(f"gather_rows_backward: a row of inv lies outside [0, {n_rows})")
    gather_rows_backward_kernel(d_out, inv, slot_ptr, d_src)
    return d_src


@kernel(parallel=True, work=lambda d_out, inv, slot_ptr, d_src: d_out.size)
def gather_rows_backward_kernel(d_out, inv, slot_ptr, d_src):
    """``gather_rows_backward``'s kernel."""
    n_slots, n_pairs = inv.shape
    k = d_out.shape[2]
    for i in prange(n_slots):
        for r in range(slot_ptr[i], slot_ptr[i + 1]):
            for j in range(k):
                d_src[r, j] = 0.0
        for p in range(n_pairs):
            r = inv[i, p]
            for j in range(k):
                d_src[r, j] += d_out[i, p, j]
