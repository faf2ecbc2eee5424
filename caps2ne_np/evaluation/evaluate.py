"""Node classification as the ``evaluate`` command runs it: the paper's protocol on one
or more embeddings of the same nodes, the epoch chosen among several
(:func:`evaluate_embeddings`).  Each protocol lives in a module of its own in
caps2ne_np/evaluation/, and is imported from there:

- ``single.py``: single-label (Cora, Citeseer, Pubmed): :func:`classify_splits`,
  :func:`select_epoch`, :func:`random_splits`, and the tuned C (:func:`tuned_C`,
  :data:`C_GRID`) both protocols choose from;
- ``multilabel.py``: multi-label (PPI, POS, BlogCatalog): :func:`multilabel_f1`,
  :func:`multilabel_select_epoch`, :func:`top_k_predictions`;
- ``report.py``: :func:`format_table` and :func:`jsonable`;
- ``inductive.py``: the inductive split of Sec. 4.3 (:func:`inductive_split`).

Exact definitions and the departures from the paper are in ``docs/evaluation.md``.
"""

from __future__ import annotations

import logging

import numpy as np

from ..errors import InputError
from .multilabel import multilabel_f1, multilabel_select_epoch
from .single import classify_splits, random_splits, select_epoch

__all__ = ["DEFAULT_TRAIN_FRACTION", "evaluate_embeddings"]

log = logging.getLogger(__name__)


DEFAULT_TRAIN_FRACTION = 0.5
"""Single-label data without splits or a training fraction: random stratified splits
training on this fraction of the labelled nodes (``n_shuffles`` of them, seeded)."""


def evaluate_embeddings(
    embs,
    labels,
    multilabel,
    splits=None,
    *,
    fractions=(0.1, 0.5, 0.9),
    n_shuffles=10,
    seed=0,
    C=1.0,
    solver="lbfgs",
    cv_folds=3,
    train_fraction=None,
    val_fraction=0.0,
    note=log.info,
):
    """The paper's protocol on one or more embeddings of the same nodes (one per epoch):
    ``(results, chosen)``, one result per embedding, plus the epoch-selection result
    when there are several, and the name of that last row (``chosen``).

    embs : list of (N, k) arrays, rows in the order of ``labels``
    labels : (N,) int classes (single-label), or an (N, L) 0/1 sparse indicator matrix
        with ``multilabel`` True
    splits : list of {'train', 'val', 'test'} index arrays, or None (single-label:
        ``n_shuffles`` random stratified splits training on ``train_fraction``, default
        ``DEFAULT_TRAIN_FRACTION``, with ``val_fraction`` held out for validation)

    Multi-label (:func:`multilabel_f1` at the training ``fractions``): only the
    labelled nodes are scored (an unlabelled node has no label to predict); several
    embeddings choose the epoch by ``cv_folds``-fold cross-validation on each training
    part (:func:`multilabel_select_epoch`).  Single-label (:func:`classify_splits`):
    several embeddings choose the epoch per split on validation (:func:`select_epoch`).
    ``note(text)`` receives what the run decided for the user (the labelled nodes
    scored, random splits drawn).  InputError (one line) for what cannot be scored.
    """
    if train_fraction is not None and multilabel:
        raise InputError(
            "--train-fraction is for single-label data; the multi-label protocol "
            "takes its training fractions from --fractions"
        )
    options = dict(n_shuffles=n_shuffles, seed=seed, C=C, solver=solver)
    if multilabel:
        results = _multilabel_protocol(embs, labels, fractions, cv_folds, note, **options)
        return results, "epoch selected by cross-validation on each training part"
    if train_fraction is not None:
        splits = random_splits(
            labels, train_fraction, n_shuffles, val_fraction=val_fraction, seed=seed
        )
        if len(embs) > 1 and not val_fraction:
            raise InputError(
                "several -e files: choosing the epoch needs validation nodes; "
                "add --val-fraction (e.g. 0.1)"
            )
    if splits is None:  # neither splits nor a training fraction: seeded random splits
        if len(embs) > 1 and not val_fraction:
            raise InputError(
                "several -e files: choosing the epoch needs validation nodes; give "
                "--splits, or --train-fraction with --val-fraction (e.g. 0.1)"
            )
        splits = random_splits(
            labels, DEFAULT_TRAIN_FRACTION, n_shuffles, val_fraction=val_fraction, seed=seed
        )
        note(
            f"note: no --splits or --train-fraction: scoring on {n_shuffles} random stratified "
            f"splits training on {DEFAULT_TRAIN_FRACTION:g} of the labelled nodes "
            f"(--seed {seed}); pass --splits or --train-fraction to choose"
        )
    results = [classify_splits(e, labels, splits, C=C, multinomial=solver == "lbfgs") for e in embs]
    if len(results) > 1:
        results.append(select_epoch(results))
    return results, "epoch selected on validation"


def _multilabel_protocol(embs, labels, fractions, cv_folds, note, **options):
    """``evaluate_embeddings`` on multi-label data: the labelled nodes only."""
    # an unlabelled node has no label to predict (k_i = 0) and would count as a free
    # correct answer or a free miss
    n_nodes = embs[0].shape[0]
    labelled = np.flatnonzero(np.diff(labels.tocsr().indptr) > 0)
    if labelled.size < n_nodes:
        note(
            f"scoring the {labelled.size} labelled nodes of {n_nodes} "
            f"({n_nodes - labelled.size} have no label)"
        )
        labels = labels.tocsr()[labelled]
        embs = [e[labelled] for e in embs]
    n_scored = labelled.size
    for g in fractions:
        if int(g * n_scored) < 1 or int(g * n_scored) >= n_scored:
            raise InputError(
                f"--fractions: {g:g} of {n_scored} labelled nodes leaves "
                f"{int(g * n_scored)} training and {n_scored - int(g * n_scored)} "
                f"test nodes; use fractions between {1 / n_scored:.3g} and "
                f"{1 - 1 / n_scored:.3g}"
            )
    results = [multilabel_f1(e, labels, fractions, **options) for e in embs]
    if len(results) > 1:
        if int(min(fractions) * n_scored) < cv_folds:
            raise InputError(
                f"--cv-folds: {cv_folds} folds need at least {cv_folds} "
                f"training nodes in the smallest fraction"
            )
        results.append(
            multilabel_select_epoch(embs, labels, fractions, n_folds=cv_folds, **options)
        )
    return results
