r"""One forward and backward pass of Caps2NE over a batch: the functional core.

``loss_and_grads`` is the pure function the training loop calls every step and
that anyone can check against an autodiff framework: given the parameters, a
batch of (context, target) pairs and an explicit sampled set V' with its expected
counts Q, it returns the mean loss and the gradient of every parameter, in the
dtype of the parameters (float32 for training, float64 for gradient checks).

Pipeline (docs/math.md#the-whole-batch; each step names its kernel):

    x = X[ctx]                              gather           (I, P, d)
    u = squash(x)                           capsules.squash  Eq. 1
    u_hat = W_i u                           capsules.predict Eq. 2
    e = Routing(u_hat)                      capsules.route   Algorithm 1
    z = e . o + b - log Q                   capsules.output_logits
    L = mean_p softmax cross-entropy        capsules.softmax_rows   Eq. 3
    ... and back: grads.sampled_softmax_backward, grads.route_backward,
    grads.predict_backward, grads.squash_backward, then scatter into d_X.
"""

from dataclasses import dataclass, field

import numpy as np

from . import capsules, grads
from .capsules import ROUTING_RULES

GRAD_MODES = ("exact", "stop")


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


def forward(params, ctx, cfg):
    """Forward pass up to the second capsule: returns a dict of intermediates.

    ctx : (P, I) int  context nodes of each pair in walk order (slot i uses W_i)
    """
    ctx_t = np.ascontiguousarray(np.asarray(ctx, dtype=np.int64).T)   # (I, P)
    n_slots, n_pairs = ctx_t.shape
    dtype = params.W.dtype
    if params.sparse:
        # u = squash(x) is precomputed (fixed features); u_hat_i = W_i u in O(nnz k)
        sf = params.X
        W_t = np.ascontiguousarray(params.W.transpose(0, 2, 1))       # (I, d, k)
        u_hat = np.empty((n_slots, n_pairs, W_t.shape[2]), dtype=dtype)
        work = ctx_t.size * W_t.shape[2] * max(1, sf.indices.shape[0] // max(1, sf.shape[0]))
        capsules.predict_sparse.for_work(work)(sf.indptr, sf.indices, sf.u_data, ctx_t, W_t, u_hat)  # no copy
                                                                                   # if slot_major
        x = u = None
    else:
        x = params.X[ctx_t]                                          # (I, P, d)
        d = x.shape[2]
        u = np.empty_like(x)
        capsules.squash.for_work(4 * x.size)(x.reshape(-1, d), u.reshape(-1, d))
        u_hat = np.ascontiguousarray(capsules.predict(u, params.W))  # (I, P, k)
    k = u_hat.shape[2]
    m = int(cfg.routing_iters)
    c = np.empty((m, n_pairs, n_slots), dtype=dtype)
    s = np.empty((m, n_pairs, k), dtype=dtype)
    e = np.empty((m, n_pairs, k), dtype=dtype)
    capsules.route.for_work(3 * m * u_hat.size)(
        u_hat, m, dtype.type(cfg.scale_for(n_slots)), ROUTING_RULES[cfg.routing_rule], c, s, e)
    return dict(ctx_t=ctx_t, x=x, u=u, u_hat=u_hat, c=c, s=s, e_all=e, e=e[m - 1])


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
                       row_sparse_W=False):
    """The batch's mean loss, the dense gradient of W and row-sparse gradients of O,
    the biases and trainable X (only the rows the batch touches: V', the targets,
    the context nodes).  Nothing here costs O(N).

    Returns ``(loss, d_W, {"O": RowGrad, "bias": RowGrad, "X": RowGrad or None})``;
    ``d_W_out`` (same shape and layout as W) receives d_W when given.  With sparse
    fixed features and ``row_sparse_W``, d_W is None and ``row_grads["W"]`` holds the
    touched columns of each W_i instead (rows of W stored slot-major, (I * d, k)).
    See ``loss_and_grads`` for the arguments.
    """
    if cfg.grad_mode not in GRAD_MODES:
        raise ValueError(f"grad_mode must be one of {GRAD_MODES}, got {cfg.grad_mode!r}")
    dtype = params.O.dtype
    targets = np.asarray(targets, dtype=np.int64)
    sampled = np.asarray(sampled, dtype=np.int64)
    fw = forward(params, ctx, cfg)
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
    if d_W_out is None:
        d_W_out = slot_major(np.zeros(params.W.shape, dtype=dtype))
    if params.sparse and row_sparse_W:
        sf = params.X
        rows, values = grads.predict_sparse_backward_rows(sf.indptr, sf.indices, sf.u_data,
                                                          fw["ctx_t"], d_u_hat, sf.shape[1])
        row_grads["W"] = RowGrad(rows, values)
        return float(loss.mean(dtype=np.float64)), None, row_grads
    if params.sparse:
        sf = params.X
        d_W_t = d_W_out.transpose(0, 2, 1)
        if not d_W_t.flags.c_contiguous:
            d_W_t = np.empty((n_slots, params.W.shape[2], params.W.shape[1]), dtype=dtype)
        work = d_u_hat.size * max(1, sf.indices.shape[0] // max(1, sf.shape[0]))
        grads.predict_sparse_backward.for_work(work)(sf.indptr, sf.indices, sf.u_data,
                                                     fw["ctx_t"], d_u_hat, d_W_t)
        if not np.shares_memory(d_W_t, d_W_out):
            d_W_out[...] = d_W_t.transpose(0, 2, 1)
        return float(loss.mean(dtype=np.float64)), d_W_out, row_grads
    d_W, d_u = grads.predict_backward(fw["u"], params.W, d_u_hat,
                                      need_d_u=not params.fixed_features)
    d_W_out[...] = d_W          # same memory layout as W (slot_major): a plain copy
    if not params.fixed_features:
        d = d_u.shape[2]
        d_x = np.empty_like(d_u)
        grads.squash_backward.for_work(6 * d_u.size)(
            fw["x"].reshape(-1, d), np.ascontiguousarray(d_u).reshape(-1, d), d_x.reshape(-1, d))
        x_rows, inverse = np.unique(fw["ctx_t"].reshape(-1), return_inverse=True)
        d_X = np.zeros((x_rows.shape[0], d), dtype=dtype)
        grads.scatter_add_rows(d_X, inverse, d_x.reshape(-1, d))
        row_grads["X"] = RowGrad(x_rows, d_X)
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
