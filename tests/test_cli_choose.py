"""The ``choose`` command: the table on stdout, the best rows written (and refused
without --overwrite), the graph checked against the model, the labels as evaluate
reads them."""

import numpy as np
import pytest
from click.testing import CliRunner

from caps2ne_np.cli import cli
from caps2ne_np.cli.choose import model_adjacency
from caps2ne_np.evaluation import written
from caps2ne_np.io.modelfile import read_model
from caps2ne_np.io.word2vec import read_word2vec
from test_written import TINY, sbm, write_edges


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """(folder, edge list, labels file, model file): a tiny model trained with the
    defaults' written rows (--propagate on) on a planted partition, labels of half its
    nodes."""
    d = tmp_path_factory.mktemp("choose")
    A, block = sbm(size=20)
    edges = write_edges(d / "edges.txt", A)
    labels = d / "labels.txt"
    labels.write_text("".join(f"v{i} c{block[i]}\n" for i in range(0, A.shape[0], 2)))
    path = d / "m.npz"
    result = CliRunner().invoke(
        cli,
        ["train", "--graph", str(edges), "--model-out", str(path), "--out", str(d / "m.emb")]
        + ["--propagate", "on", "--spectrum-power", "0.5", *TINY],
    )
    assert result.exit_code == 0, result.output
    return d, edges, labels, path


def choose(*args):
    return CliRunner().invoke(cli, ["choose", *map(str, args)])


def test_choose_prints_the_table_and_writes_the_best_rows(model, tmp_path):
    d, edges, labels, path = model
    out, npy = tmp_path / "best.emb", tmp_path / "best.npy"
    result = choose(
        "--model", path, "--graph", edges, "--labels", labels, "--out", out, "--npy", npy
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("3-fold cross-validation within 30 labelled nodes")
    rows = [line.split() for line in lines[2:12]]
    assert [" ".join(r[:2]) if r[0] != "none" else "none" for r in rows] == [
        "none",
        *(written.label(p, n) for p in (0.5, 0.75, 1.0) for n in (1.0, 2.0, 4.0)),
    ]
    best = next(line for line in lines if "<- best" in line)
    own = next(line for line in lines if "model's own" in line)
    assert own.split()[:2] == ["p=0.5", "len=2"]  # the model's --spectrum-power 0.5, length 2
    key = best.split()[0] if best.split()[0] == "none" else " ".join(best.split()[:2])
    assert lines[-2].startswith(f"best: {key}, ")
    assert lines[-1] == f"train writes it with: {written.train_flags(key)}"
    m = read_model(path)
    cfg = m["config"]
    cands = written.candidates(
        model_adjacency(m, path, str(edges)),
        m["O"],
        cfg["prone_order"],
        cfg["prone_mu"],
        cfg["prone_theta"],
        dtype=np.dtype(cfg["spectral_precision"]),
    )
    ids, E = read_word2vec(out)
    assert ids == m["node_ids"]
    np.testing.assert_array_equal(E, cands[key])
    np.testing.assert_array_equal(np.load(npy), cands[key])
    assert "chose in " in result.stderr and f"wrote {out}" in result.stderr


def test_choose_refuses_to_overwrite_without_the_flag(model, tmp_path):
    d, edges, labels, path = model
    out = tmp_path / "best.emb"
    out.write_text("precious\n")
    result = choose("--model", path, "--graph", edges, "--labels", labels, "--out", out)
    assert result.exit_code == 1
    assert "--overwrite" in result.stderr and result.stdout == ""
    assert out.read_text() == "precious\n"
    again = choose(
        "--model", path, "--graph", edges, "--labels", labels, "--out", out, "--overwrite"
    )
    assert again.exit_code == 0, again.stderr
    assert read_word2vec(out)[1].shape == (60, 8)
    to_stdout = choose("--model", path, "--graph", edges, "--labels", labels, "--npy", "-")
    assert to_stdout.exit_code == 1 and "--npy -: standard output carries the table" in (
        to_stdout.stderr
    )


def test_a_graph_that_is_not_the_model_s_is_one_line(model, tmp_path):
    d, edges, labels, path = model
    other = tmp_path / "other.txt"
    other.write_text(edges.read_text() + "v0 stranger\n")
    result = choose("--model", path, "--graph", other, "--labels", labels)
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert "not the graph of the model" in line and "'stranger' is not in the model" in line
    fewer = tmp_path / "fewer.txt"
    fewer.write_text("".join(x for x in edges.read_text().splitlines(True) if "v59" not in x))
    result = choose("--model", path, "--graph", fewer, "--labels", labels)
    assert result.exit_code == 1 and "node 'v59' of the model is not in it" in result.stderr


def test_the_graph_in_another_node_order_gives_the_same_choice(model, tmp_path):
    """The edge lines reversed (the nodes first seen in another order): the graph is
    put in the model's order, so the table and the model's own rows are found alike."""
    d, edges, labels, path = model
    reversed_edges = tmp_path / "reversed.txt"
    reversed_edges.write_text("".join(reversed(edges.read_text().splitlines(True))))
    first = choose("--model", path, "--graph", edges, "--labels", labels, "--quiet")
    second = choose("--model", path, "--graph", reversed_edges, "--labels", labels, "--quiet")
    assert first.exit_code == second.exit_code == 0, second.stderr
    assert second.stdout == first.stdout and "model's own" in second.stdout


def test_labels_of_a_node_not_in_the_model_and_too_few_per_class_are_errors(model, tmp_path):
    d, edges, labels, path = model
    unknown = tmp_path / "unknown.txt"
    unknown.write_text(labels.read_text() + "nobody c0\n")
    result = choose("--model", path, "--graph", edges, "--labels", unknown)
    assert result.exit_code == 1
    assert f"{unknown}:31: node 'nobody' is not in the model" in result.stderr
    few = tmp_path / "few.txt"
    few.write_text("v0 a\nv1 a\nv2 a\nv3 b\nv4 b\n")
    result = choose("--model", path, "--graph", edges, "--labels", few)
    assert result.exit_code == 1 and "class 'b' has 2 labelled node(s)" in result.stderr
    assert "--folds" in result.stderr
    assert choose("--model", path, "--graph", edges, "--labels", few, "--folds", "2").exit_code == 0


def test_choose_takes_its_options_from_its_table():
    """choose_params (run_choose's parameters) are what the command receives: the same
    names in the table's order, the same defaults."""
    from caps2ne_np.cli.choose import choose_params

    command = cli.commands["choose"]
    given = ["--model", __file__, "--graph", __file__, "--labels", __file__]
    received = command.make_context("choose", given).params
    expected = choose_params(model_path=__file__, graph=__file__, labels_path=__file__)
    assert [p.name for p in command.params if p.name != "help"] == list(expected)
    assert received == expected
    assert (received["C"], received["folds"], received["seed"]) == (1.0, 3, 0)


def test_a_model_file_from_before_the_filter_options_uses_their_defaults(model, tmp_path):
    """A file written before --prone-order/mu/theta and --spectral-precision were
    stored (their keys absent from its config) still loads and chooses."""
    import json

    d, edges, labels, path = model
    with np.load(path, allow_pickle=False) as z:
        arrays = dict(z)
    cfg = json.loads(str(arrays["config"]))
    for key in ("prone_order", "prone_mu", "prone_theta", "spectral_precision"):
        del cfg[key]
    arrays["config"] = np.asarray(json.dumps(cfg))
    old = tmp_path / "old.npz"
    np.savez(old, **arrays)
    result = choose("--model", old, "--graph", edges, "--labels", labels, "--quiet")
    assert result.exit_code == 0, result.stderr
    assert "<- best" in result.stdout
