"""The Caps2NE model: forward and backward math, the skip-gram term, the parameters, the
float64 reference.  ProNE's spectral stages are beside it, in spectral/.

Its kernel modules import Numba, so the package checks ``NUMBA_NUM_THREADS`` first
(kernels/thread_layer.py): a bad value is one InputError, whichever module is imported
first."""

from ..kernels import thread_layer

thread_layer.check_environment()
