"""The OpenMP spin setting (caps2ne_np/kernels/thread_layer.py): Numba's threading layer
starts with GOMP_SPINCOUNT=thread_layer.SPIN_COUNT unless the user chose a spin, and
os.environ is never changed.

Each case runs in a fresh interpreter: the layer starts once per process."""

import json
import os
import subprocess
import sys

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
