"""ProNE's spectral stages: the start (prone.py: the factorised proximity and the
Chebyshev filter) and the propagation of trained embeddings (propagation.py)."""
