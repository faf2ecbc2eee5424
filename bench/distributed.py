"""Sharded training on a local Ray instance (caps2ne_np/training/ray/):
round time, bytes pulled and pushed per step next to docs/scaling.md's formula, and
accuracy after the same budget as single-machine lazy-Adam training.

    python bench/distributed.py [--graphs cora-bundled,blogcatalog] [--layouts 1x1,1x2,2x1,2x2]
        [--threads T] [--repeats N]

Each layout PxS trains P worker and S server actors (--threads Numba threads each) on a
local Ray instance with --ray-cpus logical CPUs; the single-machine run (``train.fit``
with --adam lazy, --threads threads, the compiled step) sets the budget, the preset's
(converge: epochs from the graph), so every run takes the same batches.  With
--repeats N the single machine and the layouts run N times in turn (single, layouts,
single, ...): each layout's pairs/s is set against the single run just before it, and
the table gives the median ratio.  Pairs/s: a run's pairs over its epochs' times
without its first round (kernels loaded or compiled; loop._rate).  Writes
docs/results/distributed.json and .md (``--update`` merges graphs into an existing
file; ``--out`` another name).
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402
from common import RESULTS, machine_info, write_results  # noqa: E402
from report import machine_markdown, markdown_table  # noqa: E402
from vs_deepwalk import panel_entry, score_embedding, score_protocols  # noqa: E402


def formula(cfg, n_nodes, num_sampled, o_rows=None, x_rows=None):
    """docs/scaling.md, layout B: bytes a worker pulls per step (pushes are the same
    sizes): x rows of the distinct context nodes (<= B q), O and b rows of the distinct
    targets and V' (<= B L + |V'|), and W.  With measured row counts, the same sizes
    at those counts."""
    from caps2ne_np.walks.walks import target_positions

    B, q, k, d = cfg.batch_size, cfg.walk_length, cfg.dim, cfg.feat_dim
    L = len(target_positions(cfg.targets, q)) if cfg.targets != "random" else 1
    x = min(B * q, n_nodes) if x_rows is None else x_rows
    o = min(B * L + num_sampled, n_nodes) if o_rows is None else o_rows
    W = 4 * (q - 1) * k * d
    return dict(
        x_rows=x,
        o_rows=o,
        x_bytes=4 * d * x,
        o_bytes=4 * (k + 1) * o,
        W_bytes=W,
        total=4 * d * x + 4 * (k + 1) * o + W,
    )


def ratio(r):
    """Measured bytes pulled per step over the formula at the measured row counts (W
    counted as the placement moves it)."""
    f = r["formula_at_rows"]
    W = f["W_bytes"] if r.get("w_placement", "server") == "server" else (r["P"] - 1) * f["W_bytes"]
    return r["bytes_pulled"] / (f["x_bytes"] + f["o_bytes"] + W)


def pairs_per_s(result):
    """The run's pairs over its epochs' times without its first round (each history
    entry's pairs over its pairs_per_s: loop._rate)."""
    h = result.history
    return sum(e["pairs"] for e in h) / sum(e["pairs"] / e["pairs_per_s"] for e in h)


def run_single(g, cfg):
    from caps2ne_np.training.train import fit

    with common.clock() as c:
        result = fit(g.indptr, g.indices, g.weights, cfg)
    return result, c.seconds


def run_ray(g, cfg, P, S, w_placement, round_walks=None):
    """A Ray run; ``round_walks``: the replica rounds' walks per node and round
    (``fit``'s round_walks; 0: the parameter server's rounds), None: the default."""
    from caps2ne_np.training.ray.driver import fit

    extra = {} if round_walks is None else dict(round_walks=round_walks)
    stats = {}
    with common.clock() as c:
        result = fit(
            g.indptr,
            g.indices,
            g.weights,
            cfg,
            workers=P,
            servers=S,
            stats=stats,
            w_placement=w_placement,
            **extra,
        )
    wall = c.seconds
    stats.pop("actors", None)
    return result, wall, stats


def main():
    ap = common.parser(__doc__, threads=2, out="distributed")
    ap.add_argument("--graphs", default="cora-bundled")
    ap.add_argument(
        "--layouts",
        default="1x1,1x2,2x1,2x2,1x1w,2x2w",
        help="PxS: replica rounds (the default); a trailing r: the parameter server's "
        "rounds (a batch per worker on pulled rows), w: those with W replicated on the workers",
    )
    ap.add_argument(
        "--round-walks", type=int, default=None,
        help="replica rounds' walks per node and round (default: defaults.ROUND_WALKS)",
    )  # fmt: skip
    ap.add_argument("--walks-per-node", type=int, default=None, help="default: the preset's")
    ap.add_argument("--spectral", default=None, help="default: the preset's")
    ap.add_argument(
        "--seed", type=int, default=None,
        help="the runs' seed (default: the config's); the graph's entry is '<name> seed <N>'",
    )  # fmt: skip
    ap.add_argument("--ray-cpus", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=None, help="default: the preset's budget")
    ap.add_argument("--shuffles", type=int, default=5)
    ap.add_argument(
        "--score",
        choices=("both", "paper", "none"),
        default="both",
        help="score the o_v under both protocols (C = 1 and C tuned), the paper's (C = 1) "
        "or not at all (a speed run: C tuned over 10 splits takes minutes at 200k nodes)",
    )
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each, in turn")
    ap.add_argument(
        "--call-latency", action="store_true", help="also time Ray calls of pull-sized replies"
    )
    ap.add_argument(
        "--spectral-memory",
        type=int,
        default=0,
        metavar="N",
        help="only the peak RSS of driver and actors on an N-node lfr_like graph, P = S = 1, "
        "with the spectral stages on (defaults, --stop auto) and off, each in its own process",
    )
    ap.add_argument("--memory-run", nargs=2, help=argparse.SUPPRESS)  # (mode, N): one process
    ap.add_argument(
        "--render", action="store_true", help="only rewrite the .md from the stored .json"
    )
    ap.add_argument(
        "--note",
        action="append",
        default=[],
        help="a note for the .md (kept in the .json); repeatable",
    )
    args = ap.parse_args()
    if args.memory_run:
        return memory_run(*args.memory_run)
    if args.spectral_memory:
        return spectral_memory(args)
    path = RESULTS / f"{args.out}.json"
    if args.render:
        payload = json.loads(path.read_text())
        payload.setdefault("notes", []).extend(args.note)
        write_results(args.out, payload, markdown(payload))
        return

    import ray

    from caps2ne_np.training.ray.connect import start_ray

    payload = (
        json.loads(path.read_text())
        if args.update and path.exists()
        else dict(command=None, graphs={})
    )
    payload.setdefault("notes", []).extend(args.note)
    if args.update and payload["command"]:
        payload.setdefault("updates", []).append(
            "python bench/distributed.py " + " ".join(sys.argv[1:])
        )
    else:
        payload["command"] = "python bench/distributed.py " + " ".join(sys.argv[1:])
    payload["machine"] = machine_info()
    payload["load_avg_before"] = os.getloadavg()
    start_ray(num_cpus=args.ray_cpus)
    try:
        if args.call_latency:
            payload["call_latency_ms"] = call_latency()
            print(f"Ray calls: {payload['call_latency_ms']}", flush=True)
        for name in filter(None, args.graphs.split(",")):  # --graphs '': the calls only
            measure_graph(name, args, payload)
            payload["load_avg_after"] = os.getloadavg()
            write_results(args.out, payload, markdown(payload))
        payload["load_avg_after"] = os.getloadavg()
        write_results(args.out, payload, markdown(payload))
    finally:
        ray.shutdown()


def measure_graph(name, args, payload):
    """The single machine and every layout on graph ``name``, ``args.repeats`` times in
    turn, into ``payload['graphs'][name]`` (written after each run)."""
    from caps2ne_np.graphs.csr import from_scipy
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve

    pg = panel_entry(name)
    g = from_scipy(pg.adj, directed=True, keep_self_loops=False)
    extra = {k: v for k, v in (("walks_per_node", args.walks_per_node),
                                ("spectral", args.spectral), ("seed", args.seed))
             if v is not None}  # fmt: skip
    base = TrainConfig(adam="lazy", epochs=args.epochs, threads=args.threads, **extra)
    cfg, notes = resolve(base, g.n_nodes, g.indices.shape[0])
    num_sampled = cfg.num_sampled or min(256, g.n_nodes - 1)
    entry = dict(
        n_nodes=g.n_nodes, n_edges=int(g.indices.shape[0]), notes=notes, config=cfg.to_dict(),
        runs=[], threads=args.threads, repeats=args.repeats,
    )  # fmt: skip
    entry["formula_bound"] = formula(cfg, g.n_nodes, num_sampled)  # the same per run
    payload["graphs"][name if args.seed is None else f"{name} seed {args.seed}"] = entry
    print(f"{name}: {g.n_nodes} nodes; {notes[0]}; {notes[-1]}", flush=True)
    for rep in range(args.repeats):
        scored = rep == 0 and args.score != "none"  # the same bits every time
        single, wall = run_single(g, cfg)
        score = _score(pg, single.params.O, args) if scored else None
        one = dict(
            layout="single", rep=rep, wall=wall, load_avg_after=os.getloadavg()[0],
            train_seconds=sum(h["seconds"] for h in single.history),
            pairs_per_s=pairs_per_s(single), loss=single.history[-1]["loss"], score=score,
        )  # fmt: skip
        entry["runs"].append(one)
        print(
            f"  single ({args.threads} threads): {wall:.1f}s, {one['pairs_per_s']:.0f} pairs/s, "
            f"loss {one['loss']:.4f}" + (f", score {score['headline']:.2f}" if score else ""),
            flush=True,
        )
        for layout in args.layouts.split(","):
            run = ray_layout(g, cfg, layout, num_sampled, single, args.round_walks)
            run.update(rep=rep, single_pairs_per_s=one["pairs_per_s"])
            if scored:
                run["score"] = _score(pg, run.pop("O"), args)
            run.pop("O", None)
            entry["runs"].append(run)
            print(
                f"  {layout}: {run['wall']:.1f}s, {run['pairs_per_s']:.0f} pairs/s "
                f"({run['pairs_per_s'] / one['pairs_per_s']:.3f} x single), " + _replica_line(run)
                if run["rounds_kind"] == "replicas"
                else f"  {layout}: {run['wall']:.1f}s, {run['pairs_per_s']:.0f} pairs/s "
                f"({run['pairs_per_s'] / one['pairs_per_s']:.3f} x single), round "
                f"{run['round_ms']:.2f} ms (worker batch {run['worker_ms']['batch']:.2f} pull "
                f"{run['worker_ms']['pull']:.2f} compute {run['worker_ms']['compute']:.2f}), "
                f"pulled {run['bytes_pulled'] / 1e3:.1f} kB per step, loss {run['loss']:.4f}, "
                f"equal to single: {run['equal_to_single']}",
                flush=True,
            )
            write_results(args.out, payload, markdown(payload))


def _score(pg, O, args):
    """The o_v's score under the protocols ``args.score`` asks for."""
    if args.score == "paper":
        return score_embedding(pg, O, shuffles=args.shuffles)
    return score_protocols(pg, O, shuffles=args.shuffles)


def _replica_line(run):
    ms, b = run["worker_ms"], run["bytes_per_pair"]
    return (
        f"{run['rounds']} rounds of {run['round_ms']:.0f} ms (worker per round: train "
        f"{ms['train']:.1f} diff {ms['diff']:.1f} absorb {ms['absorb']:.1f}; server merge "
        f"{max(run['server_merge_ms']):.1f}), bytes per pair pushed {b['pushed']:.1f} "
        f"merged in {b['merged']:.1f} (loaded {run['bytes_loaded'] / 1e6:.1f} MB), loss "
        f"{run['loss']:.4f}, equal to single: {run['equal_to_single']}"
    )


def ray_layout(g, cfg, layout, num_sampled, single, round_walks=None):
    """One Ray run of ``layout`` ('PxS': replica rounds; a trailing r: the parameter
    server's rounds, w: those with W on the workers) with the single machine's config
    and threads: its figures, and its O (key 'O')."""
    from caps2ne_np.training.options.config import TrainConfig

    w_placement = "workers" if layout.endswith("w") else "server"
    P, S = (int(x) for x in layout.rstrip("wr").split("x"))
    n_batches = -(-g.n_nodes * cfg.walks_per_node // cfg.batch_size)
    rcfg = TrainConfig(**{**cfg.to_dict(), "targets": cfg.targets})
    if layout.endswith("r"):
        round_walks = 0
    result, wall, stats = run_ray(g, rcfg, P, S, w_placement, round_walks)
    if stats["workers"][0]["step"] == "compiled replica":
        return replica_layout(layout, P, S, result, wall, stats, single)
    train_s = sum(h["seconds"] for h in result.history)
    rounds = cfg.epochs * -(-n_batches // P)
    w = stats["workers"]
    done = sum(x["steps"] for x in w)

    def per_step(key, scale=1.0):
        return scale * sum(x[key] for x in w) / done

    return dict(
        layout=layout, rounds_kind="rows", P=P, S=S, w_placement=w_placement, wall=wall,
        train_seconds=train_s,
        pairs_per_s=pairs_per_s(result), rounds=rounds, round_ms=1e3 * train_s / rounds,
        step_ms=1e3 * train_s / (cfg.epochs * n_batches),
        step=sorted({x.get("step", "python") for x in w}),
        worker_ms={k: per_step(k, 1e3) for k in ("batch", "pull", "compute", "W_apply")},
        server_apply_ms=[1e3 * s["apply"] / max(s["pushes"], 1) for s in stats["servers"]],
        bytes_pulled=per_step("pulled"), bytes_pushed=per_step("pushed"),
        bytes_requested=per_step("requested"),
        formula_at_rows=formula(cfg, g.n_nodes, num_sampled, per_step("o_rows"),
                                per_step("x_rows")),
        server_rows=[s["rows"] for s in stats["servers"]],
        server_row_bytes=[s["row_bytes"] for s in stats["servers"]],
        peak_rss=dict(
            servers=[s["peak_rss"] for s in stats["servers"]],
            workers=[x["peak_rss"] for x in w], driver=stats["driver_peak_rss"],
        ),
        loss=result.history[-1]["loss"], load_avg_after=os.getloadavg()[0],
        equal_to_single=bool(np.array_equal(result.params.O, single.params.O)),
        O=result.params.O,
    )  # fmt: skip


def replica_layout(layout, P, S, result, wall, stats, single):
    """The figures of a run in replica rounds (ray/replica.py): per round, the workers'
    times (train: the compiled chunk; diff: finding the changed rows; absorb: copying
    the merged rows in) and the servers' merge; bytes per trained pair pushed (changed
    rows with their moments) and merged in (every worker's), beside the initial load."""
    w, srv = stats["workers"], stats["servers"]
    train_s = sum(h["seconds"] for h in result.history)
    pairs = sum(h["pairs"] for h in result.history)
    rounds = max(x["rounds"] for x in w)
    return dict(
        layout=layout, rounds_kind="replicas", P=P, S=S, w_placement="every worker",
        wall=wall, train_seconds=train_s, pairs_per_s=pairs_per_s(result), rounds=rounds,
        round_ms=1e3 * train_s / rounds, pairs=pairs,
        worker_ms={k: 1e3 * max(x[k] for x in w) / rounds for k in ("train", "diff", "absorb")},
        compute_s_per_pair=sum(x["train"] for x in w) / pairs,
        server_merge_ms=[1e3 * s["apply"] / rounds for s in srv],
        bytes_per_pair=dict(
            pushed=sum(x["pushed"] + x.get("moments_pushed", 0) for x in w) / pairs,
            merged=sum(x["pulled"] + x.get("moments_pulled", 0) for x in w) / pairs,
        ),
        # rows' values only each round (8fc42b5 on): the moments go at a flush
        values_only=all("moments_pushed" in x for x in w),
        bytes_loaded=sum(x["loaded"] for x in w),
        held_bytes=[x["held_bytes"] for x in w],
        server_rows=[s["rows"] for s in srv], server_row_bytes=[s["row_bytes"] for s in srv],
        peak_rss=dict(
            servers=[s["peak_rss"] for s in srv], workers=[x["peak_rss"] for x in w],
            driver=stats["driver_peak_rss"],
        ),
        loss=result.history[-1]["loss"], load_avg_after=os.getloadavg()[0],
        equal_to_single=bool(np.array_equal(result.params.O, single.params.O)),
        O=result.params.O,
    )  # fmt: skip


def call_latency(reps=5, calls=200):
    """Median ms per ``ray.get`` of a call to an actor on this Ray instance: an empty
    call, and calls returning a Cora batch's rows (456 rows of 128 floats, 233 kB) with
    and without W (9 x 128 x 128 floats, 590 kB more), as a worker's pull does."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def __init__(self):
            self.rows = np.zeros((456, 128), np.float32)
            self.W = np.zeros((9, 128, 128), np.float32)

        def nothing(self):
            return None

        def pull(self, with_W):
            return [self.rows, self.W if with_W else None]

    a = Echo.remote()
    ray.get(a.nothing.remote())
    out = {}
    for name, call in [
        ("empty", lambda: a.nothing.remote()),
        ("rows 233 kB", lambda: a.pull.remote(False)),
        ("rows and W 823 kB", lambda: a.pull.remote(True)),
    ]:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(calls):
                ray.get(call())
            times.append(1e3 * (time.perf_counter() - t0) / calls)
        out[name] = float(np.median(times))
    ray.kill(a)
    return out


def spectral_memory(args):
    """Peak RSS of the driver and the actors of a P = S = 1 run on an lfr_like graph of
    ``args.spectral_memory`` nodes, with the spectral stages (the defaults with --stop
    auto, --epochs 2) and without (--spectral none --stop none), each run in a fresh
    process; prints one JSON line per run."""
    for mode in ("on", "off"):
        cmd = [sys.executable, __file__, "--memory-run", mode, str(args.spectral_memory)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        print(out.strip().splitlines()[-1], flush=True)


def memory_run(mode, n):
    """One run of ``spectral_memory`` in this process."""
    import resource

    from caps2ne_np.graphs.csr import from_scipy
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.ray.connect import start_ray
    from caps2ne_np.training.ray.driver import fit
    from graphgen import lfr_like

    adj, _ = lfr_like(int(n), avg_degree=20, seed=0)
    g = from_scipy(adj, directed=True, keep_self_loops=False)
    del adj
    extra = dict(spectral="none", stop="none") if mode == "off" else dict(stop="auto")
    cfg = TrainConfig(adam="lazy", epochs=2, walks_per_node=1, threads=1, **extra)
    start_ray(num_cpus=2)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    stats = {}
    with common.clock() as c:
        r = fit(g.indptr, g.indices, g.weights, cfg, stats=stats)
    mib = 1 << 20
    print(json.dumps(dict(
        mode=mode, nodes=g.n_nodes, stored_edges=int(g.indices.shape[0]), wall=c.seconds,
        epochs=len(r.history), spectral=r.config.spectral, stop=r.config.stop,
        driver_before_fit_MiB=before / mib, driver_peak_MiB=stats["driver_peak_rss"] / mib,
        server_peak_MiB=[x["peak_rss"] / mib for x in stats["servers"]],
        worker_peak_MiB=[x["peak_rss"] / mib for x in stats["workers"]],
        load_avg=os.getloadavg()[0],
    )))  # fmt: skip


ROWS_HEADER = [
    "layout",
    "train s",
    "pairs/s (x the single run before it)",
    "round ms",
    "worker ms/step: batch / pull / compute / W Adam",
    "server ms per push (server 0 also updates W when it holds it)",
    "kB per step: pulled / pushed",
    "formula kB (docs/scaling.md) at measured rows",
    "final loss",
    "score",
    "O equal to single",
    "load avg after",
]


def markdown(payload):
    info = payload["machine"]
    out = [
        "# Sharded training on a local Ray instance\n",
        f"`{payload['command']}`; load average {payload['load_avg_before'][0]:.1f} before, "
        f"{payload.get('load_avg_after', [float('nan')])[0]:.1f} after.\n",
        machine_markdown(info),
    ]
    out += [f"Updated by `{u}`.\n" for u in payload.get("updates", [])]
    if "call_latency_ms" in payload:
        out.append(
            "Ray calls on this instance (median ms per `ray.get` of an actor call, 5 x 200 "
            "calls): "
            + "; ".join(f"{k}: {v:.2f}" for k, v in payload["call_latency_ms"].items())
            + ".\n"
        )
    out += [f"Note: {n}\n" for n in payload.get("notes", [])]
    for name, e in payload["graphs"].items():
        out.append(f"\n## {name}: {e['n_nodes']:,} nodes, {e['n_edges']:,} directed edges\n")
        out.append("\n".join(f"- {n}" for n in e["notes"]) + "\n")
        replica = [r for r in e["runs"] if r.get("rounds_kind") == "replicas"]
        if replica:
            out.append(_replica_table(e))
        rows = [_table_row(r, e) for r in e["runs"] if r.get("rounds_kind") != "replicas"]
        if not replica or len(rows) > e["repeats"]:  # not only the single runs
            if replica:
                out.append("\nThe parameter server's rounds (a batch per worker, pulled rows):\n")
            out.append(markdown_table(ROWS_HEADER, rows))
        mem = [
            f"- P={r['P']}, S={r['S']}, W on {r['w_placement']}: server rows "
            f"{r['server_rows']}, row tables "
            f"{[round(b / 1e6, 2) for b in r['server_row_bytes']]} MB; peak RSS servers "
            f"{[round(b / 1e6) for b in r['peak_rss']['servers']]} MB, workers "
            f"{[round(b / 1e6) for b in r['peak_rss']['workers']]} MB, driver "
            f"{r['peak_rss']['driver'] / 1e6:.0f} MB"
            for r in e["runs"]
            if r["layout"] != "single"
        ]
        out.append(_ratio_summary(e))
        out.append(_projection(e))
        out.append("\nMemory:\n\n" + "\n".join(mem) + "\n")
    return "\n".join(out) + "\n"


NETWORK = dict(bits_per_s=10e9, call_s=1e-4)
"""The cluster of the projection: 10 Gbit/s per machine, 0.1 ms per call."""


def project(r, P, network=NETWORK):
    """A round of P workers and S = P servers, one machine each, projected from a
    replica-rounds run ``r`` at P = 1 (docs/distributed.md, "Projection"): per round
    and worker, the compute of its 1/P of the round's pairs (the measured seconds per
    pair), the rows' way out and in (at most the round's changed rows each way: twice
    the measured bytes per pair pushed at P = 1, times the round's pairs, over the
    link; three times that where --sync-moments auto merges the moments every round),
    the calls (a train call, S pushes, the merge, S fetches of merged rows),
    and what does not shrink with P (the measured diff and merge per round; absorb
    taken equal to diff).  Returns (pairs/s, communication's share, overheads' share)."""
    from caps2ne_np.defaults import SYNC_ROUND_MAX_WORKERS

    pairs_round = r["pairs"] / r["rounds"]
    compute = r["compute_s_per_pair"] * pairs_round / P
    # --sync-moments auto: at 2..SYNC_ROUND_MAX_WORKERS the moments go with the values
    # every round, 3 x a P = 1 run's bytes (a value and two moments a parameter)
    # (a run from before 8fc42b5 pushed the moments every round, counted in its bytes)
    sync = 2 <= P <= SYNC_ROUND_MAX_WORKERS and r.get("values_only", False)
    bytes_pair = r["bytes_per_pair"]["pushed"] * (3 if sync else 1)
    net = 2 * bytes_pair * pairs_round / (network["bits_per_s"] / 8)
    # a train call, S pushes, the merge, S fetches; the moments' flush, S merges, absorb
    calls = (2 + 2 * P + (2 + P if sync else 0)) * network["call_s"]
    fixed = (2 * r["worker_ms"]["diff"] + max(r["server_merge_ms"])) / 1e3
    total = compute + net + calls + fixed
    return pairs_round / total, (net + calls) / total, fixed / total


def _projection(e):
    """The projection (``project``) of the graph's last P = 1 replica run (the first
    may compile kernels whose cache a change of their module voided)."""
    ones = [r for r in e["runs"] if r.get("rounds_kind") == "replicas" and r["P"] == 1]
    if not ones:
        return ""
    r = ones[-1]
    rows = []
    for P in (1, 4, 16, 64):
        rate, comm, fixed = project(r, P)
        rows.append([str(P), f"{rate:,.0f}", f"{rate / P:,.0f}", f"{100 * comm:.1f}%",
                     f"{100 * fixed:.1f}%"])  # fmt: skip
    pairs_round = r["pairs"] / r["rounds"]
    return (
        f"\nProjection (10 Gbit/s, 0.1 ms per call; S = P; from the last P = 1 run: "
        f"{1e6 * r['compute_s_per_pair']:.2f} us per pair on one thread, "
        f"{r['bytes_per_pair']['pushed']:.0f} bytes per pair pushed, "
        f"{pairs_round:,.0f} pairs per round, diff {r['worker_ms']['diff']:.1f} ms and merge "
        f"{max(r['server_merge_ms']):.1f} ms per round):\n\n"
        + markdown_table(
            ["machines P", "pairs/s", "per machine", "communication of a round",
             "diff, absorb, merge of a round"],
            rows,
        )
    )  # fmt: skip


def _replica_table(e):
    """The replica rounds' runs of a graph (``e``) beside the single runs before them."""
    rows = []
    for r in e["runs"]:
        score = _score_cell(r)
        if r["layout"] == "single":
            rows.append(["single machine", f"{r['train_seconds']:.1f}", _rate_cell(r)]
                        + ["-"] * 5 + [f"{r['loss']:.4f}", score, "-"])  # fmt: skip
            continue
        if r.get("rounds_kind") != "replicas":
            continue
        ms, b = r["worker_ms"], r["bytes_per_pair"]
        rows.append([
            f"P={r['P']}, S={r['S']}", f"{r['train_seconds']:.1f}", _rate_cell(r),
            f"{r['rounds']} x {r['round_ms']:.0f}",
            f"{ms['train']:.1f} / {ms['diff']:.1f} / {ms['absorb']:.1f}",
            " / ".join(f"{x:.1f}" for x in r["server_merge_ms"]),
            f"{b['pushed']:.1f} / {b['merged']:.1f}",
            f"{1e6 * r['compute_s_per_pair']:.2f}",
            f"{r['loss']:.4f}", score, "yes" if r["equal_to_single"] else "no",
        ])  # fmt: skip
    return "\nReplica rounds (ray/replica.py):\n\n" + markdown_table(
        [
            "layout", "train s", "pairs/s (x the single run before it)", "rounds x ms",
            "worker ms per round: train / diff / absorb", "server merge ms per round",
            "bytes per pair: pushed / merged in", "worker compute us per pair",
            "final loss", "score (C = 1 / C tuned)", "O equal to single",
        ],
        rows,
    )  # fmt: skip


def _score_cell(r):
    """The run's score: C = 1, and C tuned where the run measured it (older runs: C = 1)."""
    s = r.get("score")
    if not s:
        return "-"
    return f"{s['headline']:.2f}" + (f" / {s['tuned']['headline']:.2f}" if "tuned" in s else "")


def _table_row(r, e):
    """A run's row of the graph's table (``e``, the graph's entry)."""
    score = _score_cell(r)
    load = f"{r['load_avg_after']:.1f}" if "load_avg_after" in r else "-"
    if r["layout"] == "single":
        return ["single machine", f"{r['train_seconds']:.1f}", _rate_cell(r)] + ["-"] * 5 + [
            f"{r['loss']:.4f}", score, "-", load,
        ]  # fmt: skip
    f = dict(r["formula_at_rows"])
    if r.get("w_placement") == "workers":  # no W pulled; P - 1 gradients gathered
        f["total"] = f["x_bytes"] + f["o_bytes"] + (r["P"] - 1) * f["W_bytes"]
    ms = r["worker_ms"]
    return [
        f"P={r['P']}, S={r['S']}, W on {r['w_placement']}",
        f"{r['train_seconds']:.1f}",
        _rate_cell(r),
        f"{r['round_ms']:.2f}",
        f"{ms['batch']:.2f} / {ms['pull']:.2f} / {ms['compute']:.2f} / {ms['W_apply']:.2f}",
        " / ".join(f"{x:.2f}" for x in r["server_apply_ms"]),
        f"{r['bytes_pulled'] / 1e3:.1f} / {r['bytes_pushed'] / 1e3:.1f} "
        f"(+{r['bytes_requested'] / 1e3:.1f} ids)",
        f"{f['total'] / 1e3:.1f} ({f['x_rows']:.0f} x, {f['o_rows']:.0f} o rows; "
        f"measured / formula {ratio(r):.3f}); "
        f"bound {e['formula_bound']['total'] / 1e3:.1f}",
        f"{r['loss']:.4f}",
        score,
        "yes" if r["equal_to_single"] else "no",
        load,
    ]


def _rate_cell(r):
    """A run's pairs/s, and a layout's ratio to the single run of its repeat."""
    if "pairs_per_s" not in r:
        return "-"
    if "single_pairs_per_s" not in r:
        return f"{r['pairs_per_s']:,.0f}"
    return f"{r['pairs_per_s']:,.0f} ({r['pairs_per_s'] / r['single_pairs_per_s']:.3f} x)"


def _ratio_summary(e):
    """Per layout, the median over the repeats of its pairs/s over the single run's."""
    ratios = {}
    for r in e["runs"]:
        if "single_pairs_per_s" in r:
            ratios.setdefault(r["layout"], []).append(r["pairs_per_s"] / r["single_pairs_per_s"])
    if not ratios:
        return ""
    cells = [
        f"{k}: {np.median(v):.3f} (runs: {', '.join(f'{x:.3f}' for x in v)})"
        for k, v in ratios.items()
    ]
    threads = e.get("threads", "?")
    return (
        f"\nPairs/s of each layout over the single machine's ({threads} Numba threads on "
        f"both sides, the same batches), median over the repeats: {'; '.join(cells)}.\n"
    )


if __name__ == "__main__":
    main()
