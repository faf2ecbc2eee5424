"""Fixed input features x: kept sparse (``SparseFeatures``, CSR with u = squash(x)
precomputed, never densified) or dense, checked and row-normalised for training
(``prepare_features``)."""

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from . import capsules


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
