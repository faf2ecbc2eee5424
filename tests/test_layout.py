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
