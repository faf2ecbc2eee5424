"""Bad input to ``caps2ne train`` (docs/reliability.md): every bad graph, features, labels or
splits file and every bad option ends with exit code 1 (bad data) or 2 (click's usage
errors), and the last line on stderr is one line: ``error: <file>:<line>: <what is wrong>;
<fix>`` (``Error: ...`` naming the option for usage errors), with no traceback and nothing
on stdout. Legitimate but surprising input (self loops, duplicate edges, isolated nodes)
gives ``warning:`` lines with counts and a normal run. The cases run in-process with click's
CliRunner (a subprocess costs ~2 s of imports). Repeated split ids, extreme routing scales,
learning rates float32 cannot hold, and absurd sizes (with the memory figure) are named."""

import warnings

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from clirun import (
    GRAPH,
    LABELS,
    SPLIT,
    TINY,
    _trained,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
    shell_process,
    train,
)

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


def test_resuming_a_ray_checkpoint_without_the_ray_engine_says_so(run, tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "driver.npz").write_bytes(b"")
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--resume", "ck"), "ck: a checkpoint of --engine ray", ["--engine ray"])


# (--routing-iters 1e9: a usage error: 100 is its most, USAGE_ERRORS above)
@pytest.mark.parametrize("option", ["--batch-size", "--walk-length", "--dim"])
def test_absurd_sizes_are_refused_with_the_memory_figure(run, tmp_path, option):
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, option, "1000000000")
    last = assert_error(result, "training with --batch-size")
    assert "of memory; this machine has" in last and f"{option} 1000000000" in last
    assert any(
        unit in last.split("needs about ")[1].split(" of memory")[0]
        for unit in (" TB", " PB", " bytes")
    )
    assert not _trained(result)


def test_repeated_split_id_is_named_by_its_id(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "l.txt", "a 0\nb 1\nc 0\nd 1\n")
    put(tmp_path, "s.json", [{"train": ["a", "b", "b"], "val": ["c"], "test": ["d"]}])
    assert_error(
        train(run, "--eval-every-epoch", "--labels", "l.txt", "--splits", "s.json"),
        "s.json: split 0 'train': node 'b' listed twice",
    )


def test_nan_from_an_extreme_routing_scale_names_it(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, "--routing-scale", "1e30", "--lr", "0.5")
    assert_error(result, "", "lower --routing-scale (now 1e+30")


def test_huge_lr_gives_no_numpy_warning(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        result = train(run, "--lr", "1e300")
    assert "RuntimeWarning" not in result.stderr
    assert_error(result, "Invalid value for '--lr'", "0<x<=1", code=2)  # refused by its range


def test_lr_that_underflows_float32_is_refused(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--lr", "1e-50"), "--lr: 1e-50 is 0 in float32")


def test_lr_below_float32_resolution_warns(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, "--lr", "1e-12", quiet=False)
    assert result.exit_code == 0, result.stderr
    assert "warning: --lr 1e-12: an Adam step" in result.stderr
