"""node2vec with p, q whose rejection sampler almost never accepts (issue 33, item 5):
a directed cycle, where every step from (t, v) has one candidate x, 'outward' from t
(alpha = 1/q), so with p = 0.001, q = 1000 a proposal passes one time in 10^6.  After
``walk_kernels.NODE2VEC_TRIES`` rejections a step is drawn exactly (``_node2vec_exact``).

Timed side by side in one run, medians of ``--reps``: the walk kernel
(``uniform_walks``, 10 walks per node of 80 steps on a 2,000-node directed cycle) and a
whole ``train.fit`` (20 epochs, k = d = 8, on the 40-node directed cycle of the issue),
each at p = q = 1 (first-order walks) and at p = 0.001, q = 1000, on one thread.

    python bench/node2vec_hard_pq.py [--reps 5]

Writes docs/results/node2vec_hard_pq.json and .md.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from common import machine_info, median, threads, timed, write_results  # noqa: E402

HARD = dict(node2vec_p=0.001, node2vec_q=1000.0)


def cycle(n):
    indptr = np.arange(n + 1, dtype=np.int64)
    indices = ((np.arange(n) + 1) % n).astype(np.int32)
    return indptr, indices


def main(argv=None):
    ap = common.parser(__doc__, reps=5)
    args = ap.parse_args(argv)

    from caps2ne_np.training.config import TrainConfig
    from caps2ne_np.training.train import fit
    from caps2ne_np.training.walk_kernels import NODE2VEC_TRIES
    from caps2ne_np.training.walks import uniform_walks

    rows = []
    with threads(1):
        ip, ix = cycle(2000)
        for pq in ({}, HARD):  # compile both first
            uniform_walks(ip, ix, None, 1, 10, 0, **pq)
        walk_s = {}
        for name, pq in (("p = q = 1", {}), ("p = 0.001, q = 1000", HARD)):
            walk_s[name] = [
                timed(lambda r=r, pq=pq: uniform_walks(ip, ix, None, 10, 80, r, **pq))
                for r in range(args.reps)
            ]
        ip, ix = cycle(40)
        fit_s = {}
        for name, pq in (("p = q = 1", {}), ("p = 0.001, q = 1000", HARD)):
            cfg = TrainConfig(dim=8, feat_dim=8, epochs=20, threads=1, spectral="none", **pq)
            fit(ip, ix, None, cfg)  # warm-up (kernels compiled or loaded)
            fit_s[name] = [timed(fit, ip, ix, None, cfg) for _ in range(args.reps)]
    base_w, base_f = median(walk_s["p = q = 1"]), median(fit_s["p = q = 1"])
    for name in walk_s:
        rows.append(
            dict(
                walks=name,
                walk_kernel_s=median(walk_s[name]),
                walk_ratio=median(walk_s[name]) / base_w,
                fit_s=median(fit_s[name]),
                fit_ratio=median(fit_s[name]) / base_f,
            )
        )
    machine = machine_info()
    lines = [
        "# node2vec with p, q the rejection sampler almost never accepts",
        "",
        f"`python bench/node2vec_hard_pq.py --reps {args.reps}`: medians of {args.reps}, one "
        f"thread; after {NODE2VEC_TRIES} rejected proposals a step is drawn exactly. Walk "
        "kernel: `uniform_walks`, 10 walks per node of 80 steps on a 2,000-node directed "
        "cycle; fit: `train.fit`, 20 epochs, k = d = 8, on the 40-node directed cycle.",
        "",
        f"- CPU: {machine.get('cpu_model')}, commit {machine.get('git_commit')}",
        "",
        "| walks | walk kernel s | vs p = q = 1 | fit s | vs p = q = 1 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['walks']} | {r['walk_kernel_s']:.4f} | {r['walk_ratio']:.2f}x | "
            f"{r['fit_s']:.2f} | {r['fit_ratio']:.2f}x |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    write_results("node2vec_hard_pq", dict(machine=machine, reps=args.reps, rows=rows), text)


if __name__ == "__main__":
    main()
