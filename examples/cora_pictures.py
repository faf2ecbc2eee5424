"""Pictures of a default run on the bundled Cora graph: where the embeddings put the
classes, and how accuracy grows epoch by epoch (the README's PNGs, in docs/img/).

    pip install -e ".[plot]"        # matplotlib: optional, only for this script
    python examples/cora_pictures.py [--out-dir DIR] [--projection tsne|pca]
    python examples/cora_pictures.py --out-dir docs/img   # the README's pictures

It trains Caps2NE with the command line's defaults (preset 'converge', no input
features) on the Cora citation graph shipped with the package (2,708 nodes, 7
classes) for the whole budget (``stop="none"``: the default run's ``--stop auto`` trains
the first epochs of this same run, and the picture marks where it stops), scores the
embeddings the defaults write (the o_v propagated) after every epoch with the paper's
protocol (logistic regression, C = 1, on its 10 splits: 20 training nodes per class,
1,000 validation and 1,000 test nodes), and writes into ``--out-dir`` (default: a
folder in the system's temporary directory, never the repository unless asked)

* ``cora_embedding_2d.png``: the 2-D t-SNE (or PCA) projection of the written
  embeddings after the epoch the defaults stop at, one colour per class (the classes
  are not used in training);
* ``cora_accuracy_by_epoch.png``: validation and test accuracy (mean and std over
  the 10 splits) and the training loss after each epoch.

The figures' numbers are printed too.  ``--smoke`` runs a tiny configuration (one
epoch, k = 8, PCA) to check that the script works; its pictures mean nothing.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from caps2ne_np import Caps2NE
from caps2ne_np.evaluation.single import classify_splits
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.graphs.datasets import load_dataset

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out-dir",
        default=str(Path(tempfile.gettempdir()) / "caps2ne_cora_pictures"),
        help="folder for the two PNGs (default: caps2ne_cora_pictures in the temporary "
        "directory; docs/img for the README's)",
    )
    ap.add_argument("--projection", choices=["tsne", "pca"], default="tsne")
    ap.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="default: the converge preset's whole budget (5 epochs on Cora)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="tiny run, to test the script")
    return ap.parse_args(argv)


def train_with_scores(args):
    """(model, ds, rows, stop_epoch, kept): rows = [(epoch, loss, val mean, val std, test
    mean, test std)] of the written embeddings after each epoch, ``stop_epoch`` the epoch
    after which the defaults' stop rule ends the run, ``kept`` its written embeddings.

    Both come from the code the defaults run, with this run's own configuration and
    graph measures: the rows are epoch_selection.written_rows (propagation.apply: the
    --propagate, --spectrum-power and --row-norm the defaults choose for Cora), the
    stop rule is budget.stop_rule of the same options with ``stop='auto'``."""
    import dataclasses

    from caps2ne_np.evaluation.epoch_selection import written_rows
    from caps2ne_np.training import budget

    ds = load_dataset("cora-bundled")
    g = from_scipy(ds.adj, ds.node_ids)
    kw = dict(dim=8, feat_dim=8, walks_per_node=1, epochs=1) if args.smoke else {}
    if args.epochs:
        kw["epochs"] = args.epochs
    rows, state = [], dict(stop=None, kept=None, rule=None)

    def score(epoch, result):
        written, propagated = written_rows(g, result)  # the rows the defaults write
        r = classify_splits(written, ds.labels, ds.splits)
        loss = result.history[-1]["loss"]
        rows.append((epoch, loss, r["val_mean"], r["val_std"], r["test_mean"], r["test_std"]))
        if state["rule"] is None:  # the defaults' rule: this run's options, --stop auto
            auto = dataclasses.replace(result.config, stop="auto")
            structure = result.structure  # None: this --stop none run measured nothing
            if structure is None:
                structure = budget.graph_structure(auto, g)
            state["rule"] = budget.stop_rule(auto, structure)
        if state["stop"] is None and (state["rule"](epoch, result.params) or args.smoke):
            state.update(stop=epoch, kept=written)
        print(
            f"epoch {epoch}: loss {loss:.4f}, val {100 * r['val_mean']:.2f} +- "
            f"{100 * r['val_std']:.2f}, test {100 * r['test_mean']:.2f} +- "
            f"{100 * r['test_std']:.2f} (the o_v {'propagated' if propagated else 'as trained'})"
            + (" (the defaults stop here)" if state["stop"] == epoch else ""),
            flush=True,
        )

    model = Caps2NE(n_jobs=args.threads, random_state=args.seed, stop="none", **kw)
    t0 = time.perf_counter()
    model.fit(g, epoch_callback=score)
    print(
        f"trained {len(model.history_)} epochs in {time.perf_counter() - t0:.1f} s "
        f"(scoring included)",
        flush=True,
    )
    if model.propagation_ is not None:
        print(f"{model.propagation_.note}", flush=True)
    stop = state["stop"] or len(rows)
    kept = state["kept"] if state["kept"] is not None else model.get_embedding()
    return model, ds, rows, stop, kept


def deepwalk_reference():
    """(DeepWalk's mean test accuracy on Cora, its source) from the panel's results, or
    None when the file is not there."""
    path = ROOT / "docs" / "results" / "panel.json"
    try:
        graphs = json.loads(path.read_text(encoding="utf-8"))["graphs"]
        cora = next(e for e in graphs if e["name"] == "cora")
        return cora["summary"]["deepwalk"]["headline"][0], "docs/results/panel.md"
    except (OSError, ValueError, KeyError, StopIteration):
        return None


def project(O, how, seed):
    if how == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=2, random_state=seed).fit_transform(O)
    from sklearn.manifold import TSNE

    return TSNE(n_components=2, init="pca", random_state=seed, perplexity=30).fit_transform(O)


def draw(model, ds, rows, stop, kept, args):
    import matplotlib  # checked by main

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    O = kept  # row i = node model.node_ids_[i] = '0'..'2707'
    assert model.node_ids_ == ds.node_ids
    xy = project(O, args.projection, args.seed)
    fig, ax = plt.subplots(figsize=(6.4, 5.6), dpi=110)
    cmap = plt.get_cmap("tab10")
    for c in range(ds.n_classes):
        pts = xy[ds.labels == c]
        ax.scatter(
            pts[:, 0], pts[:, 1], s=4, color=cmap(c), label=f"class {c}", alpha=0.8, linewidths=0
        )
    name = "t-SNE" if args.projection == "tsne" else "PCA"
    ax.set_title(
        f"Cora: Caps2NE's written embeddings (k = {O.shape[1]}, epoch {stop}), {name} to 2-D,\n"
        f"coloured by class (classes unseen in training)",
        fontsize=10,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.legend(markerscale=3, fontsize=8, loc="best", frameon=False)
    fig.tight_layout()
    fig.savefig(out / "cora_embedding_2d.png")
    plt.close(fig)

    a = np.array(rows, dtype=np.float64)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=110)
    for col, label, colour in ((2, "validation", "tab:blue"), (4, "test", "tab:orange")):
        left.plot(a[:, 0], 100 * a[:, col], marker="o", color=colour, label=label)
        left.fill_between(
            a[:, 0],
            100 * (a[:, col] - a[:, col + 1]),
            100 * (a[:, col] + a[:, col + 1]),
            color=colour,
            alpha=0.15,
        )
    reference = deepwalk_reference()
    if reference is not None:
        left.axhline(reference[0], color="grey", linestyle="--", linewidth=1)
        left.text(
            a[-1, 0],
            reference[0],
            f"DeepWalk {reference[0]:.2f} ({reference[1]})",
            ha="right",
            va="bottom",
            fontsize=7,
            color="grey",
        )
    left.axvline(stop, color="tab:red", linestyle=":", linewidth=1)
    left.text(stop, left.get_ylim()[0], " the defaults stop here", fontsize=7, color="tab:red")
    left.set_xlabel("epoch")
    left.set_ylabel("accuracy % (mean +- std, 10 splits)")
    left.set_title("node classification, the paper's protocol", fontsize=10)
    left.legend(fontsize=8, frameon=False, loc="lower right")
    right.plot(a[:, 0], a[:, 1], marker="o", color="tab:green")
    right.set_xlabel("epoch")
    right.set_ylabel("sampled-softmax loss")
    right.set_title("training loss (mean over the epoch)", fontsize=10)
    for ax in (left, right):
        ax.set_xticks(a[:, 0])
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "cora_accuracy_by_epoch.png")
    plt.close(fig)
    print(f"wrote {out / 'cora_embedding_2d.png'} and {out / 'cora_accuracy_by_epoch.png'}")


def main(argv=None):
    args = parse_args(argv)
    try:  # before two minutes of training, not after
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(
            'this script needs matplotlib: pip install -e ".[plot]" (or pip install matplotlib)'
        )
    if args.smoke:
        args.projection = "pca"
    model, ds, rows, stop, kept = train_with_scores(args)
    draw(model, ds, rows, stop, kept, args)


if __name__ == "__main__":
    main()
