"""Running the command line inside a test (docs/reliability.md): the tiny graph and options,
``run`` (click's CliRunner in tmp_path, so messages show relative names), ``put`` (write
an input file), ``assert_error`` (exit code and the one ``error:`` line), ``process``
(the real CLI in a subprocess), stand-ins for files that fail midway (a full disk, a
kill), the two labelled cliques of --eval-every-epoch, and a tiny model file.  Not a test
file: the tests of each command and module import from here."""

import errno
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.io import atomic
from caps2ne_np.io.npy import load_npz, save_npz
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


def _save_checkpoint(directory, scale):
    """checkpoint.save with small stand-in parameters and optimiser (only the fields it reads)."""
    W = np.full((2, 3), scale, dtype=np.float32)
    params = SimpleNamespace(W=W, trainable=lambda: ["W"])
    opt = SimpleNamespace(m={"W": W * 2}, v={"W": W * 3}, t=1)
    state = {"epoch": int(scale)}
    return checkpoint.save(directory, params, opt, state, {"dim": 3}, [], "hash", lr=1e-3)


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


def _damaged_model(src, dst, **changes):
    arrays = load_npz(src)
    for name, value in changes.items():
        if value is None:
            del arrays[name]
        else:
            arrays[name] = value(arrays[name]) if callable(value) else value
    save_npz(dst, overwrite=True, **arrays)
    return dst
