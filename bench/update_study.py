"""The update study (``python bench/inductive.py --update``): a graph that grows,
simulated, and ``caps2ne update`` (update/update.py) against retraining from scratch
and against ``infer`` alone.

For each graph, scenario and seed:

1. a link hold-out: ``--link-fraction`` of the undirected edges (seeded) leave every
   graph below, with as many node pairs that are not edges: the link AUC scores
   cos(o_u, o_v) of the held-out edges against those pairs;
2. the old graph: the whole graph without ``f`` of its nodes and their edges
   (scenario ``nodes``), or without ``f`` of its edges (``edges``);
3. training on the old graph with the defaults (the model), then, side by side on the
   same threads: the update to the whole graph, and a training from scratch on it;
4. the scores of the written rows of the whole graph: node classification under both
   protocols (bench/vs_deepwalk.py's ``score_protocols``: C = 1 and C tuned per split),
   the link AUC, the walls (the update's includes its start: the change, Algorithm 3,
   its checkpoint), and stability: for the nodes more than ``--far-hops`` hops from
   any change, how far their written rows move from the model's (after the best
   rotation, relative to their norm: evaluation/stability.py), under the update and
   under retraining;
5. with new nodes, ``infer``: the model's written rows for the old nodes and Algorithm
   3 (calibrated, through the model's propagation) for the new ones; with new edges
   only, the model's rows as they were ("stale").
"""

import json
import sys
import time

import numpy as np
import scipy.sparse as sp

import common
import vs_deepwalk
from caps2ne_np.evaluation.stability import aligned_movement
from caps2ne_np.graphs.changes import diff, hops_from
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.training import trainer
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.update import update as upd

SIDES = ("update", "retrain", "infer")


def _undirected_edges(adj):
    upper = sp.triu(adj, k=1).tocoo()
    return np.c_[upper.row, upper.col].astype(np.int64)


def _adjacency(edges, n):
    A = sp.coo_matrix((np.ones(len(edges), np.float32), (edges[:, 0], edges[:, 1])), (n, n))
    A = (A + A.T).tocsr()
    A.data[:] = 1.0
    return A


def link_holdout(adj, fraction, rng):
    """(the adjacency without the held-out edges, held (m, 2), non-edges (m, 2))."""
    edges = _undirected_edges(adj)
    n = adj.shape[0]
    held_mask = rng.random(len(edges)) < fraction
    held, rest = edges[held_mask], edges[~held_mask]
    taken = set(map(tuple, edges.tolist()))
    non = []
    while len(non) < len(held):
        u, v = sorted(rng.integers(0, n, 2).tolist())
        if u != v and (u, v) not in taken:
            taken.add((u, v))
            non.append((u, v))
    return _adjacency(rest, n), held, np.asarray(non, dtype=np.int64).reshape(-1, 2)


def link_auc(emb, held, non):
    """ROC AUC of cos(e_u, e_v): held-out edges against non-edges."""
    from sklearn.metrics import roc_auc_score

    unit = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    score = lambda pairs: np.sum(unit[pairs[:, 0]] * unit[pairs[:, 1]], axis=1)  # noqa: E731
    y = np.r_[np.ones(len(held)), np.zeros(len(non))]
    return 100 * float(roc_auc_score(y, np.r_[score(held), score(non)]))


def old_graph(full, scenario, fraction, rng):
    """(the old graph (csr.Graph, ids 'i' of the whole graph's nodes), its nodes)."""
    n = full.shape[0]
    if scenario == "nodes":
        gone = rng.choice(n, int(round(fraction * n)), replace=False)
        keep = np.setdiff1d(np.arange(n), gone)
        sub = full[keep][:, keep]
        return from_scipy(sub, [str(i) for i in keep]), keep
    edges = _undirected_edges(full)
    kept = edges[rng.random(len(edges)) >= fraction]
    return from_scipy(_adjacency(kept, n), [str(i) for i in range(n)]), np.arange(n)


def _rows_in_full(graph, n, rows):
    """(n, k) rows in the whole graph's order from rows of ``graph`` (ids 'i')."""
    out = np.zeros((n, rows.shape[1]), dtype=np.float32)
    out[np.asarray([int(i) for i in graph.node_ids])] = rows
    return out


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def _inferred(model, trained, old, new_graph, keep):
    """``infer``'s rows of the whole graph: the model's written rows for the old nodes,
    Algorithm 3 (calibrated, through its propagation) for the new nodes with an old
    neighbour; the other new nodes, which ``infer`` cannot encode, get zero rows."""
    from caps2ne_np.inference.propagated import infer_propagated
    from caps2ne_np.model.params import Params

    n = new_graph.n_nodes
    emb = _rows_in_full(old, n, trained.written)
    is_old = np.zeros(n, dtype=bool)
    is_old[keep] = True
    A = new_graph.to_scipy()
    has_old = np.asarray(A[:, is_old].sum(axis=1)).ravel() > 0
    new = np.flatnonzero(~is_old & has_old)
    if new.size == 0:
        return emb
    params = Params(model["W"], model["O"], model["bias"], model["X"])
    ids = [str(i) for i in new]
    _, E = infer_propagated(
        params, model["config"], model["node_ids"], new_graph, None, ids, trained.propagated
    )
    emb[new] = E
    return emb


def run_case(name, scenario, fraction, seed, args):
    """One graph, scenario, fraction and seed: every side's scores, walls and movement."""
    graph = vs_deepwalk.panel_entry(name, args.data_dir)
    rng = np.random.default_rng([seed, 7])
    full, held, non = link_holdout(graph.adj, args.link_fraction, rng)
    n = full.shape[0]
    new_graph = from_scipy(full, [str(i) for i in range(n)])
    old, keep = old_graph(full, scenario, fraction, rng)
    cfg = TrainConfig(threads=args.threads, seed=seed)
    model_run, t_model = _timed(trainer.train, old, cfg)
    model = upd.model_of(model_run, old)
    budget = getattr(args, "budget", None) or upd.BUDGET
    options = upd.UpdateOptions(
        hops=args.hops,
        threads=args.threads,
        budget=budget,
        epochs=getattr(args, "update_epochs", None),
    )
    done, t_update = _timed(upd.update, model, old, new_graph, None, options)
    again, t_retrain = _timed(trainer.train, new_graph, cfg)
    if scenario == "nodes":
        rows_infer = _inferred(model, model_run, old, new_graph, keep)
    else:
        rows_infer = _rows_in_full(old, n, model_run.written)
    rows = dict(update=done.written, retrain=again.written, infer=rows_infer)
    change = diff(old, new_graph)
    dist = hops_from(new_graph, change.touched, args.far_hops)
    dist[~np.isin(np.arange(n), keep)] = 0  # new nodes are never far
    far = np.flatnonzero(dist < 0)
    before = _rows_in_full(old, n, model_run.written)
    out = dict(
        graph=name,
        scenario=scenario,
        fraction=fraction,
        seed=seed,
        nodes=n,
        budget=done.plan.budget,
        starts=int(done.plan.starts.size),
        update_epochs=int(done.plan.cfg.epochs),
        trained_epochs=len(model_run.result.history),
        retrain_epochs=len(again.result.history),
        far_nodes=int(far.size),
        seconds=dict(model=t_model, update=t_update, retrain=t_retrain),
        wall_ratio=t_update / t_retrain,
    )
    for side, emb in rows.items():
        score = vs_deepwalk.score_protocols(graph, emb)
        moved = aligned_movement(before, emb, far) if far.size and side != "infer" else None
        out[side] = dict(
            accuracy=score["headline"],
            tuned=score["tuned"]["headline"],
            link_auc=link_auc(emb, held, non),
            movement=None if moved is None else float(np.mean(moved)),
        )
        if side != "infer":  # nearer rings too: a dense graph may have no node beyond
            out[side]["movement_beyond"] = moved_beyond(before, emb, dist, args.far_hops)
    return out


def moved_beyond(before, after, dist, far_hops):
    """{h: (nodes, mean movement)} of the kept nodes more than h hops from any change,
    h = 0 .. ``far_hops`` - 1 (``dist``: hops_from's distances, new nodes 0); the
    movement None where no node is that far."""
    out = {}
    for h in range(far_hops):
        nodes = np.flatnonzero((dist > h) | (dist < 0))
        moved = aligned_movement(before, after, nodes) if nodes.size else None
        out[str(h)] = [int(nodes.size), None if moved is None else float(np.mean(moved))]
    return out


def summary(rows):
    """Mean and sample sd over seeds of each (graph, scenario, fraction)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["graph"], r["scenario"], r["fraction"]), []).append(r)
    out = []
    for (g, s, f), rs in groups.items():
        entry = dict(graph=g, scenario=s, fraction=f, seeds=len(rs))
        entry["wall_ratio"] = _ms([r["wall_ratio"] for r in rs])
        for side in SIDES:
            for key in ("accuracy", "tuned", "link_auc", "movement"):
                vals = [r[side][key] for r in rs if r[side][key] is not None]
                entry[f"{side}_{key}"] = _ms(vals) if vals else None
        out.append(entry)
    return out


def _ms(values):
    values = np.asarray(values, dtype=np.float64)
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return [float(values.mean()), sd]


def markdown(payload):
    """The study's table: per case (``summary`` of the payload's rows), every side's
    scores, the wall ratio and movement."""
    lines = [
        "# Updating a model to a changed graph (caps2ne update)",
        "",
        f"Command: `{payload['command']}`  ",
        f"CPU: {payload['machine'].get('cpu_model', '?')}; threads: {payload['args']['threads']}",
        "",
        "Mean +- sample sd over seeds. acc: accuracy at C = 1 (the paper's protocol); "
        "tuned: C tuned per split; AUC: link prediction on held-out edges (cosine); "
        "move: mean Procrustes-aligned movement of the rows of nodes more than "
        f"{payload['args']['far_hops']} hops from any change, relative to their norm; "
        "wall: the update's wall over retraining's (side by side).",
        "",
        "| graph | change | side | acc | tuned | AUC | move | wall ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in summary(payload["rows"]):
        change = f"{100 * e['fraction']:g}% {e['scenario']}"
        for side in SIDES:
            cells = [e[f"{side}_{k}"] for k in ("accuracy", "tuned", "link_auc", "movement")]
            shown = [("-" if c is None else f"{c[0]:.2f} +- {c[1]:.2f}") for c in cells]
            ratio = f"{e['wall_ratio'][0]:.3f}" if side == "update" else ""
            name = side if side != "infer" or e["scenario"] == "nodes" else "stale"
            head = f"| {e['graph']} | {change} | {name} | "
            lines.append(head + " | ".join(shown) + f" | {ratio} |")
    return "\n".join(lines + _beyond_lines(payload["rows"])) + "\n"


def _beyond_lines(rows):
    """The movement of the kept rows beyond each nearer distance (``moved_beyond``), mean
    over the seeds, update / retrain: where the rows recorded it."""
    groups = {}
    for r in rows:
        if "movement_beyond" in r["update"]:
            groups.setdefault((r["graph"], r["scenario"], r["fraction"]), []).append(r)
    if not groups:
        return []
    out = [
        "",
        "Movement of the kept rows more than h hops from any change (nodes; update / "
        "retrain, mean over seeds):",
        "",
        "| graph | change | h | nodes | update | retrain | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (g, scenario, fraction), rs in groups.items():
        for h in rs[0]["update"]["movement_beyond"]:
            cells = [[r[side]["movement_beyond"][h] for r in rs] for side in ("update", "retrain")]
            if any(c[1] is None for side in cells for c in side):
                continue
            u, t = (float(np.mean([c[1] for c in side])) for side in cells)
            nodes = int(np.mean([c[0] for c in cells[0]]))
            out.append(
                f"| {g} | {100 * fraction:g}% {scenario} | {h} | {nodes:,} | {u:.3f} | "
                f"{t:.3f} | {u / t:.2f} |"
            )
    return out


BUDGET_RULE_GRAPHS = ("cora", "wiki", "syn-100k-mu0.5")
"""The graphs whose update studies were seen when --budget auto's threshold was chosen
(update.AUTO_CHANGE_MAX)."""
THRESHOLDS = (0.0, 0.03, 0.07, 0.15, 1.0)
"""The thresholds a left-out fold may choose: none, and one between each pair of the
studies' shares of new edges (1, 5, 10, 20%), and all."""
TOLERANCE = 0.5
"""A 'change' update is good enough when it is at most this many points below
retraining at C = 1 (the issue's target)."""


def budgets_main(args):
    """``inductive.py --budgets``: the update budgets of earlier study results side by
    side, with the one --budget auto takes, and its threshold chosen with each graph
    left out (``budget_table``, ``left_out``)."""
    payloads = []
    for path in args.budgets.split(","):
        with open(path) as f:
            payloads.append(json.load(f))
    rows = budget_rows(payloads, upd.AUTO_CHANGE_MAX)
    commands = [p["command"] for p in payloads]
    md = budget_table(rows, commands, upd.AUTO_CHANGE_MAX, BUDGET_RULE_GRAPHS)
    md += left_out_table(left_out(rows))
    path = common.write_text_atomic(common.RESULTS / f"{args.out}.md", md)
    print(md)
    print(f"wrote {path}", file=sys.stderr)


def chosen_threshold(rows):
    """The largest of THRESHOLDS under which every 'change' update of ``rows`` (budget_rows)
    stays within TOLERANCE of retraining at C = 1: the cheapest budget that meets the
    accuracy target on those graphs."""
    bad = [r["fraction"] for r in rows if "change" in r and r["change"]["accuracy"] < -TOLERANCE]
    return max(t for t in THRESHOLDS if all(t < f for f in bad))


def left_out(rows):
    """Per graph: the threshold chosen on the other graphs' rows (``chosen_threshold``)
    and, on the left-out graph, each share's budget under it with its regret: how far
    it falls below the better budget measured there (C = 1, C tuned; 0 when it is the
    better one or the other was not run)."""
    out = []
    for g in sorted({r["graph"] for r in rows}):
        t = chosen_threshold([r for r in rows if r["graph"] != g])
        for r in (r for r in rows if r["graph"] == g):
            pick = "change" if r["fraction"] <= t else "hops"
            if pick not in r:
                continue
            regret = []
            for key in ("accuracy", "tuned"):
                best = max(r[b][key] for b in ("change", "hops") if b in r)
                regret.append(best - r[pick][key])
            out.append(dict(graph=g, fraction=r["fraction"], threshold=t, budget=pick,
                            regret=regret, wall_ratio=r[pick]["wall_ratio"]))  # fmt: skip
    return out


def left_out_table(entries):
    """Markdown of ``left_out``."""
    lines = [
        "",
        f"Left out in turn: each graph's threshold chosen on the other graphs' rows (the "
        f"largest of {', '.join(f'{100 * t:g}%' for t in THRESHOLDS)} under which every "
        f"'change' update stays within {TOLERANCE:g} point of retraining at C = 1), the "
        "budget it gives each share on the left-out graph, and its regret there: points "
        "below the better budget measured (C = 1 / C tuned; a share where only the "
        "chosen budget ran counts 0).",
        "",
        "| left out | threshold | new edges | budget | regret | wall |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for e in entries:
        lines.append(
            f"| {e['graph']} | {100 * e['threshold']:g}% | {100 * e['fraction']:g}% | "
            f"{e['budget']} | {e['regret'][0]:.2f} / {e['regret'][1]:.2f} | "
            f"{e['wall_ratio']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def budget_rows(payloads, auto_max):
    """The '--budget auto' check (``budget_table``): per graph and changed share of
    edges, each budget's update (``summary`` of the study results ``payloads``, each
    run with one ``--budget``) against retraining, and the budget the rule takes
    (update.auto_budget: 'change' up to ``auto_max``, else 'hops')."""
    out = {}
    for p in payloads:
        # the budget the rows record, else the run's --budget (before 'auto': 'hops')
        budget = p["rows"][0].get("budget") or p["args"].get("budget") or "hops"
        for e in summary(p["rows"]):
            if e["scenario"] != "edges" or p["args"].get("update_epochs"):
                continue
            key = (e["graph"], e["fraction"])
            out.setdefault(key, dict(graph=e["graph"], fraction=e["fraction"]))[budget] = dict(
                accuracy=e["update_accuracy"][0] - e["retrain_accuracy"][0],
                tuned=e["update_tuned"][0] - e["retrain_tuned"][0],
                link_auc=e["update_link_auc"][0] - e["retrain_link_auc"][0],
                wall_ratio=e["wall_ratio"][0],
                seeds=e["seeds"],
            )
    rows = sorted(out.values(), key=lambda r: (r["graph"], r["fraction"]))
    for r in rows:
        r["auto"] = "change" if r["fraction"] <= auto_max else "hops"
    return rows


def budget_table(rows, commands, auto_max, tuned_on):
    """Markdown of ``budget_rows``: gaps to retraining in points, walls as ratios."""
    lines = [
        "# update --budget auto: 'change' or 'hops' by the share of changed edges",
        "",
        "Made by `python bench/inductive.py --budgets <results .json files>` from the "
        "update studies:",
        "",
        *[f"    {c}" for c in commands],
        "",
        f"The rule takes 'change' for a change of edges only, at most {100 * auto_max:g}% "
        "of them, else 'hops'. It was chosen on the studies of "
        + ", ".join(tuned_on)
        + "; the other graphs' were run after it was written. Each cell: the "
        "update's score minus retraining's (accuracy at C = 1 / C tuned / link AUC, mean "
        "over the seeds, points) and its wall over retraining's; **bold** is the budget "
        "the rule takes.",
        "",
        "| graph | new edges | change | hops | seeds |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        cells = []
        for budget in ("change", "hops"):
            c = r.get(budget)
            if c is None:
                cells.append("-")
                continue
            text = (
                f"{c['accuracy']:+.2f} / {c['tuned']:+.2f} / {c['link_auc']:+.2f}, "
                f"{c['wall_ratio']:.2f}x"
            )
            cells.append(f"**{text}**" if budget == r["auto"] else text)
        seeds = sorted({r[b]["seeds"] for b in ("change", "hops") if b in r})
        lines.append(
            f"| {r['graph']} | {100 * r['fraction']:g}% | "
            + " | ".join(cells)
            + f" | {'/'.join(map(str, seeds))} |"
        )
    return "\n".join(lines) + "\n"
