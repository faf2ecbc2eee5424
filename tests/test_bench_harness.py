"""The bench harness (bench/common.py): the shared flags are defined once, in
``common.parser`` (bench/harness.py, which imports only argparse), and every script takes
them from there: bench/ defines one argument parser; one timer (``common.clock``); one
result schema and writer, which honours $CAPS2NE_BENCH_RESULTS."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SHARED_FLAGS = ("--threads", "--reps", "--smoke", "--out")


@pytest.fixture(scope="module")
def common():
    sys.path.insert(0, str(BENCH))
    try:
        import common
    finally:
        sys.path.remove(str(BENCH))
    return common


def scripts():
    """Every script of bench/ and bench/peers/ but the harness itself."""
    return sorted(
        p
        for p in [*BENCH.glob("*.py"), *BENCH.glob("peers/*.py")]
        if p.name not in ("common.py", "harness.py", "report.py", "__init__.py")
    )


def test_bench_defines_one_argument_parser():
    makers = [
        p.relative_to(BENCH).as_posix()
        for p in BENCH.rglob("*.py")
        if "ArgumentParser(" in p.read_text(encoding="utf-8")
    ]
    assert makers == ["harness.py"]


@pytest.mark.parametrize("path", scripts(), ids=lambda p: p.relative_to(BENCH).as_posix())
def test_scripts_take_the_shared_flags_from_the_harness(path):
    text = path.read_text(encoding="utf-8")
    assert "ArgumentParser(" not in text
    for flag in SHARED_FLAGS:
        assert not re.search(rf'add_argument\(\s*"{flag}"', text), flag


def test_the_harness_imports_only_the_standard_library():
    """The peers and the workers of walks_vs_pecanpy.py and scale.py import it before
    (or without) NumPy, Numba and the package."""
    code = (
        "import sys; before = set(sys.modules); import harness; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCH, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = proc.stdout.split()
    assert "harness" in loaded
    heavy = [m for m in loaded if m.split(".")[0] in ("numpy", "numba", "caps2ne_np", "common")]
    assert heavy == []


def test_the_scripts_import_the_package_of_their_checkout(tmp_path):
    """bench/common.py puts the checkout's root first on sys.path: a script measures the
    code beside it, not another copy installed (here a stand-in earlier on the path)."""
    other = tmp_path / "caps2ne_np"
    other.mkdir()
    (other / "__init__.py").write_text("raise ImportError('the other copy')\n")
    code = "import common, caps2ne_np; print(caps2ne_np.__file__)"
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BENCH,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert Path(proc.stdout.split()[-1]) == ROOT / "caps2ne_np" / "__init__.py"


def test_the_parser_defines_the_shared_flags(common):
    ap = common.parser("Title.\n\nMore.", threads=2, reps=3, smoke="tiny", out="stem")
    assert ap.description == "Title."
    args = ap.parse_args([])
    assert (args.threads, args.reps, args.smoke, args.out) == (2, 3, False, "stem")
    args = ap.parse_args(["--threads", "4", "--reps", "1", "--smoke", "--out", "t"])
    assert (args.threads, args.reps, args.smoke, args.out) == (4, 1, True, "t")
    assert common.parser("T.", threads=0).parse_args([]).threads == common.usable_cores()
    sweep = common.parser("T.", threads="1,2")
    assert sweep.parse_args([]).threads == [1, 2]
    assert sweep.parse_args(["--threads", "3"]).threads == [3]
    with pytest.raises(SystemExit) as err:
        sweep.parse_args(["--threads", "0,1"])
    assert err.value.code == 2
    bare = common.parser("T.").parse_args([])
    assert not any(hasattr(bare, f[2:]) for f in SHARED_FLAGS)


def test_the_clock_measures_its_block(common):
    with common.clock() as c:
        time.sleep(0.02)
        inside = c.elapsed()
    assert 0.02 <= inside <= c.seconds < 5
    assert common.timed(time.sleep, 0.01) >= 0.01


def test_results_go_to_the_folder_of_the_environment(tmp_path):
    code = (
        "import common, argparse; "
        "args = argparse.Namespace(threads=1, out='probe'); "
        "common.write_results(args.out, common.payload(args, [{'x': 1.5}], seconds=2.0), '# p\\n')"
    )
    env = dict(os.environ, CAPS2NE_BENCH_RESULTS=str(tmp_path), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=BENCH, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.json", "probe.md"]
    payload = json.loads((tmp_path / "probe.json").read_text())
    assert set(payload) == {"command", "args", "machine", "rows", "seconds"}
    assert payload["args"] == {"threads": 1, "out": "probe"} and payload["rows"] == [{"x": 1.5}]
    assert (tmp_path / "probe.md").read_text() == "# p\n"
