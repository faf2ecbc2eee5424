"""``caps2ne evaluate`` as a user runs it: scores of ``infer``'s output in one command."""

import numpy as np
import pytest


def test_evaluate_scores_infers_output_in_one_command(tmp_path):
    """infer writes only the new nodes; scoring them took a hand-built embeddings file
    (train's and infer's rows) and a splits file.  ``--inferred`` takes infer's file as
    it is: the classifier is fitted on the -e nodes' embeddings (the training nodes)
    and tested on the inferred nodes, with the whole labels file."""
    import json

    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.io.word2vec import write_word2vec

    rng = np.random.default_rng(0)
    centre = {"x": np.array([4.0, 0, 0]), "y": np.array([0, 4.0, 0])}
    label = {f"n{i}": "x" if i % 2 else "y" for i in range(30)}
    old, new = [f"n{i}" for i in range(20)], [f"n{i}" for i in range(20, 30)]

    def rows(ids):
        return np.stack([centre[label[i]] + rng.normal(0, 0.3, 3) for i in ids])

    write_word2vec(tmp_path / "train.emb", old, rows(old).astype(np.float32))
    E_new = rows(new)
    E_new[:5] = np.stack([centre["y" if label[i] == "x" else "x"] for i in new[:5]])  # wrong
    write_word2vec(tmp_path / "new.emb", new, E_new.astype(np.float32))
    (tmp_path / "labels.txt").write_text("".join(f"{n} {c}\n" for n, c in label.items()))
    out = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli,
        ["evaluate", "-e", str(tmp_path / "train.emb"), "--inferred", str(tmp_path / "new.emb")]
        + ["--labels", str(tmp_path / "labels.txt"), "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    (r,) = json.loads(out.read_text())
    assert r["test_mean"] == pytest.approx(0.5)  # 5 of the 10 inferred nodes, trained on 20
