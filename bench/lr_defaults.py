"""Which Adam learning rate should featureless training default to?

Trains on the bundled Cora graph (no features: x is trained) with several learning
rates, and after every epoch scores the embeddings o_v with the paper's protocol
(logistic regression on each split's 140 training nodes; accuracy on its val and
test nodes; mean over the 10 splits).  Prints a table and writes
docs/results/lr_defaults.json + .md.

    python bench/lr_defaults.py [--epochs 10] [--walks-per-node 16] [--threads 2]
"""

import platform
from pathlib import Path

import numpy as np

import common
from caps2ne_np.estimator import Caps2NE
from caps2ne_np.evaluate import classify_splits
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.graphs.datasets import load_dataset
from common import write_results  # into docs/results or $CAPS2NE_BENCH_RESULTS


def main():
    ap = common.parser(__doc__, threads=2, out="lr_defaults")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--walks-per-node", type=int, default=16)
    ap.add_argument("--lrs", default="1e-4,5e-4,1e-3,2e-3")
    args = ap.parse_args()
    ds = load_dataset("cora-bundled")
    g = from_scipy(ds.adj, ds.node_ids)
    rows = []
    for lr in [float(v) for v in args.lrs.split(",")]:
        curve = []

        def score(epoch, result, curve=curve):
            r = classify_splits(result.params.O, ds.labels, ds.splits)
            curve.append(
                dict(
                    epoch=epoch,
                    val=r["val_mean"],
                    test=r["test_mean"],
                    loss=result.history[-1]["loss"],
                )
            )

        with common.clock() as c:
            Caps2NE(
                walks_per_node=args.walks_per_node,
                epochs=args.epochs,
                lr=lr,
                n_jobs=args.threads,
                preset="paper",
                random_state=0,
            ).fit(g, epoch_callback=score)
        best = max(curve, key=lambda c: c["val"])
        rows.append(
            dict(
                lr=lr,
                seconds=c.seconds,
                curve=curve,
                best_epoch=best["epoch"],
                best_val=best["val"],
                test_at_best_val=best["test"],
                final_test=curve[-1]["test"],
            )
        )
        print(f"lr {lr:g}: " + " ".join(f"{c['test']:.3f}" for c in curve), flush=True)
    lines = [
        f"| lr | test acc after epoch 1..{args.epochs} (mean of 10 splits) | best val epoch "
        "| test there |",
        "| --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['lr']:g} | "
            + " ".join(f"{c['test'] * 100:.1f}" for c in r["curve"])
            + f" | {r['best_epoch']} | {r['test_at_best_val'] * 100:.2f} |"
        )
    table = "\n".join(lines)
    print(table)
    meta = dict(
        command="python bench/" + Path(__file__).name,
        args=vars(args),
        machine=platform.processor() or platform.machine(),
        python=platform.python_version(),
        numpy=np.__version__,
    )
    write_results(
        args.out,
        dict(meta=meta, rows=rows),
        "# Learning rate for featureless training (bundled Cora)\n\n"
        f"`{meta['command']}` with {vars(args)}\n\n"
        "Embeddings o_v scored after every epoch: logistic regression on each split's training "
        "nodes, accuracy on its test nodes, mean over the paper's 10 splits. Featureless: x is "
        "trained (d = k = 128), q = 10, every position a target, B = 64, |V'| = 256, m = 1.\n\n"
        + table
        + "\n",
    )


if __name__ == "__main__":
    main()
