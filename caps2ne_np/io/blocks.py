"""A matrix handed to the writers as consecutive blocks of rows (``RowBlocks``).

The Ray engine's driver pulls the rows of its outputs from the shards block by block
(docs/distributed.md); the writers of word2vec.py and npy.py take a ``RowBlocks``
wherever they take a matrix and write the same bytes as for the whole array.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK_ROWS", "RowBlocks", "as_blocks"]

CHUNK_ROWS = 4096  # rows formatted / parsed per batch


class RowBlocks:
    """A matrix handed to the writers as consecutive blocks of rows, not as one array.

    ``shape`` is (n, k) or (n,); ``blocks`` is a function returning a *fresh* iterator
    over arrays holding rows [0, a), [a, b), ... whose row counts add up to n (the Ray
    engine's driver pulls them from the shards, docs/distributed.md).  Every writer of
    word2vec.py and npy.py takes one wherever it takes a matrix and writes the same
    bytes as for the whole array; iterating checks the blocks and gives them as
    C-contiguous float32.
    """

    def __init__(self, shape, blocks):
        self.shape = tuple(int(s) for s in shape)
        if len(self.shape) not in (1, 2) or self.shape[0] < 0:
            raise ValueError(f"RowBlocks: shape must be (n,) or (n, k), got {shape}")
        self._blocks = blocks

    @classmethod
    def of(cls, array, rows=CHUNK_ROWS):
        """``array`` (already float32 and C-contiguous, or it is converted per block) in
        blocks of ``rows`` rows."""
        n = array.shape[0]
        return cls(array.shape, lambda: (array[a : a + rows] for a in range(0, n, rows)))

    def __iter__(self):
        n, tail, done = self.shape[0], self.shape[1:], 0
        for block in self._blocks():
            block = np.ascontiguousarray(block, dtype=np.float32)
            if block.shape[1:] != tail or done + block.shape[0] > n:
                raise ValueError(
                    f"RowBlocks: a block of shape {block.shape} after {done} rows "
                    f"does not fit shape {self.shape}"
                )
            done += block.shape[0]
            yield block
        if done != n:
            raise ValueError(f"RowBlocks: the blocks hold {done} rows, the shape says {n}")


def _as_matrix(vectors) -> np.ndarray:
    v = np.asarray(vectors)
    if v.ndim != 2 or v.shape[1] < 1:
        raise ValueError(f"vectors must be a 2-D (n, k) array with k >= 1, got shape {v.shape}")
    if not (np.issubdtype(v.dtype, np.floating) or np.issubdtype(v.dtype, np.integer)):
        raise ValueError(f"vectors must be real numbers, got dtype {v.dtype}")
    return np.ascontiguousarray(v, dtype=np.float32)


def as_blocks(vectors) -> RowBlocks:
    """``vectors`` (an (n, k) array or a RowBlocks of that shape) as RowBlocks."""
    if isinstance(vectors, RowBlocks):
        if len(vectors.shape) != 2 or vectors.shape[1] < 1:
            raise ValueError(
                f"vectors must be (n, k) blocks with k >= 1, got shape {vectors.shape}"
            )
        return vectors
    return RowBlocks.of(_as_matrix(vectors))
