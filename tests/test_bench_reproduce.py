"""bench/reproduce.py runs one tiny epoch end to end on Cora and writes its table (it asserts
nothing about speed or accuracy)."""

import json
import subprocess
import sys
from pathlib import Path

from benchdata import needs_data

ROOT = Path(__file__).resolve().parents[1]


@needs_data("cora")
def test_reproduce_script_runs_one_tiny_epoch(tmp_path):
    out = tmp_path / "t.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "reproduce.py"),
            "--dataset",
            "cora",
            "--epochs",
            "1",
            "--walks-per-node",
            "1",
            "--results",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    entry = json.loads(out.read_text())[0]
    assert entry["dataset"] == "cora" and len(entry["chosen_epochs"]) == 10
    assert len(entry["split_best"]["val"]) == 10 and len(entry["split_best_ovr"]["test"]) == 10
    md = out.with_suffix(".md").read_text()
    assert "| cora |" in md
    # the pooled (authors') selection over the stored run equals the run's own selection
    assert "## Selection pooled over runs" in md
    assert f"| {entry['test_mean']:.2f} +- {entry['test_std']:.2f} |" in md.split("## Selection")[1]
