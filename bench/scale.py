"""Scale: how each phase of a run grows from 100,000 to 1,000,000 nodes on one machine.

For each size N the script generates (seeded) a power-law graph with about 10 N
undirected edges, writes it as a text edge list (integer ids, and a copy with string
ids), and times, each phase in a fresh process so that its peak memory is its own:

  load     ``graph.read_edgelist`` of the text file -> CSR (integer ids, then string ids);
           peak RSS above the process's RSS before the call, against the bytes of the
           result (CSR arrays + the id list and its strings)
  cache    ``graph_cache.save_graph_cache`` once, then ``load_graph_cache`` in a new process
  walks    generating all N*T walks (T = 1, q = 10) in chunks of ``walk_chunk``, as
           ``walks.WalkSource`` does during training
  train    ``train.fit`` with TrainConfig(adam='lazy', walks_per_node=1, targets='all',
           dim=128, feat_dim=128, batch_size=128, threads=2): featureless, 1,280 pairs
           per step; an epoch (N / 128 steps) up to 200,000 nodes, else ``--steps``
           (2,000), at most ``--train-seconds``, stopped from ``step_callback``.  Pairs/s
           over the steps after ``--warmup``; peak RSS (getrusage) against the formula
           params + Adam state + CSR + one walk chunk

The throughput target compares the 1M-node run with the BlogCatalog graph
(10,312 nodes, its real edges; a generated graph of its size when the data directory
is missing).  On a shared machine the load changes from minute to minute, so the
reference runs in the same process, in turns: every ``--window`` steps of ours,
``step_callback`` runs ``--window`` steps of a fresh ``train.fit`` on the reference;
each run's steps are timed within its own turns.  Target: ours >= 70% of the
reference (the cost of a pair does not depend on N).

    python bench/scale.py                  # 100k and 1M nodes, BlogCatalog reference (~8 min)
    python bench/scale.py --smoke          # CI: 20k nodes, few steps (< 60 s) -> scale_smoke.*
    python bench/scale.py --sizes 100000 --steps 500 --results-dir /tmp/r

Writes docs/results/scale.json and scale.md (scale_smoke.* with --smoke).
"""

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import harness  # bench/harness.py: the shared flags (no import of its own, as report.py)
import report  # bench/report.py: no import of its own, so the workers may load it too

BENCH = Path(__file__).resolve().parent
EDGES_PER_NODE = 10
GAMMA = 2.5  # degree exponent of the generated graph: P(deg = x) ~ x^-GAMMA
OFFSET = 10  # Chung-Lu weight of node i: (i + OFFSET)^(-1 / (GAMMA - 1))
BLOGCATALOG = "blogcatalog"
BLOGCATALOG_NODES, BLOGCATALOG_EDGES = 10_312, 333_983
TRAIN = dict(
    adam="lazy",
    walks_per_node=1,
    targets="all",
    dim=128,
    feat_dim=128,
    batch_size=128,
    threads=2,
    walk_length=10,
    seed=0,
    preset="paper",
)
REFERENCE_WINDOW_WARMUP = (
    2  # steps not timed after each fresh reference fit (new parameters, cold caches)
)
FULL_SIZES = (100_000, 1_000_000)
SMOKE_SIZES = (20_000,)


# --------------------------------------------------------------------------- memory


def peak_rss():
    """Peak resident set size of this process in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss():
    """Resident set size now, in bytes (/proc/self/statm; the peak where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return peak_rss()


def id_map_bytes(node_ids):
    """Bytes of the id list and its strings (what the Graph keeps besides the CSR)."""
    return sys.getsizeof(node_ids) + sum(sys.getsizeof(s) for s in node_ids)


def csr_bytes(g):
    return g.indptr.nbytes + g.indices.nbytes + (g.weights.nbytes if g.weights is not None else 0)


def memory_formula(n, nnz, k, d, q, walk_chunk, n_walks, weighted=False):
    """Bytes of params + Adam state + CSR + one walk chunk (float32 / int32 / int64)."""
    params = 4 * (n * (k + d + 1) + (q - 1) * k * d)  # O, X, biases, W
    adam = 2 * params  # m and v of every parameter
    csr = 8 * (n + 1) + 4 * nnz + (4 * nnz if weighted else 0)
    chunk = 4 * min(walk_chunk, n_walks) * q
    return dict(
        params=params, adam=adam, csr=csr, walk_chunk=chunk, total=params + adam + csr + chunk
    )


# --------------------------------------------------------------------------- the graph


def power_law_edges(n, m, seed):
    """m distinct undirected edges (u, v), u != v, over nodes 0..n-1, int64 (m, 2).

    Node i has weight w_i = (i + OFFSET)^(-1/(GAMMA-1)) (Chung-Lu: expected degree
    proportional to w_i, so degrees follow a power law with exponent GAMMA).  Every node
    first gets one edge to a node drawn by weight (none is isolated, as in preferential
    attachment); the other edges join two nodes drawn by weight, duplicates and self
    loops redrawn.  Labels are then shuffled, each edge randomly oriented and the list
    shuffled, so neither ids nor line order give the degrees away.
    """
    rng = np.random.default_rng(seed)
    w = (np.arange(n, dtype=np.float64) + OFFSET) ** (-1.0 / (GAMMA - 1.0))
    cdf = np.cumsum(w)
    cdf /= cdf[-1]

    def draw(size):
        return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), n - 1)

    def keys(u, v):
        ok = u != v
        return np.minimum(u[ok], v[ok]) * n + np.maximum(u[ok], v[ok])

    node = np.arange(n, dtype=np.int64)
    target = draw(n)
    target[target == node] = (node[target == node] + 1) % n
    have = np.unique(keys(node, target))
    while have.size < m:
        need = m - have.size
        new = np.setdiff1d(
            np.unique(keys(draw(need + need // 8 + 100), draw(need + need // 8 + 100))),
            have,
            assume_unique=True,
        )
        if new.size > need:
            new = new[rng.permutation(new.size)[:need]]
        have = np.union1d(have, new)
    edges = np.stack([have // n, have % n], axis=1)
    flip = rng.random(m) < 0.5
    edges[flip] = edges[flip][:, ::-1]
    label = rng.permutation(n)
    return label[edges[rng.permutation(m)]]


def _digits(x, width):
    """ASCII digits of x (int64 >= 0, < 10^width), right-aligned in (r, width), and the mask
    of the digits to keep (no leading zeros)."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    chars = ((x[:, None] // powers) % 10 + 48).astype(np.uint8)
    n_digits = np.maximum(1, (x[:, None] >= powers).sum(axis=1))
    keep = np.arange(width)[None, :] >= (width - n_digits)[:, None]
    return chars, keep


def write_edge_list(path, edges, prefix=""):
    """'<prefix>u <prefix>v\\n' per edge, formatted with NumPy in chunks (no loop over lines)."""
    width = max(1, len(str(int(edges.max()))))
    pre = np.frombuffer(prefix.encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        for a in range(0, edges.shape[0], 1 << 20):
            block = edges[a : a + (1 << 20)]
            r = block.shape[0]
            cu, ku = _digits(block[:, 0], width)
            cv, kv = _digits(block[:, 1], width)
            p = np.broadcast_to(pre, (r, pre.size))
            one = np.ones((r, 1), dtype=bool)
            ones_p = np.ones((r, pre.size), dtype=bool)
            chars = np.concatenate(
                [p, cu, np.full((r, 1), 32, np.uint8), p, cv, np.full((r, 1), 10, np.uint8)], axis=1
            )
            keep = np.concatenate([ones_p, ku, one, ones_p, kv, one], axis=1)
            f.write(chars[keep].tobytes())


# ------------------------------------------------------------------ workers (one per process)


def worker_generate(args):
    t0 = time.perf_counter()
    edges = power_law_edges(args.size, args.edges or EDGES_PER_NODE * args.size, args.seed)
    t_gen = time.perf_counter() - t0
    out = dict(n_nodes=args.size, n_edges=int(edges.shape[0]), generate_s=t_gen, files={})
    deg = np.bincount(edges.ravel(), minlength=args.size)
    out.update(
        max_degree=int(deg.max()), mean_degree=float(deg.mean()), isolated=int((deg == 0).sum())
    )
    for kind, prefix in (("int", ""), ("str", "v")):
        if kind not in args.kinds.split(","):
            continue
        path = Path(args.workdir) / f"g{args.size}_{kind}.txt"
        t0 = time.perf_counter()
        write_edge_list(path, edges, prefix)
        out["files"][kind] = dict(
            path=str(path), bytes=path.stat().st_size, write_s=time.perf_counter() - t0
        )
    return out


def worker_load(args):
    from caps2ne_np.graphs import graph

    warm = Path(args.workdir) / "warm.txt"
    warm.write_text("a b 2\n1 2\n")
    graph.read_edgelist(warm)  # loads the compiled kernels from Numba's cache (or compiles them)
    before = current_rss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        g = graph.read_edgelist(args.path)
        load_s = time.perf_counter() - t0
    peak = peak_rss()
    result = csr_bytes(g) + id_map_bytes(g.node_ids)
    out = dict(
        load_s=load_s,
        rss_before=before,
        peak_rss=peak,
        peak_above_before=peak - before,
        result_bytes=result,
        csr_bytes=csr_bytes(g),
        id_map_bytes=id_map_bytes(g.node_ids),
        n_nodes=g.n_nodes,
        nnz=g.n_edges,
        stats=g.stats,
    )
    if args.write_cache:
        t0 = time.perf_counter()
        from caps2ne_np.graphs.graph_cache import save_graph_cache

        cache = save_graph_cache(g, args.path)
        out.update(cache_write_s=time.perf_counter() - t0, cache_bytes=cache.stat().st_size)
    return out


def worker_cache_and_walks(args):
    from caps2ne_np.graphs.graph_cache import load_graph_cache
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.walks import walks as walks_mod

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        g = load_graph_cache(args.path)
        cache_s = time.perf_counter() - t0
    cfg = TrainConfig(**dict(TRAIN, threads=args.threads))
    import numba

    numba.set_num_threads(min(cfg.threads, numba.config.NUMBA_NUM_THREADS))
    source = walks_mod.WalkSource(
        g.indptr,
        g.indices,
        g.weights,
        cfg.walks_per_node,
        cfg.walk_length,
        derive_seed(cfg.seed, "walks"),
    )
    source.walks(np.arange(min(1000, source.n_walks)))  # load the kernel
    t0 = time.perf_counter()
    checksum = 0
    for lo in range(0, source.n_walks, cfg.walk_chunk):
        ids = np.arange(lo, min(lo + cfg.walk_chunk, source.n_walks), dtype=np.int64)
        checksum += int(source.walks(ids)[:, -1].sum())
    walk_s = time.perf_counter() - t0
    return dict(
        cache_load_s=cache_s,
        walks=source.n_walks,
        walk_s=walk_s,
        walks_per_s=source.n_walks / walk_s,
        walk_chunk=cfg.walk_chunk,
        checksum=checksum,
    )


class _Stop(Exception):
    """Raised from step_callback to end a timed run after a fixed number of steps."""


def load_train_graph(path):
    """The Graph to train on: BlogCatalog from the data directory, or a cached edge list."""
    from caps2ne_np.graphs.csr import from_scipy
    from caps2ne_np.graphs.graph_cache import load_graph_cache

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path == BLOGCATALOG:
            from caps2ne_np.graphs.datasets import load_dataset
            from caps2ne_np.graphs.downloads import default_data_dir

            ds = load_dataset(BLOGCATALOG, default_data_dir())
            return from_scipy(ds.adj, ds.node_ids)
        return load_graph_cache(path)


def step_rates(windows, warmup, pairs_per_step):
    """Pairs/s from windows of step-end times: the differences within each window, after
    dropping the first ``warmup`` of them in every window."""
    steps = np.concatenate(
        [np.diff(np.asarray(w))[warmup:] for w in windows if len(w) > warmup + 1] or [[]]
    )
    if steps.size == 0:
        return dict(
            timed_steps=0,
            pairs_per_s=None,
            pairs_per_s_median_step=None,
            step_ms=None,
            step_ms_median=None,
        )
    return dict(
        timed_steps=int(steps.size),
        pairs_per_s=float(pairs_per_step * steps.size / steps.sum()),
        pairs_per_s_median_step=float(pairs_per_step / np.median(steps)),
        step_ms=float(1e3 * steps.mean()),
        step_ms_median=float(1e3 * np.median(steps)),
    )


def worker_train(args):
    """Train on --path with train.fit; with --reference, every --window steps run --window
    steps of a fresh fit on the reference graph from inside step_callback, so that both
    runs see the same machine load (the reference's steps are not counted as ours)."""
    import scipy.linalg.cython_blas  # noqa: F401  (see BLAS_NOTE)

    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.train import fit

    rss_start = current_rss()
    ref = load_train_graph(args.reference) if args.reference else None
    rss_ref = current_rss()
    g = load_train_graph(args.path)
    cfg = TrainConfig(**dict(TRAIN, threads=args.threads), epochs=1)
    n_batches = math.ceil(g.n_nodes * cfg.walks_per_node / cfg.batch_size)
    cfg.epochs = max(1, math.ceil(args.steps / n_batches)) if args.steps else 1
    limit = args.steps if args.steps else n_batches
    ref_cfg = TrainConfig(**dict(TRAIN, threads=args.threads), epochs=10**6)
    windows, ref_windows = [[]], []
    n_steps = [0]

    def run_reference():
        stamps = []

        def on_ref_step(epoch, batch, step):
            stamps.append(time.perf_counter())
            if len(stamps) > args.window:
                raise _Stop

        try:
            fit(ref.indptr, ref.indices, ref.weights, ref_cfg, step_callback=on_ref_step)
        except _Stop:
            pass
        ref_windows.append(stamps)

    def on_step(epoch, batch, step):
        now = time.perf_counter()
        windows[-1].append(now)
        n_steps[0] = step + 1
        if step + 1 >= limit or (args.train_seconds and now - windows[0][0] >= args.train_seconds):
            raise _Stop
        if ref is not None and len(windows[-1]) > args.window + (
            args.warmup if len(windows) == 1 else 0
        ):
            run_reference()
            windows.append([])  # the next step's time spans the pause: a new window starts after it

    rss_graph = current_rss()
    t0 = time.perf_counter()
    try:
        fit(g.indptr, g.indices, g.weights, cfg, step_callback=on_step)
    except _Stop:
        pass
    total_s = time.perf_counter() - t0
    pairs_per_step = cfg.batch_size * cfg.walk_length  # targets='all': every position of every walk
    first, rest = windows[0], windows[1:]
    ours = step_rates([first[min(args.warmup, max(len(first) - 2, 0)) :]] + rest, 0, pairs_per_step)
    setup_s = float(first[0] - t0)
    formula = memory_formula(
        g.n_nodes,
        g.n_edges,
        cfg.dim,
        cfg.feat_dim,
        cfg.walk_length,
        cfg.walk_chunk,
        g.n_nodes * cfg.walks_per_node,
        g.weights is not None,
    )
    out = dict(
        n_nodes=g.n_nodes,
        nnz=g.n_edges,
        steps=n_steps[0],
        batches_per_epoch=n_batches,
        full_epoch=n_steps[0] >= n_batches,
        warmup_steps=args.warmup,
        window=args.window,
        setup_s=setup_s,
        total_s=total_s,
        **ours,
        epoch_s_estimate=setup_s + n_batches * ours["step_ms"] / 1e3,
        rss_start=rss_start,
        rss_reference=rss_ref - rss_start,
        rss_after_graph=rss_graph,
        peak_rss=peak_rss(),
        formula=formula,
        id_map_bytes=id_map_bytes(g.node_ids),
    )
    if ref is not None:
        out["reference"] = dict(
            n_nodes=ref.n_nodes,
            nnz=ref.n_edges,
            windows=len(ref_windows),
            steps=sum(len(w) for w in ref_windows),
            **step_rates(ref_windows, REFERENCE_WINDOW_WARMUP, pairs_per_step),
        )
        out["reference"]["formula"] = memory_formula(
            ref.n_nodes,
            ref.n_edges,
            cfg.dim,
            cfg.feat_dim,
            cfg.walk_length,
            cfg.walk_chunk,
            ref.n_nodes,
            ref.weights is not None,
        )
        out["ratio"] = out["pairs_per_s"] / out["reference"]["pairs_per_s"]
        out["ratio_median_step"] = (
            out["pairs_per_s_median_step"] / out["reference"]["pairs_per_s_median_step"]
        )
    return out


WORKERS = {
    "generate": worker_generate,
    "load": worker_load,
    "cache_walks": worker_cache_and_walks,
    "train": worker_train,
}


# --------------------------------------------------------------------------- driver


def run_worker(name, **kwargs):
    """Run one phase in a fresh Python process; returns its JSON result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name]
    for key, value in kwargs.items():
        if value is True:
            cmd.append(f"--{key.replace('_', '-')}")
        elif value is not None and value is not False:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"worker {name} failed ({proc.returncode}): {' '.join(cmd)}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    print(
        f"  {name} {kwargs.get('size') or Path(str(kwargs.get('path', ''))).name}: "
        f"{out['process_s']:.1f}s",
        file=sys.stderr,
        flush=True,
    )
    return out


def blogcatalog_available():
    try:
        from caps2ne_np.graphs.datasets import load_dataset
        from caps2ne_np.graphs.downloads import default_data_dir

        load_dataset(BLOGCATALOG, default_data_dir())
        return True
    except Exception:  # noqa: BLE001 -- no data directory (e.g. CI): the comparison is skipped
        return False


def mb(x):
    return f"{x / 2**20:,.0f}"


def markdown(res):
    lines = [f"# Scale: one machine, {' and '.join(f'{s:,}' for s in res['sizes'])} nodes", ""]
    lines.append(
        report.run_line(
            res["command"],
            res["total_s"],
            res["load_before"][0],
            res["load_after"][0],
            how="each phase in a fresh process",
        )
    )
    lines.append(report.machine_markdown(res["machine"]))
    lines.append(
        f"- graph: seeded power law, gamma = {GAMMA}, offset {OFFSET}, {EDGES_PER_NODE} "
        "undirected edges per node, none isolated; text edge lists with integer and string ids\n"
        "- training: TrainConfig("
        f"{', '.join(f'{k}={v!r}' for k, v in res['train_config'].items())}), "
        "featureless, |V'| = 256 (log-uniform), 1,280 pairs per step, at most "
        f"{res['train_seconds']:.0f} s per run\n"
        f"- reference for the throughput target: {res['reference'] or 'none'}, in turns of "
        f"{res['window']} steps with ours (its first {REFERENCE_WINDOW_WARMUP} steps per turn "
        "not timed)\n"
    )
    lines.append(report.doc_pointer("`bench/scale.py`: from 100,000 to 1,000,000 nodes"))
    rows = []
    for s in res["sizes"]:
        r = res["runs"][str(s)]
        gen = r["generate"]
        rows.append(
            [
                f"{s:,}",
                f"{gen['n_edges']:,}",
                f"{r['load']['int']['nnz']:,}",
                gen["max_degree"],
                f"{gen['generate_s']:.1f}",
                f"{gen['files']['int']['write_s']:.1f}",
                mb(gen["files"]["int"]["bytes"]),
                mb(gen["files"]["str"]["bytes"]),
            ]
        )
    lines.append("## The graphs\n")
    lines.append(
        report.markdown_table(
            [
                "nodes",
                "edges (lines)",
                "CSR entries",
                "max degree",
                "generate s",
                "write s",
                "int-id file MB",
                "string-id file MB",
            ],
            rows,
        )
    )
    lines.append("\n## Each phase\n")
    rows = []
    for s in res["sizes"]:
        r = res["runs"][str(s)]
        for kind in ("int", "str"):
            ld = r["load"][kind]
            rows.append(
                [
                    f"{s:,}",
                    f"load text ({kind} ids)",
                    f"{ld['load_s']:.2f}",
                    f"{ld['peak_above_before'] / ld['result_bytes']:.2f}x of "
                    f"{mb(ld['result_bytes'])} MB "
                    f"(peak +{mb(ld['peak_above_before'])} MB)",
                    "",
                ]
            )
        ld = r["load"]["int"]
        rows.append(
            [
                f"{s:,}",
                "write cache",
                f"{ld['cache_write_s']:.2f}",
                f"{mb(ld['cache_bytes'])} MB file",
                "",
            ]
        )
        cw = r["cache_walks"]
        rows.append([f"{s:,}", "load cache (new process)", f"{cw['cache_load_s']:.2f}", "", ""])
        rows.append(
            [
                f"{s:,}",
                f"generate all {cw['walks']:,} walks (q = 10)",
                f"{cw['walk_s']:.2f}",
                "",
                f"{cw['walks_per_s']:,.0f} walks/s",
            ]
        )
        tr = r["train"]
        what = (
            "one epoch"
            if tr["full_epoch"]
            else f"{tr['steps']:,} of {tr['batches_per_epoch']:,} steps"
        )
        rows.append(
            [
                f"{s:,}",
                "train setup (init, Adam state, walk source)",
                f"{tr['setup_s']:.2f}",
                "",
                "",
            ]
        )
        wall = " (wall time, with the reference's turns)" if tr.get("reference") else ""
        rows.append(
            [
                f"{s:,}",
                f"train, {what}{wall}",
                f"{tr['total_s']:.1f}",
                f"peak RSS {mb(tr['peak_rss'])} MB",
                f"{tr['pairs_per_s']:,.0f} pairs/s ({tr['step_ms']:.0f} ms/step; median step "
                f"{tr['pairs_per_s_median_step']:,.0f} pairs/s); "
                f"epoch {tr['epoch_s_estimate']:.0f} s"
                + ("" if tr["full_epoch"] else " (estimated)"),
            ]
        )
        ref = tr.get("reference")
        if ref:
            rows.append(
                [
                    f"{ref['n_nodes']:,}",
                    f"train, reference: {ref['steps']:,} steps in {ref['windows']} turns "
                    f"alternating with the {s:,}-node run",
                    "",
                    "",
                    f"{ref['pairs_per_s']:,.0f} pairs/s ({ref['step_ms']:.0f} ms/step; median step "
                    f"{ref['pairs_per_s_median_step']:,.0f} pairs/s); "
                    f"ours / reference {tr['ratio']:.2f} "
                    f"(median steps {tr['ratio_median_step']:.2f})",
                ]
            )
    lines.append(report.markdown_table(["nodes", "phase", "seconds", "memory", "rate"], rows))
    if len(res["sizes"]) > 1:
        lines.append(
            "\nGrowth from the smallest to the largest size (ratio of seconds; the graph grows "
            f"{res['sizes'][-1] / res['sizes'][0]:.0f}x):\n"
        )
        a, b = res["runs"][str(res["sizes"][0])], res["runs"][str(res["sizes"][-1])]
        rows = [
            [
                "load text (int ids)",
                f"{b['load']['int']['load_s'] / a['load']['int']['load_s']:.1f}x",
            ],
            [
                "load text (string ids)",
                f"{b['load']['str']['load_s'] / a['load']['str']['load_s']:.1f}x",
            ],
            [
                "load cache",
                f"{b['cache_walks']['cache_load_s'] / a['cache_walks']['cache_load_s']:.1f}x",
            ],
            ["all walks", f"{b['cache_walks']['walk_s'] / a['cache_walks']['walk_s']:.1f}x"],
            ["train setup", f"{b['train']['setup_s'] / a['train']['setup_s']:.1f}x"],
            ["one training step", f"{b['train']['step_ms'] / a['train']['step_ms']:.2f}x"],
            *(
                [
                    [
                        "one training step, relative to the reference's in the same process",
                        f"{a['train']['ratio'] / b['train']['ratio']:.2f}x",
                    ]
                ]
                if "ratio" in b["train"]
                else []
            ),
            [
                "one epoch (steps x step time)",
                f"{b['train']['epoch_s_estimate'] / a['train']['epoch_s_estimate']:.1f}x",
            ],
        ]
        lines.append(report.markdown_table(["phase", "largest / smallest"], rows))
    big = res["runs"][str(res["sizes"][-1])]["train"]
    f = big["formula"]
    lines.append("\n## Memory of a training run\n")
    lines.append(
        "Formula (float32 parameters, int64 indptr, int32 indices; N nodes, nnz stored edges, "
        "k = d = 128, q = 10, walk_chunk = 2^20 walks):\n"
    )
    lines.append(
        "    params = 4 (N (k + d + 1) + (q - 1) k d)       O, x, biases, W_i\n"
        "    adam   = 2 params                              m and v\n"
        "    csr    = 8 (N + 1) + 4 nnz                     (+ 4 nnz with weights)\n"
        "    chunk  = 4 q min(walk_chunk, N T)              the largest walk buffer\n"
    )
    rows = [[k, f"{f[k]:,}", mb(f[k])] for k in ("params", "adam", "csr", "walk_chunk", "total")]
    rows.append(["1.5 x total (the target)", f"{int(1.5 * f['total']):,}", mb(1.5 * f["total"])])
    rows.append(["measured peak RSS (getrusage)", f"{big['peak_rss']:,}", mb(big["peak_rss"])])
    rows.append(
        [
            "of which: process before loading the graph",
            f"{big['rss_start']:,}",
            mb(big["rss_start"]),
        ]
    )
    rows.append(
        [
            "of which: the id list (not in the formula)",
            f"{big['id_map_bytes']:,}",
            mb(big["id_map_bytes"]),
        ]
    )
    if big.get("reference"):
        rows.append(
            [
                "of which: the reference graph, loaded first (its model lives only during its "
                "turns, "
                f"{mb(big['reference']['formula']['total'])} MB)",
                f"{big['rss_reference']:,}",
                mb(big["rss_reference"]),
            ]
        )
    lines.append(report.markdown_table([f"N = {big['n_nodes']:,}", "bytes", "MB"], rows))
    lines.append("\n## Targets\n")
    lines.append(report.targets_table(res["targets"]))
    if res.get("notes"):
        lines.append("\n" + "\n".join(f"- {n}" for n in res["notes"]))
    return "\n".join(lines) + "\n"


def targets(res):
    """The targets at the largest size (report.TARGETS): [{target, value, met}]."""
    T, target = report.TARGETS, report.target
    out = []
    big_size = res["sizes"][-1]
    big = res["runs"][str(big_size)]
    for kind in ("int", "str"):
        ld = big["load"][kind]
        out.append(
            target(
                f"load {big['generate']['n_edges']:,}-edge text ({kind} ids) <= "
                f"{T['load_s']:.0f} s",
                f"{ld['load_s']:.1f} s",
                ld["load_s"] <= T["load_s"],
            )
        )
        ratio = ld["peak_above_before"] / ld["result_bytes"]
        out.append(
            target(
                f"load peak <= {T['load_peak_ratio']:.0f}x (CSR + id map) ({kind} ids)",
                f"{ratio:.2f}x",
                ratio <= T["load_peak_ratio"],
            )
        )
    cl = big["cache_walks"]["cache_load_s"]
    out.append(
        target(f"cache reload <= {T['cache_load_s']:.0f} s", f"{cl:.2f} s", cl <= T["cache_load_s"])
    )
    tr = big["train"]
    if tr.get("reference"):
        ref = tr["reference"]
        out.append(
            target(
                f"{big_size:,}-node throughput >= {T['throughput_ratio']:.0%} of the "
                "reference's (same process, alternating turns)",
                f"{tr['ratio']:.0%} ({tr['pairs_per_s']:,.0f} vs {ref['pairs_per_s']:,.0f} "
                f"pairs/s; median steps {tr['ratio_median_step']:.0%})",
                tr["ratio"] >= T["throughput_ratio"],
            )
        )
    ratio = tr["peak_rss"] / tr["formula"]["total"]
    out.append(
        target(
            f"{big_size:,}-node peak RSS <= {T['rss_ratio']}x formula",
            f"{ratio:.2f}x ({mb(tr['peak_rss'])} of {mb(tr['formula']['total'])} MB)",
            ratio <= T["rss_ratio"],
        )
    )
    out.append(
        target(
            f"whole benchmark < {T['scale_total_s'] // 60:.0f} min",
            f"{res['total_s']:.0f} s",
            res["total_s"] < T["scale_total_s"],
        )
    )
    return out


def main():
    ap = harness.parser(
        __doc__,
        threads=TRAIN["threads"],
        smoke="20,000 nodes, few steps (< 60 s), written to scale_smoke.*",
        threads_help="Numba threads of walks and training",
    )
    ap.add_argument(
        "--sizes", help="comma-separated node counts (default 100000,1000000; smoke 20000)"
    )
    ap.add_argument(
        "--steps",
        type=int,
        default=None,
        help="training steps per size (0 = one full epoch); default: a full epoch up to 200k "
        "nodes, "
        "else 2,000 steps; BlogCatalog runs the same number as the largest size",
    )
    ap.add_argument(
        "--warmup", type=int, default=None, help="steps not timed (default 20; smoke 3)"
    )
    ap.add_argument(
        "--window",
        type=int,
        default=None,
        help="steps per turn when a run alternates with the reference run (default 25; smoke 4)",
    )
    ap.add_argument(
        "--train-seconds",
        type=float,
        default=None,
        help="stop each training run after this many seconds of steps, whatever --steps says "
        "(default 300; smoke 8), so the whole run fits in 15 minutes on a loaded machine",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--workdir", help="where the edge lists go (default: a temporary directory, removed)"
    )
    ap.add_argument(
        "--results-dir",
        default=None,
        help="where scale[_smoke].json/.md go (default docs/results)",
    )
    ap.add_argument(
        "--no-reference", action="store_true", help="skip the BlogCatalog-size comparison"
    )
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: rewrite scale[_smoke].md from the .json of an earlier run",
    )
    # worker-only options
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--write-cache", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--reference", help=argparse.SUPPRESS)
    ap.add_argument("--edges", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--kinds", default="int,str", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(
            json.dumps(
                WORKERS[args.worker](args),
                default=lambda o: o.item() if hasattr(o, "item") else str(o),
            )
        )
        return

    import common

    name = "scale_smoke" if args.smoke else "scale"
    results = Path(args.results_dir) if args.results_dir else common.RESULTS
    if args.report_only:
        res = json.loads((results / f"{name}.json").read_text())
        res["targets"] = targets(res)
        write_report(results, name, res)
        return
    t_start = time.perf_counter()
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else list(SMOKE_SIZES if args.smoke else FULL_SIZES)
    )
    warmup = args.warmup if args.warmup is not None else (3 if args.smoke else 20)
    workdir = (
        Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="caps2ne_scale_"))
    )
    workdir.mkdir(parents=True, exist_ok=True)

    def steps_for(n):
        if args.steps is not None:
            return args.steps
        if args.smoke:
            return 30
        return 0 if n <= 200_000 else 2000

    train_seconds = (
        args.train_seconds if args.train_seconds is not None else (8.0 if args.smoke else 300.0)
    )
    res = dict(
        command="python bench/scale.py " + " ".join(sys.argv[1:]),
        sizes=sizes,
        seed=args.seed,
        train_config=dict(TRAIN, threads=args.threads),
        machine=common.machine_info(),
        load_before=os.getloadavg(),
        runs={},
        notes=[],
        reference=None,
        train_seconds=train_seconds,
    )
    res["window"] = args.window if args.window is not None else (4 if args.smoke else 25)
    if args.smoke:
        res["notes"].append(
            "A smoke run: the targets are set for 1,000,000 nodes; at this size the interpreter's "
            "own memory dominates the RSS ratio."
        )
    train_opts = dict(
        warmup=warmup, train_seconds=train_seconds, threads=args.threads, window=res["window"]
    )
    try:
        reference = None
        if not args.no_reference:
            if blogcatalog_available():
                reference = BLOGCATALOG
                res["reference"] = "BlogCatalog (10,312 nodes, its 333,983 edges)"
            else:
                gen = run_worker(
                    "generate",
                    size=BLOGCATALOG_NODES,
                    edges=BLOGCATALOG_EDGES,
                    seed=args.seed,
                    workdir=workdir,
                    kinds="int",
                )
                reference = gen["files"]["int"]["path"]
                run_worker("load", path=reference, workdir=workdir, write_cache=True)
                res["reference"] = (
                    "a generated power-law graph of BlogCatalog's size "
                    "(10,312 nodes, 333,983 edges)"
                )
                res["notes"].append(
                    "BlogCatalog is not in the data directory: the reference is a generated graph "
                    "of its size."
                )
        for n in sizes:
            run = res["runs"][str(n)] = {}
            run["generate"] = run_worker("generate", size=n, seed=args.seed, workdir=workdir)
            files = run["generate"]["files"]
            run["load"] = {
                "int": run_worker(
                    "load", path=files["int"]["path"], workdir=workdir, write_cache=True
                ),
                "str": run_worker("load", path=files["str"]["path"], workdir=workdir),
            }
            os.unlink(files["str"]["path"])
            run["cache_walks"] = run_worker(
                "cache_walks", path=files["int"]["path"], threads=args.threads
            )
            run["train"] = run_worker(
                "train",
                path=files["int"]["path"],
                steps=steps_for(n),
                reference=reference,
                **train_opts,
            )
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    res["load_after"] = os.getloadavg()
    res["total_s"] = time.perf_counter() - t_start
    res["targets"] = targets(res)
    write_report(results, name, res)


def write_report(results, name, res):
    """Write <results>/<name>.json and .md (atomically) and print the Markdown."""
    import common

    text = markdown(res)
    common.write_json(results / f"{name}.json", res)
    common.write_text_atomic(results / f"{name}.md", text)
    print(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stages"]:  # one train run, each stage's seconds and peak RSS
        import stage_memory

        stage_memory.main(sys.argv[2:])
    elif sys.argv[1:2] == ["--spmm"]:  # the spectral stages' sparse product, float64 / 32
        import spmm_dtype

        spmm_dtype.main(sys.argv[2:])
    else:
        main()
