"""The ``evaluate`` command: node classification on embeddings with the paper's
protocols (evaluate.py)."""

import click

from ..errors import InputError
from . import options as opt
from .files import check_outputs
from .run import reset_logging, run, wrote


class _CParam(click.ParamType):
    """A positive number, or 'tuned'."""

    name = "C"

    def convert(self, value, param, ctx):
        if isinstance(value, float) or str(value).strip().lower() == "tuned":
            return value if isinstance(value, float) else "tuned"
        try:
            number = float(value)
        except ValueError:
            number = float("nan")
        if not (number > 0 and number < float("inf")):
            self.fail(f"{value!r} is not a positive number or 'tuned'", param, ctx)
        return number


@click.command(context_settings=opt.CONTEXT)
@click.option(
    "--embeddings",
    "-e",
    "emb_paths",
    required=True,
    multiple=True,
    type=click.Path(dir_okay=False),
    help="word2vec text/binary or .npy embeddings; repeat it with one file per epoch "
    "to choose the epoch on validation (single-label).",
)
@click.option(
    "--inferred",
    "inferred_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="Embeddings of new nodes as infer writes them: the classifier is fitted on the "
    "labelled nodes of -e (the training nodes) and tested on these (single-label; "
    "labels of nodes in neither file are ignored).",
)
@opt.dataset("Take labels (and splits) from a benchmark set.")
@opt.data_dir()
@opt.labels("'node label' lines; a node on several lines makes the task multi-label.")
@opt.splits("JSON list of {train, val, test} node-id lists (single-label protocol).")
@click.option(
    "--fractions",
    default="0.1,0.5,0.9",
    help="Training fractions gamma of the multi-label protocol.",
)
@click.option(
    "--shuffles",
    default=10,
    type=click.IntRange(min=1),
    help="Random shuffles per fraction (multi-label protocol), or random splits "
    "with --train-fraction (single-label).",
)
@click.option(
    "--train-fraction",
    default=None,
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    help="Single-label without a splits file: --shuffles random splits, stratified "
    "by class (seeded by --seed), training on this fraction of the labelled "
    "nodes and testing on the rest (minus --val-fraction).",
)
@click.option(
    "--val-fraction",
    default=0.0,
    type=click.FloatRange(min=0, max=1, max_open=True),
    help="With --train-fraction: this fraction of the labelled nodes is held out "
    "for validation (needed to choose among several -e files).",
)
@click.option(
    "--C",
    "C",
    default=1.0,
    type=_CParam(),
    show_default=True,
    help="Inverse L2 regularisation of the logistic regression: a number (the paper's "
    "protocol: 1), or 'tuned': chosen per split from 0.01..1000 on its validation "
    "nodes, else by 3-fold cross-validation within its training nodes (multi-label: "
    "within the first shuffle's training part).  At a fixed C the score also depends "
    "on the scale of the embedding; tune C to compare methods fairly.",
)
@click.option(
    "--classifier",
    type=click.Choice(["lbfgs", "liblinear"]),
    default="lbfgs",
    show_default=True,
    help="lbfgs: multinomial (single-label) or one-vs-rest (multi-label) logistic "
    "regression; liblinear: one-vs-rest LIBLINEAR, the classifier of the "
    "authors' and DeepWalk's scoring scripts (scikit-learn < 0.22 defaults).",
)
@click.option(
    "--cv-folds",
    default=3,
    type=click.IntRange(min=2),
    show_default=True,
    help="Multi-label with several embedding files: folds of the cross-validation "
    "on each training part that chooses the epoch.",
)
@opt.seed("Seed of the shuffles.")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the results as JSON ('-': to standard output, the tables then go to stderr).",
)
@opt.overwrite("Replace an existing --json file.")
@opt.debug()
def evaluate(
    emb_paths,
    inferred_path,
    dataset,
    data_dir,
    labels_path,
    splits_path,
    fractions,
    shuffles,
    train_fraction,
    val_fraction,
    C,
    classifier,
    cv_folds,
    seed,
    json_out,
    overwrite,
    debug,
):
    """Node classification on embeddings, with the paper's protocols.

    Single-label (labels + splits): logistic regression on each split's training
    nodes, accuracy on its val and test nodes; with several embedding files (one
    per epoch) the epoch is chosen per split on validation.  Multi-label: the
    DeepWalk protocol (top-k labels, micro/macro-F1) over random shuffles; with
    several files the epoch is also chosen by cross-validation on each training part.
    Single-label without splits: --train-fraction F draws --shuffles random
    stratified splits (seeded by --seed); without it too, F = 0.5, and the run says so.
    """
    if (dataset is None) == (labels_path is None):
        raise click.UsageError("give exactly one of --dataset and --labels")
    if train_fraction is not None and splits_path is not None:
        raise click.UsageError("give at most one of --splits and --train-fraction")
    if inferred_path is not None and (
        len(emb_paths) > 1 or splits_path is not None or train_fraction is not None
    ):
        raise click.UsageError(
            "--inferred: give one -e (the training nodes' embeddings) and no --splits or "
            "--train-fraction (its nodes are the test nodes)"
        )
    if train_fraction is not None and train_fraction + val_fraction >= 1:
        raise click.UsageError(
            "--train-fraction plus --val-fraction must leave nodes to test "
            f"(got {train_fraction:g} + {val_fraction:g})"
        )
    reset_logging()
    run(
        debug,
        _evaluate,
        emb_paths=emb_paths,
        source=dict(
            dataset=dataset,
            data_dir=data_dir,
            labels=labels_path,
            splits=splits_path,
            inferred=inferred_path,
        ),
        fractions=fractions,
        json_out=json_out,
        overwrite=overwrite,
        protocol=dict(
            n_shuffles=shuffles,
            seed=seed,
            C=C,
            solver=classifier,
            cv_folds=cv_folds,
            train_fraction=train_fraction,
            val_fraction=val_fraction,
        ),
    )


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


def _evaluate(emb_paths, source, fractions, json_out, overwrite, protocol):
    import json

    from ..evaluate import evaluate_embeddings, format_table, jsonable
    from ..io.atomic import atomic_write

    if json_out:
        check_outputs(
            [("--json", json_out, overwrite)],
            [("--embeddings", p) for p in emb_paths]
            + [("--labels", source["labels"]), ("--splits", source["splits"])]
            + [("--inferred", source["inferred"])],
        )
    fractions = _parse_fractions(fractions)
    embs, labels, multilabel, splits = _read_inputs(emb_paths, source)
    results, chosen = evaluate_embeddings(
        embs,
        labels,
        multilabel,
        splits,
        fractions=fractions,
        note=lambda text: click.echo(text, err=True),
        **protocol,
    )
    to_stderr = json_out == "-"  # stdout then carries the JSON alone
    for path, r in zip(list(emb_paths) + [chosen], results):
        click.echo(f"== {path}", err=to_stderr)
        click.echo(format_table(r), err=to_stderr)
    if json_out:
        with atomic_write(json_out, overwrite=overwrite) as fh:
            json.dump([jsonable(r) for r in results], fh, indent=1, allow_nan=False)
            fh.write("\n")
        wrote(json_out, "results")


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
        labels_path, splits_path = source["labels"], source["splits"]
        node_ids = ids
        labels, multilabel = nodefiles.load_labels(
            labels_path, node_ids, within=f"the embeddings {emb_paths[0]}"
        )
        if multilabel and splits_path:
            raise InputError(
                f"{labels_path}: multi-label (a node on several lines), but --splits "
                "applies to single-label evaluation only; drop --splits to score "
                "with the multi-label protocol (--fractions), or give one label "
                "per node"
            )
        splits = (
            nodefiles.load_splits(splits_path, len(node_ids), node_ids=node_ids)
            if splits_path
            else None
        )
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
    train, test = [], []
    for i, nid in enumerate(node_ids):
        r = where.get(nid)
        if r is None:
            continue
        out[i] = emb[r]
        if np.ndim(labels) == 1 and labels[i] >= 0:
            (test if nid in new else train).append(i)
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
