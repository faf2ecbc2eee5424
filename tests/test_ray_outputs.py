"""Streamed outputs of the Ray engine: the driver pulls rows [a, b) of every
shard, interleaves them into node order (``ray.outputs.row_blocks``) and feeds the
block-wise writers of ``io``, which must write the very bytes the single-machine
writers write for the whole arrays (word2vec text and binary, ``.npy`` and its
``.nodes.txt``, the model ``.npz``), with atomic_write's guarantees.

The block tests run without Ray: a ``ShardServer`` (plain Python) stands in for the
actor, its ``rows.remote`` called at once; the end-to-end CLI test skips without Ray."""

import io as pyio
import json
import os
import stat
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.io.blocks import RowBlocks
from caps2ne_np.io.modelfile import read_model, save_model
from caps2ne_np.io.npy import load_npy, save_npy, save_npz
from caps2ne_np.io.word2vec import write_word2vec
from caps2ne_np.model.params import Params, slot_major
from caps2ne_np.training.ray.outputs import row_blocks, streamed_params
from caps2ne_np.training.ray.server import ShardServer
from caps2ne_np.training.ray.shards import interleave

K, D = 3, 2
NOW = SimpleNamespace(get=lambda refs: list(refs))  # ray.get for handles that answer at once


class Handle:
    """A ShardServer as an actor handle whose calls return their value at once, and
    that counts the row blocks pulled."""

    def __init__(self, server):
        self.server, self.pulls = server, 0
        self.rows = SimpleNamespace(remote=self._rows)
        self.table = SimpleNamespace(remote=server.table)

    def _rows(self, name, first, last):
        self.pulls += 1
        return self.server.rows(name, first, last)


def tables(n, seed=0):
    """Float32 O (n, K), bias (n,), X (n, D) with values whose %.9g forms vary in length."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.integers(-6, 6, size=(n, K))
    return dict(
        O=(rng.standard_normal((n, K)) * scale).astype(np.float32),
        bias=rng.standard_normal(n).astype(np.float32),
        X=rng.standard_normal((n, D)).astype(np.float32),
    )


def shards(arrays, S):
    """S ShardServers holding ``arrays`` (node v on server v % S), as handles."""
    n = arrays["O"].shape[0]
    out = []
    for s in range(S):
        srv = ShardServer(s, S, n, K, D, n_slots=2, fixed_features=False, owns_W=s == 0)
        for name, a in arrays.items():
            srv.set_rows(name, 0, a)
        out.append(Handle(srv))
    return out


def naive_word2vec(ids, M, binary):
    """The format of docs/input-formats.md, one row at a time."""
    if binary:
        return f"{M.shape[0]} {M.shape[1]}\n".encode() + b"".join(
            node.encode() + b" " + M[i].astype("<f4").tobytes() + b"\n"
            for i, node in enumerate(ids)
        )
    return (
        f"{M.shape[0]} {M.shape[1]}\n"
        + "".join(
            node + "".join(" " + format(float(x), ".9g") for x in M[i]) + "\n"
            for i, node in enumerate(ids)
        )
    ).encode()


# shards S and block sizes: 1 row, blocks that do not divide N (or S), one block
LAYOUTS = [(1, 4), (2, 1), (2, 3), (2, 4), (3, 5), (2, 64)]


@pytest.mark.parametrize("S,block_rows", LAYOUTS)
def test_row_blocks_interleave_the_shards_into_node_order(S, block_rows):
    arrays = tables(11)
    servers = shards(arrays, S)
    for name, a in arrays.items():
        blocks = list(row_blocks(NOW, servers, name, a.shape, block_rows))
        assert [b.shape[0] for b in blocks] == [
            min(block_rows, 11 - i) for i in range(0, 11, block_rows)
        ]
        assert np.array_equal(np.concatenate(blocks), a), name


def test_interleave_puts_node_v_at_row_v_minus_first():
    M = np.arange(10, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    parts = [M[3:8][(s - 3) % 3 :: 3] for s in range(3)]  # rows 3..7 of shards 0, 1, 2
    assert np.array_equal(interleave(parts, 3, 8, 3), M[3:8])


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("S,block_rows", LAYOUTS)
def test_streamed_word2vec_is_byte_identical_to_the_single_machine_writer(
    tmp_path, binary, S, block_rows
):
    arrays = tables(11, seed=S)
    ids = [f"v{i}" for i in range(11)]
    write_word2vec(tmp_path / "whole.emb", ids, arrays["O"], binary=binary)
    blocks = row_blocks(NOW, shards(arrays, S), "O", arrays["O"].shape, block_rows)
    write_word2vec(tmp_path / "streamed.emb", ids, blocks, binary=binary)
    streamed = (tmp_path / "streamed.emb").read_bytes()
    assert streamed == (tmp_path / "whole.emb").read_bytes()
    assert streamed == naive_word2vec(ids, arrays["O"], binary)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "streamed.emb",
        "whole.emb",
    ]  # no temp left


@pytest.mark.parametrize("named", [False, True])
@pytest.mark.parametrize("S,block_rows", LAYOUTS)
def test_streamed_npy_and_ids_are_byte_identical_to_save_npy(tmp_path, named, S, block_rows):
    arrays = tables(11, seed=S)
    ids = [f"v{i}" for i in range(11)] if named else [str(i) for i in range(11)]
    save_npy(tmp_path / "whole.npy", arrays["O"], ids)
    blocks = row_blocks(NOW, shards(arrays, S), "O", arrays["O"].shape, block_rows)
    save_npy(tmp_path / "streamed.npy", blocks, ids)
    reference = pyio.BytesIO()
    np.save(reference, arrays["O"])
    assert (tmp_path / "streamed.npy").read_bytes() == reference.getvalue()
    assert (tmp_path / "streamed.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()
    assert (tmp_path / "streamed.nodes.txt").exists() == named
    if named:  # same digest line (only the .npy's name differs)
        whole = (tmp_path / "whole.nodes.txt").read_text().replace("whole.npy", "streamed.npy")
        assert (tmp_path / "streamed.nodes.txt").read_text() == whole
    read_ids, M = load_npy(tmp_path / "streamed.npy")  # the digest ties the pair
    assert read_ids == ids and np.array_equal(M, arrays["O"])


@pytest.mark.parametrize("n", [0, 1, 7])
def test_npy_header_matches_np_save_for_small_shapes(tmp_path, n):
    M = np.ones((n, 4), dtype=np.float32)
    save_npy(tmp_path / "m.npy", RowBlocks(M.shape, lambda: iter([M[: n // 2], M[n // 2 :]])))
    reference = pyio.BytesIO()
    np.save(reference, M)
    assert (tmp_path / "m.npy").read_bytes() == reference.getvalue()


def members(path):
    with zipfile.ZipFile(path) as z:
        return [(info.filename, info.compress_type, z.read(info)) for info in z.infolist()]


@pytest.mark.parametrize("S,block_rows", [(2, 4), (3, 5)])
def test_streamed_model_file_holds_np_savez_members(tmp_path, S, block_rows):
    arrays = tables(11, seed=S)
    W = slot_major(np.random.default_rng(1).standard_normal((2, K, D)).astype(np.float32))
    ids = [f"v{i}" for i in range(11)]
    whole = Params(W, arrays["O"], arrays["bias"], arrays["X"])
    servers = shards(arrays, S)
    servers[0].server.arrays["W"][...] = W
    cluster = SimpleNamespace(servers=servers, workers=[])
    streamed = streamed_params(NOW, cluster, 11, K, D, fixed=False, block_rows=block_rows)
    assert isinstance(streamed.O, RowBlocks) and isinstance(streamed.X, RowBlocks)
    history = [dict(epoch=1, loss=1.5)]
    from caps2ne_np.training.options.config import TrainConfig

    config = TrainConfig(dim=K, feat_dim=D, walk_length=3).to_dict()  # read_model checks it
    save_model(tmp_path / "whole.npz", whole, ids, config, 0.01, history)
    save_model(tmp_path / "streamed.npz", streamed, ids, config, 0.01, history)
    # np.savez's zip: same members, order, storage and bytes (only timestamps may differ)
    assert members(tmp_path / "streamed.npz") == members(tmp_path / "whole.npz")
    got = read_model(tmp_path / "streamed.npz")
    for name in ("W", "O", "bias", "X"):
        assert np.array_equal(got[name], getattr(whole, name)), name
    assert got["node_ids"] == ids and got["history"] == history


def test_save_npz_mixes_arrays_and_blocks_like_np_savez(tmp_path):
    a, b = np.arange(6, dtype=np.int64).reshape(2, 3), np.linspace(0, 1, 5, dtype=np.float32)
    save_npz(tmp_path / "whole.npz", a=a, b=b, s=np.asarray(json.dumps({"x": 1})))
    save_npz(
        tmp_path / "blocks.npz",
        a=a,
        b=RowBlocks(b.shape, lambda: iter([b[:2], b[2:]])),
        s=np.asarray(json.dumps({"x": 1})),
    )
    assert members(tmp_path / "blocks.npz") == members(tmp_path / "whole.npz")


# --- atomic_write's guarantees hold for streamed writes


def counting(M, rows=2):
    """RowBlocks of M that count the blocks pulled."""
    pulled = []

    def blocks():
        for a in range(0, M.shape[0], rows):
            pulled.append(a)
            yield M[a : a + rows]

    return RowBlocks(M.shape, blocks), pulled


def test_streamed_word2vec_to_stdout(capsysbinary):
    M = tables(5)["O"]
    blocks, _ = counting(M)
    write_word2vec("-", [f"v{i}" for i in range(5)], blocks, binary=True)
    assert capsysbinary.readouterr().out == naive_word2vec([f"v{i}" for i in range(5)], M, True)


def test_streamed_writers_refuse_special_files_before_pulling_a_block():
    blocks, pulled = counting(tables(5)["O"])
    with pytest.raises(InputError, match="not a regular file"):
        write_word2vec("/dev/null", [str(i) for i in range(5)], blocks, overwrite=True)
    with pytest.raises(InputError, match="not a regular file"):
        save_npy("/dev/null", blocks, overwrite=True)
    assert pulled == []


@pytest.mark.parametrize("writer", ["word2vec", "npy"])
def test_streamed_write_keeps_the_mode_and_refuses_without_overwrite(tmp_path, writer):
    M = tables(5)["O"]
    target = tmp_path / ("e.emb" if writer == "word2vec" else "e.npy")
    target.write_bytes(b"old")
    os.chmod(target, 0o600)
    write = (
        (lambda blocks, **kw: write_word2vec(target, [str(i) for i in range(5)], blocks, **kw))
        if writer == "word2vec"
        else (lambda blocks, **kw: save_npy(target, blocks, **kw))
    )
    with pytest.raises(InputError, match="--overwrite"):
        write(counting(M)[0])
    assert target.read_bytes() == b"old"
    write(counting(M)[0], overwrite=True)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600 and target.read_bytes() != b"old"


@pytest.mark.parametrize("writer", ["word2vec", "npy", "npz"])
def test_a_block_source_failing_midway_leaves_the_old_file_and_no_temp(tmp_path, writer):
    M = tables(6)["O"]

    def blocks():
        yield M[:2]
        raise RuntimeError("shard 1 lost")

    target = tmp_path / f"e.{writer}"
    target.write_bytes(b"old")
    source = RowBlocks(M.shape, blocks)
    with pytest.raises(RuntimeError, match="shard 1 lost"):
        if writer == "word2vec":
            write_word2vec(target, [str(i) for i in range(6)], source, overwrite=True)
        elif writer == "npy":
            save_npy(target, source, [f"v{i}" for i in range(6)], overwrite=True)
        else:
            save_npz(target, overwrite=True, O=source)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_blocks_that_do_not_add_up_to_the_shape_are_refused(tmp_path):
    M = tables(6)["O"]
    short = RowBlocks(M.shape, lambda: iter([M[:4]]))
    with pytest.raises(ValueError, match="hold 4 rows"):
        save_npy(tmp_path / "e.npy", short)
    wide = RowBlocks((6, K + 1), lambda: iter([M]))
    with pytest.raises(ValueError, match="does not fit"):
        write_word2vec(tmp_path / "e.emb", [str(i) for i in range(6)], wide)
    assert list(tmp_path.iterdir()) == []


# --- end to end on a local Ray instance


@pytest.mark.parametrize("binary", [False, True])
def test_cli_engine_ray_streams_byte_identical_outputs(ray_local, tmp_path, monkeypatch, binary):
    """P = 1 trains the single-machine embeddings bit for bit, so every file must be the
    single machine's; blocks of 7 rows over S = 2 shards do not divide N."""
    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.training.ray import outputs as ray_outputs

    monkeypatch.setattr(ray_outputs, "OUTPUT_BLOCK_ROWS", 7)
    gathered = []
    monkeypatch.setattr(ray_outputs, "gather", lambda *a, **kw: gathered.append(1))
    edges = tmp_path / "g.edgelist"
    rng = np.random.default_rng(0)
    edges.write_text(
        "".join(f"n{a} n{b}\n" for a, b in rng.integers(0, 60, size=(200, 2)) if a != b)
    )
    common = [
        "train",
        "--graph",
        str(edges),
        "--dim",
        "8",
        "--feat-dim",
        "8",
        "--epochs",
        "1",
        "--walks-per-node",
        "2",
        "--num-sampled",
        "8",
        "--adam",
        "lazy",
        "--threads",
        "1",
        "--propagate",  # propagation needs the whole table: ray then gathers it
        "none",
        "-q",
    ] + (["--binary"] if binary else [])

    def outputs(stem):
        return [
            "--out",
            str(tmp_path / f"{stem}.emb"),
            "--npy",
            str(tmp_path / f"{stem}.npy"),
            "--model-out",
            str(tmp_path / f"{stem}.model.npz"),
        ]

    runner = CliRunner()
    one = runner.invoke(cli, common + outputs("one"))
    assert one.exit_code == 0, one.output
    two = runner.invoke(
        cli, common + outputs("two") + ["--engine", "ray", "--workers", "1", "--servers", "2"]
    )
    assert two.exit_code == 0, two.output
    assert gathered == []  # no whole table on the driver
    for suffix in (".emb", ".npy"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"two{suffix}").read_bytes()
    nodes = [
        (tmp_path / f"{s}.nodes.txt").read_text().replace(f"{s}.npy", "x") for s in ("one", "two")
    ]
    assert nodes[0] == nodes[1] and nodes[0].strip()
    m1, m2 = (
        dict((name, data) for name, _, data in members(tmp_path / f"{s}.model.npz"))
        for s in ("one", "two")
    )
    assert list(m1) == list(m2)
    for name in ("W.npy", "O.npy", "bias.npy", "X.npy", "node_ids.npy", "config.npy"):
        assert m1[name] == m2[name], name  # the history differs: it holds timings
