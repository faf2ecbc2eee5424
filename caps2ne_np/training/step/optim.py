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
* row-sparse, "lazy" (``Adam.step(..., lazy=True)``): only the rows the batch
  touched (V', the targets, the context nodes) update their moments and values,
  with the global step t in lr_t, as TensorFlow's LazyAdamOptimizer.  An untouched
  row keeps m and v as they were and does not move.  Costs O(rows touched).

Both take the gradient in one form, row-sparse (row_grad.RowGrad over the parameter's
row_grad.row_matrix); a caller may also hand over a parameter's whole update (``updates``,
e.g. step.FusedSparseW), given the step's coefficients.
"""

from collections import namedtuple

import numba
import numpy as np
from numba import njit, prange

from ...kernels.jit import kernel
from ...model.row_grad import row_matrix

# The kernels compute in the parameters' precision, as TensorFlow's float32 Adam
# does: ``c1 = 1 - beta1`` and ``c2 = 1 - beta2`` arrive in that dtype, because a
# Python literal in ``(1.0 - beta1) * g`` is a float64 and would promote the whole
# moment update to float64 (docs/benchmarks.md#adam-in-float32).


@njit(inline="always", error_model="numpy")
def adam_span(p, g, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """The Adam update of 1-D spans (a row, or a block of a flat array), in place;
    inlined into the kernels that call it (here and step.FusedSparseW's), which take
    their compile options."""
    for j in range(p.shape[0]):
        gj = g[j]
        mj = beta1 * m[j] + c1 * gj
        vj = beta2 * v[j] + c2 * gj * gj
        m[j] = mj
        v[j] = vj
        p[j] -= lr_t * mj / (np.sqrt(vj) + eps)


@njit(inline="always", error_model="numpy")
def adam_span_zero(p, m, v, lr_t, beta1, beta2, eps):
    """``adam_span`` with g = 0: ``beta1 m + c1 * 0`` is ``beta1 m`` exactly (and
    likewise v), so the same values without the gradient terms."""
    for j in range(p.shape[0]):
        mj = beta1 * m[j]
        vj = beta2 * v[j]
        m[j] = mj
        v[j] = vj
        p[j] -= lr_t * mj / (np.sqrt(vj) + eps)


AdamCoefs = namedtuple("AdamCoefs", "lr_t beta1 beta2 eps c1 c2")
"""A step's coefficients in the parameters' dtype (``Adam.coefs``, the kernels' trailing
arguments): lr_t, beta1, beta2, eps, c1 = 1 - beta1 and c2 = 1 - beta2."""


def bias_corrected(rate, t, beta1, beta2):
    """lr_t = rate sqrt(1 - beta2^t) / (1 - beta1^t): Adam's step size at step t, with
    TensorFlow's bias correction folded in (``Adam.lr_t``; training/step/fused.py's steps)."""
    return rate * np.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)


BLOCK = 4096
"""Elements per parallel block of the flat dense update (any split gives the same values)."""


@kernel(parallel=True, work=lambda param, *_: 10 * param.size)
def _adam_dense(param, grad, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """p -= lr_t m / (sqrt(v) + eps) after the moment updates, element-wise over flat arrays."""
    n = param.shape[0]
    for b in prange((n + BLOCK - 1) // BLOCK):
        lo, hi = b * BLOCK, min(n, (b + 1) * BLOCK)
        adam_span(param[lo:hi], grad[lo:hi], m[lo:hi], v[lo:hi], lr_t, beta1, beta2, eps, c1, c2)


@kernel(parallel=True, work=lambda param, rows, grad, *_: 10 * grad.size)
def _adam_rows(param, rows, grad, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """The Adam update of rows ``rows`` of 2-D ``param`` only (rows distinct)."""
    for r in prange(rows.shape[0]):
        row = rows[r]
        adam_span(param[row], grad[r], m[row], v[row], lr_t, beta1, beta2, eps, c1, c2)


@kernel(parallel=True, work=lambda param, *_: 10 * param.size)
def _adam_dense_rowgrad(param, position, grad, m, v, lr_t, beta1, beta2, eps, c1, c2):
    """Dense Adam over every row of 2-D ``param`` whose gradient is row-sparse: row r's
    gradient is ``grad[position[r]]`` when ``position[r] >= 0`` and zero otherwise.

    The same operations as ``_adam_dense`` on the dense gradient (a zero gradient
    still decays m and v and moves p), so the same values, without writing and
    reading an (N, k) array of mostly zeros."""
    for r in prange(param.shape[0]):
        pos = position[r]
        if pos >= 0:
            adam_span(param[r], grad[pos], m[r], v[r], lr_t, beta1, beta2, eps, c1, c2)
        else:
            adam_span_zero(param[r], m[r], v[r], lr_t, beta1, beta2, eps)


@kernel(parallel=True, work=lambda params, rows, grads, *_: 10 * sum(g.size for g in grads))
def _adam_tables(params, rows, grads, ms, vs, offsets, lr_t, beta1, beta2, eps, c1, c2):
    """The Adam update of rows ``rows[t]`` of every table ``params[t]``, in one parallel
    region: one fork and join per step instead of one per table.

    params, ms, vs : tuples of 2-D arrays (a parameter's row_grad.row_matrix and its moments)
    rows           : tuple of int64 (r_t,), distinct rows of each table
    grads          : tuple of (r_t, width_t) gradients
    offsets        : (T + 1,) int64, ``offsets[t] = r_0 + ... + r_{t-1}``

    Each row's update is ``adam_span``'s, element by element, as ``_adam_rows`` and
    ``_adam_dense`` (a table whose rows are all its rows): the same values, on any
    number of threads."""
    n_tables = offsets.shape[0] - 1
    for n in prange(offsets[n_tables]):
        t = 0
        while n >= offsets[t + 1]:
            t += 1
        r = n - offsets[t]
        row = rows[t][r]
        adam_span(
            params[t][row], grads[t][r], ms[t][row], vs[t][row], lr_t, beta1, beta2, eps, c1, c2
        )


class Adam:
    """Adam over a dict of named arrays (updated in place), from row-sparse gradients.

    >>> opt = Adam({"O": O}, lr=1e-3)
    >>> opt.step({"O": RowGrad(rows, d_O_rows)})             # dense: every row of O
    >>> opt.step({"O": RowGrad(rows, d_O_rows)}, lazy=True)  # the given rows only
    >>> opt.step({"O": RowGrad(rows, d_O_rows)}, lr=2e-4)    # this step's rate

    ``lr``: a fixed rate, for the steps given none; None: every step is given its
    rate.  A run's engines make it so: their rates come from the run's
    schedule.Schedule, one per step, and the optimizer keeps no copy of them.
    """

    def __init__(self, params, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        if lr is not None and not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        self.params = params
        self.lr = None if lr is None else float(lr)
        self.beta1, self.beta2 = float(beta1), float(beta2)
        self.eps = float(eps)
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0
        self.fuse = True
        """Lazy steps update every table in one kernel (``_adam_tables``); False: one
        kernel per table (``_adam_rows``, ``_adam_dense``), the same values."""

    def rate(self, lr=None):
        """The rate of a step: ``lr`` if given, else the fixed ``self.lr``."""
        if lr is None:
            if self.lr is None:
                raise ValueError("Adam: this optimizer has no fixed rate; give each step its lr")
            return self.lr
        return lr

    def lr_t(self, lr=None):
        """The bias-corrected step size of the current step t at rate ``lr``
        (``rate``)."""
        return bias_corrected(self.rate(lr), self.t, self.beta1, self.beta2)

    def coefs(self, p, lr=None):
        """The ``AdamCoefs`` of the current step at rate ``lr`` (``rate``) in the dtype
        of parameter ``p`` (the kernels' trailing arguments)."""
        return self.coefs_for(p.dtype, self.lr_t(lr))

    def coefs_for(self, dtype, lr_t):
        """``AdamCoefs`` with step size ``lr_t``, in ``dtype``."""
        dt = np.dtype(dtype).type
        return AdamCoefs(
            dt(lr_t),
            dt(self.beta1),
            dt(self.beta2),
            dt(self.eps),
            dt(1) - dt(self.beta1),
            dt(1) - dt(self.beta2),
        )

    def step(self, grads, lazy=False, updates=None, lr=None):
        """One Adam step, at rate ``lr`` (default: the fixed ``self.lr``).

        grads   : name -> row_grad.RowGrad (or any object with ``rows``, distinct and
                  ascending, and ``values``) over the rows of the parameter's
                  row_grad.row_matrix
        lazy    : False: dense, TensorFlow's Adam over every element of the named
                  parameters, g = 0 outside the given rows (bit for bit the step on
                  the dense gradient, without an (N, k) array of zeros); True: only
                  the given rows move (LazyAdam).  A gradient of every row takes one
                  pass over memory either way.
        updates : name -> callable(p, m, v, coefs) that performs the dense update of a
                  parameter itself, on the row matrices of the parameter and its
                  moments, with ``coefs`` = ``self.coefs(p, lr)``: a strategy the
                  caller owns (step.FusedSparseW); such a parameter has no gradient here.
        """
        lr = self.rate(lr)
        self.t += 1
        fused = []  # (p2, rows, values, m2, v2) of the tables _adam_tables updates
        for name, g in grads.items():
            p = self.params[name]
            p2, m2, v2 = row_matrix(p), row_matrix(self.m[name]), row_matrix(self.v[name])
            rows = np.ascontiguousarray(g.rows, dtype=np.int64)
            n_rows, width = rows.shape[0], p2.shape[1]
            values = np.ascontiguousarray(g.values, dtype=p.dtype).reshape(n_rows, width)
            if n_rows and (rows[0] < 0 or rows[-1] >= p2.shape[0]):
                raise ValueError(f"{name}: gradient rows must lie in [0, {p2.shape[0]})")
            if lazy and self.fuse and n_rows and all(a.flags.c_contiguous for a in (p2, m2, v2)):
                fused.append((p2, rows, values, m2, v2))
            elif n_rows == p2.shape[0]:  # every row: flat, in memory order
                _adam_dense(
                    p2.reshape(-1),
                    values.reshape(-1),
                    m2.reshape(-1),
                    v2.reshape(-1),
                    *self.coefs(p, lr),
                )
            elif lazy:
                _adam_rows(p2, rows, values, m2, v2, *self.coefs(p, lr))
            else:
                position = np.full(p2.shape[0], -1, dtype=np.int64)
                position[rows] = np.arange(n_rows)
                if n_rows == 0:  # (the kernel never reads it)
                    values = np.zeros((1, width), dtype=p.dtype)
                _adam_dense_rowgrad(p2, position, values, m2, v2, *self.coefs(p, lr))
        if fused:
            self._step_tables(fused, lr)
        for name, update in (updates or {}).items():
            p = self.params[name]
            m, v = row_matrix(self.m[name]), row_matrix(self.v[name])
            update(row_matrix(p), m, v, self.coefs(p, lr))

    def _step_tables(self, tables, lr):
        """The lazy update of several tables in one kernel (``_adam_tables``), grouped by
        Numba type (a tuple of arrays passed to Numba must hold one array type: dtype,
        layout, and writable or not; read-only gradients, e.g. from Ray's object store,
        are copied first)."""
        groups = {}
        for p2, rows, values, m2, v2 in tables:
            rows = rows if rows.flags.writeable else rows.copy()
            values = values if values.flags.writeable else values.copy()
            table = (p2, rows, values, m2, v2)
            groups.setdefault(tuple(numba.typeof(a) for a in table), []).append(table)
        for group in groups.values():
            offsets = np.zeros(len(group) + 1, dtype=np.int64)
            offsets[1:] = np.cumsum([t[1].shape[0] for t in group])
            p2, rows, values, m2, v2 = (tuple(t[i] for t in group) for i in range(5))
            _adam_tables(p2, rows, values, m2, v2, offsets, *self.coefs(p2[0], lr))

    def state(self):
        """Moments and step counter, for checkpoints."""
        out = {"t": np.int64(self.t)}
        for name in self.m:
            out[f"m_{name}"] = self.m[name]
            out[f"v_{name}"] = self.v[name]
        return out
