"""The defaults that converge: presets, the epoch budget, the learning-rate
schedule and fresh walks per epoch; ``--epochs N`` still means N, a resumed run still
ends where the uninterrupted one does, and the paper's settings are one flag away."""

import csv
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from caps2ne_np import defaults
from caps2ne_np.errors import InputError
from caps2ne_np.estimator.caps2ne import Caps2NE
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.options.presets import budget_epochs, resolve
from caps2ne_np.training.options.rates import converge_lr, learning_rate
from caps2ne_np.training.step.batch import walk_seed
from caps2ne_np.training.train import fit
from caps2ne_np.walks.walks import WalkSource

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(dim=8, feat_dim=8, walks_per_node=2, num_sampled=8)


def ring_of_cliques(cliques=4, size=6):
    blocks = [np.ones((size, size)) - np.eye(size) for _ in range(cliques)]
    A = sp.lil_matrix(sp.block_diag(blocks))
    for c in range(cliques):
        a, b = c * size, ((c + 1) % cliques) * size + 1
        A[a, b] = A[b, a] = 1
    return sp.csr_matrix(A, dtype=np.float32)


@pytest.fixture(scope="module")
def adj():
    return ring_of_cliques()


# ----------------------------------------------------------------- the schedule


def test_linear_schedule_runs_from_lr_to_floor_and_constant_stays():
    cfg = TrainConfig(lr_schedule="linear", lr_floor=0.01)
    total = 101
    rates = [learning_rate(cfg, 2e-3, s, total) for s in range(total)]
    assert rates[0] == 2e-3
    assert math.isclose(rates[-1], 2e-5, rel_tol=1e-12)
    assert math.isclose(rates[50], 2e-3 * (1 - 0.99 * 0.5), rel_tol=1e-12)
    assert all(a > b for a, b in zip(rates, rates[1:]))  # strictly decreasing
    const = TrainConfig(lr_schedule="constant")
    assert {learning_rate(const, 5e-4, s, total) for s in range(total)} == {5e-4}
    assert learning_rate(cfg, 1e-3, 0, 1) == 1e-3  # one step: the peak


def test_run_applies_the_schedule_step_by_step(adj, monkeypatch):
    """Adam sees lr(step) at every step of a linear run: first the peak, last the floor."""
    from caps2ne_np.training.step.fused import FusedStep

    seen = []
    real = FusedStep.train

    def spy(self, epoch, batches, steps, rates, parallel=True):
        seen.extend(rates)  # the compiled step's Adam takes each step's rate
        return real(self, epoch, batches, steps, rates, parallel)

    monkeypatch.setattr(FusedStep, "train", spy)
    model = Caps2NE(
        **TINY, epochs=2, lr=1e-2, lr_schedule="linear", batch_size=8, random_state=0
    ).fit(adj)
    assert len(seen) == 2 * math.ceil(adj.shape[0] * 2 / 8)
    assert seen[0] == 1e-2 and math.isclose(seen[-1], 1e-4, rel_tol=1e-9)
    assert np.all(np.diff(seen) < 0)
    assert [round(h["lr"], 12) for h in model.history_][-1] == round(seen[-1], 12)


# ----------------------------------------------------------------- presets and budget


def test_auto_preset_is_converge_without_features_and_paper_with_them():
    cfg, notes = resolve(TrainConfig(), n_nodes=1000, n_edges=10000)
    conv = defaults.PRESETS["converge"]
    for key in ("walks_per_node", "batch_size", "lr_schedule", "walks", "sampler", "adam"):
        assert getattr(cfg, key) == conv[key], key
    assert cfg.lr == converge_lr(1000, 10000)[0]
    assert cfg.epochs == budget_epochs(1000, 10000, cfg)[0]
    assert any("budget" in n for n in notes) and any("peak lr" in n for n in notes)
    assert notes[0].startswith("preset converge")

    fixed, notes = resolve(TrainConfig(), n_nodes=1000, n_edges=10000, fixed_features=True)
    paper = defaults.PRESETS["paper"]
    for key in (
        "walks_per_node",
        "batch_size",
        "lr_schedule",
        "walks",
        "sampler",
        "adam",
        "epochs",
    ):
        assert getattr(fixed, key) == paper[key], key
    assert fixed.lr == defaults.LR_FIXED_FEATURES
    assert notes[0].startswith("preset paper")
    paper_featureless, _ = resolve(TrainConfig(preset="paper"), 1000, 10000)
    assert paper_featureless.lr == defaults.LR_FEATURELESS and paper_featureless.epochs == 5


def test_explicit_options_beat_the_preset_and_epochs_means_exactly_n(adj):
    cfg, notes = resolve(
        TrainConfig(epochs=3, lr=7e-4, batch_size=5, adam="dense", walks="fixed"), 1000, 10000
    )
    assert (cfg.epochs, cfg.lr, cfg.batch_size, cfg.adam, cfg.walks) == (
        3,
        7e-4,
        5,
        "dense",
        "fixed",
    )
    assert not any("budget" in n for n in notes)
    model = Caps2NE(**TINY, epochs=3, random_state=0).fit(adj)
    assert [h["epoch"] for h in model.history_] == [1, 2, 3]
    assert model.config_["epochs"] == 3


def test_resolve_fills_the_sampled_set_size_once():
    """|V'| = min(256, N - 1) unless given: filled by resolve, so the run's stored
    config says what it used."""
    assert resolve(TrainConfig(), n_nodes=1000, n_edges=10000)[0].num_sampled == 256
    assert resolve(TrainConfig(), n_nodes=40, n_edges=200)[0].num_sampled == 39
    assert resolve(TrainConfig(num_sampled=7), n_nodes=40, n_edges=200)[0].num_sampled == 7


def test_converge_rate_grows_with_mean_degree_within_its_range():
    lo, hi = defaults.LR_RANGE
    per = defaults.LR_PER_DEGREE
    assert converge_lr(1000, 8000)[0] == pytest.approx(per * 8)  # mean degree 8
    assert converge_lr(2708, 10556)[0] == pytest.approx(per * 10556 / 2708)  # Cora
    assert converge_lr(1000, 1000)[0] == lo  # sparse: the floor
    assert converge_lr(1000, 10**6)[0] == hi  # dense: the cap
    rates = [converge_lr(1000, 1000 * d)[0] for d in range(1, 40)]
    assert all(a <= b for a, b in zip(rates, rates[1:]))
    assert "mean degree 8.0" in converge_lr(1000, 8000)[1]
    # an explicit --lr is never replaced, and the paper preset keeps its constants
    assert resolve(TrainConfig(lr=1e-5), 1000, 10**6)[0].lr == 1e-5
    assert resolve(TrainConfig(preset="paper"), 1000, 10**6)[0].lr == defaults.LR_FEATURELESS


def test_budget_is_pairs_per_node_over_pairs_per_epoch():
    cfg = TrainConfig(walks_per_node=16, walk_length=10, targets="all")
    epochs, why = budget_epochs(5000, 50000, cfg)
    assert epochs == math.ceil(defaults.BUDGET_PAIRS_PER_NODE / (16 * 10))
    assert str(defaults.BUDGET_PAIRS_PER_NODE) in why
    # fewer pairs per walk -> more epochs for the same budget; never fewer than one
    few, _ = budget_epochs(5000, 50000, replace(cfg, targets=(3, 4)))
    assert few == math.ceil(defaults.BUDGET_PAIRS_PER_NODE / (16 * 2))
    assert budget_epochs(10, 20, replace(cfg, walks_per_node=10**6))[0] == 1


def test_budget_stretches_where_the_rate_is_capped_and_no_further():
    """Above the mean degree where the degree rule meets the rate cap, the budget grows
    by the missing factor, up to BUDGET_MAX_STRETCH times."""
    cfg = TrainConfig(walks_per_node=16, walk_length=10, targets="all")
    at_cap = defaults.LR_RANGE[1] / defaults.LR_PER_DEGREE  # mean degree 16
    base = math.ceil(defaults.BUDGET_PAIRS_PER_NODE / 160)
    assert budget_epochs(1000, int(1000 * at_cap), cfg)[0] == base
    twice, why = budget_epochs(1000, int(1000 * 2 * at_cap), cfg)
    assert twice == math.ceil(2 * defaults.BUDGET_PAIRS_PER_NODE / 160) and "x 2.00" in why
    far = budget_epochs(1000, int(1000 * 50 * at_cap), cfg)[0]
    assert far == math.ceil(defaults.BUDGET_MAX_STRETCH * defaults.BUDGET_PAIRS_PER_NODE / 160)
    epochs = [budget_epochs(1000, 1000 * d, cfg)[0] for d in range(1, 200, 3)]
    assert all(a <= b for a, b in zip(epochs, epochs[1:]))


def test_auto_budget_is_used_and_reported(adj):
    model = Caps2NE(**TINY, random_state=0, stop="none").fit(adj)
    cfg, _ = resolve(TrainConfig(**TINY), adj.shape[0], adj.nnz)
    assert len(model.history_) == cfg.epochs == model.config_["epochs"]
    # --stop auto (the preset's): the budget is a cap (tests/test_budget.py)
    assert len(Caps2NE(**TINY, random_state=0).fit(adj).history_) <= cfg.epochs


def test_bad_preset_and_schedule_options_are_one_line_errors(adj):
    g = sp.csr_matrix(adj)
    for bad, option in (
        (dict(preset="fast"), "--preset"),
        (dict(lr_schedule="cosine"), "--lr-schedule"),
        (dict(walks="new"), "--walks"),
        (dict(lr_floor=0.0), "--lr-floor"),
        (dict(lr_floor=1.5), "--lr-floor"),
    ):
        with pytest.raises(InputError, match=option):
            fit(
                g.indptr.astype(np.int64),
                g.indices.astype(np.int32),
                None,
                TrainConfig(**dict(TINY, epochs=1), **bad),
            )


# ----------------------------------------------------------------- walks per epoch


def test_fresh_walks_differ_per_epoch_and_fixed_walks_repeat(adj):
    g = sp.csr_matrix(adj)
    src = WalkSource(
        g.indptr.astype(np.int64), g.indices.astype(np.int32), None, 2, 6, walk_seed(7, 0)
    )
    ids = np.arange(src.n_walks)
    epoch0 = src.walks(ids)
    epoch1 = src.reseeded(walk_seed(7, 1)).walks(ids)
    assert np.array_equal(src.reseeded(walk_seed(7, 0)).walks(ids), epoch0)
    assert not np.array_equal(epoch0, epoch1)
    assert np.array_equal(epoch0[:, 0], epoch1[:, 0])  # same start nodes: w = r*N + v
    assert walk_seed(7, 1) != walk_seed(7, 2) != walk_seed(7, 0)


def test_fresh_and_fixed_walks_agree_on_the_first_epoch_only(adj):
    runs = {
        w: [
            Caps2NE(**TINY, epochs=e, walks=w, lr_schedule="constant", lr=1e-2, random_state=3)
            .fit(adj)
            .O_
            for e in (1, 2)
        ]
        for w in ("fresh", "fixed")
    }
    np.testing.assert_array_equal(runs["fresh"][0], runs["fixed"][0])
    assert not np.array_equal(runs["fresh"][1], runs["fixed"][1])


# ----------------------------------------------------------------- resume


@pytest.mark.parametrize("every", [0, 7])
def test_resumed_converge_run_ends_where_the_uninterrupted_one_does(adj, tmp_path, every):
    """Fresh walks and the linear schedule are keyed by (seed, epoch, step), so they
    survive a resume; the auto budget is recomputed to the same number of epochs."""
    opts = dict(TINY, random_state=4, n_jobs=1, stop="none")  # stop auto: test_budget.py
    full = Caps2NE(**opts).fit(adj)

    class Stop(Exception):
        pass

    def interrupt(epoch, batch, step):
        if step == 11:
            raise Stop

    with pytest.raises(Stop):
        Caps2NE(**opts).fit(
            adj, checkpoint_dir=tmp_path, checkpoint_every=every, step_callback=interrupt
        )
    resumed = Caps2NE(**opts).fit(adj, resume_from=tmp_path, checkpoint_dir=tmp_path)
    np.testing.assert_array_equal(resumed.O_, full.O_)
    np.testing.assert_array_equal(resumed.X_, full.X_)
    assert [h["loss"] for h in resumed.history_] == [h["loss"] for h in full.history_]


# ----------------------------------------------------------------- command line


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_cli_history_csv_budget_line_and_paper_preset(tmp_path, adj):
    edges = tmp_path / "g.txt"
    rows, cols = sp.triu(adj, 1).nonzero()
    edges.write_text("".join(f"{u} {v}\n" for u, v in zip(rows, cols)))
    proc = _cli(
        "train",
        "--graph",
        str(edges),
        "--out",
        "g.emb",
        "--history",
        "h.csv",
        "--model-out",
        "m.npz",
        "--dim",
        "8",
        "--feat-dim",
        "8",
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "h.csv") as fh:
        rows_ = list(csv.DictReader(fh))
    from caps2ne_np.io.modelfile import read_model

    config = read_model(tmp_path / "m.npz")["config"]
    assert 1 <= len(rows_) <= config["epochs"]  # --stop auto: the budget is a cap
    assert [int(r["epoch"]) for r in rows_] == list(range(1, len(rows_) + 1))
    assert float(rows_[0]["lr"]) > float(rows_[-1]["lr"]) > 0  # linear decay
    assert config["lr_schedule"] == "linear" and config["walks"] == "fresh"

    proc = _cli(
        "train",
        "--graph",
        str(edges),
        "--out",
        "p.emb",
        "--model-out",
        "p.npz",
        "--preset",
        "paper",
        "--dim",
        "8",
        "--feat-dim",
        "8",
        "--epochs",
        "1",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "preset paper" in proc.stderr
    paper = read_model(tmp_path / "p.npz")["config"]
    assert (
        paper["lr_schedule"],
        paper["walks"],
        paper["adam"],
        paper["batch_size"],
        paper["lr"],
        paper["epochs"],
    ) == ("constant", "fixed", "dense", 64, defaults.LR_FEATURELESS, 1)

    proc = _cli(
        "train", "--graph", str(edges), "--out", "x.emb", "--history", "h.csv", cwd=tmp_path
    )
    assert proc.returncode == 1 and "h.csv: exists" in proc.stderr  # never replaced


def test_cli_resumed_run_rewrites_its_history_with_every_epoch(tmp_path, adj):
    edges = tmp_path / "g.txt"
    rows, cols = sp.triu(adj, 1).nonzero()
    edges.write_text("".join(f"{u} {v}\n" for u, v in zip(rows, cols)))
    common = ("--graph", str(edges), "--dim", "8", "--feat-dim", "8", "-q", "--history", "h.csv")
    first = _cli(
        "train", *common, "--out", "a.emb", "--epochs", "2", "--checkpoint-dir", "ck", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    resumed = _cli(
        "train", *common, "--out", "b.emb", "--epochs", "3", "--resume", "ck", cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr
    with open(tmp_path / "h.csv") as fh:
        assert [int(r["epoch"]) for r in csv.DictReader(fh)] == [1, 2, 3]


def _help_entries(text):
    """{'--option': its help text on one line} from click's help output."""
    entries, current = {}, None
    for line in text.splitlines():
        m = re.match(r"  (?:-\w, )?(--[\w-]+)", line)
        if m:
            current = m.group(1)
            entries[current] = line[m.end() :]
        elif current and line.startswith("      "):
            entries[current] += " " + line
        else:
            current = None
    return {option: " ".join(text.split()) for option, text in entries.items()}


def test_cli_estimator_and_trainconfig_share_every_default():
    """One source of truth, defaults.OPTIONS: each TrainConfig field's default is the
    estimator's and the command line's, shown in ``train --help`` with the table's help
    text.  The command line's --threads defaults to all cores (the estimator's n_jobs
    and TrainConfig to 1); the estimator spells threads n_jobs and seed random_state."""
    from dataclasses import fields

    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from caps2ne_np.cli import train as train_command

    result = CliRunner().invoke(cli, ["train", "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    shown = _help_entries(result.output)
    cli_defaults = train_command.make_context("train", []).params  # what train() receives
    est = Caps2NE().get_params()
    assert {f.name for f in fields(TrainConfig)} == set(defaults.OPTIONS)
    for f in fields(TrainConfig):
        option = defaults.OPTIONS[f.name]
        assert f.default == option.default, f.name
        assert (
            est[{"threads": "n_jobs", "seed": "random_state"}.get(f.name, f.name)] == f.default
        ), f.name
        flag = "--" + f.name.replace("_", "-")
        if option.kind == "flag":  # on by default: --no-<name> turns it off
            flag = "--no-" + flag[2:]
            assert cli_defaults["no_" + f.name] is False
        elif f.name == "threads":
            assert cli_defaults[f.name] is None and "[default: all cores" in shown[flag]
        else:
            assert cli_defaults[f.name] == f.default, f.name
        assert " ".join(option.help.split()) in shown[flag], f.name
        if f.default is not None and option.kind != "flag" and f.name != "threads":
            assert f"[default: {f.default}" in shown[flag], (f.name, shown[flag])
    assert "[default: 0.01; 0<x<=1]" in shown["--lr-floor"]  # the range is the table's
    assert "[preset]" in shown["--sampler"] and "log_uniform|unigram|uniform" in result.output


def test_validate_takes_ranges_and_choices_from_the_table(adj):
    """validation.validate checks every integer range and every choice of defaults.OPTIONS."""
    from caps2ne_np.training.options.validation import validate

    good = resolve(TrainConfig(**TINY), adj.shape[0], adj.nnz)[0]
    validate(good, adj.shape[0])
    for name, option in defaults.OPTIONS.items():
        if option.kind == "int" and option.low:
            bad = replace(good, **{name: option.low - 1})
        elif option.kind == "choice" and name != "preset":
            bad = replace(good, **{name: "nope"})
        else:
            continue
        with pytest.raises(InputError, match="--" + name.replace("_", "-")):
            validate(bad, adj.shape[0])


def test_the_kernels_know_every_routing_rule_the_options_offer():
    # capsules.ROUTING_RULES maps each name to the code the Numba kernels branch on;
    # the names themselves are defined once, in defaults.ROUTING_RULES.
    from caps2ne_np.defaults import ROUTING_RULES
    from caps2ne_np.model import capsules

    assert tuple(capsules.ROUTING_RULES) == ROUTING_RULES
    assert len(set(capsules.ROUTING_RULES.values())) == len(ROUTING_RULES)


def test_preset_help_states_the_rate_rule_runs_use():
    """--preset said converge used 'lr 5e-4 or 1e-4'; runs use the mean-degree rule.
    The help's numbers are converge_lr's, and the paper's are
    resolve's."""
    from caps2ne_np.defaults import LR_PER_DEGREE, LR_RANGE, preset_summary
    from caps2ne_np.training.options.config import TrainConfig
    from caps2ne_np.training.options.presets import resolve
    from caps2ne_np.training.options.rates import converge_lr

    text = preset_summary("converge")
    assert f"lr {LR_PER_DEGREE:g} x mean degree, within {LR_RANGE[0]:g}..{LR_RANGE[1]:g}" in text
    assert converge_lr(100, 100 * 4)[0] == LR_PER_DEGREE * 4  # degree 4: inside the range
    paper = preset_summary("paper")
    for fixed, n_edges in ((False, 400), (True, 400)):
        lr = resolve(TrainConfig(preset="paper"), 100, n_edges, fixed_features=fixed)[0].lr
        assert f"{lr:g}" in paper
