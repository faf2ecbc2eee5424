"""How far embeddings moved between two runs, after the best rotation.

Two trainings of the same nodes can give the same geometry in another orientation
(any orthogonal R leaves the dot products and cosines that classifiers and link
scorers read unchanged), so rows are compared after aligning one run onto the other
by orthogonal Procrustes (Schoenemann 1966): R = argmin ||A R - B||_F over
orthogonal R, fitted on the rows given (e.g. the nodes far from a graph's change),
R = U V^T from the SVD U S V^T = A^T B.  A row's movement is then
||a_i R - b_i|| / ||a_i||: 0 where the row is where it was, about sqrt(2) for a row
whose direction is unrelated to its old one.

    move = aligned_movement(before, after, rows=far)   # (len(far),) relative movement
"""

import numpy as np
from scipy.linalg import orthogonal_procrustes

from ..errors import InputError


def _rows(n, rows):
    if rows is None:
        return np.arange(n)
    rows = np.asarray(rows, dtype=np.int64).ravel()
    if rows.size == 0:
        raise InputError("no rows to align: the set of rows is empty")
    if rows.min() < 0 or rows.max() >= n:
        raise InputError(f"rows must be in [0, {n})")
    return rows


def procrustes_rotation(before, after, rows=None):
    """(k, k) orthogonal R minimising ||before[rows] R - after[rows]||_F (module
    docstring); both (N, k), the same nodes in the same order."""
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if before.ndim != 2 or before.shape != after.shape:
        raise InputError(
            f"the two embeddings must have the same (nodes, dimensions) shape, "
            f"got {before.shape} and {after.shape}"
        )
    rows = _rows(before.shape[0], rows)
    R, _ = orthogonal_procrustes(before[rows], after[rows])
    return R


def aligned_movement(before, after, rows=None):
    """(len(rows),) float64: each row's movement ||b_i R - a_i|| / ||b_i|| from
    ``before`` to ``after`` after the rotation R fitted on those rows; rows of norm 0
    in ``before`` move by their new norm (no division by zero)."""
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    R = procrustes_rotation(before, after, rows)
    rows = _rows(before.shape[0], rows)
    B, A = before[rows] @ R, after[rows]
    norm = np.linalg.norm(before[rows], axis=1)
    moved = np.linalg.norm(B - A, axis=1)
    return np.where(norm > 0, moved / np.where(norm > 0, norm, 1.0), moved)
