"""Every test that reads the benchmark data carries the ``needs_data`` marker, so that
``-m "not needs_data"`` runs what works on a plain clone and skips nothing silently.

A test reads the data when it (or a fixture of its module that it takes) names
``DATA``, ``REASON`` or ``have`` from tests/benchdata.py.  Tests that run a bench
script on the data carry the marker by hand (tests/test_bench_perf.py and others)."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
DATA_NAMES = {"DATA", "REASON", "have"}
# these check something without the data too, and read it only when it is there
OPTIONAL = {
    "test_registry_covers_every_file_the_loaders_read",
    "test_paper_splits_ship_with_the_package",
}


def _names_data(node):
    return any(isinstance(n, ast.Name) and n.id in DATA_NAMES for n in ast.walk(node))


def _marked(fn):
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call):  # needs_data("cora", ...)
            dec = dec.func
        if isinstance(dec, ast.Name) and dec.id == "needs_data":
            return True
        if isinstance(dec, ast.Attribute) and dec.attr == "needs_data":  # pytest.mark.needs_data
            return True
    return False


def unmarked_data_tests(source):
    """Names of the module-level tests in ``source`` that read the data unmarked."""
    funcs = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
    fixtures = {f.name for f in funcs if not f.name.startswith("test_") and _names_data(f)}
    return [
        f.name
        for f in funcs
        if f.name.startswith("test_")
        and f.name not in OPTIONAL
        and not _marked(f)
        and (_names_data(f) or {a.arg for a in f.args.args} & fixtures)
    ]


def test_every_test_that_reads_the_benchmark_data_is_marked():
    unmarked = {
        path.name: names
        for path in sorted(TESTS.glob("test_*.py"))
        if (names := unmarked_data_tests(path.read_text(encoding="utf-8")))
    }
    assert unmarked == {}


def test_the_check_finds_direct_and_fixture_reads():
    source = """
@pytest.fixture
def folder(tmp_path):
    return DATA / "planetoid"

def test_direct():
    load(DATA)

def test_through_fixture(folder):
    load(folder)

@needs_data
def test_marked():
    load(DATA)

@needs_data("cora", features=False)
def test_marked_with_sets():
    load(DATA)

def test_no_data(tmp_path):
    load(tmp_path)
"""
    assert unmarked_data_tests(source) == ["test_direct", "test_through_fixture"]
