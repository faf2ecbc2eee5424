"""The estimator's inputs, converted and checked: ``n_jobs`` and ``random_state`` as a
run's threads and seed (``threads_of``, ``seed_of``), ``fit``'s ``y`` (``check_y``), the
nodes ``transform`` embeds (``node_indices``), the digest by which ``transform`` knows
the fitted graph (``graph_key``), and the errors raised in the estimator's terms
(``api_errors``: ``--dim`` said as ``dim``).  estimator/caps2ne.py calls these."""

import numbers
import re

import numpy as np

from ..errors import InputError
from ..graphs.csr import Graph


def check_y(y):
    """InputError for features in ``y``'s place (fit's second positional was X): a 2-D
    matrix of values that are not all integers.  Labels, any shape, pass (ignored)."""
    import scipy.sparse as sp

    if y is None:
        return
    values = y.data if sp.issparse(y) else y
    if sp.issparse(y) or np.ndim(values) == 2:
        values = np.asarray(values)
        if values.dtype.kind == "f" and not np.all(np.mod(values, 1) == 0):
            raise InputError(
                "y: fit(graph, y) ignores y (scikit-learn's unsupervised convention) and got "
                "a real-valued matrix; give fixed features by keyword: fit(graph, X=features)"
            )


def graph_key(graph):
    """A BLAKE2b digest of a Graph's nodes, edges and weights: ``transform`` knows the
    graph the model was fitted on by it."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    h.update(np.int64(graph.n_nodes).tobytes())
    for a in (graph.indptr, graph.indices, graph.weights):
        h.update(b"-" if a is None else np.ascontiguousarray(a).tobytes())
    h.update("\n".join(graph.node_ids).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def threads_of(n_jobs):
    """The thread count of ``n_jobs``: None is 1, k >= 1 is k, -1 every core, -2 all but
    one (scikit-learn's convention); 0, a negative below -(cores) and anything but an
    integer are InputErrors naming ``n_jobs``."""
    import os

    if n_jobs is None:
        return 1
    cores = os.cpu_count() or 1
    if not (
        isinstance(n_jobs, numbers.Integral)
        and not isinstance(n_jobs, (bool, np.bool_))
        and (n_jobs >= 1 or -cores <= n_jobs <= -1)
    ):
        raise InputError(
            f"n_jobs: must be an integer >= 1, or -1 (every core) down to -{cores} (one), "
            f"got {n_jobs!r}"
        )
    if n_jobs < 0:
        return cores + 1 + int(n_jobs)
    return int(n_jobs)


def power_of(value):
    """``spectrum_power`` as TrainConfig takes it: 'auto', or a number (0.5, 0.75, 1)
    as its choice's text ('0.5', '0.75', '1'); anything else as given, for the config's
    check to name."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return f"{float(value):g}"
    return value


def seed_of(random_state):
    """The run seed for ``random_state``: an int as it is; a Generator or RandomState
    draws one; None draws one from the operating system's entropy."""
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if (
        isinstance(random_state, numbers.Integral)
        and not isinstance(random_state, bool)
        and random_state >= 0
    ):
        return int(random_state)
    raise InputError(
        f"random_state must be None, an int >= 0 or a numpy Generator, got {random_state!r}"
    )


def node_indices(given, graph, labels, nodes):
    """Graph indices (int64) of ``nodes`` (labels as ``given`` names them; for a Graph:
    id strings or ints as indices), or of every node for None."""
    if nodes is None:
        return np.arange(graph.n_nodes, dtype=np.int64)
    if isinstance(given, Graph):
        return nodes
    if isinstance(nodes, str) or not hasattr(nodes, "__iter__"):
        nodes = [nodes]
    index = {label: i for i, label in enumerate(labels)}
    out = []
    for node in nodes:
        i = index.get(node.item() if isinstance(node, np.generic) else node)
        if i is None and isinstance(node, str):
            i = graph.index_of([node])[0] if node in graph.node_ids else None  # str(label)
        if i is None:
            raise InputError(f"nodes: {node!r} is not a node of the graph given")
        out.append(i)
    return np.asarray(out, dtype=np.int64)


_PARAMETER = {
    "threads": "n_jobs",
    "seed": "random_state",
    "overwrite": "overwrite=True",
    "resume": "resume_from",
}
"""Command-line flags whose estimator parameter is not their name with underscores."""


def _api_message(message):
    """An error message with the command line's flags (``--dim``) as the estimator's
    parameters (``dim``)."""

    def name(match):
        flag = match.group(1).replace("-", "_")
        return _PARAMETER.get(flag, flag)

    return re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", name, message)


class api_errors:
    """Re-raise an InputError of the block with the estimator's parameter names."""

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if isinstance(err, InputError):
            message = _api_message(str(err))
            if message != str(err):
                raise type(err)(message).with_traceback(tb) from None
        return False
