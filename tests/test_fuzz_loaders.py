"""Property-based tests of every loader a user's file reaches (docs/reliability.md).

Any byte string given as an edge list, features, labels, splits or embeddings either
loads into a valid result or raises the project's ``InputError`` with a one-line
message naming the file -- never another exception.  Random bytes rarely get past
the first check, so each loader is also fed well-formed files (valid ``.npy``/``.npz``
archives, plausible text) with random damage.  Round trips: a random graph written
as an edge list (string ids, float32 weights, comments, CRLF, mixed separators) reads
back as the same CSR up to the id map; embeddings written as word2vec read back bit
for bit.  The edge-list reader also gets the same bytes through a pipe (a stream it
must read once), with the same outcome as from the file.

Bounded for CI: at most 100 examples per property, no deadline.
"""

import io as pyio
import json
import warnings

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from caps2ne_np.errors import GraphFormatError, InputError, InputWarning
from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.graphs.nodefiles import load_features, load_labels, load_splits
from caps2ne_np.io.npy import load_npy
from caps2ne_np.io.word2vec import read_word2vec, write_word2vec

F32_MAX = float(np.finfo(np.float32).max)
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


# ---- damage: well-formed bytes with random cuts, flips and junk ------------------------------


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


# ---- edge lists: write a random graph, read it back --------------------------------------------


@st.composite
def edge_list_files(draw):
    """(file bytes, directed, expected {(u, v): weight} over ids, ids by first appearance)."""
    ids = draw(st.lists(TOKEN, min_size=2, max_size=8, unique=True))
    n = len(ids)
    directed = draw(st.booleans())
    pair = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1])
    key = (lambda p: p) if directed else (lambda p: (min(p), max(p)))
    pairs = draw(st.lists(pair, min_size=1, max_size=20, unique_by=key))
    weight = st.one_of(
        st.just(1.0), st.floats(min_value=0, max_value=F32_MAX, exclude_min=True, width=32)
    )
    weights = [
        float(np.float32(w))
        for w in draw(st.lists(weight, min_size=len(pairs), max_size=len(pairs)))
    ]
    sep = st.sampled_from([" ", "\t", "  ", " \t "])
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    lines = [f"# random graph{eol}"] if draw(st.booleans()) else []
    for (u, v), w in zip(pairs, weights):
        line = ids[u] + draw(sep) + ids[v]
        if w != 1.0 or draw(st.booleans()):
            line += draw(sep) + f"{w:.9g}"
        if draw(st.booleans()):
            line += draw(sep) + "# note"
        lines.append(line + eol)
        if draw(st.booleans()):
            lines.append(eol)
    text = "".join(lines)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")  # no newline at the end
    expected = {}
    for (u, v), w in zip(pairs, weights):
        expected[(ids[u], ids[v])] = w
        if not directed:
            expected[(ids[v], ids[u])] = w
    seen = list(dict.fromkeys(ids[i] for p in pairs for i in p))
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + text).encode("utf-8"), directed, expected, seen


@FUZZ
@given(case=edge_list_files())
def test_edge_list_round_trip_gives_the_same_csr(tmp_path, case):
    data, directed, expected, first_seen = case
    path = write(tmp_path, "g.txt", data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # no self loops or duplicates were written...
        warnings.filterwarnings(
            "ignore", message=".*no out-edges", category=InputWarning
        )  # ...sinks may be
        g = read_edgelist(path, directed=directed)
    assert g.node_ids == first_seen and g.directed == directed
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32 and g.indptr[0] == 0
    got = {}
    for i in range(g.n_nodes):
        row = g.indices[g.indptr[i] : g.indptr[i + 1]]
        assert np.all(np.diff(row) > 0)  # sorted, no duplicates
        for e, j in zip(range(g.indptr[i], g.indptr[i + 1]), row):
            got[(g.node_ids[i], g.node_ids[j])] = 1.0 if g.weights is None else float(g.weights[e])
    assert got == expected  # exact: %.9g round-trips float32


@FUZZ
@given(
    content=st.one_of(
        st.binary(max_size=80),
        damaged(edge_list_files().map(lambda case: case[0])),
        st.lists(
            st.sampled_from(
                [
                    "a",
                    "b",
                    "é",
                    "1",
                    "-1",
                    "0",
                    "7",
                    "07",
                    "x y",
                    "nan",
                    "inf",
                    "1e39",
                    "1e-46",
                    "#",
                    " ",
                    "\t",
                    "\n",
                    "\r",
                    "\x00",
                    "\x85",
                    "\u2028",
                    "\ufeff",
                ]
            ),
            max_size=24,
        ).map(lambda parts: "".join(parts).encode("utf-8")),
    ),
    directed=st.booleans(),
    keep=st.booleans(),
)
def test_edge_list_any_bytes_parse_or_raise_graph_format_error(tmp_path, content, directed, keep):
    path = write(tmp_path, "g.txt", content)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            g = read_edgelist(path, directed=directed, keep_self_loops=keep)
    except GraphFormatError as err:
        assert_one_line(err, path)
        return
    assert g.n_edges > 0 and len(set(g.node_ids)) == g.n_nodes
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    assert g.indptr[0] == 0 and g.indptr[-1] == g.n_edges and np.all(np.diff(g.indptr) >= 0)
    assert np.all((g.indices >= 0) & (g.indices < g.n_nodes))
    assert all(
        np.all(np.diff(g.indices[a:b]) > 0) for a, b in zip(g.indptr[:-1], g.indptr[1:])
    )  # sorted
    assert g.weights is None or (
        g.weights.dtype == np.float32 and np.all(np.isfinite(g.weights) & (g.weights > 0))
    )
    if not directed:
        A = g.to_scipy()
        assert (A != A.T).nnz == 0


# ---- the same bytes through a pipe: read once, same graph or the same error ---------------------


def _read_outcome(path, name, **kwargs):
    """('ok', ids, indptr, indices, weights) or ('error', message, the name replaced by <src>)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            g = read_edgelist(path, **kwargs)
    except GraphFormatError as err:
        assert_one_line(err, name)
        return ("error", str(err).replace(str(name), "<src>", 1))
    w = None if g.weights is None else g.weights.tobytes()
    return ("ok", g.node_ids, g.indptr.tobytes(), g.indices.tobytes(), w)


def _through_pipe(data, **kwargs):
    """read_edgelist of ``data`` fed through an os.pipe by a thread (a non-seekable stream)."""
    import os
    import threading

    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as fh:
            try:
                fh.write(data)
            except BrokenPipeError:  # the reader stopped early (an error): fine
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        return _read_outcome(f"/dev/fd/{r}", f"/dev/fd/{r}", **kwargs)
    finally:
        writer.join(30)
        os.close(r)


@FUZZ
@given(
    content=st.one_of(
        st.binary(max_size=80),
        damaged(edge_list_files().map(lambda case: case[0])),
        edge_list_files().map(lambda case: case[0]),
    ),
    directed=st.booleans(),
)
@example(content=b"a b\nb c 1_0\nc\n", directed=False)  # the careful reader's case, then an error
@example(
    content=b"a b\nb c 1_0\n" * 200, directed=False
)  # mixed 2 and 3 fields: the careful reader
def test_edge_list_through_a_pipe_equals_the_file(tmp_path, content, directed):
    path = write(tmp_path, "g.txt", content)
    from_file = _read_outcome(path, path, directed=directed)
    assert _through_pipe(content, directed=directed) == from_file


# ---- features (.npy / .npz) and embeddings (.npy) ------------------------------------------------


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


# ---- labels --------------------------------------------------------------------------------------

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


# ---- splits --------------------------------------------------------------------------------------

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


# ---- word2vec ------------------------------------------------------------------------------------

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
