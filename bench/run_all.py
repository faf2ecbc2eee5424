"""The performance suite in one command, timed: every figure of perf.md.

    python bench/run_all.py              # the parts below; see suite.md for a past run
    python bench/run_all.py --dry-run    # list the commands only
    python bench/run_all.py --only perf,walks

Runs, one after the other and each in its own process (so every script starts
cold, as a user's command does):

    perf.py --ours-lazy --reps 9   training throughput against the PyTorch peer,
                                   the GEMM ceiling, what bounds each ratio
    walks_vs_pecanpy.py            walk generation against PecanPy
    scale.py                       a 1M-node graph against BlogCatalog's rate
    profile_fused.py               where a step of the compiled chunk spends its time
    vs_deepwalk.py --graphs ...    CLI defaults against DeepWalk (gensim) on three graphs

then ``perf.py --report-only``, so that perf.md's targets table holds this run's
walk results too (and the last recorded time-to-accuracy run, time_to_accuracy.json).
Writes docs/results/suite.json + .md: each script's wall time, exit status and the
total against the suite's 15-minute budget.  A script that fails is reported and the
others still run; the exit status is then 1.  The reproduction scripts (reproduce.py,
inductive.py) are long accuracy runs and not part of it.
"""

import os
import subprocess
import sys

import common
import report

BUDGET_S = report.TARGETS["suite_s"]
SUITE = [
    ("perf", ["perf.py", "--ours-lazy", "--reps", "9"]),
    ("walks", ["walks_vs_pecanpy.py"]),
    ("scale", ["scale.py"]),
    ("profile_fused", ["profile_fused.py"]),
    ("perf_report", ["perf.py", "--report-only"]),
    # the CLI defaults against DeepWalk on a quick subset of the panel (the
    # whole panel, hours, is `python bench/vs_deepwalk.py`); needs gensim
    (
        "vs_deepwalk",
        [
            "vs_deepwalk.py",
            "--graphs",
            "syn-1k-mu0.3,syn-3k-mu0.7,cora",
            "--out",
            "vs_deepwalk_suite",
            "--no-fast-peer",
        ],
    ),
]


def main(argv=None):
    ap = common.parser(__doc__, out="suite")
    ap.add_argument(
        "--only", default=None, help="comma-separated subset of " + ",".join(n for n, _ in SUITE)
    )
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args(argv)
    names = [n for n, _ in SUITE]
    chosen = names if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    bad = [n for n in chosen if n not in names]
    if bad:
        ap.error(f"unknown part(s) {bad}; choose from {names}")
    plan = [
        (n, [sys.executable, str(common.BENCH / cmd[0])] + cmd[1:])
        for n, cmd in SUITE
        if n in chosen
    ]
    if args.dry_run:
        for name, cmd in plan:
            print(f"{name}: python bench/{' '.join(cmd[1:])[len(str(common.BENCH)) + 1 :]}")
        return 0
    load_before = os.getloadavg()
    steps = []
    with common.clock() as whole:
        for name, cmd in plan:
            shown = "python bench/" + os.path.basename(cmd[1]) + " " + " ".join(cmd[2:])
            print(f"== {name}: {shown.strip()}", flush=True)
            with common.clock() as c:
                proc = subprocess.run(cmd, cwd=common.BENCH.parent)
            steps.append(
                dict(
                    name=name, command=shown.strip(), seconds=c.seconds, returncode=proc.returncode
                )
            )
            print(f"== {name}: exit {proc.returncode} after {c.seconds:.0f} s", flush=True)
    total = whole.seconds
    payload = dict(
        command="python bench/run_all.py " + " ".join(sys.argv[1:] if argv is None else argv),
        machine=common.machine_info(),
        steps=steps,
        seconds=total,
        budget_seconds=BUDGET_S,
        within_budget=total <= BUDGET_S,
        load_avg_before=load_before,
        load_avg_after=os.getloadavg(),
    )
    md = render(payload)
    print(md)
    common.write_results(args.out, payload, md)
    return 0 if all(s["returncode"] == 0 for s in steps) else 1


def render(p):
    rows = [
        [
            s["name"],
            f"`{s['command']}`",
            f"{s['seconds']:.0f}",
            "ok" if s["returncode"] == 0 else f"**exit {s['returncode']}**",
        ]
        for s in p["steps"]
    ]
    rows.append(
        [
            "**total**",
            "",
            f"**{p['seconds']:.0f}**",
            f"{'within' if p['within_budget'] else '**over**'} the "
            f"{p['budget_seconds'] // 60:.0f}-minute budget",
        ]
    )
    return "\n".join(
        [
            "# The performance suite, end to end\n",
            f"`{p['command'].strip()}` (load average {p['load_avg_before'][0]:.1f} before, "
            f"{p['load_avg_after'][0]:.1f} after)\n",
            report.machine_markdown(p["machine"]),
            report.markdown_table(["part", "command", "seconds", "status"], rows) + "\n",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
