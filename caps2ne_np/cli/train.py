"""The ``train`` command: embeddings (and optionally the model, its history, a .npy)
of a graph or a benchmark set.  Its options are the table ``tables.TRAIN`` (the
training options generated from ``defaults.OPTIONS``); its work is ``run_train``, a
plain function of those options that a test can call without click, in steps: plan
the run, check the outputs, read the inputs, configure, train, write the outputs."""

import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import click

from ..defaults import OPTIONS
from ..estimator.signature import ESTIMATOR_NAMES
from ..training.engines import ENGINE_OPTIONS
from . import options as opt
from . import tables
from .files import check_outputs, input_paths, load_input
from .run import remember, run, setup_logging, wrote

log = logging.getLogger("caps2ne_np.cli")


@opt.command(tables.TRAIN)
def train(**params):
    """Learn Caps2NE node embeddings for the graph in --graph (or --dataset).

    The embeddings written out are the output vectors o_v (after ProNE's spectral
    propagation with --propagate on, the converge preset's default), one per node, in
    the user's node ids (word2vec text format, readable by gensim).
    """
    check_usage(params)
    setup_logging(params["quiet"], params["verbose"])
    run(params["debug"], run_train, params)


def train_params(**given):
    """The parameters of ``run_train``: train's options by name, ``given`` and the
    defaults of the others (``train_params(graph="g.txt", epochs=2)``)."""
    return opt.params(tables.TRAIN, **given)


def check_usage(params):
    """click.UsageError (exit 2) for options that do not go together, before any work."""
    p = params
    if (p["graph"] is None) == (p["dataset"] is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    train_fraction, val_fraction = p["train_fraction"], p["val_fraction"]
    if (train_fraction is not None or val_fraction is not None) and p["splits_path"]:
        raise click.UsageError("give at most one of --splits and --train-fraction/--val-fraction")
    if (train_fraction or 0.5) + (val_fraction or 0.1) >= 1:
        raise click.UsageError(
            "--train-fraction plus --val-fraction must leave nodes to test "
            f"(got {train_fraction or 0.5:g} + {val_fraction or 0.1:g})"
        )
    for option, name in (
        ("--npy", "npy_out"),
        ("--model-out", "model_out"),
        ("--history", "history_out"),
    ):
        if p[name] == "-":  # outputs that take a file name only
            raise click.UsageError(
                f"{option}: '-' (standard output) is accepted by --out only; give a file name"
            )
    if p["out"] is None and p["graph"] == "-":
        raise click.UsageError(
            "--graph - (standard input) needs --out (a file, or '-' for standard output)"
        )
    for option, name in (("--checkpoint-dir", "checkpoint_dir"), ("--resume", "resume_dir")):
        if p[name] == "":  # else no checkpoints (or the current folder's), silently
            raise click.UsageError(f"{option}: an empty path; give a folder")
    if p["checkpoint_every"] and not (p["checkpoint_dir"] or p["resume_dir"]):
        raise click.UsageError(  # else the steps' checkpoints would go nowhere, silently
            "--checkpoint-every needs --checkpoint-dir (or --resume): the folder the "
            "checkpoints go to"
        )
    if p["parallel"] == "async" and p["engine"] == "ray":
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


@dataclass
class TrainRun:
    """train's options grouped by use: ``source`` for files.load_input, ``outputs``,
    ``ckpt`` for trainer.train (checkpoint_dir, checkpoint_every, resume_from),
    ``options`` the TrainConfig fields as given, ``engine`` engines.ENGINE_OPTIONS."""

    source: dict
    outputs: Outputs
    ckpt: dict
    options: dict
    engine: dict
    eval_every_epoch: bool = False
    quiet: bool = False

    streamed: bool = False
    """--engine ray: the tables go from the shards to the writers block by block (the
    driver never holds one); set by ``_streams`` once the inputs are read."""


SOURCE_OPTIONS = dict(
    graph="graph",
    graph_cache="graph_cache",
    dataset="dataset",
    data_dir="data_dir",
    features="features_path",
    feature_ids="feature_ids",
    featureless="featureless",
    labels="labels_path",
    splits="splits_path",
    directed="directed",
    keep_self_loops="keep_self_loops",
    train_fraction="train_fraction",
    val_fraction="val_fraction",
    seed="seed",
)
"""files.load_input's source keys -> train's options."""


def run_train(params):
    """train's work, without click: ``params`` are its options by name
    (``train_params``), checked by ``check_usage``.  Errors are raised (InputError,
    OSError, ...); the command (run.run) turns them into one line and an exit code."""
    # the training driver, not the scikit-learn estimator: importing scikit-learn
    # costs about a second, and a small run should not pay it.
    job = _plan(params)
    _check_files(job.outputs, job.source, job.ckpt, job.engine["engine"])
    _warn_high_lr(job.options.get("lr"))
    g, features, labels, splits = _read_inputs(job)
    cfg, run_record = _configure(job, g)
    job.streamed = _streams(job, cfg, fixed_features=features is not None)
    selector = None
    if job.eval_every_epoch:
        from ..evaluation.epoch_selection import EpochSelector

        # the rows it writes for each epoch: a streamed run writes the o_v as trained
        selector = EpochSelector(labels, splits, None if job.streamed else g)
    _train(job, g, features, cfg, selector, run_record)


def _plan(params):
    """The TrainRun of train's options; --out's default (<graph stem>.emb)."""
    p = params
    out = p["out"]
    if out is None:
        out = (p["dataset"] or Path(p["graph"]).name.split(".")[0]) + ".emb"
    options = {name: p[name] for name in OPTIONS if name != "normalize_features"}
    options["normalize_features"] = not p["no_normalize_features"]
    return TrainRun(
        source={key: p[name] for key, name in SOURCE_OPTIONS.items()},
        outputs=Outputs(
            out, p["npy_out"], p["model_out"], p["history_out"], p["binary"], p["overwrite"]
        ),
        ckpt=dict(
            checkpoint_dir=p["checkpoint_dir"] or p["resume_dir"],
            checkpoint_every=p["checkpoint_every"],
            resume_from=p["resume_dir"],
        ),
        options=options,
        engine={k: p[k] for k in ENGINE_OPTIONS},
        eval_every_epoch=p["eval_every_epoch"],
        quiet=p["quiet"],
    )


def _streams(job, cfg, fixed_features):
    """Whether --engine ray streams the o_v from the shards to the writers: only when
    they are written as trained.  --eval-every-epoch keeps a best epoch's tables, and
    propagated rows (--propagate, or its preset's value when not given: the rows one
    machine writes) need the o_v whole."""
    from ..defaults import PRESETS
    from ..training.options.presets import preset_for

    propagate = cfg.propagate or PRESETS[preset_for(cfg, fixed_features)]["propagate"]
    return job.engine["engine"] == "ray" and not job.eval_every_epoch and propagate == "none"


def _read_inputs(job):
    """(graph, features, labels, splits), and the log line of the graph."""
    g, features, labels, splits = load_input(job.source, need_eval=job.eval_every_epoch)
    _log_graph(g, features, job.options)
    return g, features, labels, splits


def _configure(job, g):
    """(the TrainConfig, the model file's run record: how the graph was read, the mode,
    the options as given); --threads' default: every core this process may use."""
    from ..kernels.thread_layer import threads_used, usable_cores
    from ..training.options.config import TrainConfig

    options = dict(job.options)
    if options["threads"] is None:
        options["threads"] = usable_cores()
    cfg = TrainConfig(**options)
    used = threads_used(options["threads"])
    capped = f" (NUMBA_NUM_THREADS caps --threads {options['threads']})" * (
        used < options["threads"]
    )
    log.debug("options: %s; %d thread(s)%s", cfg, used, capped)
    given = {ESTIMATOR_NAMES.get(k, k): v for k, v in cfg.to_dict().items()}
    run_record = dict(
        directed=bool(g.directed),
        keep_self_loops=bool(job.source.get("keep_self_loops")),
        parallel=job.engine["parallel"],
        params=dict(given, **job.engine),
    )
    return cfg, run_record


def _train(job, g, features, cfg, selector, run_record):
    """Train (the training driver, trainer.train) and write the outputs: the epoch
    callbacks (--eval-every-epoch's selector, the --history writer), checkpoints; a
    streamed run's outputs are written while the Ray engine runs."""
    from ..training import trainer

    outputs = job.outputs
    history = None
    if outputs.history:
        history = _HistoryWriter(outputs.history, outputs.overwrite, selector)
    write = functools.partial(
        _write_trained,
        g=g,
        outputs=outputs,
        selector=selector,
        history=history,
        run_record=run_record,
    )
    trainer.train(
        g,
        cfg,
        features,
        selector=selector,
        engine=dict(job.engine, results_only_stdout=True),
        keep_model=bool(outputs.model),
        streamed=job.streamed,
        write=write,
        progress=not job.quiet,
        epoch_callback=history,
        **job.ckpt,
    )


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


def _check_files(outputs, source, ckpt, engine):
    """Every output writable and none replacing an input, another output or a
    checkpoint; a new run refused over an existing checkpoint (the ``engine``'s)
    unless --overwrite."""
    from ..io.npy import nodes_path
    from ..training import checkpoint, trainer

    overwrite = outputs.overwrite
    resume = ckpt["resume_from"]
    own = False  # a resumed run rewrites its own history (the checkpoint's epochs and one)
    if resume and outputs.history:
        saved = checkpoint.saved_history(resume)  # None: no checkpoint, the resume stops first
        own = saved is None or _HistoryWriter.is_history_of(outputs.history, saved)
    check_outputs(
        [
            ("--out", outputs.out, overwrite),
            ("--npy", outputs.npy, overwrite),
            ("--npy's id file", nodes_path(outputs.npy) if outputs.npy else None, overwrite),
            ("--model-out", outputs.model, overwrite),
            ("--history", outputs.history, overwrite or own),
        ],
        input_paths(source),
        checkpoint_dir=ckpt["checkpoint_dir"],
    )
    # a resume into another folder replaces another run's too
    trainer.check_fresh(ckpt["checkpoint_dir"], ckpt["resume_from"], overwrite, engine)


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


def _write_trained(trained, g, outputs, selector, history, run_record):
    """The outputs of a trained run (trainer.Trained): the kept epoch's
    (--eval-every-epoch) rows, propagated with --propagate; the history of a resumed
    run that trained no epoch."""
    result = trained.result
    if history is not None and not history.written:
        history.write(result.history)  # a resumed run that trained no epoch
    written, propagated = trained.written, trained.propagated
    if selector is not None:
        log.info(selector.summary(None if propagated is None else written))
    _write(
        outputs, g, written, trained.params, result.config, result.history, run_record, propagated
    )
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
    --eval-every-epoch the tracker (the epoch selector, which the training driver calls
    first) has scored the epoch, and its accuracies join the row."""

    COLUMNS = ("epoch", "loss", "lr", "seconds", "pairs", "pairs_per_s", "val_acc", "test_acc")

    def __init__(self, path, overwrite, tracker=None):
        self.path, self.overwrite, self.tracker = path, overwrite, tracker
        self.written = False

    def __call__(self, epoch, result):
        if self.tracker is not None:
            r = self.tracker.results[-1]
            result.history[-1].update(val_acc=float(r["val_mean"]), test_acc=float(r["test_mean"]))
        self.write(result.history)

    @classmethod
    def is_history_of(cls, path, history):
        """True when ``path`` is a regular file this writer wrote for a run whose history
        (a checkpoint's) is ``history``: its rows are that history's epochs, with their
        losses, and at most one epoch more (the run wrote it and was stopped before its
        checkpoint)."""
        import csv

        if not os.path.isfile(path):
            return False
        try:
            with open(path, newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        except (OSError, UnicodeDecodeError, csv.Error):
            return False
        if not rows or len(rows) > len(history) + 1:
            return False
        return all(
            row.get("epoch") == str(i + 1)
            and (i >= len(history) or row.get("loss") == f"{history[i]['loss']:.6g}")
            for i, row in enumerate(rows)
        )

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
        remember(self.path)  # an interruption's message names it
