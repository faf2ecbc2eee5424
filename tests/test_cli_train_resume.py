"""``train --resume`` and ``--checkpoint-dir`` on the command line: what a resumed run
trains, and the files and folders it may and may not replace."""

import csv

import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from caps2ne_np.cli import cli
from toy_graphs import ring_of_cliques

TINY = ["--dim", "8", "--feat-dim", "8", "--walks-per-node", "2", "--num-sampled", "8",
        "--batch-size", "8", "--threads", "1"]  # fmt: skip


@pytest.fixture
def graph(tmp_path):
    A = sp.triu(ring_of_cliques()).tocoo()
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in zip(A.row, A.col)))
    return path


def train(graph, *args):
    return CliRunner().invoke(cli, ["train", "--graph", str(graph), *TINY, *args])


def epochs_in(history):
    with open(history) as fh:
        return [int(row["epoch"]) for row in csv.DictReader(fh)]


def test_a_resume_without_epochs_or_stop_trains_no_more_than_the_checkpointed_run(graph, tmp_path):
    """--epochs 2 --propagate none, resumed with only --propagate on: the same two
    epochs, propagated; not the preset's budget under --stop auto."""
    ck, out = tmp_path / "ck", tmp_path / "b.emb"
    first = train(graph, "--epochs", "2", "--propagate", "none", "--checkpoint-dir", ck,
                  "--out", tmp_path / "a.emb")  # fmt: skip
    assert first.exit_code == 0, first.output
    again = train(graph, "--resume", ck, "--propagate", "on", "--out", out,
                  "--history", tmp_path / "h.csv")  # fmt: skip
    assert again.exit_code == 0, again.output
    assert epochs_in(tmp_path / "h.csv") == [1, 2]
    assert "resuming with --epochs 2 and --stop none of the checkpointed run" in again.output
