"""The training step: the compiled step (fused.py, fused_batch.py), the readable
Python step (python_step.py) with its batches (batch.py), Adam (optim.py) and the
candidate samplers (samplers.py)."""
