"""How every command ends (caps2ne_np/cli/run.py): an interrupt that leaves an object half
built still prints only the one error line. In a real process: a bad line is one line and
exit 1, a usage error exit 2, --debug shows the traceback. SIGTERM ends a run cleanly. A
MemoryError becomes one line."""

import signal
import subprocess
import sys
import time

import pytest

from clirun import GRAPH, ROOT, TINY, _big_graph, last_line, put


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


def test_the_cli_turns_memory_error_into_one_line(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli as main
    from caps2ne_np.graphs import datasets as ds_module

    def out_of_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(ds_module, "fetch", out_of_memory)
    result = CliRunner().invoke(main, ["fetch-data", "cora", "--data-dir", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: out of memory"), result.output
    assert "internal error" not in result.output
