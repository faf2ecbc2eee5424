"""In CI (CI=true) a test skipped for lack of a package or data that
.ci/run provides fails; elsewhere it skips.  The hooks of tests/conftest.py run here on
a few generated tests in a temporary folder (a copy of conftest.py and benchdata.py); a quiet
run counts its skips in one line."""

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchdata import DATA, needs_data
from caps2ne_np.graphs.datasets import dataset_files

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

GENERATED = """
import pytest
from benchdata import needs_data


def test_provided_package():
    pytest.importorskip("caps2ne_no_such_package_a")


def test_other_package():
    pytest.importorskip("caps2ne_no_such_package_b")


@needs_data("ppi")
def test_data():
    pass


def test_plain_skip():
    pytest.skip("not about packages")
"""


def run_generated(tmp_path, **env):
    """Outcome of each generated test: {name: 'passed' | 'failed' | 'skipped'}."""
    folder = tmp_path / "t"
    folder.mkdir()
    for name in ("conftest.py", "benchdata.py"):
        shutil.copyfile(TESTS / name, folder / name)
    (folder / "test_generated.py").write_text(GENERATED)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "CAPS2NE_CI_PROVIDES")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "-o",
            "markers=needs_data",
            str(folder),
        ],
        cwd=tmp_path,
        env=dict(
            clean,
            PYTHONPATH=str(ROOT),
            CAPS2NE_DATA=str(tmp_path / "empty-data"),
            HOME=str(tmp_path / "home"),
            XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"),
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes = {}
    for line in proc.stdout.splitlines():  # -v: "t/test_generated.py::test_data SKIPPED (...)"
        if "::test_" in line and not line.startswith(("ERROR", "FAILED", "SKIPPED")):
            name, _, rest = line.split("::test_", 1)[1].partition(" ")
            word = rest.split()[0].lower() if rest.split() else ""
            if word in ("passed", "failed", "skipped", "error"):
                outcomes[name] = "failed" if word == "error" else word
    return outcomes, proc.stdout + proc.stderr


def test_outside_ci_every_missing_thing_skips(tmp_path):
    outcomes, out = run_generated(
        tmp_path, CAPS2NE_DATA_MIRROR="http://127.0.0.1:9/", CAPS2NE_CI_PROVIDES="data"
    )
    assert outcomes == dict.fromkeys(
        ("provided_package", "other_package", "data", "plain_skip"), "skipped"
    ), out
    assert out.count("benchmark data") >= 1 and "tests skipped without benchmark data" in out


def test_in_ci_a_skip_for_what_ci_provides_fails(tmp_path):
    outcomes, out = run_generated(
        tmp_path,
        CI="true",
        CAPS2NE_CI_PROVIDES="data caps2ne_no_such_package_a",
        CAPS2NE_DATA_MIRROR="http://127.0.0.1:9/",  # no local mirror: the data fetch failed
    )
    assert outcomes == {
        "provided_package": "failed",
        "other_package": "skipped",
        "data": "failed",
        "plain_skip": "skipped",
    }, out
    assert "but .ci/run provides caps2ne_no_such_package_a" in out


def test_in_ci_data_the_mirror_lacks_too_may_skip(tmp_path):
    (tmp_path / "mirror").mkdir()  # a local mirror without PPI.mat (as Pubmed's allx)
    outcomes, out = run_generated(
        tmp_path,
        CI="true",
        CAPS2NE_CI_PROVIDES="data",
        CAPS2NE_DATA_MIRROR=str(tmp_path / "mirror"),
    )
    assert outcomes["data"] == "skipped", out


def test_ray_local_does_not_turn_a_failed_start_into_a_skip():
    source = (TESTS / "conftest.py").read_text()
    fixture = source[source.index("def ray_local") :]
    assert "pytest.skip" not in fixture and "except" not in fixture


@pytest.mark.parametrize("name", ["conftest.py", "benchdata.py"])
def test_the_skip_reason_points_to_no_shared_data_folder(name):
    import ast

    tree = ast.parse((TESTS / name).read_text())
    strings = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    assert not [
        s for s in strings if "shared/data" in s and "fetch-data" not in s and "beside" not in s
    ]


# ---- the suite on a user's machine


def test_the_session_data_folder_is_a_temporary_copy():
    import tempfile

    from caps2ne_np.graphs.downloads import data_mirror, default_data_dir

    data = os.environ["CAPS2NE_DATA"]
    assert default_data_dir() == data and Path(data).is_relative_to(tempfile.gettempdir())
    assert "://" not in data_mirror()  # a local folder: no test downloads


PARTIAL = """
from benchdata import needs_data
from caps2ne_np.graphs.datasets import load_dataset


@needs_data("cora")
def test_cora():
    assert load_dataset("cora").n_nodes == 2708


@needs_data("citeseer")
def test_citeseer():
    load_dataset("citeseer")


def test_scale_smoke_like():  # what bench/scale.py did: try BlogCatalog, offline
    try:
        load_dataset("blogcatalog")
    except ValueError:
        pass
"""


@needs_data("cora")
def test_a_cache_holding_only_cora_runs_cora_skips_citeseer_and_stays_unchanged(tmp_path):
    cache = tmp_path / "home" / ".cache" / "caps2ne_np"
    for rel in dataset_files("cora"):
        (cache / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / rel, cache / rel)
    before = sorted((p.relative_to(cache), p.read_bytes()) for p in cache.rglob("*") if p.is_file())
    folder = tmp_path / "t"
    folder.mkdir()
    no_mirror = tmp_path / "no-mirror"
    no_mirror.mkdir()
    for name in ("conftest.py", "benchdata.py"):
        shutil.copyfile(TESTS / name, folder / name)
    (folder / "test_partial.py").write_text(PARTIAL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPS2NE_DATA") and k != "CI"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-o", "markers=needs_data"]
        + [str(folder)],
        cwd=tmp_path,
        env=dict(
            env,
            PYTHONPATH=str(ROOT),
            HOME=str(tmp_path / "home"),
            XDG_CACHE_HOME="",
            # a user's plain clone has no shared/data beside it: an empty mirror
            CAPS2NE_DATA_MIRROR=str(no_mirror),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert "test_cora PASSED" in out and "test_citeseer SKIPPED" in out, out
    assert "test_scale_smoke_like PASSED" in out and proc.returncode == 0, out
    after = sorted((p.relative_to(cache), p.read_bytes()) for p in cache.rglob("*") if p.is_file())
    assert after == before and not (cache / "multilabel").exists()


def run_pytest_quietly(tmp_path, **env):
    """``pytest -q`` with the project's setup.cfg on test_ci_skips.py's generated tests
    (two tests skip for packages, one for data, one for another reason)."""
    import shutil

    from test_ci_skips import GENERATED

    folder = tmp_path / "t"
    folder.mkdir()
    for name in ("conftest.py", "benchdata.py"):
        shutil.copyfile(ROOT / "tests" / name, folder / name)
    (folder / "test_generated.py").write_text(GENERATED)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "CAPS2NE_CI_PROVIDES")}
    args = ["-q", "-p", "no:cacheprovider", "-c", str(ROOT / "setup.cfg")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--rootdir", str(tmp_path), str(folder)],
        cwd=tmp_path,
        env=dict(
            clean,
            PYTHONPATH=str(ROOT),
            CAPS2NE_DATA=str(tmp_path / "empty-data"),
            CAPS2NE_DATA_MIRROR="http://127.0.0.1:9/",
            HOME=str(tmp_path / "home"),
            XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"),
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.stdout + proc.stderr


def test_a_quiet_run_counts_its_skips_in_one_line(tmp_path):
    out = run_pytest_quietly(tmp_path, CAPS2NE_CI_PROVIDES="data")
    assert "SKIPPED [" not in out, out  # no line per skip
    assert "4 tests skipped (1 without benchmark data); pytest -rs lists them" in out, out


def test_a_quiet_ci_run_still_fails_on_what_ci_provides(tmp_path):
    out = run_pytest_quietly(
        tmp_path, CI="true", CAPS2NE_CI_PROVIDES="data caps2ne_no_such_package_a"
    )
    assert "FAILED" in out and "but .ci/run provides caps2ne_no_such_package_a" in out, out
    # the package skip fails at the call, the data skip at set-up (an error)
    assert "1 failed, 2 skipped, 1 error" in out, out
    assert "2 tests skipped (0 without benchmark data)" in out, out
    assert "SKIPPED [" not in out, out


def _extra(name):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options.extras_require"][name].split("\n")
    return {re.split(r"[<>=!~ \[]", line.strip())[0] for line in lines if line.strip()}


def test_test_extra_installs_what_the_api_tests_import():
    """``pip install -e ".[test]"`` (the README's test command) must run the networkx,
    pandas and gensim tests of test_estimator_types.py and test_estimator_inputs.py, not skip
    them."""
    imported = set()
    for name in ("test_estimator_types.py", "test_estimator_inputs.py"):
        text = (ROOT / "tests" / name).read_text()
        imported |= set(re.findall(r'importorskip\("([a-z_]+)"', text))
    assert imported >= {"networkx", "pandas", "gensim"}
    assert imported <= _extra("test"), imported - _extra("test")
