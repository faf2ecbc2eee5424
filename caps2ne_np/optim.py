r"""Adam, in TensorFlow 1's form, as the authors trained (docs/math.md#adam).

    t <- t + 1
    m <- beta1 m + (1 - beta1) g
    v <- beta2 v + (1 - beta2) g^2
    lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)
    p <- p - lr_t m / (sqrt(v) + eps)

TensorFlow folds the bias correction into the step size (``lr_t``) and adds eps to
``sqrt(v)`` uncorrected; that differs slightly from the paper of Kingma and Ba,
which divides by ``sqrt(v_hat) + eps``.

Two variants (docs/math.md#adam):

* dense (``Adam.step``): every element of every parameter each step, as
  TensorFlow's dense Adam: rows a batch did not touch still decay their moments
  and keep moving along m.  Costs O(N) per step for O, the biases and x.
* row-sparse, "lazy" (``Adam.step`` with ``rows=``): only the rows the batch
  touched (V', the targets, the context nodes) update their moments and values,
  with the global step t in lr_t, as TensorFlow's LazyAdamOptimizer.  An untouched
  row keeps m and v as they were and does not move.  Costs O(rows touched).
"""

import numpy as np
from numba import njit, prange

from ._jit import kernel


# The kernels compute in the parameters' precision, as TensorFlow's float32 Adam
# does: ``c1 = 1 - beta1`` and ``c2 = 1 - beta2`` arrive in that dtype, because a
# Python literal in ``(1.0 - beta1) * g`` is a float64 and would promote the whole
# moment update to float64 (measured: half the vector width, Adam over 4.27 M
# float32 weights 3.9 -> 2.3 ms on one thread; docs/results/perf_notes.md).


@njit(inline="always", error_model="numpy")
def _adam_span(p, g, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """The Adam update of 1-D spans (a row, or a block of a flat array), in place;
    inlined into the kernels below, which take their compile options."""
    for j in range(p.shape[0]):
        gj = g[j]
        mj = beta1 * m[j] + c1 * gj
        vj = beta2 * v[j] + c2 * gj * gj
        m[j] = mj
        v[j] = vj
        p[j] -= lr_t * mj / (np.sqrt(vj) + eps)


@njit(inline="always", error_model="numpy")
def _adam_span_zero(p, m, v, lr_t, beta1, beta2, eps):
    """``_adam_span`` with g = 0: ``beta1 m + c1 * 0`` is ``beta1 m`` exactly (and
    likewise v), so the same values without the gradient terms."""
    for j in range(p.shape[0]):
        mj = beta1 * m[j]
        vj = beta2 * v[j]
        m[j] = mj
        v[j] = vj
        p[j] -= lr_t * mj / (np.sqrt(vj) + eps)


BLOCK = 4096
"""Elements per parallel block of the flat dense update (any split gives the same values)."""


@kernel(parallel=True)
def _adam_dense(param, grad, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """p -= lr_t m / (sqrt(v) + eps) after the moment updates, element-wise over flat arrays."""
    n = param.shape[0]
    for b in prange((n + BLOCK - 1) // BLOCK):
        lo, hi = b * BLOCK, min(n, (b + 1) * BLOCK)
        _adam_span(param[lo:hi], grad[lo:hi], m[lo:hi], v[lo:hi], lr_t, beta1, beta2, eps, c1, c2)


@kernel(parallel=True)
def _adam_rows(param, rows, grad, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """The Adam update of rows ``rows`` of 2-D ``param`` only (rows distinct)."""
    for r in prange(rows.shape[0]):
        row = rows[r]
        _adam_span(param[row], grad[r], m[row], v[row], lr_t, beta1, beta2, eps, c1, c2)


@kernel(parallel=True)
def _adam_dense_rowgrad(param, position, grad, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """Dense Adam over every row of 2-D ``param`` whose gradient is row-sparse: row r's
    gradient is ``grad[position[r]]`` when ``position[r] >= 0`` and zero otherwise.

    The same operations as ``_adam_dense`` on the dense gradient (a zero gradient
    still decays m and v and moves p), so the same values, without writing and
    reading an (N, k) array of mostly zeros."""
    for r in prange(param.shape[0]):
        pos = position[r]
        if pos >= 0:
            _adam_span(param[r], grad[pos], m[r], v[r], lr_t, beta1, beta2, eps, c1, c2)
        else:
            _adam_span_zero(param[r], m[r], v[r], lr_t, beta1, beta2, eps)


@kernel(parallel=True)
def adam_sparse_W(p, m, v, n_features, keys, slot_key_ptr, key_ptr, ent_row, ent_val, d_rows,
                  next_keys, next_slot_key_ptr, next_key_ptr, next_ent_row, next_ent_val,
                  next_u_hat, grad, lr_t, beta1, beta2, eps, c1, c2):
    """Dense Adam over W with sparse fixed features, fused with the sparse products on
    both sides of it: one pass over the rows of W instead of three.

    ``p``, ``m``, ``v`` (I * d, k): W stored slot-major (row i * d + j is column j of
    W_i, core.slot_major).  For every row, in memory order:

    1. its gradient, if this batch touched it: ``sum_e ent_val[e] d_rows[ent_row[e]]``
       over its entries (``keys`` etc. are this batch's core.BatchColumns, ``d_rows``
       the gradients of its distinct (slot, node) rows): what
       grads.predict_sparse_backward_cols computes, in the same order;
    2. the Adam update with that gradient, or with g = 0 (``_adam_span_zero``), as
       ``_adam_dense_rowgrad``;
    3. if the *next* batch reads the row (``next_*``: its BatchColumns), the row, now
       updated, is added into that batch's u_hat rows: capsules.predict_sparse for
       the next step, in the same order (``next_u_hat`` zeros on entry).

    Every row of W is streamed through the cache once per step by the dense update
    anyway; the products read it while it is there instead of fetching ~10k
    scattered columns again in the next forward pass, and the gradient rows are never
    stored.  Same values, bit for bit, as the three separate kernels
    (tests/test_optim.py).  Parallel over the slots, which own disjoint rows of W and
    of both batches' u_hat: the same sums on any number of threads.
    ``grad`` (I, k) scratch.
    """
    n_slots = slot_key_ptr.shape[0] - 1
    k = p.shape[1]
    for i in prange(n_slots):
        g = grad[i]
        kk, kk_end = slot_key_ptr[i], slot_key_ptr[i + 1]
        nk, nk_end = next_slot_key_ptr[i], next_slot_key_ptr[i + 1]
        for j in range(n_features):
            row = i * n_features + j
            if kk < kk_end and keys[kk] == row:
                for t in range(k):
                    g[t] = 0.0
                for e in range(key_ptr[kk], key_ptr[kk + 1]):
                    r = ent_row[e]
                    val = ent_val[e]
                    for t in range(k):
                        g[t] += val * d_rows[r, t]
                _adam_span(p[row], g, m[row], v[row], lr_t, beta1, beta2, eps, c1, c2)
                kk += 1
            else:
                _adam_span_zero(p[row], m[row], v[row], lr_t, beta1, beta2, eps)
            if nk < nk_end and next_keys[nk] == row:
                pr = p[row]
                for e in range(next_key_ptr[nk], next_key_ptr[nk + 1]):
                    r = next_ent_row[e]
                    val = next_ent_val[e]
                    for t in range(k):
                        next_u_hat[r, t] += val * pr[t]
                nk += 1


def _row_matrix(a):
    """The 2-D view whose rows lazy Adam updates: (N, rest) for a C-contiguous array;
    for W stored slot-major (core.slot_major, a transposed view of (I, d, k)) the
    (I * d, k) matrix whose row i * d + j is column j of W_i."""
    if a.flags.c_contiguous:
        return a.reshape(a.shape[0], -1)
    if a.ndim == 3 and a.transpose(0, 2, 1).flags.c_contiguous:
        return a.transpose(0, 2, 1).reshape(-1, a.shape[1])
    raise ValueError("lazy Adam needs a parameter stored contiguously")


def _flat(a):
    """A 1-D view of ``a`` in memory order (a may be a transposed view, e.g. W)."""
    flat = a.ravel(order="K")
    if not np.shares_memory(flat, a):
        raise ValueError("Adam needs parameters stored contiguously (in some axis order)")
    return flat


def _flat_like(g, p):
    """``g`` flattened in the memory order of ``p`` (copied into p's layout if needed)."""
    if g.dtype != p.dtype or g.strides != p.strides:
        g2 = np.empty_like(p)
        g2[...] = g
        g = g2
    return g.ravel(order="K")


class Adam:
    """Dense Adam over a dict of named arrays (updated in place).

    >>> opt = Adam({"W": W}, lr=1e-3)
    >>> opt.step({"W": d_W})
    """

    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.params = params
        self.lr, self.beta1, self.beta2, self.eps = float(lr), float(beta1), float(beta2), float(eps)
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0

    def lr_t(self):
        """The bias-corrected step size of the current step t."""
        return self.lr * np.sqrt(1.0 - self.beta2 ** self.t) / (1.0 - self.beta1 ** self.t)

    def step(self, grads, rows=None, dense_rows=None, fused=None):
        """One Adam step: dense for every parameter named in ``grads``; row-sparse
        (lazy) for those named in ``rows``, a dict name -> core.RowGrad (or any object
        with ``rows`` and ``values``) over a C-contiguous parameter; dense again for
        those in ``dense_rows`` (same form as ``rows``), whose gradient is zero outside
        the given rows: the result of the dense step, bit for bit, without a dense
        gradient array.  ``fused``: name -> callable(p2, m2, v2, lr_t, beta1, beta2,
        eps, c1, c2) that performs the dense update of that parameter itself (on its
        row matrix, ``_row_matrix``), e.g. ``adam_sparse_W`` with its products."""
        self.t += 1
        lr_t = self.lr_t()

        def coefs(p):                   # scalars in the parameter's own precision
            dt = p.dtype.type
            return (dt(lr_t), dt(self.beta1), dt(self.beta2), dt(self.eps),
                    dt(1) - dt(self.beta1), dt(1) - dt(self.beta2))

        for name, rg in (dense_rows or {}).items():
            p = self.params[name]
            p2, m2, v2 = _row_matrix(p), _row_matrix(self.m[name]), _row_matrix(self.v[name])
            position = np.full(p2.shape[0], -1, dtype=np.int64)
            position[rg.rows] = np.arange(len(rg.rows))
            values = np.ascontiguousarray(rg.values, dtype=p.dtype).reshape(len(rg.rows),
                                                                             p2.shape[1])
            if values.shape[0] == 0:                       # (the kernel never reads it)
                values = np.zeros((1, p2.shape[1]), dtype=p.dtype)
            _adam_dense_rowgrad.for_work(10 * p.size)(p2, position, values, m2, v2, *coefs(p))
        for name, rg in (rows or {}).items():
            p = self.params[name]
            p2, m2, v2 = _row_matrix(p), _row_matrix(self.m[name]), _row_matrix(self.v[name])
            _adam_rows.for_work(10 * len(rg.rows) * p2.shape[1])(
                p2, np.ascontiguousarray(rg.rows, dtype=np.int64),
                np.ascontiguousarray(rg.values, dtype=p.dtype).reshape(len(rg.rows), -1),
                m2, v2, *coefs(p))
        for name, update in (fused or {}).items():
            p = self.params[name]
            update(_row_matrix(p), _row_matrix(self.m[name]), _row_matrix(self.v[name]),
                   *coefs(p))
        for name, g in grads.items():
            p = self.params[name]
            _adam_dense.for_work(10 * p.size)(_flat(p), _flat_like(g, p), _flat(self.m[name]),
                                              _flat(self.v[name]), *coefs(p))

    def state(self):
        """Moments and step counter, for checkpoints."""
        out = {"t": np.int64(self.t)}
        for name in self.m:
            out[f"m_{name}"] = self.m[name]
            out[f"v_{name}"] = self.v[name]
        return out
