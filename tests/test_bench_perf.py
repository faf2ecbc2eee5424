"""bench/perf.py: without its data, --smoke is one line."""

import os
import subprocess
import sys
from pathlib import Path

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
