"""One place for the Numba compilation options shared by every kernel.

``FASTMATH`` is off: the float64 finite-difference gradient checks and the
naive-reference tests are the bar any change here must pass.  Measured: fastmath on
the Adam kernels breaks the 1-vs-2-thread bitwise equality (the vectorised body and
the scalar remainder of each thread's chunk round differently, and the chunks move
with the thread count), so it stays off there.

``error_model="numpy"``: with Numba's default ("python") every float division checks
for a zero divisor so that it can raise ZeroDivisionError, and that branch stops
LLVM from vectorising the loop.  ``prange`` loops are compiled with the numpy model
anyway, so the serial twins were the slow ones: measured, Adam over 1.65 M float32
elements took 4.1 ms serial against 0.9 ms for the parallel version on one thread,
and 0.86 ms serial with the numpy model (a division by zero now gives inf or nan,
which the training loop's finite checks catch).

Parallel kernels are compiled two ways, parallel (``prange`` on Numba's threads)
and serial, and each call site picks one by the work it is about to do
(``Kernel.for_work``).  Forking threads for a kernel of a few microseconds costs
more than it saves, and on a busy machine every parallel region waits at its
barrier for the slowest thread's next time slice: measured on 2 cores with other
processes running, a Cora step (256 pairs) took 35 ms on 2 threads against 9 ms on
one (bench/results/perf.md, first run).  PyTorch applies the same rule (a grain
size below which an op stays on one thread).
"""

import types

import numba
from numba import njit

FASTMATH = False

PAR_MIN_WORK = 1 << 18
"""Estimated multiply-adds (or element updates) below which a kernel runs serially."""


class Kernel:
    """A kernel compiled parallel (``kernel(...)``) and serial (``kernel.serial``).

    Calling it runs the parallel version; ``kernel.for_work(n)`` returns the version
    to use for about ``n`` operations.  Both compute the same values in the same
    order (every ``prange`` iteration owns its outputs), so the choice never
    changes a result.
    """

    def __init__(self, fn, fastmath=FASTMATH):
        self.py_func = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.parallel = njit(cache=True, parallel=True, fastmath=fastmath, nogil=True, error_model="numpy")(fn)
        # a copy under another qualified name, so the two versions' caches never mix
        serial_fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_serial",
                                       fn.__defaults__, fn.__closure__)
        serial_fn.__qualname__ = fn.__qualname__ + "_serial"
        serial_fn.__module__ = fn.__module__
        self.serial = njit(cache=True, parallel=False, fastmath=fastmath, nogil=True, error_model="numpy")(serial_fn)

    def __call__(self, *args):
        return self.parallel(*args)

    def for_work(self, work):
        """The parallel version for at least PAR_MIN_WORK operations on >1 thread."""
        if work >= PAR_MIN_WORK and numba.get_num_threads() > 1:
            return self.parallel
        return self.serial


def kernel(fn=None, *, parallel=False, fastmath=FASTMATH):
    """``njit`` with the project's options: lazy typing, on-disk cache, no fastmath
    unless a kernel asks for it (only where its tests still pass).

    ``parallel=True`` returns a ``Kernel`` (parallel and serial versions)."""

    def wrap(f):
        if parallel:
            return Kernel(f, fastmath=fastmath)
        return njit(cache=True, parallel=False, fastmath=fastmath, nogil=True, error_model="numpy")(f)

    return wrap(fn) if fn is not None else wrap
