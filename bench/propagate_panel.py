"""Issue 32's measurements: spectral propagation of the trained o_v (``--propagate``) and
the label-free stop rule (``training/budget.py``), graph by graph and seed by seed.

    python bench/propagate_panel.py --graphs cora-bundled,syn-1k-mu0.6 --seeds 0,1,2
    python bench/propagate_panel.py --smoke          # tiny, seconds

For every (graph, seed) one run of the defaults (``--propagate none --stop none``: the
full budget of the 'converge' preset) trains the graph as it is (weights kept) and,
after every epoch, records for its o_v:

* ``score``: the graph's classification protocol (bench/vs_deepwalk.py's
  ``score_embedding``; for multi-label graphs micro-F1 at 50% training nodes, over
  ``--shuffles``) -- read by nothing but this report, to judge the rules;
* ``score_prop``: the same for the propagated embeddings (model/propagation.py);
* the label-free measures the rules may use: ``drift`` |O_t - O_{t-1}| / |O_t| (Frobenius),
  and propagation.edge_measures: the link-prediction AUC of held-out edges (``auc`` for the o_v,
  ``auc_prop`` propagated over the graph without those edges, ``auc_cos`` with cosine
  scores: how much the norms of the o_v carry).

The table gives, per graph, mean and spread (sample standard deviation over seeds) of
the last epoch's score with and without propagation, the gain, and the label-free
figures; a gap smaller than the spread is a tie.  Writes docs/results/<out>.json + .md.
"""

import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package

import numpy as np  # noqa: E402

import common  # noqa: E402
import vs_deepwalk  # noqa: E402
from caps2ne_np.model import propagation  # noqa: E402
from caps2ne_np.training import budget  # noqa: E402
from caps2ne_np.training.config import TrainConfig  # noqa: E402
from caps2ne_np.training.train import fit  # noqa: E402

PANEL = ["cora-bundled", "citeseer", "ppi", "pos", "syn-1k-mu0.6", "syn-3k-mu0.7"]


def run_one(g, seed, args):
    """One run of the defaults on PanelGraph ``g``: a list of per-epoch records."""
    adj, weights, A = common.panel_adjacency(g)
    held = propagation.holdout(A, seed=seed)
    records, prev = [], [None]
    cfg = TrainConfig(
        threads=args.threads, seed=seed, propagate="none", stop="none", epochs=args.epochs
    )
    if args.smoke:
        cfg = TrainConfig(
            threads=args.threads,
            seed=seed,
            propagate="none",
            stop="none",
            epochs=2,
            walks_per_node=2,
        )

    def score(emb):
        return vs_deepwalk.score_embedding(g, emb, shuffles=args.shuffles, fractions=(0.5,))[
            "headline"
        ]

    def on_epoch(epoch, result):
        O = np.array(result.params.O, dtype=np.float64)
        t0 = time.perf_counter()
        last = epoch == result.config.epochs
        rec = dict(
            epoch=epoch,
            seconds=result.history[-1]["seconds"],
            loss=result.history[-1]["loss"],
            drift=None if prev[0] is None else budget.drift(prev[0], O),
            score=score(O.astype(np.float32)),
            score_prop=None,
            auc=None,
            auc_prop=None,
            auc_cos=None,
        )
        rec.update(propagation.edge_measures(held, O))
        if last or not args.lean:  # --lean: the propagated score of the last epoch only
            p = propagation.propagate(A, O)
            rec.update(prop_seconds=p.seconds, score_prop=score(p.E))
        rec["measure_seconds"] = time.perf_counter() - t0
        prev[0] = O
        records.append(rec)
        shown = {k: round(v, 4) for k, v in rec.items() if isinstance(v, float)}
        print(f"  {g.name} seed {seed} epoch {epoch}: {shown}", file=sys.stderr, flush=True)

    fit(adj.indptr, adj.indices, weights, cfg, epoch_callback=on_epoch)
    return records


def spread(xs):
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def summarise(name, runs):
    """Per graph: mean and spread of the last epoch's figures over seeds."""
    last = [r[-1] for r in runs]
    out = dict(graph=name, seeds=len(runs), epochs=len(runs[0]))
    for key in ("score", "score_prop", "auc", "auc_prop", "auc_cos"):
        xs = [r[key] for r in last]
        out[key] = statistics.mean(xs)
        out[key + "_sd"] = spread(xs)
    gains = [r["score_prop"] - r["score"] for r in last]
    out["gain"], out["gain_sd"] = statistics.mean(gains), spread(gains)
    dauc = [r["auc_prop"] - r["auc"] for r in last]
    out["dauc"], out["dauc_sd"] = statistics.mean(dauc), spread(dauc)
    return out


THRESHOLDS = (0.1, 0.2, 0.3, 0.4)


def stop_epoch(run, threshold):
    """The epoch --stop auto ends ``run`` at with drift threshold ``threshold``: the first
    epoch >= 2 whose drift is below it, else the last."""
    for r in run[1:]:
        if r["drift"] is not None and r["drift"] < threshold:
            return r["epoch"]
    return run[-1]["epoch"]


def stop_rows(result):
    """[threshold, graph, mean stop epoch, propagated score there, full budget's
    propagated score, full budget's score] of ``stop_table``, for the JSON."""
    rows = []
    for t in THRESHOLDS:
        for name, runs in result["runs"].items():
            stops = [stop_epoch(r, t) for r in runs]
            at = [r[e - 1]["score_prop"] for r, e in zip(runs, stops)]
            if any(a is None for a in at):
                continue
            rows.append(
                [
                    t,
                    name,
                    statistics.mean(stops),
                    statistics.mean(at),
                    statistics.mean(r[-1]["score_prop"] for r in runs),
                    statistics.mean(r[-1]["score"] for r in runs),
                ]
            )
    return rows


def stop_table(result):
    """Per threshold and graph: where the drift rule stops (mean epoch over seeds), the
    written score there with propagation against the full budget's with and without it."""
    lines = [
        "",
        "The stop rule, replayed on the runs above (budget.StopRule: stop after the first "
        "epoch >= 2 whose drift |O_t - O_t-1| / |O_t| is below the threshold); `prop@stop` "
        "is the propagated score at that epoch (seeds whose run lacks it are left out), "
        "against the full budget propagated (`full prop`) and as trained (`full`); "
        "`epochs` is the mean epochs trained over the budget's.",
        "",
        "| threshold | graph | epochs | prop@stop | full prop | full | prop@stop - full prop "
        "| prop@stop - full |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in THRESHOLDS:
        for name, runs in result["runs"].items():
            stops = [stop_epoch(r, t) for r in runs]
            at = [r[e - 1]["score_prop"] for r, e in zip(runs, stops)]
            pairs = [(a, r[-1]["score_prop"]) for a, r in zip(at, runs) if a is not None]
            full = statistics.mean(r[-1]["score"] for r in runs)
            if not pairs:
                continue
            sp_, fp = statistics.mean(a for a, _ in pairs), statistics.mean(b for _, b in pairs)
            lines.append(
                f"| {t:g} | {name} | {statistics.mean(stops):.1f} / {len(runs[0])} | "
                f"{sp_:.2f} | {fp:.2f} | {full:.2f} | {sp_ - fp:+.2f} | {sp_ - full:+.2f} |"
            )
    return lines


def verdict(s):
    """'gain' / 'loss' when the mean gain exceeds its spread over seeds, else 'tie'."""
    if s["seeds"] < 2:
        return "one seed"
    if abs(s["gain"]) <= s["gain_sd"]:
        return "tie"
    return "gain" if s["gain"] > 0 else "loss"


def render(result):
    lines = [
        "# Spectral propagation of the trained o_v, and the label-free measures (issue 32)",
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    for part in result.get("parts", []):
        lines.append(f"- `{part['command']}` measured: {', '.join(part['graphs'])}")
    lines += [
        "",
        "Defaults of the 'converge' preset with `--propagate none --stop none` (the full "
        "budget), one run per seed; after the last epoch the o_v are scored as they are "
        "and propagated (ProNE's filter, order 10, mu 0.2, theta 0.5, then the SVD). "
        "Score: the graph's protocol (accuracy; multi-label: micro-F1 at 50%, "
        f"{result['shuffles']} shuffles). AUC: link prediction of held-out edges "
        "(propagation.holdout) by dot products, the o_v against the propagated rows (the "
        "filter without those edges); cos: the o_v by cosine. Mean +- sample sd over seeds; "
        "a gain within its spread is a tie.",
        "",
        "| graph | seeds | epochs | score | propagated | gain | verdict | AUC | AUC propagated "
        "| dAUC | AUC cos |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in result["summary"]:
        lines.append(
            f"| {s['graph']} | {s['seeds']} | {s['epochs']} | {s['score']:.2f} +- "
            f"{s['score_sd']:.2f} | {s['score_prop']:.2f} +- {s['score_prop_sd']:.2f} | "
            f"{s['gain']:+.2f} +- {s['gain_sd']:.2f} | {verdict(s)} | {s['auc']:.4f} | "
            f"{s['auc_prop']:.4f} | {s['dauc']:+.4f} +- {s['dauc_sd']:.4f} | "
            f"{s['auc_cos']:.4f} |"
        )
    lines += stop_table(result)
    lines += ["", "Per epoch (mean over seeds):", ""]
    lines += ["| graph | epoch | score | propagated | AUC | AUC propagated | drift |"]
    lines += ["| --- | --- | --- | --- | --- | --- | --- |"]
    for name, runs in result["runs"].items():
        for e in range(min(len(r) for r in runs)):
            recs = [r[e] for r in runs]

            def m(key, recs=recs):
                xs = [r[key] for r in recs if r.get(key) is not None]
                return statistics.mean(xs) if xs else float("nan")

            lines.append(
                f"| {name} | {e + 1} | {m('score'):.2f} | {m('score_prop'):.2f} | "
                f"{m('auc'):.4f} | {m('auc_prop'):.4f} | {m('drift'):.4f} |"
            )
    return "\n".join(lines) + "\n"


def combine(args):
    """One report from several result files: each graph's runs and summary as measured,
    the commands listed."""
    merged = dict(command="", shuffles=None, runs={}, summary=[], parts=[])
    commands = []
    for path in args.combine:
        part = json.loads(open(path).read())
        part["command"] = re.sub(r"--out \S*/", "--out ", part["command"])  # file names only
        commands.append(part["command"])
        merged["shuffles"] = part["shuffles"]
        merged["parts"].append(dict(command=part["command"], graphs=list(part["runs"])))
        fixed = re.search(r"--epochs (\d+)", part["command"])
        suffix = f" ({fixed.group(1)} epochs)" if fixed else ""  # not the preset's budget
        for name, runs in part["runs"].items():
            merged["runs"][name + suffix] = runs
        merged["summary"] += [dict(s, graph=s["graph"] + suffix) for s in part["summary"]]
    merged["command"] = "`; `".join(commands)
    full = render(merged)
    if args.runs_out:  # every epoch of every run: docs/results (docs/results keeps summaries)
        common.write_json(Path(f"{args.runs_out}.json"), merged)
        common.write_text_atomic(Path(f"{args.runs_out}.md"), full)
    summary = dict(merged, runs=None, stop=stop_rows(merged))
    stems = " ".join(Path(p).stem + ".json" for p in args.combine)
    how = (
        f"\nCombined by `python bench/propagate_panel.py --combine {stems} --out {args.out}"
        + (f" --runs-out {args.runs_out}`" if args.runs_out else "`")
        + " (each command above wrote one of them).\n"
    )
    brief = (
        full.split("\nPer epoch")[0]
        + how
        + (f"\nEvery epoch of every run: {args.runs_out}.md and .json.\n" if args.runs_out else "")
    )
    common.write_results(args.out, summary, brief)
    print(brief)


def main(argv=None):
    ap = common.parser(
        __doc__, threads=0, smoke="two small graphs, one seed", out="propagate_panel"
    )
    ap.add_argument("--graphs", default=",".join(PANEL))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--shuffles", type=int, default=2)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument(
        "--epochs", type=int, default=None, help="a fixed budget (default: the preset's)"
    )
    ap.add_argument(
        "--lean",
        action="store_true",
        help="score the propagated embeddings after the last epoch only",
    )
    ap.add_argument(
        "--runs-out",
        default=None,
        help="--combine: also write every epoch of every run to this stem (.json, .md)",
    )
    ap.add_argument(
        "--combine",
        nargs="+",
        default=None,
        help="only render: merge these result files (runs measured apart) into --out",
    )
    args = ap.parse_args(argv)
    if args.combine:
        return combine(args)
    names = ["syn-300-mu0.3"] if args.smoke else args.graphs.split(",")
    seeds = [0, 1] if args.smoke else [int(s) for s in args.seeds.split(",")]
    result = dict(
        command="python bench/propagate_panel.py " + " ".join(argv or sys.argv[1:]),
        shuffles=args.shuffles,
        runs={},
        summary=[],
        machine=common.machine_info() if hasattr(common, "machine_info") else {},
    )
    for name in names:
        try:
            g = vs_deepwalk.panel_entry(name, args.data_dir)
        except Exception as err:  # a dataset whose files are missing
            print(f"skipping {name}: {err}", file=sys.stderr)
            continue
        runs = [run_one(g, seed, args) for seed in seeds]
        result["runs"][name] = runs
        result["summary"].append(summarise(name, runs))
        common.write_results(args.out, result, render(result))
    print(render(result))


if __name__ == "__main__":
    main()
