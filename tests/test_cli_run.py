"""How every command ends (caps2ne_np/cli/run.py): an interrupt that leaves an object half
built still prints only the one error line."""

import subprocess
import sys


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
