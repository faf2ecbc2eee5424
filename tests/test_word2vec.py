"""word2vec text and binary files (caps2ne_np/io/word2vec.py): exact round trips, the layouts
gensim reads, and the errors that name the file and line. A text file with a wrong header
gets the text error."""

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec


def awkward_vectors(n=5, k=4, seed=0):
    """float32 values that a lossy format would not survive."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, k)).astype(np.float32)
    v[0, :4] = [
        np.float32(1) / 3,
        -0.0,
        np.finfo(np.float32).max,
        np.finfo(np.float32).smallest_subnormal,
    ]
    v[1, 0] = np.nextafter(np.float32(1), np.float32(2))
    return v


IDS = ["alice", "7", "07", "köln", "n_4"]


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("detect", [False, True])
def test_word2vec_round_trip_is_exact(tmp_path, binary, detect):
    v = awkward_vectors()
    path = tmp_path / "emb.w2v"
    write_word2vec(path, IDS, v, binary=binary)
    ids, w = read_word2vec(path, binary=None if detect else binary)
    assert ids == IDS and w.dtype == np.float32
    assert np.array_equal(w.view(np.int32), v.view(np.int32))  # bit for bit, -0.0 included


def test_word2vec_text_layout(tmp_path):
    path = tmp_path / "emb.txt"
    write_word2vec(path, ["a", "b"], np.array([[1.0, 0.5], [-2.0, 1 / 3]], dtype=np.float64))
    assert path.read_text(encoding="utf-8") == "2 2\na 1 0.5\nb -2 0.333333343\n"


def test_word2vec_binary_layout(tmp_path):
    path = tmp_path / "emb.bin"
    write_word2vec(path, ["a"], np.array([[1.0, -2.0]], dtype=np.float32), binary=True)
    assert path.read_bytes() == b"1 2\na " + np.array([1.0, -2.0], dtype="<f4").tobytes() + b"\n"


def test_gensim_loads_both_formats(tmp_path):
    gensim = pytest.importorskip("gensim")
    v = awkward_vectors()
    for binary in (False, True):
        path = tmp_path / f"emb{int(binary)}.w2v"
        write_word2vec(path, IDS, v, binary=binary)
        kv = gensim.models.KeyedVectors.load_word2vec_format(str(path), binary=binary)
        assert list(kv.index_to_key) == IDS
        assert np.array_equal(kv.vectors, v)


@pytest.mark.parametrize("bad_id", ["a b", "tab\tid", "", "new\nline"])
def test_write_rejects_ids_with_whitespace(tmp_path, bad_id):
    with pytest.raises(InputError, match="whitespace"):
        write_word2vec(tmp_path / "e.txt", ["ok", bad_id], np.zeros((2, 3), np.float32))
    assert not (tmp_path / "e.txt").exists()


def test_write_rejects_duplicate_ids_and_wrong_count(tmp_path):
    with pytest.raises(InputError, match="twice"):
        write_word2vec(tmp_path / "e.txt", ["x", "x"], np.zeros((2, 3), np.float32))
    with pytest.raises(InputError, match="3 node ids for 2 rows"):
        write_word2vec(tmp_path / "e.txt", ["x", "y", "z"], np.zeros((2, 3), np.float32))


@pytest.mark.parametrize(
    "content,where,what",
    [
        ("two 3\na 1 2 3\n", ":1:", "header"),
        ("2 3\na 1 2 3\n", ":3:", "promises 2 rows"),
        ("1 3\na 1 2 3\nb 1 2 3\n", ":3:", "promises 1 rows"),
        ("2 3\na 1 2 3\nb 1 2\n", ":3:", "3 fields"),
        ("2 3\na 1 2 3\nb 1 x 3\n", ":3:", "'x' is not a number"),
        ("3 2\na 1 2\nb 3 4\na 5 6\n", ":4:", "duplicate id 'a'"),
    ],
)
def test_read_word2vec_errors_name_path_and_line(tmp_path, content, where, what):
    path = tmp_path / "bad.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=what) as err:
        read_word2vec(path)
    assert str(err.value).startswith(f"{path}{where}")


def test_read_word2vec_truncated_binary(tmp_path):
    path = tmp_path / "e.bin"
    write_word2vec(path, ["a", "b"], np.ones((2, 3), np.float32), binary=True)
    path.write_bytes(path.read_bytes()[:-6])
    with pytest.raises(InputError, match="truncated"):
        read_word2vec(path, binary=True)


def test_read_word2vec_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_word2vec(tmp_path / "absent.txt")


def test_text_embeddings_with_a_wrong_header_get_the_text_error(tmp_path):
    # The header says 3 values a row, the rows hold 6; each row is also, by chance, a
    # valid binary row ('ab' + ' ' + 12 bytes + newline), which the old detection read.
    (tmp_path / "e.txt").write_bytes(b"2 3\nab 1 2 3 4 5 67\ncd 1 2 3 4 5 89\n")
    with pytest.raises(InputError, match=r"e.txt:2: row has 7 fields; expected an id and 3 values"):
        read_word2vec(tmp_path / "e.txt")
