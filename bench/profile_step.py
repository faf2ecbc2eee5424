"""Where a training step's time goes, kernel by kernel (the cause behind perf.md's gaps).

Runs ``train.fit`` for a fixed number of steps under cProfile on three of perf.py's
configurations and reports each kernel's share of the step:
(a) Cora, sparse fixed features (d = 1,433), 256 pairs per step, dense Adam;
(b) BlogCatalog graph, trained x (d = k = 128), 1,280 pairs per step, and
(d) Citeseer, sparse fixed features (d = 3,703), 256 pairs per step, both with
dense Adam (the default) and lazy Adam; all with m = 1, |V'| = 256.

    python bench/profile_step.py [--threads 2] [--steps 60]

Writes bench/results/profile_step.json + .md.  Profiling adds a little overhead per
Python call; the shares, not the absolute times, are the point.
"""

import argparse
import cProfile
import os
import pstats
import time

from caps2ne_np.config import TrainConfig
from caps2ne_np.datasets import default_data_dir, load_dataset
from caps2ne_np.graph import from_scipy
from caps2ne_np.train import fit
from common import write_results  # into bench/results or $CAPS2NE_BENCH_RESULTS

GROUPS = {
    "W_i u, d_W, d_u on the distinct rows (segment GEMMs)": (
        "_seg_nn",
        "_seg_tn",
        "_seg_nt",
        "_slot_nn",
        "_slot_tn",
        "_slot_nt",
    ),
    "output-layer products (row GEMMs)": ("_rows_nn", "_rows_nt", "_rows_tn"),
    "sparse W_i u and d_W (sparse features)": (
        "predict_sparse",
        "predict_sparse_backward_cols",
        "_batch_columns",
    ),
    "squash of x, forward + backward": ("squash", "squash_backward"),
    "expand / sum the shared rows": ("gather_rows", "gather_rows_backward"),
    "routing forward + backward": ("route", "route_backward"),
    "softmax rows and output-layer small kernels": (
        "softmax_rows",
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
    ),
    "walks, pairs, V', shared-row bookkeeping": (
        "_walks_by_id",
        "make_pairs",
        "_sample_unique",
        "_share_slots",
    ),
}


class _Stop(Exception):
    pass


def _stop_after(n):
    def callback(epoch, batch, step):
        if step + 1 >= n:
            raise _Stop

    return callback


def profile(name, g, features, cfg, steps):
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
    return dict(name=name, steps=steps, ms_per_step=1e3 * wall / steps, rows=rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=60)
    args = ap.parse_args()
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
