"""Single-label node classification on learned embeddings (scikit-learn): the
protocol of Cora, Citeseer and Pubmed, and the tuned C both protocols choose from.

Paper Sec. "Evaluation protocol", after Duran & Niepert 2017: for each of the 10
splits, an L2-regularised logistic regression is fit on ``O[train]`` and scored by
accuracy on ``val`` and ``test`` (:func:`classify_splits`).  Training evaluates every
epoch; for each split the epoch with the highest validation accuracy is kept and its
test accuracy reported, averaged over splits (:func:`select_epoch`).  Data without a
splits file gets seeded random stratified splits (:func:`random_splits`).

Tuned (``C="tuned"``): the classifier's C, which the paper fixes at 1, is chosen per
split from :data:`C_GRID`: on the split's validation nodes where it has them, else by
stratified 3-fold cross-validation within its training nodes (:func:`tuned_C`; the
multi-label protocol, caps2ne_np/evaluation/multilabel.py, draws from the same grid).
At C = 1 the scale of the embedding decides how hard the classifier is regularised (the
same rows times 4 act as C = 16), so a score at C = 1 says as much about the scale a
method writes as about the embedding; the tuned score says only the latter
(docs/evaluation.md).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.multiclass import OneVsRestClassifier
from threadpoolctl import threadpool_limits

from ..errors import InputError, InputWarning


def check_embedding(emb, n_rows: int, what: str) -> np.ndarray:
    emb = np.asarray(emb)
    if emb.ndim != 2 or emb.shape[0] != n_rows:
        raise ValueError(f"emb: expected shape ({n_rows}, k) to match {what}, got {emb.shape}")
    if not np.all(np.isfinite(emb)):
        raise ValueError(
            "emb: contains NaN or inf (did training diverge? try a lower learning rate)"
        )
    return emb


C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
"""The values of C the tuned protocol chooses from (log-spaced, as in the evidence that
asked for it: 0.01..1000)."""
TUNED = "tuned"
CV_FOLDS = 3


def check_C(C):
    """``C`` as a positive float, or :data:`TUNED`; ValueError naming the argument."""
    if isinstance(C, str):
        if C != TUNED:
            raise ValueError(f"C: expected a positive number or {TUNED!r}, got {C!r}")
        return C
    C = float(C)
    if not (np.isfinite(C) and C > 0):
        raise ValueError(f"C: expected a positive number or {TUNED!r}, got {C!r}")
    return C


def tuned_C(
    emb,
    labels,
    train,
    val=None,
    *,
    grid=C_GRID,
    folds=CV_FOLDS,
    seed=0,
    multinomial=True,
    max_iter=1000,
) -> float:
    """The C of ``grid`` whose logistic regression, fit on ``emb[train]``, scores the best
    accuracy on ``emb[val]`` (when ``val`` is given and not empty), else the best mean
    accuracy over ``folds``-fold stratified cross-validation within ``train`` (seeded;
    fewer folds when the smallest class has fewer members, none below 2: then C = 1).
    Ties go to the smaller C (the stronger regularisation)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import StratifiedKFold

    train = np.asarray(train, dtype=np.int64)
    y = labels[train]
    if val is not None and len(val):
        val = np.asarray(val, dtype=np.int64)
        parts = [(train, val)]
    else:
        k = min(folds, int(np.min(np.unique(y, return_counts=True)[1])))
        if k < 2:
            return 1.0
        cv = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
        parts = [(train[a], train[b]) for a, b in cv.split(np.zeros(y.size), y)]
    best, best_score = 1.0, -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for C in grid:
            score = 0.0
            for fit_on, score_on in parts:
                if np.unique(labels[fit_on]).size < 2:
                    continue
                clf = make_classifier(C, max_iter, multinomial)
                clf.fit(emb[fit_on], labels[fit_on])
                score += accuracy_score(labels[score_on], clf.predict(emb[score_on]))
            if score > best_score + 1e-12:
                best, best_score = float(C), score
    return best


def make_classifier(C: float, max_iter: int, multinomial: bool):
    """The protocol's classifier at ``C``: multinomial lbfgs logistic regression, or
    (``multinomial`` False) LIBLINEAR one-vs-rest."""
    if multinomial:
        return LogisticRegression(C=C, solver="lbfgs", max_iter=max_iter)
    # LIBLINEAR one-vs-rest, the default of scikit-learn < 0.22 and of LIBLINEAR [Fan et al. 2008]
    return OneVsRestClassifier(LogisticRegression(C=C, solver="liblinear", max_iter=max_iter))


def classify_splits(
    emb,
    labels,
    splits,
    C: float = 1.0,
    *,
    max_iter: int = 1000,
    multinomial: bool = True,
    blas_threads=1,
) -> dict:
    """Single-label node classification accuracy on each split.

    For split s: fit ``LogisticRegression(C)`` (L2, lbfgs, multinomial) on
    ``(emb[train_s], labels[train_s])``;  ``acc_part = mean(pred(emb[part_s]) == labels[part_s])``
    for part in val, test.

    Parameters
    ----------
    emb : (N, k) array
        Node embeddings, row i = node i.
    labels : (N,) int array
        Class per node; -1 (unlabelled) must not occur in a split.
    splits : list of dict
        ``{'train', 'val', 'test'}`` index arrays (see ``graphs.nodefiles.load_splits``).
    C : float or "tuned"
        Inverse L2 regularisation strength (scikit-learn's ``C``); ``"tuned"``: chosen
        per split by :func:`tuned_C` (on the split's validation nodes, else by
        cross-validation within its training nodes).
    max_iter : int
        lbfgs iteration cap.
    multinomial : bool
        ``False``: one-vs-rest LIBLINEAR instead (what the paper's reference,
        LIBLINEAR / old scikit-learn defaults, does).
    blas_threads : int or None
        BLAS threads while fitting (``threadpoolctl``); these problems are tiny and run
        about 10x faster on one thread than on several. ``None`` leaves BLAS alone.

    Returns
    -------
    dict
        ``protocol='single-label'``, ``val`` and ``test`` (n_splits,) float arrays of
        accuracies in [0, 1], and ``val_mean``, ``val_std``, ``test_mean``, ``test_std``
        (std over splits, ddof=0); ``test_macro_f1`` (n_splits,) and its mean
        ``test_macro_f1_mean`` (macro-F1 of the test nodes: classes of unequal size);
        ``C`` (n_splits,), the C each split's classifier used.
    """
    C = check_C(C)
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            "labels: expected a 1-D integer array of classes, "
            f"got shape {labels.shape} dtype {labels.dtype}"
        )
    emb = check_embedding(emb, labels.shape[0], "labels")
    if not splits:
        raise ValueError("splits: expected at least one {'train', 'val', 'test'} split")
    val = np.empty(len(splits), dtype=np.float64)
    test = np.empty(len(splits), dtype=np.float64)
    macro = np.empty(len(splits), dtype=np.float64)
    used = np.empty(len(splits), dtype=np.float64)
    if C == TUNED:
        _warn_untuned(labels, splits)
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        for s, split in enumerate(splits):
            val[s], test[s], macro[s], used[s] = _classify_one(
                emb, labels, split, s, C, max_iter, multinomial
            )
    return {
        "protocol": "single-label",
        "C": used,
        "val": val,
        "test": test,
        "test_macro_f1": macro,
        "test_macro_f1_mean": float(np.mean(macro)),
        **_means(val, test),
    }


def _means(val, test):
    """The mean and standard deviation of a result's validation and test accuracies."""
    return {
        "val_mean": float(np.mean(val)),
        "val_std": float(np.std(val)),
        "test_mean": float(np.mean(test)),
        "test_std": float(np.std(test)),
    }


def _warn_untuned(labels, splits):
    """An InputWarning naming the splits on which :func:`tuned_C` cannot tune and uses
    C = 1: no validation nodes, and a class of a single training node (too few to
    cross-validate)."""
    bad = []
    for s, split in enumerate(splits):
        train = np.asarray(split["train"], dtype=np.int64)
        if len(split["val"]) == 0 and train.size:
            counts = np.unique(labels[train], return_counts=True)[1]
            if counts.min() < 2:
                bad.append(s)
    if bad:
        warnings.warn(
            f"C tuned: {len(bad)} of {len(splits)} split(s) (split {bad[0]} first) have no "
            "validation nodes and a class of one training node, too few to cross-validate; "
            "C = 1 is used there (give validation nodes, e.g. --val-fraction 0.1, more "
            "training nodes, or a number for --C)",
            InputWarning,
            stacklevel=3,
        )


def random_splits(labels, train_fraction, n_splits=10, *, val_fraction=0.0, seed=0) -> list[dict]:
    """Random stratified splits of the labelled nodes, for data without a splits file.

    Split s draws, with scikit-learn's ``train_test_split(stratify=labels)``, a training
    part of ``train_fraction`` of the labelled nodes (label >= 0), then a validation
    part of ``val_fraction`` of them (empty for 0); the rest is the test part.  The
    splits are a function of ``seed`` alone.  Returns ``[{'train', 'val', 'test'}]``
    int64 index arrays, as ``graphs.nodefiles.load_splits``.
    """
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise InputError("random splits need one label per node (single-label data)")
    if not (0 < train_fraction < 1 and 0 <= val_fraction < 1 and train_fraction + val_fraction < 1):
        raise InputError(
            f"train fraction {train_fraction:g} and validation fraction {val_fraction:g} "
            "must be in (0, 1) and leave nodes to test"
        )
    nodes = np.flatnonzero(labels >= 0).astype(np.int64)
    seeds = np.random.SeedSequence(int(seed)).generate_state(n_splits, np.uint32)
    out = []
    for s in range(n_splits):
        state = int(seeds[s])
        what = f"train fraction {train_fraction:g} (--train-fraction)"
        try:
            train, rest = train_test_split(
                nodes, train_size=train_fraction, stratify=labels[nodes], random_state=state
            )
            val = np.empty(0, dtype=np.int64)
            if val_fraction > 0:
                what = f"validation fraction {val_fraction:g} (--val-fraction)"
                val, rest = train_test_split(
                    rest,
                    train_size=val_fraction / (1 - train_fraction),
                    stratify=labels[rest],
                    random_state=state,
                )
        except ValueError as err:
            raise InputError(
                f"{what}: cannot draw stratified splits of {nodes.size} labelled nodes "
                f"({err}); use a larger fraction or --splits"
            ) from None
        out.append({"train": np.sort(train), "val": np.sort(val), "test": np.sort(rest)})
    return out


def check_split(labels, split, s, name="") -> dict:
    """Split ``s``'s parts as int64 index arrays; InputError (starting with ``name``, as
    "splits: ") when a part holds an unlabelled node (label -1) or the training part
    has fewer than 2 classes."""
    idx = {part: np.asarray(split[part], dtype=np.int64) for part in ("train", "val", "test")}
    for part, ids in idx.items():
        if ids.size and labels[ids].min() < 0:
            raise InputError(
                f"{name}split {s} '{part}': contains unlabelled nodes (label -1); use "
                "labelled nodes only"
            )
    classes = np.unique(labels[idx["train"]]).size
    if classes < 2:
        raise InputError(
            f"{name}split {s} 'train': needs nodes of at least 2 classes, got {classes}"
        )
    return idx


def _classify_one(emb, labels, split, s, C, max_iter, multinomial):
    """(val accuracy, test accuracy, test macro-F1, the C used) of one split; NaN for an
    empty part.  ``C`` a number, or "tuned" (:func:`tuned_C`, seeded by the split)."""
    idx = check_split(labels, split, s)
    y_train = labels[idx["train"]]
    if C == TUNED:
        C = tuned_C(
            emb,
            labels,
            idx["train"],
            idx["val"],
            seed=s,
            multinomial=multinomial,
            max_iter=max_iter,
        )
    clf = make_classifier(C, max_iter, multinomial).fit(emb[idx["train"]], y_train)
    scores = []
    for part in ("val", "test"):
        ids = idx[part]
        scores.append(accuracy_score(labels[ids], clf.predict(emb[ids])) if ids.size else np.nan)
    ids = idx["test"]
    scores.append(
        f1_score(labels[ids], clf.predict(emb[ids]), average="macro") if ids.size else np.nan
    )
    return (*scores, C)


def select_epoch(per_epoch_results, epochs=None) -> dict:
    """Model selection on validation: per split, the epoch of highest val accuracy
    (ties -> earliest).

    ``best_s = argmax_e val[e, s]`` (first maximum);  reported ``test[best_s, s]``,
    mean and std over splits. Test accuracies never influence the choice.

    Parameters
    ----------
    per_epoch_results : list of dict
        One :func:`classify_splits` result per evaluated epoch, in epoch order.
    epochs : sequence of int, optional
        Epoch numbers of those results (default ``1 .. len(per_epoch_results)``).

    Returns
    -------
    dict
        ``protocol='epoch-selection'``, ``epochs`` (n_splits,) chosen epoch numbers,
        ``val`` and ``test`` (n_splits,) accuracies at those epochs, ``val_mean``,
        ``val_std``, ``test_mean``, ``test_std``.
    """
    if not per_epoch_results:
        raise ValueError("per_epoch_results: expected the results of at least one epoch")
    val = np.stack(
        [np.asarray(r["val"], dtype=np.float64) for r in per_epoch_results]
    )  # (n_epochs, n_splits)
    test = np.stack([np.asarray(r["test"], dtype=np.float64) for r in per_epoch_results])
    epochs = (
        np.arange(1, val.shape[0] + 1) if epochs is None else np.asarray(epochs, dtype=np.int64)
    )
    if epochs.shape != (val.shape[0],):
        raise ValueError(f"epochs: expected {val.shape[0]} epoch numbers, got shape {epochs.shape}")
    if np.isnan(val).any():
        raise ValueError(
            "per_epoch_results: validation accuracies contain NaN (empty 'val' parts?)"
        )
    best = np.argmax(val, axis=0)  # first maximum = earliest epoch on ties
    cols = np.arange(val.shape[1])
    chosen_val, chosen_test = val[best, cols], test[best, cols]
    return {
        "protocol": "epoch-selection",
        "epochs": epochs[best],
        "val": chosen_val,
        "test": chosen_test,
        **_means(chosen_val, chosen_test),
    }
