"""Docs a newcomer reads: the pictures exist and the script that draws them runs, the
README's figures are quoted from the benchmark results (not invented), LICENSE and
CITATION.cff are complete, the architecture diagram is in docs/math.md, no stale
example output."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import caps2ne_np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(text, title):
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def table_numbers(text):
    """Every number in the Markdown table rows of ``text`` (thousands separators removed)."""
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    cells = " ".join(rows[1:] if rows else [])  # skip the header row
    return {n.replace(",", "") for n in re.findall(r"\d[\d,]*\.?\d*", cells)}


@pytest.mark.parametrize("title", ["How long will it take", "Caps2NE or DeepWalk?"])
def test_readme_figures_are_quoted_from_the_benchmark_results(title):
    text = section(README, title)
    source = (ROOT / "bench" / "results" / "vs_deepwalk.md").read_text(encoding="utf-8")
    known = {n.replace(",", "") for n in re.findall(r"\d[\d,]*\.?\d*", source)}
    numbers = table_numbers(text) - {"3", "30", "0.5", "0.6", "0.7"}  # LFR names: size, mixing
    assert len(numbers) > 20
    assert numbers <= known, sorted(numbers - known)


def test_readme_quotes_the_inductive_figures_and_the_scaling_rate():
    text = section(README, "Caps2NE or DeepWalk?")
    inductive = (ROOT / "bench" / "results" / "inductive.md").read_text(encoding="utf-8")
    for figure in ("76.80", "76.54", "71.00", "69.84"):
        assert figure in text and figure in inductive
    scaling = (ROOT / "docs" / "scaling.md").read_text(encoding="utf-8")
    assert (
        "122,000 pairs/s" in section(README, "How long will it take")
        and "122,000 pairs/s" in scaling
    )


def test_every_picture_the_docs_show_exists_and_the_script_names_it():
    shown = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", doc.read_text(encoding="utf-8")):
            path = (doc.parent / target).resolve()
            assert path.is_file(), f"{doc.name} shows {target}, which does not exist"
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            shown.append(path.name)
    script = (ROOT / "examples" / "cora_pictures.py").read_text(encoding="utf-8")
    for name in ("cora_embedding_2d.png", "cora_accuracy_by_epoch.png"):
        assert name in shown and name in script
    assert "examples/cora_pictures.py" in README


def test_picture_script_runs(tmp_path):
    pytest.importorskip("matplotlib")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "cora_pictures.py"),
            "--smoke",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(ROOT),
            "PATH": "/usr/bin:/bin",
            "MPLCONFIGDIR": str(tmp_path / "mpl"),
        },
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "epoch 1: loss" in proc.stdout
    for name in ("cora_embedding_2d.png", "cora_accuracy_by_epoch.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_license_is_the_full_apache_2_text():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 190
    assert "license = Apache-2.0" in (ROOT / "setup.cfg").read_text(encoding="utf-8")


def test_citation_file_cites_the_paper_and_this_software():
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == caps2ne_np.__version__ and cff["license"] == "Apache-2.0"
    paper = cff["preferred-citation"]
    assert paper["title"] == "A Capsule Network-based Model for Learning Node Embeddings"
    assert paper["year"] == 2020 and "CIKM 2020" in paper["collection-title"]
    assert [a["family-names"] for a in paper["authors"]] == ["Nguyen", "Nguyen", "Nguyen", "Phung"]


def test_math_page_has_the_architecture_diagram():
    text = (ROOT / "docs" / "math.md").read_text(encoding="utf-8")
    glance = text[
        text.index("## The pipeline at a glance") : text.index("## Where a batch comes from")
    ]
    diagram = glance[glance.index("```") : glance.index("```", glance.index("```") + 3)]
    for step in ("random walk", "squash", "W_i u_i", "routing", "e_v", "sampled softmax", "loss"):
        assert step in diagram
    assert diagram.index("squash") < diagram.index("routing") < diagram.index("sampled softmax")


def test_no_stale_error_prefix_in_the_docs():
    text = (ROOT / "docs" / "input-formats.md").read_text(encoding="utf-8")
    assert "Error: emb.txt" not in text and "error: emb.txt: exists" in text
