"""kernels/jit.py: the on-disk cache of every kernel is keyed by its compile options."""

import os
import subprocess
import sys

import numpy as np
import pytest
from numba import prange

from caps2ne_np.kernels import jit
from caps2ne_np.model import capsules


def _f(a):
    out = np.empty_like(a)
    for i in prange(a.shape[0]):
        out[i] = a[i] + 1
    return out


def test_cache_name_carries_the_compile_options():
    plain = jit.kernel(_f)
    fast = jit.kernel(_f, fastmath=jit.REASSOC)
    par = jit.kernel(_f, parallel=True)
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
        "from caps2ne_np.model import capsules; "
        "print(capsules._route.parallel.py_func.__qualname__)"
    )
    names = set()
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        names.add(out.stdout.strip())
    assert names == {capsules._route.parallel.py_func.__qualname__}


def test_a_declared_work_estimate_picks_the_version_a_call_runs(monkeypatch):
    monkeypatch.setattr(jit.numba, "get_num_threads", lambda: 2)
    small = np.zeros((3, 4))
    big = np.zeros((jit.PAR_MIN_WORK // 4, 4))
    for s, version in ((small, "serial"), (big, "parallel")):
        before = dict(jit.LAUNCHES)
        capsules.squash(s)  # capsules._squash declares 4 operations per entry
        assert jit.LAUNCHES[version] == before[version] + 1
        assert sum(jit.LAUNCHES.values()) == sum(before.values()) + 1


def test_the_kernels_public_wrappers_check_their_arrays():
    from caps2ne_np.model import grads

    s = np.zeros((3, 4))
    with pytest.raises(ValueError, match=r"squash: out: expected an array of shape \(3, 4\)"):
        capsules.squash(s, np.zeros((3, 5)))
    with pytest.raises(ValueError, match="squash_backward: d_e"):
        grads.squash_backward(s, np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="route: u_hat"):
        capsules.route(s, 1, 1.0, "paper")
    with pytest.raises(ValueError, match="routing rule"):
        capsules.route(np.zeros((2, 3, 4)), 1, 1.0, "other")
    with pytest.raises(ValueError, match="outside"):
        capsules.gather_rows(np.zeros((2, 3)), np.array([[0, 2]]))
    with pytest.raises(ValueError, match="softmax_rows: targets"):
        capsules.softmax_rows(np.zeros(2), np.zeros((2, 3)), np.zeros(3, int), np.zeros(3, int))
    c, s_, e = capsules.route(np.zeros((2, 3, 4)), 2, 2.0, "sabour")
    assert c.shape == (2, 3, 2) and s_.shape == e.shape == (2, 3, 4)
    d_u_hat = grads.route_backward(np.zeros((2, 3, 4)), c, s_, e, np.zeros((3, 4)), 2.0, 1, True)
    assert d_u_hat.shape == (2, 3, 4)
