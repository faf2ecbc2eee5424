"""``caps2ne train`` as a user runs it: an output that exists says how to proceed, the learning
rate's range is a usage error, and a high rate trains with a warning."""

import pytest


@pytest.fixture
def edges(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("a b\nb c\nc a\nc d\nd e\ne f\nf d\n")
    return path


def tiny_train(edges, tmp_path, *extra):
    return [
        "train", "--graph", str(edges), "--out", str(tmp_path / "e.emb"), "--dim", "8",
        "--feat-dim", "8", "--walks-per-node", "2", "--epochs", "1", *extra,
    ]  # fmt: skip


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


@pytest.mark.parametrize("lr", ["5", "1.5", "inf"])
def test_an_lr_beyond_one_is_a_usage_error(edges, tmp_path, lr):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    result = CliRunner().invoke(cli, tiny_train(edges, tmp_path, "--lr", lr))
    assert result.exit_code == 2, result.output
    assert "--lr" in result.output and "0<x<=1" in result.output
    assert not (tmp_path / "e.emb").exists()


def test_a_high_lr_is_trained_with_a_warning(edges, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    result = CliRunner().invoke(cli, tiny_train(edges, tmp_path, "--lr", "0.1"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning: --lr")]
    assert len(lines) == 1 and "0.1" in lines[0] and "0.004" in lines[0], result.output
    quiet = CliRunner().invoke(cli, tiny_train(edges, tmp_path, "--lr", "0.01", "--overwrite"))
    assert quiet.exit_code == 0 and "warning: --lr" not in quiet.output
