"""Node classification on learned embeddings (scikit-learn): the paper's two protocols.

Single-label (Cora, Citeseer, Pubmed; paper Sec. "Evaluation protocol", after Duran &
Niepert 2017): for each of the 10 splits, an L2-regularised logistic regression is fit
on ``O[train]`` and scored by accuracy on ``val`` and ``test``
(:func:`classify_splits`). Training evaluates every epoch; for each split the epoch
with the highest validation accuracy is kept and its test accuracy reported, averaged
over splits (:func:`select_epoch`).

Multi-label (PPI, POS, BlogCatalog; after Perozzi et al. 2014): a fraction gamma of the
nodes, shuffled, trains a one-vs-rest logistic regression; every other node receives its
k most probable labels, k = its true number of labels; micro- and macro-F1 are averaged
over shuffles (:func:`multilabel_f1`).

Tuned (``C="tuned"``, both protocols): the classifier's C, which the paper fixes at 1, is
chosen per split from :data:`C_GRID`: on the split's validation nodes where it has them,
else by stratified 3-fold cross-validation within its training nodes
(:func:`tuned_C`); multi-label, by 3-fold cross-validation on the first shuffle's
training part at each fraction, then used for every shuffle.  At C = 1 the scale of
the embedding decides how hard the classifier is regularised (the same rows times 4
act as C = 16), so a score at C = 1 says as much about the scale a method writes as
about the embedding; the tuned score says only the latter (docs/evaluation.md).

Inductive (paper Sec. 4.3): the test nodes and every edge touching them are removed
(:func:`inductive_split`), a model is trained on the rest, and the test nodes are
embedded by Algorithm 3 on the full graph (``infer.infer_embeddings``) before the
classifier scores them (docs/inductive.md).

Exact definitions and the departures from the paper are in ``docs/evaluation.md``.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.multiclass import OneVsRestClassifier
from threadpoolctl import threadpool_limits

from .errors import InputError, InputWarning
from .graphs.csr import Graph

__all__ = [
    "C_GRID",
    "tuned_C",
    "classify_splits",
    "select_epoch",
    "multilabel_f1",
    "multilabel_select_epoch",
    "top_k_predictions",
    "format_table",
    "evaluate_embeddings",
    "inductive_split",
]

log = logging.getLogger(__name__)


def _check_embedding(emb, n_rows: int, what: str) -> np.ndarray:
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


def _check_C(C):
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
                clf = _make_classifier(C, max_iter, multinomial)
                clf.fit(emb[fit_on], labels[fit_on])
                score += accuracy_score(labels[score_on], clf.predict(emb[score_on]))
            if score > best_score + 1e-12:
                best, best_score = float(C), score
    return best


def _make_classifier(C: float, max_iter: int, multinomial: bool):
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
    C = _check_C(C)
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            "labels: expected a 1-D integer array of classes, "
            f"got shape {labels.shape} dtype {labels.dtype}"
        )
    emb = _check_embedding(emb, labels.shape[0], "labels")
    if not splits:
        raise ValueError("splits: expected at least one {'train', 'val', 'test'} split")
    val = np.empty(len(splits), dtype=np.float64)
    test = np.empty(len(splits), dtype=np.float64)
    macro = np.empty(len(splits), dtype=np.float64)
    used = np.empty(len(splits), dtype=np.float64)
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
        "val_mean": float(np.mean(val)),
        "val_std": float(np.std(val)),
        "test_mean": float(np.mean(test)),
        "test_std": float(np.std(test)),
    }


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
        try:
            train, rest = train_test_split(
                nodes, train_size=train_fraction, stratify=labels[nodes], random_state=state
            )
            val = np.empty(0, dtype=np.int64)
            if val_fraction > 0:
                val, rest = train_test_split(
                    rest,
                    train_size=val_fraction / (1 - train_fraction),
                    stratify=labels[rest],
                    random_state=state,
                )
        except ValueError as err:
            raise InputError(
                f"train fraction {train_fraction:g}: cannot draw stratified splits of "
                f"{nodes.size} labelled nodes ({err}); use a larger fraction or --splits"
            ) from None
        out.append({"train": np.sort(train), "val": np.sort(val), "test": np.sort(rest)})
    return out


def _classify_one(emb, labels, split, s, C, max_iter, multinomial):
    """(val accuracy, test accuracy, test macro-F1, the C used) of one split; NaN for an
    empty part.  ``C`` a number, or "tuned" (:func:`tuned_C`, seeded by the split)."""
    idx = {part: np.asarray(split[part], dtype=np.int64) for part in ("train", "val", "test")}
    for part, ids in idx.items():
        if ids.size and labels[ids].min() < 0:
            raise InputError(
                f"split {s} '{part}': contains unlabelled nodes (label -1); use labelled nodes only"
            )
    y_train = labels[idx["train"]]
    if np.unique(y_train).size < 2:
        raise InputError(
            f"split {s} 'train': needs nodes of at least 2 classes, got {np.unique(y_train).size}"
        )
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
    clf = _make_classifier(C, max_iter, multinomial).fit(emb[idx["train"]], y_train)
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
        "val_mean": float(np.mean(chosen_val)),
        "val_std": float(np.std(chosen_val)),
        "test_mean": float(np.mean(chosen_test)),
        "test_std": float(np.std(chosen_test)),
    }


def top_k_predictions(proba, k) -> np.ndarray:
    """0/1 (n, L) int64 matrix with ones at each row's ``k[i]`` largest probabilities.

    Ties are broken towards the lower label index (stable sort of ``-proba``).
    """
    proba = np.asarray(proba)
    k = np.asarray(k, dtype=np.int64)
    order = np.argsort(-proba, axis=1, kind="stable")
    pred = np.zeros(proba.shape, dtype=np.int64)
    take = np.arange(proba.shape[1])[None, :] < k[:, None]  # the first k[i] positions of row i
    rows = np.broadcast_to(np.arange(proba.shape[0])[:, None], order.shape)
    pred[rows[take], order[take]] = 1
    return pred


def _check_multilabel(Y, train_fractions, n_shuffles, solver):
    """Validated (CSR 0/1 int64 Y, fractions array, training-part sizes)."""
    Y = sp.csr_matrix(Y)
    if Y.ndim != 2 or (Y.nnz and not np.all((Y.data == 0) | (Y.data == 1))):
        raise ValueError("Y: expected an (N, L) 0/1 label indicator matrix")
    Y = sp.csr_matrix(Y, dtype=np.int64)
    Y.eliminate_zeros()
    fractions = np.asarray(train_fractions, dtype=np.float64).reshape(-1)
    n = Y.shape[0]
    if fractions.size == 0 or np.any(fractions <= 0) or np.any(fractions >= 1):
        raise ValueError(f"train_fractions: expected values in (0, 1), got {list(train_fractions)}")
    if n_shuffles < 1:
        raise ValueError(f"n_shuffles: expected >= 1, got {n_shuffles}")
    if solver not in ("lbfgs", "liblinear"):
        raise ValueError(f"solver: expected 'lbfgs' or 'liblinear', got {solver!r}")
    n_train = (fractions * n).astype(np.int64)
    if np.any(n_train < 1) or np.any(n_train >= n):
        raise ValueError(
            f"train_fractions: {list(train_fractions)} leaves an empty train or test part for N={n}"
        )
    return Y, fractions, n_train


def _shuffles(n, n_shuffles, seed):
    """The node permutations of the multi-label protocol (shared by every fraction)."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n) for _ in range(n_shuffles)]


class _MultilabelFit:
    """One fit of the DeepWalk protocol: one-vs-rest logistic regression on the
    ``train`` nodes, top-k labels for the ``test`` nodes (k = true label count),
    returns (micro-F1, macro-F1)."""

    def __init__(self, Y, C, solver, max_iter, n_jobs, zero_division):
        self.Y, self.C, self.solver, self.max_iter = Y, C, solver, max_iter
        self.n_jobs, self.zero_division = n_jobs, zero_division
        self.counts = np.diff(Y.indptr)  # k_i = number of true labels of node i

    def __call__(self, emb, train, test):
        clf = OneVsRestClassifier(
            LogisticRegression(C=self.C, solver=self.solver, max_iter=self.max_iter),
            n_jobs=self.n_jobs,
        )
        proba = clf.fit(emb[train], self.Y[train]).predict_proba(emb[test])
        pred = top_k_predictions(proba, self.counts[test])
        y_true = self.Y[test].toarray()
        return (
            f1_score(y_true, pred, average="micro", zero_division=self.zero_division),
            f1_score(y_true, pred, average="macro", zero_division=self.zero_division),
        )


def multilabel_f1(
    emb,
    Y,
    train_fractions=(0.1, 0.5, 0.9),
    n_shuffles: int = 10,
    seed: int = 0,
    C: float = 1.0,
    *,
    max_iter: int = 1000,
    zero_division: float = 0.0,
    n_jobs=None,
    blas_threads=1,
    solver: str = "lbfgs",
) -> dict:
    """Multi-label node classification, DeepWalk protocol: micro/macro-F1 per training fraction.

    ``n_shuffles`` permutations of the nodes are drawn once from
    ``np.random.default_rng(seed)`` and shared by all fractions. For fraction gamma and
    permutation p: train = ``p[:int(gamma * N)]``, test = the rest; fit
    ``OneVsRestClassifier(LogisticRegression(C))`` on train; each test node i gets its
    ``k_i = |Y_i|`` most probable labels; score ``f1_score(average='micro'|'macro')``
    over all L labels. A label absent from a training part gets a constant classifier
    (probability 0 or 1) instead of an error.

    Parameters
    ----------
    emb : (N, k) array
    Y : (N, L) 0/1 indicator, dense or scipy.sparse
    train_fractions : sequence of float in (0, 1)
    n_shuffles : int
    seed : int
    C : float or "tuned"
        Inverse L2 regularisation strength of each binary classifier; ``"tuned"``: at each
        fraction, the C of :data:`C_GRID` with the best micro-F1 over 3-fold
        cross-validation within the first shuffle's training part, used for every
        shuffle of that fraction (the result's ``C``, one per fraction).
    zero_division : float
        F1 of a label with no true and no predicted test node (scikit-learn's
        ``zero_division``; 0 counts it against macro-F1, as DeepWalk's scorer did).
    n_jobs : int, optional
        Parallel binary classifiers (``OneVsRestClassifier(n_jobs=)``).
    blas_threads : int or None
        BLAS threads while fitting (see :func:`classify_splits`).
    solver : {"lbfgs", "liblinear"}
        Of each binary ``LogisticRegression``.  "liblinear" is DeepWalk's own scorer
        (example_graphs/scoring.py: ``LogisticRegression()`` under scikit-learn <
        0.22), which also penalises the intercept; that changes how the binary
        classifiers' probabilities rank against one another in the top-k step.

    Returns
    -------
    dict
        ``protocol='multi-label'``, ``fractions`` (n_f,), ``micro`` and ``macro``
        (n_f, n_shuffles) scores in [0, 1], ``micro_mean``, ``micro_std``,
        ``macro_mean``, ``macro_std`` (n_f,), std over shuffles with ddof=0.
    """
    Y, fractions, n_train = _check_multilabel(Y, train_fractions, n_shuffles, solver)
    emb = _check_embedding(emb, Y.shape[0], "Y")
    n = Y.shape[0]

    C = _check_C(C)
    perms = _shuffles(n, n_shuffles, seed)
    micro = np.empty((fractions.size, n_shuffles), dtype=np.float64)
    macro = np.empty((fractions.size, n_shuffles), dtype=np.float64)
    used = np.empty(fractions.size, dtype=np.float64)
    fit = _MultilabelFit(Y, C, solver, max_iter, n_jobs, zero_division)
    with threadpool_limits(limits=blas_threads, user_api="blas"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Label .* is present in all training examples")
        for f, m in enumerate(n_train):
            fit.C = _multilabel_tuned_C(emb, fit, perms[0][:m], seed) if C == TUNED else C
            used[f] = fit.C
            for r, perm in enumerate(perms):
                micro[f, r], macro[f, r] = fit(emb, perm[:m], perm[m:])
    return _multilabel_result(solver, fractions, micro, macro, C=used)


def _multilabel_tuned_C(emb, fit, train, seed, folds=CV_FOLDS, grid=C_GRID):
    """The C of ``grid`` with the best mean micro-F1 of ``fit`` (a _MultilabelFit) over
    ``folds``-fold cross-validation within ``train``; ties go to the smaller C."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import KFold

    cv = KFold(n_splits=min(folds, train.size), shuffle=True, random_state=seed)
    parts = [(train[a], train[b]) for a, b in cv.split(train)]
    best, best_score = 1.0, -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for C in grid:
            fit.C = C
            score = sum(fit(emb, a, b)[0] for a, b in parts)
            if score > best_score + 1e-12:
                best, best_score = float(C), score
    return best


def _multilabel_result(solver, fractions, micro, macro, **extra):
    """The result dict of the multi-label protocol (scores per fraction and shuffle)."""
    return {
        "protocol": "multi-label",
        "solver": solver,
        "fractions": fractions,
        "micro": micro,
        "macro": macro,
        "micro_mean": micro.mean(axis=1),
        "micro_std": micro.std(axis=1),
        "macro_mean": macro.mean(axis=1),
        "macro_std": macro.std(axis=1),
        **extra,
    }


def multilabel_select_epoch(
    embs,
    Y,
    train_fractions=(0.1, 0.5, 0.9),
    n_shuffles: int = 10,
    seed: int = 0,
    C: float = 1.0,
    *,
    n_folds: int = 3,
    epochs=None,
    solver: str = "lbfgs",
    max_iter: int = 1000,
    zero_division: float = 0.0,
    n_jobs=None,
    blas_threads=1,
) -> dict:
    """The multi-label protocol with the training epoch chosen by cross-validation on
    the labelled part only (the paper: "the best model is chosen by using 10-fold
    cross-validation for each fraction value").

    Shuffles as :func:`multilabel_f1` (same ``seed``, same permutations).  For each
    fraction gamma and shuffle, train = ``p[:int(gamma N)]``, test = the rest; the
    training part is cut into ``n_folds`` consecutive folds (it is already in random
    order) and every candidate epoch is scored by the mean micro- and macro-F1 of the
    folds (fit on the other folds, top-k on the held-out one).  The epoch of best CV
    micro-F1 (earliest on ties) gives the reported test micro-F1, the epoch of best
    CV macro-F1 the test macro-F1, each fit on the whole training part.  Test nodes
    never take part in a choice.  Costs ``n_folds`` fits per candidate epoch, fraction
    and shuffle: pass a subset of the epochs (every 5th, say) on large graphs.

    Parameters
    ----------
    embs : sequence of (N, k) arrays, one per candidate epoch
    Y, train_fractions, n_shuffles, seed, C, solver, max_iter, zero_division, n_jobs,
    blas_threads : as :func:`multilabel_f1`
    n_folds : int >= 2
    epochs : sequence of int, optional
        Epoch numbers of ``embs`` (default ``1 .. len(embs)``).

    Returns
    -------
    dict
        ``protocol='multi-label'`` with ``micro``, ``macro`` (n_f, n_shuffles) test
        scores at the chosen epochs and their means and stds as :func:`multilabel_f1`,
        plus ``epochs_micro``, ``epochs_macro`` (n_f, n_shuffles) chosen epoch numbers
        and ``cv_micro``, ``cv_macro`` (n_epochs, n_f, n_shuffles) the CV scores.
    """
    if len(embs) == 0:
        raise ValueError("embs: expected the embeddings of at least one epoch")
    Y, fractions, n_train = _check_multilabel(Y, train_fractions, n_shuffles, solver)
    embs = [_check_embedding(e, Y.shape[0], "Y") for e in embs]
    epochs = np.arange(1, len(embs) + 1) if epochs is None else np.asarray(epochs, dtype=np.int64)
    if epochs.shape != (len(embs),):
        raise ValueError(f"epochs: expected {len(embs)} epoch numbers, got shape {epochs.shape}")
    if n_folds < 2 or np.any(n_train < n_folds):
        raise ValueError(
            f"n_folds: expected 2 <= n_folds <= the smallest training part "
            f"({int(n_train.min())} nodes), got {n_folds}"
        )
    perms = _shuffles(Y.shape[0], n_shuffles, seed)
    fit = _MultilabelFit(Y, C, solver, max_iter, n_jobs, zero_division)
    shape = (fractions.size, n_shuffles)
    cv_micro = np.zeros((len(embs),) + shape)
    cv_macro = np.zeros((len(embs),) + shape)
    micro, macro = np.empty(shape), np.empty(shape)
    chosen_micro = np.empty(shape, dtype=np.int64)
    chosen_macro = np.empty(shape, dtype=np.int64)
    with threadpool_limits(limits=blas_threads, user_api="blas"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Label .* is present in all training examples")
        for f, m in enumerate(n_train):
            for r, perm in enumerate(perms):
                train, test = perm[:m], perm[m:]
                folds = np.array_split(train, n_folds)
                for e, emb in enumerate(embs):
                    for i, held in enumerate(folds):
                        rest = np.concatenate(folds[:i] + folds[i + 1 :])
                        mi, ma = fit(emb, rest, held)
                        cv_micro[e, f, r] += mi / n_folds
                        cv_macro[e, f, r] += ma / n_folds
                best_mi = int(np.argmax(cv_micro[:, f, r]))  # first maximum: earliest
                best_ma = int(np.argmax(cv_macro[:, f, r]))
                scores = {e: fit(embs[e], train, test) for e in {best_mi, best_ma}}
                micro[f, r], macro[f, r] = scores[best_mi][0], scores[best_ma][1]
                chosen_micro[f, r], chosen_macro[f, r] = epochs[best_mi], epochs[best_ma]
    return _multilabel_result(
        solver,
        fractions,
        micro,
        macro,
        epochs_micro=chosen_micro,
        epochs_macro=chosen_macro,
        cv_micro=cv_micro,
        cv_macro=cv_macro,
    )


# ------------------------------------------------- the protocols, as `evaluate` runs them

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


def jsonable(obj, finite=True):
    """``obj`` with NumPy arrays and scalars turned into lists and Python numbers, and
    (``finite``) every NaN or infinite float as None (JSON null; NaN is not JSON)."""
    import math

    if isinstance(obj, dict):
        return {k: jsonable(v, finite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, finite) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), finite)
    if isinstance(obj, np.generic):
        obj = obj.item()
    if finite and isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def format_table(results) -> str:
    """Plain-text table (percentages, mean +- std) of any result of this module."""
    protocol = results.get("protocol")
    if protocol in ("single-label", "epoch-selection"):
        with_epoch = protocol == "epoch-selection"
        with_macro = "test_macro_f1" in results  # and the C each split used
        header = ["split", "val acc %", "test acc %"] + (["epoch"] if with_epoch else [])
        header += ["test macro-F1 %", "C"] if with_macro else []
        rows = []
        for s in range(len(results["test"])):
            row = [str(s), _pct(results["val"][s]), _pct(results["test"][s])]
            row += [str(int(results["epochs"][s]))] if with_epoch else []
            row += [_pct(results["test_macro_f1"][s]), f"{results['C'][s]:g}"] if with_macro else []
            rows.append(row)
        rows.append(
            [
                "mean",
                _pm(results["val_mean"], results["val_std"]),
                _pm(results["test_mean"], results["test_std"]),
            ]
            + ([""] if with_epoch else [])
            + ([_pct(results["test_macro_f1_mean"]), ""] if with_macro else [])
        )
    elif protocol == "multi-label":
        header = ["train fraction", "micro-F1 %", "macro-F1 %"]
        rows = [
            [
                f"{100 * g:g}%",
                _pm(results["micro_mean"][f], results["micro_std"][f]),
                _pm(results["macro_mean"][f], results["macro_std"][f]),
            ]
            for f, g in enumerate(results["fractions"])
        ]
    else:
        raise ValueError(f"results: unknown protocol {protocol!r}; pass a result of this module")
    widths = [max(len(r[c]) for r in [header] + rows) for c in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _pct(value: float) -> str:
    return "-" if np.isnan(value) else f"{100 * value:.2f}"


def _pm(mean: float, std: float) -> str:
    if np.isnan(mean):
        return "-"
    return f"{100 * mean:.2f} +- {100 * std:.2f}"


# ------------------------------------------------------------------ inductive split (Sec. 4.3)


def inductive_split(graph_or_adj, test_nodes):
    """Remove the test nodes and every edge touching them: ``(subgraph, kept)``.

    graph_or_adj : csr.Graph, or a scipy.sparse (N, N) adjacency
    test_nodes   : graph indices (int), or node ids (str) of a Graph

    Returns the subgraph on the other nodes (a Graph with their ids, or a CSR matrix)
    and ``kept`` int64 (N - |test|,): subgraph node i is original node kept[i] (kept is
    sorted, so the remaining nodes keep their relative order).  Nodes left without
    edges stay in the subgraph (their walks stay in place, so their o_v is learned from
    their own features alone); an ``InputWarning`` gives their count.  Train on the subgraph,
    then embed the test nodes with ``infer_embeddings`` on the full graph.
    """
    is_graph = isinstance(graph_or_adj, Graph)
    if is_graph:
        adj, n = graph_or_adj.to_scipy(), graph_or_adj.n_nodes
    elif (
        sp.issparse(graph_or_adj)
        and graph_or_adj.ndim == 2
        and graph_or_adj.shape[0] == graph_or_adj.shape[1]
    ):
        adj, n = sp.csr_matrix(graph_or_adj), graph_or_adj.shape[0]
    else:
        raise InputError(
            "graph_or_adj must be a caps2ne_np.graphs.csr.Graph or a square scipy.sparse matrix"
        )
    test = np.asarray(test_nodes)
    if test.size and not np.issubdtype(test.dtype, np.integer):
        if not is_graph:
            raise InputError("test_nodes of a scipy adjacency must be integer node indices")
        test = graph_or_adj.index_of([str(t) for t in test_nodes])
    test = np.unique(test.astype(np.int64))
    if test.size and (test[0] < 0 or test[-1] >= n):
        raise InputError(f"test_nodes must be node indices in [0, {n})")
    keep = np.ones(n, dtype=bool)
    keep[test] = False
    kept = np.flatnonzero(keep).astype(np.int64)
    if kept.size < 2:
        raise InputError(
            f"removing {test.size} test nodes leaves {kept.size} node(s); training needs at least 2"
        )
    sub = adj[kept][:, kept].tocsr()
    sub.sort_indices()
    indptr = np.ascontiguousarray(sub.indptr, dtype=np.int64)
    lone = np.flatnonzero((np.diff(indptr) == 0) & (np.diff(sub.tocsc().indptr) == 0))
    if lone.size:
        first = graph_or_adj.node_ids[int(kept[lone[0]])] if is_graph else int(kept[lone[0]])
        warnings.warn(
            f"{lone.size} node(s) left without edges by removing the test nodes, e.g. "
            f"{first!r}: training learns their o_v from their own features alone (an "
            "edge list of the subgraph would drop them); infer_embeddings on the full "
            "graph embeds them from their edges",
            InputWarning,
            stacklevel=2,
        )
    if not is_graph:
        return sub, kept
    weights = None
    if graph_or_adj.weights is not None:
        weights = np.ascontiguousarray(sub.data, dtype=np.float32)
        if np.all(weights == 1.0):
            weights = None
    isolated = int(np.count_nonzero(np.diff(indptr) == 0))  # as graph.py counts them
    stats = dict(
        removed_nodes=int(test.size),
        removed_edges=int(graph_or_adj.n_edges - sub.nnz),
        isolated_nodes=isolated,
    )
    log.info(
        "inductive split: removed %d nodes and %d stored edges; %d nodes left without edges",
        test.size,
        stats["removed_edges"],
        isolated,
    )
    ids = graph_or_adj.node_ids
    return Graph(
        indptr=indptr,
        indices=np.ascontiguousarray(sub.indices, dtype=np.int32),
        weights=weights,
        node_ids=[ids[i] for i in kept],
        directed=graph_or_adj.directed,
        stats=stats,
    ), kept
