"""Numba kernels' shared machinery: compile options, threads, batched BLAS, random streams."""
