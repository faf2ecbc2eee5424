"""The ``train`` command: embeddings (and optionally the model, its history, a .npy)
of a graph or a benchmark set.  Its training options are generated from
``defaults.OPTIONS`` (``options.config_options``)."""

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import click

from ..defaults import OPTIONS
from . import options as opt
from .files import check_outputs, input_paths, load_input
from .run import run, setup_logging, wrote

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
    help="Also save a checkpoint every N steps (0: only at epoch ends); needs "
    "--checkpoint-dir or --resume.",
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Continue the run checkpointed in this folder (same input and options; "
    "--epochs may grow, --stop and --propagate may change). Keeps checkpointing there.",
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
    _check_usage(
        graph, dataset, splits_path, train_fraction, val_fraction, out, options,
        {"--npy": npy_out, "--model-out": model_out, "--history": history_out},
        (checkpoint_dir, checkpoint_every, resume_dir),
    )  # fmt: skip
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
    outputs = Outputs(out, npy_out, model_out, history_out, binary, overwrite)
    ckpt = dict(
        checkpoint_dir=checkpoint_dir or resume_dir,
        checkpoint_every=checkpoint_every,
        resume_from=resume_dir,
    )
    run(
        debug,
        _train,
        source=source,
        eval_every_epoch=eval_every_epoch,
        outputs=outputs,
        quiet=quiet,
        options=options,
        ckpt=ckpt,
    )


def _check_usage(
    graph, dataset, splits_path, train_fraction, val_fraction, out, options, files, ckpt
):
    """click.UsageError (exit 2) for options that do not go together, before any work;
    ``files``: {flag: path} of the outputs that take a file name only; ``ckpt``:
    (--checkpoint-dir, --checkpoint-every, --resume)."""
    checkpoint_dir, ckpt_every, resume_dir = ckpt
    if (graph is None) == (dataset is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    if (train_fraction is not None or val_fraction is not None) and splits_path:
        raise click.UsageError("give at most one of --splits and --train-fraction/--val-fraction")
    if (train_fraction or 0.5) + (val_fraction or 0.1) >= 1:
        raise click.UsageError(
            "--train-fraction plus --val-fraction must leave nodes to test "
            f"(got {train_fraction or 0.5:g} + {val_fraction or 0.1:g})"
        )
    for option, value in files.items():
        if value == "-":
            raise click.UsageError(
                f"{option}: '-' (standard output) is accepted by --out only; give a file name"
            )
    if out is None and graph == "-":
        raise click.UsageError(
            "--graph - (standard input) needs --out (a file, or '-' for standard output)"
        )
    if ckpt_every and not (checkpoint_dir or resume_dir):
        raise click.UsageError(  # else the steps' checkpoints would go nowhere, silently
            "--checkpoint-every needs --checkpoint-dir (or --resume): the folder the "
            "checkpoints go to"
        )
    if options.get("parallel") == "async" and options.get("engine") == "ray":
        raise click.UsageError(  # an option conflict: exit 2, before the graph loads
            "--parallel async: threads of one process share the tables; with --engine ray "
            "the workers already train batches at once (--workers); drop one of the two"
        )


@dataclass
class Outputs:
    """The files a train run writes (--out, --npy, --model-out, --history)."""

    out: str
    npy: str | None = None
    model: str | None = None
    history: str | None = None
    binary: bool = False
    overwrite: bool = False


_ESTIMATOR_NAME = {"threads": "n_jobs", "seed": "random_state"}
"""TrainConfig fields whose Caps2NE parameter has another name."""

ENGINE_OPTIONS = ("parallel", "engine", "workers", "servers", "ray_address")
"""train's options that choose the engine (training/engines.py), not the TrainConfig."""


def _train(source, eval_every_epoch, outputs, quiet, options, ckpt):
    # train.fit directly, not the scikit-learn estimator: importing scikit-learn
    # costs about a second, and a small run should not pay it.
    from ..training import engines
    from ..training.config import TrainConfig, usable_cores

    _check_files(outputs, source, ckpt)
    _warn_high_lr(options.get("lr"))
    g, features, labels, splits = load_input(source, need_eval=eval_every_epoch)
    _log_graph(g, features, options)
    if options["threads"] is None:
        options["threads"] = usable_cores()
    engine = {k: options.pop(k) for k in ENGINE_OPTIONS}
    cfg = TrainConfig(**options)
    log.debug("options: %s; %d thread(s)", cfg, options["threads"])
    # the model file's run: how the graph was read, the mode, the options as given
    given = {_ESTIMATOR_NAME.get(k, k): v for k, v in cfg.to_dict().items()}
    run_record = dict(
        directed=bool(g.directed),
        keep_self_loops=bool(source.get("keep_self_loops")),
        parallel=engine["parallel"],
        params=dict(given, **engine),
    )
    selector = None
    if eval_every_epoch:
        from ..epoch_selection import EpochSelector

        selector = EpochSelector(labels, splits)
    callback = selector
    if outputs.history:
        callback = _HistoryWriter(outputs.history, outputs.overwrite, selector)
    # --engine ray: the tables go from the shards to the writers block by block (the
    # driver never holds one), unless --eval-every-epoch keeps a best epoch's tables
    # or --propagate needs them whole
    streamed = engine["engine"] == "ray" and selector is None
    streamed = streamed and options.get("propagate") in (None, "none")
    finish = functools.partial(
        _finish, g=g, outputs=outputs, selector=selector, run_record=run_record, streamed=streamed
    )
    if engine["engine"] == "ray":  # a new run must not replace a sharded checkpoint
        from ..training.ray import check_fresh

        check_fresh(ckpt["checkpoint_dir"], ckpt["resume_from"], outputs.overwrite)
    result = engines.fit(
        g.indptr,
        g.indices,
        g.weights,
        cfg,
        **engine,
        write_outputs=finish if streamed else None,
        results_only_stdout=True,
        features=features,
        progress=not quiet,
        epoch_callback=callback,
        checkpoint_extra=selector,
        **ckpt,
    )
    if isinstance(callback, _HistoryWriter) and not callback.written:
        callback.write(result.history)  # a resumed run that trained no epoch
    if not streamed:
        finish(result)


def _warn_high_lr(lr):
    """A ``warning:`` line for --lr far above the rates this model trains well with
    (10x the converge preset's cap): on Cora, 2 epochs, the o_v as trained scored 70.4%
    at 0.004, 63.3% at 0.02, 54.7% at 0.1 and 43.5% at 1."""
    import warnings

    from ..defaults import LR_RANGE
    from ..errors import InputWarning

    if lr is not None and lr > 10 * LR_RANGE[1]:
        warnings.warn(
            InputWarning(
                f"--lr {lr:g} is over 10x the converge preset's highest rate "
                f"({LR_RANGE[1]:g}); such rates train worse embeddings (Cora: 55% at 0.1 "
                "against 70% at 0.004) or diverge; leave --lr out for the preset's rate"
            ),
            stacklevel=2,
        )


def _check_files(outputs, source, ckpt):
    """Every output writable and none replacing an input, another output or a
    checkpoint; a new run refused over an existing checkpoint unless --overwrite."""
    from ..io.npy import nodes_path
    from ..training import checkpoint

    overwrite = outputs.overwrite
    resume = bool(ckpt["resume_from"])
    check_outputs(
        [
            ("--out", outputs.out, overwrite),
            ("--npy", outputs.npy, overwrite),
            ("--npy's id file", nodes_path(outputs.npy) if outputs.npy else None, overwrite),
            ("--model-out", outputs.model, overwrite),
            # a resumed run rewrites its own history, from the checkpoint's, every epoch in it
            ("--history", outputs.history, overwrite or resume),
        ],
        input_paths(source),
        checkpoint_dir=ckpt["checkpoint_dir"],
    )
    if ckpt["checkpoint_dir"] and not resume:
        checkpoint.check_fresh(ckpt["checkpoint_dir"], overwrite)


def _log_graph(g, features, options):
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


def _finish(result, g, outputs, selector, run_record, streamed):
    """Report the run and write its outputs: the kept epoch's (--eval-every-epoch)
    o_v, propagated with --propagate."""
    cfg = result.config  # every preset value filled in
    last = result.history[-1]
    seconds = sum(h["seconds"] for h in result.history)
    log.info(
        f"trained {len(result.history)} epoch{'s' * (len(result.history) != 1)} in "
        f"{seconds:.1f}s: final loss "
        f"{last['loss']:.4f}, {last['pairs_per_s']:,.0f} pairs/s (lr {cfg.lr:g} "
        f"{cfg.lr_schedule})"
    )
    log.debug("resolved configuration: %s", cfg.to_dict())
    params = result.params
    if selector is not None:
        params = selector.params_like(result.params)
    propagated = None  # --propagate: the written embeddings (propagation.py)
    if streamed and cfg.propagate != "none":
        log.info(
            "written embeddings: the o_v as trained (--engine ray streams them; "
            "give --propagate on to gather and propagate them)"
        )
    elif not streamed:
        from ..model import propagation

        propagated = propagation.apply(
            g.indptr, g.indices, g.weights, cfg, params.O, held=result.holdout
        )
    written = params.O if propagated is None else propagated.E
    if selector is not None:
        log.info(selector.summary(None if propagated is None else written))
    _write(outputs, g, written, params, cfg, result.history, run_record, propagated)
    if selector is not None:  # the outputs hold the kept epoch, which may not be the last
        log.info(
            f"wrote epoch {selector.best_epoch} of {len(result.history)}: best validation "
            f"accuracy ({100 * selector.best_val:.2f}%, --eval-every-epoch)"
        )


def _write(outputs, g, written, params, cfg, history, run_record, propagated):
    """The outputs, committed together: a failed write (a full disk) replaces none."""
    from ..io.atomic import publish_together
    from ..io.modelfile import save_model
    from ..io.npy import nodes_path, save_npy
    from ..io.word2vec import write_word2vec

    o, overwrite = outputs, outputs.overwrite
    with publish_together():
        write_word2vec(o.out, g.node_ids, written, overwrite=overwrite, binary=o.binary)
        if o.npy:
            save_npy(o.npy, written, g.node_ids, overwrite=overwrite)
        if o.model:
            save_model(
                o.model,
                params,
                g.node_ids,
                cfg.to_dict(),
                cfg.lr,
                history,
                overwrite=overwrite,
                run=run_record,
                propagation=propagated,
            )
    wrote(o.out, "embeddings (word2vec binary)" if o.binary else "embeddings")
    if o.npy:
        ids_file = nodes_path(o.npy)
        wrote(o.npy, f"{o.npy} (node ids in {ids_file})" if ids_file.exists() else None)
    if o.model:
        wrote(o.model)
    if o.history:
        wrote(o.history, f"{o.history} (the per-epoch history)")


class _HistoryWriter:
    """--history: the per-epoch history as CSV, rewritten (atomically) after each
    epoch, so an interrupted run keeps the epochs it finished.  With
    --eval-every-epoch the tracker runs first and its accuracies join the row."""

    COLUMNS = ("epoch", "loss", "lr", "seconds", "pairs", "pairs_per_s", "val_acc", "test_acc")

    def __init__(self, path, overwrite, tracker=None):
        self.path, self.overwrite, self.tracker = path, overwrite, tracker
        self.written = False

    def __call__(self, epoch, result):
        if self.tracker is not None:
            self.tracker(epoch, result)
            r = self.tracker.results[-1]
            result.history[-1].update(val_acc=float(r["val_mean"]), test_acc=float(r["test_mean"]))
        self.write(result.history)

    def write(self, history):
        """The whole history as CSV (also after a resumed run that trained no epoch: one
        the stop rule had ended, or a finished one)."""
        import csv

        from ..io.atomic import atomic_write

        columns = self.COLUMNS
        if "loss_skipgram" in history[-1]:  # the skip-gram term: both parts of the loss
            columns = columns + ("loss_capsule", "loss_skipgram")
        with atomic_write(self.path, overwrite=True) as fh:
            w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            for row in history:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
        self.written = True
