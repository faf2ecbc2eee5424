"""The ``train`` command: embeddings (and optionally the model, its history, a .npy)
of a graph or a benchmark set.  Its training options are generated from
``defaults.OPTIONS`` (``options.config_options``)."""

import functools
import logging
from pathlib import Path

import click

from ..defaults import OPTIONS
from ..errors import InputError
from . import options as opt
from .files import check_outputs, input_paths, load_input
from .run import jsonable, run, setup_logging, wrote

log = logging.getLogger("caps2ne_np.cli")


@click.command(context_settings=opt.CONTEXT)
@click.option(
    "--graph",
    type=click.Path(dir_okay=False),
    default=None,
    help="Edge list: 'u v' or 'u v weight' per line, '#' comments ('-': standard "
    "input; .gz/.bz2/.xz are decompressed); or a scipy .npz / .mat.",
)
@opt.dataset("A benchmark set instead of --graph (features, labels and splits included).")
@opt.data_dir()
@opt.features("Fixed node features x: scipy .npz (kept sparse) or .npy, one row per node.")
@opt.feature_ids()
@click.option(
    "--featureless",
    is_flag=True,
    help="Ignore the dataset's features and train x (d = --feat-dim).",
)
@opt.config_option("normalize_features")
@opt.labels("'node label' lines, for --eval-every-epoch.")
@opt.splits("JSON list of {train, val, test} node-id lists, for --eval-every-epoch.")
@click.option(
    "--eval-every-epoch",
    is_flag=True,
    help="Score o_v on the splits after every epoch (logistic regression) and write the "
    "embeddings of the epoch with the best mean validation accuracy.",
)
@click.option(
    "--train-fraction",
    default=None,
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    help="--eval-every-epoch with --labels but no --splits: 10 random splits, stratified "
    "by class (seeded by --seed), training on this fraction of the labelled nodes, as "
    "evaluate does [default: 0.5].",
)
@click.option(
    "--val-fraction",
    default=None,
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    help="With those random splits: the fraction held out for validation, which "
    "chooses the epoch [default: 0.1].",
)
@opt.edges(
    "Treat each line as u->v only (default: undirected).", "Keep u-u edges (dropped by default)."
)
@click.option(
    "--graph-cache",
    type=click.Choice(["off", "use", "write"]),
    default="off",
    help="Binary CSR cache <graph>.cache.npz next to --graph: 'use' loads it when fresh "
    "(same file content by hash, same --directed/--keep-self-loops) and rebuilds "
    "it otherwise; 'write' always rebuilds it.",
)
@opt.out("Embeddings in word2vec text format ('-': standard output) [default: <graph stem>.emb].")
@click.option(
    "--binary",
    is_flag=True,
    help="Write --out in word2vec binary format (gensim: binary=True): about 4x "
    "smaller and much faster to write than text.",
)
@click.option(
    "--npy",
    "npy_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the embeddings as an (N, k) float32 .npy, rows in the order of "
    "--out (the graph's node order: first appearance in the edge list), plus "
    "<stem>.nodes.txt with the id of each row when the ids are not 0..N-1 in "
    "that order.",
)
@click.option(
    "--model-out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the whole trained model (parameters, config, node ids) to .npz.",
)
@click.option(
    "--history",
    "history_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the per-epoch history (loss, rate, time, pairs/s; with "
    "--eval-every-epoch the accuracies val_acc and test_acc, as fractions in [0, 1] "
    "where the log prints percent) as CSV, rewritten after every epoch.",
)
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@opt.config_options(
    [name for name in OPTIONS if name != "normalize_features"], threads=dict(default=None)
)  # None: every core (_train)
@click.option(
    "--checkpoint-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Save the full training state there after every epoch (atomic).",
)
@click.option(
    "--checkpoint-every",
    default=0,
    type=click.IntRange(min=0),
    help="Also save a checkpoint every N steps (0: only at epoch ends).",
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Continue the run checkpointed in this folder (same input and options; "
    "--epochs may grow). Keeps checkpointing there.",
)
@click.option(
    "--engine",
    default="single",
    show_default=True,
    type=click.Choice(["single", "ray"]),
    help="single: train in this process; ray: sharded parameter server on Ray "
    "(needs --adam lazy; pip install 'caps2ne_np[ray]'; docs/distributed.md).",
)
@click.option(
    "--parallel",
    default="sync",
    show_default=True,
    type=click.Choice(["sync", "async"]),
    help="sync: each step on the threads (the same embeddings on any --threads); async: "
    "each thread trains its own batches on the shared tables without locks (faster on "
    "several cores, not reproducible; docs/training.md, Threads).",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="--engine ray: worker actors P; a round trains P batches at once.",
)
@click.option(
    "--servers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="--engine ray: server actors S holding O, x, the biases and their Adam "
    "moments, sharded by node id.",
)
@click.option(
    "--ray-address",
    default=None,
    help="--engine ray: the Ray cluster to join ('auto', 'ray://head:10001') "
    "[default: a local Ray instance sized to this machine].",
)
@opt.quiet("Print only errors: no progress bar, log lines or warnings.")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Also print debugging details (the full configuration, threads).",
)
@opt.debug()
def train(
    graph,
    graph_cache,
    dataset,
    data_dir,
    features_path,
    feature_ids,
    featureless,
    no_normalize_features,
    labels_path,
    splits_path,
    eval_every_epoch,
    train_fraction,
    val_fraction,
    directed,
    keep_self_loops,
    out,
    npy_out,
    model_out,
    history_out,
    overwrite,
    checkpoint_dir,
    checkpoint_every,
    resume_dir,
    debug,
    quiet,
    verbose,
    binary,
    **options,
):
    """Learn Caps2NE node embeddings for the graph in --graph (or --dataset).

    The embeddings written out are the output vectors o_v (after ProNE's spectral
    propagation with --propagate on, the converge preset's default), one per node, in
    the user's node ids (word2vec text format, readable by gensim).
    """
    if (graph is None) == (dataset is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    if (train_fraction is not None or val_fraction is not None) and splits_path:
        raise click.UsageError("give at most one of --splits and --train-fraction/--val-fraction")
    if (train_fraction or 0.5) + (val_fraction or 0.1) >= 1:
        raise click.UsageError(
            "--train-fraction plus --val-fraction must leave nodes to test "
            f"(got {train_fraction or 0.5:g} + {val_fraction or 0.1:g})"
        )
    for option, value in (
        ("--npy", npy_out),
        ("--model-out", model_out),
        ("--history", history_out),
    ):
        if value == "-":
            raise click.UsageError(
                f"{option}: '-' (standard output) is accepted by --out only; give a file name"
            )
    if out is None and graph == "-":
        raise click.UsageError(
            "--graph - (standard input) needs --out (a file, or '-' for standard output)"
        )
    if options.get("parallel") == "async" and options.get("engine") == "ray":
        raise click.UsageError(  # an option conflict: exit 2, before the graph loads
            "--parallel async: threads of one process share the tables; with --engine ray "
            "the workers already train batches at once (--workers); drop one of the two"
        )
    if out is None:
        out = (dataset or Path(graph).name.split(".")[0]) + ".emb"
    setup_logging(quiet, verbose)
    source = dict(
        graph=graph,
        graph_cache=graph_cache,
        dataset=dataset,
        data_dir=data_dir,
        features=features_path,
        feature_ids=feature_ids,
        featureless=featureless,
        labels=labels_path,
        splits=splits_path,
        directed=directed,
        keep_self_loops=keep_self_loops,
        train_fraction=train_fraction,
        val_fraction=val_fraction,
        seed=options["seed"],
    )
    options["normalize_features"] = not no_normalize_features
    ckpt = dict(
        checkpoint_dir=checkpoint_dir or resume_dir,
        checkpoint_every=checkpoint_every,
        resume_from=resume_dir,
    )
    run(
        debug,
        _train,
        source,
        eval_every_epoch,
        out,
        npy_out,
        model_out,
        overwrite,
        quiet,
        options,
        ckpt,
        history_out,
        binary,
    )


_ESTIMATOR_NAME = {"threads": "n_jobs", "seed": "random_state"}
"""TrainConfig fields whose Caps2NE parameter has another name."""


def _train(
    source,
    eval_every_epoch,
    out,
    npy_out,
    model_out,
    overwrite,
    quiet,
    options,
    ckpt,
    history_out=None,
    binary=False,
):
    # train.fit directly, not the scikit-learn estimator: importing scikit-learn
    # costs about a second, and a small run should not pay it.
    from ..io.atomic import publish_together
    from ..io.modelfile import save_model
    from ..io.npy import nodes_path, save_npy
    from ..io.word2vec import write_word2vec
    from ..training import checkpoint
    from ..training.config import TrainConfig, usable_cores
    from ..training.train import fit

    resume = bool(ckpt["resume_from"])
    outputs = [
        ("--out", out, overwrite),
        ("--npy", npy_out, overwrite),
        ("--npy's id file", nodes_path(npy_out) if npy_out else None, overwrite),
        ("--model-out", model_out, overwrite),
        # a resumed run rewrites its own history, from the checkpoint's, every epoch in it
        ("--history", history_out, overwrite or resume),
    ]
    check_outputs(outputs, input_paths(source), checkpoint_dir=ckpt["checkpoint_dir"])
    if ckpt["checkpoint_dir"] and not ckpt["resume_from"]:
        checkpoint.check_fresh(ckpt["checkpoint_dir"], overwrite)
    g, features, labels, splits = load_input(source, need_eval=eval_every_epoch)
    log.info(
        f"graph: {g.n_nodes} nodes, {g.n_edges} directed edges "
        f"({'directed' if g.directed else 'undirected'}"
        f"{', weighted' if g.weights is not None else ''}); features: "
        + (
            f"fixed, d = {features.shape[1]}"
            if features is not None
            else "ProNE (--spectral features)"
            if options.get("spectral") == "features"
            else "trained x"
        )
    )
    if options["threads"] is None:
        options["threads"] = usable_cores()
    parallel = options.pop("parallel")
    engine = {k: options.pop(k) for k in ("engine", "workers", "servers", "ray_address")}
    cfg = TrainConfig(**options)
    log.debug("options: %s; %d thread(s)", cfg, options["threads"])
    # the model file's run: how the graph was read, the mode, the options as given
    given = {_ESTIMATOR_NAME.get(k, k): v for k, v in cfg.to_dict().items()}
    run_record = dict(
        directed=bool(g.directed),
        keep_self_loops=bool(source.get("keep_self_loops")),
        parallel=parallel,
        params=dict(given, parallel=parallel, **engine),
    )
    tracker = _EpochTracker(labels, splits) if eval_every_epoch else None
    callback = tracker
    if history_out:
        callback = _HistoryWriter(history_out, overwrite, tracker)

    def finish(result):
        """Report the run and write its outputs."""
        cfg = result.config  # every preset value filled in
        last = result.history[-1]
        lr = cfg.lr
        seconds = sum(h["seconds"] for h in result.history)
        log.info(
            f"trained {len(result.history)} epoch{'s' * (len(result.history) != 1)} in "
            f"{seconds:.1f}s: final loss "
            f"{last['loss']:.4f}, {last['pairs_per_s']:,.0f} pairs/s (lr {lr:g} "
            f"{cfg.lr_schedule})"
        )
        log.debug("resolved configuration: %s", cfg.to_dict())
        params = result.params
        if tracker is not None:
            params = tracker.params_like(result.params)
        propagated = None  # --propagate: the written embeddings (propagation.py)
        if streamed and cfg.propagate != "none":
            log.info(
                "written embeddings: the o_v as trained (--engine ray streams them; "
                "give --propagate on to gather and propagate them)"
            )
        elif not streamed:
            from ..model import propagation

            propagated = propagation.apply(g.indptr, g.indices, g.weights, cfg, params.O)
        written = params.O if propagated is None else propagated.E
        if tracker is not None:
            log.info(tracker.summary(None if propagated is None else written))
        # committed together: a failed write (a full disk) replaces none of them
        with publish_together():
            write_word2vec(out, g.node_ids, written, overwrite=overwrite, binary=binary)
            if npy_out:
                save_npy(npy_out, written, g.node_ids, overwrite=overwrite)
            if model_out:
                save_model(
                    model_out,
                    params,
                    g.node_ids,
                    cfg.to_dict(),
                    lr,
                    result.history,
                    overwrite=overwrite,
                    run=run_record,
                    propagation=propagated,
                )
        wrote(out, "embeddings (word2vec binary)" if binary else "embeddings")
        if npy_out:
            ids_file = nodes_path(npy_out)
            wrote(npy_out, f"{npy_out} (node ids in {ids_file})" if ids_file.exists() else None)
        if model_out:
            wrote(model_out)
        if history_out:
            wrote(history_out, f"{history_out} (the per-epoch history)")
        if tracker is not None:  # the outputs hold the kept epoch, which may not be the last
            log.info(
                f"wrote epoch {tracker.best_epoch} of {len(result.history)}: best validation "
                f"accuracy ({100 * tracker.best_val:.2f}%, --eval-every-epoch)"
            )

    streamed = False
    on_ray = engine.pop("engine") == "ray"
    if on_ray:  # sharded training (training/ray/)
        from ..training.ray import cli_fit

        # the tables go from the shards to the writers block by block (the driver never
        # holds one), unless --eval-every-epoch keeps a best epoch's tables anyway
        streamed = tracker is None and options.get("propagate") in (None, "none")
        fit = functools.partial(
            cli_fit, overwrite=overwrite, write_outputs=finish if streamed else None, **engine
        )
    else:
        fit = functools.partial(fit, parallel=parallel)
    ckpt = dict(ckpt, checkpoint_extra=tracker)
    result = fit(
        g.indptr,
        g.indices,
        g.weights,
        cfg,
        features=features,
        progress=not quiet,
        epoch_callback=callback,
        **ckpt,
    )
    if not streamed:
        finish(result)


class _HistoryWriter:
    """--history: the per-epoch history as CSV, rewritten (atomically) after each
    epoch, so an interrupted run keeps the epochs it finished.  With
    --eval-every-epoch the tracker runs first and its accuracies join the row."""

    COLUMNS = ("epoch", "loss", "lr", "seconds", "pairs", "pairs_per_s", "val_acc", "test_acc")

    def __init__(self, path, overwrite, tracker=None):
        self.path, self.overwrite, self.tracker = path, overwrite, tracker

    def __call__(self, epoch, result):
        import csv

        from ..io.atomic import atomic_write

        if self.tracker is not None:
            self.tracker(epoch, result)
            r = self.tracker.results[-1]
            result.history[-1].update(val_acc=float(r["val_mean"]), test_acc=float(r["test_mean"]))
        columns = self.COLUMNS
        if "loss_skipgram" in result.history[-1]:  # the skip-gram term: both parts of the loss
            columns = columns + ("loss_capsule", "loss_skipgram")
        with atomic_write(self.path, overwrite=True) as fh:
            w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            for row in result.history:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


class _EpochTracker:
    """--eval-every-epoch: score o_v on the splits after each epoch, keep the best.

    The kept epoch maximises the mean validation accuracy over the splits; the
    reported figure is the paper's: per split, the epoch of best validation
    accuracy and its test accuracy (evaluate.select_epoch).  Test accuracies never
    choose anything.
    """

    def __init__(self, labels, splits):
        self.labels, self.splits = labels, splits
        self.results, self.best_val, self.best_params, self.best_epoch = [], -1.0, None, 0
        self._stored = None

    def __call__(self, epoch, result):
        import time

        from ..evaluate import classify_splits

        t0 = time.perf_counter()
        r = classify_splits(result.params.O, self.labels, self.splits)
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
            f"{100 * r['test_mean']:.2f} (mean of {len(self.splits)} splits; "
            f"{time.perf_counter() - t0:.1f}s)"
        )

    def checkpoint_arrays(self):
        """The tracker's state for the run's checkpoint (train.fit's checkpoint_extra)."""
        import json

        import numpy as np

        arrays = {
            "tracker": np.asarray(
                json.dumps(
                    {
                        "results": [jsonable(r) for r in self.results],
                        "best_val": self.best_val,
                        "best_epoch": self.best_epoch,
                    }
                )
            )
        }
        if self.best_params is not None:
            p = self.best_params
            arrays.update(best_W=p.W, best_O=p.O, best_bias=p.bias)
            if not p.fixed_features:
                arrays["best_X"] = p.X
        return arrays

    def restore_checkpoint(self, extra):
        """Continue from the state ``checkpoint_arrays`` stored (a resumed run)."""
        import json

        import numpy as np

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
        if self.best_params is None and getattr(self, "_stored", None):
            st = self._stored
            X = params.X if params.fixed_features else st["best_X"]
            self.best_params = type(params)(
                st["best_W"], st["best_O"], st["best_bias"], X, fixed_features=params.fixed_features
            )
        return self.best_params if self.best_params is not None else params

    def summary(self, written=None):
        """The run's last line about the scores; ``written``: the embeddings written when
        they are not the kept epoch's o_v (``--propagate``), scored here on the splits."""
        import numpy as np

        from ..evaluate import classify_splits, select_epoch

        sel = select_epoch(self.results)
        kept = self.results[self.best_epoch - 1]
        what = "the written embeddings"
        if written is not None:  # the kept o_v propagated: the file holds those
            kept = classify_splits(written, self.labels, self.splits)
            what = "the written (propagated) embeddings"
        return (
            f"kept epoch {self.best_epoch} (best mean val acc {100 * self.best_val:.2f}%): "
            f"{what} score test acc {100 * kept['test_mean']:.2f} "
            f"+- {100 * float(np.std(kept['test'])):.2f}% on the splits; with the epoch "
            f"chosen per split on val (the paper's protocol, o_v as trained): "
            f"{100 * sel['test_mean']:.2f} +- {100 * sel['test_std']:.2f}%"
        )
