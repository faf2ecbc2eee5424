"""The package's OpenMP spin setting (caps2ne_np/__init__.py): set on import, never
over what the user chose."""

import os
import subprocess
import sys

import pytest


def spin_after_import(**env):
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    base.update(env)
    out = subprocess.run([sys.executable, "-c",
                          "import os, caps2ne_np; print(os.environ.get('GOMP_SPINCOUNT'))"],
                         env=base, capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize("env,expected", [({}, "1000"), ({"GOMP_SPINCOUNT": "5"}, "5"),
                                          ({"OMP_WAIT_POLICY": "PASSIVE"}, "None")])
def test_spin_count_default_respects_the_user(env, expected):
    assert spin_after_import(**env) == expected
