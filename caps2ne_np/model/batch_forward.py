"""A batch's forward pass up to the second capsule (``forward``): x, u = squash(x),
u_hat = W_i u once per distinct (slot, node) row, the routing; its intermediates
(``Forward``) for the backward pass (core.py)."""

from dataclasses import dataclass, replace

import numpy as np

from ..kernels.blas import segment_matmul
from . import capsules
from .rows import batch_columns, batch_rows


@dataclass
class Forward:
    """The forward pass's intermediates (``forward``), for the backward pass.

    rows       BatchRows     the batch's distinct (slot, node) rows (rows.share_slots);
                             ``rows.ctx_t`` (I, P) are the contexts slot-major
    u_hat_rows (R, k)        W_i u of each distinct row
    u_hat      (I, P, k)     their expansion to every (slot, pair)
    c, s, e_all (m, P, .)    coupling coefficients, s_v and e_v of every routing iteration
    e          (P, k)        the second capsule, ``e_all[m - 1]``
    x, u       (G, d)        dense features: the distinct nodes' x and u = squash(x)
    x_nodes    (G,)          their sorted node ids; row r reads node ``x_of_row[r]``
    x_of_row   (R,)
    u_rows     (R, d)        ``u[x_of_row]``

    With sparse (fixed) features u = squash(x) is precomputed and the last five are None.
    """

    rows: object
    u_hat_rows: np.ndarray
    u_hat: np.ndarray
    c: np.ndarray
    s: np.ndarray
    e_all: np.ndarray
    x: np.ndarray | None = None
    u: np.ndarray | None = None
    x_nodes: np.ndarray | None = None
    x_of_row: np.ndarray | None = None
    u_rows: np.ndarray | None = None

    @property
    def e(self):
        return self.e_all[self.e_all.shape[0] - 1]


def forward(params, ctx, cfg, rows=None, u_hat_rows=None):
    """Forward pass up to the second capsule: returns its intermediates (``Forward``).

    ctx        : (P, I) int  context nodes of each pair in walk order (slot i uses W_i)
    rows       : the batch's BatchRows (rows.batch_rows), or None to make them here
    u_hat_rows : (R, k) W_i u of those rows, already computed (step.FusedSparseW), or
                 None to compute them here

    ``u_hat`` is computed once per distinct (slot, node) row (rows.share_slots):
    ``rows`` holds the bookkeeping, ``u_hat_rows`` the distinct predictions and
    ``u_hat`` (I, P, k) their expansion to every pair.
    """
    dtype = params.W.dtype
    features = params.X if params.sparse else None
    if rows is None:
        rows = batch_rows(ctx, params.X.shape[0], features)
    elif features is not None and rows.cols is None:
        rows = replace(rows, cols=batch_columns(features, rows.nodes, rows.slot_ptr))
    nodes, slot_ptr, inv = rows.nodes, rows.slot_ptr, rows.inv
    n_slots = rows.ctx_t.shape[0]
    W_t = params.W.transpose(0, 2, 1)  # (I, d, k)
    dense = {}
    if u_hat_rows is not None:
        pass
    elif params.sparse:
        # u = squash(x) is precomputed (fixed features); u_hat_i = W_i u in O(nnz k)
        W_t = np.ascontiguousarray(W_t)  # no copy if slot_major
        cols = rows.cols
        u_hat_rows = np.zeros((nodes.shape[0], W_t.shape[2]), dtype=dtype)
        capsules.predict_sparse(cols, W_t, u_hat_rows)
    else:
        # squash each distinct node once, then one GEMM per slot over its rows
        x_nodes, x_of_row = np.unique(nodes, return_inverse=True)
        x = params.X[x_nodes]  # (G, d)
        u = capsules.squash(x)
        u_rows = u[x_of_row]  # (R, d)
        dense = dict(x=x, u=u, x_nodes=x_nodes, x_of_row=x_of_row, u_rows=u_rows)
        if W_t.flags.c_contiguous:  # slot_major storage
            u_hat_rows = segment_matmul(u_rows, W_t, slot_ptr)
        else:
            u_hat_rows = segment_matmul(
                u_rows, np.ascontiguousarray(params.W), slot_ptr, trans_b=True
            )
    u_hat = capsules.gather_rows(u_hat_rows, inv)
    c, s, e = capsules.route(u_hat, cfg.routing_iters, cfg.scale_for(n_slots), cfg.routing_rule)
    return Forward(rows, u_hat_rows, u_hat, c, s, e, **dense)
