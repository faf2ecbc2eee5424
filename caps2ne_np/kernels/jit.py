"""One place for the Numba compilation options shared by every kernel.

``FASTMATH`` is off: the float64 finite-difference gradient checks, the naive-reference
tests and the 1-vs-2-thread bitwise equality are the bar any change here must pass.
``error_model="numpy"``: a float division does not check for a zero divisor (which stops
LLVM from vectorising); a division by zero gives inf or nan, which the training loop's
finite checks catch.

Parallel kernels are compiled two ways, parallel (``prange`` on Numba's threads) and
serial, and each call runs the one its work calls for: forking threads for a kernel of a
few microseconds costs more than it saves.  A kernel states its work once, in its
decorator, as a function of its own arguments (``kernel(parallel=True, work=...)``,
``Kernel``); its call sites call it like any function.

The measurements behind each choice: docs/benchmarks.md, "Measurements behind the
compilation and threading choices".
"""

import hashlib
import types
from pathlib import Path

import numba
import numpy as _np
from numba import njit
from numba import types as _types
from numba.extending import overload as _overload

from . import thread_layer

thread_layer.start()  # Numba's threads, with a short OpenMP spin

FASTMATH = False

REASSOC = frozenset({"reassoc"})
"""LLVM's one fast-math flag that kernels with dot products or sums over k opt into
(``kernel(..., fastmath=REASSOC)``).  Without it a sum such as ``acc += a[j] * b[j]``
is a chain of dependent scalar additions, 4 cycles each: measured, the target
logits of 1,280 pairs (dot products of 128) took 0.13 ms from cache, 0.027 ms with
``reassoc``, which lets LLVM keep several partial sums in a vector register.  The
sums round differently (float64 accumulators; tests compare against NumPy with
tolerances and against finite differences), but the same way on any number of
threads: each sum stays inside one ``prange`` iteration.  No other flag: no
NaN/inf assumptions (the training loop relies on seeing a non-finite loss),
no contraction to FMA."""

PAR_MIN_WORK = 1 << 18
"""Estimated multiply-adds (or element updates) below which a kernel runs serially."""


class Kernel:
    """A kernel compiled parallel (``kernel.parallel``) and serial (``kernel.serial``).

    The one way to state a kernel's work is its decorator: ``kernel(parallel=True,
    work=f)``, where ``f`` takes the kernel's arguments and returns about how many
    operations (multiply-adds, element updates) a call does::

        @kernel(parallel=True, fastmath=REASSOC, work=lambda s, out: 4 * s.size)
        def _squash(s, out): ...

        _squash(s, out)    # at every call site: parallel for >= PAR_MIN_WORK
                           # operations on more than one thread, else serial

    The estimate sits beside the loops it counts, and the call sites read as plain
    calls.  A kernel without ``work`` runs its parallel version when called from Python:
    those are the kernels only other kernels call (training/step/fused.py's stages, which
    pick ``.parallel`` or ``.serial`` for the whole chunk) and the few called once on a
    whole graph (all of its walks or edges, the contexts of every node to infer, the
    squash of fixed features), whose work is always large.  Both versions compute the
    same values in the same order (every ``prange`` iteration owns its outputs), so the
    choice never changes a result.

    A kernel may call other parallel kernels by name (training/step/fused.py's chunk calls
    its stages): its parallel version calls their parallel versions and its serial
    version their serial ones, so a serial call never starts a parallel region
    (``_cached``).  The two versions are compiled on first use.
    """

    def __init__(self, fn, fastmath=FASTMATH, work=None):
        self.work = work
        self.py_func = fn
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self._fastmath = fastmath
        self._versions = {}

    @property
    def parallel(self):
        return self._version(True)

    @property
    def serial(self):
        return self._version(False)

    def _version(self, parallel):
        # copies under other qualified names (the on-disk cache's key), so the two
        # versions' caches never mix, nor those of other compile options (_cached)
        d = self._versions.get(parallel)
        if d is None:
            suffix = "" if parallel else "_serial"
            # a kernel that only calls others (no prange of its own) compiles serial code
            # in both versions: its parallel version calls the others' parallel versions
            own = parallel and "prange" in self.py_func.__code__.co_names
            d = _cached(self.py_func, suffix, parallel=own, fastmath=self._fastmath, calls=parallel)
            self._versions[parallel] = d
        return d

    def __call__(self, *args):
        if self.work is not None:
            return self._pick(self.work(*args))(*args)
        LAUNCHES["parallel"] += 1
        return self.parallel(*args)

    def _pick(self, work):
        """The parallel version for at least PAR_MIN_WORK operations on >1 thread."""
        if work >= PAR_MIN_WORK and numba.get_num_threads() > 1:
            LAUNCHES["parallel"] += 1
            return self.parallel
        LAUNCHES["serial"] += 1
        return self.serial


LAUNCHES = {"parallel": 0, "serial": 0}
"""How many times a ``Kernel`` ran (was chosen) parallel or serial since the process
started: a profile reads the parallel regions per step from it
(docs/results/threads_profile.md).  A direct call of a kernel without a work estimate
counts as parallel even on one thread."""


def check_array(name, a, shape, dtype=None):
    """Raise ValueError unless ``a`` is an array of ``shape`` (None: any length on that
    axis) and, when given, ``dtype``: the checks of a kernel's public wrapper, which the
    compiled kernel does not make (an out-of-range index there reads or writes memory
    it does not own)."""
    if (
        not isinstance(a, _np.ndarray)
        or a.ndim != len(shape)
        or any(want is not None and got != want for got, want in zip(a.shape, shape))
        or (dtype is not None and a.dtype != dtype)
    ):
        want = "(" + ", ".join("n" if n is None else str(n) for n in shape) + ")"
        if dtype is not None:
            want += f" {_np.dtype(dtype)}"
        got = f"{a.shape} {a.dtype}" if isinstance(a, _np.ndarray) else type(a).__name__
        raise ValueError(f"{name}: expected an array of shape {want}, got {got}")
    return a


def out_array(name, out, shape, dtype):
    """An output argument of a kernel's wrapper: a new array when None, else checked."""
    return _np.empty(shape, dtype=dtype) if out is None else check_array(name, out, shape, dtype)


def kernel(fn=None, *, parallel=False, fastmath=FASTMATH, work=None):
    """``njit`` with the project's options: lazy typing, on-disk cache, no fastmath
    unless a kernel asks for it (only where its tests still pass).

    ``parallel=True`` returns a ``Kernel`` (parallel and serial versions); ``work``, a
    function of the kernel's arguments, estimates the operations of a call, which
    picks the version a call runs (``Kernel``: the one place a kernel's work is stated)."""

    if isinstance(fastmath, frozenset):
        fastmath = set(fastmath)  # Numba takes a bool, dict or set

    def wrap(f):
        if parallel:
            return Kernel(f, fastmath=fastmath, work=work)
        return _cached(f, "", parallel=False, fastmath=fastmath)

    return wrap(fn) if fn is not None else wrap


def inline(fn):
    """A helper written once for every driver: from Python the plain function (NumPy
    evaluates it on arrays, or a test on scalars); inside a kernel, Numba compiles it
    into the calling kernel (an overload with ``inline="always"``), under that kernel's
    compile options.  A Python function, not a dispatcher: it has no cache of its own
    to keep (train._kernels_cold scans the dispatchers)."""
    _overload(fn, inline="always", strict=False)(lambda *args: fn)
    return fn


_THIS_FILE = Path(__file__).read_bytes()


def _cached(fn, suffix, **options):
    """``njit(cache=True, ...)`` of a copy of ``fn`` whose qualified name carries a tag
    of the compile options and of the source text of every module it calls into.

    Numba's on-disk cache is keyed by a function's qualified name and its own source
    file's time stamp, so without the tag a change of options here (FASTMATH, REASSOC,
    error_model), of ``fast_exp`` below, or of a helper another module inlines into it
    (capsules.route_pair into training/step/fused.py's stages) would not reach the cached
    kernel; with it, such a change compiles it anew (tests/test_jit.py).

    A global of ``fn`` that is a ``Kernel`` resolves, in the copy, to its parallel
    version when ``calls`` (default: ``parallel``) is true, else to its serial one."""
    calls = options.pop("calls", options.get("parallel", False))
    opts = dict(nogil=True, error_model="numpy", **options)
    canon = sorted(
        (k, repr(sorted(v) if isinstance(v, (set, frozenset)) else v)) for k, v in opts.items()
    )  # a set's repr order varies by process
    sources = b"".join(Path(f).read_bytes() for f in sorted(_source_files(fn)))
    tag = hashlib.sha1(repr(canon).encode() + _THIS_FILE + sources).hexdigest()[:8]
    glob = fn.__globals__
    kernels = {n: glob[n] for n in fn.__code__.co_names if isinstance(glob.get(n), Kernel)}
    if kernels:  # a snapshot of the module's globals with the matching versions
        glob = dict(glob)
        for n, k in kernels.items():
            glob[n] = k.parallel if calls else k.serial
    copy = types.FunctionType(
        fn.__code__, glob, fn.__name__ + suffix, fn.__defaults__, fn.__closure__
    )
    copy.__qualname__ = f"{fn.__qualname__}{suffix}_{tag}"
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    copy.__wrapped__ = fn
    return njit(cache=True, **opts)(copy)


_PACKAGE = __name__.split(".")[0]


def _source_files(fn):
    """The source files of the package's modules ``fn`` calls into, directly or
    through the functions those call (its own module's included)."""
    files, seen, todo = set(), set(), [fn]
    while todo:
        f = todo.pop()
        f = getattr(f, "py_func", f)  # a Kernel or a Numba dispatcher: its Python function
        f = getattr(f, "__wrapped__", f)
        code = getattr(f, "__code__", None)
        if code is None or id(f) in seen:
            continue
        seen.add(id(f))
        module = getattr(f, "__module__", "") or ""
        if module.split(".")[0] == _PACKAGE and module != __name__:
            files.add(code.co_filename)
        glob = getattr(f, "__globals__", {})
        todo.extend(glob[n] for n in code.co_names if n in glob and callable(glob[n]))
    return files


# --- exp for float32 that LLVM can vectorise -------------------------------------
# Without Intel's SVML (not a dependency), np.exp in a Numba loop is a scalar libm
# call per element; the sampled softmax takes P x |V'| of them per step.  For
# float32, ``fast_exp`` is Cephes' expf (range reduction by ln 2, degree-6
# polynomial, exponent bits set directly), branch-free so the loop vectorises;
# measured error within 2 ulp of np.exp (tests/test_jit_fast_exp.py); below -87.34,
# where exp is subnormal, it returns 0.  float64 (the gradient checks) keeps np.exp.

_LOG2E = _np.float32(1.44269504088896341)
_LN2_HI = _np.float32(0.693359375)
_LN2_LO = _np.float32(-2.12194440e-4)
_EXP_LO = _np.float32(-87.33654)  # exp(x) underflows to 0 below about this
_EXP_HI = _np.float32(88.0)  # clamped here (exp(88) = 1.65e38, finite)
_P0, _P1, _P2 = (
    _np.float32(1.9875691500e-4),
    _np.float32(1.3981999507e-3),
    _np.float32(8.3334519073e-3),
)
_P3, _P4, _P5 = (
    _np.float32(4.1665795894e-2),
    _np.float32(1.6666665459e-1),
    _np.float32(5.0000001201e-1),
)


def fast_exp(x):
    """exp(x); vectorisable Cephes expf for float32 inside Numba kernels."""
    return _np.exp(x)


@_overload(fast_exp)
def _fast_exp_impl(x):
    if isinstance(x, _types.Float) and x.bitwidth == 32:

        def impl(x):
            under = x < _EXP_LO
            x = min(max(x, _EXP_LO), _EXP_HI)
            n = _np.floor(x * _LOG2E + _np.float32(0.5))
            r = x - n * _LN2_HI
            r = r - n * _LN2_LO
            r2 = r * r
            p = ((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5
            p = p * r2 + r + _np.float32(1.0)
            scale = (_np.int32(n) + _np.int32(127)) << 23
            out = p * _np.int32(scale).view(_np.float32)
            return _np.float32(0.0) if under else out

        return impl
    return lambda x: _np.exp(x)
