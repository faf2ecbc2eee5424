"""The measure behind the stop rule's first part (caps2ne_np/training/budget.py,
``structure``): how well a low-rank factorisation of each panel graph predicts held-out
edges, and whether the graphs it calls clear stop gaining after their first epoch.

    python bench/stop_structure.py --runs docs/results/propagate_panel_runs.json \
        docs/results/propagate_panel_more.json --out stop_structure
    python bench/stop_structure.py --smoke

For every graph and seed: ``budget.structure`` at ranks 32, 64 and 128 (``--ranks``;
the rule uses ``budget.STOP_RANK``) and its seconds on one BLAS thread.  ``--runs``:
result files of bench/propagate_panel.py (every epoch of the defaults without the stop
rule, scored with labels the rule never reads); from them the written (propagated)
score after epoch 1, at the drift part's stop (the first epoch t >= 2 with drift below
``budget.STOP_DRIFT``) and after the full budget, mean over the seeds run.  The table
says for each graph what the rule decides at ``budget.STOP_STRUCTURE`` and what that
decision cost or gained against the drift part alone.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package

import common  # noqa: E402
import report  # noqa: E402
import vs_deepwalk  # noqa: E402
from caps2ne_np.training import budget  # noqa: E402

GRAPHS = [
    "cora",
    "citeseer",
    "pubmed",
    "ppi",
    "pos",
    "blogcatalog",
    "syn-1k-mu0.3",
    "syn-1k-mu0.6",
    "syn-3k-mu0.5",
    "syn-3k-mu0.7",
    "syn-10k-mu0.6",
    "syn-30k-mu0.6",
]
# bench/propagate_panel.py names the bundled Cora "cora-bundled"; the rows here "cora"
RUN_NAMES = {"cora-bundled": "cora"}


def measure(name, seeds, ranks):
    """{rank: [(auc, seconds) per seed]} of ``budget.structure`` on panel graph ``name``."""
    A = common.panel_adjacency(vs_deepwalk.panel_entry(name))[2]
    out = {}
    for rank in ranks:
        old, budget.STOP_RANK = budget.STOP_RANK, rank
        try:
            out[rank] = []
            for seed in seeds:
                t0 = time.perf_counter()
                value = budget.structure(A, seed)
                out[rank].append((value, time.perf_counter() - t0))
        finally:
            budget.STOP_RANK = old
    return A.shape[0], out


def epochs_of(paths):
    """{graph: [per-seed list of epoch records]} from bench/propagate_panel.py's files."""
    runs = {}
    for path in paths:
        for name, seed_runs in json.loads(Path(path).read_text())["runs"].items():
            if "(" in name:  # a variant run ("pos (4 epochs)"): not the defaults
                continue
            runs.setdefault(RUN_NAMES.get(name, name), []).extend(seed_runs)
    return runs


def written_scores(seed_runs):
    """Mean over seeds of the propagated score after epoch 1, at the drift part's stop and
    after the last epoch, with the epochs trained."""

    def at(records, epoch):
        return next(r for r in records if r["epoch"] == epoch)["score_prop"]

    first, drift, full, stops, lasts = [], [], [], [], []
    for records in seed_runs:
        last = records[-1]["epoch"]
        stop = next(
            (
                r["epoch"]
                for r in records
                if r["epoch"] >= 2 and r["drift"] is not None and r["drift"] < budget.STOP_DRIFT
            ),
            last,
        )
        first.append(at(records, 1))
        drift.append(at(records, stop))
        full.append(at(records, last))
        stops.append(stop)
        lasts.append(last)
    return dict(
        seeds=len(seed_runs),
        epoch1=statistics.mean(first),
        drift_stop=statistics.mean(drift),
        drift_epochs=statistics.mean(stops),
        full=statistics.mean(full),
        full_epochs=statistics.mean(lasts),
    )


def render(rows, args, ranks):
    head = (
        ["graph", "N"]
        + [f"rank {r}: mean (min-max)" for r in ranks]
        + [f"s at rank {budget.STOP_RANK} (median)", "decision"]
    )
    lines = [
        "# The stop rule's first part: the graph's own structure (budget.structure)",
        "",
        f"`{common.command()}`",
        "",
        "The link-prediction AUC of held-out edges (5%, at most 2,000, and as many non-edges) "
        "by ProNE's first stage (a rank-r factorisation) of the graph without them, per seed "
        f"{args.seeds}; no label is read. The rule: at least {budget.STOP_STRUCTURE:g} at rank "
        f"{budget.STOP_RANK} ends the run after its first epoch; below, the drift part "
        f"(an epoch moving the o_v less than {budget.STOP_DRIFT:g} of their norm) ends it.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    for row in rows:
        cells = [row["graph"], f"{row['n']:,}"]
        for r in ranks:
            vals = [v for v, _ in row["structure"][str(r)]]
            if any(v is None for v in vals):  # rank above N / 4
                cells.append("-")
                continue
            cells.append(f"{statistics.mean(vals):.3f} ({min(vals):.3f}-{max(vals):.3f})")
        secs = [s for _, s in row["structure"][str(budget.STOP_RANK)]]
        cells += [f"{statistics.median(secs):.2f}", row["decision"]]
        lines.append("| " + " | ".join(cells) + " |")
    scored = [r for r in rows if r.get("written")]
    if scored:
        lines += [
            "",
            "The written (propagated) score of the defaults without the stop rule, per epoch "
            "(bench/propagate_panel.py's runs, mean over their seeds): after epoch 1, where "
            "the drift part alone stops, and after the full budget; the rule's result is the "
            "first when it decides one epoch, the second otherwise.",
            "",
            "| graph | seeds | decision | epoch 1 | drift part alone (epochs) | full budget "
            "(epochs) | the rule against the full budget | epochs: rule / full |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in scored:
            w = row["written"]
            one = row["decision"] == "one epoch"
            rule = w["epoch1"] if one else w["drift_stop"]
            epochs = 1 if one else w["drift_epochs"]
            lines.append(
                f"| {row['graph']} | {w['seeds']} | {row['decision']} | {w['epoch1']:.2f} | "
                f"{w['drift_stop']:.2f} ({w['drift_epochs']:g}) | {w['full']:.2f} "
                f"({w['full_epochs']:g}) | {rule - w['full']:+.2f} | {epochs:g} / "
                f"{w['full_epochs']:g} |"
            )
    lines += ["", report.machine_markdown(common.machine_info()), ""]
    return "\n".join(lines)


def main(argv=None):
    ap = common.parser(__doc__, smoke="one small graph, one seed", out="stop_structure")
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--ranks", default="32,64,128")
    ap.add_argument(
        "--runs", nargs="*", default=[], help="bench/propagate_panel.py result files (.json)"
    )
    args = ap.parse_args(argv)
    graphs = ["syn-300-mu0.3"] if args.smoke else args.graphs.split(",")
    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    ranks = [budget.STOP_RANK] if args.smoke else [int(r) for r in args.ranks.split(",")]
    if budget.STOP_RANK not in ranks:
        ranks.append(budget.STOP_RANK)
    runs = epochs_of(args.runs)
    rows = []
    for name in graphs:
        try:
            n, by_rank = measure(name, seeds, ranks)
        except Exception as err:  # a data set not in the cache: say so, go on
            print(f"{name}: skipped ({err})", file=sys.stderr, flush=True)
            continue
        values = [v for v, _ in by_rank[budget.STOP_RANK]]
        if any(v is None for v in values):
            decision = "too small to tell"
        else:  # per seed: the rule decides from the run's own seed
            ones = sum(v >= budget.STOP_STRUCTURE for v in values)
            decision = {len(values): "one epoch", 0: "drift"}.get(
                ones, f"one epoch on {ones} of {len(values)} seeds"
            )
        row = dict(graph=name, n=n, structure={str(r): v for r, v in by_rank.items()})
        row["decision"] = decision
        if name in runs:
            row["written"] = written_scores(runs[name])
        rows.append(row)
        shown = {
            r: [v if v is None else round(v, 3) for v, _ in vals] for r, vals in by_rank.items()
        }
        print(f"{name}: {shown} -> {decision}", file=sys.stderr, flush=True)
    payload = common.payload(
        args,
        rows,
        stop_structure=budget.STOP_STRUCTURE,
        stop_rank=budget.STOP_RANK,
        stop_drift=budget.STOP_DRIFT,
    )
    md = render(rows, args, ranks)
    common.write_results(args.out, payload, md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
