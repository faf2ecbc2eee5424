"""Numba kernels' shared machinery: compile options, threads, batched BLAS, random streams.

Importing this package checks ``NUMBA_NUM_THREADS`` (``thread_layer.check_environment``)
before any of its modules imports Numba, which fails on 0 with its own traceback and
ignores 'abc' with a warning (a ValueError later): a bad value is one InputError naming
the variable, for the estimator (``import caps2ne_np.estimator.caps2ne``) as for the command line.
"""

from . import thread_layer

thread_layer.check_environment()
