"""Output that fits the tools: word2vec binary from the CLI, the per-epoch history CSV,
and evaluate --train-fraction (random stratified splits) for data without a splits file."""

import csv
import json

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import InputError
from caps2ne_np.evaluation.single import random_splits
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec

SMALL = [
    "--dim",
    "8",
    "--feat-dim",
    "8",
    "--walks-per-node",
    "2",
    "--epochs",
    "2",
    "--num-sampled",
    "4",
    "--quiet",
]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text(
        "alice bob\nbob carol\ncarol alice\ncarol dave\ndave erin\nerin frank\nfrank dave\n"
    )
    return path


def test_binary_output_equals_the_text_output_and_loads_in_gensim(edges, tmp_path):
    runner = CliRunner()
    for name, extra in (("t.emb", []), ("b.bin", ["--binary"])):
        r = runner.invoke(
            cli, ["train", "--graph", str(edges), "--out", str(tmp_path / name), *SMALL, *extra]
        )
        assert r.exit_code == 0, r.output
    text_ids, text = read_word2vec(tmp_path / "t.emb")
    bin_ids, binary = read_word2vec(tmp_path / "b.bin")
    assert bin_ids == text_ids and (tmp_path / "b.bin").read_bytes().startswith(b"6 8\nalice ")
    np.testing.assert_array_equal(binary, text)
    gensim = pytest.importorskip("gensim")
    kv = gensim.models.KeyedVectors.load_word2vec_format(str(tmp_path / "b.bin"), binary=True)
    np.testing.assert_array_equal(kv["dave"], text[text_ids.index("dave")])


def test_history_csv_has_a_row_per_epoch_with_rate_and_accuracies(tmp_path):
    r = CliRunner().invoke(
        cli,
        [
            "train",
            "--dataset",
            "cora-bundled",
            "--out",
            str(tmp_path / "c.emb"),
            "--history",
            str(tmp_path / "run.csv"),
            "--eval-every-epoch",
            "--dim",
            "8",
            "--feat-dim",
            "8",
            "--walks-per-node",
            "1",
            "--epochs",
            "2",
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((tmp_path / "run.csv").open()))
    assert [row["epoch"] for row in rows] == ["1", "2"]
    assert list(rows[0]) == [
        "epoch",
        "loss",
        "lr",
        "seconds",
        "pairs",
        "pairs_per_s",
        "val_acc",
        "test_acc",
    ]
    for row in rows:
        assert float(row["loss"]) > 0 and float(row["pairs_per_s"]) > 0 and int(row["pairs"]) > 0
        assert 0 < float(row["val_acc"]) <= 1 and 0 < float(row["test_acc"]) <= 1


def class_embedding(labels, signal, seed=0):
    """One-hot of the class times ``signal`` plus unit noise: the class is readable iff
    signal > 0."""
    rng = np.random.default_rng(seed)
    k = labels.max() + 1
    return (signal * np.eye(k)[labels] + rng.standard_normal((labels.size, k))).astype(np.float32)


def test_random_splits_are_stratified_disjoint_and_seeded():
    labels = np.concatenate([np.repeat(np.arange(3), [100, 60, 40]), [-1, -1]])  # 2 unlabelled
    splits = random_splits(labels, 0.5, 4, val_fraction=0.2, seed=3)
    assert len(splits) == 4
    for sp in splits:
        union = np.concatenate([sp["train"], sp["val"], sp["test"]])
        assert np.unique(union).size == union.size == 200 and union.max() < 200
        assert np.bincount(labels[sp["train"]]).tolist() == [50, 30, 20]  # 0.5 of each class
        assert sp["val"].size == 40
    again = random_splits(labels, 0.5, 4, val_fraction=0.2, seed=3)
    other = random_splits(labels, 0.5, 4, val_fraction=0.2, seed=4)
    assert all(np.array_equal(a["train"], b["train"]) for a, b in zip(splits, again))
    assert not np.array_equal(splits[0]["train"], other[0]["train"])
    assert not np.array_equal(splits[0]["train"], splits[1]["train"])
    with pytest.raises(InputError, match="cannot draw stratified splits"):
        random_splits(labels, 0.01, 2)  # 2 training nodes for 3 classes


def test_evaluate_train_fraction_scores_single_label_data_without_splits(tmp_path):
    labels = np.repeat(np.arange(4), 50)
    ids = [f"n{i}" for i in range(labels.size)]
    (tmp_path / "labels.txt").write_text("".join(f"{i} c{c}\n" for i, c in zip(ids, labels)))
    write_word2vec(tmp_path / "good.emb", ids, class_embedding(labels, 4.0))
    write_word2vec(tmp_path / "noise.emb", ids, class_embedding(labels, 0.0))
    scores = {}
    for name in ("good", "noise"):
        r = CliRunner().invoke(
            cli,
            [
                "evaluate",
                "-e",
                str(tmp_path / f"{name}.emb"),
                "--labels",
                str(tmp_path / "labels.txt"),
                "--train-fraction",
                "0.3",
                "--shuffles",
                "5",
                "--json",
                str(tmp_path / f"{name}.json"),
            ],
        )
        assert r.exit_code == 0, r.output
        res = json.loads((tmp_path / f"{name}.json").read_text())[0]
        assert len(res["test"]) == 5 and res["protocol"] == "single-label"
        scores[name] = res["test_mean"]
    assert scores["good"] > 0.9 and scores["noise"] < 0.45  # chance is 0.25
    r = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "good.emb"),
            "-e",
            str(tmp_path / "noise.emb"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--train-fraction",
            "0.3",
        ],
    )
    assert r.exit_code == 1 and "add --val-fraction" in r.output
    r = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "good.emb"),
            "-e",
            str(tmp_path / "noise.emb"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--train-fraction",
            "0.3",
            "--val-fraction",
            "0.2",
        ],
    )
    assert r.exit_code == 0 and "epoch selected on validation" in r.output
    r = CliRunner().invoke(
        cli,
        ["evaluate", "-e", str(tmp_path / "good.emb"), "--labels", str(tmp_path / "labels.txt")],
    )
    # neither --splits nor --train-fraction: seeded random splits, said so
    assert r.exit_code == 0 and "note: no --splits or --train-fraction" in r.output
    r = CliRunner().invoke(
        cli,
        [
            "evaluate",
            "-e",
            str(tmp_path / "good.emb"),
            "--labels",
            str(tmp_path / "labels.txt"),
            "--train-fraction",
            "0.3",
            "--splits",
            str(tmp_path / "labels.txt"),
        ],
    )
    assert r.exit_code == 2 and "at most one of --splits and --train-fraction" in r.output
