"""Shared pieces of the property-based tests of the loaders (tests/test_*_fuzz.py,
docs/reliability.md): the bounded Hypothesis settings (at most 100 examples per
property, no deadline), the one-line error check, and well-formed files with random
damage (cuts, flips and junk).  Not a test file."""

import io as pyio

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# a node id: a token that str.split() keeps whole, not a comment, encodable as UTF-8
TOKEN = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters="#\ufeff"
    ),
    min_size=1,
    max_size=6,
).filter(lambda t: t.split() == [t])


def assert_one_line(err, path):
    message = str(err)
    assert message.startswith(str(path)) and "\n" not in message, message


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@st.composite
def damaged(draw, base):
    data = draw(base)
    how = draw(st.sampled_from(["keep", "truncate", "flip", "append", "insert"]))
    if how == "keep" or not data:
        return data
    at = draw(st.integers(0, len(data) - 1))
    if how == "truncate":
        return data[:at]
    if how == "flip":
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    junk = draw(st.binary(min_size=1, max_size=8))
    return data + junk if how == "append" else data[:at] + junk + data[at:]


def _npy(array):
    buf = pyio.BytesIO()
    np.save(buf, array, allow_pickle=False)
    return buf.getvalue()


NPY_DTYPES = st.sampled_from(
    [
        np.float64,
        np.float32,
        np.float16,
        np.int64,
        np.int8,
        np.uint16,
        np.bool_,
        np.complex64,
        np.dtype("<U2"),
        np.dtype(">f8"),
    ]
)


arrays = NPY_DTYPES.flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
)


npy_bytes = damaged(arrays.map(_npy))


def _csr_npz(indices, indptr):
    buf = pyio.BytesIO()
    np.savez(
        buf,
        format=np.array("csr"),
        shape=np.array([2, 2]),
        data=np.ones(len(indices)),
        indices=np.array(indices),
        indptr=np.array(indptr),
    )
    return buf.getvalue()


def _npy_header_only(shape):
    buf = pyio.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    return buf.getvalue() + b"\0" * 16
