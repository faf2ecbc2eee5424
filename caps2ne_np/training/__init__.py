"""Training: config, batches, the step, Adam, the epoch loop, checkpoints, the two engines."""
