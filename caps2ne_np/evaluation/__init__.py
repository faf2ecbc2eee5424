"""Node classification on learned embeddings, one module per concern: ``single.py``
(the single-label protocol and the tuned C), ``multilabel.py`` (the multi-label
protocol and its epoch selection), ``report.py`` (tables and JSON), ``inductive.py``
(the inductive split), ``written.py`` (a model's written rows chosen by the user's
labels: the ``choose`` command).  Import the protocols from ``caps2ne_np.evaluation.evaluate``,
which also runs them as the ``evaluate`` command does; ``written`` from its module."""
