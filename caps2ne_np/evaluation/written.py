"""Choosing a model's written rows by a user's labels: the candidates (what ``train``
writes after training for each written option, from one model's trained o_v) and the
choice among them by cross-validation within the labelled nodes.  The ``choose``
command runs it (cli/choose.py); docs/evaluation.md, "Choosing the written rows with
your labels".

The written rows of a run are the o_v as trained (``--propagate none``), or
E = length x rownorm(U S^p) of the filtered o_v O~ = U S V^T (``--propagate on
--spectrum-power p --row-norm length``, spectral/propagation.py).  Which serves a task
best depends on the graph and the labels (docs/training.md, "The written spectrum" and
"The written scale"), and each costs seconds from the model file: :func:`candidates`
filters the o_v once and factorises O~ once, then forms each (p, length) from the same
O~, bit for bit the rows ``train`` writes with those options (tests/
test_written.py).  :func:`choose` scores each candidate by stratified k-fold
cross-validation among the labelled nodes it is given (nothing else is read: the labels
of other nodes never enter) with the logistic regression of the evaluation protocols
(evaluation/single.py, evaluation/multilabel.py), and picks the best.
"""

from __future__ import annotations

import logging
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..defaults import ROW_NORM, SPECTRUM_POWER
from ..errors import InputError
from .multilabel import MultilabelFit, multilabel_tuned_C
from .single import TUNED, check_C, make_classifier, tuned_C

log = logging.getLogger(__name__)

WRITTEN_POWERS = (0.5, 0.75, 1.0)
"""The spectrum powers p of the candidates (``--spectrum-power``)."""
WRITTEN_LENGTHS = (1.0, 2.0, 4.0)
"""The row lengths of the candidates (``--row-norm``): ProNE's unit rows, the default 2,
and 4 (at C = 1 a length acts as C times its square: docs/training.md)."""
NONE = "none"
"""The candidate of the o_v as trained (``--propagate none``)."""
DEFAULT_PREFER = (
    f"p={float(SPECTRUM_POWER):g} len={ROW_NORM:g}",
    f"p=0.5 len={ROW_NORM:g}",
    f"p=1 len={ROW_NORM:g}",
)
"""What a tie goes to first when :func:`choose` is told nothing else: the defaults' own
written rows on a featureless graph (p = SPECTRUM_POWER at the default length), then
those of ``--spectrum-power auto`` (p = 0.5 or 1)."""
TIE = 1e-9
"""Scores (percent) closer than this are a tie."""


def label(power, length):
    """The candidate label of ``--spectrum-power power --row-norm length``: 'p=0.5 len=2'."""
    return f"p={float(power):g} len={float(length):g}"


def parse(key):
    """``(p, length)`` of a candidate label, or None for :data:`NONE`; ValueError for
    any other text."""
    if key == NONE:
        return None
    try:
        p, length = key.split(" ")
        if not (p.startswith("p=") and length.startswith("len=")):
            raise ValueError
        return float(p[2:]), float(length[4:])
    except ValueError:
        raise ValueError(f"{key!r} is not a candidate label ('none' or 'p=0.5 len=2')") from None


def train_flags(key):
    """The ``train`` options that write the candidate ``key``."""
    if parse(key) is None:
        return "--propagate none"
    p, length = parse(key)
    return f"--propagate on --spectrum-power {p:g} --row-norm {length:g}"


def candidates(
    A,
    O,
    order,
    mu,
    theta,
    powers=WRITTEN_POWERS,
    lengths=WRITTEN_LENGTHS,
    dtype=np.float32,
    keys=None,
):
    """{label: (N, k) float32 rows}: ``'none'``, the o_v ``O`` (N, k) as trained (a
    float32 copy: what ``--propagate none`` writes), and ``label(p, length)`` for each of
    ``powers`` and ``lengths``: the rows ``train --propagate on --spectrum-power p
    --row-norm length`` writes for the same o_v, bit for bit (the filter of ``order``,
    ``mu``, ``theta`` in ``dtype``, the run's ``--spectral-precision``, over ``A``, the
    symmetric adjacency as training builds it: spectral.adjacency).  ``keys``: only
    these labels (ValueError for one that is not among them).

    O~ is filtered once and factorised once (propagation.projections); each candidate
    is then one pass over O~.  Memory: O~ (N, k) in ``dtype`` while it runs, and one
    (N, k) float32 array per candidate returned (10 for the defaults, 1 + 3 x 3: pass
    ``keys`` to hold fewer).  A candidate whose rows ``train`` would not write (a zero or
    non-finite row, or most rows made identical: propagation.check_rows; ``train``
    writes the o_v instead, the 'none' candidate) is left out, with a warning."""
    from threadpoolctl import threadpool_limits

    from ..spectral import propagation

    every = [NONE] + [label(p, length) for p in powers for length in lengths]
    wanted = every if keys is None else list(keys)
    unknown = [k for k in wanted if k not in every]
    if unknown:
        raise ValueError(f"keys: {unknown[0]!r} is not a candidate; the candidates: {every}")
    out = {}
    if NONE in wanted:
        out[NONE] = np.array(O, dtype=np.float32)
    chosen = [parse(k) for k in every if k in wanted and k != NONE]
    if not chosen:
        return out
    A = sp.csr_matrix(A, dtype=np.float64)
    with threadpool_limits(limits=1, user_api="blas"):  # propagation.propagate's bits
        Ot = propagation.filtered(A, O, order, mu, theta, dtype=dtype)
        maps = propagation.projections(Ot, sorted({p for p, _ in chosen}))
        for p, length in chosen:
            E = propagation.written_rows(Ot, maps[p], float(length))
            problem, _ = propagation.check_rows(E, O)
            if problem:
                log.warning(
                    "%s left out: train would write the o_v as trained (%s)",
                    label(p, length),
                    problem,
                )
                continue
            out[label(p, length)] = E
    return out


class Choice(NamedTuple):
    """What :func:`choose` found: the ``best`` label, every candidate's ``scores``
    {label: mean CV score in percent}, the ``margin`` of the best over the
    ``runner_up`` (points; NaN with one candidate), and the number of labelled
    ``nodes`` scored in ``folds`` folds."""

    best: str
    scores: dict
    margin: float
    runner_up: str | None
    nodes: int
    folds: int


def check_folds(y, folds, names=None):
    """InputError (one line) unless the classes ``y`` (int, one per labelled node) allow
    ``folds``-fold stratified cross-validation: at least 2 classes, each with at least
    ``folds`` nodes (every fold then holds each class).  ``names[c]``: class c's name in
    the message."""
    classes, counts = np.unique(np.asarray(y), return_counts=True)
    if classes.size < 2:
        raise InputError(
            f"the labelled nodes hold {classes.size} class(es); choosing by "
            "classification needs at least 2"
        )
    small = np.flatnonzero(counts < folds)
    if small.size:
        c = classes[small[0]]
        name = names[c] if names is not None else c
        raise InputError(
            f"class {str(name)!r} has {counts[small[0]]} labelled node(s) ({small.size} "
            f"class(es) have fewer than {folds}); {folds}-fold cross-validation needs at "
            f"least {folds} per class: label more nodes, drop that class's lines, or "
            "lower --folds (at least 2)"
        )


def _labelled(labels, nodes):
    """(the labelled ``nodes`` as int64 indices, their labels: (n,) int classes or an
    (n, L') CSR 0/1 matrix of the labels they hold, multilabel).  Only the rows of
    ``nodes`` are read; a node there without a label is left out (it has none to
    predict)."""
    nodes = np.asarray(nodes)
    if nodes.dtype == np.bool_:
        nodes = np.flatnonzero(nodes)
    nodes = nodes.astype(np.int64, copy=False).ravel()
    n = labels.shape[0]
    if nodes.size and (nodes.min() < 0 or nodes.max() >= n):
        raise ValueError(f"nodes: indices must lie in [0, {n}), got {nodes.min()}..{nodes.max()}")
    if np.unique(nodes).size != nodes.size:
        raise ValueError("nodes: an index is given twice")
    if sp.issparse(labels) or np.ndim(labels) == 2:
        Y = sp.csr_matrix(labels)[nodes]
        if Y.nnz and not np.all((Y.data == 0) | (Y.data == 1)):
            raise ValueError("labels: expected an (N, L) 0/1 label indicator matrix")
        Y.eliminate_zeros()
        keep = np.diff(Y.indptr) > 0
        Y = Y[keep]
        present = np.flatnonzero(np.diff(Y.tocsc().indptr) > 0)  # labels of these nodes
        return nodes[keep], sp.csr_matrix(Y[:, present], dtype=np.int64), True
    y = np.asarray(labels)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"labels: expected (N,) int classes or an (N, L) 0/1 matrix, got {y.dtype} "
            f"of shape {y.shape}"
        )
    y = y[nodes]
    keep = y >= 0
    return nodes[keep], y[keep], False


def _folds(y, multilabel, folds, seed):
    """[(train, test)] positions of ``folds``-fold cross-validation over the labelled
    nodes: stratified by class (single-label), else shuffled KFold; seeded."""
    from sklearn.model_selection import KFold, StratifiedKFold

    if multilabel:
        if y.shape[0] < folds:
            raise InputError(
                f"{y.shape[0]} labelled node(s): {folds}-fold cross-validation needs at "
                "least one per fold; label more nodes or lower --folds"
            )
        cv = KFold(n_splits=folds, shuffle=True, random_state=seed)
        return list(cv.split(np.zeros(y.shape[0])))
    check_folds(y, folds)
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return list(cv.split(np.zeros(y.size), y))


def _cv_score(X, y, multilabel, parts, C, seed):
    """Mean over ``parts`` of the held-out fold's score, in percent: accuracy
    (single-label), or micro-F1 of the top-k labels (multi-label); C a number or
    'tuned' (chosen within each fold's training part)."""
    from sklearn.metrics import accuracy_score

    total = 0.0
    for train, test in parts:
        if multilabel:
            fit = MultilabelFit(y, 1.0, "lbfgs", 1000, None, 0.0)
            fit.C = multilabel_tuned_C(X, fit, train, seed) if C == TUNED else C
            total += fit(X, train, test)[0]
            continue
        used = tuned_C(X, y, train, None, seed=seed) if C == TUNED else C
        clf = make_classifier(used, 1000, True).fit(X[train], y[train])
        total += accuracy_score(y[test], clf.predict(X[test]))
    return 100.0 * total / len(parts)


def _order(keys, prefer):
    """``keys`` in the order a tie goes: ``prefer`` first (in its order), then 'none',
    then by p and length, then any other label by its text."""

    def rank(key):
        if key in prefer:
            return (0, prefer.index(key), 0.0, 0.0, "")
        try:
            pl = parse(key)
        except ValueError:
            return (3, 0, 0.0, 0.0, key)
        return (1, 0, 0.0, 0.0, "") if pl is None else (2, 0, *pl, "")

    return sorted(keys, key=rank)


def choose(cands, labels, nodes, C=1.0, folds=3, seed=0, *, prefer=DEFAULT_PREFER):
    """The candidate of ``cands`` ({label: (N, k) rows}, :func:`candidates`) that
    classifies the labelled ``nodes`` best: a :class:`Choice`.

    labels : (N,) int classes (-1: unlabelled), or an (N, L) 0/1 label matrix
        (scipy.sparse or ndarray: multi-label)
    nodes : indices (or an (N,) boolean mask) of the nodes whose labels may be read;
        only their rows of ``labels`` and of each candidate are read (a node among them
        without a label is left out)
    C : the logistic regression's C (a number, or 'tuned': chosen from the protocols'
        grid within each fold's training part, evaluation/single.py)
    folds, seed : ``folds``-fold cross-validation within the nodes, stratified by class
        (single-label; shuffled KFold for multi-label), seeded: the same folds for every
        candidate, the same choice for the same arguments
    prefer : a label or labels that a tie goes to first (the run's own choice; the
        command passes the model's), then 'none', then by p and length

    A candidate's score is the mean over the folds of the held-out fold's accuracy
    (single-label: multinomial lbfgs logistic regression as evaluate fits it) or
    micro-F1 (multi-label: one-vs-rest, top-k labels, as evaluate's multi-label
    protocol), in percent.  InputError (one line) when the labels do not allow the
    folds: fewer than ``folds`` labelled nodes of a class, or one class only."""
    from threadpoolctl import threadpool_limits

    if not cands:
        raise ValueError("cands: expected at least one candidate")
    C = check_C(C)
    if int(folds) != folds or folds < 2:
        raise ValueError(f"folds: expected an integer >= 2, got {folds!r}")
    folds = int(folds)
    idx, y, multilabel = _labelled(labels, nodes)
    parts = _folds(y, multilabel, folds, seed)
    prefer = (prefer,) if isinstance(prefer, str) else tuple(prefer or ())
    order = _order(list(cands), prefer)
    scores = {}
    with threadpool_limits(limits=1, user_api="blas"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Label .* is present in all training examples")
        for key in order:
            X = np.asarray(cands[key])[idx]
            if not np.isfinite(X).all():
                raise ValueError(f"cands[{key!r}]: rows of the labelled nodes are not finite")
            scores[key] = _cv_score(X, y, multilabel, parts, C, seed)
    top = max(scores.values())
    best = next(k for k in order if scores[k] >= top - TIE)
    others = [k for k in order if k != best]
    runner = max(others, key=lambda k: scores[k]) if others else None  # first on ties
    margin = scores[best] - scores[runner] if runner is not None else float("nan")
    return Choice(best, {k: scores[k] for k in cands}, margin, runner, int(idx.size), folds)
