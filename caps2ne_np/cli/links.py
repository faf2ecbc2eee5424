"""Link prediction on the command line: the ``split-edges`` command (a seeded split of a
graph into training and held-out edges, written as two edge lists) and the work of
``evaluate --task link`` (the held-out edges scored against sampled non-edges);
evaluation/links.py does both, docs/links.md describes the protocol."""

import os

import click

from ..errors import InputError
from . import options as opt
from . import tables
from .files import check_outputs
from .run import reset_logging, run


@opt.command(tables.SPLIT_EDGES, name="split-edges")
def split_edges(**params):
    """Hold out a seeded fraction of a graph's edges for link prediction.

    Writes --out/train_edges.txt (train the embeddings on it: every node of the graph
    keeps a training edge, a random spanning forest stays) and --out/held_edges.txt;
    then `evaluate --task link -e EMB --graph G --split OUT` scores them.  Weights are
    kept in train_edges.txt and not read for the draw; with --directed an edge is u->v.
    """
    if (params["graph"] is None) == (params["dataset"] is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    reset_logging()
    run(params["debug"], run_split_edges, params)


def split_edges_params(**given):
    """The parameters of ``run_split_edges``: split-edges' options by name, ``given`` and
    the defaults of the others."""
    return opt.params(tables.SPLIT_EDGES, **given)


def run_split_edges(params):
    """split-edges' work, without click; one summary line on stderr."""
    from ..evaluation import links

    p = params
    paths = [os.path.join(p["out"], name) for name in (links.TRAIN_FILE, links.HELD_FILE)]
    if os.path.exists(p["out"]) and not os.path.isdir(p["out"]):
        raise InputError(f"--out {p['out']}: exists and is not a folder")
    if os.path.isdir(p["out"]):
        check_outputs([("--out", path, p["overwrite"]) for path in paths], _inputs(p))
    A, node_ids, name = read_link_graph(p)
    split = links.split_edges(A, p["holdout"], p["seed"], p["directed"])
    write_split(p["out"], links.split_files(split, node_ids, name), p["overwrite"])
    total = len(split.train) + len(split.held)
    short = (
        f" (asked for {split.wanted}: the rest are in the spanning forest, which stays)"
        if len(split.held) < split.wanted
        else ""
    )
    click.echo(
        f"held out {len(split.held):,} of {total:,} edges{short} into {paths[1]}; "
        f"train on {paths[0]}",
        err=True,
    )


def write_split(folder, texts, overwrite=False):
    """Write {file name: text} (evaluation.links.split_files) into ``folder`` (made if
    missing), atomically and all or none; an existing file only with ``overwrite``."""
    from ..io.atomic import atomic_write, publish_together

    for name in texts:
        path = os.path.join(folder, name)
        if os.path.exists(path) and not overwrite:
            raise InputError(f"{path}: exists; pass --overwrite to replace it")
    os.makedirs(folder, exist_ok=True)
    with publish_together():
        for name, text in texts.items():
            with atomic_write(os.path.join(folder, name), overwrite=overwrite) as fh:
                fh.write(text)


def _inputs(p):
    return [("--graph", p.get("graph"))]


def read_link_graph(p):
    """(adjacency (scipy CSR), node ids, its name) of --graph or --dataset."""
    if p.get("dataset"):
        from ..graphs import datasets, downloads

        name = p["dataset"]
        kwargs = {"features": False} if name in datasets.PLANETOID_NAMES else {}
        ds = datasets.load_dataset(name, p["data_dir"] or downloads.default_data_dir(), **kwargs)
        return ds.adj, [str(i) for i in ds.node_ids], f"--dataset {name}"
    from ..graphs.graph import read_graph

    g = read_graph(p["graph"], directed=p["directed"])
    return g.to_scipy(), list(g.node_ids), os.path.basename(p["graph"])


def check_link_usage(p):
    """click.UsageError (exit 2) for options that do not go with --task link, or that
    only go with it."""
    if p["task"] == "node":
        for option, value in (("--graph", p["graph"]), ("--split", p["split_path"])):
            if value is not None:
                raise click.UsageError(f"{option} goes with --task link")
        return
    if (p["graph"] is None) == (p["dataset"] is None):
        raise click.UsageError("--task link: give exactly one of --graph and --dataset")
    if p["split_path"] is None:
        raise click.UsageError("--task link: give --split (the folder split-edges wrote)")
    if len(p["emb_paths"]) != 1:
        raise click.UsageError("--task link: give one -e (embeddings trained on the split)")
    for option, name in (
        ("--labels", "labels_path"),
        ("--splits", "splits_path"),
        ("--inferred", "inferred_path"),
        ("--train-fraction", "train_fraction"),
    ):
        if p[name] is not None:
            raise click.UsageError(f"{option} goes with --task node, not --task link")


def run_links(params, read_embeddings):
    """evaluate --task link's work: the table on stdout (stderr with --json -), --json."""
    from ..evaluation import links

    p = params
    emb_path = p["emb_paths"][0]
    if p["json_out"]:
        check_outputs(
            [("--json", p["json_out"], p["overwrite"])],
            [("--embeddings", emb_path), ("--graph", p["graph"])],
        )
    kinds = _kinds(p["negatives"])
    if p["C"] == "tuned":
        raise InputError("--C tuned: --task link takes a number (the default, 1)")
    A, node_ids, _ = read_link_graph(p)
    split = links.read_split(p["split_path"], A, node_ids, p["directed"])
    if not len(split.held):
        raise InputError(f"{p['split_path']}: no held-out edge to score")
    if p["hits_k"] > len(split.held):
        raise InputError(
            f"--hits-k {p['hits_k']}: at most the {len(split.held)} held-out edges (as many "
            "non-edges are drawn); give a smaller --hits-k"
        )
    E = link_rows(emb_path, *read_embeddings(emb_path), node_ids, split)
    result = links.evaluate_links(E, split, kinds, p["hits_k"], p["cv_folds"], p["seed"], p["C"])
    _write(p, emb_path, result)


def _kinds(text):
    """--negatives: the kinds of non-edges, checked."""
    from ..evaluation.links import NEGATIVE_KINDS

    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in NEGATIVE_KINDS]
    if bad or not kinds:
        raise InputError(
            f"--negatives: comma-separated kinds among {', '.join(NEGATIVE_KINDS)}; got {text!r}"
        )
    return kinds


def link_rows(path, ids, emb, node_ids, split):
    """The embeddings (n, k) in the graph's node order: every node with an edge needs a
    row (InputError naming the first missing); a node without one gets zeros (never
    scored)."""
    import numpy as np

    where = {str(nid): r for r, nid in enumerate(ids)}
    used = np.zeros(len(node_ids), dtype=bool)
    used[np.concatenate([split.train, split.held]).ravel()] = True
    missing = [node_ids[i] for i in np.flatnonzero(used) if node_ids[i] not in where]
    if missing:
        raise InputError(
            f"{path}: no embedding for node {missing[0]!r} of the graph ({len(missing)} of "
            f"{int(used.sum())} missing); train on the split's train_edges.txt"
        )
    out = np.zeros((len(node_ids), emb.shape[1]), dtype=np.float64)
    rows = np.flatnonzero(used)
    out[rows] = emb[[where[node_ids[i]] for i in rows]]
    return out


def format_link_table(result):
    """The scores in percent, one row per kind of non-edge and scorer."""
    k = result["k"]
    lines = [f"{'non-edges':<10} {'scorer':<9} {'ROC-AUC':>8} {'AP':>8} {'Hits@' + str(k):>9}"]
    for kind, v in result["kinds"].items():
        for scorer, m in v["scores"].items():
            lines.append(
                f"{kind:<10} {scorer:<9} {100 * m['auc']:8.2f} {100 * m['ap']:8.2f} "
                f"{100 * m['hits']:9.2f}"
            )
    return "\n".join(lines)


def _write(p, emb_path, result):
    import json

    from ..io.atomic import atomic_write
    from .run import wrote

    to_stderr = p["json_out"] == "-"
    click.echo(
        f"== {emb_path}: {result['held']} held-out edges against as many non-edges of each "
        f"kind (logistic: {result['folds']}-fold)",
        err=to_stderr,
    )
    click.echo(format_link_table(result), err=to_stderr)
    if p["json_out"]:
        with atomic_write(p["json_out"], overwrite=p["overwrite"]) as fh:
            json.dump(dict(embeddings=str(emb_path), **result), fh, indent=1, allow_nan=False)
            fh.write("\n")
        wrote(p["json_out"], "results")
