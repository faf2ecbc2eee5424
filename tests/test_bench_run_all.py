"""bench/run_all.py lists the whole suite (every script it names exists) and rejects unknown
parts."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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
