"""bench/scale.py at a small size: CI runs the scale benchmark end to end (< 60 s).

The full run (100,000 and 1,000,000 nodes) is ``python bench/scale.py``; this test runs
``--smoke`` with two tiny sizes, so every phase, the growth table, the memory formula
and the reference comparison are exercised, and checks what the report claims.
"""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "scale.py"


def load_scale():
    spec = importlib.util.spec_from_file_location("bench_scale", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports bench/common.py by plain name
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def test_edge_list_writer_matches_python_formatting(tmp_path):
    scale = load_scale()
    rng = np.random.default_rng(0)
    edges = np.concatenate([rng.integers(0, 10**6, (500, 2)), [[0, 9], [10, 100], [999999, 0]]])
    for prefix in ("", "v"):
        path = tmp_path / f"e{prefix}.txt"
        scale.write_edge_list(path, edges, prefix)
        expected = "".join(f"{prefix}{u} {prefix}{v}\n" for u, v in edges.tolist())
        assert path.read_text() == expected


def test_generated_graph_is_simple_power_law_without_isolated_nodes():
    scale = load_scale()
    n, m = 5000, 50_000
    edges = scale.power_law_edges(n, m, seed=3)
    assert edges.shape == (m, 2) and edges.min() >= 0 and edges.max() < n
    assert not np.any(edges[:, 0] == edges[:, 1])
    keys = np.minimum(edges[:, 0], edges[:, 1]) * n + np.maximum(edges[:, 0], edges[:, 1])
    assert np.unique(keys).size == m  # no duplicate, in either orientation
    deg = np.bincount(edges.ravel(), minlength=n)
    assert deg.min() >= 1 and deg.max() > 10 * deg.mean()  # heavy tail
    np.testing.assert_array_equal(edges, scale.power_law_edges(n, m, seed=3))  # seeded


@pytest.mark.slow
def test_scale_smoke_reports_every_phase_at_both_sizes(tmp_path):
    sizes = (1500, 3000)
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--smoke",
        "--sizes",
        ",".join(map(str, sizes)),
        "--steps",
        "8",
        "--warmup",
        "2",
        "--train-seconds",
        "60",
        "--results-dir",
        str(tmp_path),
        "--workdir",
        str(tmp_path / "w"),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=240, cwd=REPO)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads((tmp_path / "scale_smoke.json").read_text())
    for n in sizes:
        r = res["runs"][str(n)]
        assert r["generate"]["n_edges"] == 10 * n
        for kind in ("int", "str"):
            ld = r["load"][kind]
            assert ld["n_nodes"] == n and ld["nnz"] == 20 * n  # every node, both directions
            assert ld["stats"]["duplicates"] == 0 and ld["stats"]["self_loops"] == 0
            assert ld["load_s"] > 0 and ld["peak_above_before"] >= 0
        assert r["cache_walks"]["walks"] == n and r["cache_walks"]["cache_load_s"] > 0
        tr = r["train"]
        assert tr["steps"] == 8 and tr["timed_steps"] > 0 and tr["pairs_per_s"] > 0
        assert (
            tr["reference"]["n_nodes"] == 10_312
            and tr["reference"]["timed_steps"] > 0
            and tr["ratio"] > 0
        )
        f = tr["formula"]
        assert f["total"] == f["params"] + f["adam"] + f["csr"] + f["walk_chunk"]
        assert f["params"] == 4 * (n * (128 + 128 + 1) + 9 * 128 * 128)
        assert tr["peak_rss"] > f["params"]
    whats = [t["target"] for t in res["targets"]]
    assert any("throughput" in w for w in whats) and any("peak RSS" in w for w in whats)
    text = (tmp_path / "scale_smoke.md").read_text()
    assert (
        "## Targets" in text
        and "largest / smallest" in text
        and "params = 4 (N (k + d + 1)" in text
    )
    assert not list(
        (tmp_path / "w").glob("*_str.txt")
    )  # the string-id copy is removed after loading
