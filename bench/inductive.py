"""The inductive table (paper Sec. 4.3, Table 3) for Cora and Citeseer.

For each of the paper's splits s (20 labelled nodes per class for training, 1,000 for
validation, 1,000 for test):

1. remove the split's test nodes and every edge touching them (``inductive.inductive_split``),
   so no walk, pair, sampled negative or parameter of training ever involves them;
2. train Caps2NE on the remaining graph with the fixed, row-normalised bag-of-words
   features of its nodes;
3. after every epoch embed the evaluated nodes on the *full* graph and score them with
   logistic regression on the split's training nodes (``single.classify_splits``):
   - o-path (the paper's protocol and the authors' code): train and val nodes use their
     output vectors o_v (they were in the training graph); each test node gets
     Algorithm 3 over Z = 10 contexts (one walk with the node at each position 0..9),
     aggregated each way ``infer`` offers, all from the same model and contexts:
     mean (the paper), sum (the authors' code, Z x mean), and the mean mapped onto the
     o_v by a calibration fitted on the training graph's nodes (their Algorithm 3 mean
     against their o_v): scale (one factor), diag (per dimension, the default), linear
     (ridge), and scale and diag fitted on the full graph (what ``infer`` does when
     the model file stores no calibration);
   - o+fill: as the o-path, but the labelled (train, val) nodes that the split left
     without edges use their inferred vector on the full graph instead of an o_v
     learned from their own features alone;
   - e-path: every evaluated node (train, val, test) gets Algorithm 3 (mean), so the
     classifier is trained and applied in one space;
4. per split and variant, keep the epoch with the best val accuracy and report its test
   accuracy (``single.select_epoch``); mean and std over the splits;
5. validation that tells the o-path variants apart (``val_infer``): on the
   o-path the val nodes use o_v, so every variant has the same val accuracy.  At the
   chosen epoch each o-path variant is also scored with the val nodes embedded as the
   test nodes are: Algorithm 3 on the full graph (the same Z contexts), the variant's
   aggregation, and a calibration fitted on the calibration nodes *without* the val
   nodes; the classifier is the same (fitted on the training nodes' o_v).  The val
   nodes stay in the training graph (they are embedded "as if new"): holding them out
   as well would leave 708 of Cora's 2,708 nodes to train on, not the paper's protocol.
   ``infer``'s defaults are the variant of best mean ``val_infer`` (docs/inductive.md).

One model is trained per split; every variant scores that model's epochs.

Paper: 76.54 (Cora), 69.84 (Citeseer).  Pubmed (78.98) needs the bag-of-words features
``ind.pubmed.allx``, which our data folder lacks; it is not run (no substitute).

    python bench/inductive.py                          # 10 splits x 50 epochs, both sets (hours)
    python bench/inductive.py --datasets cora --splits 2 --epochs 5
    python bench/inductive.py --smoke          # 1 split, 1 epoch, T = 1 -> inductive_smoke.*
    python bench/inductive.py --render docs/results/inductive.json   # the .md again
    python bench/inductive.py --update --datasets cora,wiki --seeds 3   # -> update_*.md

``--update`` runs the update study instead (bench/update_study.py: a graph that grows,
``caps2ne update`` against retraining and ``infer``), for ``--scenarios`` such as
nodes:0.1,edges:0.05 on ``--datasets`` (any panel graph: cora, wiki, lfr-...), seeds
0..``--seeds``-1, and writes docs/results/update_<--out>.json and .md.

Writes docs/results/<--out>.json (every split: its graph counts, timings and the default's
accuracy; every variant's mean and std) and <--out>.md.
"""

import shlex
import sys
import warnings

import numpy as np

import common
import report
from caps2ne_np.defaults import DEFAULT_AGGREGATE, DEFAULT_CALIBRATION
from caps2ne_np.errors import InputWarning
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.evaluation.inductive import inductive_split
from caps2ne_np.evaluation.single import classify_splits, select_epoch
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.graphs.datasets import load_dataset
from caps2ne_np.graphs.downloads import default_data_dir
from caps2ne_np.inference.calibration import fit_calibration
from caps2ne_np.inference.infer import aggregate_samples, capsule_embeddings
from caps2ne_np.kernels.rng import derive_seed
from caps2ne_np.model.features import prepare_features
from caps2ne_np.model.model_config import ModelConfig

PAPER = {"cora": 76.54, "citeseer": 69.84, "pubmed": 78.98}
CALIBRATIONS = ("scale", "diag", "linear")
O_VARIANTS = ("mean", "sum", "scale", "scale-full", "diag", "diag-full", "linear")
FILL_VARIANTS = ("sum", "scale", "diag", "linear")
PATHS = (
    tuple(f"o:{v}" for v in O_VARIANTS) + tuple(f"o+fill:{v}" for v in FILL_VARIANTS) + ("e:mean",)
)
DEFAULT_PATH = "o:" + (
    DEFAULT_CALIBRATION if DEFAULT_AGGREGATE == "calibrated" else DEFAULT_AGGREGATE
)
"""The o-path of ``infer``'s default aggregate (the calibration stored in the model)."""


def parse_args(argv=None):
    ap = common.parser(
        __doc__,
        threads=1,
        smoke="1 split, 1 epoch, T = 1, cora only: checks the pipeline in a minute",
        out="",
    )
    ap.add_argument("--datasets", default="cora,citeseer", help="comma-separated: cora, citeseer")
    ap.add_argument(
        "--splits", type=int, default=10, help="how many of the 10 splits (the first n)"
    )
    ap.add_argument("--epochs", type=int, default=50, help="epochs per split (paper: up to 50)")
    ap.add_argument("--walks-per-node", type=int, default=32, help="T (paper grid 8..64)")
    ap.add_argument("--routing-iters", type=int, default=1, help="m (paper grid 1, 3, 5, 7)")
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam lr (paper's best: 1e-4)")
    ap.add_argument("--batch-size", type=int, default=64, help="B (paper: 64 for Cora, Citeseer)")
    ap.add_argument(
        "--samples", type=int, default=10, help="Z contexts per inferred node (paper: 10)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--data-dir", default=None, help="default: $CAPS2NE_DATA, else ~/.cache/caps2ne_np"
    )
    ap.add_argument(
        "--render",
        default=None,
        metavar="JSON",
        help="only rewrite <--out>.md from a results .json, with the current default",
    )
    ap.add_argument(
        "--update", action="store_true", help="the update study (bench/update_study.py)"
    )
    ap.add_argument("--scenarios", default="nodes:0.1", help="--update: nodes:F, edges:F, ...")
    ap.add_argument("--seeds", type=int, default=3, help="--update: seeds 0..n-1")
    ap.add_argument("--hops", type=int, default=1, help="--update: update's --hops")
    ap.add_argument(
        "--budget", default=None, help="--update: update's --budget (default: its default)"
    )
    ap.add_argument(
        "--update-epochs",
        type=int,
        default=None,
        help="--update: update's --epochs (default: its budget rule)",
    )
    ap.add_argument("--far-hops", type=int, default=2, help="--update: 'far' is beyond this")
    ap.add_argument("--link-fraction", type=float, default=0.05, help="--update: held-out edges")
    ap.add_argument(
        "--budgets",
        default=None,
        metavar="JSON,...",
        help="only compare the update budgets of these update-study results (the "
        "--budget auto check): writes <--out>.md, default update_budget_auto",
    )
    args = ap.parse_args(argv)
    if args.budgets:
        args.out = args.out or "update_budget_auto"
        return args
    if args.update:
        args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
        args.scenarios = [
            (kind, float(f)) for kind, f in (c.split(":") for c in args.scenarios.split(","))
        ]
        args.out = "update_" + (args.out or "study")
        return args
    if args.smoke:
        args.datasets, args.splits, args.epochs, args.walks_per_node = "cora", 1, 1, 1
    if not args.out:  # the default: inductive, or inductive_smoke
        args.out = "inductive_smoke" if args.smoke else "inductive"
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    bad = [d for d in args.datasets if d not in ("cora", "citeseer")]
    if bad:
        ap.error(f"--datasets: {bad}; only cora and citeseer (Pubmed lacks ind.pubmed.allx)")
    if not 1 <= args.splits <= 10:
        ap.error("--splits must be in 1..10")
    return args


def config(args):
    """The training options: the paper's transductive settings (Sec. 4.2), every one given
    explicitly so that a change of the library's defaults does not change this bench."""
    cfg = dict(
        dim=128,
        feat_dim=128,
        walk_length=10,
        walks_per_node=args.walks_per_node,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        num_sampled=256,
        sampler="log_uniform",
        routing_iters=args.routing_iters,
        routing_rule="paper",
        routing_scale=None,
        grad_mode="exact",
        targets=(3, 4, 5, 6),
        batch_mode="random",
        normalize_features=True,
        adam="dense",
        n_jobs=args.threads,
        random_state=args.seed,
    )
    # Options newer than this bench: the authors' choice (constant lr, the same walks
    # every epoch, the 'paper' preset), whenever the estimator has them.
    known = Caps2NE().get_params()
    cfg.update(
        {
            key: value
            for key, value in (("lr_schedule", "constant"), ("walks", "fixed"), ("preset", "paper"))
            if key in known
        }
    )
    return cfg


def _norm(A):
    return float(np.linalg.norm(np.asarray(A, dtype=np.float64), axis=1).mean())


def run_split(ds, full, X_full, split, s, args):
    """Train on the graph without the split's test nodes; score every variant every epoch."""
    test = np.asarray(split["test"], dtype=np.int64)
    val = np.asarray(split["val"], dtype=np.int64)
    val_rows = slice(len(split["train"]), len(split["train"]) + val.size)  # rows in evaluated
    labelled = np.concatenate([split["train"], split["val"]]).astype(np.int64)
    evaluated = np.concatenate([labelled, test])
    sub, kept = inductive_split(full, test)
    features = ds.features[kept]
    X_sub = prepare_features(features, sub.n_nodes, normalize=True)
    cfg = config(args)
    mcfg = ModelConfig(
        cfg["routing_iters"], cfg["routing_rule"], cfg["routing_scale"], cfg["grad_mode"]
    )
    seed = derive_seed(args.seed, "infer")
    Z = args.samples
    n, k = full.n_nodes, cfg["dim"]
    deg_sub = np.diff(sub.indptr)
    cal_sub = np.flatnonzero(deg_sub > 0).astype(np.int64)  # calibration.calibration_nodes
    cal_full = kept[cal_sub]
    cal_no_val = ~np.isin(cal_full, val)  # calibration for scoring val nodes as new ones
    sub_row = np.full(n, -1, dtype=np.int64)
    sub_row[kept] = np.arange(kept.size)
    # labelled nodes that the split leaves without edges (they have edges in full)
    edgeless = labelled[deg_sub[sub_row[labelled]] == 0]
    fill = np.isin(evaluated, edgeless)
    curves = {p: [] for p in PATHS}
    timing = dict(infer=0.0, score=0.0)

    def each_epoch(epoch, result):
        W, O = result.params.W, result.params.O
        infer = common.clock()
        E_eval = capsule_embeddings(W, X_full, full, evaluated, mcfg, Z, seed)
        E_cal = capsule_embeddings(W, X_sub, sub, cal_sub, mcfg, Z, seed)
        E_cal_full = capsule_embeddings(W, X_full, full, cal_full, mcfg, Z, seed)
        cals = {m: fit_calibration(E_cal, O[cal_sub], m) for m in CALIBRATIONS}
        cals["scale-full"] = fit_calibration(E_cal_full, O[cal_sub], "scale")
        cals["diag-full"] = fit_calibration(E_cal_full, O[cal_sub], "diag")
        O_nv = O[cal_sub[cal_no_val]]
        cals_val = {m: fit_calibration(E_cal[cal_no_val], O_nv, m) for m in CALIBRATIONS}
        cals_val["scale-full"] = fit_calibration(E_cal_full[cal_no_val], O_nv, "scale")
        cals_val["diag-full"] = fit_calibration(E_cal_full[cal_no_val], O_nv, "diag")
        timing["infer"] += infer.elapsed()
        score = common.clock()
        agg = {"mean": E_eval, "sum": aggregate_samples(E_eval, Z, "sum")}
        agg.update({m: aggregate_samples(E_eval, Z, "calibrated", c) for m, c in cals.items()})
        E_val = E_eval[val_rows]
        agg_val = {"mean": E_val, "sum": aggregate_samples(E_val, Z, "sum")}
        agg_val.update(
            {m: aggregate_samples(E_val, Z, "calibrated", c) for m, c in cals_val.items()}
        )
        embs = {}
        for v in O_VARIANTS:
            emb = np.zeros((n, k), dtype=np.float32)
            emb[kept] = O
            emb[test] = agg[v][-test.size :]
            embs[f"o:{v}"] = emb
        for v in FILL_VARIANTS:
            emb = embs[f"o:{v}"].copy()
            emb[evaluated[fill]] = agg[v][fill]
            embs[f"o+fill:{v}"] = emb
        emb = np.zeros((n, k), dtype=np.float32)
        emb[evaluated] = E_eval
        embs["e:mean"] = emb
        stats = dict(
            loss=result.history[-1]["loss"],
            norm_o_train=_norm(O[sub_row[split["train"]]]),
            norm_o_cal=_norm(O[cal_sub]),
            norm_mean_test=_norm(E_eval[-test.size :]),
            norm_mean_cal=_norm(E_cal),
            scale=float(cals["scale"]["A"][0, 0]),
            scale_full=float(cals["scale-full"]["A"][0, 0]),
            norm_scale_test=_norm(agg["scale"][-test.size :]),
        )
        for path in PATHS:
            r = classify_splits(embs[path], ds.labels, [split])
            curves[path].append(
                dict(epoch=epoch, val=float(r["val"][0]), test=float(r["test"][0]), **stats)
            )
        for v in O_VARIANTS:  # val nodes embedded as the test nodes are (Algorithm 3)
            emb = embs[f"o:{v}"].copy()
            emb[val] = agg_val[v]
            r = classify_splits(emb, ds.labels, [split])
            curves[f"o:{v}"][-1]["val_infer"] = float(r["val"][0])
        timing["score"] += score.elapsed()
        print(
            f"  {ds.name} split {s} epoch {epoch}: loss {stats['loss']:.4f}; |o| "
            f"{stats['norm_o_cal']:.2f}, |mean e| test {stats['norm_mean_test']:.2f}, scale "
            f"{stats['scale']:.2f}; "
            + "; ".join(
                f"{p} {100 * curves[p][-1]['val']:.1f}/{100 * curves[p][-1]['test']:.1f}"
                + (f" (val Alg. 3 {100 * c['val_infer']:.1f})" if "val_infer" in c else "")
                for p in PATHS
                for c in [curves[p][-1]]
            ),
            flush=True,
        )

    with common.clock() as c:
        model = Caps2NE(**cfg).fit(sub, X=features, epoch_callback=each_epoch)
    seconds = c.seconds
    chosen = {}
    for path in PATHS:
        sel = select_epoch(
            [dict(val=[c["val"]], test=[c["test"]]) for c in curves[path]],
            epochs=[c["epoch"] for c in curves[path]],
        )
        e = int(sel["epochs"][0])
        chosen[path] = dict(
            epoch=e,
            val=float(sel["val"][0]),
            test=float(sel["test"][0]),
            **{
                key: val
                for key, val in next(c for c in curves[path] if c["epoch"] == e).items()
                if key.startswith(("norm", "scale", "val_infer"))
            },
        )
    deg_full = np.diff(full.indptr)
    return dict(
        split=s,
        seconds=seconds,
        train_seconds=seconds - timing["infer"] - timing["score"],
        infer_seconds=timing["infer"],
        train_nodes=int(sub.n_nodes),
        train_edges=int(sub.n_edges),
        removed_edges=int(sub.stats["removed_edges"]),
        train_graph_isolated=int(sub.stats["isolated_nodes"]),
        train_labelled_edgeless=int(np.isin(split["train"], edgeless).sum()),
        val_edgeless=int(np.isin(split["val"], edgeless).sum()),
        test_isolated_in_full_graph=int(np.count_nonzero(deg_full[test] == 0)),
        pairs_per_s=float(np.mean([h["pairs_per_s"] for h in model.history_])),
        chosen=chosen,
    )


def run_dataset(name, args):
    ds = load_dataset(name, args.data_dir or default_data_dir())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)  # self loops dropped, isolated nodes
        full = from_scipy(ds.adj, ds.node_ids)
    X_full = prepare_features(ds.features, full.n_nodes, normalize=True)
    splits = []
    for s in range(args.splits):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)  # isolated test nodes: own features
            splits.append(run_split(ds, full, X_full, ds.splits[s], s, args))
        c = splits[-1]["chosen"]
        print(
            f"{name} split {s}: "
            + "; ".join(f"{p} test {100 * c[p]['test']:.2f} (epoch {c[p]['epoch']})" for p in PATHS)
            + f"; {splits[-1]['seconds']:.0f}s",
            flush=True,
        )
    summary = {}
    for path in PATHS:
        tests = np.array([sp["chosen"][path]["test"] for sp in splits])
        vals = np.array([sp["chosen"][path]["val"] for sp in splits])
        summary[path] = dict(
            test_mean=float(tests.mean()),
            test_std=float(tests.std()),
            val_mean=float(vals.mean()),
            epochs=[sp["chosen"][path]["epoch"] for sp in splits],
        )
        if path.startswith("o:"):
            summary[path]["val_infer_mean"] = float(
                np.mean([sp["chosen"][path]["val_infer"] for sp in splits])
            )
    scales = default_scales(splits)
    for sp in splits:  # the result file keeps what markdown() shows
        sp["chosen"] = stored_choices(sp["chosen"])
    cfg = config(args)
    return dict(
        dataset=name,
        nodes=full.n_nodes,
        edges=full.n_edges // 2,
        feature_dim=int(ds.features.shape[1]),
        paper=PAPER[name],
        config={key: (list(v) if isinstance(v, tuple) else v) for key, v in cfg.items()},
        summary=stored_summary(summary),
        scales=scales,
        splits=splits,
    )


SCALE_KEYS = (
    "norm_o_train",
    "norm_o_cal",
    "norm_mean_cal",
    "norm_mean_test",
    "scale",
    "scale_full",
    "norm_scale_test",
)


def default_scales(splits):
    """The default path's norms and scales at its chosen epochs, mean over the splits."""
    return {
        key: float(np.mean([sp["chosen"][DEFAULT_PATH][key] for sp in splits]))
        for key in SCALE_KEYS
    }


def stored_choices(chosen):
    """A split's choices as the result file keeps them: val, val_infer and test accuracy
    of the o-path variants, any of which the defaults may name (every path's mean and
    std over the splits are in the summary, and the default's mean norms in "scales";
    the o-path variants share their epoch, so their norms are the same)."""
    keys = ("val", "val_infer", "test")
    return {p: {k: c[k] for k in keys} for p, c in chosen.items() if p.startswith("o:")}


def stored_summary(summary):
    """The summary as the result file keeps it: the chosen epochs of the o-path only
    (markdown() shows the default's)."""
    return {
        p: {k: v for k, v in s.items() if k != "epochs" or p.startswith("o:")}
        for p, s in summary.items()
    }


def _pct(summary):
    return f"{100 * summary['test_mean']:.2f} ± {100 * summary['test_std']:.2f}"


def markdown(payload):
    a = payload["args"]
    default = payload.get("default_path", DEFAULT_PATH)
    rows = []
    for r in payload["results"]:
        o, e = r["summary"][default], r["summary"]["e:mean"]
        rows.append(
            [
                r["dataset"],
                f"{r['paper']:.2f}",
                _pct(o),
                f"{100 * o['test_mean'] - r['paper']:+.2f}",
                _pct(r["summary"]["o:mean"]),
                _pct(e),
                len(r["splits"]),
                ", ".join(map(str, o["epochs"])),
                f"{sum(sp['seconds'] for sp in r['splits']):.0f}",
            ]
        )
    rows.append(
        ["pubmed", f"{PAPER['pubmed']:.2f}", "not run", "", "not run", "not run", 0, "", ""]
    )
    table = report.markdown_table(
        [
            "dataset",
            "paper",
            f"ours, o-path, infer's default ({default[2:]})",
            "vs paper",
            "o-path, mean (paper's Alg. 3)",
            "e-path (mean)",
            "splits",
            "epochs chosen (default)",
            "seconds",
        ],
        rows,
    )
    names = [r["dataset"] for r in payload["results"]]
    variants = []
    for path in [p for p in PATHS if p in payload["results"][0]["summary"]]:
        variants.append(
            [path + (" (default)" if path == default else "")]
            + [_pct(r["summary"][path]) for r in payload["results"]]
            + [f"{100 * r['summary'][path]['val_mean']:.2f}" for r in payload["results"]]
            + [
                f"{100 * r['summary'][path]['val_infer_mean']:.2f}"
                if "val_infer_mean" in r["summary"][path]
                else ""
                for r in payload["results"]
            ]
        )
    variant_table = report.markdown_table(
        ["variant"]
        + [f"{d} test" for d in names]
        + [f"{d} val" for d in names]
        + [f"{d} val, Alg. 3" for d in names],
        variants,
    )
    scale_rows = []
    for r in payload["results"]:
        m = r["scales"]
        scale_rows.append(
            [
                r["dataset"],
                f"{m['norm_o_train']:.2f}",
                f"{m['norm_o_cal']:.2f}",
                f"{m['norm_mean_cal']:.3g}",
                f"{m['norm_mean_test']:.3g}",
                f"{m['scale']:.2f}",
                f"{m['scale_full']:.2f}",
                f"{m['norm_scale_test']:.2f}",
            ]
        )
    scale_table = report.markdown_table(
        [
            "dataset",
            "mean |o_v|, labelled train nodes",
            "mean |o_v|, calibration nodes",
            "mean |mean e|, calibration nodes",
            "mean |mean e|, test nodes",
            "scale s (training graph)",
            "scale s (full graph)",
            "mean |s mean e|, test nodes",
        ],
        scale_rows,
    )
    detail = []
    for r in payload["results"]:
        sps = r["splits"]

        def span(values, fmt="{}"):
            lo, hi = fmt.format(min(values)), fmt.format(max(values))
            return lo if lo == hi else f"{lo}-{hi}"

        detail.append(
            [
                r["dataset"],
                len(sps),
                span([sp["train_nodes"] for sp in sps]),
                span([sp["removed_edges"] for sp in sps]),
                span([sp["train_graph_isolated"] for sp in sps]),
                span([sp["train_labelled_edgeless"] for sp in sps]),
                span([sp["val_edgeless"] for sp in sps]),
                span([sp["test_isolated_in_full_graph"] for sp in sps]),
                span([100 * sp["chosen"][default]["val"] for sp in sps], "{:.2f}"),
                span([100 * sp["chosen"][default]["test"] for sp in sps], "{:.2f}"),
                span([sp["train_seconds"] for sp in sps], "{:.0f}"),
                span([sp["infer_seconds"] for sp in sps], "{:.1f}"),
                span([sp["pairs_per_s"] for sp in sps], "{:,.0f}"),
            ]
        )
    detail_table = report.markdown_table(
        [
            "dataset",
            "splits",
            "training nodes",
            "stored edges removed",
            "isolated after removal",
            "labelled train nodes without edges",
            "val nodes without edges",
            "test nodes without edges",
            "default val",
            "default test",
            "train s",
            "infer s (all epochs)",
            "pairs/s",
        ],
        detail,
    )
    smoke = (
        "\n**Smoke configuration**: a pipeline check, not a result; the accuracies mean nothing.\n"
        if a["smoke"]
        else ""
    )
    return f"""# Inductive setting (paper Sec. 4.3, Table 3)

`{payload["command"]}`  ({payload["wall_seconds"]:.0f} s wall, load average \
{payload["load_before"]} before, {payload["load_after"]} after)
{smoke}
{table}

Test accuracy (%), mean ± std over the splits, each split at its epoch of best validation
accuracy; Z = {a["samples"]} contexts per test node. Pubmed's 78.98 needs its bag-of-words
features (`ind.pubmed.allx`), which our data folder lacks; it is not run and nothing is
substituted.

{report.doc_pointer("`bench/inductive.py`: the inductive setting")}
Every aggregation, scored on the same models (one per split) and contexts, each with its
own epoch choice on val. "val": the val nodes as the variant's classifier sees them (o_v on
the o-path, so every o-path variant has the same); "val, Alg. 3": at that epoch, the val
nodes embedded as the test nodes are (Algorithm 3 on the full graph, the variant's
aggregation, a calibration fitted without the val nodes), the column `infer`'s defaults
are chosen by (best mean over the data sets, the simplest variant within 0.1 point;
docs/inductive.md):

{variant_table}

Scales at the chosen epoch of the default (mean over splits):

{scale_table}

Settings (the paper's transductive ones, Sec. 4.2, all passed explicitly): k = 128, q = 10,
T = {a["walks_per_node"]}, m = {a["routing_iters"]} (rule 'paper', exact gradients), |V'| = 256
(log-uniform), batch {a["batch_size"]} walks x targets at positions 3-6, dense Adam, constant lr
{a["lr"]:g}, {a["epochs"]} epoch(s), fixed row-normalised bag-of-words features, seed
{a["seed"]}, {a["threads"]} thread(s).  Each split trains its own model on the graph without
its 1,000 test nodes and their edges.  Test nodes without any edge in the full graph
(Citeseer) are encoded from their own features (`isolated='self'`).

Per split, the range (min-max) over the splits (every split in the result file):

{detail_table}

Machine:

{report.machine_markdown(payload["machine"])}"""


def load_average():
    try:
        import os

        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def update_main(args, argv=None):
    """The update study (``--update``): every dataset, scenario and seed, written after
    each case (a cut-short run keeps those)."""
    import update_study

    command = "python bench/inductive.py " + " ".join(
        map(shlex.quote, sys.argv[1:] if argv is None else argv)
    )
    rows = []
    with common.threads(args.threads):
        for name in args.datasets:
            for scenario, fraction in args.scenarios:
                for seed in range(args.seeds):
                    rows.append(update_study.run_case(name, scenario, fraction, seed, args))
                    print(f"{name} {scenario} {fraction} seed {seed}: {rows[-1]}", file=sys.stderr)
                    payload = dict(
                        command=command.strip(),
                        args=vars(args),
                        rows=rows,  # the table is made from them (update_study.summary)
                        machine=common.machine_info(),
                    )
                    md = update_study.markdown(payload)
                    common.write_results(args.out, payload, md)
    print(md)


def main(argv=None):
    args = parse_args(argv)
    if args.update:
        return update_main(args, argv)
    if args.budgets:
        import update_study

        return update_study.budgets_main(args)
    if args.render:
        import json

        with open(args.render) as f:
            payload = json.load(f)
        payload["default_path"] = DEFAULT_PATH
        md = markdown(payload)
        for path in common.write_results(args.out, payload, md):
            print(f"wrote {path}", file=sys.stderr)
        return
    command = "python bench/inductive.py " + " ".join(
        map(shlex.quote, sys.argv[1:] if argv is None else argv)
    )
    load_before = load_average()
    run = common.clock()
    results = []
    for name in args.datasets:  # written after each data set: a cut-short run keeps those
        results.append(run_dataset(name, args))
        payload = dict(
            command=command.strip(),
            args=vars(args),
            default_path=DEFAULT_PATH,
            wall_seconds=run.elapsed(),
            load_before=load_before,
            load_after=load_average(),
            paper=PAPER,
            results=results,
            machine=common.machine_info(),
        )
        md = markdown(payload)
        for path in common.write_results(args.out, payload, md):
            print(f"wrote {path}", file=sys.stderr)
    print(md)


if __name__ == "__main__":
    main()
