"""Node classification on learned embeddings, one module per concern: ``single.py``
(the single-label protocol and the tuned C), ``multilabel.py`` (the multi-label
protocol and its epoch selection), ``report.py`` (tables and JSON), ``inductive.py``
(the inductive split), ``written.py`` (a model's written rows chosen by the user's
labels: the ``choose`` command), ``evaluate.py`` (the protocols as the ``evaluate``
command runs them).  Each name is imported from the module that defines it."""
