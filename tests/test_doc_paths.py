"""Every file path the docs or a docstring names exists (the functions docs/math.md names:
tests/test_math_doc.py).

Read: README.md, docs/ with its notes in docs/results/, bench/README.md and the results
in bench/results/, and every .py file of caps2ne_np/, tests/, bench/ and examples/
(docstrings and comments alike).  A path is a word that starts with a folder of the
repository or of the package (``caps2ne_np/graphs/graph.py``, ``kernels/jit.py``,
``docs/training.md``, ``../bench/results/perf.md``) and ends in a file suffix; in
Markdown, every link target counts too.  A path resolves from the repository root, from
the package folder, or from the folder of the file that names it (a bench script's links
are written into bench/results/, so they resolve from there as well).  Not checked: a
word with a wildcard or a placeholder (``bench/results/*_smoke.*``,
``<dir>/checkpoint.npz``), and a path at a commit (``git show 59ba5c7:caps2ne_np/graph.py``).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "caps2ne_np"
FOLDERS = ("caps2ne_np", "tests", "bench", "docs", "examples", "scripts")
PACKAGE_FOLDERS = ("kernels", "model", "training", "graphs", "io", "cli", "data", "evaluation")
SUFFIXES = ("py", "md", "json", "txt", "sh", "cff", "toml", "cfg", "edgelist", "npz", "npy")
SUFFIXES += ("png", "svg", "csv", "gz")
STARTS = "|".join(FOLDERS + PACKAGE_FOLDERS)
ENDS = "|".join(SUFFIXES)
PATH = re.compile(rf"(?<![\w./:<*-])((?:\.\./)*(?:{STARTS})/[\w./-]*\w\.(?:{ENDS}))(?![\w*<>{{])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def sources():
    """The files whose named paths must exist."""
    docs = [ROOT / "README.md", ROOT / "bench" / "README.md"]
    docs += sorted((ROOT / "docs").rglob("*.md")) + sorted(
        (ROOT / "bench" / "results").glob("*.md")
    )
    code = [
        p
        for folder in ("caps2ne_np", "tests", "bench", "examples")
        for p in (ROOT / folder).rglob("*.py")
    ]
    return docs + sorted(p for p in code if p != Path(__file__).resolve())  # not its examples


def named_paths(text, markdown):
    """(line, path) of every path ``text`` names; with ``markdown``, link targets too."""
    found = [(m.start(), m.group(1)) for m in PATH.finditer(text)]
    if markdown:
        found += [
            (m.start(), m.group(1))
            for m in LINK.finditer(text)
            if "://" not in m.group(1) and not m.group(1).startswith("mailto:")
        ]
    return sorted({(text.count("\n", 0, start) + 1, path) for start, path in found})


def resolves(path, named_in):
    """True if ``path``, named in the file ``named_in``, exists from one of its bases."""
    bases = [ROOT, PACKAGE, named_in.parent, named_in.parent / "results"]
    return any((base / path).exists() for base in bases)


def missing_paths(files):
    """'file:line: path' for every named path that does not exist."""
    out = []
    for src in files:
        text = src.read_text(encoding="utf-8")
        for line, path in named_paths(text, src.suffix == ".md"):
            if not resolves(path, src):
                out.append(f"{src.relative_to(ROOT)}:{line}: {path}")
    return out


def test_every_path_the_docs_and_docstrings_name_exists():
    files = sources()
    assert len(files) > 100 and ROOT / "docs" / "training.md" in files
    missing = missing_paths(files)
    assert not missing, "named but missing:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    "text,markdown,expected",
    [
        ("see caps2ne_np/training/distributed.py.", False, ["caps2ne_np/training/distributed.py"]),
        ("(tests/test_reliability3.py measures it)", False, ["tests/test_reliability3.py"]),
        ("sums over k (kernels/_nothing.py)", False, ["kernels/_nothing.py"]),
        ("[results](../bench/results/none.md#top)", True, ["../bench/results/none.md"]),
        ("[results](none.md)", False, []),  # a link only counts in Markdown
        ("[results](none.md)", True, ["none.md"]),
        ("caps2ne_np/training/loop.py and docs/training.md", False, []),
        ("[training](training.md#threads), [site](https://example.org/x.md)", True, []),
        ("`git show 59ba5c7:caps2ne_np/graph.py`", False, []),
        ("bench/results/*_smoke.md, docs/<name>.md, ``<dir>/checkpoint.npz``", False, []),
    ],
)
def test_the_check_finds_exactly_the_missing_paths(tmp_path, text, markdown, expected):
    named_in = ROOT / "docs" / ("page.md" if markdown else "module.py")
    found = [path for _, path in named_paths(text, markdown) if not resolves(path, named_in)]
    assert found == expected
