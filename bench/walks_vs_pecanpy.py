"""Walk generation (steps/s): caps2ne_np.walks.walks.uniform_walks against PecanPy's first-order
walks (``pecanpy.pecanpy.FirstOrderUnweighted``) on BlogCatalog (10,312 nodes, 333,983
edges), 10 walks per node of 80 steps each (81 nodes), with 1 and 2 threads.

PecanPy needs numpy < 2, so it lives in its own virtual environment and runs in a
subprocess of this script (the same file, ``--worker``); only its walk calls are timed,
not the interpreter start, the imports or the graph loading:

* ``simulate_walks(10, 80)``: PecanPy's public call.  It builds new Numba closures on
  every call, so it compiles its walk kernel again each time (~1 s), and it maps every
  walk to a list of node-ID strings;
* the kernel alone: PecanPy's ``_random_walks`` on the same closures, compiled once in
  the warm-up, returning its uint32 walk matrix, as ``simulate_walks`` calls it.  This
  is the like-for-like comparison with ours (an int32 walk matrix) and the headline.

Threads: ours through ``numba.set_num_threads``; PecanPy's ``workers`` option does
nothing in 2.0.9 (its own TODO), so its subprocess gets ``NUMBA_NUM_THREADS``.

``--node2vec P,Q``: node2vec's second-order walks instead, ours
(``uniform_walks(..., node2vec_p=P, node2vec_q=Q)``, rejection sampling) against
PecanPy's ``SparseOTF`` (transition probabilities computed on the fly, no
precomputed tables: the like-for-like mode for large graphs), the same walks and
timing otherwise; our first-order walks are timed in the same run to show what the
second order costs.

    python -m venv /tmp/pecan && /tmp/pecan/bin/pip install pecanpy     # once
    python bench/walks_vs_pecanpy.py [--reps 5] [--threads 1,2] \\
        [--pecanpy-python /tmp/pecan/bin/python] [--node2vec 0.5,2]

Writes docs/results/walks_vs_pecanpy.json and .md (``--node2vec``: only the summary
walks_vs_pecanpy_node2vec.md, as docs/results/ is capped at 150 kB).
"""

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

import harness  # bench/harness.py: the shared flags (no import: the worker loads it too)

WALKS_PER_NODE = 10
STEPS_PER_WALK = 80


# --------------------------------------------------------------------------- PecanPy side


def worker(npz_path, reps, walks_per_node, steps, node2vec=None):
    """Runs inside PecanPy's environment: prints one JSON line of timings (seconds).
    ``node2vec``: (p, q) for PecanPy's SparseOTF; None: FirstOrderUnweighted."""
    import numba
    import numpy as np
    from numba_progress import ProgressBar
    from pecanpy import pecanpy as p2v

    if node2vec is None:
        g = p2v.FirstOrderUnweighted(random_state=0)
    else:
        g = p2v.SparseOTF(p=node2vec[0], q=node2vec[1], workers=1, random_state=0)
    g.read_npz(npz_path, weighted=False, implicit_ids=True)

    # The kernel as simulate_walks calls it (pecanpy 2.0.9, Base.simulate_walks).
    nodes = np.array(range(g.num_nodes), dtype=np.uint32)
    starts = np.concatenate([nodes] * walks_per_node)
    np.random.seed(0)
    np.random.shuffle(starts)
    g._preprocess_transition_probs()  # as simulate_walks does first
    move_forward, has_nbrs = g.get_move_forward(), g.get_has_nbrs()

    def kernel():
        with ProgressBar(total=starts.size, disable=True) as progress:
            return g._random_walks(starts.size, steps, 0, starts, has_nbrs, move_forward, progress)

    walks = kernel()  # warm-up: compiles once
    kernel_times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        kernel()
        kernel_times.append(time.perf_counter() - t0)
    api_times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = g.simulate_walks(walks_per_node, steps)
        api_times.append(time.perf_counter() - t0)
    full = int(np.sum(walks[:, -1] == steps + 1))
    print(
        json.dumps(
            dict(
                kernel=kernel_times,
                simulate_walks=api_times,
                n_walks=len(out),
                nodes_per_walk=len(out[0]),
                full_length_walks=full,
                numba_threads=numba.get_num_threads(),
                numba=numba.__version__,
                numpy=np.__version__,
                pecanpy=_pecanpy_version(),
                pecanpy_mode=type(g).__name__,
                threading_layer=_layer(numba),
            )
        )
    )


def _pecanpy_version():
    import importlib.metadata

    return importlib.metadata.version("pecanpy")


def _layer(numba):
    try:
        return numba.threading_layer()
    except ValueError:
        return None


def find_pecanpy_python(explicit):
    """The interpreter that can import pecanpy: --pecanpy-python, this one, or /tmp/pecan."""
    candidates = [explicit] if explicit else [sys.executable, "/tmp/pecan/bin/python"]
    for exe in candidates:
        if exe and os.path.exists(exe):
            ok = subprocess.run(
                [exe, "-c", "import pecanpy"], capture_output=True, cwd=tempfile.gettempdir()
            )
            if ok.returncode == 0:
                return exe
    return None


def run_pecanpy(exe, npz_path, n_threads, reps, node2vec=None):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(n_threads), OMP_NUM_THREADS=str(n_threads))
    cmd = [exe, os.path.abspath(__file__), "--worker", npz_path, "--reps", str(reps)]
    if node2vec is not None:
        cmd += ["--node2vec", ",".join(str(x) for x in node2vec)]
    out = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), timeout=1800
    )
    if out.returncode != 0:
        raise RuntimeError(f"PecanPy worker failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- driver


def proposals_per_step(indptr, indices, walks, p, q, n_steps=5000, seed=0):
    """The rejection sampler's mean number of proposals per second-order step,
    alpha_max / E_x[alpha(t, x)] with x uniform on N(v), averaged exactly over
    ``n_steps`` (t, v) pairs drawn from the walks (an unweighted graph)."""
    import numpy as np

    a_max = max(1 / p, 1.0, 1 / q)
    r = np.random.default_rng(seed)
    rows = r.integers(0, walks.shape[0], n_steps)
    cols = r.integers(1, walks.shape[1] - 1, n_steps)
    tries = []
    for w, c in zip(rows, cols):
        t, v = walks[w, c - 1], walks[w, c]
        nv = indices[indptr[v] : indptr[v + 1]]
        if nv.size == 0:
            continue
        alpha = np.where(
            nv == t, 1 / p, np.where(np.isin(nv, indices[indptr[t] : indptr[t + 1]]), 1.0, 1 / q)
        )
        tries.append(a_max / alpha.mean())
    return float(np.mean(tries))


def main(argv=None):
    ap = harness.parser(__doc__, threads="1,2", reps=5, out="walks_vs_pecanpy")
    ap.add_argument(
        "--pecanpy-python",
        default=None,
        help="interpreter with pecanpy installed (default: this one, else /tmp/pecan/bin/python)",
    )
    ap.add_argument(
        "--node2vec",
        default=None,
        metavar="P,Q",
        help="node2vec walks with return parameter P and in-out parameter Q, against "
        "PecanPy's SparseOTF (default: first-order walks; the default --out is then "
        "walks_vs_pecanpy_node2vec)",
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    node2vec = None
    if args.node2vec is not None:
        try:
            node2vec = tuple(float(x) for x in args.node2vec.split(","))
        except ValueError:
            node2vec = ()
        if len(node2vec) != 2:
            ap.error(f"--node2vec: expected P,Q such as 0.5,2, got {args.node2vec!r}")
    if node2vec and args.out == ap.get_default("out"):
        args.out += "_node2vec"
    if args.worker:
        worker(args.worker, args.reps, WALKS_PER_NODE, STEPS_PER_WALK, node2vec)
        return None
    pq = {} if node2vec is None else dict(node2vec_p=node2vec[0], node2vec_q=node2vec[1])

    import numpy as np

    import common
    import report
    from caps2ne_np.graphs.csr import from_scipy
    from caps2ne_np.graphs.datasets import load_dataset
    from caps2ne_np.graphs.downloads import default_data_dir
    from caps2ne_np.walks.walks import uniform_walks

    t_start = time.perf_counter()
    load_before = os.getloadavg()
    ds = load_dataset("blogcatalog", default_data_dir())
    g = from_scipy(ds.adj)
    n, q = g.n_nodes, STEPS_PER_WALK + 1
    steps_total = n * WALKS_PER_NODE * STEPS_PER_WALK
    exe = find_pecanpy_python(args.pecanpy_python)
    if exe is None:
        print(
            "pecanpy not found: run "
            "`python -m venv /tmp/pecan && /tmp/pecan/bin/pip install pecanpy` "
            "(it needs numpy < 2, so not in this environment); timing ours only",
            file=sys.stderr,
        )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "blogcatalog.csr.npz")
        np.savez(npz, indptr=g.indptr, indices=g.indices, data=np.ones(g.n_edges, dtype=np.float32))
        for n_threads in args.threads:
            with common.threads(n_threads):
                w = uniform_walks(g.indptr, g.indices, g.weights, WALKS_PER_NODE, q, 0, **pq)
                walks = functools.partial(uniform_walks, **pq)  # node2vec's p, q if given
                ours = [  # after the warm-up above
                    common.timed(walks, g.indptr, g.indices, g.weights, WALKS_PER_NODE, q, s)
                    for s in range(1, args.reps + 1)
                ]
                first = None
                if node2vec is not None:  # the same run's first-order walks, for the cost
                    first = [
                        common.timed(
                            uniform_walks, g.indptr, g.indices, g.weights, WALKS_PER_NODE, q, s
                        )
                        for s in range(1, args.reps + 1)
                    ]
            row = dict(
                threads=n_threads,
                ours_s=ours,
                ours_steps_per_s=steps_total / common.median(ours),
                ours_walk_shape=list(w.shape),
            )
            if first is not None:
                row["ours_first_order_s"] = first
                row["ours_first_order_steps_per_s"] = steps_total / common.median(first)
            if exe is not None:
                pp = run_pecanpy(exe, npz, n_threads, args.reps, node2vec)
                row.update(
                    pecanpy=pp,
                    pecanpy_kernel_steps_per_s=steps_total / common.median(pp["kernel"]),
                    pecanpy_api_steps_per_s=steps_total / common.median(pp["simulate_walks"]),
                )
                row["ratio_kernel"] = row["ours_steps_per_s"] / row["pecanpy_kernel_steps_per_s"]
                row["ratio_api"] = row["ours_steps_per_s"] / row["pecanpy_api_steps_per_s"]
            rows.append(row)
            print(
                f"{n_threads} thr: ours {row['ours_steps_per_s'] / 1e6:7.1f} M steps/s"
                + (
                    f"  pecanpy kernel {row['pecanpy_kernel_steps_per_s'] / 1e6:7.1f}"
                    f"  simulate_walks {row['pecanpy_api_steps_per_s'] / 1e6:7.1f}"
                    f"  ratio {row['ratio_kernel']:.2f} / {row['ratio_api']:.2f}"
                    if exe
                    else ""
                ),
                flush=True,
            )

    targets = []
    for r in rows if node2vec is None else ():  # the target is for first-order walks
        for kind in ("kernel", "api"):
            if f"ratio_{kind}" in r:
                what = "walk kernel" if kind == "kernel" else "simulate_walks"
                goal = report.TARGETS["walks_vs_pecanpy"]
                targets.append(
                    report.target(
                        f"ours >= {goal:g}x PecanPy ({what}), {r['threads']} thread(s)",
                        round(r[f"ratio_{kind}"], 3),
                        r[f"ratio_{kind}"] >= goal,
                    )
                )
    if node2vec is not None:
        tries = proposals_per_step(g.indptr, g.indices, w, *node2vec)
        print(f"mean proposals per second-order step: {tries:.2f}", flush=True)
    payload = dict(
        command="python bench/walks_vs_pecanpy.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        args=vars(args),
        machine=common.machine_info(),
        pecanpy_python=exe,
        node2vec=None
        if node2vec is None
        else dict(p=node2vec[0], q=node2vec[1], proposals_per_step=tries),
        graph=dict(name="blogcatalog", nodes=n, directed_edges=g.n_edges),
        walks_per_node=WALKS_PER_NODE,
        steps_per_walk=STEPS_PER_WALK,
        steps_total=steps_total,
        rows=rows,
        targets=targets,
        load_avg_before=load_before,
        load_avg_after=os.getloadavg(),
        seconds=time.perf_counter() - t_start,
    )
    md = render(payload)
    print(md)
    if node2vec is None:
        common.write_results(args.out, payload, md)
    else:  # the summary only: docs/results/ is capped (tests/test_results_size.py)
        common.write_text_atomic(common.RESULTS / f"{args.out}.md", md)
    return payload


def render(p):
    import report

    n2v = p.get("node2vec")
    if n2v:
        return render_node2vec(p, n2v)
    lines = [
        "# Walk generation: caps2ne_np vs PecanPy\n",
        f"`{p['command'].strip()}` ({p['args']['reps']} repetitions after a warm-up; medians; "
        f"{p['seconds']:.0f} s in all; load average {p['load_avg_before'][0]:.1f} before, "
        f"{p['load_avg_after'][0]:.1f} after)\n",
        report.machine_markdown(p["machine"]),
        f"BlogCatalog ({p['graph']['nodes']:,} nodes, "
        f"{p['graph']['directed_edges']:,} directed edges), "
        f"{p['walks_per_node']} walks per node of {p['steps_per_walk']} steps (81 nodes): "
        f"{p['steps_total']:,} steps per run. Ours: `walks.uniform_walks` (int32 matrix). PecanPy "
        f"`FirstOrderUnweighted` in `{p['pecanpy_python']}` (its own venv: it needs numpy < 2), "
        "timed in "
        "a subprocess: its walk kernel alone (compiled once) and its public `simulate_walks` "
        "(recompiles per call, maps walks to ID strings).\n",
    ]
    rows = []
    for r in p["rows"]:
        row = [r["threads"], f"{r['ours_steps_per_s'] / 1e6:.1f}"]
        if "ratio_kernel" in r:
            row += [
                f"{r['pecanpy_kernel_steps_per_s'] / 1e6:.1f}",
                f"{r['pecanpy_api_steps_per_s'] / 1e6:.1f}",
                f"{r['ratio_kernel']:.2f}",
                f"{r['ratio_api']:.2f}",
            ]
        rows.append(row)
    headers = ["threads", "ours M steps/s"]
    if any("ratio_kernel" in r for r in p["rows"]):
        headers += [
            "PecanPy kernel M steps/s",
            "PecanPy simulate_walks M steps/s",
            "ours / kernel",
            "ours / simulate_walks",
        ]
    lines.append(report.markdown_table(headers, rows) + "\n")
    if p["targets"]:
        lines.append(f"## Target: ours >= {report.TARGETS['walks_vs_pecanpy']:g}x PecanPy\n")
        lines.append(report.targets_table(p["targets"]) + "\n")
    return "\n".join(lines)


def render_node2vec(p, n2v):
    import report

    lines = [
        f"# node2vec walks (p = {n2v['p']:g}, q = {n2v['q']:g}): caps2ne_np vs PecanPy SparseOTF\n",
        f"`{p['command'].strip()}` ({p['args']['reps']} repetitions after a warm-up; medians; "
        f"{p['seconds']:.0f} s in all; load average {p['load_avg_before'][0]:.1f} before, "
        f"{p['load_avg_after'][0]:.1f} after, on 2 cores shared with other jobs: absolute "
        "rates are low, the ratios are measured side by side)\n",
        report.machine_markdown(p["machine"]),
        f"BlogCatalog ({p['graph']['nodes']:,} nodes, "
        f"{p['graph']['directed_edges']:,} directed edges), "
        f"{p['walks_per_node']} walks per node of {p['steps_per_walk']} steps: "
        f"{p['steps_total']:,} steps per run. Ours: `walks.uniform_walks(..., node2vec_p, "
        "node2vec_q)`, rejection sampling (int32 matrix); our first-order walks timed in the "
        f"same run. PecanPy `SparseOTF` in `{p['pecanpy_python']}`, timed in a subprocess: "
        "its walk kernel alone (compiled once) and its public `simulate_walks`.\n",
    ]
    headers = ["threads", "ours node2vec M steps/s", "ours first-order M steps/s"]
    rows = []
    for r in p["rows"]:
        row = [
            r["threads"],
            f"{r['ours_steps_per_s'] / 1e6:.2f}",
            f"{r['ours_first_order_steps_per_s'] / 1e6:.2f}",
        ]
        if "ratio_kernel" in r:
            row += [
                f"{r['pecanpy_kernel_steps_per_s'] / 1e6:.2f}",
                f"{r['pecanpy_api_steps_per_s'] / 1e6:.2f}",
                f"{r['ratio_kernel']:.2f}",
                f"{r['ratio_api']:.2f}",
            ]
        rows.append(row)
    if any("ratio_kernel" in r for r in p["rows"]):
        headers += [
            "PecanPy SparseOTF kernel M steps/s",
            "PecanPy simulate_walks M steps/s",
            "ours / kernel",
            "ours / simulate_walks",
        ]
    lines.append(report.markdown_table(headers, rows) + "\n")
    lines.append(
        f"Our rejection sampler makes {n2v['proposals_per_step']:.2f} proposals per "
        "second-order step on average here (alpha_max / E[alpha] over 5,000 (t, v) pairs "
        "of the walks, computed exactly).\n"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
