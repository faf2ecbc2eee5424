"""Evaluation protocols against scikit-learn's own functions and hand-worked toy cases."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.multiclass import OneVsRestClassifier

from caps2ne_np.errors import InputError
from caps2ne_np.evaluation.multilabel import (
    multilabel_f1,
    multilabel_select_epoch,
    top_k_predictions,
)
from caps2ne_np.evaluation.report import format_table
from caps2ne_np.evaluation.single import classify_splits, select_epoch

# --------------------------------------------------------------------------- naive reference


def naive_multilabel_f1(emb, Y, fractions, n_shuffles, seed, solver="lbfgs"):
    """The DeepWalk protocol written out node by node (dense Y)."""
    rng = np.random.default_rng(seed)
    perms = [rng.permutation(Y.shape[0]) for _ in range(n_shuffles)]
    micro = np.zeros((len(fractions), n_shuffles))
    macro = np.zeros((len(fractions), n_shuffles))
    for f, gamma in enumerate(fractions):
        m = int(gamma * Y.shape[0])
        for r, perm in enumerate(perms):
            micro[f, r], macro[f, r] = _f1_pair(emb, Y, perm[:m], perm[m:], solver)
    return micro, macro


def _f1_pair(emb, Y, train, test, solver="lbfgs"):
    """Naive: one-vs-rest fit on train, each test node's top k labels, (micro, macro)."""
    clf = OneVsRestClassifier(LogisticRegression(solver=solver, max_iter=1000))
    proba = clf.fit(emb[train], Y[train]).predict_proba(emb[test])
    pred = np.zeros_like(Y[test])
    for i in range(len(test)):
        k = int(Y[test[i]].sum())
        for label in sorted(range(Y.shape[1]), key=lambda j: (-proba[i, j], j))[:k]:
            pred[i, label] = 1
    return (
        f1_score(Y[test], pred, average="micro", zero_division=0),
        f1_score(Y[test], pred, average="macro", zero_division=0),
    )


def _blobs(n_per_class, n_classes, dim, spread, seed):
    rng = np.random.default_rng(seed)
    centres = 10.0 * rng.standard_normal((n_classes, dim))
    labels = np.repeat(np.arange(n_classes), n_per_class)
    return centres[labels] + spread * rng.standard_normal((labels.size, dim)), labels


def _random_splits(labels, n_splits, n_train_per_class, n_val, seed):
    rng = np.random.default_rng(seed)
    splits = []
    for _ in range(n_splits):
        train = np.concatenate(
            [
                rng.choice(np.flatnonzero(labels == c), n_train_per_class, replace=False)
                for c in np.unique(labels)
            ]
        )
        rest = rng.permutation(np.setdiff1d(np.arange(labels.size), train))
        splits.append({"train": train, "val": rest[:n_val], "test": rest[n_val:]})
    return splits


# --------------------------------------------------------------------------- single-label


def test_separable_embeddings_give_accuracy_one():
    emb, labels = _blobs(30, 4, 8, spread=0.1, seed=1)
    result = classify_splits(emb, labels, _random_splits(labels, 3, 5, 40, seed=2))
    np.testing.assert_array_equal(result["val"], 1.0)
    np.testing.assert_array_equal(result["test"], 1.0)
    assert result["test_mean"] == 1.0 and result["test_std"] == 0.0


def test_classify_splits_equals_sklearn_by_hand():
    emb, labels = _blobs(
        40, 3, 6, spread=12.0, seed=3
    )  # overlapping classes: accuracy well below 1
    splits = _random_splits(labels, 4, 10, 50, seed=4)
    result = classify_splits(emb, labels, splits, C=0.5)
    for s, split in enumerate(splits):
        clf = LogisticRegression(C=0.5, max_iter=1000).fit(
            emb[split["train"]], labels[split["train"]]
        )
        assert result["val"][s] == accuracy_score(
            labels[split["val"]], clf.predict(emb[split["val"]])
        )
        assert result["test"][s] == accuracy_score(
            labels[split["test"]], clf.predict(emb[split["test"]])
        )
    assert 0.3 < result["test_mean"] < 0.95
    assert result["test_mean"] == pytest.approx(np.mean(result["test"]))
    assert result["test_std"] == pytest.approx(np.std(result["test"]))


def test_classify_splits_one_vs_rest_option_equals_liblinear_ovr_by_hand():
    emb, labels = _blobs(40, 3, 6, spread=12.0, seed=3)
    splits = _random_splits(labels, 4, 10, 50, seed=4)
    ovr = classify_splits(emb, labels, splits, multinomial=False)
    for s, split in enumerate(splits):
        clf = OneVsRestClassifier(LogisticRegression(solver="liblinear"))
        clf.fit(emb[split["train"]], labels[split["train"]])
        assert ovr["test"][s] == accuracy_score(
            labels[split["test"]], clf.predict(emb[split["test"]])
        )


def test_classify_splits_rejects_unlabelled_nodes_and_nan():
    emb, labels = _blobs(10, 2, 3, spread=0.1, seed=5)
    labels = labels.copy()
    labels[0] = -1
    splits = [{"train": np.array([0, 1, 15]), "val": np.array([2]), "test": np.array([16])}]
    with pytest.raises(InputError, match=r"split 0 'train': contains unlabelled nodes"):
        classify_splits(emb, labels, splits)
    emb[3, 1] = np.nan
    with pytest.raises(ValueError, match="emb: contains NaN"):
        classify_splits(emb, np.abs(labels), splits)


# --------------------------------------------------------------------------- epoch selection


def _epoch(val, test):
    return {"val": np.array(val), "test": np.array(test)}


def test_select_epoch_picks_by_validation_not_test():
    # split 0: val peaks at epoch 2, test at epoch 1; split 1: val ties at epochs 1 and 3 -> 1
    per_epoch = [
        _epoch([0.70, 0.80], [0.90, 0.60]),
        _epoch([0.75, 0.70], [0.50, 0.99]),
        _epoch([0.60, 0.80], [0.99, 0.70]),
    ]
    result = select_epoch(per_epoch)
    assert result["epochs"].tolist() == [2, 1]
    assert result["test"].tolist() == [0.50, 0.60]
    assert result["test_mean"] == pytest.approx(0.55) and result["test_std"] == pytest.approx(0.05)
    assert select_epoch(per_epoch, epochs=[5, 10, 15])["epochs"].tolist() == [10, 5]


# --------------------------------------------------------------------------- multi-label


def test_top_k_by_hand_on_five_nodes():
    proba = np.array(
        [
            [0.9, 0.1, 0.5, 0.2],  # k=1 -> label 0
            [0.1, 0.8, 0.7, 0.3],  # k=2 -> labels 1, 2
            [0.3, 0.3, 0.1, 0.2],  # k=1, tie -> lower index 0
            [0.2, 0.4, 0.6, 0.8],  # k=3 -> labels 3, 2, 1
            [0.5, 0.5, 0.5, 0.5],  # k=0 -> nothing
        ]
    )
    expected = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 0, 0, 0], [0, 1, 1, 1], [0, 0, 0, 0]])
    np.testing.assert_array_equal(top_k_predictions(proba, [1, 2, 1, 3, 0]), expected)


def _multilabel_toy(n, n_labels, seed):
    rng = np.random.default_rng(seed)
    Y = (rng.random((n, n_labels)) < 0.3).astype(np.int64)
    Y[Y.sum(axis=1) == 0, 0] = 1
    emb = Y @ rng.standard_normal((n_labels, 5)) + 0.8 * rng.standard_normal((n, 5))
    return emb, Y


def test_multilabel_f1_equals_naive_protocol():
    emb, Y = _multilabel_toy(60, 4, seed=6)
    result = multilabel_f1(emb, sp.csr_matrix(Y), train_fractions=(0.3, 0.7), n_shuffles=2, seed=7)
    micro, macro = naive_multilabel_f1(emb, Y, (0.3, 0.7), 2, seed=7)
    np.testing.assert_allclose(result["micro"], micro, rtol=1e-12)
    np.testing.assert_allclose(result["macro"], macro, rtol=1e-12)
    np.testing.assert_allclose(result["micro_mean"], micro.mean(axis=1), rtol=1e-12)
    assert np.all(result["micro"] > 0.5) and np.all(result["micro"] < 1.0)


def test_multilabel_f1_liblinear_equals_naive_protocol_and_differs_from_lbfgs():
    # DeepWalk's scorer (liblinear penalises the intercept): a different ranking of
    # the binary classifiers' probabilities, so other F1 values on the same shuffles
    emb, Y = _multilabel_toy(60, 4, seed=6)
    result = multilabel_f1(
        emb, sp.csr_matrix(Y), train_fractions=(0.3, 0.7), n_shuffles=2, seed=7, solver="liblinear"
    )
    micro, macro = naive_multilabel_f1(emb, Y, (0.3, 0.7), 2, seed=7, solver="liblinear")
    np.testing.assert_allclose(result["micro"], micro, rtol=1e-12)
    np.testing.assert_allclose(result["macro"], macro, rtol=1e-12)
    assert result["solver"] == "liblinear"
    lbfgs = multilabel_f1(emb, sp.csr_matrix(Y), train_fractions=(0.3, 0.7), n_shuffles=2, seed=7)
    assert not np.allclose(lbfgs["macro"], result["macro"])
    with pytest.raises(ValueError, match="solver"):
        multilabel_f1(emb, Y, solver="newton")


def test_multilabel_f1_perfect_embeddings_score_one():
    Y = np.eye(3, dtype=np.int64)[np.arange(30) % 3]
    result = multilabel_f1(10.0 * Y.astype(float), Y, train_fractions=(0.5,), n_shuffles=2, seed=0)
    np.testing.assert_array_equal(result["micro"], 1.0)
    np.testing.assert_array_equal(result["macro"], 1.0)


def test_multilabel_f1_survives_labels_absent_from_training():
    emb, Y = _multilabel_toy(40, 3, seed=8)
    Y = np.hstack([Y, np.zeros((40, 2), dtype=np.int64)])
    Y[5, 3] = 1  # a label with a single node: absent from most training parts
    Y[:, 4] = 1  # a label on every node: constant in every training part
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Label .* is present in all training examples")
        result = multilabel_f1(emb, Y, train_fractions=(0.1, 0.9), n_shuffles=4, seed=9)
    assert np.all(np.isfinite(result["micro"])) and np.all(np.isfinite(result["macro"]))


def test_multilabel_f1_rejects_bad_fractions():
    emb, Y = _multilabel_toy(10, 2, seed=1)
    with pytest.raises(ValueError, match="train_fractions"):
        multilabel_f1(emb, Y, train_fractions=(1.0,))


# --------------------------------------------------------------------------- printing


def test_format_table_shows_every_protocol():
    single = {
        "protocol": "single-label",
        "val": np.array([0.5, 0.7]),
        "test": np.array([0.6, 0.8]),
        "val_mean": 0.6,
        "val_std": 0.1,
        "test_mean": 0.7,
        "test_std": 0.1,
    }
    text = format_table(single)
    assert "70.00 +- 10.00" in text and "80.00" in text
    chosen = select_epoch([single, single])
    assert "epoch" in format_table(chosen).splitlines()[0]
    multi = multilabel_f1(*_multilabel_toy(30, 2, seed=2), train_fractions=(0.5,), n_shuffles=1)
    assert "50%" in format_table(multi)
    with pytest.raises(ValueError, match="unknown protocol"):
        format_table({})


# --------------------------------------------------------------------------- epoch selection


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Label not")
def test_multilabel_select_epoch_equals_naive_cross_validation():
    emb, Y = _multilabel_toy(60, 4, seed=6)
    rng = np.random.default_rng(1)
    embs = [emb + s * rng.standard_normal(emb.shape) for s in (3.0, 0.0, 1.0)]
    res = multilabel_select_epoch(
        embs, Y, train_fractions=(0.4, 0.8), n_shuffles=2, seed=7, n_folds=3, epochs=[5, 10, 15]
    )
    rng7 = np.random.default_rng(7)  # the protocol's shuffles
    perms = [rng7.permutation(60) for _ in range(2)]
    for f, gamma in enumerate((0.4, 0.8)):
        m = int(gamma * 60)
        for r, perm in enumerate(perms):
            train, test = perm[:m], perm[m:]
            folds = np.array_split(train, 3)
            cv = np.array(
                [
                    np.mean(
                        [
                            _f1_pair(e, Y, np.concatenate(folds[:i] + folds[i + 1 :]), folds[i])
                            for i in range(3)
                        ],
                        axis=0,
                    )
                    for e in embs
                ]
            )  # (epochs, 2)
            best_mi, best_ma = int(np.argmax(cv[:, 0])), int(np.argmax(cv[:, 1]))
            np.testing.assert_allclose(res["cv_micro"][:, f, r], cv[:, 0], rtol=1e-12)
            assert res["epochs_micro"][f, r] == [5, 10, 15][best_mi]
            assert res["epochs_macro"][f, r] == [5, 10, 15][best_ma]
            assert res["micro"][f, r] == pytest.approx(_f1_pair(embs[best_mi], Y, train, test)[0])
            assert res["macro"][f, r] == pytest.approx(_f1_pair(embs[best_ma], Y, train, test)[1])
    # the noiseless epoch (10) wins the cross-validation almost everywhere
    assert np.mean(res["epochs_micro"] == 10) >= 0.75


def test_multilabel_select_epoch_never_looks_at_test_labels():
    # Scramble the labels of the test nodes (one shuffle, one fraction): the chosen
    # epochs must not move, only the reported test scores.
    emb, Y = _multilabel_toy(80, 4, seed=2)
    rng = np.random.default_rng(3)
    embs = [emb + s * rng.standard_normal(emb.shape) for s in (0.5, 0.0, 2.0, 1.0)]
    kw = dict(train_fractions=(0.5,), n_shuffles=1, seed=11, n_folds=4)
    a = multilabel_select_epoch(embs, Y, **kw)
    test = np.random.default_rng(11).permutation(80)[40:]
    Y2 = Y.copy()
    Y2[test] = Y[np.random.default_rng(0).permutation(test)]
    b = multilabel_select_epoch(embs, Y2, **kw)
    np.testing.assert_array_equal(a["epochs_micro"], b["epochs_micro"])
    np.testing.assert_array_equal(a["epochs_macro"], b["epochs_macro"])
    np.testing.assert_array_equal(a["cv_micro"], b["cv_micro"])
    assert not np.array_equal(a["micro"], b["micro"])


def test_multilabel_select_epoch_with_one_epoch_is_multilabel_f1():
    emb, Y = _multilabel_toy(60, 4, seed=6)
    one = multilabel_select_epoch([emb], Y, train_fractions=(0.3, 0.7), n_shuffles=2, seed=7)
    ref = multilabel_f1(emb, Y, train_fractions=(0.3, 0.7), n_shuffles=2, seed=7)
    np.testing.assert_array_equal(one["micro"], ref["micro"])
    np.testing.assert_array_equal(one["macro"], ref["macro"])
    assert np.all(one["epochs_micro"] == 1)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(embs=[]), "at least one epoch"),
        (dict(epochs=[1, 2]), "epochs: expected 1 epoch numbers"),
        (dict(n_folds=1), "n_folds"),
        (dict(n_folds=100), "n_folds"),
    ],
)
def test_multilabel_select_epoch_rejects_bad_arguments(kwargs, needle):
    emb, Y = _multilabel_toy(30, 3, seed=1)
    args = dict(embs=[emb], Y=Y, train_fractions=(0.5,), n_shuffles=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=needle):
        multilabel_select_epoch(**args)


# ---- evaluate's JSON and its default splits


def _two_class_files(tmp_path, n=40):
    rng = np.random.default_rng(0)
    rows = [
        f"n{i} " + " ".join(f"{x:.4f}" for x in rng.standard_normal(4) + 2 * (i % 2))
        for i in range(n)
    ]
    (tmp_path / "e.emb").write_text(f"{n} 4\n" + "\n".join(rows) + "\n")
    (tmp_path / "l.txt").write_text("".join(f"n{i} {i % 2}\n" for i in range(n)))


def _evaluate(tmp_path, *args, extra_labels=""):
    """evaluate -e e.emb --labels l.txt ``args`` in ``tmp_path`` (l.txt with the lines
    ``extra_labels`` appended): (click result, the text of r.json or None)."""
    import os

    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    tmp_path.mkdir(parents=True, exist_ok=True)
    _two_class_files(tmp_path)
    with open(tmp_path / "l.txt", "a") as fh:
        fh.write(extra_labels)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # relative paths, as a user types them (not click's isolated_filesystem)
    try:
        result = CliRunner().invoke(cli, ["evaluate", "-e", "e.emb", "--labels", "l.txt", *args])
    finally:
        os.chdir(cwd)
    json_file = Path(tmp_path, "r.json")
    return result, json_file.read_text() if json_file.exists() else None


def test_evaluate_json_writes_null_for_a_missing_score(tmp_path):
    result, text = _evaluate(
        tmp_path, "--train-fraction", "0.5", "--shuffles", "2", "--json", "r.json"
    )
    assert result.exit_code == 0, result.output
    assert "NaN" not in text
    data = json.loads(text)  # strict JSON: NaN would not parse with parse_constant raising
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert data[0]["val_mean"] is None and data[0]["val"] == [None, None]
    assert 0.5 <= data[0]["test_mean"] <= 1.0


def test_evaluate_labels_without_splits_uses_seeded_random_splits_and_says_so(tmp_path):
    result, text = _evaluate(tmp_path, "--shuffles", "3", "--json", "r.json")
    assert result.exit_code == 0, result.output
    assert "note: no --splits or --train-fraction: scoring on 3 random stratified splits" in (
        result.output
    )
    again, text_again = _evaluate(tmp_path / "again", "--shuffles", "3", "--json", "r.json")
    assert text == text_again  # seeded: the same splits, the same scores
    explicit, text_explicit = _evaluate(
        tmp_path / "explicit", "--shuffles", "3", "--train-fraction", "0.5", "--json", "r.json"
    )
    assert text_explicit == text  # the default is --train-fraction 0.5


def test_evaluate_skips_labelled_nodes_without_embeddings_and_says_how_many(tmp_path):
    # one labels file for the training nodes and the new ones (the inductive workflow):
    # the nodes without a row in -e are skipped, with one note, and the others scored
    # as if the file named them alone
    args = ("--train-fraction", "0.5", "--shuffles", "2", "--json", "r.json")
    plain, want = _evaluate(tmp_path / "plain", *args)
    extra = "# the new nodes\nnew0 1\nnew1 0\nnew0 1\n"
    result, text = _evaluate(tmp_path / "extra", *args, extra_labels=extra)
    assert plain.exit_code == 0 and result.exit_code == 0, result.output
    assert "note: skipping 2 labelled node(s) not in the embeddings e.emb (e.g. 'new0')" in (
        result.output
    )
    assert text == want


def test_evaluate_inferred_skips_labelled_nodes_in_neither_file_the_same_way(tmp_path):
    (tmp_path / "new.emb").write_text("2 4\nnew0 2 2 2 2\nnew1 0 0 0 0\n")
    result, text = _evaluate(
        tmp_path,
        "--inferred",
        "new.emb",
        "--json",
        "r.json",
        extra_labels="new0 1\nnew1 0\nghost 1\n",
    )
    assert result.exit_code == 0, result.output
    assert "note: skipping 1 labelled node(s) not in the embeddings e.emb or new.emb" in (
        result.output
    )
    assert "'ghost'" in result.output
    assert json.loads(text)[0]["test_mean"] in (0.0, 0.5, 1.0)  # the two new nodes


def test_evaluate_refuses_a_labels_file_with_fewer_than_two_embedded_nodes(tmp_path):
    from caps2ne_np.graphs.nodefiles import load_labels

    path = tmp_path / "l.txt"
    path.write_text("a 0\nzz 1\nyy 0\n")
    with pytest.raises(InputError, match=r"l.txt: 1 of its 3 labelled nodes are in E"):
        load_labels(path, ["a", "b"], within="E", on_unknown=lambda count, first: None)
    with pytest.raises(InputError, match=r"l.txt:2: node 'zz' is not in E"):
        load_labels(path, ["a", "b"], within="E")  # train --labels: every node in the graph


def test_evaluate_dataset_scores_the_splits_file_given_and_refuses_a_missing_one(tmp_path):
    # --splits with --dataset replaces the dataset's own splits (it was ignored, even
    # when the file did not exist)
    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.graphs.datasets import load_dataset

    ds = load_dataset("cora-bundled", tmp_path)
    rng = np.random.default_rng(0)
    with open(tmp_path / "e.emb", "w") as fh:
        fh.write(f"{len(ds.node_ids)} 3\n")
        for nid, y in zip(ds.node_ids, ds.labels):
            fh.write(f"{nid} " + " ".join(f"{v:.3f}" for v in rng.normal(y, 1.0, 3)) + "\n")
    split = {part: [ds.node_ids[i] for i in ds.splits[0][part][:300]] for part in ds.splits[0]}
    (tmp_path / "s.json").write_text(json.dumps([split, split]))
    base = ["evaluate", "-e", str(tmp_path / "e.emb"), "--dataset", "cora-bundled"]
    base += ["--data-dir", str(tmp_path)]
    result = CliRunner().invoke(cli, base + ["--splits", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    assert "\n    1 " in result.output and "\n    2 " not in result.output  # the file's 2 splits
    missing = CliRunner().invoke(cli, base + ["--splits", str(tmp_path / "nope.json")])
    assert missing.exit_code == 1
    assert f"error: {tmp_path / 'nope.json'}: no such file" in missing.output


# --------------------------------------------------------------------------- tuned C


def _naive_tuned_C(emb, labels, train, val, grid):
    """C of the grid with the best validation accuracy, the smaller C on a tie."""
    best, best_acc = None, -1.0
    for C in grid:
        clf = LogisticRegression(C=C, max_iter=1000).fit(emb[train], labels[train])
        acc = accuracy_score(labels[val], clf.predict(emb[val]))
        if acc > best_acc:
            best, best_acc = C, acc
    return best


def test_tuned_C_on_validation_equals_naive_search():
    from caps2ne_np.evaluation.single import C_GRID, tuned_C

    emb, labels = _blobs(40, 3, 6, spread=12.0, seed=5)
    for split in _random_splits(labels, 3, 10, 50, seed=6):
        want = _naive_tuned_C(emb, labels, split["train"], split["val"], C_GRID)
        assert tuned_C(emb, labels, split["train"], split["val"]) == want


def test_tuned_C_by_cross_validation_equals_naive_folds():
    from sklearn.model_selection import StratifiedKFold

    from caps2ne_np.evaluation.single import C_GRID, tuned_C

    emb, labels = _blobs(30, 3, 6, spread=12.0, seed=7)
    train = np.arange(labels.size)[::2]
    folds = list(
        StratifiedKFold(3, shuffle=True, random_state=4).split(np.zeros(train.size), labels[train])
    )
    means = []
    for C in C_GRID:
        accs = []
        for a, b in folds:
            clf = LogisticRegression(C=C, max_iter=1000).fit(emb[train[a]], labels[train[a]])
            accs.append(accuracy_score(labels[train[b]], clf.predict(emb[train[b]])))
        means.append(np.mean(accs))
    want = C_GRID[int(np.argmax(means))]  # the first (smallest) C of the best mean
    assert tuned_C(emb, labels, train, seed=4) == want


def test_classify_splits_tuned_scores_each_split_at_its_chosen_C():
    emb, labels = _blobs(40, 3, 6, spread=12.0, seed=8)
    splits = _random_splits(labels, 3, 10, 50, seed=9)
    tuned = classify_splits(emb, labels, splits, C="tuned")
    for s, split in enumerate(splits):
        at_C = classify_splits(emb, labels, [split], C=float(tuned["C"][s]))
        assert tuned["test"][s] == at_C["test"][0]
        assert tuned["test_macro_f1"][s] == at_C["test_macro_f1"][0]
        clf = LogisticRegression(C=float(tuned["C"][s]), max_iter=1000)
        pred = clf.fit(emb[split["train"]], labels[split["train"]]).predict(emb[split["test"]])
        assert tuned["test_macro_f1"][s] == f1_score(labels[split["test"]], pred, average="macro")
    assert "macro-F1" in format_table(tuned)


@pytest.mark.parametrize("n_val", [50, 0], ids=["on-validation", "by-cross-validation"])
def test_tuned_C_never_reads_the_test_labels(n_val):
    # the test nodes relabelled (permuted among themselves, or every one given another
    # class): the C chosen per split must not move, nor the validation score
    emb, labels = _blobs(40, 3, 6, spread=14.0, seed=11)
    emb = emb / 30.0  # a scale at which the choice of C matters
    splits = _random_splits(labels, 4, 8, n_val, seed=12)
    tuned = classify_splits(emb, labels, splits, C="tuned")
    assert len(set(tuned["C"])) > 1 or tuned["C"][0] != 1.0  # the grid is searched
    rng = np.random.default_rng(13)
    for s, split in enumerate(splits):
        test = split["test"]
        for relabel in (rng.permutation(labels[test]), (labels[test] + 1) % 3):
            moved = labels.copy()
            moved[test] = relabel
            again = classify_splits(emb, moved, splits[: s + 1], C="tuned")  # seeds by split
            assert again["C"][s] == tuned["C"][s], (s, n_val)
            assert again["val"][s] == tuned["val"][s] or n_val == 0


def test_tuned_C_undoes_a_scale_that_C_1_punishes():
    # rows shrunk 100x: at C = 1 the classifier is regularised flat and gives every test
    # node the majority class (80% of the nodes); the tuned protocol finds a C that
    # separates the classes again (macro-F1 sees it, accuracy barely)
    rng = np.random.default_rng(10)
    labels = np.r_[np.zeros(160, dtype=np.int64), np.ones(40, dtype=np.int64)]
    emb = rng.standard_normal((200, 4))
    emb[:, 0] += 2.0 * labels
    idx = rng.permutation(200)
    splits = [{"train": idx[:100], "val": idx[100:150], "test": idx[150:]}]
    small = emb / 100.0
    at_1 = classify_splits(small, labels, splits)
    tuned = classify_splits(small, labels, splits, C="tuned")
    assert at_1["test_macro_f1_mean"] < 0.5 < 0.6 < tuned["test_macro_f1_mean"]
    assert tuned["C"][0] >= 100


def test_classify_splits_rejects_a_bad_C():
    emb, labels = _blobs(10, 2, 3, spread=1.0, seed=1)
    splits = _random_splits(labels, 1, 3, 4, seed=1)
    for bad in (0.0, -1.0, float("nan"), "best"):
        with pytest.raises(ValueError, match="C: expected a positive number or 'tuned'"):
            classify_splits(emb, labels, splits, C=bad)


def test_multilabel_tuned_C_chosen_on_first_shuffle_training_part_only():
    from caps2ne_np.evaluation.single import C_GRID

    rng = np.random.default_rng(3)
    emb = rng.standard_normal((60, 5))
    Y = (emb[:, :3] + 0.5 * rng.standard_normal((60, 3)) > 0.3).astype(np.int64)
    Y[Y.sum(axis=1) == 0, 0] = 1
    tuned = multilabel_f1(emb, Y, (0.5,), n_shuffles=2, seed=1, C="tuned")
    assert tuned["C"].shape == (1,) and tuned["C"][0] in C_GRID
    fixed = multilabel_f1(emb, Y, (0.5,), n_shuffles=2, seed=1, C=float(tuned["C"][0]))
    np.testing.assert_array_equal(tuned["micro"], fixed["micro"])
    # the test nodes' labels do not enter the choice
    perm = np.random.default_rng(1).permutation(60)
    Y2 = Y.copy()
    Y2[perm[30:]] = 1 - Y2[perm[30:]]
    Y2[Y2.sum(axis=1) == 0, 0] = 1
    assert multilabel_f1(emb, Y2, (0.5,), n_shuffles=2, seed=1, C="tuned")["C"][0] == tuned["C"][0]


def test_multilabel_tuned_C_never_reads_the_test_labels():
    # at each fraction C is tuned on the first shuffle's training part: relabelling
    # every other node (flipped, or rows permuted among themselves) must not move it
    from caps2ne_np.evaluation.multilabel import shuffle_orders

    rng = np.random.default_rng(21)
    emb = rng.standard_normal((90, 5))
    Y = (emb[:, :4] + 0.8 * rng.standard_normal((90, 4)) > 0.4).astype(np.int64)
    Y[Y.sum(axis=1) == 0, 0] = 1
    emb = emb / 20.0  # a scale at which the choice of C matters
    fractions = (0.3, 0.6)
    tuned = multilabel_f1(emb, Y, fractions, n_shuffles=2, seed=4, C="tuned")
    assert len(set(tuned["C"])) > 1 or tuned["C"][0] != 1.0  # the grid is searched
    first = shuffle_orders(90, 2, 4)[0]
    for f, gamma in enumerate(fractions):
        test = first[int(gamma * 90) :]
        for relabel in (1 - Y[test], Y[rng.permutation(test)]):
            moved = Y.copy()
            moved[test] = relabel
            moved[moved.sum(axis=1) == 0, 0] = 1
            again = multilabel_f1(emb, moved, fractions, n_shuffles=2, seed=4, C="tuned")
            assert again["C"][f] == tuned["C"][f], (gamma, again["C"], tuned["C"])


def test_tuned_C_says_when_it_cannot_tune_instead_of_using_1_silently():
    from caps2ne_np.errors import InputWarning

    emb, labels = _blobs(10, 3, 4, spread=2.0, seed=2)
    one_each = _random_splits(labels, 2, 1, 0, seed=3)  # 1 training node per class, no val
    with pytest.warns(InputWarning, match=r"C tuned: 2 of 2 split\(s\) \(split 0 first\)"):
        r = classify_splits(emb, labels, one_each, C="tuned")
    assert list(r["C"]) == [1.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # tunable: no warning
        classify_splits(emb, labels, _random_splits(labels, 2, 1, 6, seed=3), C="tuned")
        classify_splits(emb, labels, _random_splits(labels, 2, 4, 0, seed=3), C="tuned")
    # multi-label: a fraction of one training node (cross-validation crashed)
    Y = np.eye(3, dtype=np.int64)[labels]
    with pytest.warns(InputWarning, match=r"C tuned: fraction 0.04 trains on 1 node"):
        r = multilabel_f1(emb, Y, (0.04, 0.5), n_shuffles=2, C="tuned")
    assert r["C"][0] == 1.0


def test_multilabel_select_epoch_tunes_C_per_epoch_as_multilabel_f1():
    # several -e files of multi-label data with --C tuned: an internal error (C='tuned'
    # reached LogisticRegression); each epoch now gets the C multilabel_f1 tunes for it
    rng = np.random.default_rng(5)
    emb = rng.standard_normal((60, 4))
    Y = (emb[:, :3] + 0.7 * rng.standard_normal((60, 3)) > 0.3).astype(np.int64)
    Y[Y.sum(axis=1) == 0, 0] = 1
    embs = [emb / 30.0, emb]
    kw = dict(n_shuffles=2, seed=2, C="tuned")
    r = multilabel_select_epoch(embs, Y, (0.3, 0.6), n_folds=3, **kw)
    for e, one in enumerate(embs):
        np.testing.assert_array_equal(r["C"][e], multilabel_f1(one, Y, (0.3, 0.6), **kw)["C"])
    same = multilabel_select_epoch([emb, emb], Y, (0.5,), n_folds=3, **kw)
    np.testing.assert_array_equal(same["micro"], multilabel_f1(emb, Y, (0.5,), **kw)["micro"])


def test_a_too_small_val_fraction_is_named_as_such():
    from caps2ne_np.evaluation.single import random_splits

    labels = np.repeat(np.arange(3), 20)
    with pytest.raises(InputError, match=r"^validation fraction 0.01 \(--val-fraction\)") as err:
        random_splits(labels, 0.5, 2, val_fraction=0.01)
    assert "train" not in str(err.value).split(":")[0]
    with pytest.raises(InputError, match=r"^train fraction 0.01 \(--train-fraction\)"):
        random_splits(labels, 0.01, 2, val_fraction=0.1)


def test_evaluate_command_takes_C_tuned_and_refuses_other_words(tmp_path):
    result, text = _evaluate(tmp_path, "--C", "tuned", "--shuffles", "2", "--json", "r.json")
    assert result.exit_code == 0, result.output
    data = json.loads(text)
    assert len(data[0]["C"]) == 2 and "test_macro_f1_mean" in data[0]
    bad, _ = _evaluate(tmp_path / "bad", "--C", "best")
    assert bad.exit_code == 2 and "not a positive number or 'tuned'" in bad.output
