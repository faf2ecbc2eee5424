r"""One forward and backward pass of Caps2NE over a batch: the functional core.

``loss_and_grads`` is the pure function the training loop calls every step and
that anyone can check against an autodiff framework: given the parameters, a
batch of (context, target) pairs and an explicit sampled set V' with its expected
counts Q, it returns the mean loss and the gradient of every parameter, in the
dtype of the parameters (float32 for training, float64 for gradient checks).

Pipeline (docs/math.md#the-whole-batch; each step names its kernel):

    rows = distinct (slot, node) of ctx     share_slots
    x = X[nodes]                            gather           (G, d)
    u = squash(x)                           capsules.squash  Eq. 1
    u_hat = W_i u, once per row             blas.segment_matmul / capsules.predict_sparse  Eq. 2
    u_hat[i, p] = u_hat_rows[inv[i, p]]     capsules.gather_rows
    e = Routing(u_hat)                      capsules.route   Algorithm 1
    z = e . o + b - log Q                   capsules.output_logits
    L = mean_p softmax cross-entropy        capsules.softmax_rows   Eq. 3
    ... and back: grads.sampled_softmax_backward, grads.route_backward,
    grads.gather_rows_backward (sum over the pairs sharing a row), the per-slot
    products of grads.predict_backward on the rows, grads.squash_backward.
"""

import threading
from dataclasses import dataclass, field

import numpy as np
from numba import prange

from . import capsules, grads
from ._jit import kernel
from .blas import segment_matmul, segment_matmul_tn
from .capsules import ROUTING_RULES
from .defaults import GRAD_MODES


@dataclass
class SparseFeatures:
    """Fixed sparse input features x (N, d) as CSR, with u = squash(x) precomputed:
    the features never change, so neither does the first capsule layer.

    Build with ``SparseFeatures.from_scipy(matrix, dtype)``.
    """

    indptr: np.ndarray   # int64 (N + 1,)
    indices: np.ndarray  # int32 (nnz,)
    data: np.ndarray     # x values (nnz,)
    u_data: np.ndarray   # u = squash(x) values (nnz,)
    shape: tuple

    @classmethod
    def from_scipy(cls, matrix, dtype=np.float32):
        import scipy.sparse as sp

        csr = sp.csr_matrix(matrix)
        csr.sum_duplicates()
        csr.sort_indices()
        data = np.ascontiguousarray(csr.data, dtype=dtype)
        u_data = np.empty_like(data)
        indptr = np.ascontiguousarray(csr.indptr, dtype=np.int64)
        capsules.squash_csr(indptr, data, u_data)
        return cls(indptr, np.ascontiguousarray(csr.indices, dtype=np.int32), data, u_data,
                   tuple(csr.shape))

    def astype(self, dtype):
        return SparseFeatures.from_scipy(self.to_scipy(), dtype)

    def to_scipy(self):
        import scipy.sparse as sp

        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def toarray(self):
        return self.to_scipy().toarray()


@dataclass
class Params:
    """Trainable parameters (and the fixed features, if any).

    W    : (I, k, d)  one matrix per context slot, I = q - 1
    O    : (N, k)     output embeddings o_v: the node embeddings written out
    bias : (N,)       output biases of the sampled softmax
    X    : (N, d)     input features x; trainable unless ``fixed_features``;
                      fixed features may be a ``SparseFeatures`` (bag-of-words)
    """

    W: np.ndarray
    O: np.ndarray
    bias: np.ndarray
    X: np.ndarray
    fixed_features: bool = False

    def trainable(self):
        """Names of the trainable arrays, in a fixed order."""
        names = ["W", "O", "bias"]
        if not self.fixed_features:
            names.append("X")
        return names

    @property
    def sparse(self):
        """True when the (fixed) features are a SparseFeatures."""
        return isinstance(self.X, SparseFeatures)

    def astype(self, dtype):
        """A copy with every array in ``dtype``."""
        X = self.X.astype(dtype) if self.sparse else np.array(self.X, dtype=dtype)
        return Params(*(np.array(getattr(self, n), dtype=dtype) for n in ("W", "O", "bias")), X,
                      fixed_features=self.fixed_features)


def slot_major(W):
    """W (I, k, d) stored column-major per slot: a view of shape (I, k, d) over a
    contiguous (I, d, k) buffer.

    The math (and the model file) uses W_i in R^{k x d}; storing W_i^T row by row
    makes column j of W_i (the k weights of input feature j) contiguous, which the
    sparse-feature kernels read and write, and lets the dense path multiply
    ``u @ W_i^T`` as a plain GEMM.  ``Adam`` updates the buffer in memory order.
    """
    return np.ascontiguousarray(np.asarray(W).transpose(0, 2, 1)).transpose(0, 2, 1)


def init_params(n_nodes, dim, feat_dim, n_slots, rng, features=None, dtype=np.float32):
    """Initialise as the authors' code: W ~ N(0, 0.01^2); X ~ U(-sqrt(1/d), sqrt(1/d))
    when trainable; O Glorot-uniform U(-sqrt(6/(N+k)), +); biases 0.

    ``features`` (N, d) given -> fixed input features (not trained): a dense array,
    or a scipy.sparse matrix / SparseFeatures, kept sparse.
    """
    W = slot_major(rng.normal(0.0, 0.01, size=(n_slots, dim, feat_dim)).astype(dtype))
    limit = np.sqrt(6.0 / (n_nodes + dim))
    O = rng.uniform(-limit, limit, size=(n_nodes, dim)).astype(dtype)
    bias = np.zeros(n_nodes, dtype=dtype)
    if features is None:
        a = np.sqrt(1.0 / feat_dim)
        X = rng.uniform(-a, a, size=(n_nodes, feat_dim)).astype(dtype)
        return Params(W, O, bias, X, fixed_features=False)
    if isinstance(features, SparseFeatures):
        X = features if features.data.dtype == dtype else features.astype(dtype)
    elif hasattr(features, "tocsr"):
        X = SparseFeatures.from_scipy(features, dtype)
    else:
        X = np.ascontiguousarray(features, dtype=dtype)
    return Params(W, O, bias, X, fixed_features=True)


@dataclass
class ModelConfig:
    """Architecture options that change the math (not the optimisation).

    routing_iters  m, Algorithm 1 (>= 1)
    routing_rule   'paper' (b_i = u_hat_i . e) or 'sabour' (b_i += u_hat_i . e)
    routing_scale  c = scale * softmax(b); None -> q - 1 (authors' code), 1.0 = paper
    grad_mode      'exact' (true gradient) or 'stop' (c treated as constant, authors' code)
    """

    routing_iters: int = 1
    routing_rule: str = "paper"
    routing_scale: float | None = None
    grad_mode: str = "exact"

    def scale_for(self, n_slots):
        return float(n_slots) if self.routing_scale is None else float(self.routing_scale)


@dataclass
class Grads:
    """Dense gradients, same shapes as the parameters (``X`` is None when fixed)."""

    W: np.ndarray
    O: np.ndarray
    bias: np.ndarray
    X: np.ndarray | None = None
    extras: dict = field(default_factory=dict)


@kernel
def _share_slots(ctx_t, mark, nodes, inv, slot_ptr):
    """The distinct nodes of each slot, in order of first appearance (see share_slots).

    ``mark`` (>= max node + 1,) is all -1 on entry and again on exit; within slot i
    ``mark[v]`` holds v's row once v has been seen, and rows only grow, so a value
    below the slot's first row means "not seen in this slot yet"."""
    n_slots, n_pairs = ctx_t.shape
    n = 0
    for i in range(n_slots):
        slot_ptr[i] = n
        for p in range(n_pairs):
            v = ctx_t[i, p]
            if mark[v] < slot_ptr[i]:
                mark[v] = n
                nodes[n] = v
                n += 1
            inv[i, p] = mark[v]
    slot_ptr[n_slots] = n
    for r in range(n):
        mark[nodes[r]] = -1
    return n


_MARK = threading.local()


def share_slots(ctx_t):
    """Each (slot, node) combination of a batch once: ``u_hat = W_i u`` depends on
    the slot i and the node only, and pairs from one walk share most of them.

    A walk of length q with T targets yields T pairs whose contexts are the same
    walk with one node left out, so the node at walk position j sits in slot j or
    j - 1: at most 2 (q - 1) distinct rows per walk instead of T (q - 1), a 5x
    saving with every position a target (q = 10) and 3x with targets {3, 4, 5, 6}.
    Products, squashes and their gradients are computed on the distinct rows and
    expanded (``capsules.gather_rows``) or summed back (``grads.gather_rows_backward``)
    around the routing, which is per pair.

    ctx_t : (I, P) int  ->  ``(nodes (R,), slot_ptr (I + 1,), inv (I, P))``: rows
    [slot_ptr[i], slot_ptr[i + 1]) are slot i's distinct nodes in order of first
    appearance, and pair p's slot i reads row ``inv[i, p]``.
    """
    n_max = int(ctx_t.max()) + 1 if ctx_t.size else 1
    mark = getattr(_MARK, "buffer", None)
    if mark is None or mark.shape[0] < n_max:
        mark = np.full(max(n_max, 1024), -1, dtype=np.int64)
        _MARK.buffer = mark
    nodes = np.empty(ctx_t.size, dtype=np.int64)
    inv = np.empty(ctx_t.shape, dtype=np.int64)
    slot_ptr = np.empty(ctx_t.shape[0] + 1, dtype=np.int64)
    n = _share_slots(ctx_t, mark, nodes, inv, slot_ptr)
    return nodes[:n], slot_ptr, inv


@kernel(parallel=True)
def _batch_columns(indptr, indices, u_data, nodes, slot_ptr, n_features, cursor, slot_ent,
                   keys, slot_key_ptr, key_ptr, ent_row, ent_val, scratch_keys, scratch_ptr):
    """Fill the column index of ``batch_columns``; returns the number of keys K.

    Slot i's keys lie in [i d, (i + 1) d) and, keys ascending, its entries in
    [slot_ent[i], slot_ent[i + 1]) (the nonzeros of its rows, ``slot_ent`` their
    running sum): the slots share no key, cursor element or entry, so each is
    indexed on its own (in parallel); its keys and their starts go to the slot's
    part of ``scratch_keys`` / ``scratch_ptr`` (it has at most as many keys as
    entries) and are packed into ``keys`` / ``key_ptr`` at the end.
    ``cursor`` (I * d,) is all 0 on entry and again on exit."""
    n_slots = slot_ptr.shape[0] - 1
    n_slot_keys = np.zeros(n_slots, dtype=np.int64)
    for i in prange(n_slots):
        base = slot_ent[i]
        nk = 0
        for r in range(slot_ptr[i], slot_ptr[i + 1]):   # count entries per key, list keys
            row = nodes[r]
            for nz in range(indptr[row], indptr[row + 1]):
                key = i * n_features + indices[nz]
                if cursor[key] == 0:
                    scratch_keys[base + nk] = key
                    nk += 1
                cursor[key] += 1
        found = scratch_keys[base:base + nk]
        # ascending keys: sort the ones found, or scan the slot's d keys when cheaper
        if nk * 16 < n_features:
            found.sort()
        else:
            n = 0
            for key in range(i * n_features, (i + 1) * n_features):
                if cursor[key] != 0:
                    found[n] = key
                    n += 1
        start = base
        for kk in range(nk):                             # cursor[key] <- its first entry
            key = found[kk]
            scratch_ptr[base + kk] = start
            count = cursor[key]
            cursor[key] = start
            start += count
        for r in range(slot_ptr[i], slot_ptr[i + 1]):   # entries, rows ascending per key
            row = nodes[r]
            for nz in range(indptr[row], indptr[row + 1]):
                key = i * n_features + indices[nz]
                e = cursor[key]
                ent_row[e] = r
                ent_val[e] = u_data[nz]
                cursor[key] = e + 1
        for kk in range(nk):
            cursor[found[kk]] = 0
        n_slot_keys[i] = nk
    n_keys = 0
    for i in range(n_slots):
        slot_key_ptr[i] = n_keys
        n_keys += n_slot_keys[i]
    slot_key_ptr[n_slots] = n_keys
    for i in prange(n_slots):                            # pack the slots' keys
        base = slot_ent[i]
        out = slot_key_ptr[i]
        for kk in range(n_slot_keys[i]):
            keys[out + kk] = scratch_keys[base + kk]
            key_ptr[out + kk] = scratch_ptr[base + kk]
    key_ptr[n_keys] = slot_ent[n_slots]
    return n_keys


@dataclass
class BatchColumns:
    """A batch's sparse inputs by column of W (``batch_columns``).

    Key ``i * d + j`` stands for feature j at slot i, i.e. column j of W_i (row
    ``i * d + j`` of W stored slot-major); ``keys`` (K,) ascending are the ones the
    batch uses.  Entries ``key_ptr[kk]:key_ptr[kk + 1]`` of ``ent_row`` / ``ent_val``
    are the distinct (slot, node) rows holding that feature (ascending) and their
    values of u; ``slot_key_ptr`` (I + 1,) delimits each slot's keys."""

    keys: np.ndarray
    slot_key_ptr: np.ndarray
    key_ptr: np.ndarray
    ent_row: np.ndarray
    ent_val: np.ndarray


_CURSOR = threading.local()


def batch_columns(features, nodes, slot_ptr):
    """Transpose a batch's rows of u (CSR) to columns of W: each column of each W_i
    the batch touches, once, with the rows that use it.

    The sparse products then read (forward) and write (backward) each touched
    column of W once, in ascending memory order, instead of once per nonzero in
    random order: a Citeseer batch has 24k nonzeros on 11k distinct columns of a
    17 MB W, and the random reads were bound by memory latency.  Sums keep the
    order of the row-wise formulation (features ascending within a row, rows
    ascending within a column), so the results are the same bits.

    features : SparseFeatures   nodes, slot_ptr : as ``share_slots``
    """
    n_slots = slot_ptr.shape[0] - 1
    n_features = features.shape[1]
    size = n_slots * n_features
    cursor = getattr(_CURSOR, "buffer", None)
    if cursor is None or cursor.shape[0] != size:
        cursor = np.zeros(size, dtype=np.int64)
        _CURSOR.buffer = cursor
    indptr = features.indptr
    ent_end = np.zeros(nodes.shape[0] + 1, dtype=np.int64)       # entries before row r
    np.cumsum(indptr[nodes + 1] - indptr[nodes], out=ent_end[1:])
    slot_ent = ent_end[slot_ptr]
    n_ent = int(slot_ent[-1])
    keys = np.empty(max(n_ent, 1), dtype=np.int64)
    key_ptr = np.empty(n_ent + 1, dtype=np.int64)
    slot_key_ptr = np.empty(n_slots + 1, dtype=np.int64)
    ent_row = np.empty(n_ent, dtype=np.int64)
    ent_val = np.empty(n_ent, dtype=features.u_data.dtype)
    scratch_keys = np.empty(max(n_ent, 1), dtype=np.int64)
    scratch_ptr = np.empty(max(n_ent, 1), dtype=np.int64)
    n_keys = _batch_columns.for_work(64 * n_ent)(
        indptr, features.indices, features.u_data, nodes, slot_ptr, n_features, cursor,
        slot_ent, keys, slot_key_ptr, key_ptr, ent_row, ent_val, scratch_keys, scratch_ptr)
    return BatchColumns(keys[:n_keys], slot_key_ptr, key_ptr[:n_keys + 1], ent_row, ent_val)


@dataclass
class SparseBatch:
    """A batch's bookkeeping for sparse fixed features, made before its forward pass
    (``prepare_sparse_batch``), with its u_hat rows filled by the previous step's W
    update (optim.adam_sparse_W) instead of by ``capsules.predict_sparse``."""

    ctx_t: np.ndarray          # (I, P) the batch's contexts, slot-major
    rows: dict                 # nodes, slot_ptr, inv, cols as forward makes them
    u_hat_rows: np.ndarray     # (R, k) W_i u of every distinct (slot, node) row


def _slot_major_ctx(params, ctx):
    ctx_t = np.ascontiguousarray(np.asarray(ctx, dtype=np.int64).T)   # (I, P)
    if ctx_t.size and (ctx_t.min() < 0 or ctx_t.max() >= params.X.shape[0]):
        raise ValueError(f"context node ids must lie in [0, {params.X.shape[0]}), got "
                         f"[{ctx_t.min()}, {ctx_t.max()}]")       # the kernels do not check
    return ctx_t


def prepare_sparse_batch(params, ctx):
    """The distinct rows and the column index of a batch (sparse fixed features),
    with zeroed u_hat rows for the W update that computes them (see SparseBatch)."""
    ctx_t = _slot_major_ctx(params, ctx)
    nodes, slot_ptr, inv = share_slots(ctx_t)
    cols = batch_columns(params.X, nodes, slot_ptr)
    u_hat_rows = np.zeros((nodes.shape[0], params.W.shape[1]), dtype=params.W.dtype)
    return SparseBatch(ctx_t, dict(nodes=nodes, slot_ptr=slot_ptr, inv=inv, cols=cols),
                       u_hat_rows)


def forward(params, ctx, cfg, prepared=None):
    """Forward pass up to the second capsule: returns a dict of intermediates.

    ctx : (P, I) int  context nodes of each pair in walk order (slot i uses W_i)
    prepared : SparseBatch of this ctx whose u_hat rows are already computed, or None

    ``u_hat`` is computed once per distinct (slot, node) row (``share_slots``):
    ``rows`` holds its bookkeeping, ``x``/``u`` are the distinct nodes' features
    (sorted node ids ``rows["x_nodes"]``), ``u_hat_rows`` the distinct predictions
    and ``u_hat`` (I, P, k) their expansion to every pair.
    """
    dtype = params.W.dtype
    if prepared is not None:
        ctx_t, rows = prepared.ctx_t, dict(prepared.rows)
        nodes, slot_ptr, inv = rows["nodes"], rows["slot_ptr"], rows["inv"]
    else:
        ctx_t = _slot_major_ctx(params, ctx)
        nodes, slot_ptr, inv = share_slots(ctx_t)
        rows = dict(nodes=nodes, slot_ptr=slot_ptr, inv=inv)
    n_slots, n_pairs = ctx_t.shape
    W_t = params.W.transpose(0, 2, 1)                                # (I, d, k)
    if prepared is not None:
        u_hat_rows = prepared.u_hat_rows
        x = u = None
    elif params.sparse:
        # u = squash(x) is precomputed (fixed features); u_hat_i = W_i u in O(nnz k)
        sf = params.X
        W_t = np.ascontiguousarray(W_t)                               # no copy if slot_major
        cols = batch_columns(sf, nodes, slot_ptr)
        rows.update(cols=cols)
        u_hat_rows = np.zeros((nodes.shape[0], W_t.shape[2]), dtype=dtype)
        capsules.predict_sparse.for_work(cols.ent_row.shape[0] * W_t.shape[2])(
            cols.keys, cols.slot_key_ptr, cols.key_ptr, cols.ent_row, cols.ent_val, W_t,
            u_hat_rows)
        x = u = None
    else:
        # squash each distinct node once, then one GEMM per slot over its rows
        x_nodes, x_of_row = np.unique(nodes, return_inverse=True)
        x = params.X[x_nodes]                                         # (G, d)
        u = np.empty_like(x)
        capsules.squash.for_work(4 * x.size)(x, u)
        u_rows = u[x_of_row]                                          # (R, d)
        rows.update(x_nodes=x_nodes, x_of_row=x_of_row, u_rows=u_rows)
        if W_t.flags.c_contiguous:                                    # slot_major storage
            u_hat_rows = segment_matmul(u_rows, W_t, slot_ptr)
        else:
            u_hat_rows = segment_matmul(u_rows, np.ascontiguousarray(params.W), slot_ptr,
                                        trans_b=True)
    k = u_hat_rows.shape[1]
    u_hat = np.empty((n_slots, n_pairs, k), dtype=dtype)
    capsules.gather_rows.for_work(u_hat.size)(u_hat_rows, inv, u_hat)
    m = int(cfg.routing_iters)
    c = np.empty((m, n_pairs, n_slots), dtype=dtype)
    s = np.empty((m, n_pairs, k), dtype=dtype)
    e = np.empty((m, n_pairs, k), dtype=dtype)
    capsules.route.for_work(3 * m * u_hat.size)(
        u_hat, m, dtype.type(cfg.scale_for(n_slots)), ROUTING_RULES[cfg.routing_rule], c, s, e)
    return dict(ctx_t=ctx_t, rows=rows, x=x, u=u, u_hat_rows=u_hat_rows, u_hat=u_hat, c=c, s=s,
                e_all=e, e=e[m - 1])


@dataclass
class RowGrad:
    """A row-sparse gradient: ``values[r]`` is the gradient of row ``rows[r]``; every
    other row's gradient is zero.  ``rows`` are distinct and ascending."""

    rows: np.ndarray
    values: np.ndarray

    def to_dense(self, out):
        """Write into ``out`` (zeroed here)."""
        out.fill(0)
        out[self.rows] = self.values
        return out


def loss_and_row_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg, d_W_out=None,
                       row_sparse_W=False, prepared=None, W_rows_only=False):
    """The batch's mean loss, the dense gradient of W and row-sparse gradients of O,
    the biases and trainable X (only the rows the batch touches: V', the targets,
    the context nodes).  Nothing here costs O(N).

    Returns ``(loss, d_W, {"O": RowGrad, "bias": RowGrad, "X": RowGrad or None})``;
    ``d_W_out`` (same shape and layout as W) receives d_W when given.  With sparse
    fixed features and ``row_sparse_W``, d_W is None and ``row_grads["W"]`` holds the
    touched columns of each W_i instead (rows of W stored slot-major, (I * d, k)).
    With sparse features and ``W_rows_only``, W's gradient is left in the form that
    optim.adam_sparse_W consumes: ``row_grads["W"] = (BatchColumns, d_rows)``, the
    gradients of the batch's distinct (slot, node) rows.  ``prepared``: this batch's
    SparseBatch with u_hat already computed (see ``forward``).
    See ``loss_and_grads`` for the arguments.
    """
    if cfg.grad_mode not in GRAD_MODES:
        raise ValueError(f"grad_mode must be one of {GRAD_MODES}, got {cfg.grad_mode!r}")
    dtype = params.O.dtype
    targets = np.asarray(targets, dtype=np.int64)
    sampled = np.asarray(sampled, dtype=np.int64)
    fw = forward(params, ctx, cfg, prepared)
    e = fw["e"]
    n_pairs = e.shape[0]

    # Eq. 3: logits corrected by log Q, then the per-pair softmax cross-entropy.
    log_q_true = np.log(np.asarray(q_true, dtype=dtype))
    log_q_sampled = np.log(np.asarray(q_sampled, dtype=dtype))
    z_true, z_sampled = capsules.output_logits(e, params.O, params.bias, targets, sampled,
                                               log_q_true, log_q_sampled)
    loss = np.empty(n_pairs, dtype=dtype)
    d_true = np.empty(n_pairs, dtype=dtype)
    d_sampled = np.empty_like(z_sampled)
    capsules.softmax_rows.for_work(8 * z_sampled.size)(z_true, z_sampled, targets, sampled, loss,
                                                       d_true, d_sampled)

    # Back through the output layer, the routing, W_i u and the first squash.
    d_e, rows, d_O, d_bias = grads.sampled_softmax_backward_rows(
        e, params.O, targets, sampled, d_true, d_sampled)
    row_grads = {"O": RowGrad(rows, d_O), "bias": RowGrad(rows, d_bias), "X": None}
    d_e = np.ascontiguousarray(d_e, dtype=dtype)
    d_u_hat = np.empty_like(fw["u_hat"])
    n_slots = d_u_hat.shape[0]
    grads.route_backward.for_work(5 * fw["c"].shape[0] * d_u_hat.size)(
        fw["u_hat"], fw["c"], fw["s"], fw["e_all"], d_e, dtype.type(cfg.scale_for(n_slots)),
        ROUTING_RULES[cfg.routing_rule], cfg.grad_mode == "exact", d_u_hat)
    # Sum the per-pair gradients of u_hat onto the distinct (slot, node) rows.
    rws = fw["rows"]
    nodes, slot_ptr = rws["nodes"], rws["slot_ptr"]
    d_rows = np.empty_like(fw["u_hat_rows"])
    grads.gather_rows_backward.for_work(d_u_hat.size)(d_u_hat, rws["inv"], slot_ptr, d_rows)
    if params.sparse and W_rows_only:
        row_grads["W"] = (rws["cols"], d_rows)
        return float(loss.mean(dtype=np.float64)), None, row_grads
    if params.sparse and row_sparse_W:
        cols = rws["cols"]
        values = np.empty((cols.keys.shape[0], d_rows.shape[1]), dtype=dtype)
        grads.predict_sparse_backward_cols.for_work(cols.ent_row.shape[0] * d_rows.shape[1])(
            cols.key_ptr, cols.ent_row, cols.ent_val, d_rows, values)
        row_grads["W"] = RowGrad(cols.keys, values)
        return float(loss.mean(dtype=np.float64)), None, row_grads
    if d_W_out is None:
        d_W_out = slot_major(np.zeros(params.W.shape, dtype=dtype))
    d_W_t = d_W_out.transpose(0, 2, 1)                  # (I, d, k)
    if not d_W_t.flags.c_contiguous:
        d_W_t = np.empty((n_slots, params.W.shape[2], params.W.shape[1]), dtype=dtype)
    if params.sparse:
        sf = params.X
        work = d_rows.size * max(1, sf.indices.shape[0] // max(1, sf.shape[0]))
        grads.predict_sparse_backward.for_work(work)(sf.indptr, sf.indices, sf.u_data,
                                                     nodes, slot_ptr, d_rows, d_W_t)
    else:
        # d_W_i = sum_r d_u_hat_r u_r^T over slot i's rows (one GEMM per slot)
        segment_matmul_tn(rws["u_rows"], d_rows, slot_ptr, d_W_t)
    if not np.shares_memory(d_W_t, d_W_out):
        d_W_out[...] = d_W_t.transpose(0, 2, 1)
    if not params.fixed_features:
        # d_u_r = W_i^T d_u_hat_r, summed over the rows of each node, then the squash
        W_t = params.W.transpose(0, 2, 1)
        if W_t.flags.c_contiguous:
            d_u_rows = segment_matmul(d_rows, W_t, slot_ptr, trans_b=True)
        else:
            d_u_rows = segment_matmul(d_rows, np.ascontiguousarray(params.W), slot_ptr)
        x = fw["x"]
        d_u = np.zeros_like(x)
        grads.scatter_add_rows(d_u, rws["x_of_row"], d_u_rows)
        d_x = np.empty_like(x)
        grads.squash_backward.for_work(6 * d_u.size)(x, d_u, d_x)
        row_grads["X"] = RowGrad(rws["x_nodes"], d_x)
    return float(loss.mean(dtype=np.float64)), d_W_out, row_grads


def loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg, grads_out=None):
    """Mean sampled-softmax loss over the batch and the gradient of every parameter.

    params    : Params (float32 or float64; all arrays one dtype)
    ctx       : (P, I) int   context nodes, walk order
    targets   : (P,) int     target node of each pair
    sampled   : (S,) int     the sampled set V' (distinct nodes, shared by the batch)
    q_true    : (P,) float   expected count Q(t_p) of each target under the sampler
    q_sampled : (S,) float   expected count Q(s) of each sampled node
    cfg       : ModelConfig
    grads_out : Grads to write into (dense, overwritten), or None to allocate

    Returns ``(loss, grads)`` with dense gradients (``loss_and_row_grads`` gives the
    same numbers row-sparse).
    """
    if grads_out is None:
        grads_out = Grads(W=np.zeros_like(params.W), O=np.zeros_like(params.O),
                          bias=np.zeros_like(params.bias),
                          X=None if params.fixed_features else np.zeros_like(params.X))
    loss, _, rg = loss_and_row_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg,
                                     d_W_out=grads_out.W)
    rg["O"].to_dense(grads_out.O)
    rg["bias"].to_dense(grads_out.bias)
    if grads_out.X is not None:
        rg["X"].to_dense(grads_out.X)
    return loss, grads_out
