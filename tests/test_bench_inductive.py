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
