"""Numba's threading layer, started with a short OpenMP spin unless the user chose one.

A training step is ~20 short parallel kernels, so how long an idle OpenMP worker
spins before it sleeps decides a step's speed: libgomp's long default spin is a
disaster when another process shares the cores, ``OMP_WAIT_POLICY=PASSIVE`` pays a
wake-up per kernel, ``GOMP_SPINCOUNT=1000`` (a few microseconds) keeps most of the
idle speed and loses little under load (measurements: docs/training.md, Threads).

libgomp reads ``GOMP_SPINCOUNT`` once, when it is loaded, and Numba loads it when its
threading layer starts (the first parallel launch or ``numba.get_num_threads`` /
``set_num_threads``).  So ``_jit``, which every kernel module imports, imports this
module, and ``start()`` starts the layer with the variable set for that moment only:
``os.environ`` ends as it began, and child processes do not inherit the setting.
"""

import os

import numba

SPIN_COUNT = "1000"
"""``GOMP_SPINCOUNT`` for Numba's OpenMP workers when the user set neither it nor
``OMP_WAIT_POLICY``."""


def start():
    """Start Numba's threading layer with ``GOMP_SPINCOUNT=SPIN_COUNT`` unless
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set; ``os.environ`` ends as it began.

    Notes: setting the variable after the layer started changes nothing (measured with
    ``GOMP_SPINCOUNT=INFINITE``: after a kernel, an idle worker used 0.10-0.16 s of CPU
    in a 0.5 s sleep when the variable was set only while the layer started, and
    0.001-0.005 s when it was set just after).  If another library loaded the same
    libgomp earlier, its settings stand, as they would anyway."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        numba.get_num_threads()  # starts the threading layer: libgomp loads
    except ValueError:
        pass  # no usable layer: Numba raises again at launch
    finally:
        del os.environ["GOMP_SPINCOUNT"]


start()
