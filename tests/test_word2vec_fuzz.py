"""Property-based tests of the word2vec reader (caps2ne_np/io/word2vec.py,
docs/reliability.md): any bytes load or raise ``InputError`` with a one-line message
naming the file, and embeddings written as word2vec read back bit for bit."""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from caps2ne_np.errors import InputError
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec
from fuzzing import FUZZ, TOKEN, assert_one_line, damaged, write

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@st.composite
def embeddings(draw):
    ids = draw(st.lists(TOKEN, min_size=0, max_size=6, unique=True))
    k = draw(st.integers(1, 4))
    vectors = draw(hnp.arrays(np.float32, (len(ids), k), elements=finite32))
    return ids, vectors


def _w2v_bytes(case, binary):
    ids, vectors = case
    header = f"{len(ids)} {vectors.shape[1]}\n".encode()
    if binary:
        return header + b"".join(
            i.encode() + b" " + v.astype("<f4").tobytes() + b"\n" for i, v in zip(ids, vectors)
        )
    return (
        header
        + "".join(i + "".join(f" {x:.9g}" for x in v) + "\n" for i, v in zip(ids, vectors)).encode()
    )


w2v_bytes = st.tuples(embeddings(), st.booleans()).map(lambda t: _w2v_bytes(*t))


@FUZZ
@given(
    data=st.one_of(st.binary(max_size=120), damaged(w2v_bytes)),
    binary=st.sampled_from([None, False, True]),
)
@example(data=b"1 2\na nan 1\n", binary=None)
@example(data=b"1 99999999999\na 1\n", binary=None)  # the header's k alone would need 400 GB
@example(data=b"99999999 999999\n\xff\xfe", binary=None)
@example(data=b"99999999 999999\n\xff\xfe", binary=True)
def test_read_word2vec_any_bytes(tmp_path, data, binary):
    path = write(tmp_path, "e.w2v", data)
    try:
        ids, vectors = read_word2vec(path, binary=binary)
    except InputError as err:
        assert_one_line(err, path)
        return
    assert vectors.dtype == np.float32 and vectors.ndim == 2 and vectors.shape[0] == len(ids)
    assert np.all(np.isfinite(vectors))
    assert len(set(ids)) == len(ids) and all(i and i.split() == [i] for i in ids)


@FUZZ
@given(case=embeddings(), binary=st.booleans(), detect=st.booleans())
def test_word2vec_round_trip_is_bit_exact(tmp_path, case, binary, detect):
    ids, vectors = case
    path = tmp_path / "e.w2v"
    write_word2vec(path, ids, vectors, overwrite=True, binary=binary)
    got_ids, got = read_word2vec(path, binary=None if detect else binary)
    assert got_ids == ids
    assert np.array_equal(
        got.view(np.int32), vectors.view(np.int32)
    )  # -0.0 and subnormals included
