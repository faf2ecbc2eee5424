"""Where a training step's time goes, kernel by kernel (the cause behind perf.md's gaps).

Runs ``train.fit`` for a fixed number of steps under cProfile on three of perf.py's
configurations and reports each kernel's share of the step:
(a) Cora, sparse fixed features (d = 1,433), 256 pairs per step, dense Adam;
(b) BlogCatalog graph, trained x (d = k = 128), 1,280 pairs per step, and
(d) Citeseer, sparse fixed features (d = 3,703), 256 pairs per step, both with
dense Adam (the default) and lazy Adam; all with m = 1, |V'| = 256.

``--set converge`` (issue 27) profiles instead the 'converge' preset on the bundled Cora
edge list (featureless: x trained, d = k = 128; lazy Adam, unigram sampler) at B = 16
walks (160 pairs per step, the default) and B = 128, each step on exactly ``--threads``
threads (the per-step thread rule off), and adds the parallel regions per step
(``_jit.LAUNCHES``), the Python functions between kernels, and the step's time without
the profiler.

    python bench/profile_step.py [--threads 2] [--steps 60]
    python bench/profile_step.py --set converge --threads 1 --steps 1000

Writes docs/results/profile_step.json + .md (``--set converge``:
profile_step_converge_<threads>t.json + .md).  Profiling adds a little overhead per
Python call; the shares, not the absolute times, are the point.
"""

import cProfile
import functools
import os
import pstats
import time
from pathlib import Path

import caps2ne_np
import common
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.graphs.datasets import load_dataset
from caps2ne_np.graphs.downloads import default_data_dir
from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.kernels import _jit
from caps2ne_np.training import step, train
from caps2ne_np.training.config import TrainConfig
from caps2ne_np.training.train import fit
from common import write_results  # into docs/results or $CAPS2NE_BENCH_RESULTS

GROUPS = {
    "W_i u, d_W, d_u on the distinct rows (segment GEMMs)": (
        "_seg_nn",
        "_seg_tn",
        "_seg_nt",
    ),
    "output-layer products (row GEMMs)": ("_rows_nn", "_rows_nt", "_rows_tn"),
    "sparse W_i u and d_W (sparse features)": (
        "_predict_sparse",
        "_predict_sparse_backward_cols",
        "_batch_columns",
    ),
    "squash of x, forward + backward": ("_squash", "_squash_backward"),
    "expand / sum the shared rows": ("_gather_rows", "_gather_rows_backward"),
    "routing forward + backward": ("_route", "_route_backward"),
    "softmax rows and output-layer small kernels": (
        "_softmax_rows",
        "_target_logits",
        "_add_to_rows",
        "_add_scaled_rows",
        "_column_sums",
    ),
    "scatter-adds (targets, x rows)": ("_scatter_rows_serial", "_scatter_scalars"),
    "Adam (dense, dense from rows, or lazy rows; with sparse features fused with W's "
    "gradient and the next batch's W_i u)": (
        "_adam_dense",
        "_adam_rows",
        "_adam_dense_rowgrad",
        "_adam_W_predict",
        "_adam_tables",
    ),
    "walks, pairs, V', shared-row bookkeeping": (
        "_walks_by_id",
        "make_pairs",
        "_sample_unique",
        "_share_slots",
    ),
}

PYTHON = {
    "core.py: forward and loss_and_row_grads (Python between kernels)": (
        ("core.py", "forward"),
        ("core.py", "loss_and_row_grads"),
    ),
    "capsules/grads/blas wrappers (their checks, output_logits, softmax backward, row_matmul*)": (
        ("capsules.py", "squash"),
        ("capsules.py", "predict_sparse"),
        ("capsules.py", "gather_rows"),
        ("capsules.py", "route"),
        ("capsules.py", "softmax_rows"),
        ("grads.py", "route_backward"),
        ("grads.py", "gather_rows_backward"),
        ("grads.py", "predict_sparse_backward_cols"),
        ("grads.py", "squash_backward"),
        ("capsules.py", "output_logits"),
        ("grads.py", "sampled_softmax_backward_rows"),
        ("grads.py", "scatter_add_rows"),
        ("blas.py", "row_matmul"),
        ("blas.py", "row_matmul_tn"),
        ("blas.py", "segment_matmul"),
        ("blas.py", "segment_matmul_tn"),
    ),
    "lazy-Adam bookkeeping (optim.Adam.step, coefs)": (
        ("optim.py", "step"),
        ("optim.py", "coefs"),
        ("optim.py", "lr_t"),
    ),
    "batch drawing in Python (batch.BatchStream.batch, samplers, walks, batch_rows)": (
        ("batch.py", "batch"),
        ("samplers.py", "sample"),
        ("samplers.py", "expected_count"),
        ("walks.py", "walks"),
        ("walks.py", "training_pairs"),
        ("walks.py", "batch_walk_ids"),
        ("rows.py", "batch_rows"),
        ("rows.py", "share_slots"),
    ),
    "Numba dispatch (thread-count checks, launches, Kernel._pick)": (
        ("parallel.py", "_launch_threads"),
        ("parallel.py", "get_num_threads"),
        ("parallel.py", "_get_thread_id"),
        ("_jit.py", "_pick"),
        ("_jit.py", "__call__"),
    ),
    "NumPy calls (unique, argsort, empty, reduce, ...)": (
        ("_arraysetops_impl.py", "_unique1d"),
        ("_arraysetops_impl.py", "unique"),
        ("~", "<method 'argsort' of 'numpy.ndarray' objects>"),
        ("~", "<method 'reduce' of 'numpy.ufunc' objects>"),
        ("~", "<built-in method numpy.empty>"),
        ("~", "<built-in method numpy.zeros>"),
        ("~", "<method 'cumsum' of 'numpy.ndarray' objects>"),
        ("~", "<method 'astype' of 'numpy.ndarray' objects>"),
    ),
}
"""Python-level time (cProfile's own time of these functions) for ``--set converge``."""


class _Stop(Exception):
    pass


def _stop_after(n):
    def callback(epoch, batch, step):
        if step + 1 >= n:
            raise _Stop

    return callback


def profile(name, g, features, cfg, steps, python=False):
    try:  # compile / load the cache first
        fit(g.indptr, g.indices, g.weights, cfg, features=features, step_callback=_stop_after(3))
    except _Stop:
        pass
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    try:
        fit(
            g.indptr, g.indices, g.weights, cfg, features=features, step_callback=_stop_after(steps)
        )
    except _Stop:
        pass
    pr.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(pr).stats
    by_func = {}
    for (_, _, func), (_, _, tottime, _, _) in stats.items():
        by_func[func] = by_func.get(func, 0.0) + tottime
    rows, accounted = [], 0.0
    for group, funcs in GROUPS.items():
        t = sum(by_func.get(f, 0.0) for f in funcs)
        accounted += t
        rows.append((group, 1e3 * t / steps))
    rows.append(("everything else (NumPy glue, gathers, Python)", 1e3 * (wall - accounted) / steps))
    out = dict(name=name, steps=steps, ms_per_step=1e3 * wall / steps, rows=rows)
    if python:
        own = {}
        for (path, _, func), (_, _, tottime, _, _) in stats.items():
            key = (Path(path).name if path != "~" else "~", func)
            own[key] = own.get(key, 0.0) + tottime
        out["python"] = [
            (group, 1e3 * sum(own.get(k, 0.0) for k in keys) / steps)
            for group, keys in PYTHON.items()
        ]
    return out


def plain(g, cfg, steps):
    """ms per step without the profiler, and the kernel launches (parallel, serial) per
    step, over ``steps`` steps after 5."""
    marks = []

    def callback(epoch, batch, step_):
        if step_ == 4:
            marks.append((time.perf_counter(), dict(_jit.LAUNCHES)))
        if step_ + 1 >= 5 + steps:
            marks.append((time.perf_counter(), dict(_jit.LAUNCHES)))
            raise _Stop

    try:
        fit(g.indptr, g.indices, g.weights, cfg, step_callback=callback)
    except _Stop:
        pass
    (t0, l0), (t1, l1) = marks
    return dict(
        ms_per_step=1e3 * (t1 - t0) / steps,
        parallel_per_step=(l1["parallel"] - l0["parallel"]) / steps,
        serial_per_step=(l1["serial"] - l0["serial"]) / steps,
    )


def converge(args):
    """Profiles of the 'converge' preset on Cora's edge list at B = 16 and 128 walks."""
    # every step on exactly --threads threads: the per-step rule would pick its own
    if "adaptive_threads" in step.TrainStep.__init__.__code__.co_varnames:
        train.TrainStep = functools.partial(step.TrainStep, adaptive_threads=False)
    g = read_edgelist(str(Path(caps2ne_np.__file__).parent / "data" / "cora.edgelist"))
    runs = []
    for B in (16, 128):
        cfg = TrainConfig(batch_size=B, epochs=1, threads=args.threads)
        steps = args.steps if B == 16 else max(20, args.steps // 8)
        r = profile(f"B = {B} walks ({10 * B} pairs/step)", g, None, cfg, steps, python=True)
        r["profiled_ms"] = r["ms_per_step"]
        r.update(plain(g, cfg, steps))
        runs.append(r)
    lines = [
        "# Where a 'converge' step's time goes (Cora edge list, featureless)",
        "",
        f"`python bench/profile_step.py --set converge --threads {args.threads} --steps "
        f"{args.steps}` (cProfile over train.fit, every step on {args.threads} thread(s); "
        f"load average {os.getloadavg()[0]:.1f} at the end). Milliseconds per step.",
        "",
        "| | " + " | ".join(r["name"] for r in runs) + " |",
        "| --- |" + " --- |" * len(runs),
        "| **step without the profiler** | "
        + " | ".join(f"**{r['ms_per_step']:.2f}**" for r in runs)
        + " |",
        "| parallel regions per step (kernels run parallel) | "
        + " | ".join(f"{r['parallel_per_step']:.1f}" for r in runs)
        + " |",
        "| serial kernel calls per step | "
        + " | ".join(f"{r['serial_per_step']:.1f}" for r in runs)
        + " |",
        "| *kernels (cProfile own time):* | |" + " |" * (len(runs) - 1),
    ]
    for i, (group, _) in enumerate(runs[0]["rows"]):
        lines.append(f"| {group} | " + " | ".join(f"{r['rows'][i][1]:.3f}" for r in runs) + " |")
    lines.append("| *of which Python (own time):* | |" + " |" * (len(runs) - 1))
    for i, (group, _) in enumerate(runs[0]["python"]):
        lines.append(f"| {group} | " + " | ".join(f"{r['python'][i][1]:.3f}" for r in runs) + " |")
    lines.append(
        "| step under the profiler | " + " | ".join(f"{r['profiled_ms']:.2f}" for r in runs) + " |"
    )
    text = "\n".join(lines) + "\n"
    print(text)
    write_results(f"profile_step_converge_{args.threads}t", dict(args=vars(args), runs=runs), text)


def main():
    ap = common.parser(__doc__, threads=2)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument(
        "--set",
        choices=("paper", "converge"),
        default="paper",
        help="paper: configs a, b, d (as before); converge: the featureless default, B = 16 / 128",
    )
    args = ap.parse_args()
    if args.set == "converge":
        converge(args)
        return
    data = default_data_dir()
    blog = load_dataset("blogcatalog", data)
    cite = load_dataset("citeseer", data)
    cora = load_dataset("cora", data)
    g_blog, g_cite = from_scipy(blog.adj, blog.node_ids), from_scipy(cite.adj, cite.node_ids)
    g_cora = from_scipy(cora.adj, cora.node_ids)
    runs = [
        profile(
            "(a) Cora, sparse features d=1,433, 256 pairs/step, dense Adam",
            g_cora,
            cora.features,
            TrainConfig(
                walks_per_node=8,
                epochs=1,
                batch_size=64,
                targets=(3, 4, 5, 6),
                threads=args.threads,
                preset="paper",
            ),
            args.steps,
        )
    ]
    for adam in ("dense", "lazy"):
        cfg_b = TrainConfig(
            walks_per_node=2,
            epochs=1,
            batch_size=128,
            threads=args.threads,
            adam=adam,
            preset="paper",
        )
        cfg_d = TrainConfig(
            walks_per_node=8,
            epochs=1,
            batch_size=64,
            targets=(3, 4, 5, 6),
            threads=args.threads,
            adam=adam,
            preset="paper",
        )
        runs.append(
            profile(
                f"(b) BlogCatalog, trained x, 1,280 pairs/step, {adam} Adam",
                g_blog,
                None,
                cfg_b,
                args.steps,
            )
        )
        runs.append(
            profile(
                f"(d) Citeseer, sparse features d=3,703, 256 pairs/step, {adam} Adam",
                g_cite,
                cite.features,
                cfg_d,
                args.steps,
            )
        )
    lines = [
        "# Where a training step's time goes",
        "",
        f"`python bench/profile_step.py --threads {args.threads} --steps {args.steps}` "
        f"(cProfile over train.fit; load average {os.getloadavg()[0]:.1f} at the end). "
        "Milliseconds per step by kernel group.",
        "",
    ]
    names = [r["name"] for r in runs]
    lines.append("| kernel group | " + " | ".join(names) + " |")
    lines.append("| --- |" + " --- |" * len(runs))
    for i, (group, _) in enumerate(runs[0]["rows"]):
        lines.append(f"| {group} | " + " | ".join(f"{r['rows'][i][1]:.2f}" for r in runs) + " |")
    lines.append("| **step** | " + " | ".join(f"**{r['ms_per_step']:.2f}**" for r in runs) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_results("profile_step", stored(vars(args), runs), text)


def stored(args, runs):
    """The result file: the kernel groups' names once, each run's milliseconds per step in
    that order (``ms``)."""
    return dict(
        args=args,
        kernel_groups=[group for group, _ in runs[0]["rows"]],
        runs=[
            dict(
                name=r["name"],
                steps=r["steps"],
                ms_per_step=r["ms_per_step"],
                ms=[t for _, t in r["rows"]],
            )
            for r in runs
        ],
    )


if __name__ == "__main__":
    main()
