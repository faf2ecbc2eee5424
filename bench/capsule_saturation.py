"""Why do the defaults lose to DeepWalk on weak-community graphs?  (issue 14)

Trains with ``train.fit`` and the CLI defaults (plus each variant's options) on one
panel graph, scores o_v with the panel's protocol, and reads the trained model: the
norm of the capsule input s = sum_i c_i W_i u_i and of the output e_v = squash(s), the
Frobenius norm of each W_i, and the logit o_v . e_v + b_v of the true target against
that of a random node, on fresh walks with the target in the middle (position 4).
Prints a table and writes docs/results/capsule_saturation.json + .md.

    python bench/capsule_saturation.py [--graph syn-3k-mu0.7] [--variants default,epochs15]

The variants are the levers docs/training.md ("Where the defaults still lose")
reports; one seed each, so differences of a point or two are noise.
"""

import json
import os

import numpy as np
import scipy.sparse as sp

import common
import report
import vs_deepwalk
from caps2ne_np.model.core import forward
from caps2ne_np.training import walks as walks_mod
from caps2ne_np.training.config import TrainConfig
from caps2ne_np.training.train import fit

VARIANTS = {
    "default": {},
    "epochs15": {"epochs": 15},
    "lr2x": {"lr_scale": 2.0},
    "routing_scale1": {"routing_scale": 1.0},
    "routing_iters3": {"routing_iters": 3},
}


def saturation(params, cfg, indptr, indices, n_walks=2000, position=4, seed=12345):
    """Percentiles (5, 50, 95) of |s|, |e|, the target's and a random node's logit, and
    the Frobenius norm of each W_i, on ``n_walks`` fresh walks."""
    q = cfg.walk_length
    walks = walks_mod.uniform_walks(indptr, indices, None, 1, q, seed)
    walks = walks[:n_walks]
    ctx, tgt = walks_mod.training_pairs(walks, np.arange(walks.shape[0]), (position,))
    fw = forward(params, ctx, cfg.model_config())
    s, e = fw.s[-1], fw.e
    rng = np.random.default_rng(seed)
    other = rng.integers(0, params.O.shape[0], size=tgt.shape[0])

    def logits(nodes):
        return np.einsum("pk,pk->p", params.O[nodes], e) + params.bias[nodes]

    def pct(a):
        return [float(x) for x in np.percentile(a, [5, 50, 95])]

    return dict(
        s_norm=pct(np.linalg.norm(s, axis=1)),
        e_norm=pct(np.linalg.norm(e, axis=1)),
        o_norm=pct(np.linalg.norm(params.O, axis=1)),
        logit_target=pct(logits(tgt)),
        logit_random=pct(logits(other)),
        W_fro=[float(np.linalg.norm(params.W[i])) for i in range(params.W.shape[0])],
    )


def run(graph, name, options, threads, seed):
    adj = sp.csr_matrix(graph.adj)
    indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int32)
    options = dict(options)
    lr_scale = options.pop("lr_scale", None)
    cfg = TrainConfig(threads=threads, seed=seed, **options)
    if lr_scale is not None:  # the default peak rate times lr_scale
        from caps2ne_np.training.config import resolve

        base, _ = resolve(cfg, adj.shape[0], indices.shape[0])
        cfg = TrainConfig(threads=threads, seed=seed, lr=base.lr * lr_scale, **options)
    with common.clock() as c:
        res = fit(indptr, indices, None, cfg)
    seconds = c.seconds
    init_W = np.sqrt(res.params.W[0].size) * 0.01  # E|W_i|_F at initialisation
    score = vs_deepwalk.score_embedding(graph, np.asarray(res.params.O), fractions=(0.5,))
    return dict(
        variant=name,
        options=options | ({"lr_scale": lr_scale} if lr_scale else {}),
        epochs=res.config.epochs,
        lr=res.config.lr,
        seconds=seconds,
        score=score["headline"],
        W_fro_init=float(init_W),
        **saturation(res.params, res.config, indptr, indices),
    )


def main(argv=None):
    ap = common.parser(__doc__, threads=2, out="capsule_saturation")
    ap.add_argument("--graph", default="syn-3k-mu0.7")
    ap.add_argument(
        "--variants",
        default="default,epochs15,lr2x,routing_scale1",
        help=f"comma-separated, of {sorted(VARIANTS)}",
    )
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = args.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; choose from {sorted(VARIANTS)}")
    graph = vs_deepwalk.panel_entry(args.graph, args.data_dir)
    load_before = os.getloadavg()[0]
    rows = []
    for name in names:
        r = run(graph, name, VARIANTS[name], args.threads, args.seed)
        rows.append(r)
        print(
            json.dumps({k: r[k] for k in ("variant", "epochs", "score", "s_norm", "e_norm")}),
            flush=True,
        )

    def mid(x):
        return f"{x[1]:.3g}"

    table = report.markdown_table(
        [
            "variant",
            "epochs",
            "peak lr",
            "score",
            "median abs(s)",
            "median abs(e)",
            "median abs(o)",
            "logit: target / random (medians)",
            "W_i Frobenius (median; init)",
            "s",
        ],
        [
            [
                r["variant"],
                r["epochs"],
                f"{r['lr']:.3g}",
                f"{r['score']:.2f}",
                mid(r["s_norm"]),
                mid(r["e_norm"]),
                mid(r["o_norm"]),
                f"{r['logit_target'][1]:.2f} / {r['logit_random'][1]:.2f}",
                f"{np.median(r['W_fro']):.1f}; {r['W_fro_init']:.2f}",
                f"{r['seconds']:.0f}",
            ]
            for r in rows
        ],
    )
    info = common.machine_info()
    info["load_average"] = [load_before, os.getloadavg()[0]]
    md = (
        f"# Capsule saturation on {args.graph} (issue 14)\n\n"
        f"`python bench/capsule_saturation.py --graph {args.graph} --variants {args.variants}`"
        f", {args.threads} threads, seed {args.seed}.  Score: the panel's protocol on o_v "
        "(bench/vs_deepwalk.py).  Norms and logits on 2,000 fresh walks, target at "
        f"position 4.  Load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
        "(the seconds column is only comparable within a quiet run).\n\n"
        + table
        + "\n\n"
        + report.machine_markdown(info)
    )
    common.write_results(args.out, dict(graph=args.graph, rows=rows, machine=info), md)
    print(md)


if __name__ == "__main__":
    main()
