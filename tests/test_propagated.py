"""Propagated models serving new nodes (caps2ne_np/inference/propagated.py): ``infer`` and
``Caps2NE.transform`` decide success by the requested nodes only (a node elsewhere in the
graph that cannot be embedded is no reason to fail), and a map that sends a requested
node to zero is an error, not a zero row."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np.errors import InputError, InputWarning
from caps2ne_np.evaluation.inductive import inductive_split
from caps2ne_np.graphs.csr import from_scipy
from test_infer import fit_quiet, planted_partition


def _with_extra_parts(full):
    """``full`` plus an isolated node 'iso' and a component 'a' - 'b' that no model has
    seen, appended after the other nodes (their indices unchanged)."""
    extra = sp.csr_matrix(np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]], dtype=np.float64))
    adj = sp.block_diag([full.to_scipy(), extra]).tocsr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return from_scipy(adj, full.node_ids + ["iso", "a", "b"])


@pytest.fixture(scope="module")
def full():
    return planted_partition()


@pytest.fixture(scope="module")
def model(full):
    """A featureless model trained with --propagate on, without the node 'new'."""
    sub, _ = inductive_split(full, ["new"])
    return fit_quiet(sub, epochs=2, propagate="on")


def test_an_unrequested_isolated_node_or_new_component_does_not_fail_the_request(full, model):
    """'iso' (no edges) and 'a' - 'b' (nodes the featureless model never saw) could not be
    embedded, and failed a request of 'new' and 'n3' with "node 'iso' would get a zero
    embedding": the filter of a requested node reads only its own component, so the rows
    are those of the graph without the extra parts."""
    assert model.propagation_ is not None
    g = _with_extra_parts(full)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # nothing said about unrequested nodes
        E = model.transform(g, nodes=["new", "n3"], random_state=0)
    np.testing.assert_array_equal(E, model.transform(full, nodes=["new", "n3"], random_state=0))
    assert np.all(np.isfinite(E)) and np.all(np.linalg.norm(E, axis=1) > 0.5)


def test_a_requested_node_that_cannot_be_embedded_is_a_clear_error(full, model):
    g = _with_extra_parts(full)
    with pytest.raises(ValueError, match="node 'a' .*would get a zero embedding"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            model.transform(g, nodes=["new", "a"], random_state=0)


def test_infer_refuses_to_write_zero_rows_from_a_degenerate_map(full, model):
    """A map that passes the file's checks but sends a requested node's filtered row to
    zero (here: P zero but on a direction no filter input has) is an error, not a zero
    row written with exit 0."""
    import dataclasses

    from caps2ne_np.inference.propagated import infer_propagated

    sub, _ = inductive_split(full, ["new"])  # training nodes only: every input is an o_v
    P = np.zeros_like(model.propagation_.P)
    P[0, 0] = 1.0
    params = model.params_()
    O = np.asarray(params.O).copy()
    O[:, 0] = 0.0  # every o_v has a zero first coordinate, so O~ P = 0
    with pytest.raises(InputError, match="node 'n3'.* came out zero"):
        infer_propagated(
            dataclasses.replace(params, O=O), model.config_, model.node_ids_, sub, None,
            ["n3"], model.propagation_._replace(P=P),
        )  # fmt: skip
