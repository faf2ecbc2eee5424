"""The scikit-learn estimator: ``Caps2NE`` (caps2ne.py), its inputs converted and
checked (inputs.py) and its model file (save_load.py)."""
