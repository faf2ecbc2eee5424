"""Each command's options, one table per command (``TRAIN``, ``INFER``, ``EVALUATE``,
``SPLIT_EDGES``, ``CHOOSE``, ``UPDATE``),
in the order ``--help`` lists them.  A row is an ``options.Opt`` (click.option's
arguments) or a tuple of them; ``options.command(table)`` makes the click command and
``options.params(table, ...)`` the parameters of the command's plain function."""

import click

from ..defaults import (
    AGGREGATES,
    CALIBRATION_METHODS,
    DEFAULT_AGGREGATE,
    DEFAULT_CALIBRATION,
    ISOLATED,
    ROUND_WALKS,
    SYNC_MOMENTS,
    SYNC_MOMENTS_CHOICES,
    UPDATE_AUTO_CHANGE_MAX,
    UPDATE_BUDGET,
    UPDATE_BUDGETS,
)
from ..training.checkpoint import RESUMABLE_CHANGES
from . import options as opt
from .options import option

_FLAGS = [f"--{name.replace('_', '-')}" for name in RESUMABLE_CHANGES]
RESUMABLE = ", ".join(_FLAGS[:-1]) + " and " + _FLAGS[-1]
"""The options a resumed run may change (checkpoint.RESUMABLE_CHANGES), for --resume's help."""

TRAIN = (
    opt.section(
        "Input",
        opt.graph(
            "Edge list: 'u v' or 'u v weight' per line, '#' comments ('-': standard "
            "input; .gz/.bz2/.xz are decompressed); or a scipy .npz / .mat."
        ),
        opt.dataset("A benchmark set instead of --graph (features, labels and splits included)."),
        opt.data_dir(),
        opt.features("Fixed node features x: scipy .npz (kept sparse) or .npy, one row per node."),
        opt.feature_ids(),
        option(
            "--featureless",
            is_flag=True,
            help="Ignore the dataset's features and train x (d = --feat-dim).",
        ),
        opt.config_option("normalize_features"),
        opt.edges(
            "Treat each line as u->v only (default: undirected).",
            "Keep u-u edges (dropped by default).",
        ),
        option(
            "--graph-cache",
            type=click.Choice(["off", "use", "write"]),
            default="off",
            help="Binary CSR cache <graph>.cache.npz next to --graph: 'use' loads it when fresh "
            "(same file content by hash, same --directed/--keep-self-loops) and rebuilds "
            "it otherwise; 'write' always rebuilds it.",
        ),
    ),
    opt.section(
        "Output",
        opt.out(
            "Embeddings in word2vec text format ('-': standard output) [default: <graph stem>.emb]."
        ),
        option(
            "--binary",
            is_flag=True,
            help="Write --out in word2vec binary format (gensim: binary=True): about 4x "
            "smaller and much faster to write than text.",
        ),
        opt.npy(
            "Also write the embeddings as an (N, k) float32 .npy, rows in the order of "
            "--out (the graph's node order: first appearance in the edge list), plus "
            "<stem>.nodes.txt with the id of each row when the ids are not 0..N-1 in "
            "that order."
        ),
        option(
            "--model-out",
            type=click.Path(dir_okay=False),
            default=None,
            help="Also write the whole trained model (parameters, config, node ids) to .npz.",
        ),
        option(
            "--history",
            "history_out",
            type=click.Path(dir_okay=False),
            default=None,
            help="Also write the per-epoch history (loss, rate, time, pairs/s; with "
            "--eval-every-epoch the accuracies val_acc and test_acc, as fractions in [0, 1] "
            "where the log prints percent) as CSV, rewritten after every epoch.",
        ),
        opt.overwrite("Replace existing output files."),
    ),
    opt.section(
        "Scoring every epoch",
        opt.labels("'node label' lines, for --eval-every-epoch."),
        opt.splits("JSON list of {train, val, test} node-id lists, for --eval-every-epoch."),
        option(
            "--eval-every-epoch",
            is_flag=True,
            help="Score o_v on the splits after every epoch (logistic regression) and write the "
            "embeddings of the epoch with the best mean validation accuracy.",
        ),
        opt.fractions(
            "--eval-every-epoch with --labels but no --splits: 10 random splits, stratified "
            "by class (seeded by --seed), training on this fraction of the labelled nodes, as "
            "evaluate does [default: 0.5].",
            "With those random splits: the fraction held out for validation, which "
            "chooses the epoch [default: 0.1].",
            val_default=None,
        ),
    ),
    opt.section(
        "Model (the paper's symbols)",
        opt.config_options(
            [
                "dim",
                "feat_dim",
                "walk_length",
                "routing_iters",
                "routing_rule",
                "routing_scale",
                "grad_mode",
                "targets",
                "skipgram_weight",
                "skipgram_negatives",
            ]
        ),
    ),
    opt.section(
        "Training",
        opt.config_options(
            [
                "preset",
                "epochs",
                "stop",
                "walks_per_node",
                "walks",
                "node2vec_p",
                "node2vec_q",
                "batch_size",
                "batch_mode",
                "lr",
                "lr_schedule",
                "lr_floor",
                "num_sampled",
                "sampler",
                "walk_chunk",
                "adam",
                "seed",
            ]
        ),
    ),
    opt.section(
        "Spectral start and written rows (ProNE)",
        opt.config_options(
            [
                "spectral",
                "spectral_dim",
                "propagate",
                "spectrum_power",
                "row_norm",
                "prone_order",
                "prone_mu",
                "prone_theta",
                "spectral_precision",
            ]
        ),
    ),
    opt.section(
        "Checkpoints",
        option(
            "--checkpoint-dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Save the full training state there after every epoch (atomic).",
        ),
        option(
            "--checkpoint-every",
            default=0,
            type=click.IntRange(min=0),
            help="Also save a checkpoint every N steps (0: only at epoch ends); needs "
            "--checkpoint-dir or --resume.",
        ),
        option(
            "--resume",
            "resume_dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Continue the run checkpointed in this folder, with the same input and "
            f"options: only {RESUMABLE} may change. Keeps checkpointing there.",
        ),
    ),
    opt.section(
        "Threads and engines",
        opt.config_options(["threads"], threads=dict(default=None)),
        option(
            "--engine",
            default="single",
            show_default=True,
            type=click.Choice(["single", "ray"]),
            help="single: train in this process; ray: sharded parameter server on Ray "
            "(needs --adam lazy; pip install 'caps2ne_np[ray]'; docs/distributed.md).",
        ),
        option(
            "--parallel",
            default="sync",
            show_default=True,
            type=click.Choice(["sync", "async"]),
            help="sync: each step on the threads (the same embeddings on any --threads); async: "
            "each thread trains its own batches on the shared tables without locks (faster on "
            "several cores, not reproducible; docs/training.md, Threads).",
        ),
        option(
            "--workers",
            default=1,
            show_default=True,
            type=click.IntRange(min=1),
            help="--engine ray: worker actors P; each trains its share of a round's batches "
            "on its replica of the tables (--round-walks).",
        ),
        option(
            "--servers",
            default=1,
            show_default=True,
            type=click.IntRange(min=1),
            help="--engine ray: server actors S holding O, x, the biases and their Adam "
            "moments, sharded by node id.",
        ),
        option(
            "--ray-address",
            default=None,
            help="--engine ray: the Ray cluster to join ('auto', 'ray://head:10001') "
            "[default: a local Ray instance sized to this machine].",
        ),
        option(
            "--round-walks",
            default=ROUND_WALKS,
            show_default=True,
            type=click.IntRange(min=0),
            help="--engine ray: walks per node that a round trains between two merges of "
            "the workers' replicas (at most a quarter of an epoch): fewer, less stale at "
            "--workers > 1 and more bytes per trained pair; 0: a batch per worker on rows "
            "pulled from the servers. docs/distributed.md.",
        ),
        option(
            "--sync-moments",
            default=SYNC_MOMENTS,
            show_default=True,
            type=click.Choice(SYNC_MOMENTS_CHOICES),
            help="--engine ray: when the workers' Adam moments merge: every round (with the "
            "values, three times the bytes), only before a checkpoint (each worker steps "
            "with its own between), or auto: every round at 2 to 4 workers, else at "
            "checkpoints. docs/distributed.md.",
        ),
    ),
    opt.section(
        "Messages",
        opt.quiet("Print only errors: no progress bar, log lines or warnings."),
        option(
            "--verbose",
            "-v",
            is_flag=True,
            help="Also print debugging details (the full configuration, threads).",
        ),
        opt.debug(),
    ),
)
"""train's options: its own, and every TrainConfig field from ``defaults.OPTIONS``."""

INFER = (
    opt.model_file("Trained model .npz (train --model-out)."),
    opt.graph(
        "Edge list (or .npz/.mat) of the whole graph: the training nodes, the new nodes "
        "and all their edges."
    ),
    opt.dataset("A benchmark set instead of --graph (its graph and features)."),
    opt.data_dir(),
    opt.features(
        "Fixed features x of every node of the graph, old and new: scipy .npz or .npy "
        "(needed for a model trained with --features; normalised as in training)."
    ),
    opt.feature_ids(),
    option(
        "--nodes",
        "nodes_path",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="Ids of the nodes to embed, one per line; written in this order.",
    ),
    option(
        "--samples",
        default=None,
        type=click.IntRange(min=1),
        help="Contexts Z per node (Algorithm 3); sample z puts the node at walk position "
        "z mod L [default: q, every position once, as the authors].",
    ),
    option(
        "--positions",
        default="all",
        callback=lambda c, p, v: opt.parse_positions(v),
        help="Walk positions of the node: all (0..q-1), train (the model's training target "
        "positions) or 0-based positions such as 3,4,5,6.",
    ),
    option(
        "--aggregate",
        default=DEFAULT_AGGREGATE,
        type=click.Choice(AGGREGATES),
        help="How a node's Z capsule outputs e become its embedding: calibrated = mapped "
        "onto the scale of the model's o_v (for a classifier fitted on o_v); mean = "
        "the paper's average (to re-embed every node, old and new); sum = Z x mean "
        "(the authors' code).",
    ),
    option(
        "--calibration",
        "calibration_method",
        default=DEFAULT_CALIBRATION,
        type=click.Choice(CALIBRATION_METHODS),
        help="Map fitted when the model file stores no calibration (or with "
        "--save-calibration): scale = one factor |o|/|e|, diag = per dimension, "
        "linear = a ridge least-squares map from e to o_v, fitted on the model's "
        "training nodes in --graph.",
    ),
    option(
        "--save-calibration",
        is_flag=True,
        help="Fit the calibration on the training nodes in --graph (with these --samples, "
        "--positions and --seed) and store it in the --model file (rewritten "
        "atomically), replacing a stored one.",
    ),
    option(
        "--isolated",
        default=ISOLATED[0],
        type=click.Choice(ISOLATED),
        help="A node without edges: self = encode it from its own features (a warning), "
        "error = refuse.",
    ),
    opt.edges("Treat each line as u->v only (as in training).", "Keep u-u edges (as in training)."),
    opt.out(
        "Embeddings in word2vec text format ('-': standard output) [default: <nodes stem>.emb]."
    ),
    opt.overwrite("Replace an existing --out file."),
    option(
        "--threads", default=1, type=click.IntRange(min=1), help="Threads for the Numba kernels."
    ),
    opt.seed("Seed of the sampled walks."),
    opt.quiet("No summary lines on stderr."),
    opt.debug(),
)
"""infer's options."""

EVALUATE = (
    option(
        "--embeddings",
        "-e",
        "emb_paths",
        required=True,
        multiple=True,
        type=click.Path(dir_okay=False),
        help="word2vec text/binary or .npy embeddings; repeat it with one file per epoch "
        "to choose the epoch on validation (single-label).",
    ),
    option(
        "--inferred",
        "inferred_path",
        default=None,
        type=click.Path(dir_okay=False),
        help="Embeddings of new nodes as infer writes them: the classifier is fitted on the "
        "labelled nodes of -e (the training nodes) and tested on these (single-label; "
        "labelled nodes in neither file are skipped, with a note).",
    ),
    opt.dataset("Take labels (and splits) from a benchmark set."),
    opt.data_dir(),
    opt.labels(
        "'node label' lines ('#' comments); a node on several lines makes the task "
        "multi-label; labelled nodes without an embedding are skipped, with a note "
        "(docs/input-formats.md)."
    ),
    opt.splits(
        "JSON list of {train, val, test} node-id lists (single-label protocol); with "
        "--dataset, they replace its own splits."
    ),
    option(
        "--fractions",
        default="0.1,0.5,0.9",
        help="Training fractions gamma of the multi-label protocol.",
    ),
    option(
        "--shuffles",
        default=10,
        type=click.IntRange(min=1),
        help="Random shuffles per fraction (multi-label protocol), or random splits "
        "with --train-fraction (single-label).",
    ),
    opt.fractions(
        "Single-label without a splits file: --shuffles random splits, stratified "
        "by class (seeded by --seed), training on this fraction of the labelled "
        "nodes and testing on the rest (minus --val-fraction).",
        "With --train-fraction: this fraction of the labelled nodes is held out "
        "for validation (needed to choose among several -e files).",
        val_default=0.0,
    ),
    opt.regularisation(
        "Inverse L2 regularisation of the logistic regression: a number (the paper's "
        "protocol: 1), or 'tuned': chosen per split from 0.01..1000 on its validation "
        "nodes, else by 3-fold cross-validation within its training nodes (multi-label: "
        "within the first shuffle's training part).  At a fixed C the score also depends "
        "on the scale of the embedding; tune C to compare methods fairly."
    ),
    option(
        "--classifier",
        type=click.Choice(["lbfgs", "liblinear"]),
        default="lbfgs",
        show_default=True,
        help="lbfgs: multinomial (single-label) or one-vs-rest (multi-label) logistic "
        "regression; liblinear: one-vs-rest LIBLINEAR, the classifier of the "
        "authors' and DeepWalk's scoring scripts (scikit-learn < 0.22 defaults).",
    ),
    opt.folds(
        "--cv-folds",
        "Multi-label with several embedding files: folds of the cross-validation "
        "on each training part that chooses the epoch; --task link: folds of the logistic "
        "regression over the scored pairs.",
    ),
    # --task link (docs/links.md): one block
    option(
        "--task",
        type=click.Choice(["node", "link"]),
        default="node",
        show_default=True,
        help="node: node classification (the labels); link: score the held-out edges of "
        "--split against sampled non-edges (the embeddings trained on its train_edges.txt).",
    ),
    option(
        "--graph",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="--task link: the whole graph's edge list (or .npz/.mat), as split-edges read it "
        "(or --dataset).",
    ),
    option("--directed", is_flag=True, help="--task link: read --graph as split-edges did."),
    option(
        "--split",
        "split_path",
        type=click.Path(exists=True, file_okay=False),
        default=None,
        help="--task link: the folder split-edges wrote (train_edges.txt, held_edges.txt).",
    ),
    option(
        "--negatives",
        default="uniform,degree,two-hop",
        show_default=True,
        help="--task link: kinds of non-edges, each as many as the held-out edges: uniform "
        "pairs, degree-matched pairs, pairs two hops apart in the training graph.",
    ),
    option(
        "--hits-k",
        default=50,
        show_default=True,
        type=click.IntRange(min=1),
        help="--task link: K of Hits@K (held-out edges scored above the K-th best non-edge).",
    ),
    opt.seed("Seed of the shuffles."),
    option(
        "--json",
        "json_out",
        type=click.Path(dir_okay=False),
        default=None,
        help="Also write the results as JSON ('-': to standard output, the tables then go "
        "to stderr).",
    ),
    opt.overwrite("Replace an existing --json file."),
    opt.debug(),
)
"""evaluate's options."""

SPLIT_EDGES = (
    option(
        "--graph",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="Edge list: 'u v' or 'u v weight' per line (or .npz/.mat).",
    ),
    opt.dataset("A benchmark set's graph instead of --graph."),
    opt.data_dir(),
    option("--directed", is_flag=True, help="Edges are u->v (default: undirected)."),
    option(
        "--out",
        required=True,
        type=click.Path(file_okay=False),
        help="Folder for train_edges.txt (train on it) and held_edges.txt (made if missing).",
    ),
    option(
        "--holdout",
        default=0.1,
        show_default=True,
        type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
        help="Fraction of the edges held out (fewer if a spanning forest leaves fewer).",
    ),
    opt.seed("Seed of the split."),
    opt.overwrite("Replace existing split files."),
    opt.debug(),
)
"""split-edges' options."""

CHOOSE = (
    opt.model_file("Trained model .npz (train --model-out): its o_v and filter options."),
    option(
        "--graph",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="Edge list (or .npz/.mat) the model was trained on, read as training read it "
        "(the model's --directed / --keep-self-loops); its nodes must be the model's.",
    ),
    option(
        "--labels",
        "labels_path",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="'node label' lines of the nodes you have labels for (a node on several lines: "
        "multi-label); only these labels are read.",
    ),
    opt.out("The best candidate's rows in word2vec text format, with the model's node ids."),
    opt.npy(
        "Also (or instead) the best rows as an (N, k) float32 .npy, plus "
        "<stem>.nodes.txt with the id of each row when the ids are not 0..N-1."
    ),
    opt.regularisation(
        "Inverse L2 regularisation of the logistic regression that scores each "
        "candidate: a number (the paper's protocol: 1), or 'tuned' (chosen from 0.01..1000 "
        "within each fold's training part: about 19 times the fits).  Score the rows "
        "at the C you will use them with: at a fixed C the row length matters."
    ),
    opt.folds(
        "--folds",
        "Folds of the stratified cross-validation within the labelled nodes (each class "
        "needs at least this many labelled nodes).",
    ),
    opt.seed("Seed of the folds."),
    opt.overwrite("Replace existing --out / --npy files."),
    opt.quiet("Print only the table and errors: no log lines or warnings."),
    opt.debug(),
)
"""choose's options."""

UPDATE = (
    opt.model_file("Trained model .npz (train --model-out, or an earlier update's)."),
    option(
        "--old-graph",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="The graph the model was trained on (edge list, .npz or .mat): the model file "
        "does not store it, and the change is read from it.",
    ),
    option(
        "--graph",
        required=True,
        type=click.Path(exists=True, dir_okay=False),
        help="The changed graph: edges added or removed, nodes added or removed.",
    ),
    opt.features(
        "Fixed features x of every node of the new graph (needed for a model trained with "
        "--features; normalised as in training)."
    ),
    opt.feature_ids(),
    option(
        "--budget",
        default=UPDATE_BUDGET,
        show_default=True,
        type=click.Choice(UPDATE_BUDGETS),
        help="change: each node starts walks in proportion to the share of its edges that "
        "changed (a new node: as many as training gave it), one epoch; hops: T walks from "
        "every node within --hops of the change, for ceil(E S / N) epochs; auto: change "
        "for edges changed and no node added or removed, at most "
        f"{100 * UPDATE_AUTO_CHANGE_MAX:g}% of them, else hops (docs/update.md).",
    ),
    option(
        "--hops",
        default=1,
        type=click.IntRange(min=0),
        help="--budget hops: walks start at the nodes at most this many hops from a "
        "changed edge or node (docs/update.md).",
    ),
    option(
        "--epochs",
        default=None,
        type=click.IntRange(min=1),
        help="Passes over the walks from those nodes [default: --budget change 1; hops "
        "ceil(E S / N) within [1, E], E the model's epochs, S of N nodes near the change].",
    ),
    opt.out("Embeddings of the new graph in word2vec text format [default: <graph stem>.emb]."),
    opt.npy("Also the embeddings as an (N, k) float32 .npy (ids in <stem>.nodes.txt)."),
    option(
        "--model-out",
        type=click.Path(dir_okay=False),
        default=None,
        help="The updated model .npz (for infer, or the next update).",
    ),
    opt.overwrite("Replace existing output files and a checkpoint in --checkpoint-dir."),
    option(
        "--checkpoint-dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Save the update's state there: its start, then after every epoch (atomic).",
    ),
    option(
        "--checkpoint-every",
        default=0,
        type=click.IntRange(min=0),
        help="Also save a checkpoint every N steps (0: only at epoch ends).",
    ),
    option(
        "--resume",
        "resume_dir",
        type=click.Path(file_okay=False),
        default=None,
        help="Continue the update checkpointed in this folder, with the same inputs and "
        "options; keeps checkpointing there.",
    ),
    option(
        "--threads",
        default=1,
        type=click.IntRange(min=1),
        help="Threads for the Numba kernels (the same embeddings on any count).",
    ),
    opt.quiet("Print only errors: no log lines, progress or warnings."),
    opt.debug(),
)
"""update's options."""
