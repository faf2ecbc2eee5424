r"""One forward and backward pass of Caps2NE over a batch: the functional core.

``loss_and_row_grads`` is the step written for the reader: given the parameters, a
batch of (context, target) pairs and an explicit sampled set V' with its expected
counts Q, it returns the mean loss and the gradient of every trainable table in one
form, row-sparse (``RowGrad``: the rows the batch touches), in the dtype of the
parameters (float32 for training, float64 for gradient checks).  The Python step
(training/step/python_step.py: the skip-gram term, sparse fixed features) calls it every step;
the default run executes the same arithmetic compiled whole (training/step/fused.py),
through the same per-row helpers of capsules.py, grads.py and kernels/blas.py that
the kernels below call (docs/math.md, "The step as training runs it").
``loss_and_grads`` expands the same numbers to dense arrays: the
reference form the gradient checks and the autodiff comparison read.

This module's one concern is that loss and its gradients (``loss_and_row_grads``, its
backward pass, and the dense expansion ``loss_and_grads`` with ``Grads``).  What it
reads has a module each, imported from there: the forward pass (batch_forward.py:
``forward``, ``Forward``), the tables (params.py: ``Params``, ``slot_major``,
``init_params``), fixed features (features.py: ``SparseFeatures``,
``prepare_features``), the row-sparse form (row_grad.py: ``RowGrad``, ``row_matrix``)
and the skip-gram term's plumbing (skipgram.py: ``check_skipgram``, ``skipgram_term``).

Pipeline (docs/math.md#the-whole-batch; each step names its kernel):

    rows = distinct (slot, node) of ctx     rows.share_slots
    x = X[nodes]                            gather           (G, d)
    u = squash(x)                           capsules.squash  Eq. 1
    u_hat = W_i u, once per row             blas.segment_matmul / capsules.predict_sparse  Eq. 2
    u_hat[i, p] = u_hat_rows[inv[i, p]]     capsules.gather_rows
    e = Routing(u_hat)                      capsules.route   Algorithm 1
    z = e . o + b - log Q                   capsules.output_logits
    L = mean_p softmax cross-entropy        capsules.softmax_rows   Eq. 3
    ... and back: grads.sampled_softmax_backward_rows, grads.route_backward,
    grads.gather_rows_backward (sum over the pairs sharing a row), d_W_i and d_u one
    GEMM per slot over its rows (blas.segment_matmul_tn, blas.segment_matmul;
    grads.predict_sparse_backward_cols for sparse features), grads.scatter_add_rows
    (sum over the rows of a node), grads.squash_backward.
"""

from dataclasses import dataclass

import numpy as np

from ..defaults import GRAD_MODES
from ..kernels.blas import segment_matmul, segment_matmul_tn
from . import capsules, grads
from .batch_forward import forward
from .params import slot_major
from .row_grad import RowGrad, row_matrix
from .skipgram import skipgram_term

__all__ = ["Grads", "loss_and_grads", "loss_and_row_grads"]


def loss_and_row_grads(
    params,
    ctx,
    targets,
    sampled,
    q_true,
    q_sampled,
    cfg,
    rows=None,
    u_hat_rows=None,
    key=(0, 0),
    parts=None,
):
    """The batch's mean loss and the gradient of every trainable table, row-sparse:
    what the Python step calls every step (the default run's compiled step,
    training/step/fused.py, computes the same through the same helpers).  Nothing here
    costs O(N).

    Returns ``(loss, {"W": RowGrad, "O": RowGrad, "bias": RowGrad[, "X": RowGrad]})``,
    one entry per name of ``params.trainable()``, each a RowGrad over the parameter's
    row matrix (``row_matrix``): O, the biases and a trainable X have the rows the
    batch touches (V', the targets, the context nodes); W has every row (dense
    features: each column of each W_i meets some nonzero) or, with sparse fixed
    features, the columns of each W_i the batch's nonzeros touch.

    ``rows`` / ``u_hat_rows``: the batch's index and precomputed W_i u (see
    ``forward``).  See ``loss_and_grads`` for the other arguments.

    With ``cfg.skipgram_weight`` lambda > 0 the loss and gradients are those of
    L_caps + lambda L_sg (skipgram.py; same rows); ``key`` (seed, step) keys the
    negatives' stream of its negative-sampling form.  ``parts``, a dict or None, gets
    ``"capsule"`` (L_caps) and ``"skipgram"`` (L_sg, 0.0 with the term off).
    """
    if cfg.grad_mode not in GRAD_MODES:
        raise ValueError(f"grad_mode must be one of {GRAD_MODES}, got {cfg.grad_mode!r}")
    dtype = params.O.dtype
    targets = np.asarray(targets, dtype=np.int64)
    sampled = np.asarray(sampled, dtype=np.int64)
    fw = forward(params, ctx, cfg, rows, u_hat_rows)
    e = fw.e

    # Eq. 3: logits corrected by log Q, then the per-pair softmax cross-entropy.
    log_q_true = np.log(np.asarray(q_true, dtype=dtype))
    log_q_sampled = np.log(np.asarray(q_sampled, dtype=dtype))
    z_true, z_sampled = capsules.output_logits(
        e, params.O, params.bias, targets, sampled, log_q_true, log_q_sampled
    )
    loss, d_true, d_sampled = capsules.softmax_rows(z_true, z_sampled, targets, sampled)

    out = _backward(params, fw, targets, sampled, d_true, d_sampled, cfg)
    caps = float(capsules.mean_loss(loss))
    if parts is not None:
        parts.update(capsule=caps, skipgram=0.0)
    if not getattr(cfg, "skipgram_weight", 0.0):
        return caps, out
    term = skipgram_term(params, fw, targets, sampled, log_q_true, log_q_sampled, cfg, key)
    lam = dtype.type(cfg.skipgram_weight)
    # the same rows as the capsule loss's: x_nodes; np.unique(V' and the targets)
    assert np.array_equal(term["o_rows"], out["O"].rows)
    out["X"].values += lam * term["d_x"]
    out["O"].values += lam * term["d_O"]
    out["bias"].values += lam * term["d_bias"]
    if parts is not None:
        parts["skipgram"] = term["loss"]
    return caps + float(cfg.skipgram_weight) * term["loss"], out


def _backward(params, fw, targets, sampled, d_true, d_sampled, cfg):
    """``loss_and_row_grads``' backward pass from dL/dz: back through the output layer,
    the routing, W_i u and the first squash; the RowGrads by name."""
    dtype = params.O.dtype
    e = fw.e
    # Back through the output layer, the routing, W_i u and the first squash.
    d_e, o_rows, d_O, d_bias = grads.sampled_softmax_backward_rows(
        e, params.O, targets, sampled, d_true, d_sampled
    )
    d_e = np.ascontiguousarray(d_e, dtype=dtype)
    n_slots = fw.u_hat.shape[0]
    d_u_hat = grads.route_backward(
        fw.u_hat, fw.c, fw.s, fw.e_all, d_e, cfg.scale_for(n_slots), cfg.routing_rule,
        cfg.grad_mode == "exact",
    )  # fmt: skip
    # Sum the per-pair gradients of u_hat onto the distinct (slot, node) rows.
    rws = fw.rows
    slot_ptr = rws.slot_ptr
    d_rows = grads.gather_rows_backward(d_u_hat, rws.inv, slot_ptr)
    k = d_rows.shape[1]
    if params.sparse:
        # d_W_i[:, j] = sum over the rows r holding feature j of u_rj d_u_hat_r
        cols = rws.cols
        d_W = RowGrad(cols.keys, grads.predict_sparse_backward_cols(cols, d_rows))
    else:
        # d_W_i = sum_r d_u_hat_r u_r^T over slot i's rows (one GEMM per slot)
        d_W_t = np.empty((n_slots, params.W.shape[2], k), dtype=dtype)  # (I, d, k)
        segment_matmul_tn(fw.u_rows, d_rows, slot_ptr, d_W_t)
        d_W = RowGrad.every_row(d_W_t.reshape(-1, k))
    out = {"W": d_W, "O": RowGrad(o_rows, d_O), "bias": RowGrad(o_rows, d_bias)}
    if not params.fixed_features:
        # d_u_r = W_i^T d_u_hat_r, summed over the rows of each node, then the squash
        W_t = params.W.transpose(0, 2, 1)
        if W_t.flags.c_contiguous:
            d_u_rows = segment_matmul(d_rows, W_t, slot_ptr, trans_b=True)
        else:
            d_u_rows = segment_matmul(d_rows, np.ascontiguousarray(params.W), slot_ptr)
        x = fw.x
        d_u = np.zeros_like(x)
        grads.scatter_add_rows(d_u, fw.x_of_row, d_u_rows)
        d_x = grads.squash_backward(x, d_u)
        out["X"] = RowGrad(fw.x_nodes, d_x)
    return out


@dataclass
class Grads:
    """Dense gradients, same shapes as the parameters (``X`` is None when fixed)."""

    W: np.ndarray
    O: np.ndarray
    bias: np.ndarray
    X: np.ndarray | None = None


def loss_and_grads(
    params, ctx, targets, sampled, q_true, q_sampled, cfg, grads_out=None, key=(0, 0), parts=None
):
    """Mean sampled-softmax loss over the batch and the gradient of every parameter,
    dense: the reference form the gradient checks (tests/test_grads.py, the PyTorch
    peer) and examples/one_step.py read.  Training calls ``loss_and_row_grads``, which
    this expands: the same numbers.

    params    : Params (float32 or float64; all arrays one dtype)
    ctx       : (P, I) int   context nodes, walk order
    targets   : (P,) int     target node of each pair
    sampled   : (S,) int     the sampled set V' (distinct nodes, shared by the batch)
    q_true    : (P,) float   expected count Q(t_p) of each target under the sampler
    q_sampled : (S,) float   expected count Q(s) of each sampled node
    cfg       : model_config.ModelConfig
    grads_out : Grads to write into (dense, overwritten), or None to allocate

    Returns ``(loss, grads)``, a Grads of the parameters' shapes.
    """
    if grads_out is None:
        grads_out = Grads(
            W=np.zeros_like(params.W),
            O=np.zeros_like(params.O),
            bias=np.zeros_like(params.bias),
            X=None if params.fixed_features else np.zeros_like(params.X),
        )
    loss, rg = loss_and_row_grads(
        params, ctx, targets, sampled, q_true, q_sampled, cfg, key=key, parts=parts
    )
    W_rows = slot_major(np.empty(params.W.shape, dtype=params.W.dtype))
    rg["W"].to_dense(row_matrix(W_rows))
    grads_out.W[...] = W_rows
    rg["O"].to_dense(grads_out.O)
    rg["bias"].to_dense(grads_out.bias)
    if grads_out.X is not None:
        rg["X"].to_dense(grads_out.X)
    return loss, grads_out
