"""Property-based tests of the .npy embeddings loader (caps2ne_np/io/npy.py,
docs/reliability.md): any bytes, and valid arrays with random damage, load or raise
``InputError`` with a one-line message naming the file."""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from caps2ne_np.errors import InputError
from caps2ne_np.io.npy import load_npy
from fuzzing import FUZZ, _csr_npz, _npy, _npy_header_only, assert_one_line, npy_bytes, write


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), npy_bytes))
@example(data=_npy_header_only((2**40, 3)))
@example(data=_npy(np.array([[1.0, np.nan]])))
@example(data=_csr_npz([0], [0, 1, 1]))
def test_load_npy_any_bytes(tmp_path, data):
    path = write(tmp_path, "e.npy", data)
    try:
        ids, v = load_npy(path)
    except InputError as err:
        assert_one_line(err, path)
        return
    assert (
        v.ndim == 2
        and v.dtype == np.float32
        and np.all(np.isfinite(v))
        and ids == [str(i) for i in range(len(v))]
    )
