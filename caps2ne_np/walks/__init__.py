"""Random walks on a CSR graph: the compiled steps and walks (walk_steps.py) and their
checked arguments (walk_args.py), below training and inference, which both walk."""
