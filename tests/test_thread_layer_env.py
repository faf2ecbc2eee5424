"""The OpenMP spin setting (caps2ne_np/kernels/thread_layer.py): Numba's threading layer
starts with GOMP_SPINCOUNT=thread_layer.SPIN_COUNT unless the user chose a spin, and
os.environ is never changed; a bad NUMBA_NUM_THREADS or an unusable
NUMBA_THREADING_LAYER is one line naming the variable.

Each case runs in a fresh interpreter: the layer starts once per process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caps2ne_np.kernels.thread_layer import SPIN_COUNT

PROBE = """
import json, os
import numba
seen = []                                  # GOMP_SPINCOUNT at each numba.get_num_threads call
_get = numba.get_num_threads
def spy():
    seen.append(os.environ.get("GOMP_SPINCOUNT"))
    return _get()
numba.get_num_threads = spy
before = dict(os.environ)
import caps2ne_np
after_package = dict(os.environ)
import caps2ne_np.estimator.caps2ne                # every kernel module: the layer starts here
numba.get_num_threads = _get
# threadpoolctl and scikit-learn set KMP_DUPLICATE_LIB_OK / KMP_INIT_AT_FORK on import
try:
    layer = numba.threading_layer()        # raises until the layer has started
except ValueError:
    layer = None
ours = lambda env: {k: v for k, v in env.items() if not k.startswith("KMP_")}
print(json.dumps(dict(package_kept=after_package == before,
                      kernels_kept=ours(os.environ) == ours(before),
                      layer=layer, seen=seen,
                      spin=os.environ.get("GOMP_SPINCOUNT"),
                      policy=os.environ.get("OMP_WAIT_POLICY"))))
"""


def probe(**env):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    base.update(env)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=base, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_threading_layer_starts_with_the_short_spin_and_environ_is_unchanged():
    r = probe()
    assert r["package_kept"] and r["kernels_kept"] and r["spin"] is None
    assert r["seen"][:1] == [SPIN_COUNT]  # set while the layer (and libgomp) started
    assert r["layer"] in ("omp", "tbb", "workqueue")


@pytest.mark.parametrize("env", [{"GOMP_SPINCOUNT": "5"}, {"OMP_WAIT_POLICY": "PASSIVE"}])
def test_a_spin_the_user_chose_is_kept(env):
    r = probe(**env)
    assert r["package_kept"] and r["kernels_kept"]
    assert r["spin"] == env.get("GOMP_SPINCOUNT") and r["policy"] == env.get("OMP_WAIT_POLICY")
    assert SPIN_COUNT not in r["seen"]


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_importing_the_estimator_with_a_bad_thread_count_is_one_clear_error(value):
    # Numba fails on 0 with its own traceback and ignores 'abc' with a warning (a
    # ValueError later): the package checks the variable before Numba loads
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, NUMBA_NUM_THREADS=value, PYTHONPATH=root)
    done = subprocess.run(
        [sys.executable, "-c", "import caps2ne_np.estimator.caps2ne"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    last = done.stderr.rstrip().splitlines()[-1]
    assert last.startswith(f"caps2ne_np.errors.InputError: NUMBA_NUM_THREADS={value!r}")
    assert "numba" not in done.stderr.replace("NUMBA_NUM_THREADS", "")


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("a b\nb c\nc a\nc d\nd e\ne f\nf d\n")
    return path


def cli_process(args, timeout=300, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "cli.py", *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tiny_train(edges, tmp_path, *extra):
    return [
        "train", "--graph", str(edges), "--out", str(tmp_path / "e.emb"), "--dim", "8",
        "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "1", *extra,
    ]  # fmt: skip


def one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5", ""])
@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_a_bad_numba_num_threads_is_one_line_and_exit_1(edges, tmp_path, value, quiet):
    result = cli_process(tiny_train(edges, tmp_path, *quiet), NUMBA_NUM_THREADS=value)
    line = one_error_line(result)
    assert f"NUMBA_NUM_THREADS={value!r}" in line or f"NUMBA_NUM_THREADS={value}:" in line
    assert "whole number" in line and "unset" in line
    assert not (tmp_path / "e.emb").exists()


@pytest.mark.parametrize("layer", ["tbb", "bogus"])
def test_an_unusable_threading_layer_names_the_variable_and_the_layers_available(
    edges, tmp_path, layer
):
    try:
        import numba.np.ufunc.tbbpool  # noqa: F401
    except ImportError:
        pass
    else:
        if layer == "tbb":
            pytest.skip("TBB is installed here: the tbb layer loads")
    result = cli_process(tiny_train(edges, tmp_path, "-q"), NUMBA_THREADING_LAYER=layer)
    line = one_error_line(result)
    assert f"NUMBA_THREADING_LAYER={layer}" in line
    assert "omp" in line and "workqueue" in line  # the layers that load here
    assert not (tmp_path / "e.emb").exists()


def test_a_usable_threading_layer_passes_the_check(tmp_path):
    # evaluate runs through the same check and compiles no kernel: quick in a fresh clone
    rows = "".join(f"n{i} {i % 2} {(i * 7) % 5}\n" for i in range(20))
    (tmp_path / "e.emb").write_text("20 2\n" + rows)
    (tmp_path / "l.txt").write_text("".join(f"n{i} {i % 2}\n" for i in range(20)))
    args = ["evaluate", "-e", str(tmp_path / "e.emb"), "--labels", str(tmp_path / "l.txt")]
    result = cli_process([*args, "--shuffles", "2"], NUMBA_THREADING_LAYER="workqueue")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "error" not in result.stderr and result.stdout
