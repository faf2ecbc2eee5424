"""The files a command reads and writes: the graph and its features, labels and splits
from the options (``load_input``), and the checks made before any work: every output
writable, no output replacing an input or another output (``check_outputs``)."""

import os
from pathlib import Path

from ..errors import InputError

_OPTION_OF = {
    "features": "features_path",
    "labels": "labels_path",
    "splits": "splits_path",
    "inferred": "inferred_path",
}
"""The source keys whose option has another parameter name (--labels: labels_path)."""


def source_of(params, keys, **given):
    """A command's source (``load_input``'s argument): each of ``keys`` (space separated)
    from the option of that name in ``params``, then the keys ``given`` the command
    has no option for."""
    return {**{key: params[_OPTION_OF.get(key, key)] for key in keys.split()}, **given}


def load_input(source, need_eval=False):
    """(Graph, features or None, labels or None, splits or None) from the CLI options."""
    from ..graphs import datasets, downloads, nodefiles
    from ..graphs.csr import from_scipy
    from ..graphs.graph import read_graph

    labels = splits = features = None
    if source["dataset"]:
        data_dir = source["data_dir"] or downloads.default_data_dir()
        kwargs = (
            {"features": False}
            if (source["featureless"] and source["dataset"] in datasets.PLANETOID_NAMES)
            else {}
        )
        ds = datasets.load_dataset(source["dataset"], data_dir, **kwargs)
        g = from_scipy(
            ds.adj, ds.node_ids, directed=False, keep_self_loops=source["keep_self_loops"]
        )
        features = None if source["featureless"] else ds.features
        labels, splits = ds.labels, ds.splits
        if need_eval and ds.multilabel:
            raise InputError(
                f"--eval-every-epoch: {source['dataset']} is multi-label; score its "
                "embeddings with 'evaluate' instead"
            )
    else:
        cache = source.get("graph_cache", "off")
        g = read_graph(
            source["graph"],
            directed=source["directed"],
            keep_self_loops=source["keep_self_loops"],
            cache=None if cache == "off" else cache,
        )
    if source["features"]:
        features = nodefiles.load_features(
            source["features"], source["feature_ids"], node_ids=g.node_ids
        )
    if source["labels"]:
        labels, multilabel = nodefiles.load_labels(source["labels"], g.node_ids)
        if need_eval and multilabel:
            raise InputError(f"{source['labels']}: --eval-every-epoch needs one label per node")
    if source["splits"]:
        splits = nodefiles.load_splits(source["splits"], g.n_nodes, node_ids=g.node_ids)
    if need_eval and labels is not None and splits is None:  # as evaluate: random splits
        splits = _random_splits(source, labels)
    if need_eval and labels is None:
        raise InputError("--eval-every-epoch needs labels: --dataset, or --labels")
    return g, features, labels, splits


TRAIN_FRACTION, VAL_FRACTION, N_SPLITS = 0.5, 0.1, 10
"""train --eval-every-epoch with --labels and no --splits: 10 random stratified splits
training on half the labelled nodes (evaluate's default) and holding out a tenth for
validation, which chooses the epoch."""


def _random_splits(source, labels):
    """The random stratified splits of ``train --eval-every-epoch`` without --splits, with
    a note saying so (single.random_splits, seeded by the run's --seed)."""
    import logging

    from ..evaluation.single import random_splits

    train = source.get("train_fraction") or TRAIN_FRACTION
    val = source.get("val_fraction") or VAL_FRACTION
    seed = source.get("seed") or 0
    splits = random_splits(labels, train, N_SPLITS, val_fraction=val, seed=seed)
    if source.get("train_fraction") is None:
        logging.getLogger("caps2ne_np.cli").info(
            f"note: no --splits: scoring each epoch on {N_SPLITS} random stratified splits "
            f"training on {train:g} and validating on {val:g} of the labelled nodes (--seed "
            f"{seed}); pass --splits or --train-fraction to choose"
        )
    return splits


def check_writable(path, overwrite, option="--out"):
    """InputError now if writing ``path`` would be refused or fail later ('-': standard
    output, which must be open)."""
    from ..io.atomic import check_output_path, is_stdout, probe_writable

    if is_stdout(path):
        check_stdout(option)
        return
    if not overwrite and os.path.isfile(path):  # an earlier run's output, most often
        flag = option.split("'")[0].split()[0]  # "--npy's id file": --npy names it
        raise InputError(
            f"{path}: exists; pass --overwrite to replace it, or give {flag} another file name"
        )
    check_output_path(path, overwrite)
    probe_writable(path)


def check_stdout(option="--out"):
    """InputError (one line) unless standard output is open for writing: ``cmd >&-``
    closes it (Python then has no ``sys.stdout``), and results written there at the end
    of a run would be lost."""
    import io
    import sys

    stream = sys.stdout
    problem = None
    if stream is None or getattr(stream, "closed", False):
        problem = "is closed"
    else:
        try:
            os.fstat(stream.fileno())
        except io.UnsupportedOperation:
            pass  # an in-memory stream (a test runner's): writable
        except (OSError, ValueError):
            problem = "is closed"
        else:
            if not stream.writable():
                problem = "is not writable"
    if problem:
        raise InputError(
            f"{option} -: standard output {problem}; give {option} a file name, or run "
            "the command with its output open (e.g. '> out.emb')"
        )


def input_paths(source):
    """[(option, path)] of the files a command reads, which no output may replace."""
    from ..graphs.graph_cache import cache_path

    inputs = [
        ("--graph", source.get("graph")),
        ("--features", source.get("features")),
        ("--feature-ids", source.get("feature_ids")),
        ("--labels", source.get("labels")),
        ("--splits", source.get("splits")),
    ]
    if source.get("graph") and source["graph"] != "-" and source.get("graph_cache", "off") != "off":
        inputs.append(("--graph-cache", str(cache_path(source["graph"]))))
    return [(option, path) for option, path in inputs if path and path != "-"]


def check_outputs(outputs, inputs, checkpoint_dir=None):
    """Before any work: every output (option, path, overwrite) is writable, and no two
    outputs, nor an output and an input, nor an output and a checkpoint file, are the
    same file once symbolic links and '..' are resolved (os.path.realpath)."""
    from ..io.atomic import is_stdout, probe_writable
    from ..training import checkpoint

    taken = {
        os.path.realpath(path): (f"input {option}", path)
        for option, path in inputs
        if path and path != "-"
    }
    if checkpoint_dir:
        if os.path.realpath(checkpoint_dir) in taken:
            what, other = taken[os.path.realpath(checkpoint_dir)]
            raise InputError(f"--checkpoint-dir {checkpoint_dir}: the same path as {what} {other}")
        taken[os.path.realpath(checkpoint_dir)] = ("--checkpoint-dir", checkpoint_dir)
        for name in (
            checkpoint.LATEST,
            checkpoint.PREVIOUS,
            checkpoint.NEW,
            checkpoint.PREVIOUS_NEW,
            checkpoint.LOCK,
        ):
            path = os.path.join(checkpoint_dir, name)
            taken[os.path.realpath(path)] = ("checkpoint file", path)
    for option, path, overwrite in outputs:
        if path is not None and is_stdout(path):
            check_stdout(option)
        if path is None or is_stdout(path):
            continue
        if path != "":
            key = os.path.realpath(path)
            if key in taken:
                what, other = taken[key]
                fix = (
                    "writing it would replace that input"
                    if what.startswith("input")
                    else "give each output its own file name"
                )
                raise InputError(f"{option} {path}: the same file as {what} {other}; {fix}")
            taken[key] = (option, path)
        check_writable(path, overwrite, option)
    if checkpoint_dir:
        target = Path(checkpoint_dir)
        if target.exists() and not target.is_dir():
            raise InputError(f"--checkpoint-dir {checkpoint_dir}: exists and is not a folder")
        existing = target
        while not existing.exists():
            if existing.is_symlink():
                raise InputError(
                    f"--checkpoint-dir {checkpoint_dir}: {existing} is a dangling symbolic link"
                )
            existing = existing.parent
        if not existing.is_dir():
            raise InputError(f"--checkpoint-dir {checkpoint_dir}: {existing} is not a folder")
        probe_writable(  # the folder named, not a file beside its first existing parent
            existing / checkpoint.LATEST,
            f"--checkpoint-dir {checkpoint_dir}",
            "its checkpoint files" if existing == target else "the folder",
        )
