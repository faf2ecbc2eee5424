"""Multi-label node classification on learned embeddings (scikit-learn): the protocol
of PPI, POS and BlogCatalog, and its epoch selection.

After Perozzi et al. 2014: a fraction gamma of the nodes, shuffled, trains a one-vs-rest
logistic regression; every other node receives its k most probable labels, k = its true
number of labels; micro- and macro-F1 are averaged over shuffles (:func:`multilabel_f1`).
Tuned (``C="tuned"``): the C of :data:`~caps2ne_np.evaluation.single.C_GRID`, chosen by
3-fold cross-validation on the first shuffle's training part at each fraction, then used
for every shuffle.  Several epochs: the epoch is chosen by cross-validation within each
training part (:func:`multilabel_select_epoch`).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.multiclass import OneVsRestClassifier
from threadpoolctl import threadpool_limits

from ..errors import InputWarning
from .single import C_GRID, CV_FOLDS, TUNED, check_C, check_embedding


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


def shuffle_orders(n, n_shuffles, seed):
    """The node permutations of the multi-label protocol (shared by every fraction)."""
    rng = np.random.default_rng(seed)
    return [rng.permutation(n) for _ in range(n_shuffles)]


class MultilabelFit:
    """One fit of the DeepWalk protocol: one-vs-rest logistic regression on the
    ``train`` nodes, top-k labels for the ``test`` nodes (k = true label count),
    returns (micro-F1, macro-F1)."""

    def __init__(self, Y, C, solver, max_iter, n_jobs, zero_division):
        self.Y, self.C, self.solver, self.max_iter = Y, C, solver, max_iter
        self.n_jobs, self.zero_division = n_jobs, zero_division
        self.counts = np.diff(Y.indptr)  # k_i = number of true labels of node i

    def at(self, C):
        """This fit at ``C``."""
        self.C = float(C)
        return self

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
    emb = check_embedding(emb, Y.shape[0], "Y")
    n = Y.shape[0]

    C = check_C(C)
    perms = shuffle_orders(n, n_shuffles, seed)
    micro = np.empty((fractions.size, n_shuffles), dtype=np.float64)
    macro = np.empty((fractions.size, n_shuffles), dtype=np.float64)
    used = np.empty(fractions.size, dtype=np.float64)
    fit = MultilabelFit(Y, C, solver, max_iter, n_jobs, zero_division)
    with threadpool_limits(limits=blas_threads, user_api="blas"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Label .* is present in all training examples")
        for f, m in enumerate(n_train):
            fit.C = multilabel_tuned_C(emb, fit, perms[0][:m], seed) if C == TUNED else C
            if C == TUNED and m < 2:
                _warn_untuned(fractions[f], m)
            used[f] = fit.C
            for r, perm in enumerate(perms):
                micro[f, r], macro[f, r] = fit(emb, perm[:m], perm[m:])
    return _multilabel_result(solver, fractions, micro, macro, C=used)


def multilabel_tuned_C(emb, fit, train, seed, folds=CV_FOLDS, grid=C_GRID):
    """The C of ``grid`` with the best mean micro-F1 of ``fit`` (a MultilabelFit) over
    ``folds``-fold cross-validation within ``train``; ties go to the smaller C."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import KFold

    if train.size < 2:
        return 1.0  # nothing to cross-validate (multilabel_f1 warns)
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


def _warn_untuned(fraction, m):
    """An InputWarning: at ``fraction`` the training part of ``m`` node(s) is too small to
    cross-validate a C, so C = 1 is used."""
    warnings.warn(
        f"C tuned: fraction {fraction:g} trains on {m} node(s), too few to cross-validate; "
        "C = 1 is used there (give a larger fraction, or a number for --C)",
        InputWarning,
        stacklevel=3,
    )


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
        and ``cv_micro``, ``cv_macro`` (n_epochs, n_f, n_shuffles) the CV scores;
        ``C`` (n_epochs, n_f), the C of each epoch and fraction (``C="tuned"``: chosen
        per epoch as :func:`multilabel_f1` chooses it, on the first shuffle's training
        part).
    """
    Y, fractions, n_train, embs, epochs = _check_select_epoch(
        embs, Y, train_fractions, n_shuffles, solver, n_folds, epochs
    )
    C = check_C(C)
    perms = shuffle_orders(Y.shape[0], n_shuffles, seed)
    fit = MultilabelFit(Y, C, solver, max_iter, n_jobs, zero_division)
    with threadpool_limits(limits=blas_threads, user_api="blas"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Label .* is present in all training examples")
        used = np.full((len(embs), fractions.size), C if C != TUNED else np.nan)
        for f, m in enumerate(n_train):
            if C == TUNED:  # each epoch's C, as multilabel_f1 tunes it
                used[:, f] = [multilabel_tuned_C(e, fit, perms[0][:m], seed) for e in embs]
        out = _select_epochs(fit, embs, epochs, perms, n_train, n_folds, used)
    return _multilabel_result(solver, fractions, out.pop("micro"), out.pop("macro"), C=used, **out)


def _select_epochs(fit, embs, epochs, perms, n_train, n_folds, used):
    """The scores of :func:`multilabel_select_epoch` (its result's arrays by name): per
    fraction and shuffle, the epoch of best CV micro- (macro-) F1 within the training
    part and its test score, each epoch at its C (``used``, (n_epochs, n_f))."""
    shape = (len(n_train), len(perms))
    cv_micro, cv_macro = np.zeros((2, len(embs)) + shape)
    micro, macro = np.empty((2,) + shape)
    chosen_micro, chosen_macro = np.empty((2,) + shape, dtype=np.int64)
    for f, m in enumerate(n_train):
        for r, perm in enumerate(perms):
            train, test = perm[:m], perm[m:]
            cv_micro[:, f, r], cv_macro[:, f, r] = _cv_scores(fit, embs, train, n_folds, used[:, f])
            best_mi = int(np.argmax(cv_micro[:, f, r]))  # first maximum: earliest
            best_ma = int(np.argmax(cv_macro[:, f, r]))
            scores = {e: fit.at(used[e, f])(embs[e], train, test) for e in {best_mi, best_ma}}
            micro[f, r], macro[f, r] = scores[best_mi][0], scores[best_ma][1]
            chosen_micro[f, r], chosen_macro[f, r] = epochs[best_mi], epochs[best_ma]
    return dict(
        micro=micro,
        macro=macro,
        epochs_micro=chosen_micro,
        epochs_macro=chosen_macro,
        cv_micro=cv_micro,
        cv_macro=cv_macro,
    )


def _check_select_epoch(embs, Y, train_fractions, n_shuffles, solver, n_folds, epochs):
    """The arguments of :func:`multilabel_select_epoch`, validated: (Y, fractions,
    training-part sizes, embeddings, epoch numbers); ValueError naming the argument."""
    if len(embs) == 0:
        raise ValueError("embs: expected the embeddings of at least one epoch")
    Y, fractions, n_train = _check_multilabel(Y, train_fractions, n_shuffles, solver)
    embs = [check_embedding(e, Y.shape[0], "Y") for e in embs]
    epochs = np.arange(1, len(embs) + 1) if epochs is None else np.asarray(epochs, dtype=np.int64)
    if epochs.shape != (len(embs),):
        raise ValueError(f"epochs: expected {len(embs)} epoch numbers, got shape {epochs.shape}")
    if n_folds < 2 or np.any(n_train < n_folds):
        raise ValueError(
            f"n_folds: expected 2 <= n_folds <= the smallest training part "
            f"({int(n_train.min())} nodes), got {n_folds}"
        )
    return Y, fractions, n_train, embs, epochs


def _cv_scores(fit, embs, train, n_folds, Cs):
    """(micro, macro) (n_epochs,): each embedding's mean F1 of ``fit`` (a MultilabelFit)
    at its C (``Cs``) over ``n_folds`` consecutive folds of ``train``, each fold held
    out in turn."""
    folds = np.array_split(train, n_folds)
    micro, macro = np.zeros(len(embs)), np.zeros(len(embs))
    for e, emb in enumerate(embs):
        for i, held in enumerate(folds):
            rest = np.concatenate(folds[:i] + folds[i + 1 :])
            mi, ma = fit.at(Cs[e])(emb, rest, held)
            micro[e] += mi / n_folds
            macro[e] += ma / n_folds
    return micro, macro
