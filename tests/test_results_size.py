"""bench/results/ stays small (issue 17): the latest summaries (.md) and compact JSON of each
script, nothing else.  One-off experiments and notes belong in docs/results/."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# bytes, as `du -sb bench/results` counts them (the folder's own entry too); 150 kB until
# issues 25-27 added the skip-gram, spectral-start and node2vec summaries, 160 kB until
# issue 32 added the propagation panel's (its per-epoch runs are in docs/results/)
LIMIT = 170_000


def test_bench_results_stay_under_the_limit():
    files = sorted(p for p in RESULTS.rglob("*") if p.is_file())
    total = RESULTS.stat().st_size + sum(p.stat().st_size for p in files)
    largest = sorted(((p.stat().st_size, p.name) for p in files), reverse=True)[:5]
    assert total < LIMIT, f"bench/results/ holds {total:,} bytes; largest: {largest}"


def test_bench_results_hold_only_summaries_and_compact_json():
    for path in RESULTS.rglob("*"):
        assert path.is_file() and path.suffix in (".md", ".json"), path.name
        if path.suffix == ".json":
            text = path.read_text(encoding="utf-8")
            json.loads(text)
            # bench/common.write_json: one line, no indentation
            assert text.count("\n") == 1 and text.endswith("\n"), path.name
