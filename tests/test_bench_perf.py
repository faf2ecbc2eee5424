"""bench/perf.py: without its data, --smoke is one line. Its --smoke run writes its table; the
result files go to a temporary folder ($CAPS2NE_BENCH_RESULTS), never to the tracked
docs/results/."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchdata import needs_data

ROOT = Path(__file__).resolve().parents[1]


OFFLINE = "http://127.0.0.1:9/"  # the discard port: connection refused


def test_perf_smoke_without_its_data_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "perf.py"), "--smoke", "--no-peer"],
        cwd=tmp_path,
        env=dict(
            os.environ,
            PYTHONPATH=str(ROOT),
            CAPS2NE_DATA=str(tmp_path / "none"),
            CAPS2NE_DATA_MIRROR=OFFLINE,
            CAPS2NE_BENCH_RESULTS=str(tmp_path / "results"),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("bench/perf.py:")]
    assert len(lines) == 1 and "needs the cora data set ('caps2ne fetch-data cora')" in lines[0]


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
