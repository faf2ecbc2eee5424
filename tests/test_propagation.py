"""Spectral propagation of the trained o_v (caps2ne_np/spectral/propagation.py):
the Chebyshev sum against the matrix function it approximates (a dense
eigendecomposition), within the truncation bound of its order; the SVD step against a
dense reference; new nodes through the same filter and map; the nodevectors package
when it is installed; the ``auto`` rule on two small graphs of opposite kinds; the
option in a run, the model file and ``--preset paper``."""

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner
from scipy.special import iv

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputWarning
from caps2ne_np.io.word2vec import read_word2vec
from caps2ne_np.spectral import prone as spectral
from caps2ne_np.spectral import propagation
from caps2ne_np.training.options.config import TrainConfig

# --------------------------------------------------------------------------- dense reference


def naive_laplacian(A):
    """L = I - D~^-1 (I + A), D~ the row sums of I + A, dense float64."""
    A1 = np.eye(A.shape[0]) + A
    return np.eye(A.shape[0]) - A1 / A1.sum(axis=1, keepdims=True)


def naive_band_pass(A, mu, theta):
    """g(L) = exp(-theta ((L - mu I)^2 / 2 - I)) by eigendecomposition: L = D~^-1/2 L_s D~^1/2
    with L_s = I - D~^-1/2 (I + A) D~^-1/2 symmetric, so g(L) = D~^-1/2 V g(w) V^T D~^1/2."""
    A1 = np.eye(A.shape[0]) + A
    d = A1.sum(axis=1)
    Ls = np.eye(A.shape[0]) - A1 / np.sqrt(np.outer(d, d))
    w, V = np.linalg.eigh(Ls)
    g = np.exp(-theta * ((w - mu) ** 2 / 2 - 1))
    return (V * g) @ V.T * np.sqrt(d)[None, :] / np.sqrt(d)[:, None]


def naive_filtered(A, O, mu, theta):
    """(I + A)(O - g(L) O): the exact signal the Chebyshev sum approximates."""
    return (np.eye(A.shape[0]) + A) @ (O - naive_band_pass(A, mu, theta) @ O)


def tail_bound(A, O, order, theta):
    """|error|_F <= |I + A|_2 sqrt(max d~ / min d~) |O|_F sum_{i >= order} 2 I_i(theta):
    the Chebyshev truncation of exp(-theta x) on [-1, 1], moved to L's basis."""
    A1 = np.eye(A.shape[0]) + A
    d = A1.sum(axis=1)
    tail = 2 * sum(iv(i, theta) for i in range(order, order + 60))
    return np.linalg.norm(A1, 2) * np.sqrt(d.max() / d.min()) * np.linalg.norm(O) * tail


@pytest.fixture
def small_graph():
    """Two 6-node blocks, dense inside, one bridge, weighted (N = 12)."""
    rng = np.random.default_rng(3)
    A = np.zeros((12, 12))
    for block in (range(0, 6), range(6, 12)):
        for i in block:
            for j in block:
                if i < j and rng.random() < 0.7:
                    A[i, j] = A[j, i] = rng.uniform(0.5, 2.0)
    A[0, 6] = A[6, 0] = 1.0
    return A


@pytest.mark.parametrize("order", [2, 3, 5, 10])
@pytest.mark.parametrize("mu,theta", [(0.2, 0.5), (0.5, 2.0)])
def test_chebyshev_sum_equals_the_matrix_function_within_its_truncation_bound(
    small_graph, order, mu, theta
):
    A = small_graph
    O = np.random.default_rng(order).standard_normal((12, 4))
    got = propagation.filtered(sp.csr_matrix(A), O, order, mu, theta)
    err = np.linalg.norm(got - naive_filtered(A, O, mu, theta))
    assert err <= tail_bound(A, O, order, theta) + 1e-10


def test_the_bound_is_tight_enough_to_fail_a_short_expansion(small_graph):
    """Two terms are measurably worse than ten at theta 2 (the test above can fail)."""
    A, theta = small_graph, 2.0
    O = np.random.default_rng(0).standard_normal((12, 4))
    ref = naive_filtered(A, O, 0.5, theta)
    err2 = np.linalg.norm(propagation.filtered(sp.csr_matrix(A), O, 2, 0.5, theta) - ref)
    err10 = np.linalg.norm(propagation.filtered(sp.csr_matrix(A), O, 10, 0.5, theta) - ref)
    assert err2 > 1e3 * err10
    assert err2 > tail_bound(A, O, 10, theta)
    np.testing.assert_allclose(
        propagation.filtered(sp.csr_matrix(A), O, 20, 0.5, theta), ref, rtol=1e-10, atol=1e-10
    )


def naive_propagate(A, O, mu, theta):
    """rownorm(U S^1/2) of the exact thin SVD of the exact filtered signal, with each
    column of U signed so that its largest entry is positive."""
    U, S, _ = np.linalg.svd(naive_filtered(A, O, mu, theta), full_matrices=False)
    for j in range(U.shape[1]):
        if U[np.argmax(np.abs(U[:, j])), j] < 0:
            U[:, j] = -U[:, j]
    E = U * np.sqrt(S)
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def test_propagate_matches_the_dense_reference(small_graph):
    O = np.random.default_rng(1).standard_normal((12, 4)).astype(np.float32)
    p = propagation.propagate(sp.csr_matrix(small_graph), O, 10, 0.2, 0.5)
    assert p.E.dtype == np.float32 and p.E.shape == (12, 4)
    np.testing.assert_allclose(p.E, naive_propagate(small_graph, O, 0.2, 0.5), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(p.E, axis=1), 1.0, rtol=1e-5)
    # the stored map: O~ P = U S^1/2, so rownorm(O~ P) is E
    Ot = propagation.filtered(sp.csr_matrix(small_graph), O, 10, 0.2, 0.5)
    np.testing.assert_allclose(spectral.rownorm(Ot @ p.P), p.E, atol=1e-6)


def test_new_nodes_go_through_the_same_filter_and_map(small_graph):
    """embed_new on the training graph with the training o_v gives the transductive rows
    back; a changed row of a new node moves only through the filter."""
    A = sp.csr_matrix(small_graph)
    O = np.random.default_rng(2).standard_normal((12, 4))
    p = propagation.propagate(A, O)
    rows = np.array([3, 7, 11])
    np.testing.assert_allclose(propagation.embed_new(A, O, rows, p.P), p.E[rows], atol=1e-6)
    O2 = O.copy()
    O2[11] += 1.0
    moved = propagation.embed_new(A, O2, rows, p.P)
    assert np.abs(moved[2] - p.E[11]).max() > 1e-3


def test_the_written_scale_multiplies_unit_rows_and_new_nodes_get_it_too(small_graph):
    """--row-norm r: every written row has length r, the directions stay ProNE's, and
    embed_new (infer) writes the new nodes' rows at the same length."""
    A = sp.csr_matrix(small_graph)
    O = np.random.default_rng(3).standard_normal((12, 4))
    unit = propagation.propagate(A, O)
    scaled = propagation.propagate(A, O, scale=4.0)
    np.testing.assert_allclose(np.linalg.norm(scaled.E, axis=1), 4.0, rtol=1e-5)
    np.testing.assert_allclose(scaled.E, 4.0 * unit.E, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(scaled.P, unit.P)  # the map does not carry the scale
    rows = np.array([0, 5])
    new = propagation.embed_new(A, O, rows, scaled.P, scale=4.0)
    np.testing.assert_allclose(new, scaled.E[rows], atol=1e-5)
    assert propagation.written(np.zeros((2, 3)), 4.0).tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_written_rows_by_blocks_are_the_bits_of_the_whole_product(scale):
    """The propagated rows formed a block of rows at a time (no (N, k) float64 product
    beside O~) equal, bit for bit, ``written`` of the whole product O~ P, with O~ in the
    Fortran order ``filtered`` gives it and blocks that do not divide N."""
    rng = np.random.default_rng(4)
    Ot = np.asfortranarray(rng.standard_normal((1000, 24)))
    Ot[7] = 0.0  # a zero row stays zero
    P = rng.standard_normal((24, 24))
    whole = propagation.written(Ot @ P, scale)
    for rows in (64, 333, 4096):
        np.testing.assert_array_equal(propagation.written_rows(Ot, P, scale, rows), whole)


def test_row_norm_is_validated_and_logged():
    from caps2ne_np import defaults

    option = defaults.OPTIONS["row_norm"]
    assert option.low == defaults.ROW_NORM_MIN > 0 and defaults.DEFAULTS["row_norm"] > 0


@pytest.mark.parametrize("scale", [1e-6, 1e-30, 1.0, 2.0, 1000.0])
def test_short_written_rows_are_not_called_identical(scale):
    # the identical-rows check compares the rows as unit rows: rows of length 1e-6 that
    # differ must not round to the same 6 decimals (which wrote the o_v unpropagated)
    rng = np.random.default_rng(0)
    O = rng.standard_normal((300, 8))
    E = propagation.written(rng.standard_normal((300, 8)), scale)
    assert propagation.check_rows(E, O, scale) == ("", "")
    E[1] = E[0]  # a true pair of twins is still named (both nodes)
    assert "2 of 300 rows are identical" in propagation.check_rows(E, O, scale)[1]


@pytest.mark.parametrize("value", ["1e-45", "1e-31", "0"])
def test_row_norm_below_float32s_range_is_refused(value, tmp_path):
    # rows shorter than ROW_NORM_MIN underflow float32 to zero rows, which were then
    # blamed on --prone-theta: refused as a usage error before any work
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    graph = tmp_path / "g.txt"
    graph.write_text("a b\nb c\n")
    result = CliRunner().invoke(cli, ["train", "--graph", str(graph), "--row-norm", value])
    assert result.exit_code == 2 and "--row-norm" in result.output
    assert "1e-30<=x<=1000" in result.output


def test_propagation_equals_nodevectors_chebyshev_gaussian(small_graph):
    npr = pytest.importorskip("nodevectors.prone")
    O = np.random.default_rng(4).standard_normal((12, 4))
    ref = npr.ProNE.chebyshev_gaussian(
        sp.csr_matrix(small_graph), O.copy(), n_components=4, step=10, mu=0.2, theta=0.5
    )
    got = propagation.propagate(sp.csr_matrix(small_graph), O, 10, 0.2, 0.5).E
    signs = np.sign(np.sum(got * ref, axis=0))
    np.testing.assert_allclose(got, ref * signs, atol=1e-5)


# --------------------------------------------------------------------------- the measures


def test_auc_is_the_mann_whitney_probability():
    assert propagation.auc([3, 4], [1, 2]) == 1.0
    assert propagation.auc([1, 2], [3, 4]) == 0.0
    assert propagation.auc([1, 3], [2, 2]) == 0.5
    rng = np.random.default_rng(0)
    pos, neg = rng.standard_normal(30), rng.standard_normal(20)
    brute = np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg])
    assert propagation.auc(pos, neg) == pytest.approx(brute)


def test_holdout_keeps_every_endpoint_connected_and_draws_non_edges(small_graph):
    A = sp.csr_matrix(small_graph)
    held = propagation.holdout(A, seed=0, fraction=0.3)
    pos, neg, rest = held["pos"], held["neg"], held["A_rest"]
    assert len(pos) == len(neg) >= 1
    assert all(A[u, v] > 0 and rest[u, v] == 0 and rest[v, u] == 0 for u, v in pos)
    assert all(A[u, v] == 0 and u != v for u, v in neg)
    assert np.all(np.diff(rest.indptr) > 0)
    assert rest.nnz == A.nnz - 2 * len(pos)


# --------------------------------------------------------------------------- the option


def planted_blocks(n=60, p_in=0.3, p_out=0.02, seed=0):
    """Two planted communities of n / 2 nodes (symmetric 0/1 adjacency, CSR)."""
    rng = np.random.default_rng(seed)
    half = n // 2
    same = np.equal.outer(np.arange(n) < half, np.arange(n) < half)
    A = np.triu(rng.random((n, n)) < np.where(same, p_in, p_out), 1)
    return sp.csr_matrix((A | A.T).astype(np.float64))


TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, epochs=1, batch_size=8)


def test_paper_preset_never_propagates_and_explicit_epochs_never_stop():
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve

    paper, _ = resolve(TrainConfig(preset="paper"), 1000, 10000)
    assert (paper.propagate, paper.stop) == ("none", "none")
    fixed, _ = resolve(TrainConfig(), 1000, 10000, fixed_features=True)  # auto -> paper
    assert (fixed.propagate, fixed.stop) == ("none", "none")
    converge, _ = resolve(TrainConfig(), 1000, 10000)
    assert (converge.propagate, converge.stop) == ("on", "auto")
    exact, _ = resolve(TrainConfig(epochs=7), 1000, 10000)
    assert exact.stop == "none" and exact.epochs == 7


@pytest.fixture(scope="module")
def propagated_model():
    from caps2ne_np.estimator.caps2ne import Caps2NE

    return Caps2NE(**TINY, propagate="on").fit(planted_blocks())


def test_the_written_embeddings_are_the_propagated_o_v(propagated_model):
    model, A = propagated_model, planted_blocks()
    E = model.get_embedding()
    from caps2ne_np.defaults import ROW_NORM, SPECTRUM_POWER

    A_full = spectral.adjacency(A.indptr, A.indices, None, 60)
    p = float(SPECTRUM_POWER)
    expected = propagation.propagate(A_full, model.O_, scale=ROW_NORM, dtype=np.float32, power=p)
    np.testing.assert_array_equal(E, expected.E)
    assert not np.allclose(E, model.O_)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), ROW_NORM, rtol=1e-5)
    np.testing.assert_array_equal(np.stack(list(model.embedding_dict().values())), E)


def test_model_file_keeps_the_propagation_and_infer_lands_in_its_space(propagated_model, tmp_path):
    """Saved and loaded, the model gives the same written embeddings; a training node sent
    through infer on the training graph gets its written row back (its filter input is its
    o_v, the map the run's); a node new to the model lands near the rows of its block."""
    from caps2ne_np.estimator.caps2ne import Caps2NE
    from caps2ne_np.evaluation.inductive import inductive_split

    model, A = propagated_model, planted_blocks()
    path = tmp_path / "m.npz"
    model.save(path)
    loaded = Caps2NE.load(path)
    np.testing.assert_array_equal(loaded.get_embedding(), model.get_embedding())
    np.testing.assert_allclose(loaded.propagation_.P, model.propagation_.P)
    E = loaded.transform(A, nodes=[3, 40], random_state=0)
    np.testing.assert_allclose(E, model.get_embedding()[[3, 40]], atol=1e-5)
    # the e-path (Algorithm 3's mean, no o_v involved) is the same as for any model
    mean = loaded.transform(A, nodes=[3], aggregate="mean")
    assert not np.allclose(np.linalg.norm(mean, axis=1), 1.0)

    sub, kept = inductive_split(A, [5, 45])
    small = Caps2NE(**dict(TINY, epochs=3), propagate="on").fit(sub)
    small.calibrate(sub)
    E_new = small.transform(A, nodes=[5, 45], random_state=0)
    W = small.get_embedding()
    block = kept < 30
    for row, own in ((E_new[0], block), (E_new[1], ~block)):
        assert (W[own] @ row).mean() > (W[~own] @ row).mean()


def test_cli_writes_propagated_embeddings_and_infer_uses_them(tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    A = planted_blocks()
    rows, cols = sp.triu(A, 1).nonzero()
    graph = tmp_path / "g.txt"
    graph.write_text("".join(f"n{u} n{v}\n" for u, v in zip(rows, cols)))
    tiny = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "1"]
    model, npy = tmp_path / "m.npz", tmp_path / "e.npy"
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", str(graph), "--out", str(tmp_path / "e.txt"), "--npy", str(npy),
         "--model-out", str(model), "--propagate", "on", "--threads", "1", *tiny],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "written embeddings: the o_v propagated" in result.output
    E = np.load(npy)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 2.0, rtol=1e-5)  # --row-norm 2
    (tmp_path / "nodes.txt").write_text("n0\nn1\n")
    result = CliRunner().invoke(
        cli,
        ["infer", "--model", str(model), "--graph", str(graph), "--nodes",
         str(tmp_path / "nodes.txt"), "--out", str(tmp_path / "i.txt")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    from caps2ne_np.io.word2vec import read_word2vec

    ids, got = read_word2vec(tmp_path / "i.txt")
    written = dict(zip(*read_word2vec(tmp_path / "e.txt")))
    assert ids == ["n0", "n1"]
    np.testing.assert_allclose(got, np.stack([written["n0"], written["n1"]]), atol=1e-5)


# --------------------------------------------------------------------------- the auto rule


def core_periphery(n_core=6, n_leaves=54, seed=0):
    """Every core node linked to every other node; leaves linked only to the core."""
    n = n_core + n_leaves
    A = np.zeros((n, n))
    A[:n_core, :] = A[:, :n_core] = 1.0
    np.fill_diagonal(A, 0)
    return sp.csr_matrix(A)


def test_auto_propagates_block_structure_and_keeps_norms_that_carry_the_links():
    """Two graphs of opposite kinds.  Planted communities whose o_v point by block: the
    filter keeps the block directions and the held-out edges stay predictable: on.
    A core-periphery graph whose o_v are one number each, the node's degree (rank 1):
    every edge has a core end, so dot products rank edges above leaf-leaf non-edges
    (AUC 1), but the unit-length propagated rows are all +-1 (AUC 0.5): off."""
    rng = np.random.default_rng(0)
    blocks = planted_blocks(n=80, p_in=0.3, p_out=0.02)
    O = np.repeat(np.eye(2), 40, axis=0) + 0.3 * rng.standard_normal((80, 2))
    on, why = propagation.decide(blocks, O, seed=0)
    assert on, why
    cp = core_periphery()
    degrees = np.asarray(cp.sum(axis=1))
    on, why = propagation.decide(cp, degrees, seed=0)
    assert not on, why
    assert "AUC 0.5000 propagated against 1.0000" in why


def test_a_graph_with_fewer_nodes_than_dimensions_keeps_k_columns():
    A = sp.csr_matrix(np.ones((5, 5)) - np.eye(5))
    O = np.random.default_rng(0).standard_normal((5, 8))
    p = propagation.propagate(A, O)
    assert p.E.shape == (5, 8) and p.P.shape == (8, 8)
    assert np.all(p.E[:, 5:] == 0)
    np.testing.assert_allclose(np.linalg.norm(p.E, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_row_groups_are_np_unique_without_its_copies(seed):
    """row_groups (hashed, a few rows at a time) groups the rows as np.unique(axis=0)
    does: equal values, -0.0 as 0.0, after rounding when asked."""
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 80)), int(rng.integers(1, 4))
    X = rng.integers(-2, 3, size=(n, k)) * 0.5 + rng.choice([0.0, 1e-9, -1e-9], size=(n, k))
    X[X == 0] = rng.choice([0.0, -0.0], size=int((X == 0).sum()))
    for decimals in (None, 6):
        got = propagation.row_groups(X.astype(np.float32), decimals, rows=7)
        ref = (
            np.round(X.astype(np.float32).astype(np.float64), 6)
            if decimals
            else X.astype(np.float32)
        )
        want = np.unique(ref, axis=0, return_inverse=True)[1].ravel()
        assert (np.equal.outer(got, got) == np.equal.outer(want, want)).all()


def test_row_groups_hash_float32_rows_without_collisions(monkeypatch):
    """float32 rows (float64 bits ending in 29 zeros) hash apart: 200,000 random rows
    never reach the np.unique fallback (which holds about 5 copies of X)."""

    def refuse(*args, **kwargs):
        raise AssertionError("np.unique(axis=0) fallback: two different rows shared a hash")

    X = np.random.default_rng(5).standard_normal((200_000, 16)).astype(np.float32)
    real_unique = np.unique
    monkeypatch.setattr(
        propagation.np,
        "unique",
        lambda a, *args, axis=None, **kw: (
            refuse() if axis is not None else real_unique(a, *args, **kw)
        ),
    )
    ids = propagation.row_groups(X)
    assert len(real_unique(ids)) == X.shape[0]


# --------------------------------------------------------------------------- the written spectrum


def naive_written(A, O, mu, theta, power):
    """rownorm(U S^power) of the exact thin SVD of the exact filtered signal, U signed as
    ``naive_propagate``'s."""
    U, S, _ = np.linalg.svd(naive_filtered(A, O, mu, theta), full_matrices=False)
    for j in range(U.shape[1]):
        if U[np.argmax(np.abs(U[:, j])), j] < 0:
            U[:, j] = -U[:, j]
    E = U * S**power
    return E / np.linalg.norm(E, axis=1, keepdims=True)


@pytest.mark.parametrize("power", [0.5, 0.75, 1.0])
@pytest.mark.parametrize("dtype,atol", [(np.float64, 1e-6), (np.float32, 2e-4)])
def test_the_written_rows_are_rownorm_of_u_s_to_the_power(small_graph, power, dtype, atol):
    """--spectrum-power p: E = rownorm(U S^p), in float64 and in float32 (the SVD from the
    Gram matrix); the stored map P gives the same rows from O~ (what infer applies), and
    at p = 1 the rows are those of rownorm(O~) turned by V (the same inner products)."""
    A = sp.csr_matrix(small_graph)
    O = np.random.default_rng(5).standard_normal((12, 4))
    p = propagation.propagate(A, O, 10, 0.2, 0.5, dtype=dtype, power=power)
    np.testing.assert_allclose(p.E, naive_written(small_graph, O, 0.2, 0.5, power), atol=atol)
    Ot = propagation.filtered(A, O, 10, 0.2, 0.5, dtype=dtype)
    np.testing.assert_allclose(spectral.rownorm(np.float64(Ot) @ p.P), p.E, atol=atol)
    if power == 1.0:
        R = spectral.rownorm(naive_filtered(small_graph, O, 0.2, 0.5))
        np.testing.assert_allclose(p.E @ p.E.T, R @ R.T, atol=atol)
    rows = np.array([1, 8])
    np.testing.assert_allclose(
        propagation.embed_new(A, O, rows, p.P, dtype=dtype), p.E[rows], atol=atol
    )


def test_power_one_half_keeps_the_bits_of_prone_s_map():
    """The default argument is ProNE's map P = V S^-1/2, formed as before the power was an
    argument (a division by sqrt(S)), bit for bit, in both precisions."""
    rng = np.random.default_rng(6)
    Ot = np.asfortranarray(rng.standard_normal((300, 16)))
    S, Vt, signs = propagation._tall_svd(Ot)
    before = (Vt.T * signs[None, :]) * (1.0 / np.sqrt(S))[None, :]
    np.testing.assert_array_equal(propagation.projection(Ot), before)
    np.testing.assert_array_equal(propagation.projection(Ot, 0.5), before)
    Y = Ot.astype(np.float32)
    S32, V = spectral.gram_svd(Y)
    _, P = spectral.gram_projection(Y)
    unsigned = V / np.sqrt(S32)[None, :]
    np.testing.assert_array_equal(np.abs(P), np.abs(unsigned))


def test_the_auto_power_reads_the_structure_against_its_threshold():
    from caps2ne_np.training.options.config import TrainConfig

    assert 0.5 < propagation.POWER_STRUCTURE < 1.0
    auto = TrainConfig(spectrum_power="auto")
    assert propagation.written_power(auto, 0.9)[0] == 1.0
    assert propagation.written_power(auto, propagation.POWER_STRUCTURE)[0] == 1.0
    assert propagation.written_power(auto, 0.6)[0] == 0.5
    power, why = propagation.written_power(auto, None)
    assert power == 0.5 and "not measured" in why
    for chosen, power in (("0.5", 0.5), ("1", 1.0)):
        cfg = TrainConfig(spectrum_power=chosen)
        assert propagation.written_power(cfg, 0.9)[0] == power
        assert propagation.written_power(cfg, 0.1)[0] == power
    assert propagation.written_power(object(), 0.9)[0] == 0.5  # a config from before it


def test_the_structure_is_measured_when_only_the_written_spectrum_reads_it(caplog):
    """--stop none with propagation and --spectrum-power auto still measures the graph
    (and says what for); with neither rule reading it, nothing is measured."""
    import logging

    from caps2ne_np.training import budget
    from caps2ne_np.training.loop import csr_graph
    from caps2ne_np.training.options.config import TrainConfig

    A = planted_blocks(n=200, p_in=0.2, p_out=0.01)
    graph = csr_graph(A.indptr, A.indices.astype(np.int32), None)
    with caplog.at_level(logging.INFO):
        value = budget.graph_structure(
            TrainConfig(stop="none", propagate="on", spectrum_power="auto"), graph
        )
    assert value is not None and 0.5 < value <= 1.0
    assert "written spectrum (--spectrum-power auto)" in caplog.text
    assert value == budget.graph_structure(TrainConfig(stop="auto", propagate="none"), graph)
    for cfg in (
        TrainConfig(stop="none", propagate="none"),
        TrainConfig(stop="none", propagate="on", spectrum_power="0.5"),
        TrainConfig(stop="none", propagate="on"),  # the default p reads no measure
    ):
        assert budget.graph_structure(cfg, graph) is None


@pytest.mark.parametrize(
    "given,kind,power",
    [(1, "random", 1.0), (0.5, "strong", 0.5), ("1", "random", 1.0)]
    + [("auto", "strong", 1.0), ("auto", "random", 0.5)],
)
def test_the_estimator_writes_the_spectrum_it_is_given(given, kind, power):
    """Caps2NE(spectrum_power=...) takes the choice's text or its number; the written rows
    are ``propagate`` of the o_v at that power.  'auto' measures the graph: 1 on six
    planted communities (structure 0.84-0.91 over seeds 0-2), 0.5 on a random graph
    (0.45-0.56)."""
    from caps2ne_np.defaults import ROW_NORM
    from caps2ne_np.estimator.caps2ne import Caps2NE
    from test_budget import RANDOM, STRONG, planted

    clear = dict(STRONG, p_in=0.4, p_out=0.005)
    A = planted(**(clear if kind == "strong" else RANDOM), seed=0)
    model = Caps2NE(**TINY, propagate="on", spectrum_power=given, random_state=0).fit(A)
    A_full = spectral.adjacency(A.indptr, A.indices, None, A.shape[0])
    expected = propagation.propagate(
        A_full, model.O_, scale=ROW_NORM, dtype=np.float32, power=power
    )
    np.testing.assert_array_equal(model.get_embedding(), expected.E)
    other = propagation.propagate(
        A_full, model.O_, scale=ROW_NORM, dtype=np.float32, power=1.5 - power
    )
    assert np.abs(model.get_embedding() - other.E).max() > 1e-3  # the power shows


def test_a_spectrum_power_outside_its_choices_is_refused():
    from caps2ne_np.errors import InputError
    from caps2ne_np.estimator.caps2ne import Caps2NE

    with pytest.raises(InputError, match="spectrum_power"):
        Caps2NE(**TINY, propagate="on", spectrum_power=2).fit(planted_blocks())


def test_a_spectrum_power_of_three_quarters_is_a_choice_train_and_model_files_take():
    """--spectrum-power 0.75 (between ProNE's 0.5 and 1; what ``caps2ne choose`` may
    pick) passes the config's check, a model file's check, and the estimator's number."""
    from caps2ne_np.estimator.inputs import power_of
    from caps2ne_np.io.modelcheck import check_option
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve
    from caps2ne_np.training.options.validation import validate

    cfg = resolve(TrainConfig(spectrum_power="0.75", propagate="on"), 100, 400)[0]
    validate(cfg, 100)
    assert propagation.written_power(cfg, 0.9)[0] == 0.75
    assert check_option("spectrum_power", "0.75") == "0.75"
    assert power_of(0.75) == "0.75"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_several_powers_from_one_factorisation_are_each_power_s_own_bits(dtype):
    """propagation.projections: one SVD of O~ for several powers, each map the bits of
    ``projection`` at that power (the candidates of evaluation/written.py)."""
    Ot = np.asfortranarray(np.random.default_rng(7).standard_normal((300, 12)).astype(dtype))
    maps = propagation.projections(Ot, (0.5, 0.75, 1.0))
    assert list(maps) == [0.5, 0.75, 1.0]
    for power, P in maps.items():
        np.testing.assert_array_equal(P, propagation.projection(Ot, power))


def test_the_auto_spectrum_threshold_sits_in_the_gap_its_evidence_leaves():
    """--spectrum-power auto's threshold between the tuning graphs' structure on either
    side (docs/results/spectrum_power.md): PPI's 0.736 wanted p = 1/2, Pubmed's 0.776
    p = 1; 0.70 (or 0.80) would move a measured graph to the other p."""
    assert 0.736 < propagation.POWER_STRUCTURE <= 0.776


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _cfg(**kw):
    return TrainConfig(**dict(dict(propagate="on", seed=0), **kw))


def _csr(A):
    return sp.csr_matrix(np.asarray(A, dtype=np.float64))


def _apply(A, O, **kw):
    A = _csr(A)
    return propagation.apply(A.indptr, A.indices, None, _cfg(**kw), np.asarray(O, np.float32))


def test_a_propagation_that_cancels_every_row_falls_back_to_the_o_v():
    """Two nodes whose o_v sum to zero: (I + A)(O - g(L) O) is zero, and so was every
    written row; now the o_v are written, with a warning saying why."""
    with pytest.warns(InputWarning, match="2 of 2 propagated rows came out zero"):
        assert _apply([[0, 1], [1, 0]], [[0.5], [-0.5]]) is None


def complete(n):
    return np.ones((n, n)) - np.eye(n)


def star(n):
    A = np.zeros((n, n))
    A[0, 1:] = A[1:, 0] = 1
    return A


def path(n):
    return np.eye(n, k=1) + np.eye(n, k=-1)


@pytest.mark.parametrize(
    "A,k,why",
    [
        (complete(10), 4, "10 of 10 rows"),
        (complete(150), 8, "150 of 150 rows"),
        (star(12), 1, "--dim 1"),
        (path(12), 1, "--dim 1"),
        (np.kron(np.eye(2), np.ones((3, 3))) - np.eye(6), 4, "6 of 6 rows"),
    ],
    ids=["K10", "K150", "star-dim1", "path-dim1", "two-triangles"],
)
def test_rows_the_propagation_makes_identical_fall_back_to_the_o_v(A, k, why):
    """Every node of a complete graph got the same row, and at --dim 1 every row was +-1:
    when most rows are copies of another node's that the o_v kept apart, the o_v are
    written, with a warning naming how many and why."""
    O = np.random.default_rng(0).standard_normal((A.shape[0], k))
    with pytest.warns(InputWarning, match="identical") as record:
        assert _apply(A, O) is None
    text = str(record[0].message)
    assert why in text and "--propagate none" in text


def test_a_few_adjacent_twins_are_named_and_the_rest_propagates(caplog):
    """Two adjacent nodes with the same neighbours always get the same row; a minority of
    such rows keeps the propagation, and the log line says how many."""
    rng = np.random.default_rng(1)
    A = np.triu(rng.random((40, 40)) < 0.2, 1).astype(float)
    A[0, :] = A[:, 0] = 0
    A[0, 1] = A[1, 0] = 1
    A[0, 2:] = A[1, 2:]
    A = np.maximum(A, A.T)
    np.fill_diagonal(A, 0)
    with caplog.at_level("INFO", logger="caps2ne_np"):
        p = _apply(A, rng.standard_normal((40, 8)))
    assert p is not None
    np.testing.assert_array_equal(p.E[0], p.E[1])
    assert "2 of 40 rows are identical to another node's" in p.note
    assert "warning" not in p.note


def test_the_written_embeddings_of_a_complete_graph_are_the_o_v(tmp_path):
    """End to end: train on K6 writes distinct rows (the o_v), with the warning."""
    lines = "".join(f"n{i} n{j}\n" for i in range(6) for j in range(i + 1, 6))
    (tmp_path / "g.txt").write_text(lines)
    r = _invoke(
        "train", "--graph", tmp_path / "g.txt", "--out", tmp_path / "e.emb", "--dim", "4",
        "--feat-dim", "4", "--epochs", "1", "--walks-per-node", "2", "--threads", "1",
        "--propagate", "on",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "warning: written embeddings" in r.output and "identical" in r.output
    _, E = read_word2vec(tmp_path / "e.emb")
    assert np.unique(E, axis=0).shape[0] == 6


@pytest.mark.parametrize(
    "A,words",
    [
        (np.kron(np.eye(6), [[0, 1], [1, 0]]), "no edge can be held out"),
        (star(10), "no edge can be held out"),
        (complete(10), "no non-edge"),
    ],
    ids=["matching", "star", "K10"],
)
def test_auto_says_in_words_when_it_cannot_measure(A, words):
    O = np.random.default_rng(0).standard_normal((A.shape[0], 4))
    on, why = propagation.decide(_csr(A), O, seed=0)
    assert "nan" not in why and words in why, why
    assert not on and "kept off" in why
