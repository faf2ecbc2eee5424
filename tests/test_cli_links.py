"""``evaluate --task link`` and ``split-edges`` on the command line: the split written and
read back, the table and the JSON, and one clear line (or a usage error) for input
that does not fit."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.io.word2vec import write_word2vec

N, BLOCK = 80, 20


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(folder, edge list, split folder, embeddings): four planted blocks, ids 'n0'..,
    the split of seed 0, and rows that know the blocks (trained on nothing: the test is
    of the command, not of a method)."""
    d = tmp_path_factory.mktemp("links")
    rng = np.random.default_rng(0)
    block = np.arange(N) // BLOCK
    lines = [
        f"n{u} n{v}\n"
        for u in range(N)
        for v in range(u + 1, N)
        if rng.random() < (0.4 if block[u] == block[v] else 0.01)
    ]
    graph = d / "g.txt"
    graph.write_text("".join(lines))
    result = run("split-edges", "--graph", graph, "--out", d / "split")
    assert result.exit_code == 0, result.output
    E = np.eye(4)[block] + 0.1 * rng.standard_normal((N, 4))
    write_word2vec(d / "e.emb", [f"n{i}" for i in range(N)], E.astype(np.float32))
    return d, graph, d / "split", d / "e.emb"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def link(files, *extra, emb=None):
    d, graph, split, e = files
    return run(
        "evaluate", "--task", "link", "-e", emb or e, "--graph", graph, "--split", split,
        "--hits-k", "10", *extra,
    )  # fmt: skip


def test_split_edges_writes_two_edge_lists_that_cover_the_graph(files):
    d, graph, split, _ = files
    edges = {tuple(sorted(line.split())) for line in graph.read_text().splitlines()}
    parts = [
        [tuple(sorted(x.split())) for x in (split / name).read_text().splitlines()[1:]]
        for name in ("train_edges.txt", "held_edges.txt")
    ]
    assert set(parts[0]) | set(parts[1]) == edges and not set(parts[0]) & set(parts[1])
    assert len(parts[1]) == round(0.1 * len(edges))
    assert {u for e in parts[0] for u in e} == {u for e in edges for u in e}  # every node
    again = run("split-edges", "--graph", graph, "--out", split)
    assert again.exit_code == 1 and "exists; pass --overwrite" in again.output


def test_evaluate_link_prints_the_table_and_writes_json(files, tmp_path):
    out = tmp_path / "r.json"
    result = link(files, "--json", out)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines()[2:]]
    assert [r[:2] for r in rows] == [
        [k, s] for k in ("uniform", "degree", "two-hop") for s in ("cosine", "dot", "logistic")
    ]
    saved = json.loads(out.read_text())
    assert saved["kinds"]["uniform"]["scores"]["cosine"]["auc"] > 0.8  # the rows know the blocks
    assert float(rows[0][2]) == pytest.approx(
        100 * saved["kinds"]["uniform"]["scores"]["cosine"]["auc"], abs=0.006
    )
    assert link(files, "--json", out).exit_code == 1  # no --overwrite
    again = link(files, "--json", "-", "--negatives", "two-hop")
    assert list(json.loads(again.stdout)["kinds"]) == ["two-hop"]


def test_directed_split_and_evaluate(files, tmp_path):
    d, graph, _, e = files
    split = tmp_path / "dsplit"
    made = run("split-edges", "--graph", graph, "--out", split, "--directed", "--seed", "3")
    assert made.exit_code == 0, made.output
    result = link((d, graph, split, e), "--directed")
    assert result.exit_code == 0, result.output
    ordered = set(graph.read_text().splitlines())  # u -> v as g.txt has it, never v -> u
    held = (split / "held_edges.txt").read_text().splitlines()[1:]
    assert held and set(held) <= ordered


def _one_line_error(result, text):
    assert result.exit_code == 1, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and text in lines[0], result.output


def test_embeddings_missing_a_node_give_one_line(files, tmp_path):
    emb = tmp_path / "short.emb"
    write_word2vec(emb, [f"n{i}" for i in range(N - 1)], np.ones((N - 1, 4), np.float32))
    _one_line_error(link(files, emb=emb), "no embedding for node 'n79'")


def test_a_split_that_does_not_match_the_graph_gives_one_line(files, tmp_path):
    d, graph, split, e = files
    other = tmp_path / "split"
    other.mkdir()
    for name in ("train_edges.txt", "held_edges.txt"):
        (other / name).write_text((split / name).read_text())
    with open(other / "held_edges.txt", "a") as fh:
        fh.write("n0 n79\n")  # blocks 0 and 3: not an edge of this graph
    result = link((d, graph, other, e))
    _one_line_error(result, "held_edges.txt:")
    assert "not an edge of the graph" in result.output


@pytest.mark.parametrize(
    "extra, text",
    [
        (["--hits-k", "5000"], "--hits-k 5000: at most the"),
        (["--negatives", "far"], "--negatives: comma-separated kinds"),
        (["--C", "tuned"], "--C tuned: --task link takes a number"),
    ],
)
def test_bad_link_options_give_one_line(files, extra, text):
    _one_line_error(link(files, *extra), text)


@pytest.mark.parametrize(
    "args",
    [
        ["--task", "link", "-e", "x.emb", "--dataset", "cora-bundled"],  # no --split
        ["--task", "link", "-e", "x.emb", "--split", "."],  # no graph
        ["-e", "x.emb", "--dataset", "cora-bundled", "--split", "."],  # --split, task node
    ],
)
def test_options_that_do_not_go_together_are_usage_errors(args):
    assert run("evaluate", *args).exit_code == 2
