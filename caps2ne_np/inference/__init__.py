"""New nodes in a trained model (Algorithm 3): their contexts and mean capsule outputs
(infer.py), the calibration onto the o_v (calibration.py), and the new rows of a model
whose embeddings were propagated (propagated.py)."""
