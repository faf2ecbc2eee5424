"""caps2ne_np: Caps2NE node embeddings (Nguyen et al., CIKM 2020) in NumPy + Numba.

>>> from caps2ne_np import Caps2NE, read_edgelist
>>> model = Caps2NE(n_jobs=2).fit(read_edgelist("edges.txt"))   # or a networkx graph, ...

Importing the package compiles nothing and imports neither Numba nor scikit-learn:
the names below are loaded on first use (PEP 562 ``__getattr__``), so ``caps2ne
--help`` stays instant.  Every Numba kernel is compiled lazily on first call and
cached on disk (``cache=True``).

Threads: Numba's parallel kernels run on its OpenMP threading layer, whose idle
workers spin between kernels; ``thread_layer.py`` starts that layer with
``GOMP_SPINCOUNT=100000`` unless you set ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``
(why: docs/training.md, Threads).  Importing this package leaves ``os.environ`` as it was.
"""

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first access)
_LAZY = {
    "Caps2NE": "caps2ne_np.estimator.caps2ne",
    "read_edgelist": "caps2ne_np.graphs.graph",
    "read_graph": "caps2ne_np.graphs.graph",
    "Graph": "caps2ne_np.graphs.csr",
    "load_dataset": "caps2ne_np.graphs.datasets",
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
