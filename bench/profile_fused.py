"""Where a step of the compiled chunk (caps2ne_np/training/step/fused.py) spends its time,
stage by stage, on one thread, beside the Python step (step.TrainStep) in the same run.

The featureless defaults on the bundled Cora edge list (perf.py's configs f and g: B = 16
and 128 walks, every position a target, k = d = 128, |V'| = 256, lazy Adam, unigram
sampler).  Each stage kernel is timed on a real batch by calling its serial version
alone (thread CPU time, median of ``--reps`` blocks of 20 calls), and the whole step
three ways: the compiled chunk, the sum of its stages, and the Python step.  The
serial share (drawing and indexing the batch, the loss sum), which no thread count
splits, is what docs/scaling.md's bounds for more cores start from.

    python bench/profile_fused.py                 # B = 16 and 128, ~1 min
    python bench/profile_fused.py --batch-sizes 16 --reps 9

Writes docs/results/<--out>.json + .md (docs/results/profile_fused.md is its
run on the compiled step).
"""

import json
import sys
import time
from functools import partial

import numba
import numpy as np
from threadpoolctl import threadpool_limits

import common
from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.model import grads
from caps2ne_np.spectral import prone as spectral
from caps2ne_np.training import train as T
from caps2ne_np.training.loop import prepare
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.schedule import Schedule
from caps2ne_np.training.step import fused as F
from caps2ne_np.training.step import fused_batch as FB


def cpu_ms(fn, reps, inner=20):
    fn()
    times = []
    for _ in range(reps):
        t0 = time.thread_time()
        for _ in range(inner):
            fn()
        times.append((time.thread_time() - t0) / inner * 1e3)
    return common.median(times)


def async_ms(fs, per, reps):
    """Thread CPU ms per batch of each of two threads training their own chunks at once on
    the shared tables (``parallel='async'``): beside the one-thread figure, what W's
    shared traffic (every step rewrites W, m and v) costs each thread."""
    import threading

    steps = [fs.copy_for_thread() for _ in range(2)]
    start = 10**6
    times = [[], []]

    def run(w, s0):
        t0 = time.thread_time()
        ids = list(range(s0 + w, s0 + 2 * per, 2))
        steps[w].train(0, ids, ids, [1e-4] * len(ids), False)
        times[w].append((time.thread_time() - t0) / len(ids) * 1e3)

    for r in range(reps):
        threads = [threading.Thread(target=run, args=(w, start + 2 * per * r)) for w in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return common.median(times[0] + times[1])


def engine(g, cfg, start, python_step):
    real = F.supports
    F.supports = (lambda c, k: False) if python_step else real
    try:
        schedule = Schedule.for_graph(cfg, g.indptr.shape[0] - 1)
        return T.LocalEngine(g, cfg, None, None, start=start, schedule=schedule)
    finally:
        F.supports = real


def profile(g, batch_size, reps):
    n = g.indptr.shape[0] - 1
    cfg, _ = prepare(TrainConfig(threads=1, seed=3, epochs=1, batch_size=batch_size), n,
                     g.indices.shape[0], False, 0)  # fmt: skip
    start = spectral.start(g.indptr, g.indices, g.weights, cfg, None, resume=False)
    fast, slow = engine(g, cfg, start, False), engine(g, cfg, start, True)
    fs = fast.fused
    steps = {"n": 0}

    def chunk(n_steps):
        def run():
            s = steps["n"]
            fs.train(0, range(s, s + n_steps), range(s, s + n_steps), [cfg.lr] * n_steps, False)
            steps["n"] += n_steps

        return run

    def python_chunk(n_steps):
        def run():
            s = steps["n"]
            slow.train(0, s, s, [cfg.lr] * n_steps)
            steps["n"] += n_steps

        return run

    per = 20
    step_fused = cpu_ms(chunk(per), reps, inner=1) / per
    step_python = cpu_ms(python_chunk(per), reps, inner=1) / per
    async_cpu = async_ms(fs, per, reps)

    rows, items, regions, sizes = stage_times(fast, reps)
    serial = sum(v for name, v in rows.items() if "(serial)" in name)
    return dict(
        batch_size=batch_size,
        pairs=sizes.P,
        distinct_rows=sizes.R,
        distinct_nodes=sizes.G,
        o_rows=sizes.n_o,
        stages_ms=rows,
        stages_sum_ms=sum(rows.values()),
        step_fused_ms=step_fused,
        step_python_ms=step_python,
        async_thread_ms=async_cpu,
        serial_ms=serial,
        serial_share=serial / step_fused,
        items=dict(zip(rows, items)),
        regions=dict(zip(rows, regions)),
    )


def stage_times(fast, reps):
    """Thread CPU ms of each stage kernel of the compiled step (its serial version, alone)
    on one real batch of the engine ``fast``, the independent items and the parallel
    regions of each, and the batch's ``Sizes``."""
    fs, p = fast.fused, fast._params
    b = fast.stream.batch(0, 0, 0)
    n_slots, k, d = p.W.shape
    ctx_t = np.ascontiguousarray(b.ctx.T, dtype=np.int64)
    targets = b.targets.astype(np.int64)
    sampled = b.sampled.astype(np.int64)
    P, S = targets.shape[0], sampled.shape[0]
    lqt = np.log(b.q_true.astype(np.float32))
    lqs = np.log(b.q_sampled.astype(np.float32))
    ws = FB.make_workspace(P, S, n_slots, d, k, 1, p.O)
    marks = np.full((3, p.O.shape[0]), -1, dtype=np.int64)

    def index():
        sizes = FB.index_batch(ctx_t, P, targets, sampled, marks, ws)
        FB.unmark(marks, ws, sizes)
        return sizes

    sizes = index()  # fills the workspace's index (the marks restored, as in a chunk)
    G, n_o = sizes.G, sizes.n_o
    X, W_t, O, bias = fs.tables.X, fs.tables.W_t, fs.tables.O, fs.tables.bias
    m, e = fs.model, ws.e_all[0]
    walks = np.empty((fs.stream.cfg.batch_size, n_slots + 1), dtype=np.int64)
    size = 2
    while size < 2 * S:
        size *= 2
    table = np.empty(size, dtype=np.int64)
    bt, bs, smp_out = ctx_t.copy(), targets.copy(), sampled.copy()
    bqt, bqs = np.empty(P, np.float32), np.empty(S, np.float32)
    coefs = fs.opt.coefs_for(np.float32, 1e-4)
    moments = F.Moments(*(a.copy() for a in fs.moments))
    tables = F.Tables(X.copy(), W_t.copy(), O.copy(), bias.copy(), True)
    st = {}
    st["draw: walks, pairs, V', log Q (serial)"] = partial(FB.draw_batch, fs.graph,
        fs.stream.draws(0), fs.stream.sampler_tables(), 0, 0, 0, walks, bt, bs, smp_out, table,
        bqt, bqs)  # fmt: skip
    st["index: distinct rows, x and O rows (serial)"] = index
    st["x = X[nodes], u = squash(x)"] = partial(F._squash_nodes.serial, X, ws.x_nodes, G, ws.x,
                                                ws.u)  # fmt: skip
    st["u_hat = W_i u (GEMMs)"] = partial(F._predict.serial, ws.u, ws.x_of_row, ws.slot_ptr, W_t,
                                          ws.u_rows, ws.u_hat_rows)  # fmt: skip
    st["routing"] = partial(F._route_pairs.serial, ws.u_hat_rows, ws.inv, P, m.iters, m.scale,
                            m.rule, ws.u_hat, ws.c, ws.s, ws.e_all, ws.b_all)  # fmt: skip
    st["output layer: z, softmax (GEMM)"] = partial(F._output_layer.serial, e, O, bias, targets,
        sampled, lqt, lqs, ws.O_s, ws.bq, ws.z_s, ws.loss, ws.d_true, ws.d_s,
        ws.d_sT)  # fmt: skip
    st["output layer backward (GEMMs)"] = partial(F._output_backward.serial, e, O, targets,
        ws.d_true, ws.d_s, ws.d_sT, ws.O_s, ws.o_of_target, n_o, ws.d_e, ws.d_O,
        ws.d_bias, ws.bias_acc)  # fmt: skip
    st["routing backward"] = partial(F._route_back.serial, ws.u_hat, ws.c, ws.s, ws.e_all, ws.d_e,
        P, m.scale, m.rule, m.exact, ws.d_u_hat, ws.scratch_i, ws.scratch_k)  # fmt: skip
    st["sum over shared rows"] = partial(grads.gather_rows_backward_kernel.serial, ws.d_u_hat,
                                         ws.inv, ws.slot_ptr, ws.d_rows)  # fmt: skip
    st["d_W, d_u (GEMMs)"] = partial(F._W_backward.serial, ws.u_rows, ws.d_rows, ws.slot_ptr, W_t,
                                     True, ws.d_W_t, ws.d_u_rows)  # fmt: skip
    st["d_x"] = partial(F._x_backward.serial, ws.x, ws.d_u_rows, ws.row_ptr, ws.row_list, G,
                        ws.d_u, ws.d_x)  # fmt: skip
    st["Adam (lazy: W, touched rows of O, b, x)"] = partial(F._adam.serial, tables, moments, ws,
                                                            sizes, coefs, True, marks)  # fmt: skip
    rows = {name: cpu_ms(fn, reps) for name, fn in st.items()}
    # the independent items of each stage's parallel region(s): its most threads
    nbp, nbs = F._blocks(P), F._blocks(S)
    halves = n_slots + int(np.sum(np.diff(ws.slot_ptr) >= 2 * F.BLOCK_ROWS))  # W_i u's GEMMs
    items = [1, 1, G, halves, P, nbp, nbp + nbs, P, n_slots, 2 * n_slots, G,
             n_slots * d + n_o + G]  # fmt: skip
    regions = [0, 0, 1, 1, 1, 2, 2, 1, 1, 1, 1, 1]
    return rows, items, regions, sizes


@numba.njit(parallel=True, cache=True, nogil=True)
def _region(out):
    for i in numba.prange(out.shape[0]):
        out[i] += 1.0


@numba.njit(cache=True, nogil=True)
def _regions(out, n):
    for _ in range(n):
        _region(out)


def region_us(n_threads, reps):
    """Wall microseconds of one empty parallel region (a fork and a join) on ``n_threads``,
    called from compiled code as the chunk's stages are."""
    numba.set_num_threads(n_threads)
    out = np.zeros(64)
    _regions(out, 10)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        _regions(out, 2000)
        times.append((time.perf_counter() - t0) / 2000 * 1e6)
    numba.set_num_threads(1)
    return common.median(times)


def projection(result, fork_us, counts=(1, 2, 4, 8, 16, 32)):
    """Synchronous ms per step on n threads, on paper: each stage's one-thread time split
    over min(n, its items) threads as the static schedule does (ceil(items / n) items on
    the busiest), the serial stages not at all, plus a fork and join per region of
    ``fork_us(n)`` microseconds."""
    out = {}
    for n in counts:
        ms = 0.0
        for name, t in result["stages_ms"].items():
            k = result["items"][name]
            ms += t * (-(-k // n)) / k if k > 1 else t
            if n > 1:
                ms += result["regions"][name] * fork_us(n) / 1e3
        out[n] = ms
    return out


def render(payload):
    out = [
        "# A step of the compiled chunk, stage by stage (Cora featureless, defaults, 1 thread)",
        "",
        f"`{payload['command']}`",
        "",
        "Thread CPU time in ms per step, medians; the stages each timed alone on one real "
        "batch (serial versions), the steps as chunks of 20 batches.",
        "",
    ]
    results = payload["results"]
    out.append(
        "| | " + " | ".join(f"B = {r['batch_size']} ({r['pairs']} pairs)" for r in results) + " |"
    )
    out.append("| --- |" + " --- |" * len(results))
    for name in results[0]["stages_ms"]:
        out.append(
            f"| {name} | " + " | ".join(f"{r['stages_ms'][name]:.3f}" for r in results) + " |"
        )
    for key, label in (
        ("stages_sum_ms", "**sum of the stages**"),
        ("step_fused_ms", "**compiled step (chunk / 20)**"),
        ("step_python_ms", "**Python step (step.TrainStep), same run**"),
    ):
        out.append(f"| {label} | " + " | ".join(f"**{r[key]:.3f}**" for r in results) + " |")
    out.append("| async, 2 threads at once: each thread's CPU ms per batch | " + " | ".join(
        f"{r['async_thread_ms']:.3f}" for r in results) + " |")  # fmt: skip
    out.append("| Python / compiled | " + " | ".join(
        f"{r['step_python_ms'] / r['step_fused_ms']:.2f}x" for r in results) + " |")  # fmt: skip
    out.append("| serial share of the compiled step | " + " | ".join(
        f"{100 * r['serial_share']:.1f}%" for r in results) + " |")  # fmt: skip
    fork = payload["fork_us"]
    out += [
        "",
        f"An empty parallel region (fork and join, called from compiled code) took {fork:.1f} "
        "us on 2 threads. On paper, the synchronous step on n threads: each stage's time "
        "split over min(n, its items) threads as the static schedule splits it, the serial "
        "stages not at all, plus a fork and join per region, taken as the 2-thread cost times "
        "log2(n) (an assumption: a tree barrier). Pairs/s relative to one thread:",
        "",
        "| threads | " + " | ".join(f"B = {r['batch_size']}" for r in results) + " |",
        "| --- |" + " --- |" * len(results),
    ]
    for n in results[0]["projection_ms"]:
        cells = [f"{r['projection_ms']['1'] / r['projection_ms'][n]:.2f}x" for r in results]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out += ["", "Machine:", "", "```", json.dumps(payload["machine"], indent=1), "```", ""]
    return "\n".join(out)


def main(argv=None):
    parser = common.parser(__doc__, reps=7, out="profile_fused")
    parser.add_argument("--batch-sizes", default="16,128")
    args = parser.parse_args(argv)
    g = read_edgelist(common.REPO / "caps2ne_np" / "data" / "cora.edgelist")
    numba.set_num_threads(1)
    with threadpool_limits(limits=1):
        results = [profile(g, int(b), args.reps) for b in args.batch_sizes.split(",")]
        fork = region_us(2, args.reps)
    for r in results:
        proj = projection(r, lambda n: fork * max(1.0, np.log2(n)))
        r["projection_ms"] = {str(n): v for n, v in proj.items()}
    payload = dict(
        command="python bench/profile_fused.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        results=results,
        fork_us=fork,
        machine=common.machine_info(),
    )
    md = render(payload)
    common.write_results(args.out, payload, md)
    print(md)


if __name__ == "__main__":
    main()
