"""What a run says about its outputs: ``--out -`` with
standard output closed is refused before training, in one line; ``--eval-every-epoch``
says in the run's last line which epoch it wrote."""

import os
import subprocess
import sys
from pathlib import Path

from clirun import CLIQUE_LABELS, CLIQUE_SPLITS, CLIQUES, EVAL, put

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dim", "4", "--feat-dim", "4", "--walks-per-node", "1", "--num-sampled", "2"]


def test_closed_stdout_is_refused_before_training(tmp_path):
    """``train --out - >&-``: before, the run trained to the end and then failed with
    'internal error (AttributeError ...)'."""
    put(tmp_path, "g.txt", CLIQUES)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "train", "--graph", "g.txt", "--out", "-", *TINY],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(1),  # as the shell's '>&-'
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "error: --out -: standard output is closed; give --out a file name, or run the "
        "command with its output open (e.g. '> out.emb')"
    ], proc.stderr
    assert "epoch" not in proc.stderr  # refused before training


def test_eval_every_epoch_says_which_epoch_it_wrote(tmp_path):
    """Seed 2 at this rate keeps epoch 2 of 6 (tests/test_cli_train_resume_eval.py): the last
    line says so."""
    put(tmp_path, "g.txt", CLIQUES)
    put(tmp_path, "l.txt", CLIQUE_LABELS)
    put(tmp_path, "s.json", CLIQUE_SPLITS)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "train", "--graph", "g.txt", "--out", "o.emb"]
        + EVAL
        + ["--epochs", "6"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("wrote epoch 2 of 6: best validation accuracy ("), proc.stderr
