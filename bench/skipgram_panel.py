"""The skip-gram term on the panel (issue 25, step 6): the 'converge' preset with and
without the term, scored after every epoch with bench/vs_deepwalk.py's protocol.

Each run trains as ``caps2ne train --graph g.txt`` does in bench/vs_deepwalk.py (the
same edge list written from the panel graph, read back with the package's reader, the
CLI's defaults, seed 0) in this process, and scores O after every epoch (so one run
also shows where the score peaks within the budget).  Variants: ``off`` (weight 0,
the preset before issue 25), ``softmax`` (weight 1, the sampled softmax over V') and
``nsK`` (weight 1, K negatives per item); ``@w`` sets another weight (``ns5@0.3``).
``--epochs N`` overrides the budget.

    python bench/skipgram_panel.py --graphs cora,syn-3k-mu0.7 --variants off,softmax,ns5

One JSON line per run is appended to ``--out`` (default docs/results/skipgram/runs.jsonl):
graph, variant, epochs, per-epoch scores and losses, wall seconds (the machine is
shared: compare seconds only side by side).
"""

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402
import graphgen  # noqa: E402
import vs_deepwalk as vd  # noqa: E402
from caps2ne_np.graphs.graph import read_edgelist  # noqa: E402
from caps2ne_np.training.config import TrainConfig  # noqa: E402
from caps2ne_np.training.train import fit  # noqa: E402


def variant_options(name):
    """TrainConfig options of a variant name: off, softmax, nsK, each with an optional
    @weight (default 1): softmax@0.3, ns5@0.3."""
    name, _, weight = name.partition("@")
    weight = float(weight or 1.0)
    if name == "off":
        return dict(skipgram_weight=0.0)
    if name == "softmax":
        return dict(skipgram_weight=weight, skipgram_negatives=0)
    if name.startswith("ns"):
        return dict(skipgram_weight=weight, skipgram_negatives=int(name[2:]))
    raise SystemExit(f"unknown variant {name!r} (off, softmax, nsK, with @weight)")


def run(graph_name, variant, threads, epochs, workdir):
    g = vd.panel_entry(graph_name)
    path = os.path.join(workdir, f"{graph_name}.txt")
    if not os.path.exists(path):
        graphgen.write_edgelist(path, g.adj)
    graph = read_edgelist(path)
    ids = np.array([int(i) for i in graph.node_ids], dtype=np.int64)
    n = g.adj.shape[0]
    scores = []

    def score(epoch, result):
        emb = np.zeros((n, result.params.O.shape[1]), dtype=np.float32)
        emb[ids] = result.params.O
        scores.append(round(vd.score_embedding(g, emb)["headline"], 2))

    cfg = TrainConfig(threads=threads, epochs=epochs, **variant_options(variant))
    with common.clock() as c:
        res = fit(graph.indptr, graph.indices, graph.weights, cfg, epoch_callback=score)
    seconds = c.seconds
    return dict(
        graph=graph_name,
        variant=variant,
        epochs=res.config.epochs,
        lr=res.config.lr,
        scores=scores,
        final=scores[-1],
        peak=max(scores),
        peak_epoch=int(np.argmax(scores)) + 1,
        loss=[round(h["loss"], 4) for h in res.history],
        loss_skipgram=[round(h.get("loss_skipgram", 0.0), 4) for h in res.history],
        seconds_with_scoring=round(seconds, 1),
        train_seconds=round(sum(h["seconds"] for h in res.history), 1),
        load=round(os.getloadavg()[0], 2),
    )


def main(argv=None):
    ap = common.parser(__doc__, threads=2)
    ap.add_argument("--graphs", default="cora,citeseer,syn-1k-mu0.3,syn-3k-mu0.5,syn-3k-mu0.7,ppi")
    ap.add_argument("--variants", default="off,softmax,ns5")
    ap.add_argument("--epochs", type=int, default=None, help="override the budget")
    ap.add_argument(
        "--runs",
        default=str(common.REPO / "docs" / "results" / "skipgram" / "runs.jsonl"),
        help="the JSON-lines file each run is appended to",
    )
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        for graph_name in a.graphs.split(","):
            for variant in a.variants.split(","):
                r = run(graph_name, variant, a.threads, a.epochs, workdir)
                print(json.dumps(r), flush=True)
                with open(a.runs, "a") as fh:
                    fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
