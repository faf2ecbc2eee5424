"""Training: config, batches, the step, Adam, the epoch loop, checkpoints, and three
engines: local and async (train.py), Ray (ray/)."""
