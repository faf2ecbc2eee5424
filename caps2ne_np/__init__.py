"""caps2ne_np: Caps2NE node embeddings (Nguyen et al., CIKM 2020) in NumPy + Numba.

Importing the package compiles nothing: every Numba kernel is compiled lazily on
first call and cached on disk (``cache=True``).

Threads: Numba's parallel kernels run on its OpenMP threading layer; matrix
products are single-threaded BLAS calls made from inside those threads
(``blas.py``), so there is one pool of threads.  OpenMP's own default wait policy
is kept: a worker spins briefly after a parallel region (libgomp's bounded
GOMP_SPINCOUNT) before it sleeps, so the next kernel of the same step finds it
awake.  ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once), which this package set before
BLAS ran in Numba's threads, now costs a wake-up per kernel: measured on 2 cores,
Cora config (a) of bench/perf.py, 3 alternating runs each, 3.7-4.9 ms per step
passive against 2.7-3.9 ms with the default.  Set the variable yourself to choose.
"""

__version__ = "0.1.0"
