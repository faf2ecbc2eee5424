"""The skip-gram term's share of a training step (issue 25 target: at most 25%).

One featureless problem (an LFR-like graph from bench/graphgen.py, x trained,
d = k = 128, q = 10, every position a target, |V'| = 256, unigram sampler, lazy Adam,
as the 'converge' preset), the same batches for every variant, the step timed as
``train.fit`` runs it (``step.TrainStep``: forward, backward, Adam; batch making
excluded).  Variants (off, softmax, nsK) alternate repetition by repetition in one
process, so that they see the same machine load; the table gives the fastest
repetition's milliseconds per step (the minimum: the least disturbed by other
processes on a shared machine) and the term's share (t - t_off) / t; and, less
sensitive to the load, the term's own function timed alone (fastest of 30 calls)
and its share t_term / (t_off + t_term): the term adds a separate code path and no
Adam rows (its rows are the capsule loss's).

    python bench/skipgram_step.py --walks 16,128 --threads 1 --reps 7
"""

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numba  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import common  # noqa: E402  (thread and spin settings before numba starts)
import graphgen  # noqa: E402
from caps2ne_np.model.core import init_params  # noqa: E402
from caps2ne_np.training.batch import BatchStream  # noqa: E402
from caps2ne_np.training.config import ModelConfig, TrainConfig  # noqa: E402
from caps2ne_np.training.optim import Adam  # noqa: E402
from caps2ne_np.training.step import TrainStep  # noqa: E402


def variant_config(name):
    if name == "off":
        return ModelConfig()
    if name == "softmax":
        return ModelConfig(skipgram_weight=1.0, skipgram_negatives=0)
    return ModelConfig(skipgram_weight=1.0, skipgram_negatives=int(name[2:]))


def term_alone(ts, batches, reps=30):
    """Fastest of ``reps`` calls of the term's own function (skipgram.loss_and_row_grads)
    on the first batch, in ms: its cost without the rest of the step around it."""
    from caps2ne_np.model import skipgram
    from caps2ne_np.model.core import forward

    b = batches[0]
    fw = forward(ts.params, b.ctx, ts.mcfg, b.rows)
    item_x = np.ascontiguousarray(fw.x_of_row[b.rows.inv].T)
    dtype = ts.params.O.dtype
    args = (
        fw.x,
        item_x,
        ts.params.O,
        ts.params.bias,
        np.asarray(b.targets, dtype=np.int64),
        np.asarray(b.sampled, dtype=np.int64),
        np.log(np.asarray(b.q_true, dtype=dtype)),
        np.log(np.asarray(b.q_sampled, dtype=dtype)),
        ts.mcfg.skipgram_negatives,
        b.key,
    )
    skipgram.loss_and_row_grads(*args)
    best = float("inf")
    for _ in range(reps):
        best = min(best, common.timed(skipgram.loss_and_row_grads, *args))
    return 1e3 * best


def main(argv=None):
    ap = common.parser(__doc__, threads=1, reps=7, out="skipgram_step")
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--walks", default="16,128", help="walks per batch B (x 10 pairs)")
    ap.add_argument("--variants", default="off,softmax,ns5")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed repetition")
    ap.add_argument("--save", action="store_true", help="also write the result files (--out)")
    a = ap.parse_args(argv)
    numba.set_num_threads(a.threads)
    adj, _ = graphgen.lfr_like(a.nodes, mu=0.5, seed=0)
    adj = sp.csr_matrix(adj)
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int32)
    q, k = 10, 128
    cfg = TrainConfig(
        walk_length=q, walks_per_node=16, sampler="unigram", num_sampled=256, seed=1, walks="fixed"
    )
    variants = a.variants.split(",")
    rows = []
    for B in [int(b) for b in a.walks.split(",")]:
        stream = BatchStream(indptr, indices, None, replace(cfg, batch_size=B), index=True)
        stream.set_counts(stream.node_counts(0, stream.source.n_walks, 1 << 20))

        def batch(step, stream=stream):
            return stream.batch(0, step, step)

        runners = {}
        for name in variants:
            params = init_params(a.nodes, k, k, q - 1, np.random.default_rng(0))
            opt = Adam({n: getattr(params, n) for n in params.trainable()}, lr=1e-3)
            runners[name] = [TrainStep(params, opt, variant_config(name), lazy=True), 0]
        times = {name: [] for name in variants}
        with threadpool_limits(limits=1):
            for rep in range(a.reps + 1):  # the first: compilation and warm-up, not timed
                for name in variants:
                    ts, step = runners[name]
                    batches = [batch(step + i) for i in range(a.steps)]
                    with common.clock() as c:
                        for b in batches:
                            loss, grads = ts.gradients(b)
                            ts.update(grads)
                    dt = c.seconds / a.steps
                    if not math.isfinite(loss):
                        raise SystemExit(f"{name}: loss {loss}")
                    runners[name][1] += a.steps
                    if rep:
                        times[name].append(1e3 * dt)
        base = min(times["off"]) if "off" in times else None
        for name in variants:
            ms = min(times[name])
            share = (ms - base) / ms if base is not None else float("nan")
            alone = term_alone(runners[name][0], batches) if name != "off" else 0.0
            rows.append(
                dict(
                    B=B,
                    pairs=B * q,
                    variant=name,
                    ms_per_step=ms,
                    term_share=share,
                    term_ms=alone,
                    term_share_alone=alone / (base + alone) if base else float("nan"),
                )
            )
    lines = [
        f"threads {a.threads}, {a.nodes} nodes, k = d = {k}, |V'| = 256, fastest of {a.reps}",
        "| walks B | pairs | variant | ms per step | share (step - off) / step | term alone, ms "
        "| share term / (off + term) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['B']} | {r['pairs']} | {r['variant']} | {r['ms_per_step']:.2f} | "
            f"{100 * r['term_share']:.0f}% | {r['term_ms']:.2f} | "
            f"{100 * r['term_share_alone']:.0f}% |"
        )
    print("\n".join(lines))
    if a.save:
        common.write_results(a.out, common.payload(a, rows), "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
