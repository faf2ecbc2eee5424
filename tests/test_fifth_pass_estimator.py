"""The estimator as a scikit-learn user holds it, the test extra, the edge-list reader's
memory and ``caps2ne evaluate`` on ``infer``'s output (fifth pass of hostile use)."""

import configparser
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _extra(name):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options.extras_require"][name].split("\n")
    return {re.split(r"[<>=!~ \[]", line.strip())[0] for line in lines if line.strip()}


def test_test_extra_installs_what_the_api_tests_import():
    """``pip install -e ".[test]"`` (the README's test command) must run the networkx,
    pandas and gensim tests of test_api_types.py and test_estimator_inputs.py, not skip
    them."""
    imported = set()
    for name in ("test_api_types.py", "test_estimator_inputs.py"):
        text = (ROOT / "tests" / name).read_text()
        imported |= set(re.findall(r'importorskip\("([a-z_]+)"', text))
    assert imported >= {"networkx", "pandas", "gensim"}
    assert imported <= _extra("test"), imported - _extra("test")


# ---- the edge-list reader's memory on string ids ---------------------------------


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
    import test_graph_fast as fast_tests
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
