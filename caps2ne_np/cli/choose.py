"""The ``choose`` command: a trained model's written rows chosen by the user's labels
(evaluation/written.py), and written.  Its options are the table ``tables.CHOOSE``; its
work is ``run_choose``, a plain function of those options that a test can call without
click."""

import logging
import time

import click

from ..defaults import DEFAULTS
from ..errors import InputError
from . import options as opt
from . import tables
from .files import check_outputs, load_input
from .run import run, setup_logging, wrote

log = logging.getLogger("caps2ne_np.cli")


@opt.command(tables.CHOOSE)
def choose(**params):
    """Choose a model's written rows with your labels, and write them.

    Recomputes from the model file the rows train writes after training for each
    written option (--propagate none; --propagate on with --spectrum-power 0.5, 0.75, 1
    and --row-norm 1, 2, 4), scores each by stratified cross-validation (logistic
    regression) within the labelled nodes, prints the table, names the train flags of
    the best and writes its rows (--out, --npy).  Labels of nodes not in --labels are
    never read (docs/evaluation.md).
    """
    setup_logging(params["quiet"])
    run(params["debug"], run_choose, params)


def choose_params(**given):
    """The parameters of ``run_choose``: choose's options by name, ``given`` and the
    defaults of the others."""
    return opt.params(tables.CHOOSE, **given)


def run_choose(params):
    """choose's work, without click: ``params`` are its options by name
    (``choose_params``).  The table on stdout; errors are raised (InputError, OSError,
    ...)."""
    import numpy as np

    from ..evaluation import written
    from ..graphs.nodefiles import load_labels
    from ..io.modelfile import read_model
    from ..io.npy import nodes_path

    p = params
    t0 = time.perf_counter()
    npy = p["npy_out"]
    for option, path in (("--out", p["out"]), ("--npy", npy)):
        if path == "-":
            raise InputError(
                f"{option} -: standard output carries the table; give {option} a file name"
            )
    check_outputs(
        [
            ("--out", p["out"], p["overwrite"]),
            ("--npy", npy, p["overwrite"]),
            ("--npy's id file", nodes_path(npy) if npy else None, p["overwrite"]),
        ],
        [("--model", p["model_path"]), ("--graph", p["graph"]), ("--labels", p["labels_path"])],
    )
    model = read_model(p["model_path"])
    A = model_adjacency(model, p["model_path"], p["graph"])
    labels, multilabel, classes = load_labels(
        p["labels_path"],
        model["node_ids"],
        return_classes=True,
        within=f"the model {p['model_path']}",
    )
    if multilabel:
        nodes = np.flatnonzero(np.diff(labels.indptr) > 0)
    else:
        nodes = np.flatnonzero(labels >= 0)
        written.check_folds(labels[nodes], p["folds"], classes)
    cfg = model["config"]
    t1 = time.perf_counter()
    filter_options = [cfg.get(k, DEFAULTS[k]) for k in ("prone_order", "prone_mu", "prone_theta")]
    cands = written.candidates(
        A,
        model["O"],
        *filter_options,
        dtype=np.dtype(cfg.get("spectral_precision", "float64")),  # a file from before it
    )
    own, own_text = own_choice(model, cands)
    t2 = time.perf_counter()
    result = written.choose(
        cands,
        labels,
        nodes,
        C=p["C"],
        folds=p["folds"],
        seed=p["seed"],
        prefer=(own,) if own else written.DEFAULT_PREFER,
    )
    t3 = time.perf_counter()
    metric = "micro-F1" if multilabel else "accuracy"
    click.echo(format_choice(result, own, own_text, metric, p["C"]))
    _write(p, model["node_ids"], cands[result.best])
    log.info(
        f"chose in {time.perf_counter() - t0:.2f} s: {len(cands)} candidates in "
        f"{t2 - t1:.2f} s, {result.folds}-fold cross-validation of each in {t3 - t2:.2f} s"
    )


def model_adjacency(model, model_path, graph_path):
    """The symmetric adjacency (spectral.adjacency) of ``graph_path`` read as the model's
    training read it (its run's --directed / --keep-self-loops, as infer reads it), rows
    and columns in the model's node order; InputError (one line) unless the graph's
    nodes are the model's."""
    import numpy as np

    from ..io.modelcheck import default_run
    from ..spectral import prone as spectral

    run_record = model["run"] or default_run()
    source = dict(
        graph=graph_path,
        dataset=None,
        data_dir=None,
        features=None,
        feature_ids=None,
        labels=None,
        splits=None,
        featureless=True,
        directed=run_record["directed"],
        keep_self_loops=run_record["keep_self_loops"],
    )
    g = load_input(source)[0]
    ids = model["node_ids"]
    A = spectral.adjacency(g.indptr, g.indices, g.weights, g.n_nodes)
    if list(g.node_ids) == ids:
        return A
    where = {nid: i for i, nid in enumerate(g.node_ids)}
    missing = [nid for nid in ids if nid not in where]
    if missing or g.n_nodes != len(ids):
        extra = next((nid for nid in g.node_ids if nid not in set(ids)), None)
        example = (
            f"node {missing[0]!r} of the model is not in it"
            if missing
            else f"node {extra!r} is not in the model"
        )
        raise InputError(
            f"{graph_path}: not the graph of the model {model_path}: {g.n_nodes} nodes, the "
            f"model {len(ids)}, and {example}; give the graph the model was trained on"
        )
    perm = np.fromiter((where[nid] for nid in ids), dtype=np.int64, count=len(ids))
    A = A[perm][:, perm].tocsr()  # the model's order: the same entries, sorted again
    A.sort_indices()
    return A


def own_choice(model, cands):
    """(the label of the candidate the model wrote, or None; how the model chose it):
    'none' for a model without propagated rows, else the candidate equal to the
    propagated rows it stores (bit for bit, else to float32 rounding)."""
    import numpy as np

    from ..evaluation import written

    cfg = model["config"]
    prop = model["propagation"]
    if prop is None:
        return written.NONE, f"--propagate {cfg.get('propagate', 'none')}"
    given = (
        f"--spectrum-power {cfg.get('spectrum_power', '0.5')} "
        f"--row-norm {float(cfg.get('row_norm', 1.0)):g}"
    )
    E = np.asarray(prop["E"])
    propagated = [k for k in cands if k != written.NONE and cands[k].shape == E.shape]
    for same in (np.array_equal, lambda a, b: np.allclose(a, b, rtol=0, atol=1e-5)):
        found = [k for k in propagated if same(cands[k], E)]
        if found:
            return found[0], given
    log.warning(
        "the model's written rows (%s) are none of the candidates: its --row-norm is not "
        "among theirs, or --graph is not the graph it was trained on",
        given,
    )
    return None, given


def format_choice(result, own, own_text, metric, C):
    """The table (one line per candidate: its train flags, its score, the best and the
    model's own marked) and the lines saying which won, by how much, and how to write
    it."""
    from ..evaluation import written

    lines = [
        f"{result.folds}-fold cross-validation within {result.nodes} labelled nodes, "
        f"logistic regression (C = {C if isinstance(C, str) else f'{C:g}'}), mean {metric}:",
        f"  {'candidate':<14} {metric + ' (%)':>14}  train flags",
    ]
    for key, score in result.scores.items():
        marks = [m for m, on in (("best", key == result.best), ("model's own", key == own)) if on]
        mark = f"  <- {', '.join(marks)}" if marks else ""
        lines.append(f"  {key:<14} {score:>14.2f}  {written.train_flags(key)}{mark}")
    best = result.best
    line = f"best: {best}, {result.scores[best]:.2f}%"
    tied = [
        k for k, v in result.scores.items() if k != best and v >= result.scores[best] - written.TIE
    ]
    if tied:
        first = "the model's own choice" if own is not None else "the defaults' choices"
        line += (
            f", tied with {len(tied)} other candidate(s) (a tie goes to {first}, then "
            "'none', then by p and length)"
        )
    elif result.runner_up is not None:
        line += f", {result.margin:.2f} points above the runner-up {result.runner_up}"
    if own is None:
        line += f"; the model's own rows ({own_text}) are not among the candidates"
    elif own != best:
        line += f"; the model's own ({own}, {own_text}) {result.scores[own]:.2f}%"
    else:
        line += f"; the model's own choice ({own_text})"
    lines.append(line)
    lines.append(f"train writes it with: {written.train_flags(best)}")
    return "\n".join(lines)


def _write(p, node_ids, E):
    """--out (word2vec text) and --npy, published together; nothing without either."""
    from ..io.atomic import publish_together
    from ..io.npy import nodes_path, save_npy
    from ..io.word2vec import write_word2vec

    out, npy = p["out"], p["npy_out"]
    if out is None and npy is None:
        log.info("no --out or --npy: nothing written")
        return
    with publish_together():
        if out is not None:
            write_word2vec(out, node_ids, E, overwrite=p["overwrite"])
        if npy is not None:
            save_npy(npy, E, node_ids, overwrite=p["overwrite"])
    if out is not None:
        wrote(out, None)
    if npy is not None:
        ids_file = nodes_path(npy)
        wrote(npy, f"{npy} (node ids in {ids_file})" if ids_file.exists() else None)
