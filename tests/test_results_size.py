"""docs/results/ stays small: the scripts' latest summaries (.md) and compact JSON, and the
notes and records of settled questions beside them."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"
# bytes, as `du -sb docs/results` counts them (the folders' own entries too): the one
# results folder held 463 kB when the scripts' results moved in beside the notes, 524 kB
# with the panel under both protocols (panel_protocols.*, 48 kB), 655 kB with the written
# options on every panel graph and the rules chosen by leaving each graph out (written_*,
# 55 kB, and the four graphs of more/ against the peers, panel_more_peers.*, 17 kB), 736 kB
# with the Ray replica rounds (distributed_replicas*, 61 kB) and the link panel
# (links_panel.*, 26 kB), 768 kB with the update study (update_cora_wiki.*, 19 kB), 900
# kB with the Ray round's size and moments at P = 1, 2 and 200k nodes (distributed_
# defaults_*, distributed_values_*, distributed_replicas_rw*: 120 kB) and the update's
# change budget (update_cora_wiki_change.*, 12 kB), 944 kB with the update budgets side by
# side on five graphs (update_citeseer_ppi_*, update_cora_wiki_change_more.*,
# update_cora_wiki_hops_e10.*, update_cora_wiki_hops2_e2.*, update_budget_auto.md: 39 kB),
# then the MUSAE link panel (links_panel_musae_*, 19 kB) and the 100k update's three
# seeds and its nearer rings (update_lfr100k_change3.*, update_lfr100k_auto.*), 977 kB with
# the Cora update's epochs (update_cora_hops2_e3.*, _e4.*) and the budget rule left out
LIMIT = 985_000


def test_results_stay_under_the_limit():
    files = sorted(p for p in RESULTS.rglob("*") if p.is_file())
    dirs = [RESULTS, *(p for p in RESULTS.rglob("*") if p.is_dir())]
    total = sum(p.stat().st_size for p in dirs + files)
    largest = sorted(((p.stat().st_size, p.name) for p in files), reverse=True)[:5]
    assert total < LIMIT, f"docs/results/ holds {total:,} bytes; largest: {largest}"


def test_result_json_files_are_compact():
    for path in RESULTS.glob("*.json"):
        text = path.read_text(encoding="utf-8")
        json.loads(text)
        # bench/common.write_json: one line, no indentation
        assert text.count("\n") == 1 and text.endswith("\n"), path.name
