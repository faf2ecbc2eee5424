"""The training step: the compiled step (fused.py, fused_batch.py), the readable
Python step (python_step.py) with its batches (batch.py), Adam (optim.py) and the
candidate samplers (samplers.py).

These modules import Numba, so the package checks ``NUMBA_NUM_THREADS`` first
(kernels/thread_layer.py), as model/ does."""

from ...kernels import thread_layer

thread_layer.check_environment()
