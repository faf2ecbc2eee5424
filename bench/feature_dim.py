"""Training throughput as the number of fixed sparse features d grows (issue 3's
"d of several thousand must train at least as fast as the featureless d = 128 case").

On the Citeseer graph with perf.py's config (d) (64 walks x targets {3,4,5,6} = 256
pairs per step, k = 128, |V'| = 256, m = 1), the fixed bag-of-words features are
replaced by random sparse rows with Citeseer's density (32 nonzeros per node,
row-normalised) for d from 128 to 8,192, and each is timed with the authors' dense
Adam and with lazy Adam, next to the featureless model (x trained, d = 128).
Forward and backward cost O(nnz(x) k) per row whatever d is; what grows with d is W
(I x d x k) and with it the optimizer's work and the memory the step touches.

    python bench/feature_dim.py [--threads 2] [--dims 128,512,1433,3703,8192] [--reps 5]
    python bench/feature_dim.py --smoke --out feature_dim_smoke      # seconds

Writes docs/results/feature_dim.json + .md.
"""

import numpy as np
import scipy.sparse as sp

import common
import perf
import report

NNZ_PER_ROW = 32  # Citeseer: 105,165 nonzeros over 3,327 nodes (31.6)
CONFIG = dict(perf.CONFIGS["d"])


def random_features(n_nodes, d, seed=0):
    """``NNZ_PER_ROW`` distinct random columns per row (all of them when d is smaller),
    row-normalised as the authors normalise the bag-of-words."""
    rng = np.random.default_rng(seed)
    per_row = min(NNZ_PER_ROW, d)
    cols = np.stack([rng.choice(d, per_row, replace=False) for _ in range(n_nodes)])
    rows = np.repeat(np.arange(n_nodes), per_row)
    x = sp.csr_matrix(
        (np.ones(rows.shape[0], dtype=np.float32), (rows, cols.ravel())), shape=(n_nodes, d)
    )
    return perf.row_normalise(x)


def time_runners(runners, warmup, steps, reps):
    """Interleaved repetitions (every runner once per round, so all see the same load);
    per runner the median ms per step and the optimizer's mean ms per step."""
    for r in runners:
        r.run(warmup)
        r.adam_seconds = 0.0
    times = [[] for _ in runners]
    for _ in range(reps):
        for r, t in zip(runners, times):
            t.append(common.timed(r.run, steps))
    return [
        dict(
            step_ms=1e3 * common.median(t) / steps,
            adam_ms=1e3 * r.adam_seconds / (reps * steps),
            spread_pct=common.spread(t),
        )
        for r, t in zip(runners, times)
    ]


def main(argv=None):
    ap = common.parser(__doc__, threads=2, reps=5, smoke="d = 256 only, 2 steps", out="feature_dim")
    ap.add_argument("--dims", default="128,512,1433,3703,8192")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)
    if args.smoke:
        args.dims, args.reps, args.steps, args.warmup = "256", 1, 2, 1
    dims = [int(v) for v in args.dims.split(",")]
    whole = common.clock()
    base = perf.load_problem(CONFIG)  # Citeseer graph and walks
    n_nodes = base["n_nodes"]
    n_slots = perf.COMMON["walk_length"] - 1
    k = CONFIG["dim"]
    cases = [("trained x (featureless)", 128, dict(CONFIG, features=False, feat_dim=128), None)]
    cases += [(f"sparse, d = {d:,}", d, dict(CONFIG), random_features(n_nodes, d)) for d in dims]
    rows, runners = [], []
    with common.threads(args.threads):
        for label, d, cfg, feats in cases:
            rows.append(dict(case=label, d=d, w_params=n_slots * d * k))
            runners += [
                perf.Ours(dict(base, features=feats), cfg, "sparse", adam=adam)
                for adam in ("dense", "lazy")
            ]
        timings = time_runners(runners, args.warmup, args.steps, args.reps)
    for i, entry in enumerate(rows):
        entry["dense"], entry["lazy"] = timings[2 * i], timings[2 * i + 1]
        print(
            f"{entry['case']}: dense {entry['dense']['step_ms']:.2f} ms/step "
            f"(Adam {entry['dense']['adam_ms']:.2f}), lazy {entry['lazy']['step_ms']:.2f}"
        )
    pairs = CONFIG["batch"] * 4
    ref = rows[0]
    table = []
    for e in rows:
        cells = [e["case"], report.fmt_int(e["w_params"]), f"{3 * 4 * e['w_params'] / 2**20:.1f}"]
        for adam in ("dense", "lazy"):
            r = e[adam]
            cells += [
                report.fmt_int(1e3 * pairs / r["step_ms"]),
                f"{r['step_ms']:.2f}",
                f"{r['adam_ms']:.2f}",
                f"{r['step_ms'] - r['adam_ms']:.2f}",
                f"{ref[adam]['step_ms'] / r['step_ms']:.2f}",
            ]
        table.append(cells)
    headers = [
        "input",
        "weights in W",
        "W + Adam moments (MiB)",
        "dense: pairs/s",
        "ms/step",
        "Adam ms",
        "rest ms",
        "vs featureless",
        "lazy: pairs/s",
        "ms/step",
        "Adam ms",
        "rest ms",
        "vs featureless",
    ]
    info = common.machine_info()
    md = [
        "# Throughput against the feature dimension d",
        "",
        f"`python bench/feature_dim.py --threads {args.threads} --dims {args.dims} "
        f"--reps {args.reps}` ({args.reps} rounds of {args.steps} steps of every case, "
        f"interleaved, after {args.warmup} warm-up steps; medians; "
        f"{whole.elapsed():.0f} s in all)",
        "",
        report.machine_markdown(info),
        "Citeseer graph, perf.py's config (d): 256 pairs per step, k = 128, |V'| = 256, "
        f"m = 1. Sparse rows: {NNZ_PER_ROW} random features per node, row-normalised "
        "(Citeseer's density), so forward and backward do the same work at every d. "
        "'vs featureless' is the featureless model's ms/step over this row's, with the "
        "same optimizer (>= 1 meets issue 3's parity). 'Adam ms' is the optimizer's "
        "share of the step; 'rest ms' everything else (pairs, forward, backward).",
        "",
        report.markdown_table(headers, table),
        "",
    ]
    common.write_results(args.out, dict(args=vars(args), machine=info, rows=rows), "\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
