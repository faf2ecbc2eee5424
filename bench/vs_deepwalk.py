"""The yardstick: `cli.py train` with its defaults against DeepWalk, graph by graph.

    python bench/vs_deepwalk.py                          # the whole panel (hours)
    python bench/vs_deepwalk.py --graphs syn-1k-mu0.3,cora
    python bench/vs_deepwalk.py --smoke                  # tiny, for CI (needs gensim)

Two peers: DeepWalk and ProNE, each timed the same way.

For every graph of the panel the graph is written as an edge list (``u v``, each
undirected edge once) into a temporary directory, then two commands run, each as
its own process timed by wall clock (perf_counter around subprocess.run: start-up,
imports, reading the graph, walks, training and writing the embeddings all count):

    DeepWalk:  python bench/deepwalk_peer.py --graph g.txt --emb dw.emb --threads P --seed 0
    ProNE:     python bench/peers/prone_peer.py --graph g.txt --emb prone.emb --threads P --seed 0
    ours:      python cli.py train --graph g.txt --out ours.emb

``ours`` gets no other flag: the CLI's defaults, including its thread count (every
core this process may use, P = len(os.sched_getaffinity(0)); DeepWalk gets the same
P).  Before the panel both commands run once on a 200-node graph, untimed, so that
Numba's on-disk caches are filled and neither side pays for compiling.

Both embedding files are then scored with the graph's protocol (rows put in node
order 0..N-1; a node without edges has no embedding from either method and gets a
zero row in both):

* single-label (Cora, Citeseer, Pubmed: the paper's 10 splits; synthetic graphs: 10
  seeded stratified 50/50 train/test splits): test accuracy of the logistic
  regression of caps2ne_np.evaluation.single.classify_splits, mean over the splits;
* multi-label (PPI, POS, BlogCatalog): micro- and macro-F1 at 10/50/90% training
  nodes, caps2ne_np.evaluation.multilabel.multilabel_f1 over ``--shuffles`` shuffles (default 5).

The targets, per graph: the score is at most 1 point below DeepWalk's
(accuracy; for multi-label graphs micro-F1 at every training fraction) and ours
takes at most 2x DeepWalk's wall time.  The goal beyond it: at most 1 point
below the better of DeepWalk and ProNE (the summary shows that gap).  ProNE is the
``nodevectors`` package with two fixes (bench/peers/prone_peer.py), an optional bench
dependency like gensim: without it the ProNE column is skipped, with a line saying so
(``--no-prone`` skips it too).

The panel: cora, citeseer, pubmed, ppi, pos, blogcatalog (from the data directory,
``--data-dir`` or caps2ne_np.graphs.downloads.default_data_dir(); a graph whose files are
missing is skipped with a note) and the LFR-like graphs of bench/graphgen.py:
syn-{1k,3k,10k,30k,100k}-mu0.3 and syn-{3k,10k}-mu0.5 (seed 0).  Any
``syn-<n>[k]-mu<mu>`` name works with ``--graphs``.  ``--smoke`` runs a 300-node
synthetic graph and the bundled Cora (``cora-bundled``) with a reduced budget on both
sides (marked in the results): 2 walks per node and 1 epoch (for DeepWalk, 1 gensim
epoch).

Writes docs/results/<out>.json + .md after every graph, so an interrupted run keeps
what it measured.  ``panel_entry(name)`` (the loaders), ``score_embedding`` and
``score_protocols`` are the hooks bench/panel.py reuses.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

import common
import graphgen
import report

# the graphs of more/ (a dense web graph, a heterophilous one, two with structural-role labels)
# have no splits: panel_entry gives them 10 seeded stratified 50/50 splits
DATASETS = [
    "cora",
    "citeseer",
    "pubmed",
    "ppi",
    "pos",
    "blogcatalog",
    "wiki",
    "actor",
    "brazil-airports",
    "europe-airports",
]
# mu 0.3 is easy (DeepWalk ~99.9% after one gensim epoch at 1k nodes); mu 0.6-0.7 is
# where the two methods can differ (DeepWalk 89% at mu 0.6, 58% at 0.7 on 1k nodes)
SYNTHETIC = [
    "syn-1k-mu0.3",
    "syn-3k-mu0.5",
    "syn-3k-mu0.7",
    "syn-10k-mu0.6",
    "syn-30k-mu0.6",
    "syn-100k-mu0.5",
]
PANEL = DATASETS + SYNTHETIC
SMOKE_GRAPHS = ["syn-300-mu0.3", "cora-bundled"]
SYN_SEED = 0
FRACTIONS = (0.1, 0.5, 0.9)
SCORE_TOLERANCE = 1.0  # points (percent) below DeepWalk still counted as met
TIME_FACTOR = 2.0  # ours may take this many times DeepWalk's wall time
# --smoke only: budgets cut so CI finishes in seconds; the results say so
SMOKE_OURS_FLAGS = ["--walks-per-node", "2", "--epochs", "1"]
SMOKE_DW_FLAGS = ["--walks-per-node", "2", "--epochs", "1"]
STDERR_LINES = 20
# the lines of the CLI's log that the report shows for a run that worked: its choices
# and its result (the whole tail is kept only for a run that failed)
SUMMARY_LINES = ("preset", "peak lr", "budget:", "trained ")  # "graph:" is in the entry


@dataclass
class PanelGraph:
    """One graph of the panel: adjacency (symmetric CSR), labels and evaluation splits."""

    name: str
    kind: str  # "synthetic" or "dataset"
    adj: sp.csr_matrix
    labels: object  # int64 (N,) or CSR (N, L) 0/1
    multilabel: bool
    splits: list = None  # single-label only: [{train, val, test}, ...]
    split_note: str = ""
    info: dict = field(default_factory=dict)

    @property
    def n_nodes(self):
        return self.adj.shape[0]

    @property
    def n_classes(self):
        return int(self.labels.shape[1]) if self.multilabel else int(self.labels.max()) + 1


def parse_synthetic(name):
    """(n, mu) of a name ``syn-<n>[k]-mu<mu>``, or None."""
    m = re.fullmatch(r"syn-(\d+)(k?)-mu([0-9]*\.?[0-9]+)", name)
    if not m:
        return None
    return int(m.group(1)) * (1000 if m.group(2) else 1), float(m.group(3))


def stratified_splits(labels, n_splits=10, train_fraction=0.5, seed=0):
    """``n_splits`` seeded stratified splits of the labelled nodes: per class, a random
    ``train_fraction`` (rounded, at least one node) trains and the rest tests; ``val``
    is empty (classify_splits then reports NaN for it, which is not used)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    classes = [np.flatnonzero(labels == c) for c in np.unique(labels[labels >= 0])]
    splits = []
    for _ in range(n_splits):
        train, test = [], []
        for members in classes:
            perm = rng.permutation(members)
            k = max(1, int(round(train_fraction * perm.size)))
            train.append(perm[:k])
            test.append(perm[k:])
        splits.append(
            dict(
                train=np.sort(np.concatenate(train)),
                val=np.empty(0, dtype=np.int64),
                test=np.sort(np.concatenate(test)),
            )
        )
    return splits


def panel_entry(name, data_dir=None):
    """The PanelGraph called ``name`` (a synthetic name, a dataset or cora-bundled).

    Raises caps2ne_np.errors.InputError when the dataset's files are missing."""
    syn = parse_synthetic(name)
    if syn is not None:
        n, mu = syn
        adj, labels = graphgen.lfr_like(n, mu=mu, seed=SYN_SEED)
        per_node, _ = graphgen.mixing(adj, labels)
        return PanelGraph(
            name,
            "synthetic",
            adj,
            labels,
            False,
            stratified_splits(labels),
            "10 seeded stratified 50/50 splits",
            dict(n=n, mu=mu, seed=SYN_SEED, realized_mixing=per_node),
        )
    from caps2ne_np.graphs.datasets import load_dataset
    from caps2ne_np.graphs.downloads import default_data_dir

    if name == "cora-bundled":
        ds = load_dataset(name)
    elif name in ("cora", "citeseer", "pubmed"):
        ds = load_dataset(name, data_dir or default_data_dir(), features=False)
    else:
        ds = load_dataset(name, data_dir or default_data_dir())
    adj = sp.csr_matrix(ds.adj, dtype=np.float32)
    if ds.multilabel:
        return PanelGraph(name, "dataset", adj, sp.csr_matrix(ds.labels), True)
    if ds.splits:
        return PanelGraph(
            name,
            "dataset",
            adj,
            np.asarray(ds.labels),
            False,
            ds.splits,
            f"the paper's {len(ds.splits)} splits",
        )
    return PanelGraph(
        name,
        "dataset",
        adj,
        np.asarray(ds.labels),
        False,
        stratified_splits(ds.labels),
        "10 seeded stratified 50/50 splits (no splits file)",
    )


def load_embedding(path, n):
    """(N, k) float32 with row i = node 'i' of a word2vec file, and the number of nodes
    the file lacks (zero rows)."""
    from caps2ne_np.io.word2vec import read_word2vec

    ids, vectors = read_word2vec(path)
    emb = np.zeros((n, vectors.shape[1]), dtype=np.float32)
    idx = np.array([int(i) for i in ids], dtype=np.int64)
    emb[idx] = vectors
    return emb, n - len(ids)


def score_embedding(graph, emb, shuffles=5, fractions=FRACTIONS, C=1.0):
    """The graph's protocol on ``emb`` (row i = node i) with the classifier's ``C`` (a
    number, or "tuned": chosen per split, caps2ne_np.evaluation.single.tuned_C).  Returns a dict
    with ``headline`` (percent: accuracy, or micro-F1 at 50% training nodes, else at the
    first fraction) and the protocol's numbers in percent (single-label: ``macro_f1``
    of the test nodes too)."""
    from caps2ne_np.evaluation.multilabel import multilabel_f1
    from caps2ne_np.evaluation.single import classify_splits

    if graph.multilabel:
        fractions = tuple(fractions)
        r = multilabel_f1(emb, graph.labels, fractions, n_shuffles=shuffles, seed=0, C=C)
        micro = [100 * float(x) for x in r["micro_mean"]]
        macro = [100 * float(x) for x in r["macro_mean"]]
        return dict(
            protocol="multi-label",
            fractions=list(fractions),
            shuffles=shuffles,
            micro=micro,
            macro=macro,
            micro_std=[100 * float(x) for x in r["micro_std"]],
            headline=micro[fractions.index(0.5) if 0.5 in fractions else 0],
            C=[float(c) for c in r["C"]],
        )
    r = classify_splits(emb, graph.labels, graph.splits, C=C)
    out = dict(
        protocol="single-label",
        splits=len(graph.splits),
        accuracy=100 * r["test_mean"],
        accuracy_std=100 * r["test_std"],
        macro_f1=100 * r["test_macro_f1_mean"],
        headline=100 * r["test_mean"],
        C=[float(c) for c in r["C"]],
    )
    if not np.isnan(r["val_mean"]):
        out["val_accuracy"] = 100 * r["val_mean"]
    return out


def score_protocols(graph, emb, shuffles=5, scales=()):
    """``emb`` under both protocols: the paper's (C = 1, ``score_embedding``'s dict) with
    ``tuned`` (the same splits, C chosen per split from 0.01..1000 on each split's
    validation nodes or by 3-fold cross-validation in its training nodes; multi-label at
    50% training nodes) and ``scaled`` ({str(s): the C = 1 headline of ``s * emb``}, for
    the written scale's choice) added."""
    out = score_embedding(graph, emb, shuffles)
    tuned = score_embedding(
        graph, emb, shuffles, fractions=(0.5,) if graph.multilabel else FRACTIONS, C="tuned"
    )
    out["tuned"] = dict(
        headline=tuned["headline"],
        C=tuned["C"],
        **({"macro_f1": tuned["macro_f1"]} if "macro_f1" in tuned else {}),
    )
    if scales:
        out["scaled"] = {
            f"{s:g}": score_embedding(graph, emb * np.float32(s), shuffles, fractions=(0.5,))[
                "headline"
            ]
            for s in scales
        }
    return out


def targets(dw, ours):
    """(score met, score gaps in points) under the score target's rule."""
    if dw["protocol"] == "multi-label":
        gaps = [o - d for o, d in zip(ours["micro"], dw["micro"])]
    else:
        gaps = [ours["accuracy"] - dw["accuracy"]]
    return all(g >= -SCORE_TOLERANCE for g in gaps), gaps


_BAR = re.compile(r"^\s*\d+%\|.*?\|.*?\]")


def _screen_lines(text, keep=STDERR_LINES):
    """The last ``keep`` lines as a terminal shows them: a '\\r' rewrite keeps its last
    state, and of tqdm's progress lines (one per update when stderr is not a
    terminal) only the last is kept; text printed right after a bar stays."""
    out, last_bar = [], None
    for line in text.replace("\r\n", "\n").split("\n"):
        line = line.split("\r")[-1].rstrip()
        m = _BAR.match(line)
        if m:
            last_bar = len(out)
            out.append(m.group(0).strip())
            line = line[m.end() :]
        if line.strip():
            out.append(line)
    out = [line for i, line in enumerate(out) if i == last_bar or not _BAR.match(line)]
    return out[-keep:]


def _shown(cmd):
    """A command as the user would type it, paths relative to the repository."""
    out = []
    for part in cmd:
        if part == sys.executable:
            part = "python"
        elif os.path.isabs(part) and part.startswith(str(common.REPO) + os.sep):
            part = os.path.relpath(part, common.REPO)
        out.append(part)
    return " ".join(out)


def run_timed(cmd, cwd):
    """(wall seconds, CompletedProcess) of one command."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def _parse_peer(stdout):
    out = {}
    for line in stdout.splitlines():
        key, _, value = line.partition(":")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            pass
    return out


def commands(workdir, threads, smoke, usable):
    graph = os.path.join(workdir, "g.txt")
    dw = [
        sys.executable,
        str(common.BENCH / "deepwalk_peer.py"),
        "--graph",
        graph,
        "--emb",
        os.path.join(workdir, "dw.emb"),
        "--threads",
        str(threads),
        "--seed",
        "0",
    ]
    ours = [
        sys.executable,
        str(common.REPO / "cli.py"),
        "train",
        "--graph",
        graph,
        "--out",
        os.path.join(workdir, "ours.emb"),
    ]
    if threads != usable:  # --threads asked for another count than the CLI's default
        ours += ["--threads", str(threads)]
    if smoke:
        dw += SMOKE_DW_FLAGS
        ours += SMOKE_OURS_FLAGS
    return dw, ours


def prone_command(workdir, threads, smoke):
    """The ProNE peer's command (its --smoke run is the full method: it takes seconds)."""
    del smoke
    return [
        sys.executable,
        str(common.BENCH / "peers" / "prone_peer.py"),
        "--graph",
        os.path.join(workdir, "g.txt"),
        "--emb",
        os.path.join(workdir, "prone.emb"),
        "--threads",
        str(threads),
        "--seed",
        "0",
    ]


def have_prone():
    """True when the ProNE peer's package (nodevectors) is installed."""
    import importlib.util

    return importlib.util.find_spec("nodevectors") is not None


def best_peer(e):
    """(name, headline score) of the better peer of an entry (DeepWalk, ProNE), or None
    unless both were measured."""
    peers = [
        (side, score_of(e, side)["headline"])
        for side in ("deepwalk", "prone")
        if "score" in e.get(side, {})
    ]
    return max(peers, key=lambda p: p[1]) if len(peers) == 2 else None


def measure(graph, workdir, args, usable):
    """Write the graph, run both commands ``args.reps`` times, score every embedding."""
    os.makedirs(workdir, exist_ok=True)
    n_edges = graphgen.write_edgelist(os.path.join(workdir, "g.txt"), graph.adj)
    if not graph.multilabel:
        graphgen.write_labels(os.path.join(workdir, "g.labels"), graph.labels)
    dw_cmd, ours_cmd = commands(workdir, args.threads, args.smoke, usable)
    dw1_cmd = fast_peer_command(dw_cmd)
    entry = dict(
        name=graph.name,
        kind=graph.kind,
        n_nodes=graph.n_nodes,
        n_edges=n_edges,
        n_classes=graph.n_classes,
        multilabel=graph.multilabel,
        info=graph.info,
        split_note=graph.split_note,
    )
    sides = dict(
        deepwalk=dict(cmd=dw_cmd, file="dw.emb", seconds=[], scores=[]),
        ours=dict(cmd=ours_cmd, file="ours.emb", seconds=[], scores=[]),
    )
    if args.fast_peer and not args.smoke:  # DeepWalk with one gensim epoch (node2vec's default)
        sides["deepwalk_1ep"] = dict(cmd=dw1_cmd, file="dw1.emb", seconds=[], scores=[])
    if args.prone:  # the second peer
        cmd = prone_command(workdir, args.threads, args.smoke)
        sides["prone"] = dict(cmd=cmd, file="prone.emb", seconds=[], scores=[])
    for rep in range(args.reps):
        for side, s in sides.items():
            out = os.path.join(workdir, s["file"])
            if os.path.exists(out):
                os.unlink(out)  # the CLI never overwrites without --overwrite
            seconds, proc = run_timed(s["cmd"], common.REPO)
            s["stderr_tail"] = _screen_lines(proc.stderr)
            if proc.returncode != 0:
                s["error"] = f"exit {proc.returncode} in rep {rep + 1}"
                continue
            s["seconds"].append(seconds)
            if side.startswith(("deepwalk", "prone")):
                s.setdefault("phases", []).append(_parse_peer(proc.stdout))
            emb, missing = load_embedding(out, graph.n_nodes)
            entry["nodes_without_embedding"] = missing
            s["scores"].append(score_embedding(graph, emb, args.shuffles))
    for side, s in sides.items():
        s.pop("cmd")
        s.pop("file")
        if "error" not in s:
            tail = s.pop("stderr_tail", [])
            if side == "ours":
                s["stderr_summary"] = [line for line in tail if line.startswith(SUMMARY_LINES)]
        if s["seconds"]:
            s["seconds_median"] = common.median(s["seconds"])
            s["score"] = _median_score(s["scores"])
            if len(s["scores"]) == 1:  # the result file keeps one copy
                del s["scores"]
        entry[side] = s
    dw, ours = entry["deepwalk"], entry["ours"]
    if "score" in dw and "score" in ours:
        score_ok, gaps = targets(dw["score"], ours["score"])
        ratio = ours["seconds_median"] / dw["seconds_median"]
        entry.update(
            time_ratio=ratio,
            score_gap=gaps,
            score_gap_headline=ours["score"]["headline"] - dw["score"]["headline"],
            targets=dict(score=score_ok, time=ratio <= TIME_FACTOR),
        )
    best = best_peer(dict(entry, score_protocol={}))  # scores still whole here
    if best is not None and "score" in ours:
        entry.update(best_peer=best[0], score_gap_best=ours["score"]["headline"] - best[1])
    fast = entry.get("deepwalk_1ep", {})
    if "score" in fast and "score" in ours:
        entry.update(
            time_ratio_1ep=ours["seconds_median"] / fast["seconds_median"],
            score_gap_1ep=targets(fast["score"], ours["score"])[1],
        )
    return compact_entry(entry)


def compact_entry(entry):
    """A graph's entry as the result file keeps it: no per-graph commands (they are the
    file's ``command_templates`` with <dir> a temporary folder per graph), a single run's
    wall time only as ``seconds_median``, DeepWalk's phases of the last run only (not the
    1-epoch peer's), without the node count (``n_nodes``) and total (the wall time), and
    of ours' log the
    SUMMARY_LINES; no scoring time; each side's score without the protocol (kept once,
    ``score_protocol``) and the headline (``score_of`` derives it).  Idempotent (it also
    shortens older files)."""
    entry.pop("commands", None)
    for side in ("deepwalk", "ours", "deepwalk_1ep", "prone"):
        s = entry.get(side)
        if s is None:
            continue
        if len(s.get("seconds", ())) == 1 and "seconds_median" in s:
            del s["seconds"]
        if s.get("phases"):  # the report shows the reference's (5 epochs)
            s["phases"] = [
                {k: v for k, v in s["phases"][-1].items() if k not in ("nodes", "total_s")}
            ]
            if side in ("deepwalk_1ep", "prone"):  # the report shows DeepWalk's only
                del s["phases"]
        s.pop("scoring_seconds", None)  # our scoring's time, not either method's
        if "score" in s:  # the protocol once per graph; the headline is derived (score_of)
            entry.setdefault(
                "score_protocol", {k: s["score"][k] for k in PROTOCOL_KEYS if k in s["score"]}
            )
            s["score"] = {
                k: v for k, v in s["score"].items() if k not in PROTOCOL_KEYS + ("headline",)
            }
        if "stderr_summary" in s:
            s["stderr_summary"] = [x for x in s["stderr_summary"] if x.startswith(SUMMARY_LINES)]
    return entry


PROTOCOL_KEYS = ("protocol", "splits", "fractions", "shuffles")
PEER_NAMES = dict(deepwalk="DeepWalk", prone="ProNE")


def score_of(e, side):
    """A side's whole score as score_embedding returned it (the protocol and headline
    back in)."""
    s = {**e.get("score_protocol", {}), **e[side]["score"]}
    if "headline" not in s:
        if s["protocol"] == "multi-label":
            f = s["fractions"]
            s["headline"] = s["micro"][f.index(0.5) if 0.5 in f else 0]
        else:
            s["headline"] = s["accuracy"]
    return s


def fast_peer_command(dw_cmd):
    """DeepWalk's command with one gensim epoch (node2vec's default), beside the reference."""
    return [c.replace("dw.emb", "dw1.emb") for c in dw_cmd] + ["--epochs", "1"]


def _median_score(scores):
    """The score of the run with the median headline (the only one when reps = 1)."""
    order = np.argsort([s["headline"] for s in scores], kind="stable")
    return scores[int(order[(len(order) - 1) // 2])]


def warm_up(args, usable):
    """Run every command on a 200-node graph so that Numba's caches are filled."""
    with tempfile.TemporaryDirectory(prefix="vs_dw_warm_") as d:
        adj, _ = graphgen.lfr_like(200, mu=0.3, seed=1, min_community=10, max_community=60)
        graphgen.write_edgelist(os.path.join(d, "g.txt"), adj)
        dw_cmd, ours_cmd = commands(d, args.threads, True, usable)
        t0 = time.perf_counter()
        cmds = [dw_cmd, ours_cmd] + ([prone_command(d, args.threads, True)] if args.prone else [])
        for cmd in cmds:
            proc = subprocess.run(cmd, cwd=common.REPO, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"warm-up failed: {_shown(cmd)}\n{proc.stderr[-2000:]}", file=sys.stderr)
                return None
        return time.perf_counter() - t0


def main(argv=None):
    ap = common.parser(
        __doc__,
        threads=0,  # DeepWalk's workers and ours: the usable cores, the CLI's default
        reps=1,
        smoke=",".join(SMOKE_GRAPHS) + ", reduced budgets on both sides",
        out="vs_deepwalk",
    )
    ap.add_argument(
        "--graphs",
        default=None,
        help="comma-separated subset (default: the panel: " + ",".join(PANEL) + ")",
    )
    ap.add_argument(
        "--data-dir",
        default=None,
        help="benchmark data (default: caps2ne_np.graphs.downloads.default_data_dir())",
    )
    ap.add_argument("--shuffles", type=int, default=5, help="shuffles of the multi-label protocol")
    ap.add_argument("--keep-dir", default=None, help="keep graphs and embeddings in this directory")
    ap.add_argument(
        "--no-warmup", action="store_true", help="skip the untimed run that fills Numba's cache"
    )
    ap.add_argument(
        "--update",
        action="store_true",
        help="measure --graphs and replace (or add) their entries in the existing "
        "docs/results/<out>.json, keeping the other graphs as measured before",
    )
    ap.add_argument(
        "--no-fast-peer",
        dest="fast_peer",
        action="store_false",
        help="skip the extra DeepWalk run with one gensim epoch (shown beside the "
        "reference, which runs gensim's default 5 epochs as DeepWalk's code does)",
    )
    ap.add_argument(
        "--no-prone",
        dest="prone",
        action="store_false",
        help="skip the ProNE peer (bench/peers/prone_peer.py; needs nodevectors)",
    )
    args = ap.parse_args(argv)
    prone_note = None
    if args.prone and not have_prone():
        prone_note = "ProNE peer skipped: nodevectors is not installed (pip install nodevectors)"
        print(prone_note, file=sys.stderr)
        args.prone = False
    try:
        import gensim  # noqa: F401
    except ImportError:
        ap.error("gensim is needed for the DeepWalk peer: pip install gensim")
    usable = common.usable_cores()
    args.threads = args.threads or usable
    if args.reps < 1:
        ap.error("--reps: expected >= 1")
    names = SMOKE_GRAPHS if args.smoke else PANEL
    if args.graphs:
        names = [n.strip() for n in args.graphs.split(",") if n.strip()]
        bad = [
            n for n in names if n not in DATASETS + ["cora-bundled"] and parse_synthetic(n) is None
        ]
        if bad:
            ap.error(
                f"unknown graph(s) {bad}; choose from {PANEL + ['cora-bundled']} "
                "or syn-<n>[k]-mu<mu>"
            )

    dw_t, ours_t = commands("<dir>", args.threads, args.smoke, usable)
    payload = dict(
        command="python bench/vs_deepwalk.py " + " ".join(sys.argv[1:] if argv is None else argv),
        machine=common.machine_info(),
        threads=args.threads,
        usable_cores=usable,
        reps=args.reps,
        multilabel_shuffles=args.shuffles,
        smoke=args.smoke,
        smoke_note=(
            f"SMOKE: reduced budgets, ours {' '.join(SMOKE_OURS_FLAGS)}, DeepWalk "
            f"{' '.join(SMOKE_DW_FLAGS)}; not a measurement of the targets"
        )
        if args.smoke
        else None,
        command_templates=dict(deepwalk=_shown(dw_t), ours=_shown(ours_t)),
        targets=dict(score_points_below_deepwalk=SCORE_TOLERANCE, time_factor=TIME_FACTOR),
        load_avg_before=os.getloadavg(),
        graphs=[],
        skipped=[],
    )
    if args.update:
        if not (common.RESULTS / f"{args.out}.json").exists() or not args.graphs:
            ap.error(f"--update needs --graphs and an existing docs/results/{args.out}.json")
        old = json.loads((common.RESULTS / f"{args.out}.json").read_text())
        payload["updates"] = old.get("updates", []) + [
            dict(
                command=payload["command"],
                graphs=names,
                git_commit=payload["machine"]["git_commit"],
                load_avg_before=payload["load_avg_before"],
            )
        ]
        payload["command"], payload["machine"] = old["command"], old["machine"]
        payload["load_avg_before"] = old["load_avg_before"]
        payload["graphs"] = [g for g in old["graphs"] if g["name"] not in names]
        payload["skipped"] = [g for g in old.get("skipped", []) if g["name"] not in names]
        payload["notes"] = old.get("notes", [])
    if args.fast_peer and not args.smoke:
        payload["command_templates"]["deepwalk_1ep"] = _shown(fast_peer_command(dw_t))
    if args.prone:
        payload["command_templates"]["prone"] = _shown(prone_command("<dir>", args.threads, False))
    elif prone_note:
        payload["prone_note"] = prone_note
    if not args.no_warmup:
        payload["warmup_seconds"] = warm_up(args, usable)
    root = args.keep_dir or tempfile.mkdtemp(prefix="vs_deepwalk_")
    try:
        for i, name in enumerate(names, 1):
            try:
                graph = panel_entry(name, args.data_dir)
            except Exception as err:  # noqa: BLE001 -- a missing dataset skips the graph
                payload["skipped"].append(dict(name=name, reason=f"{type(err).__name__}: {err}"))
                print(f"[{i}/{len(names)}] {name}: skipped ({err})", flush=True)
                continue
            entry = measure(graph, os.path.join(root, name), args, usable)
            entry["git_commit"] = common.machine_info()["git_commit"]
            payload["graphs"].append(entry)
            payload["load_avg_after"] = os.getloadavg()
            factor_preset_line(payload)
            common.write_results(args.out, payload, render(payload))
            print(f"[{i}/{len(names)}] {progress_line(entry)}", flush=True)
    finally:
        if args.keep_dir is None:
            shutil.rmtree(root, ignore_errors=True)
    payload["load_avg_after"] = os.getloadavg()
    factor_preset_line(payload)
    md = render(payload)
    common.write_results(args.out, payload, md)
    print(md)
    return 0


def _met(ok):
    return "met" if ok else "**not met**"


def progress_line(e):
    dw, ours = e["deepwalk"], e["ours"]
    head = f"{e['name']}: N={e['n_nodes']:,}, E={e['n_edges']:,}"
    if "targets" not in e:
        errors = "; ".join(
            f"{side} {e[side]['error']}" for side in ("deepwalk", "ours") if "error" in e[side]
        )
        return f"{head}: FAILED ({errors})"
    metric = "micro-F1@50%" if e["multilabel"] else "accuracy"
    return (
        f"{head}: {metric} DeepWalk {score_of(e, 'deepwalk')['headline']:.2f} in "
        f"{dw['seconds_median']:.1f} s, "
        + (
            f"ProNE {score_of(e, 'prone')['headline']:.2f} in "
            f"{e['prone']['seconds_median']:.1f} s, "
            if "score" in e.get("prone", {})
            else ""
        )
        + f"ours {score_of(e, 'ours')['headline']:.2f} in "
        f"{ours['seconds_median']:.1f} s "
        f"(x{e['time_ratio']:.2f}); score {_met(e['targets']['score'])}, "
        f"time {_met(e['targets']['time'])}"
    )


def _f(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def render(p):
    lines = ["# Caps2NE CLI defaults against DeepWalk\n"]
    if p["smoke"]:
        lines.append(f"**{p['smoke_note']}**\n")
    lines.append(
        f"`{p['command'].strip()}`: {p['threads']} threads on both sides ({p['usable_cores']} "
        f"usable cores), {p['reps']} run(s) per side (median), load average "
        f"{p['load_avg_before'][0]:.1f} before"
        + (f", {p['load_avg_after'][0]:.1f} after" if "load_avg_after" in p else "")
        + ".\n"
    )
    lines.append(
        f"Targets: score at most {p['targets']['score_points_below_deepwalk']:g} point below "
        f"DeepWalk's (accuracy; micro-F1 at every training fraction for multi-label graphs) and "
        f"wall time at most {p['targets']['time_factor']:g}x DeepWalk's.  Wall time is the "
        "whole process, start-up to written file (Numba caches warm).\n"
    )
    lines.append(report.machine_markdown(p["machine"]))
    for note in p.get("notes", []):
        lines.append(f"Note: {note}\n")
    for u in p.get("updates", []):
        lines.append(
            f"Updated later: {', '.join(u['graphs'])} re-measured by `{u['command'].strip()}` "
            f"at commit {u['git_commit']} (load average {u['load_avg_before'][0]:.1f} "
            "before); each graph's section names its commit.\n"
        )
    rows = []
    for e in p["graphs"]:
        if "targets" not in e:
            rows.append(
                [
                    e["name"],
                    f"{e['n_nodes']:,}",
                    f"{e['n_edges']:,}",
                    e["n_classes"],
                    "failed",
                ]
                + [""] * 13
            )
            continue
        dw, ours = e["deepwalk"], e["ours"]
        fast = e.get("deepwalk_1ep", {})
        prone = e.get("prone", {})
        best = best_peer(e)
        rows.append(
            [
                e["name"],
                f"{e['n_nodes']:,}",
                f"{e['n_edges']:,}",
                e["n_classes"],
                "micro-F1 @50%" if e["multilabel"] else "accuracy",
                _f(score_of(e, "deepwalk")["headline"]),
                _f(score_of(e, "prone")["headline"]) if "score" in prone else "-",
                f"{best[1]:.2f} ({PEER_NAMES[best[0]]})" if best else "-",
                _f(score_of(e, "ours")["headline"]),
                f"{e['score_gap_headline']:+.2f}",
                f"{e['score_gap_best']:+.2f}" if "score_gap_best" in e else "-",
                _f(dw["seconds_median"], "{:.1f}"),
                _f(prone.get("seconds_median"), "{:.1f}") + ("*" if prone.get("loaded") else ""),
                _f(ours["seconds_median"], "{:.1f}"),
                f"{e['time_ratio']:.2f}",
                _met(e["targets"]["score"]),
                _met(e["targets"]["time"]),
                (
                    f"{score_of(e, 'deepwalk_1ep')['headline']:.2f} in "
                    f"{fast['seconds_median']:.1f} s "
                    f"(ours x{e['time_ratio_1ep']:.2f})"
                )
                if "score" in fast
                else "-",
            ]
        )
    lines.append("## Summary\n")
    lines.append(
        report.markdown_table(
            [
                "graph",
                "N",
                "edges",
                "classes",
                "metric",
                "DeepWalk",
                "ProNE",
                "best peer",
                "ours",
                "gap (points)",
                "gap to best",
                "DeepWalk s",
                "ProNE s",
                "ours s",
                "time ratio",
                "score target",
                "time target",
                "DeepWalk, 1 gensim epoch",
            ],
            rows,
        )
        + "\n"
    )
    lines.append(
        "DeepWalk is gensim's skip-gram with its default 5 epochs over the walks, as "
        "DeepWalk's reference code runs it; the targets are measured against it.  The "
        "last column is the same peer with one gensim epoch (node2vec's reference "
        "default), shown so that the faster peer is in view too.  ProNE: "
        "bench/peers/prone_peer.py, timed the same way; gap to best: ours minus the "
        "better peer (goal: at least -1).\n"
    )
    if p.get("prone_note"):
        lines.append(f"Note: {p['prone_note']}\n")
    if p["skipped"]:
        lines.append(
            "Skipped: " + "; ".join(f"{s['name']} ({s['reason']})" for s in p["skipped"]) + "\n"
        )
    preset = p.get("ours_preset_line") or shared_preset_line(p["graphs"])
    if preset:
        lines.append(
            "Ours printed the same preset line on every graph but for its rate (the "
            f"sections give the rest of its log):\n\n```\n{preset}\n```\n"
        )
    for e in p["graphs"]:
        lines.append(render_graph(e, skip_preset=bool(preset)))
    lines.append("## Commands\n")
    lines.append(f"- DeepWalk: `{p['command_templates']['deepwalk']}`")
    lines.append(f"- ours: `{p['command_templates']['ours']}`")
    if "deepwalk_1ep" in p["command_templates"]:
        lines.append(f"- DeepWalk, 1 gensim epoch: `{p['command_templates']['deepwalk_1ep']}`")
    if "prone" in p["command_templates"]:
        lines.append(f"- ProNE: `{p['command_templates']['prone']}`")
    lines.append(
        "- `<dir>` is a temporary folder per graph; `<dir>/g.txt` is the graph as written by "
        "bench/graphgen.write_edgelist (each undirected edge once, self loops dropped).\n"
    )
    return "\n".join(lines)


_LR = re.compile(r"\blr [0-9.e-]+")


def shared_preset_line(graphs):
    """The 'preset' log line of ours with its rate as <lr>, when every graph printed the
    same one (else None: each section shows its own)."""
    lines = {
        _LR.sub("lr <lr>", x, count=1)
        for e in graphs
        for x in e["ours"].get("stderr_summary", [])
        if x.startswith("preset")
    }
    return lines.pop() if len(lines) == 1 else None


def factor_preset_line(p):
    """Keep ours' preset line once per file (``ours_preset_line``, rate as <lr>; each
    graph's rate is in its 'peak lr' line) when every graph printed the same one, so that
    docs/results stays small (tests/test_results_size.py)."""
    shared = shared_preset_line(p["graphs"])
    if shared is None or p.get("ours_preset_line", shared) != shared:
        return
    p["ours_preset_line"] = shared
    for e in p["graphs"]:
        if "stderr_summary" in e.get("ours", {}):
            s = e["ours"]["stderr_summary"]
            e["ours"]["stderr_summary"] = [x for x in s if not x.startswith("preset")]


def render_graph(e, skip_preset=False):
    """A graph's section: what the summary row does not show (the protocol, the spread
    over splits or the per-fraction scores, DeepWalk's phases, ours' log lines)."""
    i = e.get("info", {})
    head = [f"Measured at commit {e['git_commit']}." if e.get("git_commit") else ""]
    if i.get("realized_mixing") is not None:
        head.append(
            f"LFR-like (bench/graphgen.py) mu={i['mu']}, realized {i['realized_mixing']:.3f}, "
            f"seed {i['seed']}."
        )
    if e["multilabel"]:
        head.append(f"{e['n_classes']} labels (multi-label).")
    if e["split_note"]:
        head.append(f"Protocol: {e['split_note']}.")
    if e.get("nodes_without_embedding"):
        head.append(
            f"{e['nodes_without_embedding']} node(s) without edges get zero vectors on both sides."
        )
    lines = [f"## {e['name']}\n", " ".join(h for h in head if h) + "\n"]
    for side in ("deepwalk", "ours"):
        if "error" in e[side]:
            lines.append(
                f"- **{side} failed** ({e[side]['error']}):\n\n```\n"
                + "\n".join(e[side]["stderr_tail"])
                + "\n```\n"
            )
    if "targets" not in e:
        return "\n".join(lines)
    dw, ours = e["deepwalk"], e["ours"]
    wall = (
        f"wall seconds (median) DeepWalk {dw['seconds_median']:.2f}, "
        f"ours {ours['seconds_median']:.2f}"
    )
    if e["multilabel"]:
        rows = [
            [
                f"{100 * f:.0f}%",
                _f(dw["score"]["micro"][j]),
                _f(ours["score"]["micro"][j]),
                f"{e['score_gap'][j]:+.2f}",
                _f(dw["score"]["macro"][j]),
                _f(ours["score"]["macro"][j]),
                _met(e["score_gap"][j] >= -SCORE_TOLERANCE),
            ]
            for j, f in enumerate(score_of(e, "deepwalk")["fractions"])
        ]
        lines.append(
            report.markdown_table(
                [
                    "train fraction",
                    "DeepWalk micro-F1",
                    "ours micro-F1",
                    "gap",
                    "DeepWalk macro-F1",
                    "ours macro-F1",
                    "score target",
                ],
                rows,
            )
            + "\n"
        )
        lines.append(f"{score_of(e, 'deepwalk')['shuffles']} shuffles per fraction; {wall}.")
    else:
        lines.append(
            f"Accuracy (%): DeepWalk {dw['score']['accuracy']:.2f} +- "
            f"{dw['score']['accuracy_std']:.2f}, ours {ours['score']['accuracy']:.2f} +- "
            f"{ours['score']['accuracy_std']:.2f}; {wall}."
        )
    if dw.get("phases"):
        ph = dw["phases"][-1]
        lines[-1] += " DeepWalk's phases (last run): " + ", ".join(
            f"{k[:-2]} {ph[k]:.2f} s"
            for k in ("imports_s", "read_s", "walks_s", "train_s", "write_s")
            if k in ph
        )
        lines[-1] += "."
    lines[-1] += "\n"
    log = [
        x for x in ours.get("stderr_summary", []) if not (skip_preset and x.startswith("preset"))
    ]
    if log:
        lines.append("ours on stderr:\n\n```\n" + "\n".join(log) + "\n```\n")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
