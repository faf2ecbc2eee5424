"""The ``evaluate`` command: node classification on embeddings with the paper's
protocols (evaluation/evaluate.py); ``--task link`` hands over to links.py.  Its options
are the table ``tables.EVALUATE``; its work is ``run_evaluate``, a plain function of
those options that a test can call without click."""

from dataclasses import dataclass

import click

from ..errors import InputError
from . import options as opt
from . import tables
from .files import check_outputs, source_of
from .links import check_link_usage, run_links
from .run import reset_logging, run, wrote


@opt.command(tables.EVALUATE)
def evaluate(**params):
    """Node classification on embeddings, with the paper's protocols.

    Single-label (labels + splits): logistic regression on each split's training
    nodes, accuracy on its val and test nodes; with several embedding files (one
    per epoch) the epoch is chosen per split on validation.  Multi-label: the
    DeepWalk protocol (top-k labels, micro/macro-F1) over random shuffles; with
    several files the epoch is also chosen by cross-validation on each training part.
    Single-label without splits: --train-fraction F draws --shuffles random
    stratified splits (seeded by --seed); without it too, F = 0.5, and the run says so.

    --task link: the held-out edges of --split (split-edges) against sampled non-edges,
    ROC-AUC, average precision and Hits@K by cosine, dot product and logistic
    regression on Hadamard features (docs/links.md).
    """
    check_usage(params)
    reset_logging()
    run(params["debug"], run_evaluate, params)


def evaluate_params(**given):
    """The parameters of ``run_evaluate``: evaluate's options by name, ``given`` and
    the defaults of the others."""
    return opt.params(tables.EVALUATE, **given)


def check_usage(params):
    """click.UsageError (exit 2) for options that do not go together, before any work."""
    p = params
    check_link_usage(p)
    if p["task"] == "link":
        return
    train_fraction, splits_path = p["train_fraction"], p["splits_path"]
    if (p["dataset"] is None) == (p["labels_path"] is None):
        raise click.UsageError("give exactly one of --dataset and --labels")
    if train_fraction is not None and splits_path is not None:
        raise click.UsageError("give at most one of --splits and --train-fraction")
    if p["inferred_path"] is not None and (
        len(p["emb_paths"]) > 1 or splits_path is not None or train_fraction is not None
    ):
        raise click.UsageError(
            "--inferred: give one -e (the training nodes' embeddings) and no --splits or "
            "--train-fraction (its nodes are the test nodes)"
        )
    if train_fraction is not None and train_fraction + p["val_fraction"] >= 1:
        raise click.UsageError(
            "--train-fraction plus --val-fraction must leave nodes to test "
            f"(got {train_fraction:g} + {p['val_fraction']:g})"
        )


@dataclass
class EvaluateRun:
    """evaluate's options grouped by use: ``source`` (dataset, data_dir, labels,
    splits, inferred), ``protocol`` for evaluate.evaluate_embeddings."""

    emb_paths: tuple
    source: dict
    fractions: str
    protocol: dict
    json_out: str | None = None
    overwrite: bool = False


def _plan(params):
    """The EvaluateRun of evaluate's options."""
    p = params
    return EvaluateRun(
        emb_paths=p["emb_paths"],
        source=source_of(p, "dataset data_dir labels splits inferred"),
        fractions=p["fractions"],
        protocol=dict(
            {k: p[k] for k in ("seed", "C", "cv_folds", "train_fraction", "val_fraction")},
            n_shuffles=p["shuffles"],
            solver=p["classifier"],
        ),
        json_out=p["json_out"],
        overwrite=p["overwrite"],
    )


def run_evaluate(params):
    """evaluate's work, without click: ``params`` are its options by name
    (``evaluate_params``), checked by ``check_usage``; the tables on stdout (stderr
    with --json -).  Errors are raised (InputError, OSError, ...)."""
    from ..evaluation.evaluate import evaluate_embeddings

    if params["task"] == "link":
        return run_links(params, _read_embeddings)
    job = _plan(params)
    emb_paths, source, json_out = job.emb_paths, job.source, job.json_out
    if json_out:
        check_outputs(
            [("--json", json_out, job.overwrite)],
            [("--embeddings", p) for p in emb_paths]
            + [("--labels", source["labels"]), ("--splits", source["splits"])]
            + [("--inferred", source["inferred"])],
        )
    fractions = _parse_fractions(job.fractions)
    embs, labels, multilabel, splits = _read_inputs(emb_paths, source)
    results, chosen = evaluate_embeddings(
        embs,
        labels,
        multilabel,
        splits,
        fractions=fractions,
        note=lambda text: click.echo(text, err=True),
        **job.protocol,
    )
    _write(job, results, chosen)


def _write(job, results, chosen):
    """The tables (on stderr with --json -, stdout then carrying the JSON alone), and
    --json."""
    import json

    from ..evaluation.report import format_table, jsonable
    from ..io.atomic import atomic_write

    to_stderr = job.json_out == "-"
    for path, r in zip(list(job.emb_paths) + [chosen], results):
        click.echo(f"== {path}", err=to_stderr)
        click.echo(format_table(r), err=to_stderr)
    if job.json_out:
        with atomic_write(job.json_out, overwrite=job.overwrite) as fh:
            json.dump([jsonable(r) for r in results], fh, indent=1, allow_nan=False)
            fh.write("\n")
        wrote(job.json_out, "results")


def _parse_fractions(fractions):
    """--fractions: the training fractions gamma (InputError when they do not parse or
    lie outside (0, 1))."""
    try:
        gammas = tuple(float(f) for f in fractions.split(","))
    except ValueError:
        raise InputError(
            f"--fractions: expected numbers such as 0.1,0.5,0.9, got {fractions!r}"
        ) from None
    if not all(0 < f < 1 for f in gammas):
        raise InputError(f"--fractions: each fraction must be in (0, 1), got {fractions!r}")
    return gammas


def _read_inputs(emb_paths, source):
    """(embeddings in the labels' node order, labels, multilabel, splits or None) from
    the files: -e, and --dataset or --labels/--splits."""
    from ..graphs import datasets, downloads, nodefiles

    ids, first = _read_embeddings(emb_paths[0])
    if source["inferred"]:
        ids, first, new = _with_inferred(emb_paths[0], ids, first, source["inferred"])
    if source["dataset"]:
        dataset = source["dataset"]
        ds = datasets.load_dataset(
            dataset,
            source["data_dir"] or downloads.default_data_dir(),
            **({"features": False} if dataset in datasets.PLANETOID_NAMES else {}),
        )
        node_ids, labels, multilabel, splits = ds.node_ids, ds.labels, ds.multilabel, ds.splits
    else:
        node_ids, splits = ids, None
        within = f"the embeddings {emb_paths[0]}" + (
            f" or {source['inferred']}" if source["inferred"] else ""
        )
        labels, multilabel = nodefiles.load_labels(
            source["labels"], node_ids, within=within, on_unknown=_skipped_note(within)
        )
    if source["splits"]:  # the file's splits replace a dataset's own
        splits = _read_splits(source, node_ids, multilabel)
    if source["inferred"]:
        if multilabel:
            raise InputError(
                f"--inferred: {source['labels'] or source['dataset']} is multi-label; "
                "--inferred scores single-label data"
            )
        emb, splits = _inferred_split(source["inferred"], ids, first, new, node_ids, labels)
        return [emb], labels, multilabel, splits
    embs = []
    for path in emb_paths:
        path_ids, emb = (ids, first) if path == emb_paths[0] else _read_embeddings(path)
        embs.append(_align(path, path_ids, emb, node_ids))
    return embs, labels, multilabel, splits


def _read_splits(source, node_ids, multilabel):
    """The splits of --splits over ``node_ids``; InputError for multi-label data."""
    from ..graphs import nodefiles

    if multilabel:
        what = source["labels"] or source["dataset"]
        raise InputError(
            f"{what}: multi-label (a node with several labels), but --splits applies to "
            "single-label evaluation only; drop --splits to score with the multi-label "
            "protocol (--fractions), or give one label per node"
        )
    return nodefiles.load_splits(source["splits"], len(node_ids), node_ids=node_ids)


def _skipped_note(within):
    """The ``on_unknown`` of load_labels: a note on stderr of the labelled nodes skipped."""

    def note(count, first):
        click.echo(
            f"note: skipping {count} labelled node(s) not in {within} (e.g. {first!r}); "
            "scoring the labelled nodes that have embeddings",
            err=True,
        )

    return note


def _with_inferred(path, ids, emb, inferred):
    """(ids, embeddings, the inferred ids) of -e's rows followed by infer's rows (an id in
    both: infer's row)."""
    import numpy as np

    new_ids, new = _read_embeddings(inferred)
    if new.shape[1] != emb.shape[1]:
        raise InputError(
            f"{inferred}: {new.shape[1]}-dimensional embeddings, {path} has "
            f"{emb.shape[1]}; give infer's output for the model that wrote {path}"
        )
    new_set = set(new_ids)
    keep = [r for r, nid in enumerate(ids) if nid not in new_set]
    ids = [ids[r] for r in keep] + list(new_ids)
    return ids, np.concatenate([emb[keep], new.astype(emb.dtype, copy=False)]), new_set


def _inferred_split(inferred, ids, emb, new, node_ids, labels):
    """(embeddings in ``node_ids`` order, one split): train on the labelled nodes
    with a training embedding, test on the labelled inferred nodes; other nodes get a
    zero row that no split uses."""
    import numpy as np

    where = {nid: r for r, nid in enumerate(ids)}
    out = np.zeros((len(node_ids), emb.shape[1]), dtype=emb.dtype)
    train, test, skipped = [], [], []
    for i, nid in enumerate(node_ids):
        r = where.get(nid)
        if r is None:
            if np.ndim(labels) == 1 and labels[i] >= 0:
                skipped.append(nid)
            continue
        out[i] = emb[r]
        if np.ndim(labels) == 1 and labels[i] >= 0:
            (test if nid in new else train).append(i)
    if skipped:
        _skipped_note(f"-e or {inferred}")(len(skipped), skipped[0])
    if not test or not train:
        raise InputError(
            f"{inferred}: {len(test)} labelled inferred node(s) to test and {len(train)} "
            "labelled training node(s) in -e; the labels must name nodes of both files"
        )
    empty = np.zeros(0, dtype=np.int64)
    split = dict(train=np.asarray(train, np.int64), val=empty, test=np.asarray(test, np.int64))
    return out, [split]


def _read_embeddings(path):
    from ..io.npy import load_npy
    from ..io.word2vec import read_word2vec

    return load_npy(path) if str(path).endswith(".npy") else read_word2vec(path)


def _align(path, ids, emb, node_ids):
    """Rows of ``emb`` (ids ``ids``) reordered to ``node_ids``; InputError if one is missing."""
    import numpy as np

    where = {nid: r for r, nid in enumerate(ids)}
    missing = [nid for nid in node_ids if nid not in where]
    if missing:
        raise InputError(
            f"{path}: no embedding for node {missing[0]!r} "
            f"({len(missing)} of {len(node_ids)} nodes missing)"
        )
    return emb[np.fromiter((where[nid] for nid in node_ids), dtype=np.int64, count=len(node_ids))]
