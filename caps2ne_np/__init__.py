"""caps2ne_np: Caps2NE node embeddings (Nguyen et al., CIKM 2020) in NumPy + Numba.

Importing the package compiles nothing: every Numba kernel is compiled lazily on
first call and cached on disk (``cache=True``).

Threads: Numba's parallel kernels run on its OpenMP threading layer, and the
matrix products on NumPy's BLAS threads.  OpenMP threads spin after every parallel
region by default, which on a small machine steals the cores the BLAS threads need
next (measured on 2 cores: a training step took 2.6x longer on 2 threads than on 1).
So unless the user has set it, ``OMP_WAIT_POLICY`` is set to ``PASSIVE`` here,
before Numba starts its threads.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
