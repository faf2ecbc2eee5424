"""Reliability at the edges (docs/reliability.md): special files, pipes, colliding
outputs, signals, locks, damaged inputs and messages.

One block per kind of trouble, numbered.  Most cases run in-process with
click's CliRunner (helpers from test_bad_input.py); signals, locks and pipes use a
real process where the behaviour lives in the process.
"""

import bz2
import gzip
import json
import lzma
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.errors import GraphFormatError, InputError, InputWarning
from caps2ne_np.graphs.graph import read_graph
from caps2ne_np.graphs.graph_cache import cache_path
from caps2ne_np.io import atomic
from caps2ne_np.io.modelfile import read_model
from caps2ne_np.io.npy import load_npy, load_npz, save_npy, save_npz
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec
from caps2ne_np.training import checkpoint
from clirun import GRAPH, ROOT, TINY, _trained, assert_error, put, run, train  # noqa: F401

LOUD = [a for a in TINY if a != "--quiet"]  # -q prints only errors: info and warnings need this

# two 8-cliques joined by one edge, labelled by clique: enough for --eval-every-epoch
CLIQUES = (
    "".join(f"{c}{i} {c}{j}\n" for c in "ab" for i in range(8) for j in range(i + 1, 8)) + "a0 b0\n"
)
CLIQUE_LABELS = "".join(f"{c}{i} {c}\n" for c in "ab" for i in range(8))
CLIQUE_SPLITS = [
    {
        "train": ["a1", "a2", "b1", "b2"],
        "val": ["a3", "a4", "b3", "b4"],
        "test": ["a5", "a6", "a7", "b5", "b6", "b7"],
    }
]


def process(*args, cwd, **kwargs):
    """The real CLI of this checkout (cli.py puts its folder first on sys.path)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        **kwargs,
    )


def last_line(stderr):
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    return text.rstrip("\n").splitlines()[-1]


# ---- 1. an existing path that is not a regular file is never replaced ------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-null-symlink", "directory"])
@pytest.mark.parametrize("command", ["train", "evaluate", "writer"])
def test_special_output_path_is_refused_not_replaced(run, tmp_path, kind, command):
    target = tmp_path / "o.out"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-null-symlink":
        target.symlink_to("/dev/null")
    else:
        target.mkdir()
    before = os.stat(target).st_mode
    # a directory is click's usage error (dir_okay=False); the others are ours
    code, where = (
        (2, "Invalid value")
        if kind == "directory"
        else (1, "o.out: exists and is not a regular file")
    )
    if command == "train":
        put(tmp_path, "g.txt", GRAPH)
        result = train(run, "--overwrite", out="o.out")
        assert_error(result, where, code=code)
        assert not _trained(result)
    elif command == "evaluate":
        write_word2vec(tmp_path / "e.txt", list("abcd"), np.eye(4, 2, dtype=np.float32))
        put(tmp_path, "l.txt", "a 0\nb 1\nc 0\nd 1\n")
        put(tmp_path, "s.json", [{"train": ["a", "b"], "val": ["c"], "test": ["d"]}])
        assert_error(
            run(
                "evaluate",
                "-e",
                "e.txt",
                "--labels",
                "l.txt",
                "--splits",
                "s.json",
                "--json",
                "o.out",
                "--overwrite",
            ),
            where,
            code=code,
        )
    else:
        with pytest.raises(InputError, match="not a regular file|is a directory"):
            write_word2vec(target, ["a"], np.ones((1, 2)), overwrite=True)
    assert os.stat(target).st_mode == before  # still a FIFO / device / folder
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_out_dash_writes_the_embeddings_to_stdout(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, out="-", quiet=False)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "4 4" and sorted(line.split()[0] for line in lines[1:]) == list("abcd")
    assert "wrote embeddings to standard output" in result.stderr
    assert not (tmp_path / "-").exists()


def test_evaluate_json_dash_writes_only_json_to_stdout(run, tmp_path):
    write_word2vec(tmp_path / "e.txt", list("abcd"), np.eye(4, 2, dtype=np.float32))
    put(tmp_path, "l.txt", "a 0\nb 1\nc 0\nd 1\n")
    put(tmp_path, "s.json", [{"train": ["a", "b"], "val": ["c"], "test": ["d"]}])
    result = run(
        "evaluate", "-e", "e.txt", "--labels", "l.txt", "--splits", "s.json", "--json", "-"
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)[0]["protocol"] == "single-label"  # the tables went to stderr


def test_dash_is_refused_for_multi_file_outputs(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(
        train(run, "--npy", "-"), "--npy: '-' (standard output) is accepted by --out only", code=2
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    """A model file trained on GRAPH (for infer and the model-file checks)."""
    d = tmp_path_factory.mktemp("model")
    (d / "g.txt").write_text(GRAPH)
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--graph",
            str(d / "g.txt"),
            "--out",
            str(d / "o.emb"),
            "--model-out",
            str(d / "m.npz"),
            *TINY,
        ],
    )
    assert result.exit_code == 0, result.stderr
    (d / "new.txt").write_text("a\nc\n")
    return d


def test_infer_out_dash_writes_to_stdout(run, tmp_path, tiny_model):
    result = run(
        "infer",
        "--model",
        tiny_model / "m.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "-",
        "--aggregate",
        "mean",
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "2 4"


# ---- 2. edge lists from pipes, FIFOs, stdin and compressed files ------------------------------


def _big_graph(unusual_at=None):
    """3,002 nodes in a ring with chords; line ``unusual_at`` gets the weight '1_0' (10 in
    Python)."""
    n = 3002
    lines = [f"n{i} n{(i + 1) % n} 1" for i in range(n)] + [
        f"n{i} n{(i * 7) % n} 2" for i in range(1, n, 3)
    ]
    if unusual_at is not None:
        u, v, _ = lines[unusual_at].split()
        lines[unusual_at] = f"{u} {v} 1_0"
    return ("\n".join(lines) + "\n").encode()


def test_graph_dash_reads_stdin_once_through_both_readers(run, tmp_path):
    data = _big_graph(unusual_at=3500)  # late: the fast reader declines after reading it all
    result = run_input = CliRunner().invoke(
        cli, ["train", "--graph", "-", "--out", str(tmp_path / "o.emb"), *LOUD], input=data
    )
    assert run_input.exit_code == 0, result.stderr
    assert "graph: 3002 nodes" in result.stderr
    assert read_word2vec(tmp_path / "o.emb")[1].shape == (3002, 4)


def test_graph_dash_needs_out(run, tmp_path):
    assert_error(
        run("train", "--graph", "-", *TINY), "--graph - (standard input) needs --out", code=2
    )


def test_graph_from_a_real_pipe_is_read_in_full(tmp_path):
    (tmp_path / "g.txt").write_bytes(_big_graph(unusual_at=3500))
    cat = subprocess.Popen(["cat", str(tmp_path / "g.txt")], stdout=subprocess.PIPE)
    result = process(
        "train",
        "--graph",
        "/dev/stdin",
        "--out",
        "o.emb",
        *LOUD,
        cwd=tmp_path,
        stdin=cat.stdout,
        timeout=600,
    )
    cat.wait()
    assert result.returncode == 0, result.stderr
    assert b"graph: 3002 nodes" in result.stderr


def _read_through_fifo(tmp_path, data, **kwargs):
    """read_graph of a FIFO fed by a thread; fails (instead of hanging) if the reader blocks."""
    fifo = tmp_path / "g.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as fh:
            fh.write(data)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    out = {}

    def read():
        try:
            out["graph"] = read_graph(fifo, **kwargs)
        except Exception as err:  # noqa: BLE001 -- handed to the test
            out["error"] = err

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    if reader.is_alive():  # reopened the FIFO: unblock it, then fail
        with open(fifo, "wb"):
            pass
        reader.join(10)
        pytest.fail("reading the FIFO blocked: the careful reader reopened it")
    return out


def test_fifo_with_a_malformed_line_gives_its_error_not_a_hang(tmp_path):
    out = _read_through_fifo(tmp_path, b"a b\nb c\nc\n")
    assert isinstance(out.get("error"), GraphFormatError)
    assert str(out["error"]).startswith(f"{tmp_path / 'g.fifo'}:3: line has 1 field 'c'")


def test_fifo_with_an_unusual_weight_reads_every_node(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        out = _read_through_fifo(tmp_path, _big_graph(unusual_at=10))
    assert out["graph"].n_nodes == 3002


@pytest.mark.parametrize(
    "suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)]
)
def test_compressed_edge_lists_are_read(tmp_path, suffix, opener):
    with opener(tmp_path / f"g.txt{suffix}", "wb") as fh:
        fh.write(GRAPH.encode())
    (tmp_path / "g.txt").write_text(GRAPH)
    g, plain = read_graph(tmp_path / f"g.txt{suffix}"), read_graph(tmp_path / "g.txt")
    assert g.node_ids == plain.node_ids and np.array_equal(g.indices, plain.indices)


def test_damaged_gzip_is_one_line(run, tmp_path):
    data = gzip.compress(GRAPH.encode() * 50)
    put(tmp_path, "g.txt.gz", data[: len(data) // 2])
    assert_error(train(run, graph="g.txt.gz"), "g.txt.gz: a damaged .gz file")


def test_dev_zero_is_refused_at_once(run, tmp_path):
    t0 = time.perf_counter()
    assert_error(train(run, graph="/dev/zero"), "/dev/zero:1: binary content (NUL byte)")
    assert time.perf_counter() - t0 < 30


def test_overlong_line_in_a_stream_is_refused(run, tmp_path, monkeypatch):
    from caps2ne_np.graphs import graph

    monkeypatch.setattr(graph, "MAX_LINE_BYTES", 1000)
    put(tmp_path, "g.txt.gz", gzip.compress(b"a b\n" + b"x" * 5000 + b" y\n"))
    assert_error(train(run, graph="g.txt.gz"), "g.txt.gz: a line longer than 1000 bytes")


def test_stream_larger_than_the_cap_is_refused(tmp_path, monkeypatch):
    from caps2ne_np.graphs import graph

    monkeypatch.setattr(graph, "max_stream_bytes", lambda: 100)
    monkeypatch.setattr(graph, "_STREAM_CHUNK", 64)
    (tmp_path / "g.txt.gz").write_bytes(gzip.compress(GRAPH.encode() * 20))
    with pytest.raises(
        GraphFormatError,
        match="more than 100 bytes of text after decompression: reading it needs about 20 times",
    ):
        read_graph(tmp_path / "g.txt.gz")


# ---- 3. outputs that are the same file ----------------------------------------------------------


@pytest.mark.parametrize(
    "args,where",
    [
        (
            ["--out", "e.nodes.txt", "--npy", "e.npy"],
            "--npy's id file e.nodes.txt: the same file as --out",
        ),
        (["--out", "s.bin", "--npy", "s.bin"], "--npy s.bin: the same file as --out s.bin"),
        (
            ["--out", "s.bin", "--model-out", "s.bin"],
            "--model-out s.bin: the same file as --out s.bin",
        ),
        (
            ["--out", "o.emb", "--model-out", "alias.npz"],
            "--model-out alias.npz: the same file as --out o.emb",
        ),
        (
            ["--out", "o.emb", "--history", "./sub/../o.emb"],
            "--history ./sub/../o.emb: the same file as --out",
        ),
        (["--out", "g.txt"], "--out g.txt: the same file as input --graph g.txt"),
        (
            ["--out", "o.emb", "--model-out", "ck/checkpoint.npz", "--checkpoint-dir", "ck"],
            "--model-out ck/checkpoint.npz: the same file as checkpoint file",
        ),
    ],
    ids=[
        "npy-ids-vs-out",
        "npy-vs-out",
        "model-vs-out",
        "symlink",
        "dotdot",
        "input",
        "checkpoint",
    ],
)
def test_colliding_outputs_are_refused_before_training(run, tmp_path, args, where):
    put(tmp_path, "g.txt", GRAPH)
    (tmp_path / "sub").mkdir()
    (tmp_path / "alias.npz").symlink_to("o.emb")
    result = run("train", "--graph", "g.txt", *TINY, *args, "--overwrite")
    assert_error(result, where)
    assert not _trained(result)
    assert (tmp_path / "g.txt").read_text() == GRAPH


# ---- 4. the graph cache is keyed on the content -------------------------------------------------


def test_cache_notices_a_same_size_edit_with_the_old_mtime(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("a b\nb c\n")
    read_graph(path, cache="write")
    st = os.stat(path)
    path.write_text("a b\nb d\n")  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r
    assert read_graph(path, cache="use").node_ids == ["a", "b", "d"]


def test_cache_planted_next_to_another_graph_is_not_used(tmp_path):
    (tmp_path / "g1.txt").write_text("a b\nb c\n")
    (tmp_path / "g2.txt").write_text("x y\ny z\n")
    read_graph(tmp_path / "g1.txt", cache="write")
    cache_path(tmp_path / "g1.txt").rename(cache_path(tmp_path / "g2.txt"))
    st = os.stat(tmp_path / "g1.txt")
    os.utime(tmp_path / "g2.txt", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert read_graph(tmp_path / "g2.txt", cache="use").node_ids == ["x", "y", "z"]


def test_stdin_with_graph_cache_is_refused(run, tmp_path):
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", "-", "--out", str(tmp_path / "o.emb"), "--graph-cache", "use", *TINY],
        input=GRAPH,
    )
    assert_error(result, "<stdin>: a pipe, FIFO or device has no file to cache")


# ---- 5. --eval-every-epoch with --resume ---------------------------------------------------------

# seed 2 at this rate keeps epoch 2 of 6 (the first of several epochs at 100% validation
# accuracy), so a resumed run that forgot epochs 1-3 would keep another epoch
EVAL = [
    "--eval-every-epoch",
    "--labels",
    "l.txt",
    "--splits",
    "s.json",
    "--lr-schedule",
    "constant",
    "--lr",
    "0.2",
    "--seed",
    "2",
    "--dim",
    "4",
    "--feat-dim",
    "4",
    "--walks-per-node",
    "2",
    "--threads",
    "1",
    "--num-sampled",
    "4",
    "--spectral",
    "none",  # the random start these epochs were chosen with (ProNE became the default later)
]


def _kept(result):
    return [line for line in result.stderr.splitlines() if line.startswith("kept epoch")]


@pytest.fixture
def eval_run(run, tmp_path):
    put(tmp_path, "g.txt", CLIQUES)
    put(tmp_path, "l.txt", CLIQUE_LABELS)
    put(tmp_path, "s.json", CLIQUE_SPLITS)

    def go(out, *extra):
        result = run("train", "--graph", "g.txt", "--out", out, *EVAL, *extra)
        assert result.exit_code == 0, result.stderr
        return result

    return go


def test_resumed_eval_every_epoch_run_equals_the_uninterrupted_one(eval_run, tmp_path):
    full = eval_run("full.emb", "--epochs", "6")
    assert _kept(full)[0].startswith("kept epoch 2 ")
    eval_run("part.emb", "--epochs", "3", "--checkpoint-dir", "ck")
    resumed = eval_run("resumed.emb", "--epochs", "6", "--resume", "ck")
    assert _kept(resumed) == _kept(full)
    assert (tmp_path / "resumed.emb").read_bytes() == (tmp_path / "full.emb").read_bytes()


def test_resuming_a_finished_eval_every_epoch_run_gives_its_output(eval_run, tmp_path):
    first = eval_run("first.emb", "--epochs", "3", "--checkpoint-dir", "ck")
    again = eval_run("again.emb", "--epochs", "3", "--resume", "ck")
    assert _kept(again) == _kept(first)
    assert (tmp_path / "again.emb").read_bytes() == (tmp_path / "first.emb").read_bytes()


def test_eval_every_epoch_resume_of_a_run_without_it_is_refused(eval_run, run, tmp_path):
    assert (
        run(
            "train",
            "--graph",
            "g.txt",
            "--out",
            "a.emb",
            "--epochs",
            "2",
            "--checkpoint-dir",
            "ck",
            *EVAL[5:],
        ).exit_code
        == 0
    )
    result = run(
        "train",
        "--graph",
        "g.txt",
        "--out",
        "b.emb",
        "--epochs",
        "3",
        "--resume",
        "ck",
        *EVAL,
        "--quiet",
    )
    assert_error(result, "--eval-every-epoch: the checkpoint was written by a run without it")


# ---- 6. a model holding NaN or huge values -------------------------------------------------------


def _damaged_model(src, dst, **changes):
    arrays = load_npz(src)
    for name, value in changes.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value(arrays[name]) if callable(value) else value
    save_npz(dst, overwrite=True, **arrays)
    return dst


def _nan_first(a):
    a = a.copy()
    a.flat[0] = np.nan
    return a


@pytest.mark.parametrize(
    "changes,what",
    [
        ({"W": _nan_first}, "W holds 1 NaN or infinite values"),
        ({"O": lambda a: a + 1e30}, "O holds values up to 1e+30"),
        ({"X": lambda a: np.full_like(a, np.inf)}, "X holds 16 NaN or infinite values"),
    ],
    ids=["nan-W", "huge-O", "inf-X"],
)
def test_infer_refuses_a_model_with_nan_or_huge_values(run, tmp_path, tiny_model, changes, what):
    _damaged_model(tiny_model / "m.npz", tmp_path / "bad.npz", **changes)
    result = run(
        "infer",
        "--model",
        "bad.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
    )
    assert_error(result, "bad.npz: damaged model file", what)
    assert not (tmp_path / "n.emb").exists()


def test_infer_checks_its_output_before_writing(run, tmp_path, tiny_model, monkeypatch):
    from caps2ne_np.inference import infer

    real = infer.infer_embeddings

    def nan_out(*args, **kwargs):
        ids, E = real(*args, **kwargs)
        E[1] = np.nan
        return ids, E

    monkeypatch.setattr(infer, "infer_embeddings", nan_out)
    result = run(
        "infer",
        "--model",
        tiny_model / "m.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
        "--aggregate",
        "mean",
    )
    assert_error(result, f"{tiny_model / 'm.npz'}: 1 of 2 embeddings came out NaN or infinite")
    assert not (tmp_path / "n.emb").exists()


# ---- 7. .npy and .nodes.txt stay a pair ---------------------------------------------------------


def test_kill_between_the_npy_renames_leaves_no_mismatched_pair(tmp_path, monkeypatch):
    save_npy(tmp_path / "e.npy", np.ones((4, 2)), list("abcd"))
    real, calls = atomic.publish, []

    def publish(tmp, target, overwrite):
        calls.append(target.name)
        if len(calls) == 2:  # killed after the first rename
            raise KeyboardInterrupt
        return real(tmp, target, overwrite)

    monkeypatch.setattr(atomic, "publish", publish)
    with pytest.raises(KeyboardInterrupt):
        save_npy(tmp_path / "e.npy", np.zeros((4, 2)), list("wxyz"), overwrite=True)
    monkeypatch.undo()
    with pytest.raises(InputError, match="e.npy: no such file"):  # the old matrix went first
        load_npy(tmp_path / "e.npy")
    assert not list(tmp_path.glob(".*.tmp"))


def test_npy_pair_round_trips_and_a_hand_written_nodes_file_still_loads(tmp_path):
    save_npy(tmp_path / "e.npy", np.ones((2, 3)), ["x", "y"])
    assert load_npy(tmp_path / "e.npy")[0] == ["x", "y"]
    (tmp_path / "e.nodes.txt").write_text("p\nq\n")  # no tag line: an older or hand-made file
    assert load_npy(tmp_path / "e.npy")[0] == ["p", "q"]


# ---- 8. every output is checked before the first step -----------------------------------------


@pytest.mark.parametrize(
    "args,where",
    [
        (["--out", ""], "output path is empty"),
        (["--out", "dangling.emb"], "dangling.emb: is a dangling symbolic link"),
        (["--out", "file.txt/o.emb"], "file.txt/o.emb: folder file.txt is not a folder"),
        (
            ["--checkpoint-dir", "file.txt/ck"],
            "--checkpoint-dir file.txt/ck: file.txt is not a folder",
        ),
    ],
    ids=["empty", "dangling", "parent-is-a-file", "checkpoint-dir-is-a-file"],
)
def test_unwritable_outputs_are_found_before_training(run, tmp_path, args, where):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "file.txt", "x")
    (tmp_path / "dangling.emb").symlink_to("nowhere/x.emb")
    result = run(
        "train",
        "--graph",
        "g.txt",
        *TINY,
        *(["--out", "o.emb"] if "--out" not in args else []),
        *args,
        "--overwrite",
    )
    assert_error(result, where)
    assert not _trained(result)


@pytest.mark.skipif(
    not os.path.isdir("/sys"), reason="needs /sys, a folder no one may create files in"
)
def test_unwritable_model_out_is_found_before_out_is_written(run, tmp_path):
    try:
        os.close(os.open("/sys/.caps2ne_probe", os.O_CREAT | os.O_WRONLY | os.O_EXCL))
        os.unlink("/sys/.caps2ne_probe")
        pytest.skip("/sys is writable here")
    except OSError:
        pass
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, "--model-out", "/sys/m.npz")
    assert_error(result, "/sys/m.npz: cannot create a file in /sys")
    assert not _trained(result) and not (tmp_path / "out.emb").exists()


@pytest.mark.skipif(
    not os.path.isdir("/sys"), reason="needs /sys, a folder no one may create files in"
)
@pytest.mark.parametrize(
    "folder,says",
    [
        ("/sys/ck", "--checkpoint-dir /sys/ck: cannot create the folder in /sys"),
        ("/sys", "--checkpoint-dir /sys: cannot create its checkpoint files in /sys"),
    ],
)
def test_an_uncreatable_checkpoint_folder_is_named_as_given(run, tmp_path, folder, says):
    # the error named a file beside the first existing parent: /sys/checkpoint.npz
    try:
        os.close(os.open("/sys/.caps2ne_probe", os.O_CREAT | os.O_WRONLY | os.O_EXCL))
        os.unlink("/sys/.caps2ne_probe")
        pytest.skip("/sys is writable here")
    except OSError:
        pass
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, "--checkpoint-dir", folder)
    assert_error(result, says)
    assert "checkpoint.npz" not in result.output


# ---- 9. SIGTERM and Ctrl-C; stale temp files --------------------------------------------------


@pytest.mark.parametrize(
    "sig,code,message",
    [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")],
    ids=["sigterm", "sigint"],
)
def test_signal_ends_the_run_cleanly(tmp_path, sig, code, message):
    (tmp_path / "g.txt").write_bytes(_big_graph())
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "cli.py"),
            "train",
            "--graph",
            "g.txt",
            "--out",
            "o.emb",
            "--epochs",
            "500",
            "--dim",
            "4",
            "--feat-dim",
            "4",
            "--walks-per-node",
            "1",
            "--threads",
            "1",
            "--quiet",
            "--checkpoint-dir",
            "ck",
            "--checkpoint-every",
            "5",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # a shell without job control starts background jobs with SIGINT
        # ignored, and Python then keeps it ignored: restore the default
        # so the test does not depend on how the suite was launched
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.time() + 300
        while not (tmp_path / "ck" / "checkpoint.npz").exists() and time.time() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert last_line(err) == f"error: {message}; no output was written"
    assert b"Traceback" not in err
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) in (
        ["checkpoint.npz"],
        ["checkpoint.npz", "checkpoint.prev.npz"],
    )


def test_interruption_after_some_outputs_names_them(run, tmp_path, monkeypatch):
    from caps2ne_np.io import modelfile

    def interrupted(*args, **kwargs):  # Ctrl-C while --model-out is written
        raise KeyboardInterrupt

    monkeypatch.setattr(modelfile, "save_model", interrupted)
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, "--model-out", "m.npz")
    # the outputs of a run are committed together: none was written
    assert_error(result, "interrupted; no output was written", code=130)
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "out.emb").exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_stale_temp_files_are_removed_by_the_next_success(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert train(run, "--checkpoint-dir", "ck").exit_code == 0
    dead = 2**22 + 12345  # above the usual pid_max: no such process
    stale = [
        tmp_path / f".out.emb.{dead}-0123456789ab.tmp",
        tmp_path / "ck" / checkpoint.NEW,
        tmp_path / "ck" / f".checkpoint.new.npz.{dead}-0123456789ab.tmp",
    ]
    live = tmp_path / f".out.emb.{os.getpid()}-0123456789ab.tmp"  # a running writer's: kept
    for p in stale + [live]:
        p.write_bytes(b"junk")
    result = train(run, "--epochs", "2", "--resume", "ck", "--overwrite")
    assert result.exit_code == 0, result.stderr
    assert not any(p.exists() for p in stale) and live.exists()


# ---- 10. the checkpoint folder is locked --------------------------------------------------------


def test_second_run_on_a_locked_checkpoint_dir_names_the_holder(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from caps2ne_np.training import checkpoint\nwith checkpoint.locked('ck'):\n"
            "    print('held', flush=True); time.sleep(120)",
            str(ROOT),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"held"
        result = train(run, "--checkpoint-dir", "ck")
        assert_error(result, f"ck: in use by process {holder.pid} (lock file ck/lock)")
        assert not _trained(result)
    finally:
        holder.kill()
        holder.wait()
    assert (
        train(run, "--checkpoint-dir", "ck", "--overwrite").exit_code == 0
    )  # its flock died with it


def test_stale_lock_of_a_dead_process_is_taken_over(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "lock").write_text(f"{2**22 + 12345}\n")
    result = train(run, "--checkpoint-dir", "ck", quiet=False)
    assert result.exit_code == 0, result.stderr
    assert (
        "warning: ck/lock: taking over the lock of process 4206649, which is gone" in result.stderr
    )
    assert not (tmp_path / "ck" / "lock").exists()


# ---- 11. damaged checkpoints and model files, absurd sizes -------------------------------------


def _checkpointed(run, tmp_path, epochs=2):
    put(tmp_path, "g.txt", GRAPH)
    assert train(run, "--epochs", str(epochs), "--checkpoint-dir", "ck").exit_code == 0
    return tmp_path / "ck"


def _damage(path, **changes):
    arrays = load_npz(path)
    for name, value in changes.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value
    save_npz(path, overwrite=True, **arrays)


@pytest.mark.parametrize(
    "changes,what",
    [
        ({"state": None}, "damaged checkpoint (no state)"),
        ({"config": np.asarray("{not json")}, "damaged checkpoint (JSONDecodeError"),
        (
            {"param_O": np.zeros((3, 3), dtype=np.float32)},
            "param_O has shape (3, 3) float32, this run needs (4, 4)",
        ),
        (
            {"state": np.asarray(json.dumps({"epoch": -3, "batch": 0}))},
            "damaged checkpoint (config, history or state",
        ),
    ],
    ids=["missing-key", "bad-json", "wrong-shape", "bad-state"],
)
def test_damaged_checkpoint_is_one_line(run, tmp_path, changes, what):
    ck = _checkpointed(run, tmp_path)
    for name in (checkpoint.LATEST, checkpoint.PREVIOUS):
        _damage(ck / name, **changes)
    result = train(run, "--epochs", "3", "--resume", "ck", "--overwrite")
    assert_error(result, "ck/checkpoint", what)


def _config_with(path, **values):
    config = json.loads(str(load_npz(path)["config"]))
    return np.asarray(json.dumps(dict(config, **values)))


@pytest.mark.parametrize(
    "changes",
    [
        {"config": np.asarray("{not json")},
        {"param_O": np.zeros((3, 3), dtype=np.float32)},
        "absurd-batch",
    ],
    ids=["bad-json", "wrong-shape", "absurd-batch-size"],
)
def test_damaged_latest_checkpoint_falls_back_with_a_warning(run, tmp_path, changes):
    ck = _checkpointed(run, tmp_path)
    if changes == "absurd-batch":
        changes = {"config": _config_with(ck / checkpoint.LATEST, batch_size=10**9)}
    _damage(ck / checkpoint.LATEST, **changes)
    result = train(run, "--epochs", "3", "--resume", "ck", "--overwrite", quiet=False)
    assert result.exit_code == 0, result.stderr
    warned = [
        line for line in result.stderr.splitlines() if "ck/checkpoint.prev.npz instead" in line
    ]
    assert len(warned) == 1 and warned[0].startswith("warning: ck/checkpoint.npz: ")


@pytest.mark.parametrize(
    "changes,what",
    [
        (
            {"W": np.zeros((3, 2), dtype=np.float32)},
            "W has shape (3, 2) float32, expected a 3-D float array",
        ),
        ({"O": None}, "no O"),
        ({"X": lambda a: a[:, :2]}, "X has shape (4, 2), expected (4, 4)"),
        ({"node_ids": np.asarray(["a"])}, "1 node ids for the 4 rows of O"),
    ],
    ids=["W-shape", "no-O", "X-shape", "ids-count"],
)
def test_damaged_model_file_is_one_line(run, tmp_path, tiny_model, changes, what):
    _damaged_model(tiny_model / "m.npz", tmp_path / "bad.npz", **changes)
    with pytest.raises(InputError, match="damaged model file"):
        read_model(tmp_path / "bad.npz")
    result = run(
        "infer",
        "--model",
        "bad.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
    )
    assert_error(result, "bad.npz: damaged model file", what)


# (--routing-iters 1e9: a usage error: 100 is its most, test_bad_input)
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


def test_infer_absurd_samples_is_refused_with_the_memory_figure(run, tmp_path, tiny_model):
    result = run(
        "infer",
        "--model",
        tiny_model / "m.npz",
        "--graph",
        tiny_model / "g.txt",
        "--nodes",
        tiny_model / "new.txt",
        "--out",
        "n.emb",
        "--samples",
        "1000000000000",
        "--aggregate",
        "mean",
    )
    assert_error(result, "--samples 1000000000000 for 2 node(s)", "of memory; this machine has")


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


# ---- 12. wording ---------------------------------------------------------------------------------


def test_repeated_split_id_is_named_by_its_id(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "l.txt", "a 0\nb 1\nc 0\nd 1\n")
    put(tmp_path, "s.json", [{"train": ["a", "b", "b"], "val": ["c"], "test": ["d"]}])
    assert_error(
        train(run, "--eval-every-epoch", "--labels", "l.txt", "--splits", "s.json"),
        "s.json: split 0 'train': node 'b' listed twice",
    )


def test_lr_mismatch_on_resume_reads_as_options(run, tmp_path):
    _checkpointed(run, tmp_path)
    result = train(run, "--epochs", "3", "--resume", "ck", "--lr", "0.01", "--overwrite")
    last = assert_error(
        result, "ck/checkpoint.npz: options differ from the checkpointed run: --lr "
    )
    assert "None" not in last and "(now 0.01)" in last
    assert last.endswith(
        "resume with the same options (only --epochs, --stop, --propagate, --spectrum-power, "
        "--row-norm and --threads may change)"
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


def test_empty_graph_path_says_so(run, tmp_path):
    assert_error(run("train", "--graph", "", "--out", "o.emb", *TINY), "graph path is empty")


# ---- 13. accepted without a word, before ---------------------------------------------------------


def test_lr_that_underflows_float32_is_refused(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, "--lr", "1e-50"), "--lr: 1e-50 is 0 in float32")


def test_lr_below_float32_resolution_warns(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, "--lr", "1e-12", quiet=False)
    assert result.exit_code == 0, result.stderr
    assert "warning: --lr 1e-12: an Adam step" in result.stderr


def test_resume_with_fewer_epochs_than_the_checkpoint_is_refused(run, tmp_path):
    _checkpointed(run, tmp_path, epochs=3)
    assert_error(
        train(run, "--epochs", "2", "--resume", "ck", "--overwrite"),
        "ck/checkpoint.npz: the checkpointed run is at epoch 3, more than --epochs 2",
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


def test_text_embeddings_with_a_wrong_header_get_the_text_error(tmp_path):
    # The header says 3 values a row, the rows hold 6; each row is also, by chance, a
    # valid binary row ('ab' + ' ' + 12 bytes + newline), which the old detection read.
    (tmp_path / "e.txt").write_bytes(b"2 3\nab 1 2 3 4 5 67\ncd 1 2 3 4 5 89\n")
    with pytest.raises(InputError, match=r"e.txt:2: row has 7 fields; expected an id and 3 values"):
        read_word2vec(tmp_path / "e.txt")


def test_overwritten_output_keeps_its_mode(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.emb", "old\n")
    os.chmod(tmp_path / "o.emb", 0o600)
    assert train(run, "--overwrite", out="o.emb").exit_code == 0
    assert stat.S_IMODE(os.stat(tmp_path / "o.emb").st_mode) == 0o600
    assert (tmp_path / "o.emb").read_text().startswith("4 4\n")


def _interpreter_start():
    """Seconds this interpreter takes to start and exit (its own site imports), which no
    code of the package can shorten: the early interrupts are sent after it."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


@pytest.mark.parametrize("after", [0.0, 0.1, 0.25, 0.5])
def test_ctrl_c_while_the_command_loads_is_one_line_and_130(tmp_path, after):
    # the first half second imports click, NumPy and Numba: a KeyboardInterrupt
    # traceback there, then click's "Aborted!" with exit 1
    put(tmp_path, "g.txt", GRAPH)
    delay = 1.5 * _interpreter_start() + after
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), "train", "--graph", "g.txt", "--epochs", "1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert last_line(err) == "error: interrupted; no output was written"
    assert b"Traceback" not in err and b"Aborted" not in err
    assert not (tmp_path / "g.emb").exists()
