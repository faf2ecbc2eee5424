"""The compiled step (caps2ne_np/training/fused.py) against the step before it, in one run.

perf.py's configs f and g as ``train.fit`` runs them: the bundled Cora edge list
without features, the featureless defaults (the 'converge' preset: lazy Adam, the
unigram sampler, d = k = 128, q = 10, every position a target), one epoch of
N T = 43,328 walks, with B = 16 walks (f, 160 pairs per step, the default) and
B = 128 (g, 1,280 pairs per step); sync at 1 and 2 threads, and ``parallel='async'``
at 2 threads.  Each measurement is one process, run from a checkout (``--before``: a
worktree of the commit before the change, e.g. ``git worktree add ../before <commit>``;
the current checkout is "after"), and reports the epoch's pairs/s as the run logs it
(the first round, which loads the kernels, left out).  Checkouts and cases alternate,
so that both see the same load; medians over ``--reps``.

    python bench/fused_step.py --before ../before            # 3 reps, ~10 min
    python bench/fused_step.py --before ../before --reps 1 --cases f1,f2

``--busy N`` runs N busy processes (a Python loop each, at the same priority, in a
session of their own) beside every measurement: a shared server's load, under which a
second thread must not make the synchronous run slower than one.

    python bench/fused_step.py --before ../before --cases f1,f2 --busy 1 --out fused_step_busy

Issue 31's targets, evaluated at the end: f at 1 thread >= 1.6x before; f sync at 2
threads >= 1.7x its 1-thread rate and >= 0.9x g's at 2 threads; async at 2 threads >=
1.85x f sync at 1 thread.  Writes docs/results/<--out>.json + .md (the measurements
issue 31 quotes were written to docs/results/ with CAPS2NE_BENCH_RESULTS=docs/results).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import common

CASES = {
    "f1": dict(batch_size=16, threads=1, parallel="sync"),
    "f2": dict(batch_size=16, threads=2, parallel="sync"),
    "g1": dict(batch_size=128, threads=1, parallel="sync"),
    "g2": dict(batch_size=128, threads=2, parallel="sync"),
    "a2": dict(batch_size=16, threads=2, parallel="async"),
}

CODE = """
import json, sys, time
from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.training.config import TrainConfig
from caps2ne_np.training.train import fit
case = json.loads(sys.argv[1])
g = read_edgelist("caps2ne_np/data/cora.edgelist")
cfg = TrainConfig(epochs=case["epochs"], batch_size=case["batch_size"], threads=case["threads"],
                  seed=case["seed"])
t0 = time.perf_counter()
r = fit(g.indptr, g.indices, g.weights, cfg, parallel=case["parallel"])
h = r.history[-1]
print(json.dumps(dict(pairs_per_s=h["pairs_per_s"], seconds=time.perf_counter() - t0,
                      epoch_seconds=h["seconds"], loss=h["loss"])))
"""


def run_case(checkout, case, epochs, seed):
    env = dict(os.environ, PYTHONPATH=str(checkout))
    arg = json.dumps(dict(case, epochs=epochs, seed=seed))
    proc = subprocess.run(
        [sys.executable, "-c", CODE, arg],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{checkout}: {case}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


BUSY = "while True:\n    pass\n"


def start_busy(n):
    """``n`` busy processes, each in its own session (so that a scheduler grouping by
    session treats it as another user's work); stop them with ``stop_busy``."""
    return [
        subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True) for _ in range(n)
    ]


def stop_busy(procs):
    for p in procs:
        p.kill()
        p.wait()


def _commit(checkout):
    """The short commit of a checkout, or None."""
    proc = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return proc.stdout.strip() or None


def targets(med):
    """Issue 31's ratios from the medians ``med[(checkout, case)]`` (pairs/s)."""
    out = []

    def ratio(a, b, goal, what):
        if a in med and b in med:
            r = med[a] / med[b]
            out.append(dict(what=what, ratio=r, goal=goal, met=r >= goal))

    ratio(("after", "f1"), ("before", "f1"), 1.6, "f, 1 thread: after / before")
    ratio(("after", "f2"), ("after", "f1"), 1.7, "f sync: 2 threads / 1 thread")
    ratio(("after", "f2"), ("after", "g2"), 0.9, "2 threads sync: f / g")
    ratio(("after", "a2"), ("after", "f1"), 1.85, "async 2 threads / sync 1 thread")
    ratio(("after", "f2"), ("before", "f2"), 0.0, "f, 2 threads: after / before")
    ratio(("after", "a2"), ("before", "a2"), 0.0, "async 2 threads: after / before")
    return out


def render(payload):
    lines = [
        "# The compiled step against the step before it (Cora featureless, defaults, 1 epoch)",
        "",
        f"`{payload['command']}`",
        "",
        "Epoch pairs/s as the run logs it (its first round, which loads the kernels, left "
        f"out); median of {payload['reps']} alternated runs (all runs in the JSON).",
        "",
    ]
    if payload.get("before_commit"):
        lines += [f"Before: commit {payload['before_commit']}; after: this checkout.", ""]
    if payload.get("busy"):
        lines += [
            f"Under load: {payload['busy']} busy process(es) (a Python loop each, same "
            "priority, own session) ran beside every measurement. The question is whether "
            "2 threads stay near 1 thread's rate:",
            "",
        ]
        med = payload["medians"]
        for which in ("before", "after"):
            one, two = med.get(f"{which}/f1"), med.get(f"{which}/f2")
            if one and two:
                lines.append(f"- {which}: 2 threads / 1 thread = {two / one:.2f}x")
        lines.append("")
    lines += [
        "| case | walks per batch | threads | mode | before | after | after / before |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, case in CASES.items():
        if name not in payload["cases"]:
            continue
        b = payload["medians"].get(f"before/{name}")
        a = payload["medians"].get(f"after/{name}")
        cells = [f"{v:,.0f}" if v else "-" for v in (b, a)]
        ratio = f"{a / b:.2f}x" if a and b else "-"
        lines.append(
            f"| {name} | {case['batch_size']} | {case['threads']} | {case['parallel']} | "
            f"{cells[0]} | {cells[1]} | {ratio} |"
        )
    if payload.get("busy"):  # the targets are for a quiet machine
        lines += ["", "Machine:", "", "```", json.dumps(payload["machine"], indent=1), "```", ""]
        return "\n".join(lines)
    lines += [
        "",
        "Issue 31's targets:",
        "",
        "| ratio | measured | target | met |",
        "| --- | --- | --- | --- |",
    ]
    for t in payload["targets"]:
        goal = f">= {t['goal']}" if t["goal"] else "(context)"
        met = ("yes" if t["met"] else "**no**") if t["goal"] else ""
        lines.append(f"| {t['what']} | {t['ratio']:.2f}x | {goal} | {met} |")
    lines += ["", "Machine:", "", "```", json.dumps(payload["machine"], indent=1), "```", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = common.parser(__doc__, reps=3, out="fused_step")
    parser.add_argument("--before", required=True, help="a checkout of the commit before")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--busy", type=int, default=0, help="busy processes beside every run (default 0)"
    )
    args = parser.parse_args(argv)
    names = [c for c in args.cases.split(",") if c]
    unknown = set(names) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; choose from {sorted(CASES)}")
    checkouts = {"before": Path(args.before).resolve(), "after": common.REPO}
    runs = {f"{c}/{n}": [] for n in names for c in checkouts}
    for rep in range(args.reps):
        for name in names:
            order = list(checkouts) if rep % 2 == 0 else list(checkouts)[::-1]
            for which in order:
                busy = start_busy(args.busy)
                try:
                    r = run_case(checkouts[which], CASES[name], args.epochs, seed=rep)
                finally:
                    stop_busy(busy)
                runs[f"{which}/{name}"].append(r)
                print(f"rep {rep + 1} {which:6s} {name}: {r['pairs_per_s']:,.0f} pairs/s, "
                      f"{r['seconds']:.1f} s", flush=True)  # fmt: skip
    medians = {k: common.median([r["pairs_per_s"] for r in v]) for k, v in runs.items() if v}
    med = {tuple(k.split("/")): v for k, v in medians.items()}
    payload = dict(
        command="python bench/fused_step.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        reps=args.reps,
        busy=args.busy,
        before_commit=_commit(checkouts["before"]),
        cases=names,
        runs=runs,
        medians=medians,
        targets=targets(med),
        machine=common.machine_info(),
    )
    md = render(payload)
    common.write_results(args.out, payload, md)
    print(md)


if __name__ == "__main__":
    main()
