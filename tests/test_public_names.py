"""What is public and where a name lives, read from the package's source (shared/STYLE.md,
"Where a thing lives", "What is public"): a name another module imports has no leading
underscore, and a name has one import path, the module that defines it (no module
re-exports another's names).

Every module of caps2ne_np is parsed with ``ast`` (nothing is imported); every
``from ... import`` counts, at module level or inside a function, relative or absolute.
``KNOWN`` lists the places that break a rule today, each owned by work still under way:
a place not in it fails the test, and so do more places than ``KNOWN`` holds.  Strike an
entry off once it is fixed; the aim is an empty ``KNOWN``.
"""

import ast
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "caps2ne_np"

KNOWN = set()
"""Places allowed to break a rule: none."""


def module_files(root=PACKAGE):
    """{dotted module name: path} of every .py file under the package folder ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name,) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_from(name, path, source=None):
    """[(line, dotted module, imported name)] of every ``from ... import`` in module
    ``name`` (file ``path``; ``source``: its text, read from ``path`` when None) that
    names a caps2ne_np module."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if module.split(".")[0] == PACKAGE.name:
            found.extend((node.lineno, module, alias.name) for alias in node.names)
    return found


def _private(word):
    return word.startswith("_") and not word.startswith("__")


def private_imports(name, path, modules, source=None):
    """'<file>: private <module>.<name>' for each private name (or private module) that
    module ``name`` imports from another module."""
    where = path.relative_to(PACKAGE.parent).as_posix()
    out = []
    for _, module, imported in imports_from(name, path, source):
        if module != name and (_private(imported) or any(map(_private, module.split(".")))):
            out.append(f"{where}: private {module}.{imported}")
    return out


def defined_names(path):
    """The names module ``path`` binds itself at any level (functions, classes,
    assignments), not those it only imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def second_paths(name, path, modules, source=None):
    """'<file>: second path <module>.<name>' for each name that module ``name`` imports
    from a caps2ne_np module that does not define it (it only imports it in turn)."""
    where = path.relative_to(PACKAGE.parent).as_posix()
    out = []
    for _, module, imported in imports_from(name, path, source):
        target = modules.get(module)
        if target is None or f"{module}.{imported}" in modules:
            continue  # not a module of the package, or a submodule imported by name
        if imported == "*" or imported.startswith("__") or imported in defined_names(target):
            continue  # a star, a dunder, or defined where it is imported from
        out.append(f"{where}: second path {module}.{imported}")
    return out


def noqa_f401(path, source=None):
    """'<file>: noqa F401' when a comment of ``path`` silences an unused import (the mark
    of a re-export)."""
    text = path.read_text(encoding="utf-8") if source is None else source
    comments = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    if any("noqa" in c and "F401" in c for c in comments):
        return [f"{path.relative_to(PACKAGE.parent).as_posix()}: noqa F401"]
    return []


def layout_breaks():
    """Every place of the package that breaks a rule of this file."""
    modules = module_files()
    out = []
    for name, path in modules.items():
        out += private_imports(name, path, modules)
        out += second_paths(name, path, modules)
        out += noqa_f401(path)
    return out


def test_no_private_name_import_and_no_re_export_beyond_the_known_ones():
    found = sorted(set(layout_breaks()))
    new = [place for place in found if place not in KNOWN]
    assert not new, (
        "new layout breaks (make the name public in its module, or import it from the "
        "module that defines it):\n" + "\n".join(new)
    )
    assert len(found) <= len(KNOWN), "\n".join(found)


@pytest.mark.parametrize(
    "source,expected",
    [
        ("from .careful_reader import _fail\n", "private caps2ne_np.graphs.careful_reader._fail"),
        ("from .._secret import x\n", "private caps2ne_np._secret.x"),
        ("def f():\n    from ..model.grads import _k\n", "private caps2ne_np.model.grads._k"),
        ("from caps2ne_np.model.core import Params\n", "second path caps2ne_np.model.core.Params"),
        ("from .csr import Graph  # noqa: F401 (re-exported)\n", "noqa F401"),
    ],
)
def test_each_rule_catches_a_planted_break(source, expected):
    modules = module_files()
    path = PACKAGE / "graphs" / "graph.py"
    name = "caps2ne_np.graphs.graph"
    found = (
        private_imports(name, path, modules, source)
        + second_paths(name, path, modules, source)
        + noqa_f401(path, source)
    )
    assert f"caps2ne_np/graphs/graph.py: {expected}" in found


def test_public_and_dunder_names_and_own_definitions_pass():
    modules = module_files()
    path = PACKAGE / "graphs" / "graph.py"
    source = (
        "from .csr import Graph, raise_format_error\n"
        "from ..model.params import Params\n"
        "from . import csr\n"
        "from caps2ne_np import __name__ as n\n"
    )
    name = "caps2ne_np.graphs.graph"
    assert private_imports(name, path, modules, source) == []
    assert second_paths(name, path, modules, source) == []
    assert noqa_f401(path, source) == []
