"""The Caps2NE model: forward and backward math, the skip-gram term, the parameters, the
float64 reference.  ProNE's spectral stages are beside it, in spectral/."""
