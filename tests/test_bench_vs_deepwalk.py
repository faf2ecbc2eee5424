"""bench/vs_deepwalk.py (the yardstick) runs end to end in its --smoke size.

The DeepWalk peer needs gensim, which CI does not install (it is a bench-only
dependency), so there the test is skipped; with gensim installed it takes well under
a minute apart from Numba's first compile.  It asserts nothing about speed or accuracy.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gensim", reason="the DeepWalk peer of bench/vs_deepwalk.py needs gensim")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_vs_deepwalk_smoke_scores_and_times_both_sides(tmp_path):
    stem = "vs_deepwalk_ci_smoke"
    env = dict(os.environ, CAPS2NE_BENCH_RESULTS=str(tmp_path))  # not the tracked docs/results
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "vs_deepwalk.py"), "--smoke", "--out", stem],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((tmp_path / f"{stem}.json").read_text())
    md = (tmp_path / f"{stem}.md").read_text()
    assert data["smoke"] and "SMOKE" in md
    assert [g["name"] for g in data["graphs"]] == ["syn-300-mu0.3", "cora-bundled"]
    for g in data["graphs"]:
        for side in ("deepwalk", "ours"):
            assert g[side]["seconds_median"] > 0
            assert 0 <= g[side]["score"]["accuracy"] <= 100
        assert set(g["targets"]) == {"score", "time"}
        # the result file keeps 7 significant digits of each of the three numbers
        assert g["time_ratio"] == pytest.approx(
            g["ours"]["seconds_median"] / g["deepwalk"]["seconds_median"], rel=2e-6
        )
        assert "commands" not in g  # the file keeps command_templates once
        assert f"| {g['name']} |" in md
    assert data["graphs"][1]["score_protocol"]["splits"] == 10  # the paper's Cora splits
    assert data["command_templates"]["ours"].startswith("python cli.py train --graph <dir>/g.txt")
    if importlib.util.find_spec("nodevectors") is None:  # the second peer is optional
        assert "ProNE peer skipped: nodevectors is not installed" in md
    else:  # ProNE scored and timed as DeepWalk, the better of the two named
        for g in data["graphs"]:
            assert g["prone"]["seconds_median"] > 0
            assert 0 <= g["prone"]["score"]["accuracy"] <= 100
            assert g["best_peer"] in ("deepwalk", "prone")
            best = max(g["deepwalk"]["score"]["accuracy"], g["prone"]["score"]["accuracy"])
            assert g["score_gap_best"] == pytest.approx(
                g["ours"]["score"]["accuracy"] - best, abs=1e-4
            )
        assert data["command_templates"]["prone"].startswith("python bench/peers/prone_peer.py")
    assert "| python cli.py train" not in md and "`<dir>` is a temporary folder" in md
