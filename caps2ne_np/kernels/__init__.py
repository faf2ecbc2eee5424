"""Numba kernels' shared machinery: compile options, threads, batched BLAS, random streams.

Importing this package checks ``NUMBA_NUM_THREADS`` (``_threads.check_environment``)
before any of its modules imports Numba, which fails on 0 with its own traceback and
ignores 'abc' with a warning (a ValueError later): a bad value is one InputError naming
the variable, for the estimator (``import caps2ne_np.estimator``) as for the command line.
"""

from . import _threads

_threads.check_environment()
