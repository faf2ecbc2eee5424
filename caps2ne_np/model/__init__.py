"""The Caps2NE model: forward and backward math, skip-gram term, ProNE start, the reference."""
