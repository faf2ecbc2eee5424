"""Property-based tests of the edge-list reader (caps2ne_np/graphs/graph.py,
docs/reliability.md): any byte string either reads into a valid graph or raises
``GraphFormatError`` with a one-line message naming the file -- never another exception.
A random graph written as an edge list (string ids, float32 weights, comments, CRLF,
mixed separators) reads back as the same CSR up to the id map, and the same bytes
through a pipe (a stream read once) give the same outcome as from the file."""

import warnings

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from caps2ne_np.errors import GraphFormatError, InputWarning
from caps2ne_np.graphs.graph import read_edgelist
from fuzzing import FUZZ, TOKEN, assert_one_line, damaged, write

F32_MAX = float(np.finfo(np.float32).max)


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
