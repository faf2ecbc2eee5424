r"""Caps2NE in PyTorch (CPU): the peer of the benchmarks and an independent gradient check.

The same model, loss and options as ``caps2ne_np.model.core.loss_and_grads``, written the
way a PyTorch user would: batched tensor ops, autograd for the backward pass,
``torch.optim.Adam`` for the update.  Nothing here imports ``caps2ne_np``.

    x = X[ctx]                      (I, P, d)  F.embedding
    u = squash(x)                              Eq. 1, with EPS = 1e-9 inside the sqrt
    u_hat_i = W_i u_i               (I, P, k)  one batched matmul (bmm over slots)
    e = Routing(u_hat)              (P, k)     Algorithm 1, m iterations, c = scale softmax(b)
    z_t = e.o_t + b_t - log Q(t);  z_s = e.o_s + b_s - log Q(s)   (accidental hits -> -inf)
    L = mean_p cross_entropy([z_t, z_s], 0)                        Eq. 3 (TF sampled softmax)

Layout choices (for speed, as a competent user would make them):

* ``W`` is stored per slot transposed, as the parameter ``Wt`` of shape (I, d, k):
  that is the right-hand operand both ``torch.bmm`` (u (I, P, d) @ Wt) and
  ``F.embedding_bag`` (weight (I*d, k)) want, so no copy is made per step.
  ``weights()`` / ``grads()`` return numpy arrays in the library's shapes (W (I, k, d)).
* Fixed features are squashed once at construction (u = squash(x) never changes).
  ``feature_mode='dense'`` keeps u as a dense (N, d) tensor and gathers rows;
  ``feature_mode='bag'`` keeps u as CSR and computes u_hat_i = W_i u_i with one
  ``F.embedding_bag(mode='sum', per_sample_weights=u values)`` over all slots
  (weight = Wt viewed as (I*d, k), column j of slot i -> row i*d + j): O(nnz k)
  instead of O(d k) per context node.  ``'auto'`` picks 'bag' for scipy.sparse input.
  For bag-of-words features (Cora: 18 of 1,433 entries non-zero on average) 'bag' is
  the faster one; bench/perf.py measures both and compares against the faster.
* ``grad_mode='stop'``: the inner routing iterations see ``u_hat.detach()`` (as the
  authors' TensorFlow code, ``tf.stop_gradient``), so c is a constant and the
  gradient flows only through ``s = sum_i c_i u_hat_i`` of the last iteration.
* Adam is ``torch.optim.Adam``; bench/perf.py passes ``fused=True``, measured the
  fastest of torch's three CPU implementations here (single-tensor, foreach, fused;
  compare with ``bench/perf.py --peer-adam``).  Its eps is added to sqrt(v_hat) (Kingma and
  Ba); TensorFlow 1 (and ``caps2ne_np.training.step.optim``) adds eps to sqrt(v) and folds the bias
  correction into the step size.  The two differ only through eps and cost the same,
  which is all the throughput comparison needs.
"""

import time

import numpy as np
import torch
import torch.nn.functional as F

EPS = 1e-9
"""The epsilon inside the squash's square root (authors' code, as the library)."""

FEATURE_MODES = ("auto", "dense", "bag")
ROUTING_RULES = ("paper", "sabour")
GRAD_MODES = ("exact", "stop")


def squash(s):
    """e = |s|^2 / (1 + |s|^2) s / sqrt(|s|^2 + EPS), row-wise over the last axis (Eq. 1)."""
    r2 = (s * s).sum(-1, keepdim=True)
    return s * (r2 / ((1.0 + r2) * torch.sqrt(r2 + EPS)))


def _to_csr_parts(features):
    """(indptr int64, indices int64, values float64) of a dense array or a scipy.sparse matrix."""
    if hasattr(features, "tocsr"):
        csr = features.tocsr().copy()
        csr.sum_duplicates()
        csr.eliminate_zeros()
        csr.sort_indices()
        return (
            np.asarray(csr.indptr, dtype=np.int64),
            np.asarray(csr.indices, dtype=np.int64),
            np.asarray(csr.data, dtype=np.float64),
            csr.shape,
        )
    dense = np.asarray(features)
    rows, cols = np.nonzero(dense)
    indptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=dense.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int64), dense[rows, cols].astype(np.float64), dense.shape


class TorchCaps2NE(torch.nn.Module):
    """Caps2NE with parameters Wt (I, d, k) [= W_i^T], O (N, k), bias (N,) and X (N, d)
    (a parameter when ``features`` is None, else fixed squashed features).

    n_nodes [N], dim [k], n_slots [I = q - 1], feat_dim [d] (trainable X only);
    features: None, or fixed (N, d) features as a numpy array or scipy.sparse matrix;
    routing_iters [m], routing_rule 'paper' | 'sabour', routing_scale (None -> I),
    grad_mode 'exact' | 'stop', feature_mode 'auto' | 'dense' | 'bag'.
    Initialised as the library: W ~ N(0, 0.01^2), X ~ U(+-sqrt(1/d)), O Glorot-uniform,
    bias 0; ``load_numpy`` overwrites them (to compare on the same parameters).
    """

    def __init__(
        self,
        n_nodes,
        dim,
        n_slots,
        feat_dim=128,
        features=None,
        *,
        routing_iters=1,
        routing_rule="paper",
        routing_scale=None,
        grad_mode="exact",
        feature_mode="auto",
        dtype=torch.float32,
        seed=0,
    ):
        super().__init__()
        if routing_rule not in ROUTING_RULES:
            raise ValueError(f"routing_rule must be one of {ROUTING_RULES}, got {routing_rule!r}")
        if grad_mode not in GRAD_MODES:
            raise ValueError(f"grad_mode must be one of {GRAD_MODES}, got {grad_mode!r}")
        if feature_mode not in FEATURE_MODES:
            raise ValueError(f"feature_mode must be one of {FEATURE_MODES}, got {feature_mode!r}")
        if int(routing_iters) < 1:
            raise ValueError(f"routing_iters must be >= 1, got {routing_iters}")
        self.n_nodes, self.dim, self.n_slots = int(n_nodes), int(dim), int(n_slots)
        self.routing_iters = int(routing_iters)
        self.sabour = routing_rule == "sabour"
        self.exact = grad_mode == "exact"
        self.scale = float(n_slots if routing_scale is None else routing_scale)
        self.dtype = dtype
        gen = torch.Generator().manual_seed(int(seed))

        if features is None:
            self.feature_mode = "trainable"
            self.feat_dim = int(feat_dim)
            a = (1.0 / self.feat_dim) ** 0.5
            self.X = torch.nn.Parameter(
                torch.empty(self.n_nodes, self.feat_dim, dtype=dtype).uniform_(-a, a, generator=gen)
            )
        else:
            if feature_mode == "auto":
                feature_mode = "bag" if hasattr(features, "tocsr") else "dense"
            self.feature_mode = feature_mode
            indptr, indices, values, shape = _to_csr_parts(features)
            if shape[0] != self.n_nodes:
                raise ValueError(f"features have {shape[0]} rows, expected {self.n_nodes}")
            self.feat_dim = int(shape[1])
            self.register_buffer("x_indptr", torch.from_numpy(indptr))
            self.register_buffer("x_indices", torch.from_numpy(indices))
            self.register_buffer("x_values", torch.from_numpy(values).to(dtype))
            u_values = self._squash_csr(self.x_indptr, self.x_values)
            if feature_mode == "dense":
                U = torch.zeros(self.n_nodes, self.feat_dim, dtype=dtype)
                rows = torch.repeat_interleave(torch.arange(self.n_nodes), self.x_indptr.diff())
                U[rows, self.x_indices] = u_values
                self.register_buffer("U", U)
            else:
                self.register_buffer("u_values", u_values)

        self.Wt = torch.nn.Parameter(
            torch.empty(self.n_slots, self.feat_dim, self.dim, dtype=dtype).normal_(
                0.0, 0.01, generator=gen
            )
        )
        limit = (6.0 / (self.n_nodes + self.dim)) ** 0.5
        self.O = torch.nn.Parameter(
            torch.empty(self.n_nodes, self.dim, dtype=dtype).uniform_(-limit, limit, generator=gen)
        )
        self.bias = torch.nn.Parameter(torch.zeros(self.n_nodes, dtype=dtype))
        self.optimizer = None
        self.optimizer_seconds = 0.0  # time spent in optimizer.step (bench/perf.py)

    # ------------------------------------------------------------------ parameters

    @staticmethod
    def _squash_csr(indptr, values):
        """u = squash(x) of every CSR row, returned as the row's new values."""
        n = indptr.shape[0] - 1
        rows = torch.repeat_interleave(torch.arange(n), indptr.diff())
        r2 = torch.zeros(n, dtype=values.dtype).index_add_(0, rows, values * values)
        g = r2 / ((1.0 + r2) * torch.sqrt(r2 + EPS))
        return values * g[rows]

    @torch.no_grad()
    def load_numpy(self, W, O, bias, X=None):
        """Set the parameters from numpy arrays in the library's shapes: W (I, k, d), O (N, k),
        bias (N,), X (N, d) (trainable features only)."""
        self.Wt.copy_(torch.from_numpy(np.ascontiguousarray(np.asarray(W).transpose(0, 2, 1))))
        self.O.copy_(torch.from_numpy(np.asarray(O)))
        self.bias.copy_(torch.from_numpy(np.asarray(bias)))
        if X is not None:
            if self.feature_mode != "trainable":
                raise ValueError("X is fixed in this model; pass the features to the constructor")
            self.X.copy_(torch.from_numpy(np.asarray(X)))
        return self

    def weights(self):
        """The parameters as numpy arrays in the library's shapes (W (I, k, d), ...)."""
        out = dict(
            W=self.Wt.detach().transpose(1, 2).numpy().copy(),
            O=self.O.detach().numpy().copy(),
            bias=self.bias.detach().numpy().copy(),
        )
        if self.feature_mode == "trainable":
            out["X"] = self.X.detach().numpy().copy()
        return out

    def grads(self):
        """The gradients of the last backward pass, same names and shapes as ``weights()``."""
        out = dict(
            W=self.Wt.grad.transpose(1, 2).numpy().copy(),
            O=self.O.grad.numpy().copy(),
            bias=self.bias.grad.numpy().copy(),
        )
        if self.feature_mode == "trainable":
            out["X"] = self.X.grad.numpy().copy()
        return out

    # ------------------------------------------------------------------ forward

    def predict(self, ctx_t):
        """u_hat (I, P, k) for context nodes ctx_t (I, P) int64 (slot-major)."""
        n_slots, n_pairs = ctx_t.shape
        if self.feature_mode == "bag":
            v = ctx_t.reshape(-1)  # bag b = i * P + p
            start = self.x_indptr[v]
            length = self.x_indptr[v + 1] - start
            offsets = torch.cumsum(length, 0) - length  # exclusive prefix sums
            total = int(offsets[-1] + length[-1])
            pos = torch.arange(total) + torch.repeat_interleave(
                start - offsets, length, output_size=total
            )
            slot_base = torch.arange(n_slots).repeat_interleave(n_pairs) * self.feat_dim
            cols = self.x_indices[pos] + torch.repeat_interleave(
                slot_base, length, output_size=total
            )
            weight = self.Wt.view(n_slots * self.feat_dim, self.dim)
            u_hat = F.embedding_bag(
                cols, weight, offsets, mode="sum", per_sample_weights=self.u_values[pos]
            )
            return u_hat.view(n_slots, n_pairs, self.dim)
        if self.feature_mode == "dense":
            u = F.embedding(ctx_t, self.U)  # (I, P, d), squashed once
        else:
            u = squash(F.embedding(ctx_t, self.X))  # (I, P, d)
        return torch.bmm(u, self.Wt)  # (I, P, k)

    def route(self, u_hat):
        """Algorithm 1 over u_hat (I, P, k): returns e (P, k) of the last iteration."""
        n_slots, n_pairs, _ = u_hat.shape
        b = u_hat.new_zeros(n_pairs, n_slots)
        inner = u_hat if self.exact else u_hat.detach()
        e = None
        for r in range(self.routing_iters):
            last = r == self.routing_iters - 1
            uh = u_hat if last else inner
            c = self.scale * torch.softmax(b, dim=1)  # (P, I)
            s = torch.einsum("pi,ipk->pk", c, uh)
            e = squash(s)
            if not last:
                agree = torch.einsum("ipk,pk->pi", uh, e)
                b = b + agree if self.sabour else agree
        return e

    def forward_loss(self, ctx, targets, sampled, q_true, q_sampled):
        """Mean sampled-softmax loss (a 0-d tensor) of the pairs (ctx (P, I), targets (P,))
        given the sampled set V' (S,) and the expected counts Q (P,), (S,)."""
        ctx_t = torch.as_tensor(np.asarray(ctx, dtype=np.int64)).t().contiguous()
        targets = torch.as_tensor(np.asarray(targets, dtype=np.int64))
        sampled = torch.as_tensor(np.asarray(sampled, dtype=np.int64))
        log_q_true = torch.log(torch.as_tensor(np.asarray(q_true)).to(self.dtype))
        log_q_sampled = torch.log(torch.as_tensor(np.asarray(q_sampled)).to(self.dtype))
        e = self.route(self.predict(ctx_t))
        z_true = (e * F.embedding(targets, self.O)).sum(1) + self.bias[targets] - log_q_true
        z_sampled = e @ F.embedding(sampled, self.O).t() + (self.bias[sampled] - log_q_sampled)
        z_sampled = z_sampled.masked_fill(targets[:, None] == sampled[None, :], float("-inf"))
        logits = torch.cat([z_true[:, None], z_sampled], dim=1)
        return F.cross_entropy(logits, torch.zeros_like(targets))

    # ------------------------------------------------------------------ training

    def make_optimizer(self, lr, betas=(0.9, 0.999), eps=1e-8, **kwargs):
        """``torch.optim.Adam`` over every parameter; kwargs (``fused``, ...) pass through."""
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr, betas=betas, eps=eps, **kwargs)
        return self.optimizer

    def train_step(self, ctx, targets, sampled, q_true, q_sampled):
        """One Adam step on the batch; returns the loss (float) before the step."""
        if self.optimizer is None:
            raise RuntimeError("call make_optimizer(lr) first")
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.forward_loss(ctx, targets, sampled, q_true, q_sampled)
        loss.backward()
        t0 = time.perf_counter()  # CPU ops are synchronous: the update itself
        self.optimizer.step()
        self.optimizer_seconds += time.perf_counter() - t0
        return float(loss.detach())
