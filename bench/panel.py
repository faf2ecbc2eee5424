"""The panel with seeds: ours against DeepWalk (5 epochs and 1) and ProNE, graph by graph.

    python bench/panel.py --graphs cora,citeseer,ppi --seeds 0,1,2
    python bench/panel.py --smoke                    # tiny, seconds (needs gensim)
    python bench/panel.py --links --graphs cora,wiki,ppi,pos   # link prediction

One run cannot carry a 1-point claim: the bundled Cora scored 71.09 in one node order
and 72.51 in another.  So every method runs once per seed, and the seed moves all it
can move:

* the node order: the graph is written with its nodes renamed by a random permutation
  of the seed (the embeddings are mapped back before scoring);
* each method's own randomness: ``--seed`` of every command (walks, initial values,
  negative samples; ProNE's randomized SVD).

The sides, each its own process timed by wall clock (start-up to written file, as
bench/vs_deepwalk.py times them; Numba's caches warm), in an order that rotates with
the seed:

    deepwalk       bench/deepwalk_peer.py: gensim skip-gram, 5 epochs (DeepWalk's code)
    deepwalk_1ep   the same with one gensim epoch (node2vec's default)
    prone          bench/peers/prone_peer.py (both ProNE stages)
    ours           python cli.py train --graph g.txt --out ours.emb --seed S: the defaults
    ours_base      the defaults without spectral propagation and the stop rule
                   (``--propagate none --stop none``): what the panel ran before
    ours_1ep       the defaults with ``--epochs 1`` (propagated): whether the stop rule's
                   later epochs pay on this graph (a lead for the budget, not a default)
    ours_full      the defaults with ``--stop none``: the fixed budget, propagated (the
                   budget target: ours' total time at least 2x lower, no graph more
                   than 0.5 point below it)
    ours_variant   the defaults with the flags of ``--variant`` (not among the default
                   sides): a candidate default measured beside the others, e.g.
                   ``--sides deepwalk,ours,ours_variant --variant="--epochs 10"``

``ours_base`` and ``ours_full`` train the same run (same seed, same training: only the
written rows differ), so on a large graph ``--base-from-full`` trains it once: ours_full
also writes its model (``--model-out``), and ours_base is scored on the model's o_v,
which is what ``--propagate none`` writes (to the word2vec text's rounding; the seconds
of ours_base are then ours_full's, not a measurement of their own).

Every method gets the graph as it is, weights included (POS is weighted: the edge
list then has a third column); DeepWalk's peer walks uniformly, so it ignores them.

Scores, under two protocols on the same splits (bench/vs_deepwalk.py's
``score_protocols``): the paper's, logistic regression at C = 1 (accuracy over the
splits, or micro-F1 at 50% training nodes for multi-label graphs), and the tuned one,
C chosen per split from 0.01..1000 (on the split's validation nodes where it has them,
else by 3-fold cross-validation within its training nodes).  At C = 1 the scale a
method writes decides how hard its rows are regularised; the tuned protocol judges the
embedding alone.  Single-label graphs also report the test nodes' macro-F1 (the MUSAE
graphs' classes are unbalanced).  ``--scales`` scores ours' written rows times each
scale at C = 1 too (the written scale's choice).  Each cell is the mean +- the sample
standard deviation over the seeds; a gap between two cells whose size is below its
spread (sqrt(sd_a^2 + sd_b^2)) is called a tie.  The score targets count a graph as
met when ours is within 1 point of the peer or tied with it; the time targets compare
ours' median wall time with DeepWalk's one epoch (at most 1x on Cora, Citeseer and
PPI, 2x everywhere).

Graphs have a role: the rules of the defaults were chosen on the tuning graphs; the
test graphs (``TEST_GRAPHS``: the two MUSAE graphs) were never used to choose anything,
and the tables mark them.

Writes <results>/<--out>.json + .md after every graph (an interrupted run keeps what
it measured)."""

import argparse
import math
import os
import shlex
import statistics
import sys
import tempfile
import time

import numpy as np

import common
import report
import vs_deepwalk

SIDES = (
    "deepwalk",
    "deepwalk_1ep",
    "prone",
    "ours",
    "ours_base",
    "ours_1ep",
    "ours_full",
    "ours_variant",
)
OURS_OTHER = ("ours_base", "ours_1ep", "ours_full", "ours_variant")
NAMES = dict(
    deepwalk="DeepWalk",
    deepwalk_1ep="DeepWalk, 1 epoch",
    prone="ProNE",
    ours="ours",
    ours_base="ours without propagation and stop rule",
    ours_1ep="ours, 1 epoch",
    ours_full="ours, fixed budget",
    ours_variant="ours, variant",
)
BASE_FLAGS = ["--propagate", "none", "--stop", "none"]
SMOKE_GRAPHS = ["syn-300-mu0.3", "cora-bundled"]
TIME_GRAPHS = ("cora", "citeseer", "ppi")  # ours at most DeepWalk's 1 epoch
TEST_GRAPHS = ("musae-wikipedia", "musae-github")  # never used to choose a rule or threshold


def role(name):
    """'test' for a graph no rule was chosen on, else 'tuning'."""
    return "test" if name in TEST_GRAPHS else "tuning"


def write_graph(path, adj, perm):
    """The graph's edge list with node i renamed perm[i], each undirected edge once,
    with a weight column when any weight differs from 1."""
    coo = adj.tocoo()
    keep = coo.row < coo.col
    u, v, w = perm[coo.row[keep]], perm[coo.col[keep]], coo.data[keep]
    weighted = not np.all(w == 1)
    with open(path, "w") as f:
        for a in range(0, u.shape[0], 1 << 16):
            sl = slice(a, a + (1 << 16))
            if weighted:
                rows = zip(u[sl].tolist(), v[sl].tolist(), w[sl].tolist())
                f.write("".join(f"{x} {y} {z:g}\n" for x, y, z in rows))
            else:
                f.write("".join(f"{x} {y}\n" for x, y in zip(u[sl].tolist(), v[sl].tolist())))
    return int(u.shape[0]), weighted


def side_commands(workdir, threads, seed, smoke, usable, variant=()):
    """The command of every side for one seed; ``variant``: the ours_variant side's
    flags (none: no such side)."""
    dw, ours = vs_deepwalk.commands(workdir, threads, smoke, usable)
    dw = dw[: dw.index("--seed")] + ["--seed", str(seed)] + dw[dw.index("--seed") + 2 :]
    ours = ours + ["--seed", str(seed)]
    prone = vs_deepwalk.prone_command(workdir, threads, smoke)
    prone = prone[: prone.index("--seed")] + ["--seed", str(seed)]
    base = [c.replace("ours.emb", "base.emb") for c in ours] + BASE_FLAGS
    full = [c.replace("ours.emb", "full.emb") for c in ours] + ["--stop", "none"]
    cmds = dict(deepwalk=dw, ours=ours, prone=prone, ours_base=base, ours_full=full)
    if variant:
        cmds["ours_variant"] = [c.replace("ours.emb", "variant.emb") for c in ours] + list(variant)
    if not smoke:  # (the smoke run trains one epoch on both sides anyway)
        cmds["ours_1ep"] = [c.replace("ours.emb", "one.emb") for c in ours] + ["--epochs", "1"]
        cmds["deepwalk_1ep"] = vs_deepwalk.fast_peer_command(dw)
    return cmds


def out_file(cmd):
    return cmd[cmd.index("--emb" if "--emb" in cmd else "--out") + 1]  # a peer's, or ours


def run_seed(graph, seed, args, usable, sides):
    """Every side on the graph renamed by the seed's permutation: {side: record}."""
    perm = np.random.default_rng([seed, 20261127]).permutation(graph.n_nodes)
    out = {}
    with tempfile.TemporaryDirectory(prefix="panel_") as d:
        n_edges, weighted = write_graph(os.path.join(d, "g.txt"), graph.adj, perm)
        cmds = side_commands(d, args.threads, seed, args.smoke, usable, shlex.split(args.variant))
        derive = args.base_from_full and {"ours_base", "ours_full"} <= set(sides)
        if derive:
            cmds["ours_full"] = cmds["ours_full"] + ["--model-out", os.path.join(d, "full.npz")]
        order = [s for s in sides if s in cmds and not (derive and s == "ours_base")]
        k = seed % len(order)
        for side in order[k:] + order[:k]:
            cmd = cmds[side]
            seconds, proc = vs_deepwalk.run_timed(cmd, common.REPO)
            rec = dict(seconds=seconds)
            if proc.returncode != 0:
                rec["error"] = f"exit {proc.returncode}: " + " | ".join(
                    vs_deepwalk._screen_lines(proc.stderr, 4)
                )
            else:
                emb, _ = vs_deepwalk.load_embedding(out_file(cmd), graph.n_nodes)  # no edges: 0
                emb = emb[perm]  # row i: node i of the panel graph (renamed perm[i])
                scales = args.scale_list if side.startswith("ours") else ()
                rec["score"] = vs_deepwalk.score_protocols(graph, emb, args.shuffles, scales)
                if side.startswith("ours"):
                    rec["log"] = [
                        line
                        for line in vs_deepwalk._screen_lines(proc.stderr, 40)
                        if line.startswith(("trained ", "stop after", "written embeddings"))
                    ]
            out[side] = rec
            report_side(seed, side, rec)
            if derive and side == "ours_full":
                out["ours_base"] = base_from_model(graph, perm, rec, d, args)
                report_side(seed, "ours_base", out["ours_base"])
    return out, n_edges, weighted


def base_from_model(graph, perm, full, workdir, args):
    """ours_base's record from ours_full's model file (``--base-from-full``): the
    trained o_v, row i = node i of the panel graph."""
    if "error" in full:
        return dict(seconds=full["seconds"], error="ours_full failed: " + full["error"])
    with np.load(os.path.join(workdir, "full.npz"), allow_pickle=False) as m:
        ids, O = m["node_ids"], m["O"]
    emb = np.zeros((graph.n_nodes, O.shape[1]), dtype=np.float32)
    emb[np.array([int(i) for i in ids], dtype=np.int64)] = O
    score = vs_deepwalk.score_protocols(graph, emb[perm], args.shuffles, args.scale_list)
    return dict(seconds=full["seconds"], score=score, derived_from="ours_full")


def report_side(seed, side, rec):
    print(
        f"  seed {seed} {side:13s} {rec['seconds']:7.1f} s  "
        + (
            f"{rec['score']['headline']:.2f} (tuned C {rec['score']['tuned']['headline']:.2f})"
            if "score" in rec
            else rec["error"]
        ),
        flush=True,
    )


def cell(values):
    """(mean, sample sd) of a list; sd 0 for one value; None for none."""
    if not values:
        return None
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values), sd


def summarize(entry):
    """Per side: the headline's mean and sd over seeds, the median seconds; then the
    gaps of ours against the peers."""
    summary = {}
    for side in SIDES:
        recs = [r[side] for r in entry["runs"] if side in r and "score" in r[side]]
        if not recs:
            continue
        s = dict(
            headline=cell([r["score"]["headline"] for r in recs]),
            seconds=common.median([r["seconds"] for r in recs]),
            n=len(recs),
        )
        if all("tuned" in r["score"] for r in recs):
            s["tuned"] = cell([r["score"]["tuned"]["headline"] for r in recs])
        if all("macro_f1" in r["score"] for r in recs):
            s["macro_f1"] = cell([r["score"]["macro_f1"] for r in recs])
            if all("macro_f1" in r["score"].get("tuned", {}) for r in recs):
                s["tuned_macro_f1"] = cell([r["score"]["tuned"]["macro_f1"] for r in recs])
        if all("scaled" in r["score"] for r in recs):
            s["scaled"] = {
                k: cell([r["score"]["scaled"][k] for r in recs]) for k in recs[0]["score"]["scaled"]
            }
        if recs[0]["score"]["protocol"] == "multi-label":
            s["micro"] = [cell(list(v)) for v in zip(*(r["score"]["micro"] for r in recs))]
            s["macro"] = [cell(list(v)) for v in zip(*(r["score"]["macro"] for r in recs))]
        summary[side] = s
    entry["summary"] = summary
    ours = summary.get("ours")
    if ours is None:
        return entry
    gaps, tuned_gaps = {}, {}
    for side in ("deepwalk", "prone", "deepwalk_1ep") + OURS_OTHER:
        if side in summary:
            gaps[side] = gap(ours["headline"], summary[side]["headline"])
            if "tuned" in ours and "tuned" in summary[side]:
                tuned_gaps[side] = gap(ours["tuned"], summary[side]["tuned"])
    entry["tuned_gaps"] = tuned_gaps
    peers = [s for s in ("deepwalk", "prone") if s in summary]
    if len(peers) == 2:
        best = max(peers, key=lambda s: summary[s]["headline"][0])
        entry["best_peer"] = best
        gaps["best"] = gaps[best]
    entry["gaps"] = gaps
    if "deepwalk_1ep" in summary:
        entry["time_ratio_1ep"] = ours["seconds"] / summary["deepwalk_1ep"]["seconds"]
    if "deepwalk" in summary:
        entry["time_ratio"] = ours["seconds"] / summary["deepwalk"]["seconds"]
    return entry


def gap(a, b):
    """Ours minus a peer: (gap, spread, verdict); verdict 'tie' when |gap| < spread,
    else 'ahead' or 'behind'."""
    g, spread = a[0] - b[0], math.hypot(a[1], b[1])
    verdict = "tie" if abs(g) < spread else ("ahead" if g > 0 else "behind")
    return g, spread, verdict


def within(g):
    """The score targets' rule: within 1 point of the peer, or tied with it."""
    return g[0] >= -1.0 or g[2] == "tie"


def fmt_cell(c, seconds=None):
    if c is None:
        return "-"
    text = f"{c[0]:.2f} +- {c[1]:.2f}"
    return text + (f" ({seconds:.1f} s)" if seconds is not None else "")


def fmt_gap(g):
    return f"{g[0]:+.2f} ({g[2]})"


def render(payload):
    graphs = payload["graphs"]
    seeds = ",".join(str(s) for s in payload["seeds"])
    lines = [
        "# The panel with seeds: ours against DeepWalk and ProNE",
        "",
        f"`{payload['command']}`",
        "",
        f"Seeds {seeds}: each moves the node order (the graph renamed by a random "
        "permutation) and every method's own randomness (`--seed`). Score: accuracy, or "
        "micro-F1 at 50% training nodes for multi-label graphs (bench/vs_deepwalk.py's "
        "protocol), mean +- sample sd over seeds; wall seconds (median over seeds) of the "
        f"whole process, {payload['threads']} threads on every side. A gap below its "
        "spread (sqrt(sd_a^2 + sd_b^2)) is a tie. Every method gets the graph as it is, "
        "weights included; DeepWalk's walks are uniform (it ignores the weights).",
        "",
    ]
    if payload.get("variant"):
        lines += [
            f'The side "{NAMES["ours_variant"]}": the defaults with `{payload["variant"]}`.',
            "",
        ]
    if payload.get("smoke"):
        lines += ["**SMOKE RUN: reduced budgets; no conclusion from these numbers.**", ""]
    shown = [s for s in SIDES if s in payload.get("sides", SIDES)]
    head = ["graph", "role", "N", "weighted"] + [NAMES[s] for s in shown]
    lines += ["The paper's protocol (C = 1), with each side's median seconds:", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for e in graphs:
        s = e["summary"]
        row = [e["name"], role(e["name"]), f"{e['n_nodes']:,}", "yes" if e["weighted"] else "no"]
        row += [fmt_cell(s[x]["headline"], s[x]["seconds"]) if x in s else "-" for x in shown]
        lines.append("| " + " | ".join(row) + " |")
    lines += protocol_lines(graphs, shown)
    others = [x for x in OURS_OTHER if x in shown]
    lines += gap_lines(graphs, others)
    lines += budget_lines(graphs)
    multi = [e for e in graphs if "micro" in next(iter(e["summary"].values()), {})]
    if multi:
        lines += ["Multi-label graphs, micro-F1 / macro-F1 at 10, 50 and 90% training nodes:", ""]
        for e in multi:
            lines += [f"**{e['name']}**", "", "| side | micro-F1 | macro-F1 |"]
            lines.append("| --- | --- | --- |")
            for side in SIDES:
                s = e["summary"].get(side)
                if s is None:
                    continue
                micro = " / ".join(f"{m:.2f}" for m, _ in s["micro"])
                macro = " / ".join(f"{m:.2f}" for m, _ in s["macro"])
                lines.append(f"| {NAMES[side]} | {micro} | {macro} |")
            lines.append("")
    lines += ["Ours' log, per graph and seed (the stop rule's epoch, the rate):", ""]
    for e in graphs:
        for seed, r in zip(payload["seeds"], e["runs"]):
            for side in ("ours",) + OURS_OTHER:
                head = f"- {e['name']}, seed {seed}, {side}: "
                if side in r and r[side].get("log"):
                    lines.append(head + "; ".join(r[side]["log"]))
                elif side in r and "error" in r[side]:
                    lines.append(head + f"FAILED {r[side]['error']}")
    lines += ["", report.machine_markdown(payload["machine"]), ""]
    return "\n".join(lines)


def protocol_lines(graphs, shown):
    """The tuned protocol's table, the single-label graphs' macro-F1 under both, and
    ours' written rows rescaled at C = 1 (``--scales``), where the results have them."""
    lines = []
    if any("tuned" in v for e in graphs for v in e["summary"].values()):
        lines += ["", "The tuned protocol (C chosen per split), the same splits:", ""]
        head = ["graph", "role"] + [NAMES[s] for s in shown] + ["ours: C = 1 minus tuned"]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for e in graphs:
            s = e["summary"]
            row = [e["name"], role(e["name"])]
            row += [fmt_cell(s[x].get("tuned")) if x in s else "-" for x in shown]
            o = s.get("ours", {})
            row.append(f"{o['headline'][0] - o['tuned'][0]:+.2f}" if "tuned" in o else "-")
            lines.append("| " + " | ".join(row) + " |")
    macro = [e for e in graphs if any("macro_f1" in v for v in e["summary"].values())]
    if macro:
        lines += ["", "Macro-F1 of the test nodes (single-label graphs), C = 1 / tuned:", ""]
        head = ["graph", "role"] + [NAMES[s] for s in shown]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for e in macro:
            s = e["summary"]
            row = [e["name"], role(e["name"])]
            for x in shown:
                v = s.get(x, {})
                row.append(
                    f"{v['macro_f1'][0]:.2f} / {v['tuned_macro_f1'][0]:.2f}"
                    if "tuned_macro_f1" in v
                    else "-"
                )
            lines.append("| " + " | ".join(row) + " |")
    scaled = [e for e in graphs if "scaled" in e["summary"].get("ours", {})]
    if scaled:
        keys = list(scaled[0]["summary"]["ours"]["scaled"])
        lines += ["", "Ours' written rows times a scale, at C = 1 (and the tuned score):", ""]
        head = ["graph", "role"] + [f"x {k}" for k in keys] + ["tuned"]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for e in scaled:
            o = e["summary"]["ours"]
            row = [e["name"], role(e["name"])] + [fmt_cell(o["scaled"].get(k)) for k in keys]
            row.append(fmt_cell(o.get("tuned")))
            lines.append("| " + " | ".join(row) + " |")
        lines += scale_choice_lines(scaled)
    return lines


def shortfalls(entries):
    """{scale: [(graph, tuned minus the C = 1 score of ours' rows times scale), ...]} over
    the graphs with both, the unit rows as scale '1'."""
    out = {}
    for e in entries:
        o = e["summary"]["ours"]
        if "tuned" not in o:
            continue
        cells = {"1": o["headline"], **o["scaled"]}
        for k, c in cells.items():
            out.setdefault(k, []).append((e["name"], o["tuned"][0] - c[0]))
    return out


def scale_choice_lines(scaled):
    """The written scale's rule: on the tuning graphs, the scale whose worst C = 1
    shortfall against ours' tuned score is smallest; the same scale's shortfalls on the
    test graphs, which did not choose it."""
    tuning = shortfalls([e for e in scaled if role(e["name"]) == "tuning"])
    test = shortfalls([e for e in scaled if role(e["name"]) == "test"])
    if not tuning:
        return []
    worst = {k: max(v, key=lambda t: t[1]) for k, v in tuning.items()}
    best = min(worst, key=lambda k: (worst[k][1], abs(float(k) - 1)))
    lines = [
        "",
        "The written scale (rows of length r at C = 1): the worst shortfall below "
        "ours' tuned score, per scale:",
        "",
        "| r | tuning graphs: worst (graph) | test graphs: worst (graph) |",
        "| --- | --- | --- |",
    ]
    for k in sorted(worst, key=float):
        t = max(test[k], key=lambda x: x[1]) if k in test else None
        lines.append(
            f"| {k} | {worst[k][1]:.2f} ({worst[k][0]}) | "
            + (f"{t[1]:.2f} ({t[0]})" if t else "-")
            + " |"
        )
    lines += [
        "",
        f"Chosen on the tuning graphs: r = {best} (worst shortfall "
        f"{worst[best][1]:.2f} on {worst[best][0]}).",
    ]
    return lines


def gap_lines(graphs, others):
    """Ours against each peer and the score targets' counts; nothing when no graph has
    ours and a peer (a run of the variant side alone)."""
    if not any(e.get("gaps") for e in graphs):
        return [""]
    lines = []
    lines += [
        "",
        "Ours against each at C = 1: the gap in points (mean over seeds) and whether it "
        "is a tie; the score targets count within 1 point or a tie as met; the time "
        "ratio is ours' median wall time over the peer's; the time target is "
        "ours at most DeepWalk's one-epoch time on Cora, Citeseer and PPI, at most 2x on "
        "every graph.",
        "",
        "| graph | vs DeepWalk | vs ProNE | vs best peer | vs DeepWalk 1 epoch | "
        + "".join(f"vs {NAMES[x]} | " for x in others)
        + "within 1 of DeepWalk | within 1 of best | "
        "time / DeepWalk 1 epoch | time / DeepWalk | time target |",
        "|" + " --- |" * (10 + len(others)),
    ]
    met_dw = met_best = counted = 0
    for e in graphs:
        g = e.get("gaps", {})
        if not g:
            continue
        counted += 1
        w_dw = within(g["deepwalk"]) if "deepwalk" in g else None
        w_best = within(g["best"]) if "best" in g else None
        met_dw += bool(w_dw)
        met_best += bool(w_best)
        row = [e["name"]]
        row += [fmt_gap(g[x]) if x in g else "-" for x in ("deepwalk", "prone", "best")]
        row += [fmt_gap(g[x]) if x in g else "-" for x in ["deepwalk_1ep"] + others]
        row += ["-" if w is None else ("yes" if w else "**no**") for w in (w_dw, w_best)]
        r1, r5 = e.get("time_ratio_1ep"), e.get("time_ratio")
        row += [f"{r1:.2f}" if r1 else "-", f"{r5:.2f}" if r5 else "-"]
        limit = 1.0 if e["name"] in TIME_GRAPHS else 2.0
        row.append("-" if not r1 else (f"<= {limit:g}: " + ("yes" if r1 <= limit else "**no**")))
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        f"Within 1 point of DeepWalk (or tied): {met_dw} of {counted} graphs; of the better "
        f"peer: {met_best} of {counted}.",
        "",
    ]
    return lines


def budget_lines(graphs):
    """The budget target, from the graphs with both ours and ours_full: the sum of
    their median seconds, and the largest score drop of ours below the fixed budget."""
    both = [e for e in graphs if {"ours", "ours_full"} <= set(e.get("summary", {}))]
    if not both:
        return []
    t_ours = sum(e["summary"]["ours"]["seconds"] for e in both)
    t_full = sum(e["summary"]["ours_full"]["seconds"] for e in both)
    worst = min(both, key=lambda e: e["gaps"]["ours_full"][0])
    return [
        f"The budget: on the {len(both)} graphs with both sides, ours' median "
        f"seconds sum to {t_ours:.1f} against {t_full:.1f} for the fixed budget "
        f"({t_full / t_ours:.2f}x lower; target 2x); the largest gap to the fixed budget's "
        f"score is {fmt_gap(worst['gaps']['ours_full'])} on {worst['name']} (target: none "
        "below -0.5).",
        "",
    ]


# --------------------------------------------------------------------------- --links

LINK_SIDES = ("ours", "deepwalk", "prone")
LINK_SCORERS = ("cosine", "logistic")  # the target's two; dot is in the JSON
LINK_METRICS = ("auc", "ap", "hits")
LINK_TARGET_GRAPHS = ("ppi", "pos", "wiki")
LINK_FRACTION = 0.1
LINK_K = 50
# CogDL's link-prediction table (10% of edges held out, ROC-AUC, uniform non-edges, 10
# repeats); its "Wikipedia" is POS
COGDL = dict(
    ppi=dict(prone=79.93, deepwalk=69.65, netmf=79.04, hope=80.21),
    pos=dict(prone=82.74, deepwalk=65.93),
)


def run_link_seed(graph, seed, args, usable, sides):
    """Every side trained on the training edges of the seed's split (the graph renamed by
    the seed's permutation), scored on its held-out edges (caps2ne_np.evaluation.links):
    {side: record}."""
    from caps2ne_np.evaluation import links

    split = links.split_edges(graph.adj, LINK_FRACTION, seed)
    perm = np.random.default_rng([seed, 20261127]).permutation(graph.n_nodes)
    out = {}
    with tempfile.TemporaryDirectory(prefix="links_") as d:
        write_graph(os.path.join(d, "g.txt"), split.train_adjacency(), perm)
        cmds = side_commands(d, args.threads, seed, args.smoke, usable)
        k = seed % len(sides)
        for side in sides[k:] + sides[:k]:
            seconds, proc = vs_deepwalk.run_timed(cmds[side], common.REPO)
            rec = dict(seconds=seconds)
            if proc.returncode != 0:
                rec["error"] = f"exit {proc.returncode}: " + " | ".join(
                    vs_deepwalk._screen_lines(proc.stderr, 4)
                )
            else:
                emb, _ = vs_deepwalk.load_embedding(out_file(cmds[side]), graph.n_nodes)
                got = links.evaluate_links(emb[perm], split, k=args.hits_k, seed=seed)
                rec.update(compact_links(got))
            out[side] = rec
            print(f"  seed {seed} {side:9s} {seconds:7.1f} s  " + link_line(rec), flush=True)
    return out, dict(held=len(split.held), train=len(split.train), wanted=split.wanted)


def compact_links(result):
    """evaluate_links' result as the results file keeps it (docs/results/ stays small):
    per kind, the number of non-edges and per scorer [auc, ap, hits] to 4 decimals."""
    kinds = {
        kind: dict(
            negatives=v["negatives"],
            **{s: [round(m[x], 4) for x in LINK_METRICS] for s, m in v["scores"].items()},
        )
        for kind, v in result["kinds"].items()
    }
    return dict(held=result["held"], k=result["k"], folds=result["folds"], kinds=kinds)


def link_line(rec):
    """One side's ROC-AUCs (percent) per negative kind, cosine / logistic."""
    if "error" in rec:
        return rec["error"]
    aucs = {k: [100 * v[x][0] for x in LINK_SCORERS] for k, v in rec["kinds"].items()}
    return "  ".join(f"{k} {a:.2f}/{b:.2f}" for k, (a, b) in aucs.items())


def link_summary(entry):
    """{side: {kind: {scorer: {metric: (mean, sd) in percent}}}, seconds} over the seeds."""
    summary = {}
    for side in LINK_SIDES:
        recs = [r[side] for r in entry["runs"] if side in r and "kinds" in r[side]]
        if not recs:
            continue
        s = dict(seconds=common.median([r["seconds"] for r in recs]), n=len(recs), kinds={})
        for kind, v in recs[0]["kinds"].items():
            s["kinds"][kind] = {
                scorer: {
                    m: cell([100 * r["kinds"][kind][scorer][i] for r in recs])
                    for i, m in enumerate(LINK_METRICS)
                }
                for scorer in v
                if scorer != "negatives"
            }
        summary[side] = s
    entry["summary"] = summary
    return entry


def link_stored(payload):
    """The payload as the results file keeps it: the runs, not their summaries (which
    ``link_summary`` recomputes)."""
    graphs = [{k: v for k, v in e.items() if k != "summary"} for e in payload["graphs"]]
    return dict(payload, graphs=graphs)


def link_target(graphs):
    """The target's verdicts: (graph, kind, scorer, gaps of ours against each peer, met)
    for the target graphs, where ours and both peers ran; met when ours' mean ROC-AUC is
    at or above each peer's."""
    rows = []
    for e in graphs:
        s = e["summary"]
        if e["name"] not in LINK_TARGET_GRAPHS or not {"ours", "deepwalk", "prone"} <= set(s):
            continue
        for kind in s["ours"]["kinds"]:
            for scorer in LINK_SCORERS:
                cells = {
                    x: s[x]["kinds"][kind][scorer]["auc"] for x in ("ours", "deepwalk", "prone")
                }
                gaps = {x: gap(cells["ours"], cells[x]) for x in ("deepwalk", "prone")}
                rows.append((e["name"], kind, scorer, gaps, all(g[0] >= 0 for g in gaps.values())))
    return rows


def render_links(payload):
    """The link column's Markdown: ROC-AUC per negative kind, AP and Hits@K, the target."""
    graphs, sides = payload["graphs"], payload["sides"]
    lines = [
        "# Link prediction: ours (the defaults) against DeepWalk and ProNE",
        "",
        *[f"    {c}" for c in payload.get("commands", [payload["command"]])],
        "",
        f"Per graph and seed ({', '.join(str(s) for s in payload['seeds'])}): "
        f"{100 * LINK_FRACTION:g}% of the edges held out by "
        "`caps2ne_np.evaluation.links.split_edges` (a random spanning forest kept, so every "
        "node keeps a training edge), the training graph renamed by the seed's permutation, "
        "every side trained on it with its defaults, then the held-out edges scored against "
        "as many sampled non-edges of each kind (docs/links.md): cosine of the two rows "
        "(nothing trained) and logistic regression on their Hadamard product (3-fold over "
        "the scored pairs). Mean +- sample sd over the seeds, percent.",
        "",
        "Each seed, as commands (the bench renames the nodes first; otherwise the same):",
        "",
        "```bash",
        *payload["recipe"],
        "```",
        "",
    ]
    if payload.get("smoke"):
        lines += ["**SMOKE RUN: reduced budgets; no conclusion from these numbers.**", ""]
    if payload.get("note"):
        lines += [payload["note"], ""]
    kinds = list(
        dict.fromkeys(k for e in graphs for s in e["summary"].values() for k in s["kinds"])
    )
    for kind in kinds:
        lines += [f"ROC-AUC, {kind} non-edges, cosine / logistic regression:", ""]
        head = ["graph", "N", "held out"] + [f"{NAMES[x]}" for x in sides]
        head += ["CogDL ProNE", "CogDL DeepWalk"] if kind == "uniform" else []
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for e in graphs:
            row = [e["name"], f"{e['n_nodes']:,}", f"{e['split']['held']:,}"]
            for x in sides:
                c = e["summary"].get(x, {}).get("kinds", {}).get(kind)
                row.append(
                    f"{fmt_cell(c['cosine']['auc'])} / {fmt_cell(c['logistic']['auc'])}"
                    if c
                    else "-"
                )
            if kind == "uniform":
                ref = COGDL.get(e["name"], {})
                row += [f"{ref[x]:.2f}" if x in ref else "-" for x in ("prone", "deepwalk")]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += link_detail_lines(graphs, sides, kinds, payload["hits_k"])
    lines += link_target_lines(graphs)
    lines += ["", report.machine_markdown(payload["machine"]), ""]
    return "\n".join(lines)


def link_detail_lines(graphs, sides, kinds, k):
    """Average precision and Hits@K of the logistic regression, and each side's seconds."""
    lines = [f"Logistic regression's average precision / Hits@{k}, per kind of non-edge:", ""]
    head = ["graph", "side"] + list(kinds) + ["median seconds"]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for e in graphs:
        for x in sides:
            s = e["summary"].get(x)
            if s is None:
                continue
            row = [e["name"], NAMES[x]]
            for kind in kinds:
                c = s["kinds"][kind]["logistic"]
                row.append(f"{c['ap'][0]:.2f} / {c['hits'][0]:.2f}")
            lines.append("| " + " | ".join(row + [f"{s['seconds']:.1f}"]) + " |")
    return lines + [""]


def link_target_lines(graphs):
    """The target (ours at or above both peers on PPI, POS and Wiki), graph by graph."""
    rows = link_target(graphs)
    if not rows:
        return ["The target: no target graph (PPI, POS, Wiki) ran with all three sides."]
    lines = [
        "The target: ours' mean ROC-AUC at or above DeepWalk's and ProNE's on PPI, POS and "
        "Wiki, for both scorers (gap in points; a tie when below its spread):",
        "",
        "| graph | non-edges | scorer | vs DeepWalk | vs ProNE | met |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, kind, scorer, gaps, met in rows:
        lines.append(
            f"| {name} | {kind} | {scorer} | {fmt_gap(gaps['deepwalk'])} | "
            f"{fmt_gap(gaps['prone'])} | {'yes' if met else '**no**'} |"
        )
    for kinds, what in ((("uniform",), "uniform"), (("degree", "two-hop"), "hard")):
        sel = [r for r in rows if r[1] in kinds]
        lines.append(
            f"\n{what} non-edges: met in {sum(r[4] for r in sel)} of {len(sel)} "
            "(graph, kind, scorer) cells."
        )
    return lines


def link_recipe(seed=0):
    """The commands a user runs for one graph and seed (cora as the example)."""
    return [
        f"python cli.py split-edges --dataset cora --out split --seed {seed}",
        f"python cli.py train --graph split/train_edges.txt --out ours.emb --seed {seed}",
        f"python bench/deepwalk_peer.py --graph split/train_edges.txt --emb dw.emb --seed {seed}",
        f"python bench/peers/prone_peer.py --graph split/train_edges.txt --emb prone.emb "
        f"--seed {seed}",
        "python cli.py evaluate --task link -e ours.emb --dataset cora --split split "
        f"--seed {seed}",
    ]


def links_main(args, argv):
    """--links: the link column of every --graphs graph over --seeds."""
    seeds = [int(s) for s in args.seeds.split(",") if s]
    asked = [s for s in args.sides.split(",") if s]
    sides = [s for s in LINK_SIDES if s in asked] or list(LINK_SIDES)
    if "prone" in sides and not vs_deepwalk.have_prone():
        print("ProNE peer skipped: nodevectors is not installed", file=sys.stderr)
        sides.remove("prone")
    names = SMOKE_GRAPHS if args.smoke else [g for g in args.graphs.split(",") if g]
    usable = len(os.sched_getaffinity(0))
    vs_deepwalk.warm_up(argparse.Namespace(threads=args.threads, prone="prone" in sides), usable)
    out = "links_panel" if args.out == "panel" else args.out
    payload = dict(
        command=common.command(argv),
        recipe=link_recipe(),
        seeds=seeds[:2] if args.smoke else seeds,
        sides=sides,
        smoke=args.smoke,
        hits_k=args.hits_k,
        graphs=[],
        machine=common.short_machine(common.machine_info()),
    )
    for name in names:
        try:
            graph = vs_deepwalk.panel_entry(name, args.data_dir)
        except Exception as err:  # a dataset not in the cache: skip, say so
            print(f"{name}: skipped ({err})", file=sys.stderr)
            continue
        print(f"{name}: {graph.n_nodes:,} nodes", flush=True)
        entry = dict(name=name, n_nodes=graph.n_nodes, runs=[])
        payload["graphs"].append(entry)
        for seed in payload["seeds"]:
            runs, entry["split"] = run_link_seed(graph, seed, args, usable, sides)
            entry["runs"].append(runs)
            link_summary(entry)
            common.write_results(out, link_stored(payload), render_links(payload))
    print(render_links(payload))


def main(argv=None):
    ap = common.parser(__doc__, threads=0, smoke=", ".join(SMOKE_GRAPHS), out="panel")
    ap.add_argument("--graphs", default="cora,citeseer,ppi", help="comma-separated panel names")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    ap.add_argument("--sides", default=",".join(SIDES[:-1]), help="comma-separated subset of sides")
    ap.add_argument("--variant", default="", help="the ours_variant side's flags, one string")
    ap.add_argument("--shuffles", type=int, default=5, help="multi-label protocol shuffles")
    ap.add_argument(
        "--scales",
        default="",
        help="comma-separated factors: also score ours' written rows times each at C = 1",
    )
    ap.add_argument(
        "--base-from-full",
        action="store_true",
        help="score ours_base on ours_full's trained o_v instead of training it again",
    )
    ap.add_argument("--data-dir", default=None, help="benchmark data (default: the cache)")
    ap.add_argument(
        "--written",
        action="store_true",
        help="score the written options and the labelled choice instead of the sides "
        "(bench/written.py); records in <--cache>/<--out>.runs/",
    )
    ap.add_argument("--cache", default=None, help="--written: folder for the trained o_v")
    ap.add_argument(
        "--loo",
        default="",
        help="comma-separated --written stems: the rules chosen by leaving each graph out",
    )
    ap.add_argument(
        "--links",
        action="store_true",
        help="link prediction instead (docs/links.md): ours, DeepWalk and ProNE trained on "
        "90%% of the edges, scored on the rest; writes <results>/links_panel.json + .md",
    )
    ap.add_argument("--hits-k", type=int, default=LINK_K, help="--links: K of Hits@K")
    args = ap.parse_args(argv)
    if args.links:
        return links_main(args, argv)
    if args.written or args.loo:
        return written_main(args, argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    args.scale_list = [float(x) for x in args.scales.split(",") if x]
    sides = [s for s in args.sides.split(",") if s]
    unknown = set(sides) - set(SIDES)
    if unknown:
        ap.error(f"unknown sides {sorted(unknown)}; choose from {list(SIDES)}")
    if ("ours_variant" in sides) != bool(args.variant.strip()):
        ap.error("--variant FLAGS and the side ours_variant go together")
    if "prone" in sides and not vs_deepwalk.have_prone():
        print("ProNE peer skipped: nodevectors is not installed", file=sys.stderr)
        sides.remove("prone")
    names = SMOKE_GRAPHS if args.smoke else [g for g in args.graphs.split(",") if g]
    if args.smoke:
        seeds = seeds[:2]
    usable = len(os.sched_getaffinity(0))
    warm = argparse.Namespace(threads=args.threads, prone="prone" in sides)
    vs_deepwalk.warm_up(warm, usable)
    payload = dict(
        command=common.command(argv),
        seeds=seeds,
        sides=sides,
        variant=args.variant,
        threads=args.threads,
        smoke=args.smoke,
        graphs=[],
        machine=common.short_machine(common.machine_info()),
    )
    t0 = time.perf_counter()
    for name in names:
        try:
            graph = vs_deepwalk.panel_entry(name, args.data_dir)
        except Exception as err:  # a dataset not in the cache: skip, say so
            print(f"{name}: skipped ({err})", file=sys.stderr)
            continue
        print(f"{name}: {graph.n_nodes:,} nodes", flush=True)
        entry = dict(name=name, role=role(name), n_nodes=graph.n_nodes, runs=[])
        payload["graphs"].append(entry)
        for seed in seeds:  # the files after every seed: a long graph's run keeps its seeds
            runs, n_edges, weighted = run_seed(graph, seed, args, usable, sides)
            entry.update(n_edges=n_edges, weighted=weighted)
            entry["runs"].append(runs)
            summarize(entry)
            payload["seconds"] = time.perf_counter() - t0
            common.write_results(args.out, payload, render(payload))
    print(render(payload))


def written_main(args, argv):
    """--written and --loo (bench/written.py)."""
    import written

    if args.loo:
        stems = [s for s in args.loo.split(",") if s]
        records = written.load(stems)
        named = {
            "defaults": written.Rule("p=0.75 len=2"),
            "auto": written.Rule("p=0.5 len=2", "p=1 len=2", "structure", 0.75),
        }
        result = written.leave_one_out(records, named)
        text = written.render_loo(result, [common.command(argv)])
        common.write_results(args.out, result, text)
        print(text)
        return
    names = [g for g in args.graphs.split(",") if g]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    cache = args.cache or tempfile.mkdtemp(prefix="written_")
    records = written.run(names, seeds, args.threads or 2, cache, args.out, args.shuffles)
    shown = common.command(argv).replace(f" --cache {args.cache}", "")  # no local paths
    text = written.render_options(records, [shown])
    common.write_results(args.out, dict(runs=records), text)
    print(text)


if __name__ == "__main__":
    main()
