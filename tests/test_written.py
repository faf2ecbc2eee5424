"""evaluation/written.py: each candidate is, bit for bit, the rows ``train`` writes with
its options (through the command line, on one trained model); the choice reads the
labels and rows of the nodes it is given and nothing else, and finds a planted winner."""

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputError
from caps2ne_np.evaluation import written
from caps2ne_np.io.modelfile import read_model
from caps2ne_np.io.word2vec import read_word2vec
from caps2ne_np.spectral import prone as spectral
from caps2ne_np.spectral import propagation

TINY = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "2", "--quiet"]


def sbm(blocks=3, size=30, p_in=0.25, p_out=0.02, seed=0):
    """(A, block of each node): a planted-partition graph, symmetric float64 CSR as
    spectral.adjacency builds it."""
    rng = np.random.default_rng(seed)
    block = np.repeat(np.arange(blocks), size)
    p = np.where(block[:, None] == block[None, :], p_in, p_out)
    upper = np.triu(rng.random(p.shape) < p, 1)
    A = sp.csr_matrix((upper | upper.T).astype(np.float64))
    return spectral.adjacency(A.indptr, A.indices, None, A.shape[0]), block


def write_edges(path, A, seed=0):
    """``A``'s edges as 'v<i> v<j>' lines in a shuffled order (the nodes' order is then
    the order of first appearance, not the index order)."""
    upper = sp.triu(A, 1).tocoo()
    order = np.random.default_rng(seed).permutation(upper.nnz)
    path.write_text("".join(f"v{upper.row[e]} v{upper.col[e]}\n" for e in order))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model trained once (--propagate none: the o_v as trained written), its
    folder and edge list."""
    d = tmp_path_factory.mktemp("written")
    edges = write_edges(d / "edges.txt", sbm()[0])
    args = ["--graph", str(edges), "--model-out", str(d / "m.npz"), "--propagate", "none"]
    out = ["--out", str(d / "none.emb"), "--npy", str(d / "none.npy")]
    result = CliRunner().invoke(cli, ["train", *args, *out, *TINY])
    assert result.exit_code == 0, result.output
    return d, edges


def model_candidates(d, edges):
    """The candidates of the model file d/m.npz over the graph as training read it."""
    from caps2ne_np.graphs.graph import read_graph

    model = read_model(d / "m.npz")
    g = read_graph(str(edges))
    assert list(g.node_ids) == model["node_ids"]
    A = spectral.adjacency(g.indptr, g.indices, g.weights, g.n_nodes)
    cfg = model["config"]
    return written.candidates(
        A,
        model["O"],
        cfg["prone_order"],
        cfg["prone_mu"],
        cfg["prone_theta"],
        dtype=np.dtype(cfg["spectral_precision"]),
    )


def test_the_none_candidate_is_what_propagate_none_writes(trained):
    d, edges = trained
    cands = model_candidates(d, edges)
    assert list(cands) == ["none"] + [
        written.label(p, length) for p in (0.5, 0.75, 1.0) for length in (1.0, 2.0, 4.0)
    ]
    assert cands["none"].dtype == np.float32
    np.testing.assert_array_equal(cands["none"], np.load(d / "none.npy"))
    np.testing.assert_array_equal(cands["none"], read_word2vec(d / "none.emb")[1])


@pytest.mark.parametrize("power,length", [(0.5, 1.0), (0.75, 2.0), (1.0, 4.0), (1.0, 2.0)])
def test_each_candidate_is_the_rows_train_writes_with_its_flags(trained, power, length):
    """``train --propagate on --spectrum-power p --row-norm L`` (the same seed: the same
    o_v) writes the candidate 'p=.. len=..' bit for bit, in word2vec text and .npy."""
    d, edges = trained
    key = written.label(power, length)
    out, npy = d / f"{key}.emb".replace(" ", "_"), d / f"{key}.npy".replace(" ", "_")
    flags = written.train_flags(key).split()
    assert flags == ["--propagate", "on", "--spectrum-power", f"{power:g}"] + [
        "--row-norm",
        f"{length:g}",
    ]
    result = CliRunner().invoke(
        cli, ["train", "--graph", str(edges), "--out", str(out), "--npy", str(npy), *flags, *TINY]
    )
    assert result.exit_code == 0, result.output
    cands = model_candidates(d, edges)
    np.testing.assert_array_equal(cands[key], np.load(npy))
    np.testing.assert_array_equal(cands[key], read_word2vec(out)[1])
    others = [k for k in cands if k not in (key, "none")]
    assert all(not np.array_equal(cands[k], cands[key]) for k in others)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_candidates_are_propagate_s_rows_in_either_precision(dtype):
    """What propagation.apply writes (propagate at the run's power, length and
    precision), from one filter and one factorisation; ``keys`` computes only some."""
    A, _ = sbm(size=20)
    O = np.random.default_rng(1).standard_normal((A.shape[0], 6)).astype(np.float32)
    cands = written.candidates(A, O, 10, 0.2, 0.5, dtype=dtype)
    for p in written.WRITTEN_POWERS:
        for length in written.WRITTEN_LENGTHS:
            expected = propagation.propagate(A, O, 10, 0.2, 0.5, length, dtype=dtype, power=p)
            np.testing.assert_array_equal(cands[written.label(p, length)], expected.E)
    some = written.candidates(A, O, 10, 0.2, 0.5, dtype=dtype, keys=["p=1 len=4", "none"])
    assert list(some) == ["none", "p=1 len=4"]
    np.testing.assert_array_equal(some["p=1 len=4"], cands["p=1 len=4"])
    with pytest.raises(ValueError, match="not a candidate"):
        written.candidates(A, O, 10, 0.2, 0.5, keys=["p=2 len=1"])


def test_rows_train_would_not_write_are_left_out(caplog):
    """A complete graph gives every node the same propagated row: train writes the o_v
    (propagation.check_rows), so only 'none' is a candidate."""
    n = 12
    A = sp.csr_matrix(np.ones((n, n)) - np.eye(n))
    O = np.random.default_rng(2).standard_normal((n, 4)).astype(np.float32)
    assert list(written.candidates(A, O, 10, 0.2, 0.5)) == ["none"]
    assert "left out: train would write the o_v" in caplog.text


# --------------------------------------------------------------------------- the choice


def planted(seed=0, size=40):
    """(candidates, blocks, o_v) of noise o_v on a planted-partition graph."""
    A, block = sbm(size=size, p_in=0.3, p_out=0.01, seed=seed)
    O = np.random.default_rng(seed + 10).standard_normal((A.shape[0], 8)).astype(np.float32)
    return written.candidates(A, O, 10, 0.2, 0.5), block, O


def test_labels_and_rows_outside_the_nodes_never_move_the_choice():
    """Relabelling every node outside ``nodes`` (new classes, unlabelled ones) and
    replacing their rows in every candidate leaves the choice and every score as they
    were."""
    cands, block, _ = planted()
    n = block.size
    rng = np.random.default_rng(3)
    nodes = np.sort(rng.choice(n, n // 2, replace=False))
    outside = np.setdiff1d(np.arange(n), nodes)
    base = written.choose(cands, block, nodes)
    labels = block.copy()
    labels[outside] = rng.integers(-1, 9, size=outside.size)
    moved = {k: v.copy() for k, v in cands.items()}
    for rows in moved.values():
        rows[outside] = rng.standard_normal((outside.size, rows.shape[1]))
    again = written.choose(moved, labels, nodes)
    assert again == base
    assert written.choose(moved, labels, np.isin(np.arange(n), nodes)) == base  # a mask
    assert again.nodes == nodes.size and again.folds == 3


def test_multilabel_labels_outside_the_nodes_never_move_the_choice():
    cands, block, _ = planted()
    n = block.size
    rng = np.random.default_rng(4)
    Y = np.zeros((n, 5), dtype=np.int64)
    Y[np.arange(n), block] = 1
    Y[rng.random(n) < 0.3, 3] = 1
    nodes = np.sort(rng.choice(n, n // 2, replace=False))
    outside = np.setdiff1d(np.arange(n), nodes)
    base = written.choose(cands, sp.csr_matrix(Y), nodes)
    other = np.zeros((n, 8), dtype=np.int64)  # three labels only outside the nodes
    other[:, :5] = Y
    other[outside] = rng.random((outside.size, 8)) < 0.4
    again = written.choose(cands, other, nodes)
    assert again == base
    assert base.best in cands and 0 <= min(base.scores.values()) <= 100


def test_rows_that_carry_the_labels_win_and_propagated_rows_win_on_communities():
    """Labels read off the o_v themselves: the o_v as trained ('none') win by far.
    Labels of the graph's communities with noise o_v: a propagated candidate wins."""
    cands, block, O = planted()
    nodes = np.arange(block.size)
    own = np.argmax(O[:, :3], axis=1)
    r = written.choose(cands, own, nodes)
    assert r.best == "none" and r.margin > 10
    r = written.choose(cands, block, nodes)
    assert r.best != "none" and r.scores[r.best] > r.scores["none"] + 10
    assert r.margin == r.scores[r.best] - max(v for k, v in r.scores.items() if k != r.best)


def test_the_choice_is_seeded_and_c_may_be_tuned():
    cands, block, _ = planted(size=20)
    few = {k: cands[k] for k in ("none", "p=0.5 len=2")}
    nodes = np.arange(block.size)
    assert written.choose(few, block, nodes, seed=5) == written.choose(few, block, nodes, seed=5)
    tuned = written.choose(few, block, nodes, C="tuned", folds=2)
    assert tuned.best in few and tuned.folds == 2


def test_a_tie_goes_to_the_preferred_then_the_fixed_order():
    """Equal scores: ``prefer`` first (by default the defaults' own choices), then
    'none', then by p and length; the margin is then 0."""
    _, block, O = planted(size=20)
    same = {k: O.copy() for k in ("p=0.75 len=1", "p=1 len=2", "none", "p=0.5 len=4")}
    nodes = np.arange(block.size)
    r = written.choose(same, block, nodes)
    assert r.best == "p=1 len=2" and r.margin == 0.0
    assert written.choose(same, block, nodes, prefer="p=0.75 len=1").best == "p=0.75 len=1"
    assert written.choose(same, block, nodes, prefer=()).best == "none"
    del same["none"]
    assert written.choose(same, block, nodes, prefer=()).best == "p=0.5 len=4"


def test_too_few_labelled_nodes_of_a_class_for_the_folds_is_one_clear_error():
    cands, block, _ = planted(size=20)
    nodes = np.r_[np.arange(0, 20), np.arange(20, 40), [40, 41]]  # class 2: two nodes
    with pytest.raises(InputError, match="class '2' has 2 labelled node"):
        written.choose(cands, block, nodes, folds=3)
    assert written.choose(cands, block, nodes, folds=2).folds == 2
    with pytest.raises(InputError, match="1 class"):
        written.choose(cands, block, np.arange(20))
    with pytest.raises(ValueError, match="folds"):
        written.choose(cands, block, np.arange(60), folds=1)
