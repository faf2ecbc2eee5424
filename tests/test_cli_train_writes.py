"""What ``caps2ne train`` writes (docs/reliability.md): an existing file is never replaced
without --overwrite (checked before training), a write that fails midway (a full disk, a
kill) leaves the previous files exactly as they were, the outputs of one run are committed
together, and standard output carries only the embeddings. --out - writes to stdout and is
refused for multi-file outputs; colliding or unwritable outputs and an uncreatable
checkpoint folder are found before training; an interrupt names the outputs already written."""

import os
from pathlib import Path

import numpy as np
import pytest

from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.io import atomic
from caps2ne_np.io.npy import load_npy
from caps2ne_np.io.word2vec import read_word2vec
from clirun import (
    GRAPH,
    TINY,
    _disk_full,
    _fail_temp_files,
    _FailingFile,
    _trained,
    assert_error,
    put,
    run,  # noqa: F401 (fixtures)
    shell_process,
    train,
)

OUTPUTS = [
    pytest.param(["--out", "o.emb"], "o.emb", id="word2vec"),
    pytest.param(["--out", "x.emb", "--npy", "o.npy"], "o.npy", id="npy"),
    pytest.param(["--out", "x.emb", "--model-out", "m.npz"], "m.npz", id="model"),
]


@pytest.mark.parametrize("args,existing", OUTPUTS)
def test_existing_output_is_refused_before_training(run, tmp_path, args, existing):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, existing, "precious\n")
    result = run("train", "--graph", "g.txt", *TINY, *args)
    assert_error(result, f"{existing}: exists; pass --overwrite to replace it")
    assert not _trained(result)  # refused up front, not after the work
    assert (tmp_path / existing).read_text() == "precious\n"
    assert not (tmp_path / "x.emb").exists()


def test_overwrite_replaces_every_output(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    for name in ("o.emb", "o.npy", "m.npz"):
        put(tmp_path, name, "old\n")
    result = run(
        "train",
        "--graph",
        "g.txt",
        *TINY,
        "--out",
        "o.emb",
        "--npy",
        "o.npy",
        "--model-out",
        "m.npz",
        "--overwrite",
    )
    assert result.exit_code == 0, result.stderr
    ids, vectors = read_word2vec(tmp_path / "o.emb")
    assert load_npy(tmp_path / "o.npy")[0] == ids == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(Caps2NE.load(tmp_path / "m.npz").get_embedding(), vectors)
    assert not list(tmp_path.glob(".*.tmp"))


def test_output_folder_missing(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(train(run, out="nodir/o.emb"), "nodir/o.emb: ", "folder nodir does not exist")


def test_existing_nodes_file_is_refused_before_training(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.nodes.txt", "precious\n")
    result = train(run, "--npy", "o.npy", out="o.emb")
    assert_error(result, "o.nodes.txt: exists")
    assert not _trained(result) and not (tmp_path / "o.emb").exists()


def test_existing_checkpoint_is_not_replaced_without_overwrite(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert train(run, "--checkpoint-dir", "ck", out="a.emb").exit_code == 0
    before = (tmp_path / "ck" / "checkpoint.npz").read_bytes()
    result = train(run, "--checkpoint-dir", "ck", "--seed", "1", out="b.emb")
    assert (tmp_path / "ck" / "checkpoint.npz").read_bytes() == before
    assert_error(result, "ck/checkpoint.npz: exists")


def test_cli_disk_full_names_the_file_and_keeps_the_old_one(run, tmp_path, monkeypatch):
    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.emb", "precious\n")
    _fail_temp_files(monkeypatch, 50)
    assert_error(train(run, "--overwrite", out="o.emb"), "o.emb: No space left on device")
    assert (tmp_path / "o.emb").read_text() == "precious\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_interrupted_run_keeps_the_old_output(run, tmp_path, monkeypatch):
    from caps2ne_np.walks import walks

    put(tmp_path, "g.txt", GRAPH)
    put(tmp_path, "o.emb", "precious\n")

    def interrupted(*args, **kwargs):  # Ctrl-C while the walks are drawn, early in training
        raise KeyboardInterrupt

    monkeypatch.setattr(walks.WalkSource, "walks", interrupted)
    assert_error(
        train(run, "--overwrite", out="o.emb"), "interrupted; no output was written", code=130
    )
    assert (tmp_path / "o.emb").read_text() == "precious\n"


def test_stdout_carries_only_embeddings_when_stderr_is_closed(tmp_path):
    """2>&-: tqdm and the log lines fell back to stdout, inside the embeddings."""
    put(tmp_path, "g.txt", GRAPH)
    args = " ".join(a for a in TINY if a != "--quiet")  # with the log lines and warnings
    proc = shell_process(f"cli train --graph g.txt --out - {args} 2>&-", tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.decode().splitlines()
    assert lines[0] == "4 4" and len(lines) == 5, lines
    assert all(len(line.split()) == 5 for line in lines[1:]), lines


def test_a_reader_that_closes_stdout_gets_one_line_and_exit_141(tmp_path):
    """`train --out - | head` printed 'error: [Errno 32] Broken pipe'."""
    put(tmp_path, "g.txt", "".join(f"n{i} n{(i + 1) % 300}\n" for i in range(300)))
    args = "--dim 256 --feat-dim 4 --epochs 1 --walks-per-node 1 --threads 1 --quiet"
    proc = shell_process(f"(cli train --graph g.txt --out - {args}; echo $? > rc) | true", tmp_path)
    assert (tmp_path / "rc").read_text().strip() == "141"
    assert proc.stderr.decode().strip() == (
        "error: standard output was closed by its reader (a pipe such as head): what was "
        "written there is cut short"
    )


def test_cli_outputs_of_one_run_are_committed_together(run, tmp_path, monkeypatch):
    """--model-out on a full disk after --out and --npy were written: none is replaced
    (the embeddings were already replaced when the model write failed)."""
    put(tmp_path, "g.txt", GRAPH)
    outputs = {"o.emb": b"old emb\n", "o.npy": b"old npy", "o.nodes.txt": b"old ids\n",
               "m.npz": b"old model"}  # fmt: skip
    for name, content in outputs.items():
        (tmp_path / name).write_bytes(content)
    real, created = atomic._create_temp, []

    def create(target, binary):
        f, tmp = real(target, binary)
        created.append(Path(target).name)
        return (_FailingFile(f, 0, _disk_full) if Path(target).name == "m.npz" else f), tmp

    monkeypatch.setattr(atomic, "_create_temp", create)
    result = train(run, "--overwrite", "--npy", "o.npy", "--model-out", "m.npz", out="o.emb")
    assert_error(result, "m.npz: No space left on device")
    assert created == ["o.emb", "o.npy", "o.nodes.txt", "m.npz"]  # all written, then failed
    assert {name: (tmp_path / name).read_bytes() for name in outputs} == outputs
    assert not list(tmp_path.glob(".*.tmp"))
    monkeypatch.setattr(atomic, "_create_temp", real)  # (undo() would also undo the chdir)
    again = train(run, "--overwrite", "--npy", "o.npy", "--model-out", "m.npz", out="o.emb")
    assert again.exit_code == 0, again.stderr
    assert all((tmp_path / name).read_bytes() != old for name, old in outputs.items())


def test_out_dash_writes_the_embeddings_to_stdout(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    result = train(run, out="-", quiet=False)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "4 4" and sorted(line.split()[0] for line in lines[1:]) == list("abcd")
    assert "wrote embeddings to standard output" in result.stderr
    assert not (tmp_path / "-").exists()


def test_dash_is_refused_for_multi_file_outputs(run, tmp_path):
    put(tmp_path, "g.txt", GRAPH)
    assert_error(
        train(run, "--npy", "-"), "--npy: '-' (standard output) is accepted by --out only", code=2
    )


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
