"""caps2ne_np: Caps2NE node embeddings (Nguyen et al., CIKM 2020) in NumPy + Numba.

Importing the package compiles nothing: every Numba kernel is compiled lazily on
first call and cached on disk (``cache=True``).
"""

__version__ = "0.1.0"
