"""``caps2ne evaluate`` as a user runs it: scores of ``infer``'s output in one command. Every
bad embeddings, labels or splits file and every bad option ends in one line (exit 1 or 2),
and an existing JSON is not replaced. --json - writes only JSON to stdout; a tiny fraction
is one line; multilabel labels with splits are refused and scoring leaves out unlabelled
nodes. --train-fraction scores single-label data without a splits file."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec
from clirun import (
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
)


def test_evaluate_scores_infers_output_in_one_command(tmp_path):
    """infer writes only the new nodes; scoring them took a hand-built embeddings file
    (train's and infer's rows) and a splits file.  ``--inferred`` takes infer's file as
    it is: the classifier is fitted on the -e nodes' embeddings (the training nodes)
    and tested on the inferred nodes, with the whole labels file."""
    import json

    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.io.word2vec import write_word2vec

    rng = np.random.default_rng(0)
    centre = {"x": np.array([4.0, 0, 0]), "y": np.array([0, 4.0, 0])}
    label = {f"n{i}": "x" if i % 2 else "y" for i in range(30)}
    old, new = [f"n{i}" for i in range(20)], [f"n{i}" for i in range(20, 30)]

    def rows(ids):
        return np.stack([centre[label[i]] + rng.normal(0, 0.3, 3) for i in ids])

    write_word2vec(tmp_path / "train.emb", old, rows(old).astype(np.float32))
    E_new = rows(new)
    E_new[:5] = np.stack([centre["y" if label[i] == "x" else "x"] for i in new[:5]])  # wrong
    write_word2vec(tmp_path / "new.emb", new, E_new.astype(np.float32))
    (tmp_path / "labels.txt").write_text("".join(f"{n} {c}\n" for n, c in label.items()))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli,
        ["evaluate", "-e", str(tmp_path / "train.emb"), "--inferred", str(tmp_path / "new.emb")]
        + ["--labels", str(tmp_path / "labels.txt"), "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    (r,) = json.loads(out.read_text())
    assert r["test_mean"] == pytest.approx(0.5)  # 5 of the 10 inferred nodes, trained on 20


EVAL_IDS = [f"n{i}" for i in range(8)]


@pytest.fixture
def eval_files(tmp_path):
    write_word2vec(tmp_path / "e.txt", EVAL_IDS, np.eye(8, 4, dtype=np.float32))
    put(tmp_path, "l.txt", "".join(f"n{i} {i % 2}\n" for i in range(8)))
    put(tmp_path, "s.json", [{"train": EVAL_IDS[:4], "val": EVAL_IDS[4:6], "test": EVAL_IDS[6:]}])
    return tmp_path


BAD_EMBEDDINGS = [
    pytest.param("e2.txt", "", "e2.txt:1: ", "header", id="empty"),
    pytest.param("e2.txt", "eight four\n", "e2.txt:1: ", "header", id="bad-header"),
    pytest.param(
        "e2.txt",
        "2 2\nn0 1 2\n",
        "e2.txt:3: ",
        "header promises 2 rows, the file has 1",
        id="rows-missing",
    ),
    pytest.param(
        "e2.txt", "1 2\nn0 1 x\n", "e2.txt:2: ", "value 'x' is not a number", id="not-a-number"
    ),
    pytest.param("e2.txt", "2 2\nn0 1 2\nn1 1\n", "e2.txt:3: ", "row has 2 fields", id="short-row"),
    pytest.param(
        "e2.txt", "2 2\nn0 1 2\nn0 3 4\n", "e2.txt:3: ", "duplicate id 'n0'", id="duplicate-id"
    ),
    pytest.param(
        "e2.txt", "2 2\nn0 1 2\nn1 nan 4\n", "e2.txt:3: ", "value 'nan' is not finite", id="nan"
    ),
    pytest.param(
        "e2.txt", "2 2\nn0 1 -inf\nn1 1 4\n", "e2.txt:2: ", "value '-inf' is not finite", id="inf"
    ),
    pytest.param(
        "e2.txt", "1 99999999999\nn0 1\n", "e2.txt:2: ", "row has 2 fields", id="huge-dim"
    ),
    pytest.param(
        "e2.txt", b"99999999 3\n\xff\xfe\x00", "e2.txt: ", "truncated", id="binary-truncated"
    ),
    pytest.param("e2.npy", b"junk", "e2.npy: ", "not an .npy file", id="npy-junk"),
    pytest.param("e2.npy", np.array([[1.0, np.nan]]), "e2.npy: ", "not finite", id="npy-nan"),
]


@pytest.mark.parametrize("name,content,where,what", BAD_EMBEDDINGS)
def test_bad_embeddings_in_evaluate(run, eval_files, name, content, where, what):
    put(eval_files, name, content)
    assert_error(
        run("evaluate", "-e", name, "--labels", "l.txt", "--splits", "s.json"), where, what
    )


def test_missing_embeddings_file(run, eval_files):
    assert_error(
        run("evaluate", "-e", "nope.txt", "--labels", "l.txt"), "nope.txt: ", "no such file"
    )


def test_missing_labels_file(run, eval_files):
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "missing.txt"), "missing.txt: ", "no such file"
    )


def test_labels_for_nodes_without_embedding(run, eval_files):
    # skipped with a note (evaluate scores the labelled nodes it has rows of); too few
    # left is the error
    put(eval_files, "l2.txt", "".join(f"n{i} {i % 2}\n" for i in range(8)) + "zz 0\n")
    result = run("evaluate", "-e", "e.txt", "--labels", "l2.txt", "--splits", "s.json")
    assert result.exit_code == 0, result.stderr
    assert "skipping 1 labelled node(s) not in the embeddings e.txt (e.g. 'zz')" in (result.stderr)
    put(eval_files, "l3.txt", "n0 0\nzz 0\n")
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "l3.txt", "--splits", "s.json"),
        "l3.txt: ",
        "1 of its 2 labelled nodes are in the embeddings e.txt (line 2: 'zz' is not)",
    )


@pytest.mark.parametrize(
    "split,what",
    [
        (
            {"train": ["n0", "n1"], "val": ["n2"], "test": ["n1"]},
            "'train' and 'test' share 1 node(s), e.g. n1",
        ),
        (
            {"train": ["n0", "n1"], "val": ["n2"], "test": ["zz"]},
            "split 0 'test': unknown node id 'zz'",
        ),
    ],
    ids=["overlap", "unknown-node"],
)
def test_bad_splits_in_evaluate(run, eval_files, split, what):
    put(eval_files, "s2.json", [split])
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "l.txt", "--splits", "s2.json"),
        "s2.json: ",
        what,
    )


def test_evaluate_single_label_without_splits_uses_random_splits(run, eval_files):
    # seeded random splits (half the labelled nodes), said on stderr
    result = run("evaluate", "-e", "e.txt", "--labels", "l.txt")
    assert result.exit_code == 0, result.output
    assert "note: no --splits or --train-fraction: scoring on 10 random stratified splits" in (
        result.output
    )


@pytest.mark.parametrize("fractions", ["0,x", "0.5,1", "0"])
def test_evaluate_bad_fractions(run, eval_files, fractions):
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "l.txt", "--fractions", fractions),
        "--fractions: ",
    )


def test_evaluate_bad_fraction_with_a_dataset(run, eval_files):
    assert_error(
        run("evaluate", "-e", "e.txt", "--dataset", "cora-bundled", "--fractions", "2"),
        "--fractions: ",
        "each fraction must be in (0, 1), got '2'",
    )


@pytest.mark.parametrize(
    "args,option", [(["--shuffles", "0"], "'--shuffles'"), (["--C", "0"], "'--C'")]
)
def test_evaluate_option_out_of_range(run, eval_files, args, option):
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "l.txt", *args),
        f"Invalid value for {option}",
        code=2,
    )


def test_evaluate_embeddings_missing_dataset_nodes(run, eval_files):
    assert_error(
        run("evaluate", "-e", "e.txt", "--dataset", "cora-bundled"),
        "e.txt: ",
        "no embedding for node '0' (2708 of 2708 nodes missing)",
    )


def test_evaluate_refuses_existing_json(run, eval_files):
    put(eval_files, "r.json", "old")
    assert_error(
        run(
            "evaluate", "-e", "e.txt", "--labels", "l.txt", "--splits", "s.json", "--json", "r.json"
        ),
        "r.json: exists; pass --overwrite",
    )
    assert (eval_files / "r.json").read_text() == "old"


def test_evaluate_json_dash_writes_only_json_to_stdout(run, tmp_path):
    write_word2vec(tmp_path / "e.txt", list("abcd"), np.eye(4, 2, dtype=np.float32))
    put(tmp_path, "l.txt", "a 0\nb 1\nc 0\nd 1\n")
    put(tmp_path, "s.json", [{"train": ["a", "b"], "val": ["c"], "test": ["d"]}])
    result = run(
        "evaluate", "-e", "e.txt", "--labels", "l.txt", "--splits", "s.json", "--json", "-"
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["protocol"] == "single-label"  # the tables went to stderr


def test_evaluate_tiny_fraction_is_one_line(run, tmp_path):
    write_word2vec(
        tmp_path / "e.txt",
        [f"n{i}" for i in range(20)],
        np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32),
    )
    put(tmp_path, "l.txt", "".join(f"n{i} {i % 2}\nn{i} {i % 3}x\n" for i in range(20)))
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "l.txt", "--fractions", "1e-9"),
        "--fractions: 1e-09 of 20 labelled nodes leaves 0 training",
    )


def test_multilabel_labels_with_splits_are_refused(run, tmp_path):
    write_word2vec(tmp_path / "e.txt", list("abcd"), np.eye(4, 2, dtype=np.float32))
    put(tmp_path, "l.txt", "a 0\na 1\nb 1\nc 0\nd 1\n")
    put(tmp_path, "s.json", [{"train": ["a", "b"], "val": ["c"], "test": ["d"]}])
    assert_error(
        run("evaluate", "-e", "e.txt", "--labels", "l.txt", "--splits", "s.json"),
        "l.txt: multi-label (a node with several labels), but --splits",
    )


def test_multilabel_scoring_leaves_out_unlabelled_nodes(run, tmp_path):
    rng = np.random.default_rng(1)
    labelled = [f"n{i}" for i in range(30)]
    ids = labelled + [f"u{i}" for i in range(30)]  # 30 nodes without a label
    write_word2vec(tmp_path / "e.txt", ids, rng.normal(size=(60, 3)).astype(np.float32))
    put(
        tmp_path,
        "l.txt",
        "".join(f"{n} {i % 2}\n{n} {2 + i % 3}\n" for i, n in enumerate(labelled)),
    )
    result = run(
        "evaluate", "-e", "e.txt", "--labels", "l.txt", "--shuffles", "2", "--json", "r.json"
    )
    assert result.exit_code == 0, result.stderr
    assert "scoring the 30 labelled nodes of 60 (30 have no label)" in result.stderr
    write_word2vec(tmp_path / "only.txt", labelled, read_word2vec(tmp_path / "e.txt")[1][:30])
    put(tmp_path, "l2.txt", (tmp_path / "l.txt").read_text())
    alone = run(
        "evaluate", "-e", "only.txt", "--labels", "l2.txt", "--shuffles", "2", "--json", "r2.json"
    )
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(
        (tmp_path / "r2.json").read_text()
    )
    assert alone.exit_code == 0


def class_embedding(labels, signal, seed=0):
    """One-hot of the class times ``signal`` plus unit noise: the class is readable iff
    signal > 0."""
    rng = np.random.default_rng(seed)
    k = labels.max() + 1
    return (signal * np.eye(k)[labels] + rng.standard_normal((labels.size, k))).astype(np.float32)


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
