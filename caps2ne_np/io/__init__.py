"""Files out and in: embedding formats with atomic writes, input-file checks, the model file."""
