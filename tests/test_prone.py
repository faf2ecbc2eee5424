"""The spectral start: ProNE (caps2ne_np/spectral/prone.py) against a slow dense
NumPy reference of the same two steps, the Chebyshev filter against the matrix
exponential it approximates, the nodevectors package's ProNE with the same seed, two
planted communities that must separate; then the three ways a run uses it (--spectral
features / init / init_xo), what cannot combine, the model file and inference."""

import json
import math
import re

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from scipy.special import iv
from threadpoolctl import threadpool_limits

from caps2ne_np.errors import InputError
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.io.npy import load_npz, save_npz
from caps2ne_np.spectral import prone as spectral
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import fit

TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8, epochs=1, batch_size=8)

# --------------------------------------------------------------------------- dense reference


def naive_proximity(A, exponent=0.75):
    """F_ij = log P_ij - log(A_ij lambda_j) where A_ij > 0, else 0; P = D^-1 A,
    lambda_j = (sum_i P_ij)^0.75 normalised: ProNE's sparse matrix, dense."""
    n = A.shape[0]
    P = np.zeros_like(A)
    for i in range(n):
        if A[i].sum() > 0:
            P[i] = A[i] / A[i].sum()
    lam = P.sum(axis=0) ** exponent
    lam = lam / lam.sum()
    F = np.zeros_like(A)
    for i in range(n):
        for j in range(n):
            if A[i, j] > 0:
                F[i, j] = np.log(P[i, j]) - np.log(A[i, j] * lam[j])
    return F


def naive_rownorm(U):
    out = U.copy()
    for i in range(U.shape[0]):
        norm = np.linalg.norm(U[i])
        if norm > 0:
            out[i] = U[i] / norm
    return out


def naive_svd_embed(F, d):
    """rownorm(U S^1/2) of the exact rank-d SVD."""
    U, S, _ = np.linalg.svd(F)
    return naive_rownorm(U[:, :d] * np.sqrt(S[:d]))


def naive_filter(A, R, order, mu, theta):
    """sum_{i<order} c_i T_i(X) R, X = M^2/2 - I, M = I - D~^-1 (I + A) - mu I,
    c_0 = I_0(theta), c_i = 2 (-1)^i I_i(theta): the recursion T_i = 2 X T_{i-1} - T_{i-2}."""
    n = A.shape[0]
    A1 = np.eye(n) + A
    M = np.eye(n) - A1 / A1.sum(axis=1, keepdims=True) - mu * np.eye(n)
    X = 0.5 * M @ M - np.eye(n)
    T = [R, X @ R]
    for _ in range(2, order):
        T.append(2 * X @ T[-1] - T[-2])
    return sum(
        (iv(0, theta) if i == 0 else 2 * (-1) ** i * iv(i, theta)) * T[i] for i in range(order)
    )


def naive_prone(A, d, order=10, mu=0.2, theta=0.5):
    """ProNE with exact SVDs, dense: both steps, the reference code's formulas."""
    R = naive_svd_embed(naive_proximity(A), d)
    if order == 1:
        return R
    Rt = (np.eye(A.shape[0]) + A) @ (R - naive_filter(A, R, order, mu, theta))
    return naive_svd_embed(Rt, d)


def planted(n_blocks=2, size=30, p_in=0.4, p_out=0.02, seed=0):
    """A symmetric 0/1 adjacency of ``n_blocks`` planted communities, and the labels."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_blocks), size)
    p = np.where(labels[:, None] == labels[None, :], p_in, p_out)
    upper = np.triu(rng.random(p.shape) < p, 1)
    return (upper | upper.T).astype(np.float64), labels


def principal_cosines(X, Y):
    qx, _ = np.linalg.qr(X)
    qy, _ = np.linalg.qr(Y)
    return np.linalg.svd(qx.T @ qy, compute_uv=False)


def align_signs(E, ref):
    """E with each column's sign flipped to agree with ref's (SVD signs are arbitrary)."""
    return E * np.where(np.sum(E * ref, axis=0) < 0, -1.0, 1.0)


# --------------------------------------------------------------------------- the two steps


@pytest.fixture(scope="module")
def two_blocks():
    return planted()


def test_proximity_matrix_matches_the_dense_reference(two_blocks):
    A = two_blocks[0].copy()
    A[0, 1] = A[1, 0] = 3.0  # a weighted edge
    F = spectral.proximity_matrix(sp.csr_matrix(A))
    np.testing.assert_allclose(F.toarray(), naive_proximity(A), rtol=1e-12, atol=1e-12)


def test_adjacency_symmetrises_and_drops_self_loops():
    indptr, indices = np.array([0, 2, 2, 3]), np.array([0, 1, 0])  # 0->0, 0->1, 2->0
    A = spectral.adjacency(indptr, indices, None, 3).toarray()
    np.testing.assert_array_equal(A, [[0, 1, 1], [1, 0, 0], [1, 0, 0]])


@pytest.mark.parametrize("order", [2, 3, 10])
def test_chebyshev_filter_matches_the_dense_recursion(two_blocks, order):
    A, _ = two_blocks
    R = np.random.default_rng(order).standard_normal((A.shape[0], 4))
    got = spectral.chebyshev_filter(sp.csr_matrix(A), R, order, 0.2, 0.5)
    np.testing.assert_allclose(got, naive_filter(A, R, order, 0.2, 0.5), rtol=1e-10, atol=1e-10)


def test_chebyshev_filter_approximates_exp_minus_theta_x(two_blocks):
    """The expansion is exp(-theta X) R, X = M^2/2 - I (docs/math.md): at order 20 the
    truncation error is below 1e-12 (|X| <= 1 on the spectrum)."""
    A, _ = two_blocks
    n = A.shape[0]
    A1 = np.eye(n) + A
    M = np.eye(n) - A1 / A1.sum(axis=1, keepdims=True) - 0.2 * np.eye(n)
    X = 0.5 * M @ M - np.eye(n)
    R = np.random.default_rng(1).standard_normal((n, 3))
    got = spectral.chebyshev_filter(sp.csr_matrix(A), R, 20, 0.2, 0.5)
    np.testing.assert_allclose(got, scipy.linalg.expm(-0.5 * X) @ R, rtol=0, atol=1e-12)


def test_propagate_matches_the_dense_reference_up_to_column_signs(two_blocks):
    A, _ = two_blocks
    R = naive_rownorm(np.random.default_rng(2).standard_normal((A.shape[0], 4)))
    got = spectral.propagate(sp.csr_matrix(A), R, 10, 0.2, 0.5)
    Rt = (np.eye(A.shape[0]) + A) @ (R - naive_filter(A, R, 10, 0.2, 0.5))
    want = naive_svd_embed(Rt, 4)
    np.testing.assert_allclose(align_signs(got, want), want, rtol=1e-9, atol=1e-9)


def test_randomized_factorisation_spans_the_exact_subspace():
    """The randomized SVD (5 power iterations) finds the exact top-d subspace of F where
    the spectrum has a gap: 4 planted communities, d = 4."""
    A, _ = planted(n_blocks=4, size=25, p_in=0.5, p_out=0.01, seed=3)
    F = spectral.proximity_matrix(sp.csr_matrix(A))
    got = spectral.factorize(F, 4, seed=0)
    want = naive_svd_embed(naive_proximity(A), 4)
    assert principal_cosines(got, want).min() > 0.999


def test_prone_matches_the_dense_reference_subspace():
    A, _ = planted(n_blocks=4, size=25, p_in=0.5, p_out=0.01, seed=3)
    got = spectral.prone(sp.csr_matrix(A), 4, seed=0)
    assert got.dtype == np.float32 and got.shape == (100, 4)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
    assert principal_cosines(got.astype(np.float64), naive_prone(A, 4)).min() > 0.999


def test_prone_separates_two_planted_communities(two_blocks):
    """Every node is closer (cosine) to its own community's mean than to the other's;
    the same graph with its labels shuffled must fail this (the test can fail)."""
    A, labels = two_blocks
    E = spectral.prone(sp.csr_matrix(A), 8, seed=0).astype(np.float64)

    def separated(labels):
        means = np.stack([E[labels == c].mean(axis=0) for c in (0, 1)])
        own = np.sum(E * means[labels], axis=1)
        other = np.sum(E * means[1 - labels], axis=1)
        return bool(np.all(own > other))

    assert separated(labels)
    assert not separated(np.random.default_rng(0).permutation(labels))


def test_prone_is_seeded_and_independent_of_blas_threads(two_blocks):
    A = sp.csr_matrix(two_blocks[0])
    with threadpool_limits(limits=1):
        one = spectral.prone(A, 8, seed=5)
    with threadpool_limits(limits=2):
        two = spectral.prone(A, 8, seed=5)
    np.testing.assert_array_equal(one, two)
    assert not np.array_equal(one, spectral.prone(A, 8, seed=6))


def test_prone_order_1_is_the_factorisation_alone(two_blocks):
    A = sp.csr_matrix(two_blocks[0])
    R = spectral.factorize(spectral.proximity_matrix(A), 6, seed=0)
    np.testing.assert_array_equal(spectral.prone(A, 6, seed=0, order=1), R.astype(np.float32))


def test_prone_equals_nodevectors_with_the_same_seed(two_blocks, monkeypatch):
    """The nodevectors package's ProNE (the panel's peer) with its randomized SVD seeded
    as ours: the same embedding (its SVD is unseeded otherwise)."""
    npr = pytest.importorskip("nodevectors.prone")
    from sklearn.utils.extmath import randomized_svd

    monkeypatch.setattr(
        npr, "randomized_svd", lambda *a, **k: randomized_svd(*a, **dict(k, random_state=7))
    )
    A = sp.csr_matrix(two_blocks[0])
    theirs = npr.ProNE(n_components=8, step=10, mu=0.2, theta=0.5, verbose=False)
    np.testing.assert_allclose(
        spectral.prone(A, 8, seed=7), theirs.fit_transform(A), rtol=0, atol=1e-6
    )


def test_the_default_factorisation_is_the_reference_codes(two_blocks):
    """ProNE's first stage with every default, against the reference code's own steps
    (THUDM/ProNE ``get_embedding_rand``: scikit-learn's randomized_svd with n_iter=5,
    U sqrt(S), rows l2-normalised), seeded alike: the same numbers.  (When
    SVD_ITERATIONS changed to 2 moved entries by up to 0.16 and no test failed -- the
    comparison with scikit-learn passed n_iter itself, the one with nodevectors skips
    without the package.)"""
    from sklearn.preprocessing import normalize
    from sklearn.utils.extmath import randomized_svd

    F = spectral.proximity_matrix(sp.csr_matrix(two_blocks[0]))
    U, S, _ = randomized_svd(sp.csc_matrix(F), n_components=6, n_iter=5, random_state=3)
    want = normalize(U * np.sqrt(S), "l2")
    np.testing.assert_allclose(spectral.factorize(F, 6, seed=3), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_iter", [5, 2])  # LU between power iterations, and none
def test_randomized_svd_is_scikit_learns_bit_for_bit(n_iter):
    """spectral.randomized_svd (no scikit-learn import at run time) against scikit-learn's
    randomized_svd with the same seed: the same U and S, bit for bit."""
    from sklearn.utils.extmath import randomized_svd

    rng = np.random.default_rng(3)
    M = sp.random(60, 60, density=0.1, random_state=4, format="csc")
    M.data = rng.normal(size=M.nnz)
    U, S = spectral.randomized_svd(M, 7, seed=11, n_iter=n_iter)
    U2, S2, _ = randomized_svd(M, n_components=7, n_iter=n_iter, random_state=11)
    np.testing.assert_array_equal(U, U2)
    np.testing.assert_array_equal(S, S2)
    if n_iter == 5:  # and with ProNE's power iterations, M's leading singular values
        exact = np.linalg.svd(M.toarray(), compute_uv=False)[:7]
        np.testing.assert_allclose(S, exact, rtol=1e-3)


@pytest.mark.parametrize("K,n", [(17, 60), (12, 22), (12, 21), (40, 3000), (5, 5)])
def test_wide_svd_is_gesdds_u_and_s_bit_for_bit(K, n):
    """spectral.wide_svd (LQ, then gesdd of L; gesdd itself below 11 K / 6 columns)
    against gesdd of the whole wide B: the same U and S, bit for bit, without V^T."""
    from scipy import linalg

    B = np.asfortranarray(np.random.default_rng(K + n).standard_normal((K, n)))
    U0, S0, _ = linalg.svd(B, full_matrices=False, check_finite=False, lapack_driver="gesdd")
    U, S = spectral.wide_svd(B.copy(order="F"))
    np.testing.assert_array_equal(U, U0)
    np.testing.assert_array_equal(S, S0)


def test_a_run_with_the_spectral_start_does_not_import_scikit_learn():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, scipy.sparse as sp\n"
        "from caps2ne_np.spectral import prone as spectral\n"
        "A = sp.random(50, 50, density=0.2, random_state=1, format='csr')\n"
        "A = ((A + A.T) > 0).astype(np.float64)\n"
        "spectral.prone(sp.csr_matrix(A), 4)\n"
        "print('sklearn' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_prone_refuses_a_dimension_the_graph_cannot_give(two_blocks):
    with pytest.raises(InputError, match="spectral-dim"):
        spectral.prone(sp.csr_matrix(two_blocks[0]), 60)


# --------------------------------------------------------------------------- in a run


def fit_arrays(adj, **options):
    adj = sp.csr_matrix(adj, dtype=np.float32)
    cfg = TrainConfig(**dict(TINY, **options))
    return fit(adj.indptr, adj.indices.astype(np.int32), None, cfg)


class Captured(Exception):
    pass


def initial_params(monkeypatch, adj, **options):
    """The parameters a run starts from (captured where the training step is built)."""
    import caps2ne_np.training.train as train_mod

    def capture(*args, **kwargs):
        params = next(a for a in args if hasattr(a, "fixed_features"))
        raise Captured(params.X.copy(), params.O.copy(), params.fixed_features)

    monkeypatch.setattr(train_mod, "TrainStep", capture)  # sparse features, the term
    monkeypatch.setattr(train_mod.fused, "FusedStep", capture)  # the compiled step
    with pytest.raises(Captured) as info:
        fit_arrays(adj, **options)
    return info.value.args


def expected_prone(adj, cfg, d):
    from caps2ne_np.kernels.rng import derive_seed

    A = sp.csr_matrix(adj)
    seed = derive_seed(cfg.seed, "spectral") % 2**32
    return spectral.prone(A, d, seed, dtype=np.dtype(cfg.spectral_precision))


def test_features_mode_trains_on_prone_as_fixed_x(two_blocks, monkeypatch):
    A = two_blocks[0]
    X, _, fixed = initial_params(monkeypatch, A, spectral="features", spectral_dim=6)
    assert fixed
    np.testing.assert_array_equal(X, expected_prone(A, TrainConfig(), 6))  # not row-sum normalised


def test_init_modes_start_x_and_o_from_prone(two_blocks, monkeypatch):
    A = two_blocks[0]
    X0, O0, _ = initial_params(monkeypatch, A, spectral="none")
    X, O, fixed = initial_params(monkeypatch, A, spectral="init")
    assert not fixed
    E = expected_prone(A, TrainConfig(), 8)
    np.testing.assert_allclose(X, E * np.float32(math.sqrt(1 / 3)), rtol=1e-6)
    np.testing.assert_array_equal(O, O0)  # 'init': O stays random
    X, O, _ = initial_params(monkeypatch, A, spectral="init_xo")
    limit = math.sqrt(2 * 8 / (A.shape[0] + 8))
    np.testing.assert_allclose(O, E * np.float32(limit), rtol=1e-6)
    assert not np.allclose(X0, X)


def test_spectral_start_is_logged_with_its_cost(two_blocks, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="caps2ne_np"):
        result = fit_arrays(two_blocks[0], spectral="features", spectral_dim=6)
    line = [r.getMessage() for r in caplog.records if "spectral start" in r.getMessage()]
    assert line and "ProNE d=6" in line[0] and line[0].endswith(" ...")  # before it starts
    assert re.search(r" in \d+\.\d\d s$", line[-1]), line[-1]
    assert any("spectral start" in note for note in result.notes)
    assert "preset converge" in result.notes[0]  # ProNE features are not the user's


@pytest.mark.parametrize(
    "options,match",
    [
        (dict(spectral="init", spectral_dim=4), "spectral-dim"),
        (dict(spectral="features", spectral_dim=200), "spectral-dim"),
        (dict(spectral="features", prone_theta=0.0), "prone-theta"),
        (dict(spectral="features", prone_mu=float("nan")), "prone-mu"),
        (dict(spectral="pca"), "--spectral"),
    ],
)
def test_bad_spectral_options_are_one_line_errors(two_blocks, options, match):
    with pytest.raises(InputError, match=match) as info:
        fit_arrays(two_blocks[0], **options)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("mode", ["features", "init", "init_xo"])
def test_spectral_with_the_users_features_is_refused(two_blocks, mode):
    A = two_blocks[0]
    with pytest.raises(InputError, match="features") as info:
        Caps2NE(**TINY, spectral=mode).fit(sp.csr_matrix(A), X=np.ones((A.shape[0], 3), np.float32))
    assert "\n" not in str(info.value)


def test_user_features_do_not_start_from_prone(two_blocks, monkeypatch):
    """With fixed features the preset's spectral start is 'none' (ProNE never runs), as
    with --preset paper; a featureless graph under the converge preset starts x and O
    from it."""
    called = []
    real = spectral.prone
    monkeypatch.setattr(spectral, "prone", lambda *a, **k: called.append(1) or real(*a, **k))
    A = sp.csr_matrix(two_blocks[0])
    Caps2NE(**TINY).fit(A, X=np.ones((A.shape[0], 3), np.float32))
    Caps2NE(**dict(TINY, preset="paper")).fit(A)
    assert not called
    model = Caps2NE(**TINY).fit(A)
    assert called and model.config_["spectral"] == "init_xo"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["init", "init_xo"])
def test_ray_one_worker_starts_x_from_prone_as_one_machine(two_blocks, mode, ray_local):
    """The Ray engine starts x (and O) from ProNE too: one worker equals one machine."""
    from caps2ne_np.training.ray import fit as ray_fit

    adj = sp.csr_matrix(two_blocks[0], dtype=np.float32)
    cfg = TrainConfig(**dict(TINY, adam="lazy", spectral=mode, threads=1))
    ip, ix = adj.indptr.astype(np.int64), adj.indices.astype(np.int32)
    local = fit(ip, ix, None, cfg)
    ray = ray_fit(ip, ix, None, cfg, workers=1, servers=1)
    for name in ("O", "X"):
        np.testing.assert_array_equal(getattr(ray.params, name), getattr(local.params, name))


# --------------------------------------------------------------------------- model file, infer


@pytest.fixture(scope="module")
def fitted(two_blocks):
    A = sp.csr_matrix(two_blocks[0])
    return {mode: Caps2NE(**TINY, spectral=mode).fit(A) for mode in ("features", "init")}


def test_model_file_keeps_the_setting_and_old_files_read_as_none(fitted, tmp_path):
    path = tmp_path / "m.npz"
    fitted["features"].save(path)
    assert Caps2NE.load(path).config_["spectral"] == "features"
    arrays = load_npz(path)
    config = json.loads(str(arrays["config"]))
    del config["spectral"]  # as written before the spectral start
    arrays["config"] = np.asarray(json.dumps(config))
    save_npz(path, overwrite=True, **arrays)
    assert Caps2NE.load(path).config_["spectral"] == "none"


def test_infer_refuses_a_spectral_features_model_without_features(fitted, two_blocks):
    with pytest.raises(InputError, match="spectral features") as info:
        fitted["features"].transform(sp.csr_matrix(two_blocks[0]), nodes=[0, 1])
    assert "\n" not in str(info.value) and "basis" in str(info.value)


def test_infer_takes_features_in_the_models_space_as_they_are(fitted, two_blocks):
    """Given features for every node, a --spectral features model embeds them without
    row-sum normalisation (as in training): its own ProNE gives its own o-path back."""
    A = sp.csr_matrix(two_blocks[0])
    model = fitted["features"]
    X = expected_prone(A, model.train_config(), model.feat_dim)
    E = model.transform(A, X, aggregate="mean")
    Xn = X / np.abs(X).sum(axis=1, keepdims=True)
    assert not np.allclose(E, model.transform(A, Xn, aggregate="mean"))
    assert np.all(np.isfinite(E))


def test_infer_of_a_spectral_init_model_works_as_featureless(fitted, two_blocks):
    E = fitted["init"].transform(sp.csr_matrix(two_blocks[0]), aggregate="mean")
    assert E.shape == (two_blocks[0].shape[0], 8) and np.all(np.isfinite(E))


def test_prone_peer_script_writes_what_nodevectors_gives(two_blocks, tmp_path):
    """bench/peers/prone_peer.py (the panel's ProNE, nodevectors with two fixes) writes
    the package's embedding, which spans the subspace of this project's ProNE on a small
    graph and separates its two communities as well."""
    pytest.importorskip("nodevectors")
    import subprocess
    import sys
    from pathlib import Path

    from caps2ne_np.io.word2vec import read_word2vec

    A, labels = two_blocks
    rows, cols = np.nonzero(np.triu(A))
    (tmp_path / "g.txt").write_text("".join(f"{u} {v}\n" for u, v in zip(rows, cols)))
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, str(root / "bench" / "peers" / "prone_peer.py"), "--graph",
         str(tmp_path / "g.txt"), "--emb", str(tmp_path / "p.emb"), "--dim", "8"],
        capture_output=True, text=True, timeout=300, cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "train_s:" in proc.stdout
    ids, theirs = read_word2vec(tmp_path / "p.emb")
    order = np.argsort([int(i) for i in ids])
    theirs = theirs[order].astype(np.float64)
    ours = spectral.prone(sp.csr_matrix(A), 8, seed=0).astype(np.float64)
    assert principal_cosines(ours, theirs)[:2].min() > 0.99  # the community directions
    means = np.stack([theirs[labels == c].mean(axis=0) for c in (0, 1)])
    assert np.all(
        np.sum(theirs * means[labels], axis=1) > np.sum(theirs * means[1 - labels], axis=1)
    )


# --------------------------------------------------------------------------- the command line


def test_cli_prints_the_spectral_start_and_infer_refuses_in_one_line(two_blocks, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    A = two_blocks[0]
    rows, cols = np.nonzero(np.triu(A))
    graph = tmp_path / "g.txt"
    graph.write_text("".join(f"n{u} n{v}\n" for u, v in zip(rows, cols)))
    tiny = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "1"]
    model = tmp_path / "m.npz"
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", str(graph), "--out", str(tmp_path / "e.txt"), "--model-out",
         str(model), "--spectral", "features", "--threads", "1", *tiny],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "features: ProNE (--spectral features)" in result.output
    assert "spectral start: ProNE d=8" in result.output
    (tmp_path / "nodes.txt").write_text("n0\nn1\n")
    result = CliRunner().invoke(
        cli,
        ["infer", "--model", str(model), "--graph", str(graph), "--nodes",
         str(tmp_path / "nodes.txt"), "--out", str(tmp_path / "i.txt")],
    )  # fmt: skip
    assert result.exit_code == 1
    message = result.output.strip().splitlines()[-1]
    assert "--spectral features" in message and "Traceback" not in result.output


@pytest.mark.parametrize("mode", ["features", "init_xo"])
def test_a_spectral_run_is_the_same_on_1_and_2_threads(two_blocks, mode):
    one = fit_arrays(two_blocks[0], spectral=mode, spectral_dim=None, threads=1).params.O
    two = fit_arrays(two_blocks[0], spectral=mode, spectral_dim=None, threads=2).params.O
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("dims", [dict(dim=4, feat_dim=40), dict(dim=40, feat_dim=4)])
def test_preset_start_falls_back_to_random_x_on_a_graph_too_small_for_prone(dims):
    """The converge preset's ProNE start needs d < N for x (and O, at d = k): a smaller
    graph trains from random x with a note, instead of an error it did not ask for."""
    from caps2ne_np.training.options.presets import resolve

    cfg, notes = resolve(TrainConfig(**dims), 30, 60)
    assert cfg.spectral == "none"
    assert any("spectral start off" in note for note in notes)
    big, _ = resolve(TrainConfig(dim=4, feat_dim=4), 30, 60)
    assert big.spectral == "init_xo"


@pytest.mark.parametrize(
    "dims,says",
    [
        (dict(dim=34), "needs --dim (34) and --feat-dim (128) below the 90 nodes"),
        (dict(dim=134, feat_dim=20), "needs --dim (134) and --feat-dim (20) below the 90 nodes"),
    ],
)
def test_spectral_start_off_note_names_each_size_as_given(dims, says):
    # the note printed "--feat-dim and --dim (128)" when --dim 34 was given
    from caps2ne_np.training.options.presets import resolve

    _, notes = resolve(TrainConfig(**dims), 90, 400)
    assert says in next(n for n in notes if n.startswith("spectral start off"))


# --------------------------------------------------------------------------- item 7


@pytest.mark.parametrize(
    "edges",
    [[(0, 1)], [(0, 1), (2, 3)]],  # one edge; two disjoint edges
    ids=["one-edge", "two-disjoint-edges"],
)
@pytest.mark.parametrize("mode", ["init_xo", "features"])
def test_zero_prone_rows_start_at_random_and_the_run_trains(edges, mode):
    """ProNE's propagation cancels these graphs' rows to zero; a zero x or o_v never
    trains (squash has no gradient at 0), so the run wrote all-zero embeddings with exit 0.
    Zero rows start from random unit rows, and the note says how many."""
    n = 2 * len(edges)
    u, v = np.array(edges).T
    adj = sp.coo_matrix((np.ones(2 * len(edges)), (np.r_[u, v], np.r_[v, u])), shape=(n, n))
    # float64: these graphs' F has two equal singular values, and float64's rank-1 SVD
    # picks the direction the filter cancels (float32's rounding may pick the other)
    result = fit_arrays(
        adj, dim=1, feat_dim=1, num_sampled=1, epochs=5, spectral=mode, spectral_precision="float64"
    )
    assert any(f"{n} of {n} rows were zero" in note for note in result.notes), result.notes
    assert np.all(np.any(result.params.O != 0, axis=1))
    if mode == "features":
        np.testing.assert_allclose(np.abs(result.params.X), 1.0, rtol=1e-6)  # unit rows


def test_all_zero_embeddings_are_never_silent(monkeypatch):
    """Whatever makes every o_v zero (here: the zero rows left in place), a warning."""
    from caps2ne_np.errors import InputWarning

    monkeypatch.setattr(spectral, "fill_zero_rows", lambda E, seed, count: count.append(0) or E)
    adj = sp.coo_matrix((np.ones(2), ([0, 1], [1, 0])), shape=(2, 2))
    with pytest.warns(InputWarning, match="all 2 trained embeddings o_v are zero"):
        result = fit_arrays(
            adj,
            dim=1,
            feat_dim=1,
            num_sampled=1,
            epochs=2,
            spectral="init_xo",
            spectral_precision="float64",  # the direction the filter cancels (above)
        )
    assert not np.any(result.params.O)
