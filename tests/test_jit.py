"""_jit: the on-disk cache of every kernel is keyed by its compile options."""

import os
import subprocess
import sys

import numpy as np
from numba import prange

from caps2ne_np.kernels import _jit
from caps2ne_np.model import capsules


def _f(a):
    out = np.empty_like(a)
    for i in prange(a.shape[0]):
        out[i] = a[i] + 1
    return out


def test_cache_name_carries_the_compile_options():
    plain = _jit.kernel(_f)
    fast = _jit.kernel(_f, fastmath=_jit.REASSOC)
    par = _jit.kernel(_f, parallel=True)
    names = {
        plain.py_func.__qualname__,
        fast.py_func.__qualname__,
        par.parallel.py_func.__qualname__,
        par.serial.py_func.__qualname__,
    }
    assert len(names) == 4  # no two share a cache entry
    assert all(n.startswith("_f") for n in names)
    x = np.arange(3.0)
    for fn in (plain, fast, par, par.serial):
        np.testing.assert_array_equal(fn(x), x + 1)


def test_cache_name_is_the_same_in_every_process():
    # a set's iteration order changes with PYTHONHASHSEED; the tag must not
    code = (
        "from caps2ne_np.model import capsules; print(capsules.route.parallel.py_func.__qualname__)"
    )
    names = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        names.add(out.stdout.strip())
    assert names == {capsules.route.parallel.py_func.__qualname__}
