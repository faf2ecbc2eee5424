"""``train --resume`` of a run with --eval-every-epoch: the resumed run keeps the epoch the
uninterrupted one keeps, a finished run gives its output, and a run without the option
cannot resume with it."""

import pytest

from clirun import (
    CLIQUE_LABELS,
    CLIQUE_SPLITS,
    CLIQUES,
    EVAL,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
)


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
