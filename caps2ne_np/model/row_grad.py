"""The row-sparse gradient, the one form the batch's backward pass returns and
optim.Adam takes: ``RowGrad`` over a parameter's row matrix (``row_matrix``)."""

from dataclasses import dataclass

import numpy as np


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
