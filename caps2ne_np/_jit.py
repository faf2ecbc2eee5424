"""One place for the Numba compilation options shared by every kernel.

``FASTMATH`` is off: the float64 finite-difference gradient checks and the
naive-reference tests are the bar any change here must pass.
"""

from numba import njit

FASTMATH = False


def kernel(fn=None, *, parallel=False):
    """``njit`` with the project's options: lazy typing, on-disk cache, no fastmath."""

    def wrap(f):
        return njit(cache=True, parallel=parallel, fastmath=FASTMATH, nogil=True)(f)

    return wrap(fn) if fn is not None else wrap
