"""The ``infer`` command: embeddings of new nodes from a trained model (Algorithm 3,
inference/infer.py).  The model file is read with modelfile.read_model: no scikit-learn import.
Its options are the table ``tables.INFER``; its work is ``run_infer``, a plain
function of those options that a test can call without click."""

from dataclasses import dataclass
from pathlib import Path

import click

from . import options as opt
from . import tables
from .files import check_outputs, input_paths, load_input, source_of
from .run import run, setup_logging, wrote


@opt.command(tables.INFER)
def infer(**params):
    """Embed new nodes with a trained model (Algorithm 3, inductive setting).

    Each node's embedding comes from the capsule outputs e of Z contexts sampled from
    random walks through it on --graph: by default their mean mapped onto the scale
    of the model's o_v, so a classifier fitted on o_v applies (docs/inductive.md).
    The embeddings are written in word2vec text format, ids as given in --nodes.
    """
    setup_logging(params["quiet"])  # the "wrote" line and warnings; errors only with -q
    check_usage(params)
    run(params["debug"], run_infer, params)


def infer_params(**given):
    """The parameters of ``run_infer``: infer's options by name, ``given`` and the
    defaults of the others."""
    return opt.params(tables.INFER, **given)


def check_usage(params):
    """click.UsageError (exit 2) for options that do not go together, before any work."""
    if (params["graph"] is None) == (params["dataset"] is None):
        raise click.UsageError("give exactly one of --graph and --dataset")
    if params["graph"] == "-":
        raise click.UsageError("--graph: standard input ('-') is for train; give the file")


@dataclass
class InferRun:
    """infer's options grouped by use: ``source`` for files.load_input, ``walks``
    (samples, seed, threads, positions: infer.infer_embeddings'), ``how`` (aggregate,
    calibration_method, save_calibration, isolated)."""

    model_path: str
    nodes_path: str
    source: dict
    walks: dict
    how: dict
    out: str
    overwrite: bool = False
    quiet: bool = False


def _plan(params):
    """The InferRun of infer's options; --out's default (<nodes stem>.emb)."""
    p = params
    out = p["out"]
    if out is None:
        out = Path(p["nodes_path"]).name.split(".")[0] + ".emb"
    source = source_of(
        p,
        "graph dataset data_dir features feature_ids directed keep_self_loops",
        labels=None,
        splits=None,
    )
    return InferRun(
        model_path=p["model_path"],
        nodes_path=p["nodes_path"],
        source=source,
        walks={k: p[k] for k in ("samples", "seed", "threads", "positions")},
        how={k: p[k] for k in ("aggregate", "calibration_method", "save_calibration", "isolated")},
        out=out,
        overwrite=p["overwrite"],
        quiet=p["quiet"],
    )


def run_infer(params):
    """infer's work, without click: ``params`` are its options by name
    (``infer_params``), checked by ``check_usage``.  Errors are raised (InputError,
    OSError, ...); the command (run.run) turns them into one line and an exit code."""
    from ..io.word2vec import write_word2vec

    job = _plan(params)
    check_outputs(
        [("--out", job.out, job.overwrite)],
        [("--model", job.model_path), ("--nodes", job.nodes_path)] + input_paths(job.source),
    )
    model, trained, g, features, ids = _read_inputs(job)
    calibration, said = _calibration(
        model, job.model_path, trained, g, features, job.source, job.walks, job.how
    )
    node_ids, E = _embed(job, model, trained, g, features, ids, calibration)
    write_word2vec(job.out, node_ids, E, overwrite=job.overwrite)
    if not job.quiet:
        _summary(job, model, trained[0], ids, node_ids, said)
    wrote(job.out)


def _read_inputs(job):
    """(the model file's dict, (Params, config, node ids), graph, features, the --nodes
    ids): the graph read as the model's training read it."""
    from ..graphs.nodefiles import read_id_file

    model, trained = _read_model(job.model_path, job.source)
    # A featureless model learned its own x: the dataset's features are not loaded.
    job.source["featureless"] = not trained[0].fixed_features
    g, features, _, _ = load_input(job.source)
    ids = read_id_file(job.nodes_path)
    _check_nodes(ids, g, job.nodes_path, job.source)
    return model, trained, g, features, ids


def _embed(job, model, trained, g, features, ids, calibration):
    """(node ids, embeddings) of the --nodes; InputError when one is not finite."""
    import numpy as np

    from ..errors import InputError

    how = job.how
    node_ids, E = _embedder(model, how["aggregate"])(
        *trained,
        g,
        features,
        ids,
        **job.walks,
        isolated=how["isolated"],
        aggregate=how["aggregate"],
        calibration=calibration,
    )
    bad = ~np.isfinite(E).all(axis=1)
    if bad.any():
        raise InputError(
            f"{job.model_path}: {int(bad.sum())} of {len(node_ids)} embeddings came out "
            f"NaN or infinite (e.g. node {node_ids[int(np.flatnonzero(bad)[0])]!r}); "
            "the model's parameters are out of range: retrain it; nothing was written"
        )
    return node_ids, E


def _summary(job, model, params, ids, node_ids, said):
    """The 'embedded N node(s) ...' line on stderr."""
    seen = set(model["node_ids"])
    n_old = sum(nid in seen for nid in ids)
    q = params.W.shape[0] + 1
    Z = job.walks["samples"] or q
    what = {
        "mean": "the mean capsule output e",
        "sum": "the sum of the capsule outputs e",
        "calibrated": f"the mean capsule output e calibrated to the o_v ({said})",
    }
    click.echo(
        f"embedded {len(node_ids)} node(s) ({len(node_ids) - n_old} new, {n_old} "
        f"training nodes) as {what[job.how['aggregate']]} of {Z} context(s) each (walk length "
        f"q = {q})",
        err=True,
    )


def _read_model(model_path, source):
    """(the model file's dict, (Params, config, node ids)); ``source`` takes the model's
    --directed / --keep-self-loops (a flag the model was trained without: InputError)."""
    from ..errors import InputError
    from ..io.modelfile import read_model
    from ..model.params import Params

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
    from ..inference.infer import calibrate
    from ..io.modelcheck import check_calibration
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
    from ..inference.infer import infer_embeddings

    if model.get("propagation") is not None and aggregate == "calibrated":  # --propagate
        import functools

        from ..inference.propagated import infer_propagated
        from ..spectral.propagation import Propagated

        return functools.partial(infer_propagated, propagated=Propagated(**model["propagation"]))
    return infer_embeddings
