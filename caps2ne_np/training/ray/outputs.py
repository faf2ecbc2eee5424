"""The Ray engine's parameters on the driver: gathered whole (``gather``: the
estimator's ``O_``, an epoch callback) or streamed (``streamed_params``: consecutive
row blocks pulled from the shards into the block-wise writers of ``io``, so the
driver never holds a whole N-row table)."""

import numpy as np

from ...model.params import Params, slot_major
from .shards import interleave

OUTPUT_BLOCK_ROWS = 1 << 14
"""Rows per block when the driver streams a table from the servers into a writer."""


def _gather_W(ray, cluster, replicate_W):
    """W, (I, k, d), from server 0 or from worker 0's replica (callers copy it)."""
    if replicate_W:
        return ray.get(cluster.workers[0].W_state.remote())[0].transpose(0, 2, 1)
    return ray.get(cluster.servers[0].table.remote("W"))


def gather(ray, cluster, n_nodes, fixed, features=None, replicate_W=False):
    """The whole parameters on the driver (``params.Params``), node v = row v."""
    servers = cluster.servers
    W = _gather_W(ray, cluster, replicate_W)
    out = {}
    for name in ("O", "bias", "X"):
        if name == "X" and fixed:
            continue
        out[name] = interleave(
            ray.get([srv.table.remote(name) for srv in servers]), 0, n_nodes, len(servers)
        )
    X = features if fixed else out["X"]
    return Params(slot_major(np.array(W)), out["O"], out["bias"], X, fixed_features=fixed)


def row_blocks(ray, servers, name, shape, block_rows=None):
    """Table ``name`` (of ``shape``, (N, width) or (N,)) as ``io.RowBlocks``: rows
    [a, a + block_rows) at a time, each pulled from every shard (one request per
    server, in parallel) and interleaved into node order.  The next block's requests
    go out before a block is handed on, so the transfer overlaps the writing; the
    driver holds at most two blocks (and their shard parts) of the table.
    ``block_rows`` defaults to ``OUTPUT_BLOCK_ROWS``."""
    from ...io.blocks import RowBlocks

    n_nodes = shape[0]
    block_rows = int(block_rows or OUTPUT_BLOCK_ROWS)

    def request(first):
        last = min(first + block_rows, n_nodes)
        return first, last, [srv.rows.remote(name, first, last) for srv in servers]

    def blocks():
        ahead = request(0) if n_nodes else None
        while ahead is not None:
            first, last, refs = ahead
            ahead = request(last) if last < n_nodes else None
            yield interleave(ray.get(refs), first, last, len(servers))

    return RowBlocks(shape, blocks)


def streamed_params(
    ray, cluster, n_nodes, dim, feat_dim, fixed, features=None, replicate_W=False, block_rows=None
):
    """``params.Params`` for the writers without gathering: W (small) on the driver, O, the
    biases and trained x as ``io.RowBlocks`` pulled from the servers (``row_blocks``);
    each can be iterated again (a new pass over the shards)."""
    servers = cluster.servers
    W = _gather_W(ray, cluster, replicate_W)
    O = row_blocks(ray, servers, "O", (n_nodes, dim), block_rows)
    bias = row_blocks(ray, servers, "bias", (n_nodes,), block_rows)
    X = features if fixed else row_blocks(ray, servers, "X", (n_nodes, feat_dim), block_rows)
    return Params(slot_major(np.array(W)), O, bias, X, fixed_features=fixed)
