"""The NumPy edge-list reader (caps2ne_np.graphs.graph) against the careful reader.

The careful reader (``read_edgelist_careful``, plain Python string handling) is the
reference: on every well-formed file the NumPy reader (``_read_edgelist_fast``) must
return the same Graph, array for array and bit for bit, with the same stats and
warnings, or decline (return None) where it does not vouch for the file (Unicode
whitespace, lines with and without a weight, very long lines); on anything else it
must decline, so that the careful reader raises its one-line ``path:line`` error.  Its
memory, and the string reader fed in small pieces.
"""

import os
import re
import sys
import tracemalloc
import warnings

import numpy as np
import pytest

from caps2ne_np.errors import GraphFormatError, InputWarning
from caps2ne_np.graphs import graph as G
from caps2ne_np.graphs.graph import read_edgelist

SEPARATORS = [" ", "\t", "  ", " \t ", "\x0b", "\x0c", "\r", "\x1c", "\x1f"]


INT_IDS = ["0", "7", "42", "-3", "123456789012345678", "999999999999999999"]


ODD_IDS = [
    "07",
    "-0",
    "+7",
    "00",
    "1234567890123456789",
    "-1234567890123456789012",
    "1e3",
    "0x1f",
    "1.5",
]


STR_IDS = ["a", "alice", "bob", "köln", "東京", "x-y", "a.b", "\ufeffz", "n\x01", "(", "é"]


WEIGHTS = [
    "1",
    "2",
    "0.5",
    ".5",
    "5.",
    "+2",
    "3.25",
    "1e-3",
    "2E+2",
    "0.1",
    "%.17g",
    "%.9g",
    "%.3e",
    "007.50",
    "123456789012345678901234",
    "2.50000000000000000000001",
    "1.0000000000000000000",
    "4.9e-30",
    "3.4e30",
]


PLAIN_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def read_both(path, directed=False, keep=False):
    """(fast, careful, fast warnings, careful warnings); the fast result may be None."""
    with warnings.catch_warnings(record=True) as w_fast:
        warnings.simplefilter("always")
        fast = G._read_edgelist_fast(os.fspath(path), directed, keep, stacklevel=2)
    with warnings.catch_warnings(record=True) as w_careful:
        warnings.simplefilter("always")
        careful = G.read_edgelist_careful(os.fspath(path), directed, keep, stacklevel=2)
    return fast, careful, [str(w.message) for w in w_fast], [str(w.message) for w in w_careful]


def assert_same_graph(a, b):
    assert a.node_ids == b.node_ids
    assert a.directed == b.directed
    assert a.stats == b.stats and list(a.stats) == list(b.stats)
    assert a.indptr.dtype == b.indptr.dtype == np.int64
    assert a.indices.dtype == b.indices.dtype == np.int32
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert (a.weights is None) == (b.weights is None)
    if a.weights is not None:
        assert a.weights.dtype == b.weights.dtype == np.float32
        assert a.weights.tobytes() == b.weights.tobytes()  # bit for bit


def weight_token(rng):
    form = WEIGHTS[rng.integers(len(WEIGHTS))]
    if "%" in form:
        return form % rng.uniform(1e-6, 1e6)
    return form


def random_edge_list(rng, n_lines, ids, weighted):
    """Text of a well-formed edge list: random separators, comments, blank lines, CRLF,
    self loops, repeated and reversed edges, optional BOM and final newline."""
    lines = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.05:
            lines.append("# comment: café " + ids[rng.integers(len(ids))])
            continue
        if r < 0.08:
            lines.append(SEPARATORS[rng.integers(len(SEPARATORS))] if rng.random() < 0.5 else "")
            continue
        if r < 0.2 and lines:
            lines.append(lines[rng.integers(len(lines))])  # a duplicate (or a comment again)
            continue
        u = ids[rng.integers(len(ids))]
        v = u if rng.random() < 0.05 else ids[rng.integers(len(ids))]
        if rng.random() < 0.1:
            u, v = v, u
        sep = SEPARATORS[rng.integers(len(SEPARATORS))]
        line = sep * int(rng.random() < 0.2) + u + sep + v
        if weighted and (weighted == "all" or rng.random() < 0.8):
            line += SEPARATORS[rng.integers(len(SEPARATORS))] + weight_token(rng)
        if rng.random() < 0.1:
            line += " #" + ("trailing" if rng.random() < 0.5 else "ü")
        if rng.random() < 0.1:
            line += SEPARATORS[rng.integers(len(SEPARATORS))]
        lines.append(line)
    eol = "\r\n" if rng.random() < 0.3 else "\n"
    text = eol.join(lines)
    if rng.random() < 0.7:
        text += eol
    if rng.random() < 0.2:
        text = "\ufeff" + text
    return text


def write(tmp_path, content, name="g.txt"):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def test_blank_lists_are_every_space_str_split_knows():
    spaces = [chr(c) for c in range(128, 0x110000) if chr(c).isspace()]
    assert all(G.UNICODE_SPACE.fullmatch(c) for c in spaces)
    others = [chr(c) for c in range(128, 0x3100) if not chr(c).isspace()]
    assert not any(G.UNICODE_SPACE.fullmatch(c) for c in others)
    ascii_split = [c for c in range(128) if c != 10 and len(("a" + chr(c) + "b").split()) == 2]
    assert ascii_split == sorted(c for c in range(128) if c != 32 and G._SPACES[c] == 32) + [32]


ODD_FILES = [
    "1 2\r\n2 3\r\n",
    "a\u00a0b\nb c\n",
    "a\u2028b\n",
    "1 2 # c\n# x\n\n  \n3 4\n",
    "99999999999999999999 1\n1 2\n",
    "9223372036854775807 -9223372036854775808\n",
    "+1 1\n1 01\n01 2\n",
    "-0 0\n0 00\n",
    "1 2 1_000\n",
    "1 2 +2.5\n",
    "\ufeff1 2\n",
    "1\x1c2\n3\x0b4\x0c\n",
    "1 2\n3 4 5\n",
    "a b\nc\n",
    "x y 0\n",
    "1 2 1e39\n",
    "1 2 nan\n",
    "\u00e9 \u6771\n",
    "1 2\n2 1\n1 1\n",
    "1 2 2\n2 1 3\n",
    "0x1 2\n",
    "1.0 2\n",
    "\t1\t2\t\n",
    "1 2",
    "",
    "#\n",
    "\u0661 \u0662\n",
    "1 2 \u0661\n",
    "1 2 5e-324\n",
    "1 2 3.4028235e38\n",
    "1 2 3.4028236e38\n",
]


@pytest.mark.parametrize("content", ODD_FILES)
def test_odd_files_read_as_the_careful_reader_reads_them(tmp_path, content):
    """CRLF, Unicode blanks, comments, huge and non-canonical integers, odd weights: the
    public reader gives the careful reader's graph and warnings, or its error (these
    cases also gave the Numba reader's results, compared when it was replaced)."""
    path = write(tmp_path, content)
    for directed, keep in ((False, False), (True, False), (False, True)):
        outcomes = []
        for read in (read_edgelist, G.read_edgelist_careful):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    if read is read_edgelist:
                        g = read(path, directed=directed, keep_self_loops=keep)
                    else:
                        g = read(os.fspath(path), directed, keep, stacklevel=2)
                except GraphFormatError as err:
                    outcomes.append(("error", str(err)))
                    continue
            outcomes.append(
                (
                    "ok",
                    g.node_ids,
                    g.indptr.tobytes(),
                    g.indices.tobytes(),
                    None if g.weights is None else g.weights.tobytes(),
                    g.stats,
                    [str(w.message) for w in caught],
                )
            )
        assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", ["int", "str", "mixed"])
def test_fast_reader_equals_careful_reader_on_random_files(tmp_path, seed, kind):
    rng = np.random.default_rng(1000 * seed + len(kind))
    ids = {
        "int": INT_IDS + [str(i) for i in range(40)],
        "str": STR_IDS,
        "mixed": INT_IDS + ODD_IDS + STR_IDS,
    }[kind]
    weighted = [False, "all", "all", True][seed % 4]  # True: some lines without a weight
    path = write(tmp_path, random_edge_list(rng, int(rng.integers(1, 300)), ids, weighted))
    for directed in (False, True):
        for keep in (False, True):
            try:
                fast, careful, w_fast, w_careful = read_both(path, directed, keep)
            except (
                GraphFormatError
            ):  # e.g. only comments, or only self loops: the careful reader decides
                assert G._read_edgelist_fast(os.fspath(path), directed, keep, stacklevel=2) is None
                continue
            assert fast is not None or weighted is True, (
                "the fast reader declined a well-formed file"
            )
            if fast is None:
                continue
            assert_same_graph(fast, careful)
            assert w_fast == w_careful


def test_long_lines_go_to_the_careful_reader(tmp_path):
    rng = np.random.default_rng(7)
    text = "# " + "x" * 300 + "\n" + random_edge_list(rng, 400, INT_IDS + STR_IDS, weighted="all")
    text += (
        "\n" + "long_" * 100 + " " + "id_" * 90 + " 2.5"
    )  # no final newline, longer than _LONG_LINE
    path = write(tmp_path, text)
    fast, careful, _, w_careful = read_both(path)
    assert fast is None
    with warnings.catch_warnings(record=True) as w_public:
        warnings.simplefilter("always")
        public = read_edgelist(path)
    assert_same_graph(public, careful)
    assert [str(w.message) for w in w_public] == w_careful


def test_many_int_and_string_ids(tmp_path):
    rng = np.random.default_rng(5)
    ints = [str(i) for i in rng.permutation(200_000)[:60_000]]
    strs = ["s" + "q" * 50 + str(i) for i in range(2_500)]
    for ids in (ints, ints + strs):
        u = rng.integers(0, len(ids), 80_000)
        v = rng.integers(0, len(ids), 80_000)
        text = "\n".join(f"{ids[a]} {ids[b]}" for a, b in zip(u, v)) + "\n"
        path = write(tmp_path, "# header\n" * 2000 + text)
        fast, careful, w_fast, w_careful = read_both(path)
        assert fast is not None
        assert_same_graph(fast, careful)
        assert w_fast == w_careful


@pytest.mark.parametrize(
    "content",
    [
        "a b\nlonely\n",  # 1 field
        "a b\n\nc d e f\n",  # 4 fields
        "a b x\n",  # weight not a number
        "a b 1\nb c nan\n",
        "a b inf\n",
        "a b 0\n",
        "a b -2\n",
        "a b 0.0e5\n",
        "a b 1e39\n",
        "a b 1e-50\n",
        "a b 1,5\n",
        "a b 1e\n",
        "a b .\n",
        "a b 3.4028236e38\n",  # rounds beyond float32's max
        "a b 2e38\na b 2e38\n",  # the summed duplicate overflows float32
        b"a b\nc\x00d e\n",
        b"a b\n# \x00\n",
        b"a b\nc \xff\xfe\n",
        b"a b\n\n\xc3\x28 b\n",
        b"a b # \xe9\n",
        "a b\nb c\n".encode("utf-16"),
        "",
        "# only\n\n   \n",
        "a a\nb b\n",  # only self loops
    ],
)
def test_malformed_files_give_the_careful_readers_error(tmp_path, content):
    path = write(tmp_path, content)
    assert G._read_edgelist_fast(os.fspath(path), False, False, stacklevel=2) is None
    with pytest.raises(GraphFormatError) as careful:
        G.read_edgelist_careful(os.fspath(path), False, False, stacklevel=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        with pytest.raises(GraphFormatError) as public:
            read_edgelist(path)
    assert str(public.value) == str(careful.value)
    assert str(public.value).startswith(f"{path}") and "\n" not in str(public.value)


@pytest.mark.parametrize(
    "content",
    [
        "a b 1\nb c\n",  # a weight on some lines only
        "a\u00a0b\n",  # no-break space separates for str.split()
        "a\u2028b\n",  # so does the line separator (within one line)
        "x\x85y\n",
    ],
)
def test_valid_but_unusual_files_are_read_by_the_careful_reader(tmp_path, content):
    path = write(tmp_path, content)
    assert G._read_edgelist_fast(os.fspath(path), False, False, stacklevel=2) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        g = read_edgelist(path)
        ref = G.read_edgelist_careful(os.fspath(path), False, False, stacklevel=2)
    assert_same_graph(g, ref)


@pytest.mark.parametrize("seed", range(3))
def test_weights_parse_to_the_same_double_as_float(tmp_path, seed):
    rng = np.random.default_rng(seed)
    tokens = []
    for _ in range(3000):
        mant = "".join(rng.choice(list("0123456789"), size=int(rng.integers(1, 25))))
        point = int(rng.integers(0, len(mant) + 1))
        token = mant[:point] + ("." if rng.random() < 0.7 else "") + mant[point:]
        if rng.random() < 0.5:
            token += (
                rng.choice(["e", "E"]) + rng.choice(["", "+", "-"]) + str(int(rng.integers(0, 40)))
            )
        tokens.append(rng.choice(["", "+", "-"]) + token)
    tokens += [
        "9007199254740993",
        "9007199254740992",
        "0.1",
        "1e22",
        "1e23",
        "1e-22",
        "123456789012345678e-5",
        "4.35",
        "5e-324",
        "1.7976931348623157e308",
        "1.5e5000",
        "1_0",
        "inf",
        "nan",
        "--1",
        "1..2",
        "e5",
    ]
    cols = [("u", np.int64), ("v", np.int64), ("w", np.float64)]
    n_parsed = 0
    for (
        token
    ) in tokens:  # NumPy's parser accepts a subset of float()'s spellings, to the same double
        rows = G._loadtxt(f"1 2 {token}\n".encode(), cols, 1)
        try:
            expected = float(token)
        except ValueError:
            assert rows is None, token
            continue
        if rows is not None:
            n_parsed += 1
            assert rows["w"].tobytes() == np.float64(expected).tobytes(), token
        else:
            assert not PLAIN_DECIMAL.fullmatch(token), token
    assert n_parsed > 1000
    text = "".join(f"{i} {i + 1} {t}\n" for i, t in enumerate(tokens) if PLAIN_DECIMAL.fullmatch(t))
    rows = G._loadtxt(text.encode(), cols, 1)  # the same in one file
    assert (
        rows["w"].tobytes()
        == np.array([float(t) for t in tokens if PLAIN_DECIMAL.fullmatch(t)]).tobytes()
    )


@pytest.mark.parametrize(
    "token,canonical",
    [
        ("0", True),
        ("7", True),
        ("-12", True),
        ("999999999999999999", True),
        ("-0", False),
        ("07", False),
        ("+7", False),
        ("00", False),
        ("-07", False),
        ("0.5", True),
        ("-0.5", False),
        ("a0", True),
    ],
)
def test_only_canonical_integers_are_read_as_integers(token, canonical):
    for data in (f"{token} 1\n", f"1 {token}", f"1  {token}  2.5\n"):
        assert G._noncanonical_ints(data.encode()) == (not canonical), data


def test_integer_spellings_stay_distinct_nodes(tmp_path):
    g = read_edgelist(write(tmp_path, "7 07\n-0 0\n+7 7\n0 00\n"))
    assert g.node_ids == ["7", "07", "-0", "0", "+7", "00"]
    assert (
        G._read_edgelist_fast(os.fspath(tmp_path / "g.txt"), False, False, stacklevel=2) is not None
    )


def test_fast_reader_memory_stays_within_eight_times_the_result(tmp_path):
    # measured 6.4x on 200k edges (the Numba reader it replaced: 1.33x; docs/scaling.md)
    rng = np.random.default_rng(11)
    n, m = 20_000, 200_000
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    path = write(tmp_path, "\n".join(f"{a} {b}" for a, b in zip(u.tolist(), v.tolist())) + "\n")
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", InputWarning)
            g = G._read_edgelist_fast(os.fspath(path), False, False, stacklevel=2)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = (
        g.indptr.nbytes
        + g.indices.nbytes
        + sum(sys.getsizeof(s) for s in g.node_ids)
        + sys.getsizeof(g.node_ids)
    )
    assert peak <= 8 * result, (peak, result)


def _peak_per_byte(path):
    """Peak traced memory of the NumPy reader over the file's size (NumPy reports its
    arrays to tracemalloc; the interpreter's own baseline is not counted)."""
    import tracemalloc
    import warnings

    from caps2ne_np.graphs import graph as G

    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = G._read_edgelist_fast(str(path), False, False, stacklevel=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert g is not None  # the NumPy reader took the file
    return peak / path.stat().st_size


@pytest.mark.parametrize("line", ["a b 1.5\n", "a b\n"])
def test_string_id_reader_peaks_well_below_the_stream_cap(tmp_path, line):
    """Weighted string-id lines peaked at 26 bytes per byte of text (2.1 GB for 80 MB),
    above the stream cap's READER_BYTES_PER_BYTE = 20: the string path held the whole
    file as one loadtxt string table (twice, while it grew) and every weight as a Python
    str and float at once.  It now parses a bounded piece at a time."""
    from caps2ne_np.graphs import graph as G

    path = tmp_path / "g.txt"
    path.write_text(line * 300_000)
    assert _peak_per_byte(path) < 0.75 * G.READER_BYTES_PER_BYTE


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("piece", [1, 7, 64])
def test_string_reader_in_small_pieces_equals_the_careful_reader(
    tmp_path, monkeypatch, seed, piece
):
    """Pieces of a line or a few (blank-only pieces, a last line without a newline,
    comments, CRLF, ids first seen in a later piece) give the careful reader's Graph."""
    import test_graph_reader as fast_tests
    from caps2ne_np.graphs import graph as G

    monkeypatch.setattr(G, "_STRING_PIECE", piece)
    rng = np.random.default_rng(seed)
    ids = fast_tests.STR_IDS + fast_tests.INT_IDS
    weighted = [False, "all"][seed % 2]
    path = fast_tests.write(tmp_path, fast_tests.random_edge_list(rng, 120, ids, weighted))
    fast, careful, w_fast, w_careful = fast_tests.read_both(path)
    assert fast is not None
    fast_tests.assert_same_graph(fast, careful)
    assert w_fast == w_careful
