"""Random walks on a CSR graph and the training pairs cut from them, below training and
inference, which both walk.  One module per concern:

walks.py        the public, checked functions: ``uniform_walks``, ``WalkSource`` (walks by
                id, none stored), ``training_pairs``, ``target_positions``,
                ``batch_walk_ids``, ``epoch_permutation``, ``batches_per_epoch``,
                ``node_counts``
walk_args.py    the kernels' arguments checked and prepared, and ``WalkGraph``, the one
                bundle every walk kernel reads (``walk_graph`` builds it)
walk_steps.py   the compiled walks: one step (first-order, node2vec), walk number w,
                walks by id, inference's contexts grown outwards from a node
pair_kernels.py the compiled (context, target) pairs of a batch of walks
batch_ids.py    the compiled choice of a batch's walk ids and of an epoch's permutation
"""
