"""Graph and dataset input: the CSR graph, its sources and cache, node files, data sets."""
