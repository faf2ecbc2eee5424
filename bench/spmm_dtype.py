"""What float32 would buy the spectral stages: the sparse product A X that dominates
them (the randomized SVD's power iterations, the Chebyshev filter, the propagation),
float64 as the defaults run it against float32, on one graph, timed in alternation.

    python bench/scale.py --spmm --graph /tmp/g200k.txt --reps 5   # docs/results/scale_spmm.md

The kernel is kernels/sparse.py's (``matmat``: Numba's threads over blocks of rows of
equal stored entries), run on the symmetric adjacency of the edge list and a random
(N, 138) block: 138 columns, the randomized SVD's rank 128 plus its 10 oversamples."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package

import common
import report
from caps2ne_np.graphs.graph import read_graph
from caps2ne_np.kernels import sparse
from caps2ne_np.spectral import prone as spectral

COLUMNS = 138


def _adjacency(path):
    g = read_graph(path)
    return spectral.adjacency(g.indptr, g.indices, g.weights, g.n_nodes)


def _time(A, X, Y, bounds):
    t = time.perf_counter()
    sparse.matmat(A, X, out=Y, bounds=bounds)
    return time.perf_counter() - t


def main(argv):
    ap = common.parser(__doc__, threads=0, reps=5, out="scale_spmm")
    ap.add_argument("--graph", required=True, help="an edge list (u v lines)")
    args = ap.parse_args(argv)
    A = _adjacency(args.graph)
    X64 = np.random.default_rng(0).standard_normal((A.shape[0], COLUMNS))
    X32 = X64.astype(np.float32)
    bounds = sparse.row_chunks(A.indptr)
    blocks = {
        "float64": (spectral.in_precision(A, np.float64), X64, np.empty_like(X64)),
        "float32": (spectral.in_precision(A, np.float32), X32, np.empty_like(X32)),
    }
    seconds = {name: [] for name in blocks}
    with common.threads(args.threads):
        for M, X, Y in blocks.values():
            _time(M, X, Y, bounds)  # compile and warm
        for _ in range(args.reps):
            for name, (M, X, Y) in blocks.items():
                seconds[name].append(_time(M, X, Y, bounds))
    ratios = [a / b for a, b in zip(seconds["float64"], seconds["float32"])]
    rows = [dict(dtype=k, median_s=common.median(v), runs_s=v) for k, v in seconds.items()]
    payload = common.payload(args, rows, n=A.shape[0], nnz=A.nnz, columns=COLUMNS, ratios=ratios)
    common.write_results(args.out, payload, _markdown(payload))
    print(_markdown(payload))


def _markdown(p):
    lines = [
        "# The spectral stages' sparse product, float64 against float32",
        "",
        f"`{p['command']}`",
        "",
        f"A X with A the symmetric adjacency ({p['n']:,} nodes, {p['nnz']:,} stored "
        f"entries) and X (N, {p['columns']}), kernels/sparse.py's matmat on "
        f"{p['args']['threads']} threads, {p['args']['reps']} alternated repeats after a "
        "warm call.",
        "",
        "| dtype | median s | runs s |",
        "| --- | --- | --- |",
    ]
    for r in p["rows"]:
        runs = ", ".join(f"{s:.3f}" for s in r["runs_s"])
        lines.append(f"| {r['dtype']} | {r['median_s']:.3f} | {runs} |")
    ratios = ", ".join(f"{x:.2f}" for x in p["ratios"])
    lines += [
        "",
        f"float64 over float32, per repeat: {ratios} (median {common.median(p['ratios']):.2f}).",
        "",
    ]
    lines.append(report.machine_markdown(p["machine"]))
    return "\n".join(lines) + "\n"
