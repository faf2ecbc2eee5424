"""Property-based tests of the node files (caps2ne_np/graphs/nodefiles.py,
docs/reliability.md): any bytes given as features (.npy / .npz), labels or splits either
load into a valid result or raise ``InputError`` with a one-line message naming the file;
well-formed files with random damage get past the first check."""

import io as pyio
import json

import numpy as np
import scipy.sparse as sp
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from caps2ne_np.errors import InputError
from caps2ne_np.graphs.nodefiles import load_features, load_labels, load_splits
from fuzzing import (
    FUZZ,
    _csr_npz,
    _npy,
    _npy_header_only,
    assert_one_line,
    damaged,
    npy_bytes,
    write,
)


@st.composite
def _npz(draw):
    """A scipy.sparse.save_npz archive: of a random matrix, of a CSR with one index moved out of
    place, or hand-made with random fields."""
    buf = pyio.BytesIO()
    kind = draw(st.sampled_from(["matrix", "bad-csr", "fields"]))
    if kind == "bad-csr":
        m = sp.random(
            draw(st.integers(1, 5)),
            draw(st.integers(1, 5)),
            density=0.6,
            format="csr",
            random_state=draw(st.integers(0, 2**16)),
        )
        m.sort_indices()
        fields = {"indices": m.indices.copy(), "indptr": m.indptr.copy()}
        name = draw(st.sampled_from(sorted(fields)))
        arr = fields[name]
        at = draw(st.integers(0, max(arr.size - 1, 0)))
        if arr.size:
            arr[at] = draw(st.integers(-3, max(m.shape) + 3))
        np.savez(buf, format=np.array("csr"), shape=np.array(m.shape), data=m.data, **fields)
    elif kind == "matrix":
        dense = draw(
            hnp.arrays(
                np.float64,
                hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=5),
                elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
            )
        )
        fmt = draw(st.sampled_from(["csr", "csc", "coo", "bsr", "dia"]))
        sp.save_npz(buf, sp.csr_matrix(dense).asformat(fmt), compressed=draw(st.booleans()))
    else:
        small = hnp.arrays(np.int64, st.integers(0, 6), elements=st.integers(-2, 6))
        fields = {
            "format": np.array(
                draw(st.sampled_from(["csr", "csc", "coo", "bsr", "dia", "lil", "xyz"]))
            ),
            "shape": np.array(
                draw(st.lists(st.integers(-1, 5), min_size=0, max_size=3)), dtype=np.int64
            ),
        }
        for name in draw(
            st.sets(st.sampled_from(["data", "indices", "indptr", "row", "col", "offsets"]))
        ):
            fields[name] = draw(small)
        np.savez(buf, **fields)
    return buf.getvalue()


npz_bytes = damaged(_npz())


def assert_valid_features(x, n_rows):
    assert x.ndim == 2 and x.dtype == np.float32
    values = x.data if sp.issparse(x) else x
    assert np.all(np.isfinite(values))
    if sp.issparse(x):
        assert x.format == "csr"
        x.check_format(full_check=True)
    if n_rows is not None:
        assert x.shape[0] == n_rows


@FUZZ
@given(
    data=st.one_of(st.binary(max_size=200), npy_bytes, npz_bytes),
    suffix=st.sampled_from([".npy", ".npz"]),
    n_nodes=st.one_of(st.none(), st.integers(1, 5)),
)
@example(data=_csr_npz([0, -1], [0, 1, 2]), suffix=".npz", n_nodes=None)  # scipy trusts the indices
@example(data=_csr_npz([0, 1], [0, 5, 2]), suffix=".npz", n_nodes=2)
@example(
    data=_csr_npz([0], [0, 1, 0]), suffix=".npz", n_nodes=2
)  # indptr[-1] == 0: scipy checks nothing
@example(
    data=_npy_header_only((2**40, 3)), suffix=".npy", n_nodes=None
)  # 24 TiB promised, 16 bytes given
@example(data=_npy(np.ones((2, 2))), suffix=".npz", n_nodes=2)  # an array named .npz
@example(data=_csr_npz([0], [0, 1, 1]), suffix=".npy", n_nodes=2)  # an archive named .npy
def test_load_features_any_bytes(tmp_path, data, suffix, n_nodes):
    path = write(tmp_path, "f" + suffix, data)
    node_ids = None if n_nodes is None else [f"v{i}" for i in range(n_nodes)]
    try:
        x = load_features(path, node_ids=node_ids)
    except InputError as err:
        assert_one_line(err, path)
        return
    assert_valid_features(x, n_nodes)


NODES = ["a", "b", "c", "7"]


label_text = st.lists(
    st.lists(
        st.sampled_from(["a", "b", "c", "7", "07", "x", "0", "1", "10", "#", "é", "\x00"]),
        max_size=3,
    ).map(" ".join),
    max_size=8,
).map(lambda rows: "\n".join(rows).encode("utf-8"))


@FUZZ
@given(data=st.one_of(st.binary(max_size=80), damaged(label_text)))
@example(data="a caf\xe9\n".encode("latin-1"))
def test_load_labels_any_bytes(tmp_path, data):
    path = write(tmp_path, "l.txt", data)
    try:
        labels, multilabel, classes = load_labels(path, NODES, return_classes=True)
    except InputError as err:
        assert_one_line(err, path)
        return
    assert len(classes) >= 1 and len(set(classes)) == len(classes)
    if multilabel:
        assert labels.shape == (len(NODES), len(classes)) and set(labels.data.tolist()) <= {1}
    else:
        assert labels.dtype == np.int64 and labels.shape == (len(NODES),)
        assert labels.min() >= -1 and labels.max() < len(classes) and labels.max() >= 0


SPLIT_NODES = ["a", "b", "c", "d", "5"]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 8)
    | st.floats(allow_nan=False)
    | st.sampled_from(SPLIT_NODES + ["z"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["train", "val", "test", "x"]), inner, max_size=4)
    ),
    max_leaves=12,
)


split_like = st.lists(
    st.fixed_dictionaries(
        {
            part: st.lists(st.sampled_from(SPLIT_NODES + ["z", 5, 1]), max_size=3)
            for part in ("train", "val", "test")
        }
    ),
    min_size=0,
    max_size=3,
)


@FUZZ
@given(
    data=st.one_of(
        st.binary(max_size=80),
        damaged(st.one_of(json_values, split_like).map(lambda v: json.dumps(v).encode("utf-8"))),
    ),
    by_id=st.booleans(),
)
@example(data=b"[" * 100_000, by_id=False)  # RecursionError inside json
@example(
    data=b'[{"train": [' + b"1" * 5000 + b'], "val": [], "test": []}]', by_id=False
)  # int digit limit
@example(data=b'[{"train": [' + b"1" * 5000 + b'], "val": [], "test": []}]', by_id=True)
@example(data='[{"train": ["caf\xe9"]}]'.encode("latin-1"), by_id=True)
def test_load_splits_any_bytes(tmp_path, data, by_id):
    path = write(tmp_path, "s.json", data)
    try:
        splits = load_splits(path, len(SPLIT_NODES), node_ids=SPLIT_NODES if by_id else None)
    except InputError as err:
        assert_one_line(err, path)
        return
    assert len(splits) >= 1
    for split in splits:
        assert set(split) == {"train", "val", "test"}
        parts = [split[p] for p in ("train", "val", "test")]
        for part in parts:
            assert part.dtype == np.int64 and np.all((part >= 0) & (part < len(SPLIT_NODES)))
            assert np.unique(part).size == part.size
        all_ = np.concatenate(parts)
        assert np.unique(all_).size == all_.size  # train, val and test are disjoint
