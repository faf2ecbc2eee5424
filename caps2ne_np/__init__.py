"""caps2ne_np: Caps2NE node embeddings (Nguyen et al., CIKM 2020) in NumPy + Numba.

>>> from caps2ne_np import Caps2NE, read_edgelist
>>> model = Caps2NE(n_jobs=2).fit(read_edgelist("edges.txt"))   # or a networkx graph, ...

Importing the package compiles nothing and imports neither Numba nor scikit-learn:
the names below are loaded on first use (PEP 562 ``__getattr__``), so ``caps2ne
--help`` stays instant.  Every Numba kernel is compiled lazily on first call and
cached on disk (``cache=True``).

Threads: Numba's parallel kernels run on its OpenMP threading layer; matrix
products are single-threaded BLAS calls made from inside those threads
(``blas.py``), so there is one pool of threads.  How long an idle OpenMP worker
spins before it sleeps decides a step's speed, because a step is ~20 short kernels:

* libgomp's default (spin ~300,000 iterations) is fastest on an idle machine and a
  disaster on a busy one: with another process on one of 2 cores, a Cora epoch ran
  at 2.4k pairs/s instead of 51k (the spinning worker holds the core the main
  thread needs);
* ``OMP_WAIT_POLICY=PASSIVE`` (sleep at once) is safe under load but pays a wake-up
  per kernel: 60-64k pairs/s on the idle machine;
* ``GOMP_SPINCOUNT=1000`` (a few microseconds) keeps most of the idle speed
  (73-84k pairs/s) and loses little under load (43-46k vs 45-52k passive).

So unless the user has set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``, the package
sets ``GOMP_SPINCOUNT=1000`` here, before any OpenMP runtime starts (measured:
``train.fit`` on Cora, sparse features, 2 threads, 2 alternating runs per setting).
"""

import os

if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "1000")

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first access)
_LAZY = {
    "Caps2NE": "caps2ne_np.model",
    "read_edgelist": "caps2ne_np.graph",
    "read_graph": "caps2ne_np.graph",
    "Graph": "caps2ne_np.graph",
    "load_dataset": "caps2ne_np.datasets",
    "InputError": "caps2ne_np.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'caps2ne_np' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
