"""Worst relative error of every hand-derived gradient against central differences
(float64, h = 1e-6): runs tests/test_grads.py's finite-difference test (m in {1, 2, 3},
both routing rules, both gradient modes, both coupling scales, trainable / fixed dense /
fixed sparse features, two random problems each) under pytest, reads the errors each
case records from the JUnit XML, prints a table and writes gradcheck.json + .md to the
results folder.  The checks live once, in the test; this script only reports them.

    python bench/gradcheck.py
"""

import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from common import REPO, write_results

TEST = "tests/test_grads.py::test_loss_and_grads_match_central_differences"
BAR = 1e-6


def recorded_cases(junit_xml):
    """The ``gradcheck`` properties the test recorded, one dict per case."""
    root = ET.parse(junit_xml).getroot()
    return [
        json.loads(p.get("value")) for p in root.iter("property") if p.get("name") == "gradcheck"
    ]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "gradcheck.xml"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                TEST,
                f"--junitxml={xml}",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        cases = recorded_cases(xml) if xml.exists() else []
    if not cases:
        sys.exit(
            f"pytest recorded no gradient check (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    worst_by_param, counts = {}, {}
    for case in cases:
        for name, err in case["errors"].items():
            worst_by_param[name] = max(worst_by_param.get(name, 0.0), err)
            counts[name] = counts.get(name, 0) + 1
    worst = max(worst_by_param.values())
    n_checks = sum(counts.values())
    table = ["| parameter | worst relative error | checks |", "| --- | --- | --- |"]
    table += [f"| {name} | {err:.2e} | {counts[name]} |" for name, err in worst_by_param.items()]
    text = "\n".join(table)
    print(text)
    print(f"worst over {n_checks} checks: {worst:.2e} (pytest exit {proc.returncode})")
    payload = dict(
        worst=float(f"{worst:.3g}"),
        bar=BAR,
        checks=n_checks,
        cases=len(cases),
        worst_by_param={k: float(f"{v:.3g}") for k, v in worst_by_param.items()},
        pytest_exit=proc.returncode,
        command=f"python -m pytest {TEST}",
    )
    write_results(
        "gradcheck",
        payload,
        "# Gradient checks: hand-derived vs central differences (float64, h = 1e-6)\n\n"
        "`python bench/gradcheck.py`: every case of tests/test_grads.py's finite-"
        "difference test (m in {1,2,3}, rules paper/sabour, modes exact/stop, scale "
        "q-1 / 1, trainable, fixed dense and fixed sparse features, 2 random problems "
        "each). Relative error = max |a - n| / max(|a| + |n|).\n\n"
        + text
        + f"\n\nWorst over {n_checks} checks: {worst:.2e} (bar: {BAR:g}).\n",
    )
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
