"""An update of a trained model to a changed graph (update.py): above training and
inference, which it both uses, beside the estimator and the command line that call it."""
