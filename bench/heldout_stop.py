"""Held-out evidence per epoch: which label-free stop signal tracks the written score?

    python bench/heldout_stop.py --graphs pos,syn-3k-mu0.7 --seeds 0,1,2 --out heldout_stop

For each graph and seed, one run of the defaults with ``--stop loglik``'s held-out
sample (budget.held_out: 5% of the edges, at most 2,000, never trained on) trains its
whole budget (the rule's gain threshold set to -inf, so it never stops), and after
every epoch this records, beside the written score the rules should track:

* ``loglik``: the held-out contexts' mean log-likelihood under the full softmax
  (budget.loglik, ``--stop loglik``'s signal);
* ``auc``: the held-out edges' link AUC by the cosine of the o_v (``--stop holdout``);
* ``drift``: |O_t - O_t-1| / |O_t| (``--stop auto``'s second part);
* ``c1`` / ``tuned``: the written rows (propagation.apply with the run's options:
  today's defaults) scored at C = 1 and with C tuned per split (bench/vs_deepwalk.py's
  protocols; multi-label graphs at 50% training nodes).

Then it replays each rule on the curves: the epoch it would stop at and the scores
there, against the run's last epoch (the fixed budget) and its best.  The graph the
runs train on lacks the held-out edges under every rule, so the rules compare on equal
terms; a default run trains on the whole graph.

Writes <results>/<--out>.json + .md after every graph and seed."""

import argparse
import logging
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from common import machine_info, write_results  # noqa: E402
from report import machine_markdown  # noqa: E402
from vs_deepwalk import FRACTIONS, panel_entry, score_embedding  # noqa: E402

LOGLIK_GAINS = (0.0, 0.005, 0.01, 0.02, 0.05)
DRIFTS = (0.2, 0.222, 0.25, 0.3)
AUC_GAIN = 0.002


def run(name, seed, tuned):
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.model import propagation
    from caps2ne_np.training import budget
    from caps2ne_np.training.config import TrainConfig
    from caps2ne_np.training.train import fit
    from common import panel_adjacency

    g = panel_entry(name)
    adj, weights, A = panel_adjacency(g)
    indptr = adj.indptr.astype(np.int64)
    indices = adj.indices.astype(np.int32)
    structure = budget.structure(A, derive_seed(seed, "stop structure") % (2**32))
    rows, state = [], {}
    fractions = (0.5,) if g.multilabel else FRACTIONS

    def on_epoch(epoch, result):
        t0 = time.perf_counter()
        cfg = result.config
        if "held" not in state:
            state["held"], _ = budget.held_out(cfg, (indptr, indices, weights))
            state["auc"] = budget.HoldoutRule(state["held"])
        held = state["held"]
        O = np.array(result.params.O, dtype=np.float32)
        ll = budget.loglik(result.params, held["ctx"], held["tgt"], cfg.model_config())
        auc = state["auc"].score(O)
        prev = state.get("O")
        drift = None if prev is None else budget.drift(prev, O)
        state["O"] = O
        p = propagation.apply(indptr, indices, weights, cfg, O, structure=structure)
        E = O if p is None else p.E
        c1 = score_embedding(g, E, 5, fractions=fractions)["headline"]
        tu = score_embedding(g, E, 5, fractions=fractions, C="tuned")["headline"] if tuned else None
        loss = result.history[-1]["loss"] if result.history else None
        rows.append(dict(epoch=epoch, loss=loss, loglik=ll, auc=auc, drift=drift, c1=c1, tuned=tu))
        print(
            f"  {name} seed {seed} epoch {epoch}: loglik {ll:.4f} auc {auc:.4f} drift "
            f"{drift if drift is None else round(drift, 3)} c1 {c1:.2f} tuned {tu} "
            f"({time.perf_counter() - t0:.1f} s)",
            flush=True,
        )

    budget.LOGLIK_MIN_GAIN = -math.inf  # the rule records, never stops
    cfg = TrainConfig(seed=seed, threads=2, stop="loglik")
    t0 = time.perf_counter()
    fit(indptr, indices, weights, cfg, epoch_callback=on_epoch)
    return dict(
        graph=name,
        seed=seed,
        structure=structure,
        epochs=rows,
        seconds=time.perf_counter() - t0,
    )


def held_out_stop(values, gain):
    """The epoch (1-based) a held-out rule stops at: the first t >= 2 whose value rose
    less than ``gain`` over epoch t - 1's; the last epoch when none does."""
    for t in range(1, len(values)):
        if values[t] - values[t - 1] < gain:
            return t + 1
    return len(values)


def drift_stop(run, threshold):
    """``--stop auto``'s epoch with its drift threshold at ``threshold``: 1 when the
    structure is at least STOP_STRUCTURE, else the first t >= 2 whose drift is below
    ``threshold``, else the last."""
    from caps2ne_np.training.budget import STOP_STRUCTURE

    if run["structure"] is not None and run["structure"] >= STOP_STRUCTURE:
        return 1
    for r in run["epochs"][1:]:
        if r["drift"] < threshold:
            return r["epoch"]
    return len(run["epochs"])


def rules(run):
    """{rule name: stop epoch} of every rule replayed on ``run``'s curves."""
    ll = [r["loglik"] for r in run["epochs"]]
    auc = [r["auc"] for r in run["epochs"]]
    out = {f"auto (structure, drift {d:g})": drift_stop(run, d) for d in DRIFTS}
    out[f"holdout (AUC gain {AUC_GAIN:g})"] = held_out_stop(auc, AUC_GAIN)
    for gain in LOGLIK_GAINS:
        out[f"loglik (gain {gain:g})"] = held_out_stop(ll, gain)
    return out


def fmt(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def render(runs, command):
    lines = [
        "# Held-out evidence per epoch: which stop signal tracks the written score?",
        "",
        f"`{command}`",
        "",
        __doc__.split("\n\n", 2)[2].split("Writes")[0].strip(),
        "",
    ]
    for run in runs:
        lines += [
            f"## {run['graph']}, seed {run['seed']} (structure {fmt(run['structure'], 3)}, "
            f"{run['seconds']:.0f} s)",
            "",
            "| epoch | loss | loglik | AUC | drift | C = 1 | tuned |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in run["epochs"]:
            lines.append(
                f"| {r['epoch']} | {fmt(r['loss'], 4)} | {fmt(r['loglik'], 4)} | "
                f"{fmt(r['auc'], 4)} | {fmt(r['drift'], 3)} | {fmt(r['c1'])} | {fmt(r['tuned'])} |"
            )
        lines.append("")
    lines += [
        "## The rules replayed",
        "",
        "Each rule's stop epoch and its written score there minus the fixed budget's (the "
        "last epoch), C = 1 / tuned, mean over the seeds; `epochs` is the mean stop epoch "
        "over the budget.",
        "",
        "| graph | rule | epochs | C = 1 vs budget | tuned vs budget |",
        "| --- | --- | --- | --- | --- |",
    ]
    graphs = list(dict.fromkeys(r["graph"] for r in runs))
    for name in graphs:
        mine = [r for r in runs if r["graph"] == name]
        stops = [rules(r) for r in mine]
        for rule in stops[0]:
            ep = [s[rule] for s in stops]
            d1 = [r["epochs"][e - 1]["c1"] - r["epochs"][-1]["c1"] for r, e in zip(mine, ep)]
            dt = [
                None
                if r["epochs"][e - 1]["tuned"] is None
                else r["epochs"][e - 1]["tuned"] - r["epochs"][-1]["tuned"]
                for r, e in zip(mine, ep)
            ]
            dt = None if None in dt else float(np.mean(dt))
            lines.append(
                f"| {name} | {rule} | {np.mean(ep):.1f} / {len(mine[0]['epochs'])} | "
                f"{np.mean(d1):+.2f} | {'-' if dt is None else f'{dt:+.2f}'} |"
            )
    lines += ["", machine_markdown(machine_info()), ""]
    return "\n".join(lines)


def rerender(path):
    """Rewrite the .md of a result file from its .json (the replayed rules as they are
    now)."""
    import json

    payload = json.loads(Path(path).read_text())
    Path(path).with_suffix(".md").write_text(render(payload["runs"], payload["command"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graphs", default="pos,syn-3k-mu0.7")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--tuned", action="store_true", help="also score with C tuned per split")
    ap.add_argument("--out", default="heldout_stop")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    command = "python bench/heldout_stop.py " + " ".join(argv if argv is not None else sys.argv[1:])
    runs = []
    for name in args.graphs.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            runs.append(run(name, seed, args.tuned))
            payload = dict(command=command, machine=machine_info(), runs=runs)
            for path in write_results(args.out, payload, render(runs, command)):
                print(f"wrote {path}")


if __name__ == "__main__":
    main()
