"""One training step, top to bottom: batch -> forward -> backward -> update.

    batch = stream.batch(epoch, b, step)  P pairs, V' and their expected counts Q, and
                                          its distinct (slot, node) rows (batch.py)
    loss, grads = loss_and_row_grads(...) forward and backward (core.py): every
                                          gradient row-sparse (row_grad.RowGrad)
    opt.step(grads, lazy, updates, lr)    Adam (optim.py), at the step's rate

``TrainStep`` is that step as the local engine (train.py) runs it.  Its update is one
of three strategies, chosen once:

* dense (TensorFlow's Adam, the authors'): every element of every parameter;
* lazy (``adam='lazy'``): only the rows the batch touched;
* ``FusedSparseW``, sparse fixed features with dense Adam: W's update is one pass over
  the rows of W that also forms the *next* batch's W_i u while each row is in cache,
  so the next forward pass skips its sparse product.  The same numbers, bit for bit,
  as the dense strategy (tests/test_train.py); only the memory traffic differs.
"""

import numba
import numpy as np
from numba import prange

from ...kernels import jit
from ...kernels.jit import kernel
from ...kernels.thread_layer import StepThreads
from ...model.core import loss_and_row_grads
from .optim import adam_span, adam_span_zero


class TrainStep:
    """One training step over ``params`` with the Adam ``opt``::

        loss, grads = step.gradients(batch)      # forward and backward
        step.update(grads, ahead, lr)            # Adam; ahead: the next batch or None

    Batches come indexed (``batch.rows``: batch.BatchStream with ``index=True``).
    ``lazy``: lazy Adam (touched rows only).  ``fused``: with sparse fixed features
    and dense Adam, W's update is ``FusedSparseW``, which forms the W_i u of ``ahead``
    (given to ``update`` when it is known; the local engine draws it before the
    update) for its forward pass.

    ``adaptive_threads``: each step (``gradients`` to ``update``) runs on the thread count
    ``thread_layer.StepThreads`` picks by timing steps on 1, 2, ... up to the Numba thread
    count set when the step is made, so that more threads never make a run slower;
    results do not depend on it.  False: every step on that count.
    """

    def __init__(self, params, opt, mcfg, lazy=False, fused=True, *, adaptive_threads=True):
        self.params, self.opt, self.mcfg, self.lazy = params, opt, mcfg, lazy
        self.W_update = FusedSparseW() if fused and params.sparse and not lazy else None
        self.parts = {}  # the last batch's L_caps and skip-gram term (core.loss_and_row_grads)
        n = numba.get_num_threads()
        # PAR_MIN_WORK = 0: the tests' "every kernel parallel" keeps every thread too
        rule = adaptive_threads and n > 1 and jit.PAR_MIN_WORK > 0
        self.threads = StepThreads(n) if rule else None

    def gradients(self, batch):
        """Forward and backward: ``(loss, grads)``, the batch's mean loss and the row-sparse
        gradient of every trainable table (core.loss_and_row_grads).  Starts the step's
        clock and sets its thread count (``adaptive_threads``)."""
        if self.threads is not None:
            self.threads.begin()
        return loss_and_row_grads(
            self.params,
            batch.ctx,
            batch.targets,
            batch.sampled,
            batch.q_true,
            batch.q_sampled,
            self.mcfg,
            rows=batch.rows,
            u_hat_rows=batch.u_hat_rows,
            key=batch.key,
            parts=self.parts,
        )

    def update(self, grads, ahead=None, lr=None):
        """The Adam step with ``grads`` (from ``gradients``) at rate ``lr`` (the step's,
        from the run's schedule; None: the optimizer's fixed rate).  With the fused W
        update, ``ahead`` (the next batch, indexed, or None) gets its ``u_hat_rows``.
        Ends the step's clock."""
        if self.W_update is None:
            self.opt.step(grads, lazy=self.lazy, lr=lr)
        else:
            rest = {name: g for name, g in grads.items() if name != "W"}
            W = self.W_update.bind(grads["W"], ahead, self.params)
            self.opt.step(rest, updates={"W": W}, lr=lr)
        if self.threads is not None:
            self.threads.end()


class FusedSparseW:
    """W's dense Adam update with sparse fixed features, fused with the next batch's
    sparse product u_hat = W_i u (``_adam_W_predict``): one pass over the rows of W.

    Every row of W is streamed through the cache once per step by the dense update
    anyway; the product reads each row the next batch uses while it is there, instead
    of fetching ~10k scattered columns of W again in that batch's forward pass
    (capsules.predict_sparse).  ``bind`` gives optim.Adam the update of one step as a
    callable (``Adam.step(..., updates={"W": ...})``).
    """

    def bind(self, d_W, ahead, params):
        """The update of W with the row-sparse gradient ``d_W`` (row_grad.RowGrad over W's
        row matrix, rows ``i * d + j``), filling ``ahead.u_hat_rows`` (``ahead`` indexed,
        or None)."""
        n_slots, k, n_features = params.W.shape
        dtype = params.W.dtype
        rows = np.ascontiguousarray(d_W.rows, dtype=np.int64)
        values = np.ascontiguousarray(d_W.values, dtype=dtype).reshape(rows.shape[0], k)
        slot_ptr = np.searchsorted(rows, np.arange(n_slots + 1) * n_features)
        if values.shape[0] == 0:  # (the kernel never reads it)
            values = np.zeros((1, k), dtype=dtype)
        grad = (rows, values, slot_ptr)
        if ahead is None:  # nothing to predict
            empty = np.zeros(0, dtype=np.int64)
            cols = (
                empty,
                np.zeros(n_slots + 1, dtype=np.int64),
                np.zeros(1, dtype=np.int64),
                empty,
                np.zeros(0, dtype=dtype),
            )
            u_hat = np.zeros((1, k), dtype=dtype)
        else:
            c = ahead.rows.cols
            cols = (c.keys, c.slot_key_ptr, c.key_ptr, c.ent_row, c.ent_val)
            u_hat = ahead.u_hat_rows = np.zeros((ahead.rows.nodes.shape[0], k), dtype=dtype)

        def update(p, m, v, coefs):
            _adam_W_predict(p, m, v, n_features, grad, cols, u_hat, coefs)

        return update


@kernel(parallel=True, work=lambda p, *_: 10 * p.size)
def _adam_W_predict(p, m, v, n_features, grad, cols, u_hat, coefs):
    """Dense Adam over every row of W, then u_hat += u W_i of the rows ``cols`` reads.

    p, m, v  (I * d, k)  W and its moments stored slot-major: row ``i * d + j`` is
                         column j of W_i (row_grad.row_matrix)
    grad     (rows, values, slot_ptr): W's row-sparse gradient; rows ascending, slot
             i's in ``rows[slot_ptr[i]:slot_ptr[i + 1]]``
    cols     (keys, slot_key_ptr, key_ptr, ent_row, ent_val): the next batch's
             rows.BatchColumns
    u_hat    (R, k) its W_i u rows, zeros on entry
    coefs    (lr_t, beta1, beta2, eps, 1 - beta1, 1 - beta2) in W's dtype

    For every row in memory order: the Adam update with its gradient, or with g = 0
    (optim.adam_span_zero), as optim's dense step; then, if the next batch reads the
    row, the row (now updated) times each entry's u, added into that entry's u_hat
    row: capsules.predict_sparse's sums in its order, so the same bits.  Parallel over
    the slots, which own disjoint rows of W and of u_hat: the same sums on any number
    of threads.
    """
    g_rows, g_values, g_slot_ptr = grad
    keys, slot_key_ptr, key_ptr, ent_row, ent_val = cols
    lr_t, beta1, beta2, eps, c1, c2 = coefs
    n_slots = g_slot_ptr.shape[0] - 1
    k = p.shape[1]
    for i in prange(n_slots):
        kk, kk_end = g_slot_ptr[i], g_slot_ptr[i + 1]
        nk, nk_end = slot_key_ptr[i], slot_key_ptr[i + 1]
        for j in range(n_features):
            row = i * n_features + j
            if kk < kk_end and g_rows[kk] == row:
                adam_span(p[row], g_values[kk], m[row], v[row], lr_t, beta1, beta2, eps, c1, c2)
                kk += 1
            else:
                adam_span_zero(p[row], m[row], v[row], lr_t, beta1, beta2, eps)
            if nk < nk_end and keys[nk] == row:
                pr = p[row]
                for e in range(key_ptr[nk], key_ptr[nk + 1]):
                    r = ent_row[e]
                    val = ent_val[e]
                    for t in range(k):
                        u_hat[r, t] += val * pr[t]
                nk += 1
