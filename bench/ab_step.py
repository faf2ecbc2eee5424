"""A/B of the training step between two checkouts: bench/perf.py's ``Ours`` runner (the
step ``train.fit`` runs) of a base revision against this working tree, in alternating
subprocesses, so that load on a shared machine falls on both sides alike.

    python bench/ab_step.py --base 59ba5c7 --configs b --threads 2 --alternations 7

The base revision is exported with ``git archive`` into a temporary folder (its own
bench/perf.py times it). Each side reports ms per step (the least disturbed of ``--reps``
repetitions of ``--steps`` steps after 5 warm-up steps) and process CPU time; the table
gives medians over alternations, their ratio, and whether both sides reached the same
loss bit for bit. Writes ``ab_step.json`` and ``.md`` in the results folder ($CAPS2NE_BENCH_RESULTS;
the comparison for issue 17 is docs/results/ab_step.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import common
import report

ROOT = Path(__file__).resolve().parents[1]


def worker(root, key, n_threads, steps, reps):
    """One side: time ``steps`` steps ``reps`` times in the checkout at ``root``."""
    sys.path[:0] = [root, os.path.join(root, "bench")]
    for name in ("common", "report", "perf"):  # the checkout's own bench modules
        sys.modules.pop(name, None)
    import common
    import perf

    cfg = perf.CONFIGS[key]
    problem = perf.load_problem(cfg)
    wall, cpu = [], []
    with common.threads(n_threads):
        ours = perf.Ours(problem, cfg, "auto")
        ours.run(5)  # Numba cache load, warm caches
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            ours.run(steps)
            wall.append(1e3 * (time.perf_counter() - t0) / steps)
            cpu.append(1e3 * (time.process_time() - c0) / steps)
    print(json.dumps(dict(ms=min(wall), cpu_ms=min(cpu), loss=float(ours.losses[-1]))))


def export(rev, dest):
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(dest, filter="data")


def side(root, key, args):
    env = dict(os.environ, PYTHONPATH=str(root))
    cmd = [sys.executable, __file__, "--worker", str(root), "--configs", key]
    cmd += ["--threads", str(args.threads), "--steps", str(args.steps), "--reps", str(args.reps)]
    out = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{root}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = common.parser(__doc__, threads=1, reps=5, out="ab_step")
    ap.add_argument("--base", help="git revision to compare this tree against")
    ap.add_argument("--configs", default="b", help="bench/perf.py configs, comma-separated")
    ap.add_argument("--alternations", type=int, default=7)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.configs, args.threads, args.steps, args.reps)
    if not args.base:
        ap.error("--base is required")
    rows = []
    with tempfile.TemporaryDirectory() as base_dir:
        export(args.base, base_dir)
        sides = {"base": Path(base_dir), "this tree": ROOT}
        for key in args.configs.split(","):
            got = {name: [] for name in sides}
            for i in range(args.alternations):
                for name in list(sides)[:: 1 if i % 2 == 0 else -1]:
                    got[name].append(side(sides[name], key, args))
                    print(key, i, name, f"{got[name][-1]['ms']:.3f} ms/step", flush=True)
            med = {n: statistics.median(r["ms"] for r in v) for n, v in got.items()}
            cpu = {n: statistics.median(r["cpu_ms"] for r in v) for n, v in got.items()}
            same = got["base"][-1]["loss"] == got["this tree"][-1]["loss"]
            rows.append(
                [key, args.threads, args.alternations, f"{med['base']:.2f}",
                 f"{med['this tree']:.2f}", f"{med['this tree'] / med['base']:.3f}",
                 f"{cpu['this tree'] / cpu['base']:.3f}", "yes" if same else "NO"]
            )  # fmt: skip
    table = report.markdown_table(
        ["config", "threads", "alternations", "base ms/step", "this tree ms/step",
         "ratio", "CPU-time ratio", "same loss"],
        rows,
    )  # fmt: skip
    load = os.getloadavg()[0]
    text = (
        f"# Training step A/B against {args.base}\n\n`python bench/ab_step.py --base "
        f"{args.base} --configs {args.configs} --threads {args.threads} --alternations "
        f"{args.alternations}`; load average {load:.1f} at the end.\n\n{table}\n"
    )
    print(text)
    common.write_results(args.out, common.payload(args, rows), text)


if __name__ == "__main__":
    main()
