"""The written options of the panel, and the rules chosen by leaving each graph out.

What a run writes after training (propagation on or off, the spectrum power p of
rownorm(U S^p), the rows' length) costs seconds to recompute from the trained o_v, so
each (graph, seed) trains the defaults once (``--propagate none``: the o_v the defaults
propagate; the stop rule ends the run where the defaults end it) and scores every
written option on the same o_v:

    python bench/panel.py --written --graphs wiki,actor --seeds 0,1,2 --out written_more
    python bench/panel.py --loo written_more,written_tuning --out written_loo

``--written`` (this module's ``measure``): per (graph, seed), the graph renamed by the
seed's permutation as the panel's other sides see it, ``Caps2NE(propagate="none",
random_state=seed)`` trained on it, then caps2ne_np.evaluation.written.candidates
(exactly the rows ``train --spectrum-power p --row-norm L`` writes, float32 spectral
stages as the defaults) scored under the panel's two protocols (bench/vs_deepwalk.py:
C = 1, and C tuned per split; every length at C = 1, length 2 alone when C is tuned,
where the length is only a change of C), and the labelled choice: per split, the
option the split's labelled nodes pick (its validation score where the split has
validation nodes, as the paper's splits do, the classifier fitting the training nodes;
else ``written.choose``'s 3-fold cross-validation within the training nodes, each option
at the C the protocol used for it on that split: the test nodes never enter), scored on
the split's test nodes.  Beside them, the label-free
measures a rule may read: the stop rule's structure (seeded as that run seeds it), the
mean degree, the nodes, the epochs trained.  One
record per (graph, seed) is written to ``<cache>/<out>.runs/`` as it finishes (an
interrupted sweep keeps what it measured), beside the trained o_v in ``--cache``; all of
them then go to ``<results>/<out>.json`` with the tables in ``<out>.md``.

``--loo`` (``leave_one_out``): for every left-out graph, each rule family is chosen on
the other graphs (minimax: the smallest worst regret over them, both protocols) and
scored on the one left out; the left-out regret is the best written option's score on
that graph minus the chosen rule's.  The families: one fixed option for every graph,
and a threshold on one label-free measure choosing between two options."""

import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import common
import vs_deepwalk

#: The kind of graph each panel graph stands for (the rules must not branch on a kind
#: the panel holds one graph of).
KINDS = {
    "cora": "sparse citation",
    "citeseer": "sparse citation",
    "pubmed": "sparse citation",
    "ppi": "dense biological, multi-label",
    "pos": "dense co-occurrence, multi-label",
    "blogcatalog": "dense social, multi-label",
    "wiki": "dense web, many classes",
    "actor": "heterophilous",
    "brazil-airports": "roles",
    "europe-airports": "roles",
    "musae-wikipedia": "dense web, two classes",
    "musae-github": "dense social, two classes",
    "syn-1k-mu0.3": "synthetic communities",
    "syn-3k-mu0.5": "synthetic communities",
    "syn-3k-mu0.7": "synthetic communities",
}
DEFAULT_KEY = "p=0.5 len=2"
TUNED_LENGTH = 2.0
MEASURES = ("structure", "mean_degree")
#: Kinds no label-free measure of the panel tells apart from the others (their structure
#: and mean degree lie inside the other graphs' ranges) and whose best written option is
#: another: the rules are chosen without them, and scored on them all the same.
UNREAD_KINDS = ("roles",)


def permuted(graph, seed):
    """(perm, adjacency renamed by it): node i of the panel graph is node perm[i] of the
    renamed graph, the permutation bench/panel.py's sides see for this seed."""
    perm = np.random.default_rng([seed, 20261127]).permutation(graph.n_nodes)
    inv = np.argsort(perm)
    adj = sp.csr_matrix(graph.adj, dtype=np.float32)[inv][:, inv]
    return perm, sp.csr_matrix(adj)


def trained(name, graph, seed, threads, cache):
    """The defaults' trained o_v of (graph, seed), row i = node i, with the run's
    label-free measures: cached in ``cache`` as <name>_s<seed>.npz."""
    path = Path(cache) / f"{name}_s{seed}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as z:
            return z["O"], json.loads(str(z["meta"]))
    from caps2ne_np import Caps2NE
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.spectral import prone as spectral
    from caps2ne_np.spectral import structure

    perm, adj = permuted(graph, seed)
    t0 = time.perf_counter()
    model = Caps2NE(propagate="none", random_state=seed, n_jobs=threads, progress=False)
    model.fit(adj)
    seconds = time.perf_counter() - t0
    O = np.ascontiguousarray(model.get_embedding()[perm])
    A = spectral.adjacency(adj.indptr, adj.indices, adj.data, adj.shape[0])
    s = structure.measure(A, derive_seed(seed, "stop structure") % (2**32), spectral._silent)
    epochs = len(model.history_)
    meta = dict(
        structure=s,
        mean_degree=float(A.nnz / A.shape[0]),
        nodes=int(A.shape[0]),
        epochs=epochs,
        seconds=seconds,
    )
    Path(cache).mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, O=O, meta=json.dumps(meta))
    tmp.replace(path)
    return O, meta


def split_scores(graph, E, C, shuffles):
    """Per split (or shuffle), the (test, validation) scores in percent of ``E`` under
    the panel's protocol with the classifier's ``C``, and the C each split used;
    validation None where the splits have no validation nodes (multi-label, the 50/50
    splits)."""
    from caps2ne_np.evaluation.multilabel import multilabel_f1
    from caps2ne_np.evaluation.single import classify_splits

    if graph.multilabel:
        r = multilabel_f1(E, graph.labels, (0.5,), n_shuffles=shuffles, seed=0, C=C)
        Cs = np.full(shuffles, float(r["C"][0]))
        return 100 * np.asarray(r["micro"][0], dtype=np.float64), None, Cs
    r = classify_splits(E, graph.labels, graph.splits, C=C)
    val = None if np.isnan(r["val"]).any() else 100 * np.asarray(r["val"])
    return 100 * np.asarray(r["test"]), val, np.asarray(r["C"], dtype=np.float64)


def training_sets(graph, shuffles):
    """Per split (or shuffle) the labelled training nodes (multi-label: the shuffle's
    first half, as the protocol draws it)."""
    if graph.multilabel:
        from caps2ne_np.evaluation.multilabel import shuffle_orders

        n = graph.n_nodes
        return [p[: int(0.5 * n)] for p in shuffle_orders(n, shuffles, 0)]
    return [s["train"] for s in graph.splits]


def labelled_choice(graph, cands, keys, test, val, Cs, shuffles):
    """(mean test score, {option: splits that picked it}) of the option a user's labels
    pick per split: the best validation score where the split has validation nodes (the
    classifier fits the training nodes, as the protocol's does), else the best 3-fold
    cross-validation score within the split's training nodes (``written.choose``), each
    option at the C the protocol's classifier used for it on that split (``Cs``: 1, or
    the C tuned without the test nodes)."""
    from caps2ne_np.evaluation import written

    picked, got = [], []
    for j, nodes in enumerate(training_sets(graph, shuffles)):
        if val is not None:
            score = {k: val[k][j] for k in keys}
        else:
            score = {
                k: written.choose({k: cands[k]}, graph.labels, nodes, C=Cs[k][j], seed=j).scores[k]
                for k in keys
            }
        best = max(keys, key=lambda k: score[k])  # the first of equals, in keys' order
        picked.append(best)
        got.append(test[best][j])
    return float(np.mean(got)), {k: picked.count(k) for k in sorted(set(picked))}


def measure(name, seed, threads, cache, shuffles=5):
    """One (graph, seed): its record (module docstring)."""
    from caps2ne_np.defaults import DEFAULTS
    from caps2ne_np.evaluation import written
    from caps2ne_np.spectral import prone as spectral

    graph = vs_deepwalk.panel_entry(name)
    O, meta = trained(name, graph, seed, threads, cache)
    adj = sp.csr_matrix(graph.adj)
    A = spectral.adjacency(adj.indptr, adj.indices, adj.data, adj.shape[0])
    t0 = time.perf_counter()
    cands = written.candidates(
        A, O, DEFAULTS["prone_order"], DEFAULTS["prone_mu"], DEFAULTS["prone_theta"]
    )
    rec = dict(graph=name, seed=seed, kind=KINDS.get(name, "?"), **meta)
    rec["candidates_seconds"] = time.perf_counter() - t0
    test, val, Cs = ({"C1": {}, "tuned": {}} for _ in range(3))
    for key, E in cands.items():
        test["C1"][key], val["C1"][key], Cs["C1"][key] = split_scores(graph, E, 1.0, shuffles)
        if key == "none" or key.endswith(f"len={TUNED_LENGTH:g}"):
            t, v, c = split_scores(graph, E, "tuned", shuffles)
            test["tuned"][key], val["tuned"][key], Cs["tuned"][key] = t, v, c
    rec["scores"] = {
        proto: {k: float(np.mean(v)) for k, v in d.items()} for proto, d in test.items()
    }
    choice = {}
    for proto in ("C1", "tuned"):
        t0 = time.perf_counter()
        keys = sorted(test[proto], key=lambda k: (k != DEFAULT_KEY, k))
        has_val = all(v is not None for v in val[proto].values())
        score, picked = labelled_choice(
            graph, cands, keys, test[proto], val[proto] if has_val else None, Cs[proto], shuffles
        )
        choice[proto] = dict(score=score, picked=picked, seconds=time.perf_counter() - t0)
    rec["labelled_choice"] = choice
    return rec


def run(names, seeds, threads, cache, out_stem, shuffles=5):
    """Measure every (graph, seed) not yet recorded in <cache>/<out_stem>.runs/; returns
    every record there."""
    folder = Path(cache) / f"{out_stem}.runs"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        for seed in seeds:
            path = folder / f"{name}_s{seed}.json"
            if path.exists():
                continue
            rec = measure(name, seed, threads, cache, shuffles)
            common.write_json(path, rec)
            best = max(rec["scores"]["C1"], key=rec["scores"]["C1"].get)
            print(
                f"{name} seed {seed}: structure {rec['structure']}, "
                f"epochs {rec['epochs']}, best at C = 1 {best} "
                f"{rec['scores']['C1'][best]:.2f}, defaults' "
                f"{rec['scores']['C1'].get(DEFAULT_KEY, float('nan')):.2f}, labelled "
                f"{rec['labelled_choice']['C1']['score']:.2f}",
                flush=True,
            )
    return [
        rounded(json.loads(p.read_text(encoding="utf-8"))) for p in sorted(folder.glob("*.json"))
    ]


def rounded(value, digits=4):
    """``value`` (a record) with every float rounded to ``digits`` decimals: the results
    folder keeps the records compact (scores are quoted to 2)."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


# --------------------------------------------------------------------------- leave one out


def option_keys(records):
    """The written options every record scored at C = 1, the defaults' first."""
    keys = sorted(set.intersection(*(set(r["scores"]["C1"]) for r in records)))
    return sorted(keys, key=lambda k: (k != DEFAULT_KEY, k))


def tuned_key(key):
    """The option whose tuned score stands for ``key``'s (the same p at length 2)."""
    return key if key == "none" else key.rsplit(" len=", 1)[0] + f" len={TUNED_LENGTH:g}"


def by_graph(records):
    """{graph: [records of its seeds]} in KINDS' order, then by name."""
    out = {}
    for r in sorted(records, key=lambda r: (r["graph"], r["seed"])):
        out.setdefault(r["graph"], []).append(r)
    order = list(KINDS)
    return dict(sorted(out.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))


class Rule:
    """A written option per run: ``hi`` where ``measure >= threshold``, else ``lo`` (a
    fixed option: ``measure`` None)."""

    def __init__(self, lo, hi=None, measure=None, threshold=None):
        self.lo, self.hi, self.measure, self.threshold = lo, hi, measure, threshold

    def pick(self, rec):
        if self.measure is None:
            return self.lo
        value = rec[self.measure]
        return self.hi if value is not None and value >= self.threshold else self.lo

    def __str__(self):
        if self.measure is None:
            return self.lo
        return f"{self.hi} at {self.measure} >= {self.threshold:.3g}, else {self.lo}"


def regret(rule, recs):
    """(C = 1, tuned) regret in points of ``rule`` on one graph's seeds: the best fixed
    option's mean score minus the rule's mean score (each seed takes its own option)."""
    keys = option_keys(recs)
    out = []
    for proto in ("C1", "tuned"):
        key_of = (lambda k: k) if proto == "C1" else tuned_key
        best = max(np.mean([r["scores"][proto][key_of(k)] for r in recs]) for k in keys)
        got = np.mean([r["scores"][proto][key_of(rule.pick(r))] for r in recs])
        out.append(float(best - got))
    return tuple(out)


def rules(graphs, keys):
    """Every fixed option, and every threshold rule on each measure with its thresholds
    at the midpoints between the graphs' mean measures."""
    yield from (Rule(k) for k in keys)
    for m in MEASURES:
        values = sorted(
            {
                float(np.mean([r[m] for r in recs]))
                for recs in graphs.values()
                if all(r[m] is not None for r in recs)
            }
        )
        for a, b in zip(values, values[1:]):
            t = (a + b) / 2
            for lo in keys:
                for hi in keys:
                    if lo != hi:
                        yield Rule(lo, hi, m, t)


def choose_rule(graphs, fixed_only=False):
    """The rule with the smallest worst regret over ``graphs`` (both protocols), ties by
    the mean regret, then the simpler (fixed first)."""
    keys = option_keys([r for recs in graphs.values() for r in recs])
    best, best_key = None, None
    for rule in rules(graphs, keys):
        if fixed_only and rule.measure is not None:
            break
        worst = [max(regret(rule, recs)) for recs in graphs.values()]
        key = (round(max(worst), 6), round(float(np.mean(worst)), 6))
        if best_key is None or key < best_key:
            best, best_key = rule, key
    return best


def leave_one_out(records, named):
    """Per graph: the left-out regret (C = 1, tuned) of the best fixed option and of
    the best rule, each chosen on the other graphs a rule can read (not of the kinds in
    UNREAD_KINDS), of each rule of ``named`` ({label: Rule}: the defaults'), and of the
    labelled choice; with the rules chosen on every such graph."""
    graphs = by_graph(records)
    readable = {g: v for g, v in graphs.items() if v[0]["kind"] not in UNREAD_KINDS}
    rows = []
    for name, recs in graphs.items():
        others = {g: v for g, v in readable.items() if g != name}
        fixed = choose_rule(others, fixed_only=True)
        rule = choose_rule(others)
        best_c1 = max(np.mean([r["scores"]["C1"][k] for r in recs]) for k in option_keys(recs))
        best_tu = max(
            np.mean([r["scores"]["tuned"][k] for r in recs])
            for k in option_keys(recs)
            if k == tuned_key(k)
        )
        labelled = tuple(
            float(b - np.mean([r["labelled_choice"][p]["score"] for r in recs]))
            for p, b in (("C1", best_c1), ("tuned", best_tu))
        )
        rows.append(
            dict(
                graph=name,
                kind=recs[0]["kind"],
                seeds=len(recs),
                structure=[
                    min(r["structure"] or 0 for r in recs),
                    max(r["structure"] or 0 for r in recs),
                ],
                mean_degree=recs[0]["mean_degree"],
                best=(float(best_c1), float(best_tu)),
                fixed=(str(fixed), regret(fixed, recs)),
                rule=(str(rule), regret(rule, recs)),
                named={k: regret(r, recs) for k, r in named.items()},
                labelled=labelled,
            )
        )
    return dict(
        rows=rows,
        named={k: str(r) for k, r in named.items()},
        unread=list(UNREAD_KINDS),
        fixed_all=str(choose_rule(readable, fixed_only=True)),
        rule_all=str(choose_rule(readable)),
    )


# --------------------------------------------------------------------------- reports


def load(stems):
    """Every record of <results>/<stem>.json for each stem."""
    out = []
    for stem in stems:
        out += json.loads((common.RESULTS / f"{stem}.json").read_text(encoding="utf-8"))["runs"]
    return out


def _mean(recs, proto, key):
    return float(np.mean([r["scores"][proto][key] for r in recs]))


def _range(recs, m):
    values = [r[m] for r in recs if r[m] is not None]
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return f"{lo:.3f}" if hi - lo < 5e-4 else f"{lo:.3f}-{hi:.3f}"


def render_options(records, commands):
    """Markdown: per graph, every written option's mean score over seeds (C = 1 table,
    then the tuned one), the label-free measures and the labelled choice."""
    graphs = by_graph(records)
    keys = option_keys(records)
    tkeys = [k for k in keys if k == tuned_key(k)]
    lines = [
        "# The written options of the defaults' trained o_v, and the labelled choice",
        "",
        "Commands (bench/written.py's docstring says what they measure):",
        "",
        *(f"    {c}" for c in commands),
        "",
        "Mean over seeds (node order and every random stream; `n` seeds), in percent: "
        "accuracy, or micro-F1 at 50% training nodes for multi-label graphs.  `none`: the "
        "o_v as trained (`--propagate none`); `p=P len=L`: `--propagate on "
        "--spectrum-power P --row-norm L`.  Best option of each graph in bold.  "
        "labelled: the option the split's labelled nodes choose (the validation nodes' "
        "score where the split has them, else 3-fold cross-validation within its training "
        "nodes), scored on its test nodes.",
        "",
    ]
    for proto, title, ks in (("C1", "C = 1", keys), ("tuned", "C tuned per split", tkeys)):
        lines += [f"{title}:", ""]
        head = ["graph", "kind", "n", "structure", "mean degree", "epochs", *ks, "labelled"]
        lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        for name, recs in graphs.items():
            means = {k: _mean(recs, proto, k) for k in ks}
            top = max(means.values())
            cells = [f"**{v:.2f}**" if abs(v - top) < 5e-3 else f"{v:.2f}" for v in means.values()]
            lab = np.mean([r["labelled_choice"][proto]["score"] for r in recs])
            epochs = sorted({r["epochs"] for r in recs})
            lines.append(
                "| "
                + " | ".join(
                    [
                        name,
                        recs[0]["kind"],
                        str(len(recs)),
                        _range(recs, "structure"),
                        f"{recs[0]['mean_degree']:.1f}",
                        ",".join(str(e) for e in epochs),
                        *cells,
                        f"{lab:.2f}",
                    ]
                )
                + " |"
            )
        lines.append("")
    secs = {
        name: max(r["labelled_choice"]["C1"]["seconds"] for r in recs)
        for name, recs in graphs.items()
    }
    worst = max(secs, key=secs.get)
    lines += [
        "The labelled choice's own cost (every split of a seed, C = 1; cross-validation where "
        f"the splits have no validation nodes): at most {secs[worst]:.1f} s ({worst}, "
        f"{graphs[worst][0]['nodes']:,} nodes); `caps2ne choose` on the largest graph: "
        "[choose_pubmed.md](choose_pubmed.md).",
        "",
    ]
    return "\n".join(lines)


def render_loo(result, commands):
    """Markdown of ``leave_one_out``'s result."""
    named = result["named"]
    lines = [
        "# The written rules chosen by leaving each graph out",
        "",
        "Commands:",
        "",
        *(f"    {c}" for c in commands),
        "",
        "For each graph, the rule chosen on every other graph (minimax: the smallest "
        "worst regret there, both protocols; ties by the mean regret, then the simpler "
        "rule) and scored on the one left out.  Regret: the best written option's mean "
        "score on that graph minus the rule's (each seed takes the option its own "
        "measures give), C = 1 / C tuned, in points (tuned: the options at length 2, "
        "where a length is only a change of C).  fixed: one option for every graph; "
        "rule: a threshold on one label-free measure "
        f"({', '.join(MEASURES)}) between two options; "
        + "; ".join(f"{k}: `{v}`" for k, v in named.items())
        + "; labelled: the option the user's labels choose per split (no rule).  "
        f"The rules are chosen without the graphs of kind {', '.join(result['unread'])} "
        "(bench/written.py, UNREAD_KINDS), scored on them all the same.",
        "",
        "| graph | kind | structure | mean degree | best C = 1 / tuned | fixed (chosen "
        "without it) | regret | rule (chosen without it) | regret | "
        + " | ".join(named)
        + " | labelled |",
        "|" + " --- |" * (10 + len(named)),
    ]

    def pair(r):
        return f"{r[0]:.2f} / {r[1]:.2f}"

    for row in result["rows"]:
        s = row["structure"]
        lines.append(
            "| "
            + " | ".join(
                [
                    row["graph"],
                    row["kind"],
                    f"{s[0]:.3f}-{s[1]:.3f}",
                    f"{row['mean_degree']:.1f}",
                    pair(row["best"]),
                    row["fixed"][0],
                    pair(row["fixed"][1]),
                    row["rule"][0],
                    pair(row["rule"][1]),
                    *(pair(row["named"][k]) for k in named),
                    pair(row["labelled"]),
                ]
            )
            + " |"
        )
    lines.append("")
    for title, keep in (
        ("the graphs the rules read", lambda row: row["kind"] not in result["unread"]),
        ("every graph", lambda row: True),
    ):
        rows = [row for row in result["rows"] if keep(row)]
        worst = {k: max(max(row[k][1]) for row in rows) for k in ("fixed", "rule")}
        worst.update({k: max(max(row["named"][k]) for row in rows) for k in named})
        worst["labelled"] = max(max(row["labelled"]) for row in rows)
        lines.append(
            f"Worst left-out regret on {title} (either protocol): "
            + ", ".join(f"{k} {v:.2f}" for k, v in worst.items())
            + "."
        )
        lines.append("")
    lines += [
        f"Chosen on every graph the rules read: fixed `{result['fixed_all']}`; rule "
        f"`{result['rule_all']}`.",
        "",
    ]
    return "\n".join(lines)
