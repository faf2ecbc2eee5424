r"""One forward and backward pass of Caps2NE over a batch: the functional core.

``loss_and_row_grads`` is the step written for the reader: given the parameters, a
batch of (context, target) pairs and an explicit sampled set V' with its expected
counts Q, it returns the mean loss and the gradient of every trainable table in one
form, row-sparse (``RowGrad``: the rows the batch touches), in the dtype of the
parameters (float32 for training, float64 for gradient checks).  The Python step
(training/step.py: the skip-gram term, sparse fixed features) calls it every step;
the default run executes the same arithmetic compiled whole (training/fused.py),
through the same per-row helpers of capsules.py, grads.py and kernels/blas.py that
the kernels below call (docs/math.md, "The step as training runs it").
``loss_and_grads`` expands the same numbers to dense arrays: the
reference form the gradient checks and the autodiff comparison read.

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

from dataclasses import dataclass, replace

import numpy as np

from ..defaults import GRAD_MODES
from ..errors import InputError
from ..kernels.blas import segment_matmul, segment_matmul_tn
from . import capsules, grads
from .rows import batch_columns, batch_rows


@dataclass
class SparseFeatures:
    """Fixed sparse input features x (N, d) as CSR, with u = squash(x) precomputed:
    the features never change, so neither does the first capsule layer.

    Build with ``SparseFeatures.from_scipy(matrix, dtype)``.
    """

    indptr: np.ndarray  # int64 (N + 1,)
    indices: np.ndarray  # int32 (nnz,)
    data: np.ndarray  # x values (nnz,)
    u_data: np.ndarray  # u = squash(x) values (nnz,)
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
        return cls(
            indptr,
            np.ascontiguousarray(csr.indices, dtype=np.int32),
            data,
            u_data,
            tuple(csr.shape),
        )

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
        return Params(
            *(np.array(getattr(self, n), dtype=dtype) for n in ("W", "O", "bias")),
            X,
            fixed_features=self.fixed_features,
        )


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
class Grads:
    """Dense gradients, same shapes as the parameters (``X`` is None when fixed)."""

    W: np.ndarray
    O: np.ndarray
    bias: np.ndarray
    X: np.ndarray | None = None


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


@dataclass
class RowGrad:
    """A row-sparse gradient, the one form ``loss_and_row_grads`` returns and
    optim.Adam takes: ``values[r]`` is the gradient of row ``rows[r]``; every other
    row's gradient is zero.  ``rows`` are distinct and ascending.

    Rows are those of the parameter's row matrix (``row_matrix``): node v for O, the
    biases and x; row ``i * d + j``, column j of W_i, for W stored slot-major.
    """

    rows: np.ndarray
    values: np.ndarray

    @classmethod
    def every_row(cls, values):
        """The gradient of every row: ``values`` (n_rows, ...) in row order."""
        return cls(np.arange(values.shape[0], dtype=np.int64), values)

    def to_dense(self, out):
        """Write into ``out`` (zeroed here), an array of the row matrix's shape."""
        out.fill(0)
        out[self.rows] = self.values
        return out


def row_matrix(a):
    """The 2-D view of a parameter whose rows a RowGrad indexes: (N, rest) for a
    C-contiguous array; for W stored slot-major (``slot_major``, a transposed view of a
    contiguous (I, d, k)) the (I * d, k) matrix whose row ``i * d + j`` is column j of
    W_i.  A view, never a copy: optim.Adam updates the parameter through it."""
    if a.flags.c_contiguous:
        return a.reshape(a.shape[0], -1)
    if a.ndim == 3 and a.transpose(0, 2, 1).flags.c_contiguous:
        return a.transpose(0, 2, 1).reshape(-1, a.shape[1])
    raise ValueError(
        "a row-sparse gradient needs its parameter stored contiguously (C order, or W slot-major)"
    )


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
    training/fused.py, computes the same through the same helpers).  Nothing here
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
    caps = float(loss.mean(dtype=np.float64))
    if parts is not None:
        parts.update(capsule=caps, skipgram=0.0)
    if not getattr(cfg, "skipgram_weight", 0.0):
        return caps, out
    term = _skipgram_term(params, fw, targets, sampled, log_q_true, log_q_sampled, cfg, key)
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


def _skipgram_term(params, fw, targets, sampled, log_q_true, log_q_sampled, cfg, key):
    """The skip-gram term (skipgram.loss_and_row_grads) on the forward pass's rows."""
    from . import skipgram

    check_skipgram((params.fixed_features, params.X.shape[1], params.O.shape[1]), cfg)
    rws = fw.rows
    item_x = np.ascontiguousarray(fw.x_of_row[rws.inv].T)  # (P, I)
    loss, d_x, o_rows, d_O, d_bias = skipgram.loss_and_row_grads(
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


def prepare_features(X, n_nodes, normalize=True):
    """Fixed input features for training: a SparseFeatures (scipy.sparse input, kept
    sparse: the N x d matrix is never densified) or a dense float32 array.

    ``normalize`` divides each row by the sum of its absolute values (the sum, for
    bag-of-words counts), as the authors' preprocessing; all-zero rows stay zero.
    """
    import scipy.sparse as sp

    if isinstance(X, SparseFeatures):
        X = X.to_scipy()
    if X.ndim != 2 or X.shape[0] != n_nodes:
        raise InputError(
            f"features must have one row per node: expected ({n_nodes}, d), got {X.shape}"
        )
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32)
        values = X.data
    else:
        X = np.array(X, dtype=np.float32)
        values = X
    if not np.all(np.isfinite(values)):
        raise InputError("features contain NaN or infinite values")
    if normalize:
        norms = np.asarray(abs(X).sum(axis=1)).ravel()
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        X = (
            (sp.diags(scale.astype(np.float32)) @ X).tocsr()
            if sp.issparse(X)
            else X * scale[:, None].astype(np.float32)
        )
    return SparseFeatures.from_scipy(X, np.float32) if sp.issparse(X) else X
