"""The command line: ``python cli.py train ...`` and the installed ``caps2ne`` script.

Importing this module compiles nothing and imports no heavy dependency: every
command imports what it needs when it runs, so ``--help`` is instant.

Exit codes: 0 success, 2 usage errors (click's own), 1 bad input data or a
failed run, with one line on stderr; ``--debug`` shows the traceback instead.
"""

import functools
import logging
import os
import sys
import warnings
from pathlib import Path

import click

from . import __version__
from .defaults import (ADAM_MODES, BATCH_MODES, GRAD_MODES, LR_SCHEDULES, PLAIN, PRESET_NAMES,
                       PRESETS, ROUTING_RULES, SAMPLERS, WALK_MODES)
from .errors import InputError, InputWarning

DATASETS = ["cora", "citeseer", "pubmed", "ppi", "pos", "blogcatalog", "cora-bundled"]

DEFAULTS = PLAIN


class _Failure(click.ClickException):
    """One-line error, exit code 1."""

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


def _run(debug, fn, *args, **kwargs):
    """Call fn; turn user-facing errors into one-line messages unless --debug.

    InputWarnings (self loops dropped, duplicates merged, ...) are printed as
    ``warning: ...`` lines the moment they are raised, before training starts.
    """
    from .train import TrainingDiverged

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, InputWarning):
            click.echo(f"warning: {message}", err=True)
        else:
            default_show(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", InputWarning)
        default_show = warnings.showwarning
        warnings.showwarning = show
        try:
            return fn(*args, **kwargs)
        except (InputError, TrainingDiverged, OSError) as err:
            if debug:
                raise
            raise _Failure(_one_line(err)) from None
        except KeyboardInterrupt:
            raise _Failure("interrupted; no output was written") from None
        except Exception as err:  # noqa: BLE001 -- last resort: never a bare traceback
            if debug:
                raise
            raise _Failure(f"internal error ({type(err).__name__}: {_one_line(err)}); "
                           "rerun with --debug for the traceback and please report it") from None


def _one_line(err):
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    return " ".join(str(err).split())


def _preset_help(name):
    p = PRESETS[name]
    lr = "5e-4 or 1e-4" if p["lr"] is None else f"{p['lr']:g}"
    return (f"lr {lr} {p['lr_schedule']}, batch {p['batch_size']}, T {p['walks_per_node']} "
            f"{p['walks']} walks, {p['adam']} Adam, {p['sampler']} sampler"
            + (f", {p['epochs']} epochs" if p["epochs"] else ""))


def _parse_targets(value):
    value = value.strip().lower()
    if value in ("all", "random"):
        return value
    try:
        return tuple(int(t) for t in value.split(","))
    except ValueError:
        raise click.BadParameter("expected 'all', 'random' or comma-separated 0-based positions "
                                 "such as 3,4,5,6") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(version=__version__, message="caps2ne_np %(version)s")
def cli():
    """Caps2NE node embeddings (Nguyen et al., CIKM 2020) on CPU with NumPy + Numba."""


@cli.command()
@click.option("--graph", type=click.Path(dir_okay=False), default=None,
              help="Edge list: 'u v' or 'u v weight' per line, '#' comments; or a scipy .npz / .mat.")
@click.option("--dataset", type=click.Choice(DATASETS), default=None,
              help="A benchmark set instead of --graph (features, labels and splits included).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder of the benchmark data [default: $CAPS2NE_DATA or ../shared/data].")
@click.option("--features", "features_path", type=click.Path(dir_okay=False), default=None,
              help="Fixed node features x: scipy .npz (kept sparse) or .npy, one row per node.")
@click.option("--feature-ids", type=click.Path(dir_okay=False), default=None,
              help="Node id of each --features row, one per line [default: graph node order].")
@click.option("--featureless", is_flag=True,
              help="Ignore the dataset's features and train x (d = --feat-dim).")
@click.option("--no-normalize-features", is_flag=True,
              help="Use fixed features as given (default: divide each row by its sum, as the authors).")
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False), default=None,
              help="'node label' lines, for --eval-every-epoch.")
@click.option("--splits", "splits_path", type=click.Path(dir_okay=False), default=None,
              help="JSON list of {train, val, test} node-id lists, for --eval-every-epoch.")
@click.option("--eval-every-epoch", is_flag=True,
              help="Score o_v on the splits after every epoch (logistic regression) and write the "
                   "embeddings of the epoch with the best mean validation accuracy.")
@click.option("--directed", is_flag=True, help="Treat each line as u->v only (default: undirected).")
@click.option("--graph-cache", type=click.Choice(["off", "use", "write"]), default="off",
              help="Binary CSR cache <graph>.cache.npz next to --graph: 'use' loads it when fresh "
                   "(same file size and mtime, same --directed/--keep-self-loops) and rebuilds it "
                   "otherwise; 'write' always rebuilds it.")
@click.option("--keep-self-loops", is_flag=True, help="Keep u-u edges (dropped by default).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Embeddings in word2vec text format [default: <graph stem>.emb].")
@click.option("--npy", "npy_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the embeddings as .npy (+ <stem>.nodes.txt with the node ids).")
@click.option("--model-out", type=click.Path(dir_okay=False), default=None,
              help="Also write the whole trained model (parameters, config, node ids) to .npz.")
@click.option("--history", "history_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the per-epoch history (loss, rate, time, pairs/s; with "
                   "--eval-every-epoch the accuracies) as CSV, rewritten after every epoch.")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@click.option("--dim", default=DEFAULTS["dim"], type=click.IntRange(min=1),
              help="Embedding size k (size of e_v and o_v).")
@click.option("--feat-dim", default=DEFAULTS["feat_dim"], type=click.IntRange(min=1),
              help="Size d of the trainable input features x (featureless graphs).")
@click.option("--walk-length", default=DEFAULTS["walk_length"], type=click.IntRange(min=2),
              help="Walk length q (q - 1 context nodes per target).")
@click.option("--preset", default="auto", type=click.Choice(PRESET_NAMES),
              help="Where the options marked [preset] come from when not given: 'converge' "
                   f"({_preset_help('converge')}; epochs from the graph), 'paper' (the authors' "
                   f"settings: {_preset_help('paper')}); 'auto' is 'converge' without and "
                   "'paper' with fixed --features. docs/training.md.")
@click.option("--walks-per-node", default=None, type=click.IntRange(min=1),
              help="Random walks T started from every node in each epoch. [preset]")
@click.option("--epochs", default=None, type=click.IntRange(min=1),
              help="Epochs (exactly this many); each is ceil(N T / batch-size) batches "
                   "[preset converge: a budget set by the graph, printed at the start].")
@click.option("--batch-size", default=None, type=click.IntRange(min=1),
              help="Walks per batch B (each walk gives one pair per target position). [preset]")
@click.option("--lr", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Adam learning rate (the peak rate with --lr-schedule linear) [preset; "
                   "paper: 5e-4 with trained features x, 1e-4 with fixed features; the "
                   "paper's grid is 1e-5, 5e-5, 1e-4].")
@click.option("--lr-schedule", default=None, type=click.Choice(LR_SCHEDULES),
              help="linear: decay from --lr to --lr x --lr-floor over the run (word2vec); "
                   "constant: the authors'. [preset]")
@click.option("--lr-floor", default=DEFAULTS["lr_floor"],
              type=click.FloatRange(min=0, max=1, min_open=True),
              help="Last rate of the linear schedule, as a fraction of --lr.")
@click.option("--walks", "walks", default=None, type=click.Choice(WALK_MODES),
              help="fresh: new walks every epoch; fixed: the same N x T walks every epoch "
                   "(authors). [preset]")
@click.option("--num-sampled", default=None, type=click.IntRange(min=1),
              help="Sampled nodes |V'| per batch in the sampled softmax, < number of nodes "
                   "[default: 256, or N - 1 on graphs of at most 256 nodes].")
@click.option("--sampler", default=None, type=click.Choice(SAMPLERS),
              help="Candidate sampler for V': TensorFlow's log-uniform (by node index), "
                   "walk-frequency^0.75, or uniform. [preset]")
@click.option("--routing-iters", default=DEFAULTS["routing_iters"], type=click.IntRange(min=1),
              help="Routing iterations m (Algorithm 1).")
@click.option("--routing-rule", default=DEFAULTS["routing_rule"], type=click.Choice(ROUTING_RULES),
              help="Logit update: paper b_i = u_hat_i.e, or Sabour et al. b_i += u_hat_i.e.")
@click.option("--routing-scale", default=None, type=click.FloatRange(min=0, min_open=True),
              help="c = scale * softmax(b) [default: q - 1 as the authors' code; 1 = plain softmax].")
@click.option("--grad-mode", default=DEFAULTS["grad_mode"], type=click.Choice(GRAD_MODES),
              help="exact: true gradient through routing; stop: c treated as constant (authors).")
@click.option("--targets", default="all", callback=lambda c, p, v: _parse_targets(v),
              help="Target positions in each walk: all, random (one per walk), or 0-based "
                   "positions such as 3,4,5,6 (authors, citation graphs).")
@click.option("--batch-mode", default=DEFAULTS["batch_mode"], type=click.Choice(BATCH_MODES),
              help="random: B walks drawn with replacement (authors); shuffle: each walk once.")
@click.option("--adam", default=None, type=click.Choice(ADAM_MODES),
              help="dense: every row each step (authors); lazy: only rows a batch touches, "
                   "so a step costs nothing per untouched node (large graphs). [preset]")
@click.option("--walk-chunk", default=DEFAULTS["walk_chunk"], type=click.IntRange(min=1),
              help="Walks per chunk when counting node frequencies for --sampler unigram "
                   "(memory about 40 bytes x chunk x q); training walks are made per batch.")
@click.option("--threads", default=None, type=click.IntRange(min=1),
              help="Threads for the Numba kernels (BLAS runs single-threaded inside them) "
                   "[default: all cores this process may use]. Results do not depend on it.")
@click.option("--seed", default=0, type=click.IntRange(min=0), help="Seed of every random stream.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Save the full training state there after every epoch (atomic).")
@click.option("--checkpoint-every", default=0, type=click.IntRange(min=0),
              help="Also save a checkpoint every N steps (0: only at epoch ends).")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False), default=None,
              help="Continue the run checkpointed in this folder (same input and options; "
                   "--epochs may grow). Keeps checkpointing there.")
@click.option("--engine", default="single", show_default=True, type=click.Choice(["single", "ray"]),
              help="single: train in this process; ray: sharded parameter server on Ray "
                   "(needs --adam lazy; pip install 'caps2ne_np[ray]'; docs/distributed.md).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="--engine ray: worker actors P; a round trains P batches at once.")
@click.option("--servers", default=1, show_default=True, type=click.IntRange(min=1),
              help="--engine ray: server actors S holding O, x, the biases and their Adam "
                   "moments, sharded by node id.")
@click.option("--ray-address", default=None,
              help="--engine ray: the Ray cluster to join ('auto', 'ray://head:10001') "
                   "[default: a local Ray instance sized to this machine].")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or per-epoch log.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def train(graph, graph_cache, dataset, data_dir, features_path, feature_ids, featureless, no_normalize_features,
          labels_path, splits_path, eval_every_epoch, directed, keep_self_loops, out, npy_out,
          model_out, history_out, overwrite, checkpoint_dir, checkpoint_every, resume_dir, debug, quiet,
          **options):
    """Learn Caps2NE node embeddings for the graph in --graph (or --dataset).

    The embeddings written out are the output vectors o_v, one per node, in the
    user's node ids (word2vec text format, readable by gensim).
    """
    if (graph is None) == (dataset is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    if out is None:
        out = (dataset or Path(graph).name.split(".")[0]) + ".emb"
    _setup_logging(quiet)
    source = dict(graph=graph, graph_cache=graph_cache, dataset=dataset, data_dir=data_dir, features=features_path,
                  feature_ids=feature_ids, featureless=featureless, labels=labels_path,
                  splits=splits_path, directed=directed, keep_self_loops=keep_self_loops)
    options["normalize_features"] = not no_normalize_features
    ckpt = dict(checkpoint_dir=checkpoint_dir or resume_dir, checkpoint_every=checkpoint_every,
                resume_from=resume_dir)
    _run(debug, _train, source, eval_every_epoch, out, npy_out, model_out, overwrite, quiet,
         options, ckpt, history_out)


def _train(source, eval_every_epoch, out, npy_out, model_out, overwrite, quiet, options, ckpt,
           history_out=None):
    # train.fit directly, not the scikit-learn estimator: importing scikit-learn
    # costs about a second, and a small run should not pay it.
    from .io import save_npy, write_word2vec
    from .modelfile import save_model
    from .train import TrainConfig, fit

    from . import checkpoint
    from .io import nodes_path

    outputs = [p for p in (out, npy_out, model_out) if p]
    if npy_out:
        outputs.append(nodes_path(npy_out))
    if history_out and ckpt["resume_from"]:   # a resumed run rewrites its own history,
        _check_writable(history_out, True)    # from the checkpoint's, every epoch in it
    elif history_out:
        outputs.append(history_out)
    for path in outputs:                      # fail before training, not after
        _check_writable(path, overwrite)
    if ckpt["checkpoint_dir"] and not ckpt["resume_from"]:
        checkpoint.check_fresh(ckpt["checkpoint_dir"], overwrite)
    g, features, labels, splits = _load_input(source, need_eval=eval_every_epoch)
    click.echo(f"graph: {g.n_nodes} nodes, {g.n_edges} directed edges "
               f"({'directed' if g.directed else 'undirected'}"
               f"{', weighted' if g.weights is not None else ''}); features: "
               f"{'trained x' if features is None else f'fixed, d = {features.shape[1]}'}",
               err=True)
    if options["threads"] is None:
        options["threads"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
    engine = {k: options.pop(k) for k in ("engine", "workers", "servers", "ray_address")}
    if engine.pop("engine") == "ray":         # issue 18: sharded training (distributed.py)
        from .distributed import cli_fit

        fit = functools.partial(cli_fit, overwrite=overwrite, **engine)
    cfg = TrainConfig(**options)
    tracker = _EpochTracker(labels, splits) if eval_every_epoch else None
    callback = tracker
    if history_out:
        callback = _HistoryWriter(history_out, overwrite, tracker)
    result = fit(g.indptr, g.indices, g.weights, cfg, features=features, progress=not quiet,
                 epoch_callback=callback, **ckpt)
    cfg = result.config                       # every preset value filled in
    last = result.history[-1]
    lr = cfg.lr
    seconds = sum(h["seconds"] for h in result.history)
    click.echo(f"trained {len(result.history)} epochs in {seconds:.1f}s: final loss "
               f"{last['loss']:.4f}, {last['pairs_per_s']:,.0f} pairs/s (lr {lr:g} "
               f"{cfg.lr_schedule})", err=True)
    params = result.params
    if tracker is not None:
        params = tracker.best_params
        click.echo(tracker.summary(), err=True)
    write_word2vec(out, g.node_ids, params.O, overwrite=overwrite)
    click.echo(f"wrote {out}", err=True)
    if npy_out:
        save_npy(npy_out, params.O, g.node_ids, overwrite=overwrite)
        click.echo(f"wrote {npy_out}", err=True)
    if model_out:
        save_model(model_out, params, g.node_ids, cfg.to_dict(), lr, result.history,
                   overwrite=overwrite)
        click.echo(f"wrote {model_out}", err=True)


class _HistoryWriter:
    """--history: the per-epoch history as CSV, rewritten (atomically) after each
    epoch, so an interrupted run keeps the epochs it finished.  With
    --eval-every-epoch the tracker runs first and its accuracies join the row."""

    COLUMNS = ("epoch", "loss", "lr", "seconds", "pairs", "pairs_per_s", "val_acc", "test_acc")

    def __init__(self, path, overwrite, tracker=None):
        self.path, self.overwrite, self.tracker = path, overwrite, tracker

    def __call__(self, epoch, result):
        import csv

        from .io import atomic_write

        if self.tracker is not None:
            self.tracker(epoch, result)
            r = self.tracker.results[-1]
            result.history[-1].update(val_acc=float(r["val_mean"]),
                                      test_acc=float(r["test_mean"]))
        with atomic_write(self.path, overwrite=True) as fh:
            w = csv.DictWriter(fh, fieldnames=self.COLUMNS, extrasaction="ignore",
                               lineterminator="\n")
            w.writeheader()
            for row in result.history:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                            for k, v in row.items()})


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

    def __call__(self, epoch, result):
        import time

        from .evaluate import classify_splits

        t0 = time.perf_counter()
        r = classify_splits(result.params.O, self.labels, self.splits)
        self.results.append(r)
        if r["val_mean"] > self.best_val:
            self.best_val, self.best_epoch = r["val_mean"], epoch
            p = result.params
            self.best_params = type(p)(p.W.copy(), p.O.copy(), p.bias.copy(),
                                       p.X if p.fixed_features else p.X.copy(),
                                       fixed_features=p.fixed_features)
        click.echo(f"epoch {epoch}: val acc {100 * r['val_mean']:.2f}, test acc "
                   f"{100 * r['test_mean']:.2f} (mean of {len(self.splits)} splits; "
                   f"{time.perf_counter() - t0:.1f}s)", err=True)

    def summary(self):
        from .evaluate import select_epoch

        sel = select_epoch(self.results)
        return (f"kept epoch {self.best_epoch} (best mean val acc {100 * self.best_val:.2f}); "
                f"per-split epoch selection on val: test acc {100 * sel['test_mean']:.2f} "
                f"+- {100 * sel['test_std']:.2f}")


def _load_input(source, need_eval=False):
    """(Graph, features or None, labels or None, splits or None) from the CLI options."""
    from . import datasets
    from .graph import from_scipy, read_graph

    labels = splits = features = None
    if source["dataset"]:
        data_dir = source["data_dir"] or datasets.default_data_dir()
        kwargs = {"features": False} if (source["featureless"] and source["dataset"] in
                                         datasets.PLANETOID_NAMES) else {}
        ds = datasets.load_dataset(source["dataset"], data_dir, **kwargs)
        g = from_scipy(ds.adj, ds.node_ids, directed=False,
                       keep_self_loops=source["keep_self_loops"])
        features = None if source["featureless"] else ds.features
        labels, splits = ds.labels, ds.splits
        if need_eval and ds.multilabel:
            raise InputError(f"--eval-every-epoch: {source['dataset']} is multi-label; score its "
                             "embeddings with 'evaluate' instead")
    else:
        cache = source.get("graph_cache", "off")
        g = read_graph(source["graph"], directed=source["directed"],
                       keep_self_loops=source["keep_self_loops"],
                       cache=None if cache == "off" else cache)
    if source["features"]:
        features = datasets.load_features(source["features"], source["feature_ids"],
                                          node_ids=g.node_ids)
    if source["labels"]:
        labels, multilabel = datasets.load_labels(source["labels"], g.node_ids)
        if need_eval and multilabel:
            raise InputError(f"{source['labels']}: --eval-every-epoch needs one label per node")
    if source["splits"]:
        splits = datasets.load_splits(source["splits"], g.n_nodes, node_ids=g.node_ids)
    if need_eval and (labels is None or splits is None):
        raise InputError("--eval-every-epoch needs labels and splits: --dataset, or --labels "
                         "and --splits")
    return g, features, labels, splits


def _check_writable(path, overwrite):
    """InputError now if ``path`` would be refused later (exists, or no such folder)."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError(f"{path}: exists; pass --overwrite to replace it")
    if target.is_dir():
        raise InputError(f"{path}: is a directory; give a file name")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{path}: folder {parent} does not exist")


def _setup_logging(quiet):
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO,
                        format="%(message)s", stream=sys.stderr)


@cli.command()
@click.option("--embeddings", "-e", "emb_paths", required=True, multiple=True,
              type=click.Path(dir_okay=False),
              help="word2vec text/binary or .npy embeddings; repeat it with one file per epoch "
                   "to choose the epoch on validation (single-label).")
@click.option("--dataset", type=click.Choice(DATASETS), default=None,
              help="Take labels (and splits) from a benchmark set.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder of the benchmark data [default: $CAPS2NE_DATA or ../shared/data].")
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False), default=None,
              help="'node label' lines; a node on several lines makes the task multi-label.")
@click.option("--splits", "splits_path", type=click.Path(dir_okay=False), default=None,
              help="JSON list of {train, val, test} node-id lists (single-label protocol).")
@click.option("--fractions", default="0.1,0.5,0.9",
              help="Training fractions gamma of the multi-label protocol.")
@click.option("--shuffles", default=10, type=click.IntRange(min=1),
              help="Random shuffles per fraction (multi-label protocol).")
@click.option("--C", "C", default=1.0, type=click.FloatRange(min=0, min_open=True),
              help="Inverse L2 regularisation of the logistic regression.")
@click.option("--classifier", type=click.Choice(["lbfgs", "liblinear"]), default="lbfgs",
              show_default=True,
              help="lbfgs: multinomial (single-label) or one-vs-rest (multi-label) logistic "
                   "regression; liblinear: one-vs-rest LIBLINEAR, the classifier of the "
                   "authors' and DeepWalk's scoring scripts (scikit-learn < 0.22 defaults).")
@click.option("--cv-folds", default=3, type=click.IntRange(min=2), show_default=True,
              help="Multi-label with several embedding files: folds of the cross-validation "
                   "on each training part that chooses the epoch.")
@click.option("--seed", default=0, type=click.IntRange(min=0), help="Seed of the shuffles.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the results as JSON.")
@click.option("--overwrite", is_flag=True, help="Replace an existing --json file.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def evaluate(emb_paths, dataset, data_dir, labels_path, splits_path, fractions, shuffles, C,
             classifier, cv_folds, seed, json_out, overwrite, debug):
    """Node classification on embeddings, with the paper's protocols.

    Single-label (labels + splits): logistic regression on each split's training
    nodes, accuracy on its val and test nodes; with several embedding files (one
    per epoch) the epoch is chosen per split on validation.  Multi-label: the
    DeepWalk protocol (top-k labels, micro/macro-F1) over random shuffles; with
    several files the epoch is also chosen by cross-validation on each training part.
    """
    if (dataset is None) == (labels_path is None):
        raise click.UsageError("give exactly one of --dataset and --labels")
    _run(debug, _evaluate, emb_paths, dataset, data_dir, labels_path, splits_path, fractions,
         shuffles, C, seed, json_out, overwrite, classifier, cv_folds)


def _evaluate(emb_paths, dataset, data_dir, labels_path, splits_path, fractions, shuffles, C, seed,
              json_out, overwrite, classifier="lbfgs", cv_folds=3):
    import json


    from . import datasets
    from .evaluate import (classify_splits, format_table, multilabel_f1,
                           multilabel_select_epoch, select_epoch)
    from .io import atomic_write

    if json_out:
        _check_writable(json_out, overwrite)
    try:
        gammas = tuple(float(f) for f in fractions.split(","))
    except ValueError:
        raise InputError(f"--fractions: expected numbers such as 0.1,0.5,0.9, got {fractions!r}")
    if not all(0 < f < 1 for f in gammas):
        raise InputError(f"--fractions: each fraction must be in (0, 1), got {fractions!r}")
    ids, first = _read_embeddings(emb_paths[0])
    if dataset:
        ds = datasets.load_dataset(dataset, data_dir or datasets.default_data_dir(),
                                   **({"features": False} if dataset in datasets.PLANETOID_NAMES
                                      else {}))
        node_ids, labels, multilabel, splits = ds.node_ids, ds.labels, ds.multilabel, ds.splits
    else:
        node_ids = ids
        labels, multilabel = datasets.load_labels(labels_path, node_ids)
        splits = (datasets.load_splits(splits_path, len(node_ids), node_ids=node_ids)
                  if splits_path else None)
    embs = []
    for path in emb_paths:
        path_ids, emb = (ids, first) if path == emb_paths[0] else _read_embeddings(path)
        embs.append(_align(path, path_ids, emb, node_ids))
    if multilabel:
        results = [multilabel_f1(e, labels, gammas, n_shuffles=shuffles, seed=seed, C=C,
                                 solver=classifier) for e in embs]
        if len(results) > 1:
            if int(min(gammas) * len(node_ids)) < cv_folds:
                raise InputError(f"--cv-folds: {cv_folds} folds need at least {cv_folds} "
                                 f"training nodes in the smallest fraction")
            results.append(multilabel_select_epoch(embs, labels, gammas, n_shuffles=shuffles,
                                                   seed=seed, C=C, n_folds=cv_folds,
                                                   solver=classifier))
        chosen = "epoch selected by cross-validation on each training part"
    else:
        if splits is None:
            raise InputError("single-label evaluation needs --splits (a JSON list of "
                             "{train, val, test} node-id lists)")
        results = [classify_splits(e, labels, splits, C=C, multinomial=classifier == "lbfgs")
                   for e in embs]
        if len(results) > 1:
            results.append(select_epoch(results))
        chosen = "epoch selected on validation"
    for path, r in zip(list(emb_paths) + [chosen], results):
        click.echo(f"== {path}")
        click.echo(format_table(r))
    if json_out:
        with atomic_write(json_out, overwrite=overwrite) as fh:
            json.dump([_jsonable(r) for r in results], fh, indent=1)
        click.echo(f"wrote {json_out}", err=True)


def _read_embeddings(path):
    from .io import load_npy, read_word2vec

    return load_npy(path) if str(path).endswith(".npy") else read_word2vec(path)


def _align(path, ids, emb, node_ids):
    """Rows of ``emb`` (ids ``ids``) reordered to ``node_ids``; InputError if one is missing."""
    import numpy as np

    where = {nid: r for r, nid in enumerate(ids)}
    missing = [nid for nid in node_ids if nid not in where]
    if missing:
        raise InputError(f"{path}: no embedding for node {missing[0]!r} "
                         f"({len(missing)} of {len(node_ids)} nodes missing)")
    return emb[np.fromiter((where[nid] for nid in node_ids), dtype=np.int64,
                           count=len(node_ids))]


def _jsonable(obj):
    import numpy as np

    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def main():
    """Entry point of the ``caps2ne`` console script."""
    cli(prog_name=os.environ.get("CAPS2NE_PROG", "caps2ne"))


from ._cli_infer import infer as _infer  # noqa: E402  (after cli exists; see _cli_infer.py)

cli.add_command(_infer)
