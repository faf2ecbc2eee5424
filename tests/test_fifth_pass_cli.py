"""The command line under hostile use: Numba's environment variables, the message of an
output that exists, the first run's compile note, option ranges, the .npy's id file.

The environment cases run ``python cli.py`` in a real process: Numba reads its
variables when it is imported, once per process."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("a b\nb c\nc a\nc d\nd e\ne f\nf d\n")
    return path


def cli_process(args, timeout=300, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "cli.py", *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tiny_train(edges, tmp_path, *extra):
    return [
        "train", "--graph", str(edges), "--out", str(tmp_path / "e.emb"), "--dim", "8",
        "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "1", *extra,
    ]  # fmt: skip


def one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return lines[0]


# ------------------------------------------------------------ Numba's thread variables


@pytest.mark.parametrize("value", ["0", "-1", "abc", "2.5", ""])
@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_a_bad_numba_num_threads_is_one_line_and_exit_1(edges, tmp_path, value, quiet):
    result = cli_process(tiny_train(edges, tmp_path, *quiet), NUMBA_NUM_THREADS=value)
    line = one_error_line(result)
    assert f"NUMBA_NUM_THREADS={value!r}" in line or f"NUMBA_NUM_THREADS={value}:" in line
    assert "whole number" in line and "unset" in line
    assert not (tmp_path / "e.emb").exists()


@pytest.mark.parametrize("layer", ["tbb", "bogus"])
def test_an_unusable_threading_layer_names_the_variable_and_the_layers_available(
    edges, tmp_path, layer
):
    try:
        import numba.np.ufunc.tbbpool  # noqa: F401
    except ImportError:
        pass
    else:
        if layer == "tbb":
            pytest.skip("TBB is installed here: the tbb layer loads")
    result = cli_process(tiny_train(edges, tmp_path, "-q"), NUMBA_THREADING_LAYER=layer)
    line = one_error_line(result)
    assert f"NUMBA_THREADING_LAYER={layer}" in line
    assert "omp" in line and "workqueue" in line  # the layers that load here
    assert not (tmp_path / "e.emb").exists()


def test_a_usable_threading_layer_passes_the_check(tmp_path):
    # evaluate runs through the same check and compiles no kernel: quick in a fresh clone
    rows = "".join(f"n{i} {i % 2} {(i * 7) % 5}\n" for i in range(20))
    (tmp_path / "e.emb").write_text("20 2\n" + rows)
    (tmp_path / "l.txt").write_text("".join(f"n{i} {i % 2}\n" for i in range(20)))
    args = ["evaluate", "-e", str(tmp_path / "e.emb"), "--labels", str(tmp_path / "l.txt")]
    result = cli_process([*args, "--shuffles", "2"], NUMBA_THREADING_LAYER="workqueue")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "error" not in result.stderr and result.stdout


# ------------------------------------------------------------ Unicode spaces in an edge list


@pytest.mark.parametrize(
    "text,what",
    [
        ("a\u00a0x b\nb c\n", "weight 'b' is not a number"),  # 3 fields: a, x, b
        ("a\u00a0x b 2\nb c\n", "line has 4 fields"),
    ],
)
def test_a_no_break_space_in_an_id_is_named_in_the_error(tmp_path, text, what):
    from caps2ne_np.errors import GraphFormatError
    from caps2ne_np.graphs.graph import read_edgelist

    path = tmp_path / "g.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GraphFormatError) as err:
        read_edgelist(path)
    message = str(err.value)
    assert f"{path}:1: {what}" in message and "\n" not in message
    assert "U+00A0" in message and "NO-BREAK SPACE" in message
    assert "separates fields" in message


def test_a_no_break_space_read_as_a_separator_is_a_warning(tmp_path):
    from caps2ne_np.errors import InputWarning
    from caps2ne_np.graphs.graph import read_edgelist

    path = tmp_path / "g.txt"
    path.write_text("a b\nb\u00a0c 2\n# c\u00a0d in a comment\n", encoding="utf-8")
    with pytest.warns(InputWarning, match=r"g\.txt:2: .*U\+00A0 \(NO-BREAK SPACE\)"):
        g = read_edgelist(path)
    assert g.node_ids == ["a", "b", "c"]


def test_an_ascii_edge_list_gives_no_space_warning(tmp_path, recwarn):
    from caps2ne_np.graphs.graph import read_edgelist

    path = tmp_path / "g.txt"
    path.write_text("a b\nb c 2\n# c\u00a0d in a comment\n", encoding="utf-8")
    read_edgelist(path)
    assert not [w for w in recwarn if "U+00A0" in str(w.message)]


# ------------------------------------------------------------ an output that exists


@pytest.mark.parametrize(
    "args,existing,option",
    [
        (["--out", "cora.emb"], "cora.emb", "--out"),
        (["--out", "x.emb", "--npy", "o.npy"], "o.npy", "--npy"),
        (["--out", "x.emb", "--history", "h.csv"], "h.csv", "--history"),
    ],
)
def test_an_existing_output_says_how_to_proceed(
    edges, tmp_path, monkeypatch, args, existing, option
):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / existing).write_text("an earlier run's\n")
    result = CliRunner().invoke(
        cli, ["train", "--graph", str(edges), "--dim", "8", "--epochs", "1", *args]
    )
    assert result.exit_code == 1
    line = result.output.strip()
    assert "\n" not in line
    assert line == (
        f"error: {existing}: exists; pass --overwrite to replace it, or give "
        f"{option} another file name"
    )
    assert (tmp_path / existing).read_text() == "an earlier run's\n"


# ------------------------------------------------------------ --lr's range


@pytest.mark.parametrize("lr", ["5", "1.5", "inf"])
def test_an_lr_beyond_one_is_a_usage_error(edges, tmp_path, lr):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    result = CliRunner().invoke(cli, tiny_train(edges, tmp_path, "--lr", lr))
    assert result.exit_code == 2, result.output
    assert "--lr" in result.output and "0<x<=1" in result.output
    assert not (tmp_path / "e.emb").exists()


def test_the_estimator_refuses_an_lr_beyond_one():
    import scipy.sparse as sp

    from caps2ne_np.errors import InputError
    from caps2ne_np.estimator.caps2ne import Caps2NE

    adj = sp.random(20, 20, density=0.3, format="lil", random_state=0)
    adj.setdiag(0)
    adj = (adj + adj.T).tocsr()
    with pytest.raises(InputError, match=r"lr: must be in \(0, 1\], got 5"):
        Caps2NE(dim=8, feat_dim=8, lr=5.0, epochs=1).fit(adj)


def test_a_high_lr_is_trained_with_a_warning(edges, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    result = CliRunner().invoke(cli, tiny_train(edges, tmp_path, "--lr", "0.1"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning: --lr")]
    assert len(lines) == 1 and "0.1" in lines[0] and "0.004" in lines[0], result.output
    quiet = CliRunner().invoke(cli, tiny_train(edges, tmp_path, "--lr", "0.01", "--overwrite"))
    assert quiet.exit_code == 0 and "warning: --lr" not in quiet.output


# ------------------------------------------------------------ the first run's compile note


def _chunk_indexes():
    """The on-disk cache index of each version of the compiled step's chunk kernel."""
    from caps2ne_np.training.step import fused

    return {
        v: v._cache._cache_file._index_path
        for v in (fused._train_chunk.parallel, fused._train_chunk.serial)
    }


def test_no_compile_note_once_the_compiled_step_is_cached(monkeypatch):
    # a fresh clone after its first default run: the chunk kernel is cached, kernels the
    # default path never calls (the skip-gram term's, the Python step's) are not
    import numba

    from caps2ne_np.training import train

    cached = set(_chunk_indexes().values())
    real = os.path.exists
    monkeypatch.setattr(
        os.path, "exists", lambda p: p in cached if str(p).endswith(".nbi") else real(p)
    )
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    assert not train._kernels_cold(fused_run=True)


def test_the_compile_note_when_the_compiled_step_is_not_cached(monkeypatch):
    from caps2ne_np.kernels.jit import Kernel
    from caps2ne_np.training import train
    from caps2ne_np.training.step import fused

    fresh = Kernel(fused._train_chunk.py_func)  # compiled neither here nor on disk
    monkeypatch.setattr(fused, "_train_chunk", fresh)
    indexes = [v._cache._cache_file._index_path for v in (fresh.parallel, fresh.serial)]
    real = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: False if p in indexes else real(p))
    assert train._kernels_cold(fused_run=True)


# ------------------------------------------------------------ the first run's compile time


def test_the_thread_trial_runs_the_parallel_chunk_on_one_thread(monkeypatch):
    # on more than one thread, the trial's one-thread rounds call the chunk kernel's
    # parallel version (on one thread: the same bits), so a first run compiles one
    # version of it, not two
    import numba

    from caps2ne_np.graphs.graph import read_edgelist
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.step import fused
    from caps2ne_np.training.train import fit

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two Numba threads")
    calls = []
    original = fused.FusedStep.train

    def spy(self, *args, parallel=False, **kwargs):
        calls.append((numba.get_num_threads(), parallel))
        return original(self, *args, parallel=parallel, **kwargs)

    monkeypatch.setattr(fused.FusedStep, "train", spy)
    g = read_edgelist(ROOT / "caps2ne_np" / "data" / "cora.edgelist")
    cfg = TrainConfig(dim=8, feat_dim=8, walks_per_node=4, epochs=1, threads=2, stop="none")
    fit(g.indptr, g.indices, g.weights, cfg)
    assert (1, True) in calls  # a trial round on one thread, with the parallel version
    assert all(parallel for _, parallel in calls)


# ------------------------------------------------------------ pytest's summary of skips


def run_pytest_quietly(tmp_path, **env):
    """``pytest -q`` with the project's setup.cfg on test_ci_skips.py's generated tests
    (two tests skip for packages, one for data, one for another reason)."""
    import shutil

    from test_ci_skips import GENERATED

    folder = tmp_path / "t"
    folder.mkdir()
    for name in ("conftest.py", "benchdata.py"):
        shutil.copyfile(ROOT / "tests" / name, folder / name)
    (folder / "test_generated.py").write_text(GENERATED)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "CAPS2NE_CI_PROVIDES")}
    args = ["-q", "-p", "no:cacheprovider", "-c", str(ROOT / "setup.cfg")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--rootdir", str(tmp_path), str(folder)],
        cwd=tmp_path,
        env=dict(
            clean,
            PYTHONPATH=str(ROOT),
            CAPS2NE_DATA=str(tmp_path / "empty-data"),
            CAPS2NE_DATA_MIRROR="http://127.0.0.1:9/",
            HOME=str(tmp_path / "home"),
            XDG_CACHE_HOME=str(tmp_path / "home" / ".cache"),
            **env,
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.stdout + proc.stderr


def test_a_quiet_run_counts_its_skips_in_one_line(tmp_path):
    out = run_pytest_quietly(tmp_path, CAPS2NE_CI_PROVIDES="data")
    assert "SKIPPED [" not in out, out  # no line per skip
    assert "4 tests skipped (1 without benchmark data); pytest -rs lists them" in out, out


def test_a_quiet_ci_run_still_fails_on_what_ci_provides(tmp_path):
    out = run_pytest_quietly(
        tmp_path, CI="true", CAPS2NE_CI_PROVIDES="data caps2ne_no_such_package_a"
    )
    assert "FAILED" in out and "but .ci/run provides caps2ne_no_such_package_a" in out, out
    # the package skip fails at the call, the data skip at set-up (an error)
    assert "1 failed, 2 skipped, 1 error" in out, out
    assert "2 tests skipped (0 without benchmark data)" in out, out
    assert "SKIPPED [" not in out, out


# ------------------------------------------------------------ a graph too small for ProNE


@pytest.mark.parametrize(
    "dims,n_nodes,fix",
    [
        (dict(), 100, "--dim 64 --feat-dim 64 keeps it"),
        (dict(dim=8, feat_dim=8), 6, "--dim 4 --feat-dim 4 keeps it"),
        (dict(dim=4, feat_dim=40), 30, "--feat-dim 16 keeps it"),
    ],
)
def test_the_spectral_start_off_note_suggests_a_smaller_dim(dims, n_nodes, fix):
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve

    cfg, notes = resolve(TrainConfig(**dims), n_nodes, 3 * n_nodes)
    assert cfg.spectral == "none"
    note = next(n for n in notes if n.startswith("spectral start off"))
    assert note.endswith(fix), note
    kept, _ = resolve(TrainConfig(**dict(dims, **_dims_of(fix))), n_nodes, 3 * n_nodes)
    assert kept.spectral == "init_xo"  # the suggestion works


def _dims_of(fix):
    words = fix.split()
    return {words[i][2:].replace("-", "_"): int(words[i + 1]) for i in range(0, len(words) - 2, 2)}


# ------------------------------------------------------------ the .npy's id file


def test_np_loadtxt_reads_the_ids_file_without_a_warning(tmp_path):
    import warnings

    import numpy as np

    from caps2ne_np.io.npy import load_npy, save_npy

    save_npy(tmp_path / "e.npy", np.ones((3, 2), np.float32), ["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = np.loadtxt(tmp_path / "e.nodes.txt", dtype=str)
    assert ids.tolist() == ["a", "b", "c"] == load_npy(tmp_path / "e.npy")[0]


def test_an_old_ids_file_with_its_tag_line_still_loads_and_is_checked(tmp_path):
    import numpy as np

    from caps2ne_np.errors import InputError
    from caps2ne_np.io.npy import _matrix_digest, load_npy

    v = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.save(tmp_path / "e.npy", v)
    tag = f"# caps2ne_np ids of e.npy: 3 rows, blake2b {_matrix_digest(v)}\n"
    (tmp_path / "e.nodes.txt").write_text(tag + "a\nb\nc\n")
    assert load_npy(tmp_path / "e.npy")[0] == ["a", "b", "c"]
    np.save(tmp_path / "e.npy", v + 1)  # another matrix beside the old file
    with pytest.raises(InputError, match="written for another matrix"):
        load_npy(tmp_path / "e.npy")


def test_a_kill_between_the_renames_leaves_no_matrix_with_the_wrong_ids(tmp_path, monkeypatch):
    import numpy as np

    from caps2ne_np.errors import InputError
    from caps2ne_np.io import atomic
    from caps2ne_np.io.npy import load_npy, save_npy

    save_npy(tmp_path / "e.npy", np.ones((4, 2), np.float32), list("abcd"))
    real, calls = atomic.publish, []

    def publish(tmp, target, overwrite):
        calls.append(target.name)
        if len(calls) == 2:  # killed after the first rename
            raise KeyboardInterrupt
        return real(tmp, target, overwrite)

    monkeypatch.setattr(atomic, "publish", publish)
    with pytest.raises(KeyboardInterrupt):
        save_npy(tmp_path / "e.npy", np.zeros((4, 2), np.float32), list("wxyz"), overwrite=True)
    monkeypatch.undo()
    assert calls == ["e.nodes.txt", "e.npy"]  # the ids first, the matrix last
    with pytest.raises(InputError, match="no such file"):
        load_npy(tmp_path / "e.npy")  # the old matrix went first: never paired with wxyz
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_interrupt_that_leaves_an_object_half_built_prints_only_the_error_line():
    """SIGINT inside a ZipFile's constructor (a checkpoint being written) left the object
    without attributes its __del__ reads: 'AttributeError' after the error line."""
    code = (
        "import sys\n"
        "from caps2ne_np.cli.run import run, Failure\n"
        "class HalfBuilt:\n"
        "    def __init__(self):\n"
        "        raise KeyboardInterrupt\n"
        "    def __del__(self):\n"
        "        self.missing\n"
        "try:\n"
        "    run(False, HalfBuilt)\n"
        "except Failure as f:\n"
        "    print(f'error: {f}', file=sys.stderr)\n"
        "    sys.exit(f.exit_code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "error: interrupted; no output was written", proc.stderr
