"""The window-T embedding against the defaults, under both protocols.

The window-T embedding: caps2ne_np/model/window.py, NetMF's T = 10 matrix (exact, or from
the shifted PMI of random-walk pairs: ``--source``) at rank 128.

    python bench/window_t.py --graphs cora,citeseer,syn-3k-mu0.7,pubmed --seeds 0

Per graph and seed (the graph renamed by the seed's permutation, as bench/panel.py does),
each side scored by bench/vs_deepwalk.py's ``score_protocols`` (C = 1 and C tuned per
split):

    ours          python cli.py train --graph g.txt --out ours.emb --seed S: the defaults
                  (the o_v propagated, rows of length 2)
    window        the window-T embedding alone, rows of length 2 (its seconds: the
                  matrix and its SVD, in this process)
    beside        [ours, window]: both rows side by side (256 columns), each half
                  rescaled to length sqrt(2), so a row has length 2 as the defaults'
    beside_128    ``beside`` cut to 128 columns: rownorm(U S^1/2) of its thin SVD's first
                  128, rows of length 2 (as wide as every other side)
    window_start  the defaults with the window-T embedding in place of ProNE's as the
                  start of x and O (spectral.prone replaced in the training process)

Writes <results>/<--out>.json + .md (docs/results or $CAPS2NE_BENCH_RESULTS)."""

import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's package

import numpy as np  # noqa: E402

import common  # noqa: E402
import panel  # noqa: E402
import report  # noqa: E402
import vs_deepwalk  # noqa: E402

SIDES = ("ours", "window", "beside", "beside_128", "window_start")
NAMES = dict(
    ours="ours (defaults)",
    window="window-T alone",
    beside="ours beside window-T",
    beside_128="beside, 128 columns",
    window_start="window-T start",
)
START_SHIM = (
    "import sys; import caps2ne_np.model.spectral as s; from caps2ne_np.model import window; "
    "s.prone = lambda A, dim, seed, *a, **k: window.embed(A.indptr, A.indices, A.data, "
    "dim, seed=seed)[0]; from caps2ne_np.cli import cli; sys.argv = ['cli.py'] + sys.argv[1:]; "
    "cli(prog_name='cli.py')"
)


def window_rows(graph, perm, seed, source, row_norm=2.0):
    """The window-T rows of the renamed graph, mapped back to the panel's node order, and
    the seconds they took."""
    from caps2ne_np.model import window

    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.shape[0])
    A = graph.adj.tocsr()[inv][:, inv].tocsr()  # node perm[i] of the renamed graph is i
    A.sort_indices()
    t0 = time.perf_counter()
    E, _ = window.embed(
        A.indptr, A.indices, A.data, 128, seed=seed, source=source, row_norm=row_norm
    )
    return E[perm], time.perf_counter() - t0


def narrowed(E, k, row_norm=2.0):
    """rownorm(U S^1/2) times ``row_norm`` of the first ``k`` of E's thin SVD, float32."""
    U, S, _ = np.linalg.svd(np.asarray(E, dtype=np.float64), full_matrices=False)
    R = U[:, :k] * np.sqrt(S[:k])
    R /= np.maximum(np.linalg.norm(R, axis=1, keepdims=True), 1e-300)
    return (row_norm * R).astype(np.float32)


def run_seed(graph, seed, sides, threads, source):
    """{side: record} for one seed."""
    perm = np.random.default_rng([seed, 20261127]).permutation(graph.n_nodes)
    out, emb = {}, {}
    with tempfile.TemporaryDirectory(prefix="window_") as d:
        g = os.path.join(d, "g.txt")
        panel.write_graph(g, graph.adj, perm)
        base = ["train", "--graph", g, "--seed", str(seed), "--threads", str(threads)]
        cmds = dict(
            ours=[sys.executable, str(common.REPO / "cli.py")] + base,
            window_start=[sys.executable, "-c", START_SHIM] + base,
        )
        for side in ("ours", "window_start"):
            if side in sides or (side == "ours" and {"beside", "beside_128"} & set(sides)):
                path = os.path.join(d, f"{side}.emb")
                seconds, proc = vs_deepwalk.run_timed(cmds[side] + ["--out", path], common.REPO)
                if proc.returncode != 0:
                    out[side] = dict(seconds=seconds, error=proc.stderr[-400:])
                    continue
                emb[side] = vs_deepwalk.load_embedding(path, graph.n_nodes)[0][perm]
                out[side] = dict(seconds=seconds)
        if {"window", "beside", "beside_128"} & set(sides):
            emb["window"], seconds = window_rows(graph, perm, seed, source)
            out["window"] = dict(seconds=seconds)
        if "ours" in emb and "window" in emb:
            half = np.float32(1 / math.sqrt(2))
            emb["beside"] = np.hstack([emb["ours"] * half, emb["window"] * half])
            emb["beside_128"] = narrowed(emb["beside"], 128)
            for side in ("beside", "beside_128"):
                out[side] = dict(seconds=out["ours"]["seconds"] + out["window"]["seconds"])
    for side in sides:
        if side in emb:
            s = vs_deepwalk.score_protocols(graph, emb[side])
            out[side].update(c1=s["headline"], tuned=s["tuned"]["headline"])
            print(
                f"  {graph.name} seed {seed} {side:13s} {out[side]['seconds']:7.1f} s  "
                f"C = 1 {s['headline']:.2f}  tuned {s['tuned']['headline']:.2f}",
                flush=True,
            )
    return out


def cell(values):
    if not values:
        return "-"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} +- {sd:.2f}"


def render(payload):
    sides = payload["sides"]
    lines = [
        "# The window-T embedding against the defaults, under both protocols",
        "",
        f"`{payload['command']}`",
        "",
        f"Seeds {','.join(map(str, payload['seeds']))}; mean +- sample sd over seeds; "
        "seconds: median wall time of the training command (ours, window-T start), or of "
        "the window-T matrix and its SVD in process (window-T alone).",
        "",
    ]
    for proto, title in (("c1", "C = 1"), ("tuned", "C tuned per split")):
        lines += [f"{title}:", "", "| graph | role | " + " | ".join(NAMES[s] for s in sides) + " |"]
        lines.append("| --- | --- |" + " --- |" * len(sides))
        for e in payload["graphs"]:
            row = [e["name"], panel.role(e["name"])]
            for s in sides:
                vals = [r[s][proto] for r in e["runs"] if proto in r.get(s, {})]
                secs = [r[s]["seconds"] for r in e["runs"] if s in r]
                sec = f" ({statistics.median(secs):.1f} s)" if secs and proto == "c1" else ""
                row.append(cell(vals) + sec)
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += [report.machine_markdown(payload["machine"])]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = common.parser(__doc__, threads=2, out="window_t")
    ap.add_argument("--graphs", default="cora,citeseer,syn-3k-mu0.7,pubmed")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument(
        "--source", default="auto", help="the window-T matrix: exact, walks or auto (window.py)"
    )
    args = ap.parse_args(argv)
    sides = [s for s in args.sides.split(",") if s]
    bad = [s for s in sides if s not in SIDES]
    if bad:
        ap.error(f"--sides: unknown {bad}; choose from {SIDES}")
    seeds = [int(s) for s in args.seeds.split(",")]
    common.threads(args.threads)
    payload = dict(
        command=common.command(None if argv is None else ["window_t.py", *argv]),
        seeds=seeds,
        sides=sides,
        source=args.source,
        machine=common.machine_info(),
        graphs=[],
    )
    for name in args.graphs.split(","):
        graph = vs_deepwalk.panel_entry(name)
        entry = dict(name=name, n=graph.n_nodes, runs=[])
        payload["graphs"].append(entry)
        for seed in seeds:
            entry["runs"].append(run_seed(graph, seed, sides, args.threads, args.source))
            common.write_results(args.out, payload, render(payload))


if __name__ == "__main__":
    main()
