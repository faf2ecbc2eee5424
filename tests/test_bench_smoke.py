"""The benchmark scripts run end to end in a small configuration, so they cannot rot
(the full runs live in bench/, never in tests; these assert nothing about speed).
Their result files go to a temporary folder ($CAPS2NE_BENCH_RESULTS), never to the
tracked docs/results/."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchdata import needs_data

ROOT = Path(__file__).resolve().parents[1]
# these scripts read the paper's data sets (tests/benchdata.py says where from)


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
@needs_data("cora", "blogcatalog")
def test_perf_bench_smoke_runs_and_writes_its_table(tmp_path):
    data, md = smoke_run("perf.py", "perf_ci_smoke", tmp_path)
    assert data and "| config |" in md
    assert all(r["adam_floor_ms"] > 0 and r["adam_elements"] > 0 for r in data["rows"])
    with_peer = [r for r in data["rows"] if "ratio" in r]
    if with_peer:  # torch installed: both optimizers were timed
        assert "## What bounds the ratio" in md
        assert all(r["impl"][r["best_peer"]]["adam_ms"] > 0 for r in with_peer)


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


@pytest.mark.slow
@needs_data("cora")
def test_inductive_bench_smoke_runs(tmp_path):
    _, md = smoke_run("inductive.py", "inductive_ci_smoke", tmp_path)
    assert "| cora |" in md


def test_run_all_lists_the_whole_suite_and_rejects_unknown_parts():
    script = str(ROOT / "bench" / "run_all.py")
    proc = subprocess.run(
        [sys.executable, script, "--dry-run"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for name in (
        "perf.py --ours-lazy",
        "walks_vs_pecanpy.py",
        "scale.py",
        "profile_fused.py",
        "perf.py --report-only",
    ):
        assert f"python bench/{name}" in proc.stdout
        assert (ROOT / "bench" / name.split()[0]).exists()
    bad = subprocess.run(
        [sys.executable, script, "--only", "perf,nosuch", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "nosuch" in bad.stderr
