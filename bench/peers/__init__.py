"""Peer implementations used by the benchmarks (optional dependencies, never imported by
the library): ``torch_caps2ne`` is Caps2NE written the usual PyTorch way."""
