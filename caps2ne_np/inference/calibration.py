"""The calibration of Algorithm 3's outputs: a map from the mean capsule output e of a
node onto the scale of the output vectors o_v, fitted on training nodes, so that a
classifier fitted on the o_v applies to new nodes (docs/inductive.md).

    idx = calibration_nodes(node_ids, graph)     # training nodes with edges (a sample)
    cal = fit_calibration(E[idx], O[idx], method) # 'diag' (default), 'scale', 'linear'
    E'  = apply_calibration(E_new, cal)           # e A + b

``infer.calibrate`` embeds the training nodes by Algorithm 3 and fits the map;
``infer.infer_embeddings`` applies it (``aggregate='calibrated'``, the default), after
``check_settings`` has compared the Z and positions it was fitted with.
"""

import warnings

import numpy as np

from ..defaults import CALIBRATION_METHODS, DEFAULT_CALIBRATION
from ..errors import InputError, InputWarning
from ..io.modelcheck import RECALIBRATE, check_calibration

CALIBRATION_NODES = 10000
"""At most this many training nodes (a seeded sample) are embedded to fit a calibration."""


def calibration_nodes(node_ids, graph, max_nodes=CALIBRATION_NODES, seed=0):
    """Graph indices of the model's training nodes used to fit a calibration, int64.

    node_ids : id strings of the model's training nodes

    The training nodes present in ``graph`` (ids compared as strings) that have an edge
    there (an edgeless node's o_v was learned from its own features alone); all present
    training nodes if none has one.  More than ``max_nodes``: a seeded sample of them.
    """
    index = {nid: i for i, nid in enumerate(graph.node_ids)}
    idx = np.array(sorted(index[nid] for nid in node_ids if nid in index), dtype=np.int64)
    if idx.size < 2:
        raise InputError(
            f"the graph holds {idx.size} of the model's training nodes; calibration "
            "needs the training nodes and their edges (at least 2)"
        )
    out_degree = np.diff(graph.indptr)
    # in-degree: the stored entries of each column (an undirected graph's CSR is symmetric)
    in_degree = (
        np.bincount(graph.indices, minlength=graph.n_nodes) if graph.directed else out_degree
    )
    deg = out_degree[idx] + in_degree[idx]
    if np.count_nonzero(deg) >= 2:
        idx = idx[deg > 0]
    if idx.size > max_nodes:
        idx = np.sort(np.random.default_rng(seed).choice(idx, max_nodes, replace=False))
    return idx


def fit_calibration(E, O, method=DEFAULT_CALIBRATION):
    """A map from mean capsule outputs e to the output vectors o of the same training nodes.

    E, O   : (n, k) the Algorithm 3 mean e and the trained o_v of n training nodes
    method : 'scale'  o ~ s e,  s = mean_v |o_v| / mean_v |e_v|  (recovers o_v's scale)
             'diag'   o_j ~ a_j e_j + b_j per dimension j (least squares; the default,
                      chosen on validation: docs/inductive.md)
             'linear' o ~ A^T e + b (ridge least squares, lambda = 1e-3 tr(E^T E) / k)

    Returns a dict: method, ``A`` float32 (k, k) (diagonal for 'scale' and 'diag'), ``b``
    float32 (k,), and n.  ``apply_calibration`` computes e A + b.
    """
    if method not in CALIBRATION_METHODS:
        raise InputError(f"calibration method must be one of {CALIBRATION_METHODS}, got {method!r}")
    E = np.asarray(E, dtype=np.float64)
    O = np.asarray(O, dtype=np.float64)
    if E.ndim != 2 or E.shape != O.shape or E.shape[0] < 2:
        raise InputError(
            f"calibration needs two (n, k) arrays with n >= 2, got {E.shape} and {O.shape}"
        )
    n, k = E.shape
    b = np.zeros(k)
    if method == "scale":
        norm_e = np.linalg.norm(E, axis=1).mean()
        if not norm_e > 0:
            raise InputError(
                "every capsule output of the calibration nodes is zero; cannot calibrate"
            )
        A = np.eye(k) * (np.linalg.norm(O, axis=1).mean() / norm_e)
    elif method == "diag":
        Ec, Oc = E - E.mean(axis=0), O - O.mean(axis=0)
        var = np.einsum("ij,ij->j", Ec, Ec)
        a = np.where(var > 0, np.einsum("ij,ij->j", Ec, Oc) / np.where(var > 0, var, 1.0), 0.0)
        A = np.diag(a)
        b = O.mean(axis=0) - a * E.mean(axis=0)
    else:
        Em = E.mean(axis=0)
        Ec, Oc = E - Em, O - O.mean(axis=0)
        G = Ec.T @ Ec
        lam = 1e-3 * np.trace(G) / k
        A = np.linalg.solve(G + lam * np.eye(k), Ec.T @ Oc)
        b = O.mean(axis=0) - Em @ A
    return dict(method=method, A=A.astype(np.float32), b=b.astype(np.float32), n=int(n))


def apply_calibration(E, calibration):
    """e A + b (float64 products, float32 out): E (V, k) in the space of the o_v.

    The calibration is checked first (``modelfile.check_calibration``: shapes, finite,
    below 1e18); InputError when the result would not be finite in float32."""
    check_calibration(calibration, E.shape[1])
    A, b = np.asarray(calibration["A"]), np.asarray(calibration["b"])
    with np.errstate(over="ignore", invalid="ignore"):
        out = (np.asarray(E, dtype=np.float64) @ A.astype(np.float64) + b).astype(np.float32)
    if not np.isfinite(out).all():
        top = float(np.max(np.abs(A)))
        raise InputError(
            f"the calibration (A up to {top:.3g}) maps these embeddings beyond float32's "
            f"range; {RECALIBRATE}"
        )
    return out


def check_settings(calibration, samples, positions):
    """An ``InputWarning`` when ``calibration`` was fitted with another Z than ``samples``
    or other positions than ``positions`` (a list of ints), or does not say which: the
    norm of a mean of Z outputs depends on Z, so the scale of the outputs may differ."""
    cal, Z = calibration, samples
    if "samples" not in cal or "positions" not in cal:
        warnings.warn(
            f"the calibration does not say with which Z and positions it was fitted "
            f"(no 'samples' or 'positions'); inferring with Z = {Z}: the scale of the "
            "outputs may differ (fit it with infer.calibrate)",
            InputWarning,
            stacklevel=3,
        )
    elif cal.get("samples") != Z or cal.get("positions") != positions:
        warnings.warn(
            f"the calibration was fitted with Z = {cal.get('samples')} at positions "
            f"{cal.get('positions')}; inferring with Z = {Z}: the scale of the "
            "outputs may differ (recalibrate with the same settings)",
            InputWarning,
            stacklevel=3,
        )
