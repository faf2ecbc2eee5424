"""docs/math.md, examples/one_step.py and the code stay in step.

* every `module.function` that docs/math.md names resolves in caps2ne_np.<module>;
* the page names every function of the forward and backward pass;
* every docs/math.md#anchor that the code or the example links to is a heading;
* examples/one_step.py runs and reports that all its gradient checks passed.
"""

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "math.md"
EXAMPLE = ROOT / "examples" / "one_step.py"

# `a.b` or `a.b.c` in backticks: a dotted Python name.
DOTTED = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`")
# Dotted names that are not caps2ne_np references: other libraries, file names.
FOREIGN = {"np", "numpy", "tf", "scipy", "sklearn", "numba"}
FILE_SUFFIXES = {"py", "md", "txt", "npy", "npz", "json", "mat"}

# The forward and backward pass, end to end: the page must name each of these.
REQUIRED = [
    "capsules.squash",
    "blas.segment_matmul",
    "capsules.gather_rows",
    "capsules.route",
    "capsules.output_logits",
    "capsules.softmax_rows",
    "grads.sampled_softmax_backward_rows",
    "grads.route_backward",
    "grads.gather_rows_backward",
    "blas.segment_matmul_tn",
    "grads.squash_backward",
    "grads.scatter_add_rows",
    "batch_forward.forward",
    "core.loss_and_row_grads",
    "core.loss_and_grads",
    "optim.Adam",
    "optim._adam_dense",
    "samplers._Sampler.expected_count",
    # the float64 reference of the steps training computes in another shape
    "reference.predict",
    "reference.predict_backward",
    "reference.sampled_softmax_backward",
]


def doc_text():
    return DOC.read_text(encoding="utf-8")


def named_references(text):
    """The caps2ne_np names written `module.function` (or `module.Class.method`) in text."""
    refs = set()
    for name in DOTTED.findall(text):
        parts = name.split(".")
        if parts[0] in FOREIGN or parts[-1] in FILE_SUFFIXES:
            continue
        refs.add(name)
    return sorted(refs)


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces -> '-'."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def doc_anchors(text):
    anchors, seen = set(), {}
    in_fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        m = re.match(r"#{1,6} (.+)", line)
        if m and not in_fence:
            base = github_anchor(m.group(1))
            n = seen.get(base, 0)
            anchors.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return anchors


def module_paths():
    """{file name without .py: dotted module} of every module of the package but the
    command line's; the page names a module by its file name (`capsules.squash` is
    caps2ne_np.model.capsules)."""
    package = ROOT / "caps2ne_np"
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] != "__init__" and parts[1] != "cli":
            assert path.stem not in found, f"two modules named {path.stem}"
            found[path.stem] = ".".join(parts)
    return found


def resolve(name):
    module, *attrs = name.split(".")
    obj = importlib.import_module(module_paths().get(module, f"caps2ne_np.{module}"))
    for attr in attrs:
        obj = getattr(obj, attr)
    return obj


@pytest.mark.parametrize("name", named_references(doc_text()))
def test_every_name_in_math_doc_exists(name):
    try:
        resolve(name)
    except (ImportError, AttributeError) as err:
        pytest.fail(f"docs/math.md names `{name}`, which does not exist: {err}")


def test_math_doc_names_the_whole_forward_and_backward_pass():
    missing = [name for name in REQUIRED if name not in named_references(doc_text())]
    assert not missing, f"docs/math.md does not name: {missing}"


def test_reference_parser_skips_files_and_other_libraries_but_not_typos():
    text = "`grads.route_backward` `grad.route_backward` `core.py` `np.matmul` `x`"
    assert named_references(text) == ["grad.route_backward", "grads.route_backward"]
    with pytest.raises(ImportError):
        resolve("grad.route_backward")


def test_github_anchor_matches_githubs_rule():
    assert github_anchor("Routing backward") == "routing-backward"
    assert github_anchor("Sampled softmax (Eq. 3)") == "sampled-softmax-eq-3"


def test_every_link_into_math_doc_hits_a_heading():
    anchors = doc_anchors(doc_text())
    sources = sorted((ROOT / "caps2ne_np").rglob("*.py")) + [EXAMPLE]
    broken = []
    for path in sources:
        for anchor in re.findall(r"docs/math\.md#([\w-]+)", path.read_text(encoding="utf-8")):
            if anchor not in anchors:
                broken.append(f"{path.relative_to(ROOT)}: #{anchor}")
    for anchor in re.findall(r"\]\(#([\w-]+)\)", doc_text()):
        if anchor not in anchors:
            broken.append(f"docs/math.md: #{anchor}")
    assert not broken, f"links to missing headings of docs/math.md: {broken}"


def test_one_step_example_runs_and_all_gradient_checks_pass():
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"exit code {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    m = re.fullmatch(r"all (\d+) gradient checks passed", lines[-1])
    assert m, f"last line was {lines[-1]!r}"
    ok = [line for line in lines if line.lstrip().startswith("check ") and line.endswith(" ok")]
    assert int(m.group(1)) == len(ok) >= 10
    assert "FAILED" not in proc.stdout
