"""The rooms stay small (shared/STYLE.md, docs/layout.md): no module of caps2ne_np over
650 lines, no function over 80, and every module opens with a docstring that names its
concern; bench/ keeps at most 12 runnable scripts.  A module or function past those
sizes usually holds two concerns; split it by concern rather than raise the bar.  Every
file is parsed with ``ast``, nothing imported."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "caps2ne_np"
MAX_MODULE_LINES = 650
MAX_FUNCTION_LINES = 80
MODULES = sorted(PACKAGE.rglob("*.py"))


def _tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(path):
    return str(path.relative_to(PACKAGE.parent))


def test_the_package_is_read():
    assert len(MODULES) > 50 and PACKAGE / "estimator/caps2ne.py" in MODULES


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_module_has_a_docstring_and_at_most_650_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)}: {lines} lines"
    assert ast.get_docstring(_tree(path)), f"{_name(path)}: no module docstring"


def test_no_function_over_80_lines():
    long = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{_name(path)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "functions over 80 lines: " + "; ".join(long)


BENCH = PACKAGE.parent / "bench"
MAX_BENCH_SCRIPTS = 12


def test_bench_keeps_at_most_12_runnable_scripts():
    """bench/ is the reference a maintainer re-runs, not a notebook: a script that
    settled its question goes, with an entry in docs/results/investigations.md."""
    scripts = sorted(
        str(p.relative_to(BENCH))
        for p in BENCH.rglob("*.py")
        if "__main__" in p.read_text(encoding="utf-8")
    )
    assert "panel.py" in scripts
    assert len(scripts) <= MAX_BENCH_SCRIPTS, f"{len(scripts)} runnable scripts: {scripts}"


TESTS = PACKAGE.parent / "tests"
REPOSITORY_CHECKS = {
    "ci_skips",  # CI fails a test skipped for what .ci/run provides
    "doc_paths",  # every path the docs name exists
    "docs",  # the README and docs against the results
    "imports",  # imports point downward, no circle
    "layout",  # this file
    "markers",  # tests that read the data carry needs_data
    "math_doc",  # docs/math.md against the code
    "public_names",  # no private name imported across modules, one import path a name
    "results_size",  # docs/results/ stays small
}
"""Test files that check the repository rather than a module, command or bench script."""


def _stems(folder, exclude=("__init__", "__main__")):
    return {p.stem for p in folder.glob("*.py") if p.stem not in exclude}


def _named(stem, names):
    """``stem`` is one of ``names`` or one of them + ``_<aspect>``."""
    return any(stem == n or stem.startswith(n + "_") for n in names)


def names_what_it_tests(filename, modules, commands, scripts):
    """Whether a test file's name says what it tests: ``test_<module>[_<aspect>].py`` for
    a module or package of caps2ne_np, ``test_cli[_<command>[_<aspect>]].py`` for the
    command line, ``test_bench_<script>[_<aspect>].py`` for a bench script, or one of
    REPOSITORY_CHECKS.  A name from history or theme (test_fifth_pass_cli.py,
    test_bad_input.py) says none of these."""
    stem = filename.removeprefix("test_").removesuffix(".py")
    if stem in REPOSITORY_CHECKS or stem == "cli":
        return True
    if stem.startswith("cli_"):
        return _named(stem.removeprefix("cli_"), commands)
    if stem.startswith("bench_"):
        return _named(stem.removeprefix("bench_"), scripts)
    return _named(stem, modules)


def _modules():
    """The module and package names of caps2ne_np, the command line's own left out (its
    tests are test_cli_*.py)."""
    cli = PACKAGE / "cli"
    files = {p.stem for p in PACKAGE.rglob("*.py") if p.parent != cli}
    packages = {p.parent.name for p in PACKAGE.rglob("__init__.py")}
    return (files | packages) - {"__init__", "__main__", "cli"}


NAMES = dict(
    modules=_modules(), commands=_stems(PACKAGE / "cli"), scripts=_stems(BENCH) - {"common"}
)


@pytest.mark.parametrize(
    "name,ok",
    [
        ("test_fifth_pass_x.py", False),
        ("test_fifth_pass_cli.py", False),
        ("test_bad_input.py", False),
        ("test_data_reliability.py", False),
        ("test_run_outputs.py", False),
        ("test_cli_nosuch.py", False),
        ("test_bench_nosuch.py", False),
        ("test_fused.py", True),
        ("test_budget_holdout.py", True),
        ("test_cli_train_resume.py", True),
        ("test_bench_vs_deepwalk.py", True),
        ("test_docs.py", True),
    ],
)
def test_the_naming_rule_tells_a_history_name_from_a_module_name(name, ok):
    assert names_what_it_tests(name, **NAMES) == ok


def test_every_test_file_is_named_after_what_it_tests():
    """tests/test_<module>.py, test_cli_<command>.py, test_bench_<script>.py or a
    repository check (shared/STYLE.md): a case found by hostile use goes into the file of
    the surface it hits, not into a file named for when it was found.  Helpers that
    several files share live in files without the test_ prefix (clirun.py, fuzzing.py)."""
    files = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert "test_layout.py" in files
    unnamed = [f for f in files if not names_what_it_tests(f, **NAMES)]
    assert not unnamed, f"test files named for neither a module nor a command: {unnamed}"
