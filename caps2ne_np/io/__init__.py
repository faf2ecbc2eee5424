"""Files out and in: atomic writes, word2vec and .npy/.npz embeddings, input-file checks,
the model file."""
