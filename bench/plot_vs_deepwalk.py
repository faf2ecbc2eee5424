"""Score against wall time, Caps2NE and DeepWalk, on a few graphs of the issue 14 panel.

    python bench/plot_vs_deepwalk.py                         # cora, ppi, syn-3k-mu0.7
    python bench/plot_vs_deepwalk.py --graphs syn-1k-mu0.3 --dw-epochs 1,2

For each graph (loaded with vs_deepwalk.panel_entry and written as the same edge
list the panel uses):

* DeepWalk: bench/deepwalk_peer.py run once per gensim epoch count (default 1, 2, 3,
  5), each its own process; a point per run.
* Caps2NE: ``caps2ne_np.estimator.Caps2NE(n_jobs=P, random_state=0, progress=False)``
  with every other hyperparameter at its current default, fitted in this process on
  the graph read from the edge list, with an ``epoch_callback`` that scores the
  embeddings after every epoch; a point per epoch.  The callback's own time
  (scoring) is taken off the clock.  A fit on a 200-node graph first fills Numba's
  caches, untimed.

Time axis: seconds of work inside the process, i.e. reading the edge list, walks
and training (DeepWalk: read + walks + train as deepwalk_peer.py reports them;
Caps2NE: read_graph + fit up to the end of that epoch).  Interpreter start-up and
imports (about 2 s) are left out on both sides; DeepWalk's whole-process wall time is
stored too.  Score: test accuracy (the graph's splits, as in vs_deepwalk.py) or, for
multi-label graphs, micro-F1 with 50% training nodes (``--shuffles`` shuffles).

Writes docs/img/vs_deepwalk.png (matplotlib, Agg) and
docs/results/vs_deepwalk_curves.json, which bench/vs_deepwalk.py copies into its
results.  matplotlib is an optional bench dependency.
"""

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import common
import graphgen
import report
import vs_deepwalk

DEFAULT_GRAPHS = ["cora", "ppi", "syn-3k-mu0.7"]  # met, met, the gap that remains
PNG = common.REPO / "docs" / "img" / "vs_deepwalk.png"


def deepwalk_points(workdir, graph, epochs_list, threads, shuffles):
    """One deepwalk_peer.py run per epoch count: dicts of epochs, seconds, score."""
    points = []
    for epochs in epochs_list:
        out = os.path.join(workdir, f"dw{epochs}.emb")
        cmd = [
            sys.executable,
            str(common.BENCH / "deepwalk_peer.py"),
            "--graph",
            os.path.join(workdir, "g.txt"),
            "--emb",
            out,
            "--threads",
            str(threads),
            "--seed",
            "0",
            "--epochs",
            str(epochs),
        ]
        wall, proc = vs_deepwalk.run_timed(cmd, common.REPO)
        if proc.returncode != 0:
            raise RuntimeError(f"deepwalk_peer.py failed:\n{proc.stderr[-2000:]}")
        phases = vs_deepwalk._parse_peer(proc.stdout)
        emb, _ = vs_deepwalk.load_embedding(out, graph.n_nodes)
        score = vs_deepwalk.score_embedding(graph, emb, shuffles, fractions=(0.5,))
        points.append(
            dict(
                epochs=epochs,
                seconds=phases["read_s"] + phases["walks_s"] + phases["train_s"],
                process_seconds=wall,
                phases={k: v for k, v in phases.items() if k != "nodes"},  # n_nodes is kept
                score=score["headline"],
            )
        )
        print(
            f"  DeepWalk, {epochs} epoch(s): {score['headline']:.2f} at "
            f"{points[-1]['seconds']:.1f} s "
            f"(process {wall:.1f} s)",
            flush=True,
        )
    return points


def caps2ne_points(path, graph, threads, shuffles):
    """Caps2NE with its defaults, scored after every epoch; dicts of epoch, seconds, score."""
    from caps2ne_np.estimator import Caps2NE
    from caps2ne_np.graphs.graph import read_graph

    points = []
    off_clock = [0.0]
    t0 = time.perf_counter()
    g = read_graph(path)
    order = np.array([int(i) for i in g.node_ids], dtype=np.int64)

    def score(epoch, result):
        t_in = time.perf_counter()
        O = result.params.O
        emb = np.zeros((graph.n_nodes, O.shape[1]), dtype=np.float32)
        emb[order] = O
        s = vs_deepwalk.score_embedding(graph, emb, shuffles, fractions=(0.5,))
        seconds = t_in - t0 - off_clock[0]
        points.append(dict(epoch=epoch, seconds=seconds, score=s["headline"]))
        print(f"  Caps2NE, epoch {epoch}: {s['headline']:.2f} at {seconds:.1f} s", flush=True)
        off_clock[0] += time.perf_counter() - t_in

    model = Caps2NE(n_jobs=threads, random_state=0, progress=False)
    model.fit(g, epoch_callback=score)
    return points, dict(model.get_params())


def warm_up(threads):
    from caps2ne_np.estimator import Caps2NE

    adj, _ = graphgen.lfr_like(200, mu=0.3, seed=1, min_community=10, max_community=60)
    t0 = time.perf_counter()
    Caps2NE(n_jobs=threads, random_state=0, progress=False).fit(adj)
    return time.perf_counter() - t0


def plot(curves, path, plt):
    names = list(curves)
    fig, axes = plt.subplots(1, len(names), figsize=(4.6 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        c = curves[name]
        dw, ours = c["deepwalk"], c["caps2ne"]
        ax.plot(
            [p["seconds"] for p in dw],
            [p["score"] for p in dw],
            "s--",
            color="tab:orange",
            label="DeepWalk (gensim epochs " + ",".join(str(p["epochs"]) for p in dw) + ")",
        )
        ax.plot(
            [p["seconds"] for p in ours],
            [p["score"] for p in ours],
            "o-",
            color="tab:blue",
            label=f"Caps2NE defaults ({len(ours)} epochs)",
        )
        for p in dw:
            ax.annotate(
                str(p["epochs"]),
                (p["seconds"], p["score"]),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
                color="tab:orange",
            )
        ax.set_title(f"{name} (N={c['n_nodes']:,})")
        ax.set_xlabel("seconds (read + walks + training)")
        ax.set_ylabel(c["metric"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Score against time, {curves[names[0]]['threads']} threads", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def render(p):
    lines = [
        "# Score against time: Caps2NE defaults and DeepWalk (issue 14)\n",
        f"`{p['command'].strip()}`, {p['threads']} threads; time axis: {p['time_axis']}.\n",
        report.machine_markdown(p["machine"]),
    ]
    for name, c in p["graphs"].items():
        rows = [
            [
                "DeepWalk",
                f"{q['epochs']} gensim epoch(s)",
                f"{q['seconds']:.1f}",
                f"{q['process_seconds']:.1f}",
                f"{q['score']:.2f}",
            ]
            for q in c["deepwalk"]
        ]
        rows += [
            ["Caps2NE", f"epoch {q['epoch']}", f"{q['seconds']:.1f}", "", f"{q['score']:.2f}"]
            for q in c["caps2ne"]
        ]
        lines.append(f"## {name} (N={c['n_nodes']:,}; {c['metric']}; {c['protocol']})\n")
        lines.append(
            report.markdown_table(["method", "point", "seconds", "process seconds", "score"], rows)
            + "\n"
        )
    if p["skipped"]:
        lines.append(
            "Skipped: " + "; ".join(f"{s['name']} ({s['reason']})" for s in p["skipped"]) + "\n"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = common.parser(__doc__, threads=0, out="vs_deepwalk_curves")
    ap.add_argument(
        "--graphs",
        default=",".join(DEFAULT_GRAPHS),
        help="comma-separated panel names (a missing dataset is skipped)",
    )
    ap.add_argument(
        "--dw-epochs", default="1,2,3,5", help="gensim epoch counts of the DeepWalk runs"
    )
    ap.add_argument("--shuffles", type=int, default=3, help="multi-label shuffles per score")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument(
        "--png", default=str(PNG), help=f"figure path (default {PNG.relative_to(common.REPO)})"
    )
    args = ap.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        ap.error(
            "matplotlib is needed to draw the figure (an optional bench dependency): "
            "pip install matplotlib"
        )
    try:
        import gensim  # noqa: F401
    except ImportError:
        ap.error("gensim is needed for the DeepWalk peer: pip install gensim")
    threads = args.threads or common.usable_cores()
    epochs_list = [int(e) for e in args.dw_epochs.split(",")]
    warm = warm_up(threads)
    curves, skipped = {}, []
    payload = dict(
        command="python bench/plot_vs_deepwalk.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        machine=common.machine_info(),
        threads=threads,
        warmup_seconds=warm,
        load_avg_before=os.getloadavg(),
        graphs=curves,
        skipped=skipped,
        time_axis="in-process seconds: read + walks + training (Caps2NE: scoring "
        "callbacks excluded); start-up and imports excluded on both sides",
    )
    with tempfile.TemporaryDirectory(prefix="plot_vs_dw_") as tmp:
        for name in [n.strip() for n in args.graphs.split(",") if n.strip()]:
            try:
                graph = vs_deepwalk.panel_entry(name, args.data_dir)
            except Exception as err:  # noqa: BLE001 -- a missing dataset skips the graph
                skipped.append(dict(name=name, reason=f"{type(err).__name__}: {err}"))
                print(f"{name}: skipped ({err})", flush=True)
                continue
            workdir = os.path.join(tmp, name)
            os.makedirs(workdir)
            graphgen.write_edgelist(os.path.join(workdir, "g.txt"), graph.adj)
            print(f"{name}: N={graph.n_nodes:,}", flush=True)
            dw = deepwalk_points(workdir, graph, epochs_list, threads, args.shuffles)
            ours, params = caps2ne_points(
                os.path.join(workdir, "g.txt"), graph, threads, args.shuffles
            )
            curves[name] = dict(
                n_nodes=graph.n_nodes,
                threads=threads,
                metric="micro-F1 @50% (%)" if graph.multilabel else "accuracy (%)",
                deepwalk=dw,
                caps2ne=ours,
                protocol=graph.split_note or f"{args.shuffles} shuffles",
            )
            payload["caps2ne_params"] = params  # the estimator's defaults: the same per graph
            payload["load_avg_after"] = os.getloadavg()
            common.write_results(args.out, payload, render(payload))
    if not curves:
        print("no graph could be loaded; nothing plotted", file=sys.stderr)
        return 1
    plot(curves, Path(args.png), plt)
    print(f"wrote {args.png} and docs/results/{args.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
