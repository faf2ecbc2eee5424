"""Best-epoch selection on validation while a run trains (``train --eval-every-epoch``,
``Caps2NE.fit(labels=..., splits=...)``).

``EpochSelector`` is an epoch callback of ``train.fit``: after every epoch it scores
the rows the run would write for that epoch (the o_v, propagated as the run's options
say: ``written_rows``) on the splits (single.classify_splits) and keeps a copy of the
parameters of the epoch with the best mean validation accuracy.  It is also the run's
``checkpoint_extra``: its scores and the kept parameters go into every checkpoint, so
a resumed run keeps choosing among all its epochs.  Test accuracies never choose
anything.
"""

import contextlib
import json
import logging
import time
import warnings

import numpy as np

from ..errors import InputError

log = logging.getLogger(__name__)


def check_labels_and_splits(labels, splits, n_nodes):
    """(labels, splits) of ``Caps2NE.fit(labels=, splits=)`` checked before training, as
    the command line checks its files: ``labels`` (n_nodes,) integer classes; ``splits``
    as nodefiles.check_splits (node indices in range, no repeats, disjoint parts), each
    part labelled and each training part of 2 classes or more (evaluate.check_split).
    InputError (a ValueError) naming the argument."""
    from ..graphs.nodefiles import check_splits
    from .single import check_split

    labels = np.asarray(labels)
    if labels.shape != (n_nodes,) or not np.issubdtype(labels.dtype, np.integer):
        raise InputError(
            f"labels: expected ({n_nodes},) integer classes in the graph's node order "
            f"(-1: unlabelled), got shape {labels.shape} dtype {labels.dtype}"
        )
    splits = check_splits(splits, n_nodes, name="splits")
    for s, split in enumerate(splits):
        check_split(labels, split, s, name="splits: ")
    return labels, splits


@contextlib.contextmanager
def _quietly():
    """The propagation's log lines and warnings held back: the run reports its choice
    once, for the rows it writes."""
    loggers = [
        logging.getLogger(f"caps2ne_np.model.{name}") for name in ("propagation", "spectral")
    ]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def written_rows(graph, result):
    """``(rows, propagated)``: the rows a run writes for its o_v ``result.params.O``
    (loop.TrainResult): propagated as propagation.apply makes them with the run's
    options, held-out sample and structure measure over ``graph`` (graphs.csr.Graph,
    or anything with indptr, indices, weights), or the o_v themselves when it says not
    to propagate or ``graph`` is None (a run that writes the o_v as trained)."""
    O = result.params.O
    if graph is None:
        return O, False
    from ..spectral import propagation

    with _quietly():
        p = propagation.apply(
            graph.indptr,
            graph.indices,
            graph.weights,
            result.config,
            O,
            held=result.holdout,
            structure=result.structure,
        )
    return (O, False) if p is None else (p.E, True)


class EpochSelector:
    """Score the rows a run would write on the splits after each epoch, keep the best.

    The kept epoch maximises the mean validation accuracy over the splits of the rows
    the run writes for it (``written_rows``: with ``graph``, the o_v propagated as the
    run's options say; without, the o_v as trained), so the kept epoch's scores are
    those of the written file; the paper's figure (per split, the epoch of best
    validation accuracy and its test accuracy, single.select_epoch) goes to the
    debug log.

    labels  (N,) int classes in the graph's node order (-1: unlabelled)
    splits  list of {'train', 'val', 'test'} index arrays
    graph   the run's graph (graphs.csr.Graph), over which it propagates; None: score
            the o_v as trained

    After the run: ``results`` (one single.classify_splits result per epoch),
    ``best_epoch`` (1-based), ``best_val``, and ``params_like(last_params)``, the kept
    epoch's parameters.
    """

    def __init__(self, labels, splits, graph=None):
        self.labels, self.splits, self.graph = labels, splits, graph
        self.results, self.best_val, self.best_params, self.best_epoch = [], -1.0, None, 0
        self._stored = None

    def __call__(self, epoch, result):
        from .single import classify_splits

        t0 = time.perf_counter()
        rows, propagated = written_rows(self.graph, result)
        r = classify_splits(rows, self.labels, self.splits)
        del rows
        self.results.append(r)
        if r["val_mean"] > self.best_val:
            self.best_val, self.best_epoch = r["val_mean"], epoch
            self._stored = None
            p = result.params
            self.best_params = type(p)(
                p.W.copy(),
                p.O.copy(),
                p.bias.copy(),
                p.X if p.fixed_features else p.X.copy(),
                fixed_features=p.fixed_features,
            )
        log.info(
            f"epoch {epoch}: val acc {100 * r['val_mean']:.2f}, test acc "
            f"{100 * r['test_mean']:.2f} (the rows written for this epoch: the o_v "
            f"{'propagated' if propagated else 'as trained'}; mean of {len(self.splits)} splits; "
            f"{time.perf_counter() - t0:.1f}s)"
        )

    def checkpoint_arrays(self):
        """The selector's state for the run's checkpoint (train.fit's checkpoint_extra)."""
        from .report import jsonable

        state = {
            "results": [jsonable(r, finite=False) for r in self.results],
            "best_val": self.best_val,
            "best_epoch": self.best_epoch,
        }
        arrays = {"tracker": np.asarray(json.dumps(state))}
        if self.best_params is not None:
            p = self.best_params
            arrays.update(best_W=p.W, best_O=p.O, best_bias=p.bias)
            if not p.fixed_features:
                arrays["best_X"] = p.X
        return arrays

    def restore_checkpoint(self, extra):
        """Continue from the state ``checkpoint_arrays`` stored (a resumed run)."""
        if "tracker" not in extra:
            raise InputError(
                "--eval-every-epoch: the checkpoint was written by a run without "
                "it, so the epochs before it were never scored; resume without "
                "--eval-every-epoch (and score the output with 'evaluate')"
            )
        state = json.loads(str(extra["tracker"]))
        self.results = [
            dict(
                r,
                val=np.asarray(r["val"], dtype=np.float64),
                test=np.asarray(r["test"], dtype=np.float64),
            )
            for r in state["results"]
        ]
        self.best_val, self.best_epoch = float(state["best_val"]), int(state["best_epoch"])
        self.best_params = None
        self._stored = (
            {k: extra[k] for k in ("best_W", "best_O", "best_bias", "best_X") if k in extra}
            if "best_O" in extra
            else None
        )

    def params_like(self, params):
        """The kept epoch's parameters (``params``, the last epoch's, give the fixed x)."""
        if self.best_params is None and self._stored:
            st = self._stored
            X = params.X if params.fixed_features else st["best_X"]
            self.best_params = type(params)(
                st["best_W"], st["best_O"], st["best_bias"], X, fixed_features=params.fixed_features
            )
        return self.best_params if self.best_params is not None else params

    def summary(self, written=None):
        """The run's last line about the scores: the kept epoch's, those of the rows the
        run writes (``written_rows``); ``written``: the propagated rows written, scored
        here again on the splits, so the line is the file's even when a resume changed
        how the rows are written after the kept epoch was scored."""
        from .single import classify_splits, select_epoch

        sel = select_epoch(self.results)
        kept = self.results[self.best_epoch - 1]
        what = "the written embeddings"
        if written is not None:  # the kept o_v propagated: the file holds those
            kept = classify_splits(written, self.labels, self.splits)
            what = "the written (propagated) embeddings"
        log.debug(  # -v: the paper's own figure, which no written file holds
            "with the epoch chosen per split on val (the paper's protocol, on the rows "
            "written for each epoch): test acc %.2f +- %.2f%%",
            100 * sel["test_mean"],
            100 * sel["test_std"],
        )
        return (  # the one figure to quote: the file's
            f"kept epoch {self.best_epoch} (best mean val acc {100 * kept['val_mean']:.2f}%): "
            f"{what} score test acc {100 * kept['test_mean']:.2f} "
            f"+- {100 * float(np.std(kept['test'])):.2f}% on the splits"
        )
