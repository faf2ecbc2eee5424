"""A batch's index: each distinct (slot, node) row once, and the columns of W its sparse
features touch.

Before its forward pass a batch is indexed once (``batch_rows``; on a single machine
by training.batch.BatchStream as the batch is made, on a Ray worker by batch_forward.forward on
the worker's local rows):

    ctx_t = ctx.T                              (I, P) slot-major contexts
    nodes, slot_ptr, inv = share_slots(ctx_t)  each (slot, node) once: u_hat = W_i u per row
    cols = batch_columns(features, ...)        sparse features: the rows' nonzeros by column of W

The products and their gradients (batch_forward.forward, core.loss_and_row_grads) then run on
the distinct rows and the touched columns only.
"""

import threading
from dataclasses import dataclass

import numpy as np
from numba import prange

from ..kernels.jit import check_array, kernel


@kernel
def share_slots_kernel(ctx_t, mark, nodes, inv, slot_ptr):
    """The distinct nodes of each slot, in order of first appearance (see share_slots).

    ``mark`` (>= max node + 1,) is all -1 on entry and again on exit; within slot i
    ``mark[v]`` holds v's row once v has been seen, and rows only grow, so a value
    below the slot's first row means "not seen in this slot yet"."""
    n_slots, n_pairs = ctx_t.shape
    n = 0
    for i in range(n_slots):
        slot_ptr[i] = n
        for p in range(n_pairs):
            v = ctx_t[i, p]
            if mark[v] < slot_ptr[i]:
                mark[v] = n
                nodes[n] = v
                n += 1
            inv[i, p] = mark[v]
    slot_ptr[n_slots] = n
    for r in range(n):
        mark[nodes[r]] = -1
    return n


_MARK = threading.local()


def share_slots(ctx_t):
    """Each (slot, node) combination of a batch once: ``u_hat = W_i u`` depends on
    the slot i and the node only, and pairs from one walk share most of them.

    A walk of length q with T targets yields T pairs whose contexts are the same
    walk with one node left out, so the node at walk position j sits in slot j or
    j - 1: at most 2 (q - 1) distinct rows per walk instead of T (q - 1), a 5x
    saving with every position a target (q = 10) and 3x with targets {3, 4, 5, 6}.
    Products, squashes and their gradients are computed on the distinct rows and
    expanded (``capsules.gather_rows``) or summed back (``grads.gather_rows_backward``)
    around the routing, which is per pair.

    ctx_t : (I, P) int  ->  ``(nodes (R,), slot_ptr (I + 1,), inv (I, P))``: rows
    [slot_ptr[i], slot_ptr[i + 1]) are slot i's distinct nodes in order of first
    appearance, and pair p's slot i reads row ``inv[i, p]``.
    """
    n_max = int(ctx_t.max()) + 1 if ctx_t.size else 1
    mark = getattr(_MARK, "buffer", None)
    if mark is None or mark.shape[0] < n_max:
        mark = np.full(max(n_max, 1024), -1, dtype=np.int64)
        _MARK.buffer = mark
    nodes = np.empty(ctx_t.size, dtype=np.int64)
    inv = np.empty(ctx_t.shape, dtype=np.int64)
    slot_ptr = np.empty(ctx_t.shape[0] + 1, dtype=np.int64)
    n = share_slots_kernel(ctx_t, mark, nodes, inv, slot_ptr)
    return nodes[:n], slot_ptr, inv


@kernel(
    parallel=True,
    work=lambda indptr, indices, u_data, nodes, slot_ptr, n_features, cursor, slot_ent, *_: (
        64 * int(slot_ent[-1])  # 64 per entry of u the batch reads
    ),
)
def _batch_columns(
    indptr,
    indices,
    u_data,
    nodes,
    slot_ptr,
    n_features,
    cursor,
    slot_ent,
    keys,
    slot_key_ptr,
    key_ptr,
    ent_row,
    ent_val,
    scratch_keys,
    scratch_ptr,
):
    """Fill the column index of ``batch_columns``; returns the number of keys K.

    Slot i's keys lie in [i d, (i + 1) d) and, keys ascending, its entries in
    [slot_ent[i], slot_ent[i + 1]) (the nonzeros of its rows, ``slot_ent`` their
    running sum): the slots share no key, cursor element or entry, so each is
    indexed on its own (in parallel); its keys and their starts go to the slot's
    part of ``scratch_keys`` / ``scratch_ptr`` (it has at most as many keys as
    entries) and are packed into ``keys`` / ``key_ptr`` at the end.
    ``cursor`` (I * d,) is all 0 on entry and again on exit."""
    n_slots = slot_ptr.shape[0] - 1
    n_slot_keys = np.zeros(n_slots, dtype=np.int64)
    for i in prange(n_slots):
        base = slot_ent[i]
        nk = 0
        for r in range(slot_ptr[i], slot_ptr[i + 1]):  # count entries per key, list keys
            row = nodes[r]
            for nz in range(indptr[row], indptr[row + 1]):
                key = i * n_features + indices[nz]
                if cursor[key] == 0:
                    scratch_keys[base + nk] = key
                    nk += 1
                cursor[key] += 1
        found = scratch_keys[base : base + nk]
        # ascending keys: sort the ones found, or scan the slot's d keys when cheaper
        if nk * 16 < n_features:
            found.sort()
        else:
            n = 0
            for key in range(i * n_features, (i + 1) * n_features):
                if cursor[key] != 0:
                    found[n] = key
                    n += 1
        start = base
        for kk in range(nk):  # cursor[key] <- its first entry
            key = found[kk]
            scratch_ptr[base + kk] = start
            count = cursor[key]
            cursor[key] = start
            start += count
        for r in range(slot_ptr[i], slot_ptr[i + 1]):  # entries, rows ascending per key
            row = nodes[r]
            for nz in range(indptr[row], indptr[row + 1]):
                key = i * n_features + indices[nz]
                e = cursor[key]
                ent_row[e] = r
                ent_val[e] = u_data[nz]
                cursor[key] = e + 1
        for kk in range(nk):
            cursor[found[kk]] = 0
        n_slot_keys[i] = nk
    n_keys = 0
    for i in range(n_slots):
        slot_key_ptr[i] = n_keys
        n_keys += n_slot_keys[i]
    slot_key_ptr[n_slots] = n_keys
    for i in prange(n_slots):  # pack the slots' keys
        base = slot_ent[i]
        out = slot_key_ptr[i]
        for kk in range(n_slot_keys[i]):
            keys[out + kk] = scratch_keys[base + kk]
            key_ptr[out + kk] = scratch_ptr[base + kk]
    key_ptr[n_keys] = slot_ent[n_slots]
    return n_keys


@dataclass
class BatchColumns:
    """A batch's sparse inputs by column of W (``batch_columns``).

    Key ``i * d + j`` stands for feature j at slot i, i.e. column j of W_i (row
    ``i * d + j`` of W stored slot-major); ``keys`` (K,) ascending are the ones the
    batch uses.  Entries ``key_ptr[kk]:key_ptr[kk + 1]`` of ``ent_row`` / ``ent_val``
    are the distinct (slot, node) rows holding that feature (ascending) and their
    values of u; ``slot_key_ptr`` (I + 1,) delimits each slot's keys."""

    keys: np.ndarray
    slot_key_ptr: np.ndarray
    key_ptr: np.ndarray
    ent_row: np.ndarray
    ent_val: np.ndarray


def check_columns(name, cols, n_slots, n_rows, d=None):
    """Raise ValueError unless ``cols`` (BatchColumns) fits I = n_slots slots, R =
    n_rows rows and, when given, d features: the checks of the wrappers of the kernels
    that read it (capsules.predict_sparse, grads.predict_sparse_backward_cols)."""
    check_array(f"{name}: slot_key_ptr", cols.slot_key_ptr, (n_slots + 1,))
    n_keys = check_array(f"{name}: keys", cols.keys, (None,)).shape[0]
    check_array(f"{name}: key_ptr", cols.key_ptr, (n_keys + 1,))
    n_ent = check_array(f"{name}: ent_row", cols.ent_row, (None,)).shape[0]
    check_array(f"{name}: ent_val", cols.ent_val, (n_ent,))
    if n_ent and not (0 <= cols.ent_row.min() and cols.ent_row.max() < n_rows):
        raise ValueError(f"{name}: a row of ent_row lies outside [0, {n_rows})")
    if d is not None and n_keys and not (0 <= cols.keys.min() and cols.keys.max() < n_slots * d):
        raise ValueError(f"{name}: a key lies outside [0, {n_slots * d})")


_CURSOR = threading.local()


def batch_columns(features, nodes, slot_ptr):
    """Transpose a batch's rows of u (CSR) to columns of W: each column of each W_i
    the batch touches, once, with the rows that use it.

    The sparse products then read (forward) and write (backward) each touched
    column of W once, in ascending memory order, instead of once per nonzero in
    random order: a Citeseer batch has 24k nonzeros on 11k distinct columns of a
    17 MB W, and the random reads were bound by memory latency.  Sums keep the
    order of the row-wise formulation (features ascending within a row, rows
    ascending within a column), so the results are the same bits.

    features : SparseFeatures   nodes, slot_ptr : as ``share_slots``
    """
    n_slots = slot_ptr.shape[0] - 1
    n_features = features.shape[1]
    size = n_slots * n_features
    cursor = getattr(_CURSOR, "buffer", None)
    if cursor is None or cursor.shape[0] != size:
        cursor = np.zeros(size, dtype=np.int64)
        _CURSOR.buffer = cursor
    indptr = features.indptr
    ent_end = np.zeros(nodes.shape[0] + 1, dtype=np.int64)  # entries before row r
    np.cumsum(indptr[nodes + 1] - indptr[nodes], out=ent_end[1:])
    slot_ent = ent_end[slot_ptr]
    n_ent = int(slot_ent[-1])
    keys = np.empty(max(n_ent, 1), dtype=np.int64)
    key_ptr = np.empty(n_ent + 1, dtype=np.int64)
    slot_key_ptr = np.empty(n_slots + 1, dtype=np.int64)
    ent_row = np.empty(n_ent, dtype=np.int64)
    ent_val = np.empty(n_ent, dtype=features.u_data.dtype)
    scratch_keys = np.empty(max(n_ent, 1), dtype=np.int64)
    scratch_ptr = np.empty(max(n_ent, 1), dtype=np.int64)
    n_keys = _batch_columns(
        indptr,
        features.indices,
        features.u_data,
        nodes,
        slot_ptr,
        n_features,
        cursor,
        slot_ent,
        keys,
        slot_key_ptr,
        key_ptr,
        ent_row,
        ent_val,
        scratch_keys,
        scratch_ptr,
    )
    return BatchColumns(keys[:n_keys], slot_key_ptr, key_ptr[: n_keys + 1], ent_row, ent_val)


@dataclass
class BatchRows:
    """The distinct (slot, node) rows of a batch (``batch_rows``).

    ctx_t    (I, P) int64   the contexts, slot-major
    nodes    (R,)           the node of each row; rows [slot_ptr[i], slot_ptr[i + 1])
    slot_ptr (I + 1,)       are slot i's (``share_slots``)
    inv      (I, P)         pair p's slot i reads row ``inv[i, p]``
    cols     BatchColumns   the rows' nonzeros by column of W (sparse features), or None
    """

    ctx_t: np.ndarray
    nodes: np.ndarray
    slot_ptr: np.ndarray
    inv: np.ndarray
    cols: BatchColumns | None = None


def batch_rows(ctx, n_nodes, features=None):
    """Index a batch: ``ctx`` (P, I) int -> BatchRows; ``features`` a
    core.SparseFeatures (its column index is made too) or None.  Raises ValueError for a
    context node outside [0, n_nodes) (the kernels do not check)."""
    ctx_t = np.ascontiguousarray(np.asarray(ctx, dtype=np.int64).T)  # (I, P)
    if ctx_t.size and (ctx_t.min() < 0 or ctx_t.max() >= n_nodes):
        raise ValueError(
            f"context node ids must lie in [0, {n_nodes}), got [{ctx_t.min()}, {ctx_t.max()}]"
        )
    nodes, slot_ptr, inv = share_slots(ctx_t)
    cols = batch_columns(features, nodes, slot_ptr) if features is not None else None
    return BatchRows(ctx_t, nodes, slot_ptr, inv, cols)
