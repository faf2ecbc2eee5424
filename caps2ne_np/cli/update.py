"""The ``update`` command: a trained model followed to a changed graph
(update/update.py): its tables carried over, trained near the change, the written
stage run again, the embeddings (and the updated model) written.  Its options are the
table ``tables.UPDATE``; its work is ``run_update``, a plain function of those options
that a test can call without click."""

import logging
from dataclasses import dataclass
from pathlib import Path

import click

from . import options as opt
from . import tables
from .files import check_outputs, load_input, source_of
from .run import run, setup_logging, wrote

log = logging.getLogger("caps2ne_np.cli")


@opt.command(tables.UPDATE)
def update(**params):
    """Update a trained model to a changed graph (edges or nodes added or removed).

    Known nodes keep their rows, the nodes near the change start from the new graph's
    spectrum (a model without a spectral start: new nodes where infer, Algorithm 3,
    puts them), and walks start only near the change (--budget: by each node's share
    of changed edges, or every node within --hops of it); the written embeddings
    are those of the whole new graph, as train writes them (docs/update.md).
    """
    check_usage(params)
    setup_logging(params["quiet"])
    run(params["debug"], run_update, params)


def update_params(**given):
    """The parameters of ``run_update``: update's options by name, ``given`` and the
    defaults of the others."""
    return opt.params(tables.UPDATE, **given)


def check_usage(params):
    """click.UsageError (exit 2) for options that do not go together, before any work."""
    for option, name in (("--checkpoint-dir", "checkpoint_dir"), ("--resume", "resume_dir")):
        if params[name] == "":
            raise click.UsageError(f"{option}: an empty path; give a folder")
    if params["checkpoint_every"] and not (params["checkpoint_dir"] or params["resume_dir"]):
        raise click.UsageError(
            "--checkpoint-every needs --checkpoint-dir (or --resume): the folder the "
            "checkpoints go to"
        )


@dataclass
class UpdateRun:
    """update's options grouped by use."""

    model_path: str
    old_graph: str
    source: dict
    out: str
    npy: str | None
    model_out: str | None
    overwrite: bool
    checkpoint_dir: str | None
    checkpoint_every: int
    resume_from: str | None
    quiet: bool


def _plan(params):
    """The UpdateRun of update's options; --out's default (<graph stem>.emb)."""
    p = params
    out = p["out"] or Path(p["graph"]).name.split(".")[0] + ".emb"
    source = source_of(
        p,
        "graph features feature_ids",
        dataset=None,
        data_dir=None,
        directed=False,
        keep_self_loops=False,
        featureless=False,
        labels=None,
        splits=None,
    )
    return UpdateRun(
        model_path=p["model_path"],
        old_graph=p["old_graph"],
        source=source,
        out=out,
        npy=p["npy_out"],
        model_out=p["model_out"],
        overwrite=p["overwrite"],
        checkpoint_dir=p["checkpoint_dir"] or p["resume_dir"],
        checkpoint_every=p["checkpoint_every"],
        resume_from=p["resume_dir"],
        quiet=p["quiet"],
    )


def run_update(params):
    """update's work, without click: ``params`` are its options by name
    (``update_params``), checked by ``check_usage``.  Errors are raised (InputError,
    OSError, ...); the command (run.run) turns them into one line and an exit code."""
    from ..io.modelfile import read_model
    from ..io.npy import nodes_path
    from ..training import trainer
    from ..update.update import UpdateOptions
    from ..update.update import update as update_model

    job = _plan(params)
    inputs = [("--model", job.model_path), ("--old-graph", job.old_graph)]
    inputs += [("--graph", job.source["graph"])]
    if job.source["features"]:
        inputs.append(("--features", job.source["features"]))
    check_outputs(
        [
            ("--out", job.out, job.overwrite),
            ("--npy", job.npy, job.overwrite),
            ("--npy's id file", nodes_path(job.npy) if job.npy else None, job.overwrite),
            ("--model-out", job.model_out, job.overwrite),
        ],
        inputs,
        checkpoint_dir=job.checkpoint_dir,
    )
    trainer.check_fresh(job.checkpoint_dir, job.resume_from, job.overwrite)
    model = read_model(job.model_path)
    old, new, features = _read_graphs(job, model)
    options = UpdateOptions(
        hops=params["hops"],
        epochs=params["epochs"],
        threads=params["threads"],
        budget=params["budget"],
    )
    done = update_model(
        model,
        old,
        new,
        features,
        options,
        checkpoint_dir=job.checkpoint_dir,
        checkpoint_every=job.checkpoint_every,
        resume_from=job.resume_from,
        progress=not job.quiet,
        keep_model=bool(job.model_out),
    )
    _write(job, model, new, done)


def _read_graphs(job, model):
    """(old graph, new graph, the new graph's features or None), both graphs read as
    the model's training read its graph (its run record)."""
    run_record = model["run"] or {}
    source = dict(job.source)
    source["directed"] = bool(run_record.get("directed", False))
    source["keep_self_loops"] = bool(run_record.get("keep_self_loops", False))
    new, features, _, _ = load_input(source)
    old_source = dict(source, graph=job.old_graph, features=None)
    old, _, _, _ = load_input(old_source)
    return old, new, features


def _write(job, model, g, done):
    """The embeddings (and the .npy, the updated model), committed together."""
    from ..io.atomic import publish_together
    from ..io.modelfile import save_model
    from ..io.npy import save_npy
    from ..io.word2vec import write_word2vec

    trained = done.trained
    result, written = trained.result, trained.written
    cfg = result.config
    history = list(model["history"] or []) + [dict(h, update=True) for h in result.history]
    with publish_together():
        write_word2vec(job.out, g.node_ids, written, overwrite=job.overwrite)
        if job.npy:
            save_npy(job.npy, written, g.node_ids, overwrite=job.overwrite)
        if job.model_out:
            save_model(
                job.model_out,
                trained.params,
                g.node_ids,
                cfg.to_dict(),
                cfg.lr,
                history,
                overwrite=job.overwrite,
                run=model["run"],
                propagation=trained.propagated,
            )
    wrote(job.out)
    if job.npy:
        wrote(job.npy)
    if job.model_out:
        wrote(job.model_out)
