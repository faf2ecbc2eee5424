"""The ``infer`` command: embeddings of new nodes from a trained model (Algorithm 3,
infer.py).  The model file is read with modelfile.read_model: no scikit-learn import."""

from pathlib import Path

import click

from ..defaults import (
    AGGREGATES,
    CALIBRATION_METHODS,
    DEFAULT_AGGREGATE,
    DEFAULT_CALIBRATION,
    ISOLATED,
)
from . import options as opt
from .files import check_outputs, input_paths, load_input
from .run import run, setup_logging, wrote


def parse_positions(value):
    """--positions: 'all', 'train' or a tuple of 0-based positions."""
    value = value.strip().lower()
    if value in ("all", "train"):
        return value
    try:
        return tuple(int(t) for t in value.split(","))
    except ValueError:
        raise click.BadParameter(
            "expected 'all', 'train' or comma-separated 0-based positions such as 3,4,5,6"
        ) from None


@click.command(context_settings=opt.CONTEXT)
@click.option(
    "--model",
    "model_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Trained model .npz (train --model-out).",
)
@click.option(
    "--graph",
    type=click.Path(dir_okay=False),
    default=None,
    help="Edge list (or .npz/.mat) of the whole graph: the training nodes, the new nodes "
    "and all their edges.",
)
@opt.dataset("A benchmark set instead of --graph (its graph and features).")
@opt.data_dir()
@opt.features(
    "Fixed features x of every node of the graph, old and new: scipy .npz or .npy "
    "(needed for a model trained with --features; normalised as in training)."
)
@opt.feature_ids()
@click.option(
    "--nodes",
    "nodes_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Ids of the nodes to embed, one per line; written in this order.",
)
@click.option(
    "--samples",
    default=None,
    type=click.IntRange(min=1),
    help="Contexts Z per node (Algorithm 3); sample z puts the node at walk position "
    "z mod L [default: q, every position once, as the authors].",
)
@click.option(
    "--positions",
    default="all",
    callback=lambda c, p, v: parse_positions(v),
    help="Walk positions of the node: all (0..q-1), train (the model's training target "
    "positions) or 0-based positions such as 3,4,5,6.",
)
@click.option(
    "--aggregate",
    default=DEFAULT_AGGREGATE,
    type=click.Choice(AGGREGATES),
    help="How a node's Z capsule outputs e become its embedding: calibrated = mapped "
    "onto the scale of the model's o_v (for a classifier fitted on o_v); mean = "
    "the paper's average (to re-embed every node, old and new); sum = Z x mean "
    "(the authors' code).",
)
@click.option(
    "--calibration",
    "calibration_method",
    default=DEFAULT_CALIBRATION,
    type=click.Choice(CALIBRATION_METHODS),
    help="Map fitted when the model file stores no calibration (or with "
    "--save-calibration): scale = one factor |o|/|e|, diag = per dimension, "
    "linear = a ridge least-squares map from e to o_v, fitted on the model's "
    "training nodes in --graph.",
)
@click.option(
    "--save-calibration",
    is_flag=True,
    help="Fit the calibration on the training nodes in --graph (with these --samples, "
    "--positions and --seed) and store it in the --model file (rewritten "
    "atomically), replacing a stored one.",
)
@click.option(
    "--isolated",
    default=ISOLATED[0],
    type=click.Choice(ISOLATED),
    help="A node without edges: self = encode it from its own features (a warning), "
    "error = refuse.",
)
@opt.edges("Treat each line as u->v only (as in training).", "Keep u-u edges (as in training).")
@opt.out("Embeddings in word2vec text format ('-': standard output) [default: <nodes stem>.emb].")
@opt.overwrite("Replace an existing --out file.")
@click.option(
    "--threads", default=1, type=click.IntRange(min=1), help="Threads for the Numba kernels."
)
@opt.seed("Seed of the sampled walks.")
@opt.quiet("No summary lines on stderr.")
@opt.debug()
def infer(
    model_path,
    graph,
    dataset,
    data_dir,
    features_path,
    feature_ids,
    nodes_path,
    samples,
    positions,
    aggregate,
    calibration_method,
    save_calibration,
    isolated,
    directed,
    keep_self_loops,
    out,
    overwrite,
    threads,
    seed,
    quiet,
    debug,
):
    """Embed new nodes with a trained model (Algorithm 3, inductive setting).

    Each node's embedding comes from the capsule outputs e of Z contexts sampled from
    random walks through it on --graph: by default their mean mapped onto the scale
    of the model's o_v, so a classifier fitted on o_v applies (docs/inductive.md).
    The embeddings are written in word2vec text format, ids as given in --nodes.
    """
    setup_logging(quiet)  # the "wrote" line and warnings; errors only with -q
    if (graph is None) == (dataset is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    if out is None:
        out = Path(nodes_path).name.split(".")[0] + ".emb"
    if graph == "-":
        raise click.UsageError("--graph: standard input ('-') is for train; give the file")
    source = dict(
        graph=graph,
        dataset=dataset,
        data_dir=data_dir,
        features=features_path,
        feature_ids=feature_ids,
        labels=None,
        splits=None,
        directed=directed,
        keep_self_loops=keep_self_loops,
    )
    run(
        debug,
        _infer,
        model_path=model_path,
        source=source,
        nodes_path=nodes_path,
        out=out,
        overwrite=overwrite,
        quiet=quiet,
        walks=dict(samples=samples, seed=seed, threads=threads, positions=positions),
        how=dict(
            aggregate=aggregate,
            calibration_method=calibration_method,
            save_calibration=save_calibration,
            isolated=isolated,
        ),
    )


def _infer(model_path, source, nodes_path, out, overwrite, quiet, walks, how):
    """``walks``: samples, seed, threads, positions (infer.infer_embeddings'); ``how``:
    aggregate, calibration_method, save_calibration, isolated."""
    import numpy as np

    from ..errors import InputError
    from ..graphs.nodefiles import read_id_file
    from ..io.word2vec import write_word2vec

    check_outputs(
        [("--out", out, overwrite)],
        [("--model", model_path), ("--nodes", nodes_path)] + input_paths(source),
    )
    model, trained = _read_model(model_path, source)
    params = trained[0]
    # A featureless model learned its own x: the dataset's features are not loaded.
    source["featureless"] = not params.fixed_features
    g, features, _, _ = load_input(source)
    ids = read_id_file(nodes_path)
    _check_nodes(ids, g, nodes_path, source)
    calibration, said = _calibration(model, model_path, trained, g, features, source, walks, how)
    run = _embedder(model, how["aggregate"])
    node_ids, E = run(
        *trained,
        g,
        features,
        ids,
        **walks,
        isolated=how["isolated"],
        aggregate=how["aggregate"],
        calibration=calibration,
    )
    bad = ~np.isfinite(E).all(axis=1)
    if bad.any():
        raise InputError(
            f"{model_path}: {int(bad.sum())} of {len(node_ids)} embeddings came out "
            f"NaN or infinite (e.g. node {node_ids[int(np.flatnonzero(bad)[0])]!r}); "
            "the model's parameters are out of range: retrain it; nothing was written"
        )
    write_word2vec(out, node_ids, E, overwrite=overwrite)
    if not quiet:
        seen = set(model["node_ids"])
        n_old = sum(nid in seen for nid in ids)
        q = params.W.shape[0] + 1
        Z = walks["samples"] or q
        what = {
            "mean": "the mean capsule output e",
            "sum": "the sum of the capsule outputs e",
            "calibrated": f"the mean capsule output e calibrated to the o_v ({said})",
        }
        click.echo(
            f"embedded {len(node_ids)} node(s) ({len(node_ids) - n_old} new, {n_old} "
            f"training nodes) as {what[how['aggregate']]} of {Z} context(s) each (walk length "
            f"q = {q})",
            err=True,
        )
    wrote(out)


def _read_model(model_path, source):
    """(the model file's dict, (Params, config, node ids)); ``source`` takes the model's
    --directed / --keep-self-loops (a flag the model was trained without: InputError)."""
    from ..errors import InputError
    from ..io.modelfile import read_model
    from ..model.core import Params

    model = read_model(model_path)
    if model["run"] is not None:  # read the graph as training did
        for key, flag in (("directed", "--directed"), ("keep_self_loops", "--keep-self-loops")):
            if source[key] and not model["run"][key]:
                raise InputError(
                    f"{model_path}: the model was trained without {flag}; drop {flag} "
                    "(infer reads the graph as training did)"
                )
            source[key] = model["run"][key]
    params = Params(
        model["W"], model["O"], model["bias"], model["X"], fixed_features=model["fixed_features"]
    )
    return model, (params, model["config"], model["node_ids"])


def _check_nodes(ids, g, nodes_path, source):
    """InputError unless --nodes lists nodes, every one of them in the graph."""
    from ..errors import InputError

    if not ids:
        raise InputError(f"{nodes_path}: no node ids; list the nodes to embed, one per line")
    index = {nid: i for i, nid in enumerate(g.node_ids)}
    for lineno, nid in enumerate(ids, 1):
        if nid not in index:
            where = source["graph"] or source["dataset"]
            raise InputError(
                f"{nodes_path}:{lineno}: node {nid!r} is not in {where}; the graph "
                "must hold the new nodes and their edges (ids compared as strings)"
            )


def _calibration(model, model_path, trained, g, features, source, walks, how):
    """(the calibration the embeddings use, how it was had): the model file's, or fitted
    on its training nodes in the graph (infer.calibrate) when it stores none or with
    --save-calibration (which stores it in the model file)."""
    from ..errors import InputError
    from ..infer import calibrate
    from ..io.modelfile import check_calibration
    from ..io.modelfile import save_calibration as store_calibration

    calibration = model["calibration"]
    said = "stored in the model file"
    if not (how["save_calibration"] or (how["aggregate"] == "calibrated" and calibration is None)):
        return calibration, said
    method = how["calibration_method"]
    try:
        calibration = calibrate(*trained, g, features, **walks, method=method)
    except InputError as err:  # the model's numbers: name its file
        raise InputError(f"{model_path}: fitting its calibration: {err}") from None
    check_calibration(  # NaN from the model's own numbers (a tampered routing_scale)
        calibration, trained[0].O.shape[1], f"{model_path}: fitting its calibration: the map"
    )
    said = (
        f"{method}, fitted on {calibration['n']} training nodes of "
        f"{source['graph'] or source['dataset']}"
    )
    if how["save_calibration"]:
        store_calibration(model_path, calibration)
        said += f", stored in {model_path}"
    return calibration, said


def _embedder(model, aggregate):
    """infer.infer_embeddings, or infer_propagated.infer_propagated for a model trained
    with --propagate when the outputs are calibrated."""
    from ..infer import infer_embeddings

    if model.get("propagation") is not None and aggregate == "calibrated":  # --propagate
        import functools

        from ..infer_propagated import infer_propagated
        from ..model.propagation import Propagated

        return functools.partial(infer_propagated, propagated=Propagated(**model["propagation"]))
    return infer_embeddings
