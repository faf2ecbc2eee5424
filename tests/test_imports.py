"""No import circle inside caps2ne_np: imports only point downward (shared/STYLE.md).

Every module is parsed with ``ast`` (nothing is imported), and every import statement
counts, at module level or inside a function, relative or absolute.  An edge goes
from a module to each caps2ne_np module it names: ``from . import graph`` names
caps2ne_np.graphs.graph, ``from .graph import Graph`` names caps2ne_np.graphs.graph too.  Running a
submodule also runs its package's ``__init__``; that implicit step is not an edge
(a package whose ``__init__`` registers its submodules is no circle).
"""

from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "caps2ne_np"


def module_files(root):
    """{dotted module name: path} of every .py file under the package folder ``root``."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = (root.name,) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_modules(name, path, modules):
    """The modules of ``modules`` that module ``name`` (file ``path``) imports."""
    import ast

    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in modules:  # import a.b.c of a.b's module
                    target = target.rpartition(".")[0]
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:  # from . import graph
                    found.add(f"{base}.{alias.name}")
                elif base in modules:  # from .graph import Graph
                    found.add(base)
    found.discard(name)
    return found


def import_graph(root):
    """{module: sorted list of the package's modules it imports} for the package ``root``."""
    modules = module_files(root)
    return {name: sorted(imported_modules(name, path, modules)) for name, path in modules.items()}


def find_cycle(graph):
    """One import circle as a list [a, b, ..., a], or None (depth-first search)."""
    state = {}  # 1: on the current path, 2: done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_package_has_no_import_circle():
    graph = import_graph(PACKAGE)
    assert (
        len(graph) > 20 and "caps2ne_np.training.engines" in graph["caps2ne_np.estimator.caps2ne"]
    )
    assert "caps2ne_np.training.train" in graph["caps2ne_np.training.engines"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


# The folders' layering (docs/layout.md): the folders each folder may import, besides
# its own and the shared modules errors.py and defaults.py, which import no folder.
LAYERS = {
    "kernels": set(),
    "model": {"kernels"},
    "walks": {"kernels"},
    "spectral": {"kernels"},
    "training": {"kernels", "model", "walks", "spectral", "graphs", "io"},
    "io": set(),
    "graphs": {"io"},
    "evaluation": {"graphs", "spectral"},
    "inference": {"kernels", "model", "walks", "spectral", "io", "graphs"},
}
SHARED = {"caps2ne_np.errors", "caps2ne_np.defaults"}


def test_the_folders_import_downward_only():
    graph = import_graph(PACKAGE)
    assert set(LAYERS) <= {name.split(".")[1] for name in graph if name.count(".") == 2}
    wrong = []
    for name, targets in graph.items():
        folder = name.split(".")[1] if name.count(".") >= 2 else None  # and sub-folders
        if name in SHARED:
            allowed = set()
        elif folder in LAYERS:
            allowed = LAYERS[folder] | {folder}
        else:
            continue
        for target in targets:
            to = target.split(".")[1] if target.count(".") >= 2 else None
            if target not in SHARED and to not in allowed:
                wrong.append(f"{name} -> {target}")
    assert not wrong, "imports against the layering: " + ", ".join(wrong)


@pytest.mark.parametrize("late", [False, True])
def test_the_check_finds_a_circle_through_relative_and_function_level_imports(tmp_path, late):
    """pkg.a imports pkg.sub.b at module level; pkg.sub.b imports pkg.a back, at module
    level or inside a function (a circle Python tolerates, but one all the same)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "a.py").write_text("from .sub.b import f\nimport pkg.c\n")
    (pkg / "c.py").write_text("X = 1\n")
    back = "def g():\n    from ..a import f\n" if late else "from .. import a\n"
    (pkg / "sub" / "b.py").write_text(back + "def f():\n    pass\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == ["pkg.c", "pkg.sub.b"] and graph["pkg.sub"] == ["pkg.sub.b"]
    assert find_cycle(graph) in (
        ["pkg.a", "pkg.sub.b", "pkg.a"],
        ["pkg.sub.b", "pkg.a", "pkg.sub.b"],
    )
    (pkg / "sub" / "b.py").write_text("def f():\n    pass\n")
    assert find_cycle(import_graph(pkg)) is None
