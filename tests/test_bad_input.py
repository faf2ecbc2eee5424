"""Bad input through the command line, and outputs that are never lost (docs/reliability.md).

Every bad input a user can give ``train`` or ``evaluate`` must end with exit code 1
(bad data) or 2 (click's usage errors), and the last line on stderr must be one line:
``error: <file>:<line>: <what is wrong>; <fix>`` (``Error: ...`` naming the option for
usage errors), with no traceback and nothing on stdout.  Legitimate but surprising
input (self loops, duplicate edges, isolated nodes) gives ``warning:`` lines with
counts and a normal run.

Most cases run in-process with click's CliRunner (a subprocess costs ~2 s of
imports); three subprocess tests check the real process, its exit code and --debug.

Outputs: an existing file is never replaced without --overwrite, and a write that
fails midway (a full disk, a kill) leaves the previous file exactly as it was.
"""

import errno
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.io import atomic
from caps2ne_np.io.npy import load_npy, save_npy, save_npz
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec
from caps2ne_np.training import checkpoint

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "--epochs",
    "1",
    "--dim",
    "4",
    "--feat-dim",
    "4",
    "--walks-per-node",
    "1",
    "--threads",
    "1",
    "--quiet",
]
GRAPH = "a b\nb c\nc d\nd a\na c\n"  # 4 nodes a, b, c, d; every node has edges
LABELS = "a 0\nb 1\nc 0\nd 1\n"
SPLIT = {"train": ["a", "b"], "val": ["c"], "test": ["d"]}


# ---- helpers ----------------------------------------------------------------------


@pytest.fixture
def run(tmp_path, monkeypatch):
    """run(*args) -> click Result, invoked in tmp_path so messages show relative names."""
    monkeypatch.chdir(tmp_path)

    def invoke(*args):
        return CliRunner().invoke(cli, [str(a) for a in args])

    return invoke


def put(tmp_path, name, content):
    """Write text, bytes, an array (.npy), a sparse matrix (.npz) or JSON-able data to
    tmp_path/name."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif sp.issparse(content):
        sp.save_npz(path, content)
    elif isinstance(content, np.ndarray):
        np.save(path, content, allow_pickle=content.dtype.hasobject)
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def assert_error(result, where, what=(), code=1):
    """Exit ``code``; the last stderr line is one ``error:`` line starting with ``where``."""
    assert result.exit_code == code, (result.exit_code, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # stdout carries only results
    last = result.stderr.rstrip("\n").splitlines()[-1]
    prefix = "Error: " if code == 2 else "error: "
    assert last.startswith(prefix + where), result.stderr
    for needle in (what,) if isinstance(what, str) else what:
        assert needle in last, result.stderr
    others = result.stderr.rstrip("\n").splitlines()[:-1]
    if code == 1:  # before the error: only warnings and the run's own summary lines
        assert all(
            line.startswith(("warning:", "graph:", "trained ", "wrote ")) for line in others
        ), result.stderr
    return last


def _trained(result):
    return any(line.startswith("trained ") for line in result.stderr.splitlines())


def train(run, *extra, graph="g.txt", out="out.emb", quiet=True):
    """A tiny training run; ``quiet=False`` keeps the default log level (-q prints only
    errors, so tests of warnings and progress lines need it)."""
    tiny = TINY if quiet else [a for a in TINY if a != "--quiet"]
    return run("train", "--graph", graph, "--out", out, *tiny, *extra)


# ---- 1. edge lists -----------------------------------------------------------------

EDGE_LISTS = [
    pytest.param("", "g.txt: ", "no edges in 0 line(s)", id="empty"),
    pytest.param("# header only\n\n   \n", "g.txt: ", "no edges in 3 line(s)", id="comments-only"),
    pytest.param("a b\nc\n", "g.txt:2: ", "line has 1 field 'c'", id="one-token"),
    pytest.param("a b\nb c 1 2\n", "g.txt:2: ", "line has 4 fields", id="four-tokens"),
    # ids with spaces in a tab-separated file: the message says why
    pytest.param(
        "Evelyn Jefferson\tE1\n",
        "g.txt:1: ",
        ["weight 'E1' is not a number", "split at every space and tab", "cannot contain a space"],
        id="tab-separated-id-with-a-space",
    ),
    pytest.param(
        "Evelyn Jefferson\tEvent 1\n",
        "g.txt:1: ",
        ["line has 4 fields", "a node id cannot contain a space"],
        id="tab-separated-ids-with-spaces",
    ),
    pytest.param(
        "a b\nb c heavy\n", "g.txt:2: ", "weight 'heavy' is not a number", id="weight-not-numeric"
    ),
    pytest.param(
        "a b 1,5\n", "g.txt:1: ", "weight '1,5' is not a number", id="weight-decimal-comma"
    ),
    pytest.param(
        "a b\nb c -1\n", "g.txt:2: ", "weight '-1' is not a finite number > 0", id="weight-negative"
    ),
    pytest.param("a b 0\n", "g.txt:1: ", "weight '0' is not a finite number > 0", id="weight-zero"),
    pytest.param(
        "a b nan\n", "g.txt:1: ", "weight 'nan' is not a finite number > 0", id="weight-nan"
    ),
    pytest.param(
        "a b inf\n", "g.txt:1: ", "weight 'inf' is not a finite number > 0", id="weight-inf"
    ),
    pytest.param(
        "a b -inf\n", "g.txt:1: ", "weight '-inf' is not a finite number > 0", id="weight-minus-inf"
    ),
    pytest.param("a b 1e39\n", "g.txt:1: ", "fits in float32", id="weight-overflows-float32"),
    pytest.param("a b 1e-50\n", "g.txt:1: ", "fits in float32", id="weight-underflows-float32"),
    pytest.param(b"a b\nc\x00d e\n", "g.txt:2: ", "binary content (NUL byte)", id="binary-nul"),
    pytest.param("a b\nb c\n".encode("utf-16"), "g.txt:1: ", "binary content", id="utf16"),
    pytest.param(
        "a b\nb caf\xe9\n".encode("latin-1"), "g.txt:2: ", "invalid UTF-8 (byte 0xe9)", id="latin1"
    ),
    pytest.param(
        "a a\nb b\n", "g.txt: ", "no edges left after dropping 2 self loops", id="only-self-loops"
    ),
]


@pytest.mark.parametrize("content,where,what", EDGE_LISTS)
def test_bad_edge_list_is_one_line_naming_file_and_line(run, tmp_path, content, where, what):
    put(tmp_path, "g.txt", content)
    assert_error(train(run), where, what)
    assert not (tmp_path / "out.emb").exists()


def test_missing_graph_file(run):
    assert_error(train(run, graph="nope.txt"), "nope.txt: ", "no such file")


def test_graph_that_is_a_directory_is_a_usage_error(run, tmp_path):
    (tmp_path / "d").mkdir()
    assert_error(train(run, graph="d"), "Invalid value for '--graph'", "is a directory", code=2)


def _npz_with(tmp_path, name, fmt, **arrays):
    np.savez(tmp_path / name, format=np.array(fmt), **arrays)


MATRIX_GRAPHS = [
    pytest.param(
        lambda d: put(d, "g.npz", b"not a zip at all"),
        "g.npz",
        "g.npz: ",
        "not a scipy.sparse .npz",
        id="npz-junk",
    ),
    pytest.param(
        lambda d: _npz_with(
            d,
            "g.npz",
            "csr",
            shape=np.array([2, 2]),
            data=np.ones(2),
            indices=np.array([0, 7]),
            indptr=np.array([0, 1, 2]),
        ),
        "g.npz",
        "g.npz: ",
        "not a scipy.sparse .npz",
        id="npz-index-out-of-range",
    ),
    pytest.param(
        lambda d: _npz_with(
            d,
            "g.npz",
            "csr",
            shape=np.array([2, 2]),
            data=np.ones(2),
            indices=np.array([0, 1]),
            indptr=np.array([0, 5, 2]),
        ),
        "g.npz",
        "g.npz: ",
        "not a scipy.sparse .npz",
        id="npz-bad-indptr",
    ),
    pytest.param(
        lambda d: _npz_with(
            d,
            "g.npz",
            "csr",
            shape=np.array([2, 2]),
            data=np.ones(1),
            indices=np.array([1]),
            indptr=np.array([0, 1, 0]),
        ),
        "g.npz",
        "g.npz: ",
        "not a scipy.sparse .npz",
        id="npz-indptr-ends-at-0",
    ),
    pytest.param(
        lambda d: sp.save_npz(d / "g.npz", sp.csr_matrix(np.array([[0.0, -1.0], [-1.0, 0.0]]))),
        "g.npz",
        "g.npz: ",
        "bad adjacency matrix",
        id="npz-negative-weight",
    ),
    pytest.param(
        lambda d: sp.save_npz(d / "g.npz", sp.csr_matrix(np.ones((2, 3)))),
        "g.npz",
        "g.npz: ",
        "square",
        id="npz-not-square",
    ),
    pytest.param(
        lambda d: put(d, "g.mat", b"MATLAB junk"),
        "g.mat",
        "g.mat: ",
        "not a MATLAB .mat file",
        id="mat-junk",
    ),
    pytest.param(
        lambda d: scipy.io.savemat(d / "g.mat", {"a": np.ones(2), "b": np.ones(3)}),
        "g.mat",
        "g.mat: ",
        "expected a sparse matrix named 'network'",
        id="mat-no-network",
    ),
]


@pytest.mark.parametrize("make,name,where,what", MATRIX_GRAPHS)
def test_bad_matrix_graph_file(run, tmp_path, make, name, where, what):
    make(tmp_path)
    assert_error(train(run, graph=name), where, what)


# ---- 1. features ---------------------------------------------------------------------

_nan = np.ones((4, 2))
_nan[2, 1] = np.nan
_inf = np.ones((4, 2))
_inf[0, 0] = np.inf
_huge = np.ones((4, 2))
_huge[1, 0] = 1e300  # finite in float64, inf in float32

FEATURES = [
    pytest.param(
        "f.npy", np.ones((3, 2)), "f.npy: ", "3 feature rows for 4 nodes", id="too-few-rows"
    ),
    pytest.param(
        "f.npy", np.ones((5, 2)), "f.npy: ", "5 feature rows for 4 nodes", id="too-many-rows"
    ),
    pytest.param("f.npy", _nan, "f.npy: ", "features contain NaN or inf", id="nan"),
    pytest.param("f.npy", _inf, "f.npy: ", "features contain NaN or inf", id="inf"),
    pytest.param("f.npy", _huge, "f.npy: ", "beyond float32", id="beyond-float32"),
    pytest.param(
        "f.npz", sp.csr_matrix(_inf), "f.npz: ", "features contain NaN or inf", id="sparse-inf"
    ),
    pytest.param(
        "f.npz", sp.csr_matrix(_nan), "f.npz: ", "features contain NaN or inf", id="sparse-nan"
    ),
    pytest.param("f.npy", np.ones(4), "f.npy: ", "expected a 2-D real", id="one-dimensional"),
    pytest.param(
        "f.npy", np.array([["x", "y"]] * 4), "f.npy: ", "expected a 2-D real", id="strings"
    ),
    pytest.param(
        "f.npy", np.ones((4, 2), dtype=complex), "f.npy: ", "expected a 2-D real", id="complex"
    ),
    pytest.param(
        "f.npy",
        np.array([[{}, 1]] * 4, dtype=object),
        "f.npy: ",
        "holds Python objects",
        id="pickled-objects",
    ),
    pytest.param("f.npy", b"1,2\n3,4\n", "f.npy: ", "not an .npy file", id="npy-junk"),
    pytest.param("f.npy", "truncated", "f.npy: ", "truncated", id="npy-truncated"),
    pytest.param("f.npz", b"junk", "f.npz: ", "not a scipy.sparse.save_npz file", id="npz-junk"),
    pytest.param(
        "f.npz",
        "bad-index",
        "f.npz: ",
        "not a scipy.sparse.save_npz file",
        id="npz-index-out-of-range",
    ),
    pytest.param("f.csv", "1,2\n", "f.csv: ", "unknown feature format", id="unknown-suffix"),
]


@pytest.mark.parametrize("name,content,where,what", FEATURES)
def test_bad_features(run, tmp_path, name, content, where, what):
    put(tmp_path, "g.txt", GRAPH)
    if isinstance(content, str) and content == "truncated":
        np.save(tmp_path / name, np.ones((4, 2)))
        (tmp_path / name).write_bytes((tmp_path / name).read_bytes()[:-5])
    elif isinstance(content, str) and content == "bad-index":
        _npz_with(
            tmp_path,
            name,
            "csr",
            shape=np.array([4, 2]),
            data=np.ones(4),
            indices=np.array([0, 1, -1, 0]),
            indptr=np.array([0, 1, 2, 3, 4]),
        )
    else:
        put(tmp_path, name, content)
    assert_error(train(run, "--features", name), where, what)


def test_missing_features_file(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--features", "nope.npy"), "nope.npy: ", "file not found")


FEATURE_IDS = [
    pytest.param("a\nb\nc\nz\n", 4, "ids.txt: ", "node 'z' is not in the graph", id="unknown-node"),
    pytest.param("a\nb\nc\n", 3, "ids.txt: ", "no feature row for node 'd'", id="node-without-row"),
    pytest.param("a\nb\nc\n", 4, "ids.txt: ", "3 node ids for 4 feature rows", id="count-mismatch"),
    pytest.param("a\nb\nc\nc\n", 4, "ids.txt:4: ", "node id 'c' repeats line 3", id="duplicate"),
    pytest.param("a\nb c\nd\n", 3, "ids.txt:2: ", "one node id per line", id="two-tokens"),
    pytest.param(
        "a\nb\nc\nd\xe9\n".encode("latin-1"), 4, "ids.txt:4: ", "invalid UTF-8", id="latin1"
    ),
    pytest.param(b"a\nb\n\x00\x00\n", 3, "ids.txt:3: ", "binary content", id="binary"),
]


@pytest.mark.parametrize("ids,rows,where,what", FEATURE_IDS)
def test_feature_rows_that_do_not_match_the_node_set(run, tmp_path, ids, rows, where, what):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "f.npy", np.ones((rows, 2)))
    put(tmp_path, "ids.txt", ids)
    assert_error(train(run, "--features", "f.npy", "--feature-ids", "ids.txt"), where, what)


# ---- 1. labels and splits ---------------------------------------------------------------

LABEL_FILES = [
    pytest.param("a 0\nz 1\n", "l.txt:2: ", "node 'z' is not in the graph", id="unknown-node"),
    pytest.param(
        "a 0 extra\n", "l.txt:1: ", "expected 'node label' (two fields), got 3", id="three-fields"
    ),
    pytest.param(
        "a 0\nb\n", "l.txt:2: ", "expected 'node label' (two fields), got 1", id="one-field"
    ),
    pytest.param("a 0\nb caf\xe9\n".encode("latin-1"), "l.txt:2: ", "invalid UTF-8", id="latin1"),
    pytest.param(b"a 0\n\x00\x01\x02", "l.txt:2: ", "binary content", id="binary"),
    pytest.param("", "l.txt: ", "no labels found", id="empty"),
    pytest.param("# nothing\n", "l.txt: ", "no labels found", id="comments-only"),
]


@pytest.mark.parametrize("content,where,what", LABEL_FILES)
def test_bad_labels_in_train(run, tmp_path, content, where, what):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "l.txt", content)
    assert_error(train(run, "--labels", "l.txt"), where, what)


def _unreadable_json():
    return '[{"train": [' + "1" * 5000 + '], "val": [], "test": []}]'


SPLIT_FILES = [
    pytest.param(
        [{"train": ["a"], "val": ["b"], "test": ["z"]}],
        "s.json: ",
        "split 0 'test': unknown node id 'z'",
        id="unknown-node",
    ),
    pytest.param(
        [SPLIT, {"train": ["q"], "val": [], "test": ["a"]}],
        "s.json: ",
        "split 1 'train': unknown node id 'q'",
        id="unknown-node-second-split",
    ),
    pytest.param(
        [{"train": ["a", "b"], "val": ["c"], "test": ["b"]}],
        "s.json: ",
        "split 0: 'train' and 'test' share 1 node(s), e.g. b",
        id="train-test-overlap",
    ),
    pytest.param(
        [{"train": ["a", "b"], "val": ["a"], "test": ["d"]}],
        "s.json: ",
        "'train' and 'val' share",
        id="train-val-overlap",
    ),
    pytest.param(
        [{"train": ["a"], "val": ["c"], "test": ["c", "d"]}],
        "s.json: ",
        "'val' and 'test' share",
        id="val-test-overlap",
    ),
    pytest.param(
        [{"train": ["a", "a"], "val": ["c"], "test": ["d"]}],
        "s.json: ",
        "listed twice",
        id="repeat",
    ),
    pytest.param(
        [{"train": ["a"], "test": ["d"]}],
        "s.json: ",
        "expected exactly the keys train, val, test",
        id="missing-key",
    ),
    pytest.param(
        [{"train": [0.5], "val": [], "test": []}],
        "s.json: ",
        "expected integer node indices",
        id="float-id",
    ),
    pytest.param([], "s.json: ", "non-empty JSON list", id="empty-list"),
    pytest.param('[{"train": ["a"],', "s.json: ", "malformed JSON at line 1", id="malformed"),
    pytest.param('[{"train": ["a"]}]'.encode("utf-16"), "s.json:1: ", "binary content", id="utf16"),
    pytest.param(
        '[{"train": ["caf\xe9"]}]'.encode("latin-1"), "s.json:1: ", "invalid UTF-8", id="latin1"
    ),
    pytest.param(_unreadable_json(), "s.json: ", "unreadable JSON", id="5000-digit-integer"),
    pytest.param("[" * 100_000, "s.json: ", "JSON", id="nested-too-deep"),
]


@pytest.mark.parametrize("content,where,what", SPLIT_FILES)
def test_bad_splits_in_train(run, tmp_path, content, where, what):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "l.txt", LABELS)
    put(tmp_path, "s.json", content)
    assert_error(train(run, "--labels", "l.txt", "--splits", "s.json"), where, what)


def test_eval_every_epoch_without_labels(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--eval-every-epoch"), "--eval-every-epoch needs labels")


def test_eval_every_epoch_with_labels_and_no_splits_draws_random_splits(run, tmp_path):
    """As evaluate does (train refused what evaluate scores)."""
    put(
        tmp_path,
        "g.txt",
        "".join(f"n{i} n{(i + 1) % 40}\nn{i} n{(i + 2) % 40}\n" for i in range(40)),
    )
    put(tmp_path, "l.txt", "".join(f"n{i} {i % 2}\n" for i in range(40)))
    result = train(run, "--labels", "l.txt", "--eval-every-epoch", quiet=False)
    assert result.exit_code == 0, result.stderr
    assert (
        "note: no --splits: scoring each epoch on 10 random stratified splits training on "
        "0.5 and validating on 0.1 of the labelled nodes (--seed 0)" in result.stderr
    )
    assert "wrote epoch 1 of 1: best validation accuracy" in result.stderr
    result = train(run, "--labels", "l.txt", "--eval-every-epoch", "--train-fraction", "0.3",
                   "--overwrite")  # fmt: skip
    assert result.exit_code == 0 and "note:" not in result.stderr, result.stderr
    both = train(run, "--labels", "l.txt", "--eval-every-epoch", "--train-fraction", "0.3",
                 "--splits", "s.json")  # fmt: skip
    assert_error(both, "give at most one of --splits and --train-fraction", code=2)


# ---- 1. options -----------------------------------------------------------------------

USAGE_ERRORS = [
    (["--walk-length", "1"], "'--walk-length'"),
    (["--walk-length", "0"], "'--walk-length'"),
    (["--dim", "0"], "'--dim'"),
    (["--dim", "-3"], "'--dim'"),
    (["--dim", "four"], "'--dim'"),
    (["--feat-dim", "0"], "'--feat-dim'"),
    (["--walks-per-node", "0"], "'--walks-per-node'"),
    (["--epochs", "0"], "'--epochs'"),
    (["--batch-size", "0"], "'--batch-size'"),
    (["--routing-iters", "0"], "'--routing-iters'"),
    (["--num-sampled", "0"], "'--num-sampled'"),
    (["--threads", "0"], "'--threads'"),
    (["--threads", "-2"], "'--threads'"),
    (["--lr", "0"], "'--lr'"),
    (["--lr", "-0.001"], "'--lr'"),
    (["--routing-scale", "0"], "'--routing-scale'"),
    (["--seed", "-1"], "'--seed'"),
    (["--checkpoint-every", "-1"], "'--checkpoint-every'"),
    (["--sampler", "zipf"], "'--sampler'"),
    (["--targets", "middle"], "'--targets'"),
    (["--targets", "3,,4"], "'--targets'"),
    (["--targets", ""], "'--targets'"),
    # ProNE's filter: theta 710 spun in the SVD past SIGTERM, mu 1e20 gave NaN
    (["--prone-theta", "710"], "'--prone-theta'"),
    (["--prone-theta", "1000"], "'--prone-theta'"),
    (["--prone-mu", "1e20"], "'--prone-mu'"),
    (["--prone-mu", "-1e300"], "'--prone-mu'"),
    (["--routing-iters", "1000000"], "'--routing-iters'"),
]


@pytest.mark.parametrize(
    "args,option", USAGE_ERRORS, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_option_out_of_range_is_a_usage_error(run, tmp_path, args, option):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, *args), f"Invalid value for {option}", code=2)


def test_graph_and_dataset_together_or_neither(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(
        train(run, "--dataset", "cora-bundled"), "give exactly one of --graph and --dataset", code=2
    )
    assert_error(run("train", *TINY), "give exactly one of --graph and --dataset", code=2)


DATA_DEPENDENT = [  # valid for some graph, wrong for this one (4 nodes): exit 1, naming the option
    pytest.param(
        ["--num-sampled", "4"],
        "--num-sampled: ",
        "smaller than the number of nodes (4), got 4",
        id="num-sampled-equals-n",
    ),
    pytest.param(
        ["--num-sampled", "100"],
        "--num-sampled: ",
        "smaller than the number of nodes (4)",
        id="num-sampled-above-n",
    ),
    pytest.param(["--lr", "nan"], "--lr: ", "positive number, got nan", id="lr-nan"),
    pytest.param(
        ["--routing-scale", "nan"],
        "--routing-scale: ",
        "must be a finite number > 0",
        id="routing-scale-nan",
    ),
]


@pytest.mark.parametrize("args,where,what", DATA_DEPENDENT)
def test_option_out_of_range_for_this_input(run, tmp_path, args, where, what):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, *args), where, what)


@pytest.mark.parametrize("targets", ["0,10", "-1", "3,3"])
def test_targets_outside_the_walk_name_the_option(run, tmp_path, targets):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--walk-length", "10", "--targets", targets), "--targets: ")


def test_targets_outside_the_walk_fail_before_training(run, tmp_path):
    """What the user sees today: exit 1, one line, no traceback (only the option name is
    missing)."""
    put(tmp_path, "g.txt", GRAPH)
    assert_error(
        train(run, "--walk-length", "10", "--targets", "0,10"), "", "must be in [0, 9], got 10"
    )
    assert not (tmp_path / "out.emb").exists()


def test_infinite_routing_scale_is_rejected_before_training(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--routing-scale", "inf"), "--routing-scale: ")


# ---- 1. evaluate -------------------------------------------------------------------------

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


# ---- 1. warnings: legitimate but surprising -------------------------------------------------

WARNINGS = [  # (edge list, options, one line per warning: the phrases it must hold)
    pytest.param(
        "a b\nb c\nc d\nd a\nb b\nc c\n", [], [["dropped 2 self loop(s)"]], id="self-loops"
    ),
    pytest.param(
        "a b\nb a\na b\nb c\nc d\nd a\n",
        [],
        [["merged 2 duplicate edge(s)", "kept at weight 1"]],
        id="duplicates",
    ),
    pytest.param(
        "a b 1\na b 2\nb c\nc d\nd a\n",
        [],
        [["merged 1 duplicate edge(s)", "weights summed"]],
        id="weighted-duplicates",
    ),
    pytest.param(
        "a b\nb c\nc d\n", ["--directed"], [["1 node(s) have no out-edges"]], id="directed-sink"
    ),
    pytest.param(
        "a b\nb c\nc d\nd a\ne e\nf f\n",  # a square: a triangle's rows propagate alike
        [],
        [["dropped 2 self loop(s)"], ["2 node(s) have no out-edges"]],
        id="isolated-by-dropped-loops",
    ),
]


def train_not_quiet(run, *extra):
    """train without --quiet: -q prints only errors, so warnings need the default level."""
    return run(
        "train",
        "--graph",
        "g.txt",
        "--out",
        "out.emb",
        *[a for a in TINY if a != "--quiet"],
        *extra,
    )


@pytest.mark.parametrize("content,extra,expected", WARNINGS)
def test_surprising_input_warns_with_counts_and_trains(run, tmp_path, content, extra, expected):
    put(tmp_path, "g.txt", content)
    result = train_not_quiet(run, *extra)
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == len(expected), result.stderr
    for line, phrases in zip(warnings, expected):
        assert line.startswith("warning: g.txt: ") and all(p in line for p in phrases), (
            result.stderr
        )
    assert "error" not in result.stderr.lower() and "Traceback" not in result.stderr
    assert (tmp_path / "out.emb").is_file()


def test_clean_input_gives_no_warning(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    result = train_not_quiet(run)
    assert result.exit_code == 0 and "warning" not in result.stderr, result.stderr


def test_quiet_hides_warnings_too(run, tmp_path):
    put(tmp_path, "g.txt", WARNINGS[0].values[0])
    result = train(run)
    assert result.exit_code == 0 and result.stderr == "", result.stderr


# ---- 2. outputs are never replaced without --overwrite ---------------------------------------

OUTPUTS = [
    pytest.param(["--out", "o.emb"], "o.emb", id="word2vec"),
    pytest.param(["--out", "x.emb", "--npy", "o.npy"], "o.npy", id="npy"),
    pytest.param(["--out", "x.emb", "--model-out", "m.npz"], "m.npz", id="model"),
]


@pytest.mark.parametrize("args,existing", OUTPUTS)
def test_existing_output_is_refused_before_training(run, tmp_path, args, existing):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, existing, "precious\n")
    result = run("train", "--graph", "g.txt", *TINY, *args)
    assert_error(result, f"{existing}: exists; pass --overwrite to replace it")
    assert not _trained(result)  # refused up front, not after the work
    assert (tmp_path / existing).read_text() == "precious\n"
    assert not (tmp_path / "x.emb").exists()


def test_overwrite_replaces_every_output(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    for name in ("o.emb", "o.npy", "m.npz"):
        put(tmp_path, name, "old\n")
    result = run(
        "train",
        "--graph",
        "g.txt",
        *TINY,
        "--out",
        "o.emb",
        "--npy",
        "o.npy",
        "--model-out",
        "m.npz",
        "--overwrite",
    )
    assert result.exit_code == 0, result.stderr
    ids, vectors = read_word2vec(tmp_path / "o.emb")
    assert load_npy(tmp_path / "o.npy")[0] == ids == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(Caps2NE.load(tmp_path / "m.npz").get_embedding(), vectors)
    assert not list(tmp_path.glob(".*.tmp"))


def test_evaluate_refuses_existing_json(run, eval_files):
    put(eval_files, "r.json", "old")
    assert_error(
        run(
            "evaluate", "-e", "e.txt", "--labels", "l.txt", "--splits", "s.json", "--json", "r.json"
        ),
        "r.json: exists; pass --overwrite",
    )
    assert (eval_files / "r.json").read_text() == "old"


def test_output_folder_missing(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, out="nodir/o.emb"), "nodir/o.emb: ", "folder nodir does not exist")


def test_existing_nodes_file_is_refused_before_training(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.nodes.txt", "precious\n")
    result = train(run, "--npy", "o.npy", out="o.emb")
    assert_error(result, "o.nodes.txt: exists")
    assert not _trained(result) and not (tmp_path / "o.emb").exists()


def test_existing_checkpoint_is_not_replaced_without_overwrite(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert train(run, "--checkpoint-dir", "ck", out="a.emb").exit_code == 0
    before = (tmp_path / "ck" / "checkpoint.npz").read_bytes()
    result = train(run, "--checkpoint-dir", "ck", "--seed", "1", out="b.emb")
    assert (tmp_path / "ck" / "checkpoint.npz").read_bytes() == before
    assert_error(result, "ck/checkpoint.npz: exists")


# ---- 2. a write that fails midway leaves the previous file intact ------------------------------


class _FailingFile:
    """A file that accepts ``room`` bytes (characters in text mode), then fails: a full disk
    or a kill."""

    def __init__(self, f, room, exc):
        self._f, self._room, self._exc = f, room, exc

    def write(self, data):
        if len(data) > self._room:
            self._f.write(data[: self._room])
            self._room = 0
            raise self._exc()
        self._room -= len(data)
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._f.close()


def _disk_full():
    return OSError(errno.ENOSPC, "No space left on device")


def _fail_temp_files(monkeypatch, room, exc=_disk_full, which=None):
    """Temp files io creates from now on fail after ``room`` bytes (only the ``which``-th one,
    if given)."""
    real, created = atomic._create_temp, []

    def create(target, binary):
        f, tmp = real(target, binary)
        created.append(target)
        if which is None or len(created) == which:
            f = _FailingFile(f, room, exc)
        return f, tmp

    monkeypatch.setattr(atomic, "_create_temp", create)
    return created


def _vectors():
    return np.arange(12, dtype=np.float32).reshape(4, 3) / 7


@pytest.fixture(scope="module")
def model():
    from caps2ne_np.graphs.csr import from_edges

    g = from_edges([0, 1, 2, 3], [1, 2, 3, 0], None, ["a", "b", "c", "d"])
    return Caps2NE(
        dim=4, feat_dim=4, walks_per_node=1, epochs=1, num_sampled=2, n_jobs=1, random_state=0
    ).fit(g)


def _save_checkpoint(directory, scale):
    """checkpoint.save with small stand-in parameters and optimiser (only the fields it reads)."""
    W = np.full((2, 3), scale, dtype=np.float32)
    params = SimpleNamespace(W=W, trainable=lambda: ["W"])
    opt = SimpleNamespace(m={"W": W * 2}, v={"W": W * 3}, t=1)
    state = {"epoch": int(scale)}
    return checkpoint.save(directory, params, opt, state, {"dim": 3}, [], "hash", lr=1e-3)


# writer: (write the previous output, write the new one with overwrite, the files that must survive)
WRITERS = {
    "word2vec-text": (
        lambda p, m: write_word2vec(p / "e.txt", list("abcd"), _vectors()),
        lambda p, m: write_word2vec(p / "e.txt", list("abcd"), _vectors() + 1, overwrite=True),
        ["e.txt"],
    ),
    "word2vec-binary": (
        lambda p, m: write_word2vec(p / "e.bin", list("abcd"), _vectors(), binary=True),
        lambda p, m: write_word2vec(
            p / "e.bin", list("abcd"), _vectors() + 1, overwrite=True, binary=True
        ),
        ["e.bin"],
    ),
    "npy": (
        lambda p, m: save_npy(p / "e.npy", _vectors(), list("abcd")),
        lambda p, m: save_npy(p / "e.npy", _vectors() + 1, list("wxyz"), overwrite=True),
        ["e.npy", "e.nodes.txt"],
    ),
    "model-npz": (
        lambda p, m: m.save(p / "m.npz"),
        lambda p, m: m.save(p / "m.npz", overwrite=True),
        ["m.npz"],
    ),
    "checkpoint": (
        lambda p, m: (_save_checkpoint(p / "ck", 1.0), _save_checkpoint(p / "ck", 2.0)),
        lambda p, m: _save_checkpoint(p / "ck", 3.0),
        ["ck/checkpoint.npz", "ck/checkpoint.prev.npz"],
    ),
}


@pytest.mark.parametrize("room", [0, 20, 60], ids=lambda r: f"after-{r}-bytes")
@pytest.mark.parametrize("exc", [_disk_full, KeyboardInterrupt], ids=["disk-full", "killed"])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_interrupted_write_keeps_the_previous_output(
    tmp_path, monkeypatch, model, writer, exc, room
):
    write_old, write_new, names = WRITERS[writer]
    write_old(tmp_path, model)
    before = {name: (tmp_path / name).read_bytes() for name in names}
    _fail_temp_files(monkeypatch, room, exc)
    with pytest.raises(OSError if exc is _disk_full else KeyboardInterrupt) as err:
        write_new(tmp_path, model)
    if exc is _disk_full:  # the error names the file being written, for the one-line CLI message
        assert Path(err.value.filename).parent == (tmp_path / names[0]).parent
    assert {name: (tmp_path / name).read_bytes() for name in names} == before
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    monkeypatch.undo()
    if writer == "checkpoint":
        assert checkpoint.load(tmp_path / "ck")["state"] == {"epoch": 2}


def test_failed_nodes_file_keeps_the_previous_npy_pair(tmp_path, monkeypatch):
    """The .npy and its .nodes.txt are written in full before either is renamed: no new
    matrix with old ids."""
    save_npy(tmp_path / "e.npy", _vectors(), list("abcd"))
    before = load_npy(tmp_path / "e.npy")
    created = _fail_temp_files(
        monkeypatch, 0, which=2
    )  # the second temp file, the ids, hits a full disk
    with pytest.raises(OSError, match="No space left"):
        save_npy(tmp_path / "e.npy", _vectors() + 1, list("wxyz"), overwrite=True)
    assert [t.name for t in created] == ["e.npy", "e.nodes.txt"]
    ids, vectors = load_npy(tmp_path / "e.npy")
    assert ids == before[0] and np.array_equal(vectors, before[1])


def test_checkpoint_killed_between_renames_still_resumes(tmp_path, monkeypatch):
    import os

    _save_checkpoint(tmp_path, 1.0)
    real_replace = os.replace

    def replace(src, dst):  # killed just before the new checkpoint takes the name checkpoint.npz
        if Path(dst).name == checkpoint.LATEST:
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        _save_checkpoint(tmp_path, 2.0)
    monkeypatch.undo()
    assert checkpoint.load(tmp_path)["state"]["epoch"] in (1, 2)


def test_cli_disk_full_names_the_file_and_keeps_the_old_one(run, tmp_path, monkeypatch):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.emb", "precious\n")
    _fail_temp_files(monkeypatch, 50)
    assert_error(train(run, "--overwrite", out="o.emb"), "o.emb: No space left on device")
    assert (tmp_path / "o.emb").read_text() == "precious\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_interrupted_run_keeps_the_old_output(run, tmp_path, monkeypatch):
    from caps2ne_np.walks import walks

    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.emb", "precious\n")

    def interrupted(*args, **kwargs):  # Ctrl-C while the walks are drawn, early in training
        raise KeyboardInterrupt

    monkeypatch.setattr(walks.WalkSource, "walks", interrupted)
    assert_error(
        train(run, "--overwrite", out="o.emb"), "interrupted; no output was written", code=130
    )
    assert (tmp_path / "o.emb").read_text() == "precious\n"


# ---- the real process: exit codes, one line, --debug ------------------------------------------


def cli_process(*args, cwd):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_process_bad_line_is_one_line_exit_1(tmp_path):
    put(tmp_path, "g.txt", "a b\nc\n")
    proc = cli_process("train", "--graph", "g.txt", *TINY, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        "error: g.txt:2: line has 1 field 'c'; expected 'u v' or 'u v w' "
        "(whitespace separated, '#' starts a comment)\n"
    )


def test_process_usage_error_exit_2(tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    proc = cli_process("train", "--graph", "g.txt", "--walk-length", "1", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("Error: Invalid value for '--walk-length'")


def test_process_debug_shows_the_traceback(tmp_path):
    put(tmp_path, "g.txt", "a b\nc\n")
    proc = cli_process("train", "--graph", "g.txt", *TINY, "--debug", cwd=tmp_path)
    assert proc.returncode == 1
    assert (
        "Traceback" in proc.stderr and "GraphFormatError: g.txt:2: line has 1 field" in proc.stderr
    )


def shell_process(command, cwd):
    """``sh -c command`` with ``cli`` standing for this checkout's cli.py: for the shell's
    own redirections (a closed stdin or stderr)."""
    cli_py = f"{sys.executable} {ROOT / 'cli.py'}"
    return subprocess.run(
        ["sh", "-c", command.replace("cli ", cli_py + " ", 1)],
        cwd=cwd,
        capture_output=True,
        timeout=300,
    )


def test_stdout_carries_only_embeddings_when_stderr_is_closed(tmp_path):
    """2>&-: tqdm and the log lines fell back to stdout, inside the embeddings."""
    put(tmp_path, "g.txt", GRAPH)
    args = " ".join(a for a in TINY if a != "--quiet")  # with the log lines and warnings
    proc = shell_process(f"cli train --graph g.txt --out - {args} 2>&-", tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.decode().splitlines()
    assert lines[0] == "4 4" and len(lines) == 5, lines
    assert all(len(line.split()) == 5 for line in lines[1:]), lines


def test_graph_from_a_closed_stdin_is_one_line(tmp_path):
    proc = shell_process("cli train --graph - --out cs.emb <&-", tmp_path)
    assert proc.returncode == 1 and proc.stdout == b""
    err = proc.stderr.decode().strip()
    assert err == "error: <stdin>: standard input is closed; pipe the edges in or name a file"
    assert not (tmp_path / "cs.emb").exists()


def test_parallel_async_with_the_ray_engine_is_a_usage_error_before_loading(run, tmp_path):
    """An option conflict: exit 2, and the graph (here missing) is never read."""
    result = train(run, "--parallel", "async", "--engine", "ray", graph="missing.txt")
    assert_error(result, "--parallel async", ["--engine ray"], code=2)


# ---- messages that pointed the wrong way ------------------------


WRONG_WAY = [
    # lambda L_sg overflows: the weight is the cause, not the rate
    (["--skipgram-weight", "1e40"], "", ["became", "lower --skipgram-weight (now 1e+40"]),
    # O starts from ProNE at d = k: --dim, not --spectral-dim
    (["--spectral", "init_xo", "--dim", "8", "--feat-dim", "2"], "--dim 8:", ["lower --dim"]),
    (
        ["--skipgram-weight", "1", "--spectral", "features"],
        "--skipgram-weight:",
        ["--spectral features makes x ProNE's fixed features"],
    ),
    (
        ["--skipgram-weight", "1", "--skipgram-negatives", "1000000000"],
        "training with",
        ["--skipgram-negatives 1000000000", "needs about"],
    ),
]


@pytest.mark.parametrize(
    "args,where,what", WRONG_WAY, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_messages_name_the_option_that_is_the_cause(run, tmp_path, args, where, what):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, *args), where, what)


def test_a_model_path_that_is_no_regular_file_says_what_it_is(run, tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    for path in ("/dev/null", str(tmp_path / "fifo")):
        with pytest.raises(Exception, match="is not a regular file"):
            Caps2NE.load(path)
    with pytest.raises(Exception, match="is not a regular file"):
        Caps2NE.load("/dev/zero")
    with pytest.raises(Exception, match="an empty path was given"):
        Caps2NE.load("")
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "nodes.txt", "a\n")
    result = run("infer", "--model", "/dev/null", "--graph", "g.txt", "--nodes", "nodes.txt")
    assert_error(result, "/dev/null: is not a regular file")


def test_a_checkpoint_given_as_a_model_says_so(run, tmp_path):
    save_npz(tmp_path / "checkpoint.npz", overwrite=True, format=np.asarray(checkpoint.FORMAT))
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "nodes.txt", "a\n")
    result = run("infer", "--model", "checkpoint.npz", "--graph", "g.txt", "--nodes", "nodes.txt")
    assert_error(result, "checkpoint.npz: a training checkpoint, not a model file", ["--resume"])


def test_resuming_a_ray_checkpoint_without_the_ray_engine_says_so(run, tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "driver.npz").write_bytes(b"")
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--resume", "ck"), "ck: a checkpoint of --engine ray", ["--engine ray"])


def test_a_reader_that_closes_stdout_gets_one_line_and_exit_141(tmp_path):
    """`train --out - | head` printed 'error: [Errno 32] Broken pipe'."""
    put(tmp_path, "g.txt", "".join(f"n{i} n{(i + 1) % 300}\n" for i in range(300)))
    args = "--dim 256 --feat-dim 4 --epochs 1 --walks-per-node 1 --threads 1 --quiet"
    proc = shell_process(f"(cli train --graph g.txt --out - {args}; echo $? > rc) | true", tmp_path)
    assert (tmp_path / "rc").read_text().strip() == "141"
    assert proc.stderr.decode().strip() == (
        "error: standard output was closed by its reader (a pipe such as head): what was "
        "written there is cut short"
    )


def test_cli_outputs_of_one_run_are_committed_together(run, tmp_path, monkeypatch):
    """--model-out on a full disk after --out and --npy were written: none is replaced
    (the embeddings were already replaced when the model write failed)."""
    put(tmp_path, "g.txt", GRAPH)
    outputs = {"o.emb": b"old emb\n", "o.npy": b"old npy", "o.nodes.txt": b"old ids\n",
               "m.npz": b"old model"}  # fmt: skip
    for name, content in outputs.items():
        (tmp_path / name).write_bytes(content)
    real, created = atomic._create_temp, []

    def create(target, binary):
        f, tmp = real(target, binary)
        created.append(Path(target).name)
        return (_FailingFile(f, 0, _disk_full) if Path(target).name == "m.npz" else f), tmp

    monkeypatch.setattr(atomic, "_create_temp", create)
    result = train(run, "--overwrite", "--npy", "o.npy", "--model-out", "m.npz", out="o.emb")
    assert_error(result, "m.npz: No space left on device")
    assert created == ["o.emb", "o.npy", "o.nodes.txt", "m.npz"]  # all written, then failed
    assert {name: (tmp_path / name).read_bytes() for name in outputs} == outputs
    assert not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setattr(atomic, "_create_temp", real)  # (undo() would also undo the chdir)
    again = train(run, "--overwrite", "--npy", "o.npy", "--model-out", "m.npz", out="o.emb")
    assert again.exit_code == 0, again.stderr
    assert all((tmp_path / name).read_bytes() != old for name, old in outputs.items())
