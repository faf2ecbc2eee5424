"""bench/inductive.py runs end to end in its --smoke size; its result files go to a temporary
folder ($CAPS2NE_BENCH_RESULTS), never to the tracked docs/results/."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchdata import needs_data

ROOT = Path(__file__).resolve().parents[1]


def smoke_run(script, stem, results):
    """Run ``bench/<script> --smoke --out <stem>`` writing into the folder ``results``;
    return (json payload, markdown text)."""
    env = dict(os.environ, CAPS2NE_BENCH_RESULTS=str(results))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--smoke", "--out", stem],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((results / f"{stem}.json").read_text()), (results / f"{stem}.md").read_text()


@pytest.mark.slow
@needs_data("cora")
def test_inductive_bench_smoke_runs(tmp_path):
    _, md = smoke_run("inductive.py", "inductive_ci_smoke", tmp_path)
    assert "| cora |" in md


def _study(budget, fraction, gaps, wall):
    """An update-study payload of one seed: the update ``gaps`` (acc, tuned, AUC) above
    retraining's 70 / 71 / 90, at ``wall`` x its wall."""
    side = lambda a, t, auc: dict(accuracy=a, tuned=t, link_auc=auc, movement=None)  # noqa: E731
    row = dict(graph="g", scenario="edges", fraction=fraction, seed=0, budget=budget,
               wall_ratio=wall, update=side(70 + gaps[0], 71 + gaps[1], 90 + gaps[2]),
               retrain=side(70, 71, 90), infer=side(0, 0, 0))  # fmt: skip
    return dict(command=f"study {budget}", args=dict(budget=budget), rows=[row])


def test_the_budget_table_sets_each_budgets_gap_beside_the_rules_choice():
    """bench/inductive.py --budgets (update_study.budget_rows): per graph and share,
    each budget's gaps to retraining and wall, and 'change' marked up to the rule's
    share, 'hops' beyond."""
    sys.path.insert(0, str(ROOT / "bench"))
    import update_study

    payloads = [
        _study("change", 0.05, (-0.5, 0.25, 1.0), 0.1),
        _study("hops", 0.05, (0.5, 0.0, -2.0), 1.2),
        _study("change", 0.1, (-1.0, -1.0, 0.0), 0.2),
    ]
    rows = update_study.budget_rows(payloads, 0.07)
    assert [(r["fraction"], r["auto"]) for r in rows] == [(0.05, "change"), (0.1, "hops")]
    five = rows[0]
    assert five["change"]["accuracy"] == pytest.approx(-0.5)
    assert five["change"]["tuned"] == pytest.approx(0.25)
    assert five["hops"]["link_auc"] == pytest.approx(-2.0)
    assert five["hops"]["wall_ratio"] == 1.2 and "hops" not in rows[1]
    md = update_study.budget_table(rows, [p["command"] for p in payloads], 0.07, ("g",))
    assert "| g | 5% | **-0.50 / +0.25 / +1.00, 0.10x** | +0.50 / +0.00 / -2.00, 1.20x | 1 |" in md
    assert "| g | 10% | -1.00 / -1.00 / +0.00, 0.20x | - | 1 |" in md


def test_the_movement_beyond_each_distance_takes_the_nodes_further_out():
    """update_study.moved_beyond: beyond h hops are the nodes at more than h hops or
    not reached (-1); a rotation of every row moves none of them."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "bench"))
    import update_study

    rng = np.random.default_rng(0)
    before = rng.normal(size=(6, 3))
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    dist = np.array([0, 1, 2, -1, 1, 0])
    out = update_study.moved_beyond(before, before @ Q, dist, 3)
    assert [out[h][0] for h in ("0", "1", "2")] == [4, 2, 1]
    assert all(out[h][1] == pytest.approx(0.0, abs=1e-9) for h in out)
    moved = before.copy()
    moved[3] += 10.0  # only the unreached node moves
    far = update_study.moved_beyond(before, moved, dist, 3)
    assert far["2"][1] > 1.0


def test_the_threshold_left_out_is_the_largest_that_keeps_change_within_tolerance():
    """update_study.chosen_threshold: the largest candidate below every share where a
    'change' update fell more than TOLERANCE under retraining; left_out chooses it on
    the other graphs and charges the left-out graph the gap to its better budget."""
    sys.path.insert(0, str(ROOT / "bench"))
    import update_study

    def row(graph, fraction, change, hops=None):
        r = dict(graph=graph, fraction=fraction)
        r["change"] = dict(accuracy=change, tuned=change, wall_ratio=0.1)
        if hops is not None:
            r["hops"] = dict(accuracy=hops, tuned=hops, wall_ratio=0.9)
        return r

    a = [row("a", 0.05, -0.2, 0.1), row("a", 0.1, -1.0, -0.5)]  # a bars 10%: 7%
    b = [row("b", 0.01, -0.1), row("b", 0.05, -0.6, 0.0)]  # b bars 5%: 3%
    assert update_study.chosen_threshold(a) == 0.07
    assert update_study.chosen_threshold(b) == 0.03
    assert update_study.chosen_threshold(a + b) == 0.03
    assert update_study.chosen_threshold([row("c", 0.2, 0.0)]) == 1.0
    out = {(e["graph"], e["fraction"]): e for e in update_study.left_out(a + b)}
    assert out[("a", 0.05)]["threshold"] == 0.03 and out[("a", 0.05)]["budget"] == "hops"
    assert out[("a", 0.05)]["regret"] == [0.0, 0.0]
    assert out[("b", 0.05)]["threshold"] == 0.07 and out[("b", 0.05)]["budget"] == "change"
    assert out[("b", 0.05)]["regret"] == pytest.approx([0.6, 0.6])
    assert out[("b", 0.01)]["regret"] == [0.0, 0.0]  # only 'change' ran there
