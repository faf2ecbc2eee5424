"""The trainable tables of a model: ``Params`` (W, O, the biases, x), W's slot-major
storage (``slot_major``) and their initialisation (``init_params``)."""

from dataclasses import dataclass

import numpy as np

from .features import SparseFeatures


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


def init_params(
    n_nodes, dim, feat_dim, n_slots, rng, features=None, dtype=np.float32, X=None, O=None
):
    """Initialise as the authors' code: W ~ N(0, 0.01^2); X ~ U(-sqrt(1/d), sqrt(1/d))
    when trainable; O Glorot-uniform U(-sqrt(6/(N+k)), +); biases 0.

    ``features`` (N, d) given -> fixed input features (not trained): a dense array,
    or a scipy.sparse matrix / SparseFeatures, kept sparse.
    ``X`` (N, d) or ``O`` (N, k) given (a spectral start), of ``dtype`` and C-contiguous:
    the trainable table is that array itself, not drawn.  ``rng`` draws W, then O, then
    X, and a spectral start gives X or X and O, so every draw still made is the one it
    was without the start.
    """
    W = slot_major(rng.normal(0.0, 0.01, size=(n_slots, dim, feat_dim)).astype(dtype))
    if O is None:
        limit = np.sqrt(6.0 / (n_nodes + dim))
        O = rng.uniform(-limit, limit, size=(n_nodes, dim)).astype(dtype)
    else:
        O = _given("O", O, (n_nodes, dim), dtype)
    bias = np.zeros(n_nodes, dtype=dtype)
    if features is None:
        if X is None:
            a = np.sqrt(1.0 / feat_dim)
            X = rng.uniform(-a, a, size=(n_nodes, feat_dim)).astype(dtype)
        else:
            X = _given("X", X, (n_nodes, feat_dim), dtype)
        return Params(W, O, bias, X, fixed_features=False)
    if isinstance(features, SparseFeatures):
        X = features if features.data.dtype == dtype else features.astype(dtype)
    elif hasattr(features, "tocsr"):
        X = SparseFeatures.from_scipy(features, dtype)
    else:
        X = np.ascontiguousarray(features, dtype=dtype)
    return Params(W, O, bias, X, fixed_features=True)


def _given(name, a, shape, dtype):
    """The start ``a`` of table ``name`` as the table itself (a copy only when it is not
    C-contiguous ``dtype``); ValueError when its shape is not ``shape``."""
    if a.shape != shape:
        raise ValueError(f"the start of {name} has shape {a.shape}, the table {shape}")
    return np.ascontiguousarray(a, dtype=dtype)
