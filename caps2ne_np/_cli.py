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

log = logging.getLogger("caps2ne_np.cli")

DEFAULTS = PLAIN


class _Failure(click.ClickException):
    """One-line error, exit code 1."""

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt, so that
    the same clean-up runs (temp files removed, the lock released)."""


def _raise_terminated(signum, frame):
    raise _Terminated()


_WRITTEN = []   # outputs written by the running command, for the interruption message


def _wrote(path, what="embeddings"):
    """Say on stderr that ``path`` was written ('-': standard output) and remember it."""
    from .io import is_stdout

    _WRITTEN.append(str(path))
    log.info(f"wrote {what} to standard output" if is_stdout(path) else f"wrote {path}")


def _run(debug, fn, *args, **kwargs):
    """Call fn; turn user-facing errors into one-line messages unless --debug.

    InputWarnings (self loops dropped, duplicates merged, ...) are printed as
    ``warning: ...`` lines the moment they are raised, before training starts.
    SIGTERM is handled as Ctrl-C: one line, temp files removed, exit code 143
    (130 for Ctrl-C), as shells report a process ended by those signals.
    """
    import signal
    import threading

    from .train import TrainingDiverged

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, InputWarning):
            if logging.getLogger("caps2ne_np").isEnabledFor(logging.WARNING):   # not with -q
                _write_line(f"warning: {message}")
        else:
            default_show(message, category, filename, lineno, file, line)

    _WRITTEN.clear()
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
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
        except KeyboardInterrupt as err:
            term = isinstance(err, _Terminated)
            done = (f"wrote only {', '.join(_WRITTEN)}" if _WRITTEN
                    else "no output was written")
            failure = _Failure(f"{'terminated (SIGTERM)' if term else 'interrupted'}; {done}")
            failure.exit_code = 143 if term else 130
            raise failure from None
        except Exception as err:  # noqa: BLE001 -- last resort: never a bare traceback
            if debug:
                raise
            raise _Failure(f"internal error ({type(err).__name__}: {_one_line(err)}); "
                           "rerun with --debug for the traceback and please report it") from None
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)


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
              help="Edge list: 'u v' or 'u v weight' per line, '#' comments ('-': standard "
                   "input; .gz/.bz2/.xz are decompressed); or a scipy .npz / .mat.")
@click.option("--dataset", type=click.Choice(DATASETS), default=None,
              help="A benchmark set instead of --graph (features, labels and splits included).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder of the benchmark data; files missing there are downloaded (SHA-256 "
                   "checked) [default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np].")
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
                   "(same file content by hash, same --directed/--keep-self-loops) and rebuilds "
                   "it otherwise; 'write' always rebuilds it.")
@click.option("--keep-self-loops", is_flag=True, help="Keep u-u edges (dropped by default).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Embeddings in word2vec text format ('-': standard output) "
                   "[default: <graph stem>.emb].")
@click.option("--binary", is_flag=True,
              help="Write --out in word2vec binary format (gensim: binary=True): about 4x "
                   "smaller and much faster to write than text.")
@click.option("--npy", "npy_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the embeddings as an (N, k) float32 .npy, rows in the order of "
                   "--out (the graph's node order: first appearance in the edge list), plus "
                   "<stem>.nodes.txt with the id of each row when the ids are not 0..N-1 in "
                   "that order.")
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
@click.option("--quiet", "-q", is_flag=True,
              help="Print only errors: no progress bar, log lines or warnings.")
@click.option("--verbose", "-v", is_flag=True,
              help="Also print debugging details (the full configuration, threads).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def train(graph, graph_cache, dataset, data_dir, features_path, feature_ids, featureless, no_normalize_features,
          labels_path, splits_path, eval_every_epoch, directed, keep_self_loops, out, npy_out,
          model_out, history_out, overwrite, checkpoint_dir, checkpoint_every, resume_dir, debug, quiet,
          verbose, binary, **options):
    """Learn Caps2NE node embeddings for the graph in --graph (or --dataset).

    The embeddings written out are the output vectors o_v, one per node, in the
    user's node ids (word2vec text format, readable by gensim).
    """
    if (graph is None) == (dataset is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    for option, value in (("--npy", npy_out), ("--model-out", model_out),
                          ("--history", history_out)):
        if value == "-":
            raise click.UsageError(f"{option}: '-' (standard output) is accepted by --out only; "
                                   "give a file name")
    if out is None and graph == "-":
        raise click.UsageError("--graph - (standard input) needs --out (a file, or '-' for "
                               "standard output)")
    if out is None:
        out = (dataset or Path(graph).name.split(".")[0]) + ".emb"
    _setup_logging(quiet, verbose)
    source = dict(graph=graph, graph_cache=graph_cache, dataset=dataset, data_dir=data_dir, features=features_path,
                  feature_ids=feature_ids, featureless=featureless, labels=labels_path,
                  splits=splits_path, directed=directed, keep_self_loops=keep_self_loops)
    options["normalize_features"] = not no_normalize_features
    ckpt = dict(checkpoint_dir=checkpoint_dir or resume_dir, checkpoint_every=checkpoint_every,
                resume_from=resume_dir)
    _run(debug, _train, source, eval_every_epoch, out, npy_out, model_out, overwrite, quiet,
         options, ckpt, history_out, binary)


def _train(source, eval_every_epoch, out, npy_out, model_out, overwrite, quiet, options, ckpt,
           history_out=None, binary=False):
    # train.fit directly, not the scikit-learn estimator: importing scikit-learn
    # costs about a second, and a small run should not pay it.
    from .io import save_npy, write_word2vec
    from .modelfile import save_model
    from .train import TrainConfig, fit

    from . import checkpoint
    from .io import nodes_path

    resume = bool(ckpt["resume_from"])
    outputs = [("--out", out, overwrite), ("--npy", npy_out, overwrite),
               ("--npy's id file", nodes_path(npy_out) if npy_out else None, overwrite),
               ("--model-out", model_out, overwrite),
               # a resumed run rewrites its own history, from the checkpoint's, every epoch in it
               ("--history", history_out, overwrite or resume)]
    _check_outputs(outputs, _inputs(source), checkpoint_dir=ckpt["checkpoint_dir"])
    if options["engine"] == "ray" and eval_every_epoch and (ckpt["checkpoint_dir"] or resume):
        # the Ray driver's checkpoint does not hold the best-epoch tracker yet (issue 15's
        # checkpoint_extra), so a resumed run could keep another epoch: refuse, not guess
        raise InputError("--eval-every-epoch with --checkpoint-dir or --resume is not "
                         "supported with --engine ray yet; use one of them, or the "
                         "single-machine engine")
    if ckpt["checkpoint_dir"] and not ckpt["resume_from"]:
        checkpoint.check_fresh(ckpt["checkpoint_dir"], overwrite)
    g, features, labels, splits = _load_input(source, need_eval=eval_every_epoch)
    log.info(f"graph: {g.n_nodes} nodes, {g.n_edges} directed edges "
             f"({'directed' if g.directed else 'undirected'}"
             f"{', weighted' if g.weights is not None else ''}); features: "
             f"{'trained x' if features is None else f'fixed, d = {features.shape[1]}'}")
    if options["threads"] is None:
        options["threads"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
            else (os.cpu_count() or 1)
    engine = {k: options.pop(k) for k in ("engine", "workers", "servers", "ray_address")}
    cfg = TrainConfig(**options)
    log.debug("options: %s; %d thread(s)", cfg, options["threads"])
    tracker = _EpochTracker(labels, splits) if eval_every_epoch else None
    callback = tracker
    if history_out:
        callback = _HistoryWriter(history_out, overwrite, tracker)

    def finish(result):
        """Report the run and write its outputs."""
        cfg = result.config                       # every preset value filled in
        last = result.history[-1]
        lr = cfg.lr
        seconds = sum(h["seconds"] for h in result.history)
        log.info(f"trained {len(result.history)} epochs in {seconds:.1f}s: final loss "
                 f"{last['loss']:.4f}, {last['pairs_per_s']:,.0f} pairs/s (lr {lr:g} "
                 f"{cfg.lr_schedule})")
        log.debug("resolved configuration: %s", cfg.to_dict())
        params = result.params
        if tracker is not None:
            params = tracker.params_like(result.params)
            log.info(tracker.summary())
        write_word2vec(out, g.node_ids, params.O, overwrite=overwrite, binary=binary)
        _wrote(out, "embeddings (word2vec binary)" if binary else "embeddings")
        if npy_out:
            save_npy(npy_out, params.O, g.node_ids, overwrite=overwrite)
            _wrote(npy_out)
        if model_out:
            save_model(model_out, params, g.node_ids, cfg.to_dict(), lr, result.history,
                       overwrite=overwrite)
            _wrote(model_out)

    streamed = False
    on_ray = engine.pop("engine") == "ray"
    if on_ray:                                # issue 18: sharded training (distributed.py)
        from .distributed import cli_fit

        # the tables go from the shards to the writers block by block (the driver never
        # holds one), unless --eval-every-epoch keeps a best epoch's tables anyway
        streamed = tracker is None
        fit = functools.partial(cli_fit, overwrite=overwrite,
                                write_outputs=finish if streamed else None, **engine)
    if not on_ray:                            # the Ray driver checkpoints no tracker (above)
        ckpt = dict(ckpt, checkpoint_extra=tracker)
    result = fit(g.indptr, g.indices, g.weights, cfg, features=features, progress=not quiet,
                 epoch_callback=callback, **ckpt)
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
        self._stored = None

    def __call__(self, epoch, result):
        import time

        from .evaluate import classify_splits

        t0 = time.perf_counter()
        r = classify_splits(result.params.O, self.labels, self.splits)
        self.results.append(r)
        if r["val_mean"] > self.best_val:
            self.best_val, self.best_epoch = r["val_mean"], epoch
            self._stored = None
            p = result.params
            self.best_params = type(p)(p.W.copy(), p.O.copy(), p.bias.copy(),
                                       p.X if p.fixed_features else p.X.copy(),
                                       fixed_features=p.fixed_features)
        log.info(f"epoch {epoch}: val acc {100 * r['val_mean']:.2f}, test acc "
                 f"{100 * r['test_mean']:.2f} (mean of {len(self.splits)} splits; "
                 f"{time.perf_counter() - t0:.1f}s)")

    def checkpoint_arrays(self):
        """The tracker's state for the run's checkpoint (train.fit's checkpoint_extra)."""
        import json

        import numpy as np

        arrays = {"tracker": np.asarray(json.dumps({
            "results": [_jsonable(r) for r in self.results], "best_val": self.best_val,
            "best_epoch": self.best_epoch}))}
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
            raise InputError("--eval-every-epoch: the checkpoint was written by a run without "
                             "it, so the epochs before it were never scored; resume without "
                             "--eval-every-epoch (and score the output with 'evaluate')")
        state = json.loads(str(extra["tracker"]))
        self.results = [dict(r, val=np.asarray(r["val"], dtype=np.float64),
                             test=np.asarray(r["test"], dtype=np.float64))
                        for r in state["results"]]
        self.best_val, self.best_epoch = float(state["best_val"]), int(state["best_epoch"])
        self.best_params = None
        self._stored = ({k: extra[k] for k in ("best_W", "best_O", "best_bias", "best_X")
                         if k in extra} if "best_O" in extra else None)

    def params_like(self, params):
        """The kept epoch's parameters (``params``, the last epoch's, give the fixed x)."""
        if self.best_params is None and getattr(self, "_stored", None):
            st = self._stored
            X = params.X if params.fixed_features else st["best_X"]
            self.best_params = type(params)(st["best_W"], st["best_O"], st["best_bias"], X,
                                            fixed_features=params.fixed_features)
        return self.best_params if self.best_params is not None else params

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
    """InputError now if writing ``path`` would be refused or fail later ('-' is stdout)."""
    from .io import check_output_path, is_stdout, probe_writable

    if is_stdout(path):
        return
    check_output_path(path, overwrite)
    probe_writable(path)


def _inputs(source):
    """[(option, path)] of the files a command reads, which no output may replace."""
    from .graph import cache_path

    inputs = [("--graph", source.get("graph")), ("--features", source.get("features")),
              ("--feature-ids", source.get("feature_ids")), ("--labels", source.get("labels")),
              ("--splits", source.get("splits"))]
    if source.get("graph") and source["graph"] != "-" and source.get("graph_cache", "off") != "off":
        inputs.append(("--graph-cache", str(cache_path(source["graph"]))))
    return [(option, path) for option, path in inputs if path and path != "-"]


def _check_outputs(outputs, inputs, checkpoint_dir=None):
    """Before any work: every output (option, path, overwrite) is writable, and no two
    outputs, nor an output and an input, nor an output and a checkpoint file, are the
    same file once symbolic links and '..' are resolved (os.path.realpath)."""
    from . import checkpoint
    from .io import is_stdout, probe_writable

    taken = {os.path.realpath(path): (f"input {option}", path) for option, path in inputs
             if path and path != "-"}
    if checkpoint_dir:
        if os.path.realpath(checkpoint_dir) in taken:
            what, other = taken[os.path.realpath(checkpoint_dir)]
            raise InputError(f"--checkpoint-dir {checkpoint_dir}: the same path as {what} {other}")
        taken[os.path.realpath(checkpoint_dir)] = ("--checkpoint-dir", checkpoint_dir)
        for name in (checkpoint.LATEST, checkpoint.PREVIOUS, checkpoint.NEW,
                     checkpoint.PREVIOUS_NEW, checkpoint.LOCK):
            path = os.path.join(checkpoint_dir, name)
            taken[os.path.realpath(path)] = ("checkpoint file", path)
    for option, path, overwrite in outputs:
        if path is None or is_stdout(path):
            continue
        if path != "":
            key = os.path.realpath(path)
            if key in taken:
                what, other = taken[key]
                fix = ("writing it would replace that input" if what.startswith("input")
                       else "give each output its own file name")
                raise InputError(f"{option} {path}: the same file as {what} {other}; {fix}")
            taken[key] = (option, path)
        _check_writable(path, overwrite)
    if checkpoint_dir:
        target = Path(checkpoint_dir)
        if target.exists() and not target.is_dir():
            raise InputError(f"--checkpoint-dir {checkpoint_dir}: exists and is not a folder")
        existing = target
        while not existing.exists():
            if existing.is_symlink():
                raise InputError(f"--checkpoint-dir {checkpoint_dir}: {existing} is a dangling "
                                 "symbolic link")
            existing = existing.parent
        if not existing.is_dir():
            raise InputError(f"--checkpoint-dir {checkpoint_dir}: {existing} is not a folder")
        probe_writable(existing / "checkpoint.npz")


def _write_line(text):
    """One line on stderr through tqdm's writer: above a running progress bar, not glued
    onto it.  sys.stderr is looked up per line (click's test runner swaps it)."""
    from tqdm import tqdm

    tqdm.write(text, file=sys.stderr)


class _BarSafeHandler(logging.Handler):
    """The package's log lines, written with :func:`_write_line`."""

    def emit(self, record):
        try:
            _write_line(self.format(record))
        except Exception:  # noqa: BLE001 -- logging must never raise
            self.handleError(record)


def _reset_logging():
    """Undo :func:`_setup_logging` (commands without -q/-v: the default logging rules);
    click's test runner runs several commands in one process."""
    logger = logging.getLogger("caps2ne_np")
    for handler in list(logger.handlers):
        if isinstance(handler, _BarSafeHandler):
            logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


def _setup_logging(quiet, verbose=False):
    """Log lines of the ``caps2ne_np`` loggers on stderr: info (default), errors only
    (-q), or debug details too (-v)."""
    logger = logging.getLogger("caps2ne_np")
    for handler in list(logger.handlers):
        if isinstance(handler, _BarSafeHandler):
            logger.removeHandler(handler)
    handler = _BarSafeHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False


@cli.command()
@click.option("--embeddings", "-e", "emb_paths", required=True, multiple=True,
              type=click.Path(dir_okay=False),
              help="word2vec text/binary or .npy embeddings; repeat it with one file per epoch "
                   "to choose the epoch on validation (single-label).")
@click.option("--dataset", type=click.Choice(DATASETS), default=None,
              help="Take labels (and splits) from a benchmark set.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder of the benchmark data; files missing there are downloaded (SHA-256 "
                   "checked) [default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np].")
@click.option("--labels", "labels_path", type=click.Path(dir_okay=False), default=None,
              help="'node label' lines; a node on several lines makes the task multi-label.")
@click.option("--splits", "splits_path", type=click.Path(dir_okay=False), default=None,
              help="JSON list of {train, val, test} node-id lists (single-label protocol).")
@click.option("--fractions", default="0.1,0.5,0.9",
              help="Training fractions gamma of the multi-label protocol.")
@click.option("--shuffles", default=10, type=click.IntRange(min=1),
              help="Random shuffles per fraction (multi-label protocol), or random splits "
                   "with --train-fraction (single-label).")
@click.option("--train-fraction", default=None,
              type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
              help="Single-label without a splits file: --shuffles random splits, stratified "
                   "by class (seeded by --seed), training on this fraction of the labelled "
                   "nodes and testing on the rest (minus --val-fraction).")
@click.option("--val-fraction", default=0.0,
              type=click.FloatRange(min=0, max=1, max_open=True),
              help="With --train-fraction: this fraction of the labelled nodes is held out "
                   "for validation (needed to choose among several -e files).")
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
              help="Also write the results as JSON ('-': to standard output, the tables then "
                   "go to stderr).")
@click.option("--overwrite", is_flag=True, help="Replace an existing --json file.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def evaluate(emb_paths, dataset, data_dir, labels_path, splits_path, fractions, shuffles,
             train_fraction, val_fraction, C, classifier, cv_folds, seed, json_out, overwrite,
             debug):
    """Node classification on embeddings, with the paper's protocols.

    Single-label (labels + splits): logistic regression on each split's training
    nodes, accuracy on its val and test nodes; with several embedding files (one
    per epoch) the epoch is chosen per split on validation.  Multi-label: the
    DeepWalk protocol (top-k labels, micro/macro-F1) over random shuffles; with
    several files the epoch is also chosen by cross-validation on each training part.
    Single-label without splits: --train-fraction F draws --shuffles random
    stratified splits.
    """
    if (dataset is None) == (labels_path is None):
        raise click.UsageError("give exactly one of --dataset and --labels")
    if train_fraction is not None and splits_path is not None:
        raise click.UsageError("give at most one of --splits and --train-fraction")
    if train_fraction is not None and train_fraction + val_fraction >= 1:
        raise click.UsageError("--train-fraction plus --val-fraction must leave nodes to test "
                               f"(got {train_fraction:g} + {val_fraction:g})")
    _reset_logging()
    _run(debug, _evaluate, emb_paths, dataset, data_dir, labels_path, splits_path, fractions,
         shuffles, C, seed, json_out, overwrite, classifier, cv_folds, train_fraction,
         val_fraction)


def _evaluate(emb_paths, dataset, data_dir, labels_path, splits_path, fractions, shuffles, C, seed,
              json_out, overwrite, classifier="lbfgs", cv_folds=3, train_fraction=None,
              val_fraction=0.0):
    import json

    import numpy as np

    from . import datasets
    from .evaluate import (classify_splits, format_table, multilabel_f1,
                           multilabel_select_epoch, random_splits, select_epoch)
    from .io import atomic_write

    if json_out:
        _check_outputs([("--json", json_out, overwrite)],
                       [("--embeddings", p) for p in emb_paths]
                       + [("--labels", labels_path), ("--splits", splits_path)])
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
        if multilabel and splits_path:
            raise InputError(f"{labels_path}: multi-label (a node on several lines), but --splits "
                             "applies to single-label evaluation only; drop --splits to score "
                             "with the multi-label protocol (--fractions), or give one label "
                             "per node")
        splits = (datasets.load_splits(splits_path, len(node_ids), node_ids=node_ids)
                  if splits_path else None)
    embs = []
    for path in emb_paths:
        path_ids, emb = (ids, first) if path == emb_paths[0] else _read_embeddings(path)
        embs.append(_align(path, path_ids, emb, node_ids))
    if train_fraction is not None and multilabel:
        raise InputError("--train-fraction is for single-label data; the multi-label protocol "
                         "takes its training fractions from --fractions")
    if multilabel:
        # the protocol scores labelled nodes only: an unlabelled node has no label to
        # predict (k_i = 0) and would count as a free correct answer or a free miss
        labelled = np.flatnonzero(np.diff(labels.tocsr().indptr) > 0)
        if labelled.size < len(node_ids):
            click.echo(f"scoring the {labelled.size} labelled nodes of {len(node_ids)} "
                       f"({len(node_ids) - labelled.size} have no label)", err=True)
            labels = labels.tocsr()[labelled]
            embs = [e[labelled] for e in embs]
        n_scored = labelled.size
        for g in gammas:
            if int(g * n_scored) < 1 or int(g * n_scored) >= n_scored:
                raise InputError(f"--fractions: {g:g} of {n_scored} labelled nodes leaves "
                                 f"{int(g * n_scored)} training and {n_scored - int(g * n_scored)} "
                                 f"test nodes; use fractions between {1 / n_scored:.3g} and "
                                 f"{1 - 1 / n_scored:.3g}")
        results = [multilabel_f1(e, labels, gammas, n_shuffles=shuffles, seed=seed, C=C,
                                 solver=classifier) for e in embs]
        if len(results) > 1:
            if int(min(gammas) * n_scored) < cv_folds:
                raise InputError(f"--cv-folds: {cv_folds} folds need at least {cv_folds} "
                                 f"training nodes in the smallest fraction")
            results.append(multilabel_select_epoch(embs, labels, gammas, n_shuffles=shuffles,
                                                   seed=seed, C=C, n_folds=cv_folds,
                                                   solver=classifier))
        chosen = "epoch selected by cross-validation on each training part"
    else:
        if train_fraction is not None:
            splits = random_splits(labels, train_fraction, shuffles, val_fraction=val_fraction,
                                   seed=seed)
            if len(emb_paths) > 1 and not val_fraction:
                raise InputError("several -e files: choosing the epoch needs validation nodes; "
                                 "add --val-fraction (e.g. 0.1)")
        if splits is None:
            raise InputError("single-label evaluation needs --splits (a JSON list of "
                             "{train, val, test} node-id lists) or --train-fraction F for "
                             "random stratified splits")
        results = [classify_splits(e, labels, splits, C=C, multinomial=classifier == "lbfgs")
                   for e in embs]
        if len(results) > 1:
            results.append(select_epoch(results))
        chosen = "epoch selected on validation"
    to_stderr = json_out == "-"               # stdout then carries the JSON alone
    for path, r in zip(list(emb_paths) + [chosen], results):
        click.echo(f"== {path}", err=to_stderr)
        click.echo(format_table(r), err=to_stderr)
    if json_out:
        with atomic_write(json_out, overwrite=overwrite) as fh:
            json.dump([_jsonable(r) for r in results], fh, indent=1)
            fh.write("\n")
        _wrote(json_out, "results")


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


@cli.command("fetch-data")
@click.argument("names", nargs=-1, type=click.Choice(DATASETS[:-1]))
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder to put them in [default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np].")
@click.option("--featureless", is_flag=True,
              help="Skip the Planetoid feature files (allx, tx).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def fetch_data(names, data_dir, featureless, debug):
    """Download benchmark sets (all of them without NAMES) into the data folder.

    Files come from the authors' repository at a fixed commit (or from
    $CAPS2NE_DATA_MIRROR), each checked against the SHA-256 held in the code;
    files already there are kept.  'train --dataset NAME' does the same on first use.
    """
    def run():
        from . import datasets

        _setup_logging(False)
        for name in names or DATASETS[:-1]:
            where = datasets.fetch(name, data_dir, features=not featureless)
            click.echo(f"{name}: {where}")

    _run(debug, run)


def main():
    """Entry point of the ``caps2ne`` console script."""
    cli(prog_name=os.environ.get("CAPS2NE_PROG", "caps2ne"))


from ._cli_infer import infer as _infer  # noqa: E402  (after cli exists; see _cli_infer.py)

cli.add_command(_infer)
