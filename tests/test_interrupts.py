"""Ctrl-C before a command has loaded (caps2ne_np/interrupts.py): one line and exit code 130,
not a traceback or click's "Aborted!"."""

import signal
import subprocess
import sys
import time

import pytest

from clirun import GRAPH, ROOT, last_line, put


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
