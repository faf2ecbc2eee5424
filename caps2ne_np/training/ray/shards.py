"""The layout of the sharded tables, and what every actor process sets up.

Node v lives on shard ``v % S`` at local row ``v // S``: ``shard_rows`` counts a
shard's rows, ``split_by_shard`` routes a batch's nodes to their shards and
``interleave`` puts the shards' parts of a row range back into node order.
"""

import resource

import numpy as np


def shard_rows(n_nodes, n_shards, shard):
    """Number of nodes v < n_nodes with v % n_shards == shard."""
    return max(0, (n_nodes - shard + n_shards - 1) // n_shards)


def split_by_shard(nodes, n_shards):
    """For ascending global ids ``nodes``: per shard, (positions in ``nodes``, local rows).
    Local rows ascend too (v // S is monotone within a residue class)."""
    owner = nodes % n_shards
    out = []
    for s in range(n_shards):
        pos = np.flatnonzero(owner == s)
        out.append((pos, nodes[pos] // n_shards))
    return out


def interleave(parts, first, last, n_shards):
    """Rows [first, last) of a table in node order, from each shard's rows of that range
    (``parts[s]``: nodes v in [first, last) with v % S == s, ascending, as
    ``ShardServer.rows`` returns them): node v is row v - first."""
    out = np.empty((last - first,) + parts[0].shape[1:], dtype=np.float32)
    for s, part in enumerate(parts):
        out[(s - first) % n_shards :: n_shards] = part
    return out


def set_threads(threads):
    """An actor's Numba threads (``threads``, at most Numba's maximum) and one BLAS thread."""
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
    threadpool_limits(limits=1)  # products run on Numba's threads (blas.py)


def peak_rss():
    """This process's peak resident set size, bytes (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
