"""evaluation/stability.py: the movement of rows after the best rotation, against the
rotation found by brute force on a small case and the invariances it must have."""

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.evaluation.stability import aligned_movement, procrustes_rotation


def random_rotation(k, rng):
    Q, R = np.linalg.qr(rng.standard_normal((k, k)))
    return Q * np.sign(np.diag(R))


def test_a_rotated_copy_has_not_moved():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 8))
    B = A @ random_rotation(8, rng)
    assert np.allclose(aligned_movement(A, B), 0, atol=1e-10)


def test_the_rotation_is_the_best_of_many_in_two_dimensions():
    """In 2-D every orthogonal matrix is a rotation by t or a reflection: a fine sweep
    finds none with a smaller error than the Procrustes solution."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((20, 2))
    B = A @ random_rotation(2, rng) + 0.3 * rng.standard_normal((20, 2))
    best = np.linalg.norm(A @ procrustes_rotation(A, B) - B)
    for t in np.linspace(0, 2 * np.pi, 2000):
        c, s = np.cos(t), np.sin(t)
        for R in (np.array([[c, -s], [s, c]]), np.array([[c, s], [s, -c]])):
            assert np.linalg.norm(A @ R - B) >= best - 1e-9


def test_movement_is_relative_to_the_old_norm_on_the_rows_given():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((40, 4))
    B = A.copy()
    B[5] = -A[5]  # one row flipped: it moved by 2 |a|, the rest by nothing
    far = np.r_[0:5, 6:40]
    assert np.allclose(aligned_movement(A, B, rows=far), 0, atol=1e-12)
    moved = aligned_movement(A, B)
    assert moved[5] == pytest.approx(2.0, rel=0.1) and np.median(moved) < 0.2


def test_shapes_and_rows_are_checked():
    A = np.zeros((3, 2))
    with pytest.raises(InputError, match="same"):
        aligned_movement(A, np.zeros((3, 3)))
    with pytest.raises(InputError, match="empty"):
        aligned_movement(A, A, rows=[])
    with pytest.raises(InputError, match=r"\[0, 3\)"):
        aligned_movement(A, A, rows=[3])
