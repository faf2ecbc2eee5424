"""bench/panel.py (the panel with seeds) runs end to end in its --smoke
size: every side on two seeds, the node order moved by the seed, the cells as mean and
spread.  Needs gensim (the DeepWalk peer); asserts nothing about speed or accuracy."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def test_write_graph_renames_nodes_and_keeps_weights(tmp_path):
    import scipy.sparse as sp

    import panel

    adj = sp.csr_matrix(
        np.array([[0, 2, 0], [2, 0, 1], [0, 1, 0]], dtype=np.float32)
    )  # weighted path 0 -2- 1 -1- 2
    perm = np.array([2, 0, 1])
    n, weighted = panel.write_graph(tmp_path / "g.txt", adj, perm)
    assert (n, weighted) == (2, True)
    lines = sorted((tmp_path / "g.txt").read_text().split("\n")[:-1])
    assert lines == ["0 1 1", "2 0 2"]  # edge (0, 1) as (2, 0), weight 2; (1, 2) as (0, 1)
    n, weighted = panel.write_graph(tmp_path / "u.txt", (adj > 0).astype(np.float32), perm)
    assert not weighted and sorted((tmp_path / "u.txt").read_text().split()) == sorted(
        "2 0 0 1".split()
    )


def test_gap_is_a_tie_below_its_spread():
    import panel

    assert panel.gap((70.0, 1.0), (71.0, 1.0))[2] == "tie"  # 1.0 < 1.41
    assert panel.gap((70.0, 0.1), (71.0, 0.1))[2] == "behind"
    assert panel.within(panel.gap((70.0, 0.1), (71.0, 0.1)))  # within 1 point
    assert not panel.within(panel.gap((69.0, 0.1), (71.0, 0.1)))
    assert panel.gap((72.0, 0.0), (71.0, 0.0))[2] == "ahead"


def test_variant_side_is_ours_with_the_given_flags(tmp_path):
    import panel

    usable = len(os.sched_getaffinity(0))
    flags = ["--skipgram-weight", "1", "--epochs", "10"]
    cmds = panel.side_commands(str(tmp_path), usable, 3, False, usable, flags)
    ours, variant = cmds["ours"], cmds["ours_variant"]
    assert variant[len(ours) :] == flags
    assert panel.out_file(variant) == str(tmp_path / "variant.emb")
    assert [c.replace("variant.emb", "ours.emb") for c in variant[: len(ours)]] == ours
    assert "ours_variant" not in panel.side_commands(str(tmp_path), usable, 3, False, usable)
    assert panel.gap_lines([dict(name="g", gaps={})], ["ours_variant"]) == [""]  # no ours
    for argv in (["--sides", "ours,ours_variant"], ["--variant=--epochs 2"]):
        with pytest.raises(SystemExit) as err:  # the side and its flags go together
            panel.main(argv)
        assert err.value.code == 2


@pytest.mark.slow
def test_panel_smoke_runs_every_side_on_two_seeds(tmp_path):
    pytest.importorskip("gensim", reason="the DeepWalk peer needs gensim")
    stem = "panel_ci_smoke"
    env = dict(os.environ, CAPS2NE_BENCH_RESULTS=str(tmp_path))  # not docs/results
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "panel.py"), "--smoke", "--out", stem,
         "--sides", "deepwalk,ours,ours_base"],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / f"{stem}.json").read_text())
    md = (tmp_path / f"{stem}.md").read_text()
    assert data["smoke"] and "SMOKE" in md and data["seeds"] == [0, 1]
    assert [g["name"] for g in data["graphs"]] == ["syn-300-mu0.3", "cora-bundled"]
    for g in data["graphs"]:
        assert len(g["runs"]) == 2
        for side in ("deepwalk", "ours", "ours_base"):
            mean, sd = g["summary"][side]["headline"]
            assert 0 <= mean <= 100 and sd >= 0
            assert g["summary"][side]["n"] == 2
        assert g["gaps"]["deepwalk"][2] in ("tie", "ahead", "behind")
        assert f"| {g['name']} |" in md
    # the seed moves ours' result (node order, walks, initial values)
    cora = data["graphs"][1]["runs"]
    assert cora[0]["ours"]["score"]["accuracy"] != cora[1]["ours"]["score"]["accuracy"]
    assert "--propagate on" in " ".join(cora[0]["ours"]["log"])


def test_the_written_scale_is_chosen_on_tuning_graphs_only():
    import panel

    def entry(name, unit, tuned, **scaled):
        cells = {k.replace("x", ""): (v, 0.0) for k, v in scaled.items()}
        ours = dict(headline=(unit, 0.0), tuned=(tuned, 0.0), scaled=cells)
        return dict(name=name, summary=dict(ours=ours))

    graphs = [
        entry("cora", 73.0, 73.5, x2=72.5, x4=70.0),  # unit rows fall 0.5 short
        entry("syn-3k-mu0.7", 61.0, 67.0, x2=65.5, x4=66.8),  # unit rows fall 6 short
        entry("musae-wikipedia", 80.0, 90.0, x2=80.0, x4=89.9),  # a test graph: not read
    ]
    text = "\n".join(panel.scale_choice_lines(graphs))
    assert "Chosen on the tuning graphs: r = 2 (worst shortfall 1.50 on syn-3k-mu0.7)" in text
    assert "| 2 | 1.50 (syn-3k-mu0.7) | 10.00 (musae-wikipedia) |" in text
    assert panel.role("musae-github") == "test" and panel.role("cora") == "tuning"
