"""Sharded training on Ray (caps2ne_np/training/ray/): P = 1 equals single-machine
lazy-Adam training with the compiled step (the default engine) bit for bit, fixed P is
reproducible whatever S, P = S = 2 learns as well as one machine, a killed actor costs
nothing checkpointed, and no server holds all rows.  Skipped without Ray
(``pip install -e ".[ray]"``); the import test runs without it."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from caps2ne_np.errors import InputError
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.training.options.config import TrainConfig
from caps2ne_np.training.train import fit
from test_train import planted_partition

CFG = dict(
    dim=16, feat_dim=16, walks_per_node=4, epochs=2, num_sampled=16, lr=5e-3, adam="lazy", threads=1
)
NAMES = ("W", "O", "bias", "X")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_single_machine_path_does_not_import_ray():
    code = (
        "import sys; import caps2ne_np, caps2ne_np.training.train, caps2ne_np.estimator.caps2ne, "
        "caps2ne_np.cli; assert 'ray' not in sys.modules, 'ray imported'"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )


@pytest.mark.parametrize("fixed", [False, True])
def test_worker_and_servers_in_process_equal_the_compiled_single_machine(fixed):
    """BatchWorker and two ShardServers called directly (no Ray), one batch per round as
    the engine runs them at P = 1, with trained x or dense fixed features: the compiled
    step on pulled rows and the servers' lazy Adam give the single machine's compiled
    run bit for bit; a push marked ``skip`` (a non-finite loss) changes nothing."""
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.model.params import init_params
    from caps2ne_np.training.loop import Run, set_up
    from caps2ne_np.training.ray.server import ShardServer
    from caps2ne_np.training.ray.shards import interleave
    from caps2ne_np.training.ray.worker import BatchWorker

    adj, _ = planted_partition()
    g = from_scipy(adj, directed=True, keep_self_loops=False)
    n, S = g.n_nodes, 2
    given = np.random.default_rng(1).random((n, 12)).astype(np.float32) if fixed else None
    base = TrainConfig(**dict(CFG, epochs=1), spectral="none", propagate="none")
    single = fit(g.indptr, g.indices, g.weights, base, features=given)
    run = set_up(Run(g, base, given))
    cfg, features = run.cfg, run.features
    feat_dim = cfg.feat_dim if features is None else features.shape[1]
    servers = [
        ShardServer(s, S, n, cfg.dim, feat_dim, cfg.walk_length - 1, fixed, s == 0)
        for s in range(S)
    ]

    def pull(requests):
        return [srv.pull(o, x, w) for srv, (o, x, w) in zip(servers, requests)]

    worker = BatchWorker(0, g.indptr, g.indices, g.weights, cfg, None, S, pull, fixed)
    worker.set_counts(worker.node_counts(0, n * cfg.walks_per_node, cfg.walk_chunk))
    p = init_params(n, cfg.dim, feat_dim, cfg.walk_length - 1,
                    np.random.default_rng(derive_seed(cfg.seed, "init")), features)  # fmt: skip
    servers[0].set_rows("W", 0, p.W)
    for srv in servers:
        srv.set_rows("O", 0, p.O)
        srv.set_rows("X", 0, p.X)
    for b in range(run.schedule.n_batches):
        out = worker.step(0, b, b)
        for s, srv in enumerate(servers):
            srv.apply([b + 1], [run.schedule.rate(b)], out[s])
    assert worker.stats()["step"] == "compiled"
    for name in ("O", "X", "bias"):
        table = interleave([srv.arrays[name] for srv in servers], 0, n, S)
        assert np.array_equal(table, getattr(single.params, name)), name
    assert np.array_equal(servers[0].arrays["W"], single.params.W)
    W = servers[0].arrays["W"].copy()
    servers[0].apply([99], [1e-3], dict(skip=True))
    assert np.array_equal(W, servers[0].arrays["W"])


def replica_round_trip(P, S, fixed, share=7):
    """Replica rounds called in process (no Ray): P ReplicaWorkers, S ShardServers,
    rounds of ``share`` batches per worker as RayEngine runs them.  Returns (the run's
    set-up, the tables gathered from the servers, the workers)."""
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.model.params import init_params
    from caps2ne_np.training.loop import Run, set_up
    from caps2ne_np.training.ray.replica import ReplicaWorker
    from caps2ne_np.training.ray.server import ShardServer
    from caps2ne_np.training.ray.shards import interleave

    adj, _ = planted_partition()
    g = from_scipy(adj, directed=True, keep_self_loops=False)
    n = g.n_nodes
    given = np.random.default_rng(1).random((n, 12)).astype(np.float32) if fixed else None
    base = TrainConfig(**dict(CFG, epochs=1), spectral="none", propagate="none")
    run = set_up(Run(g, base, given))
    cfg, features = run.cfg, run.features
    feat_dim = cfg.feat_dim if features is None else features.shape[1]
    servers = [
        ShardServer(s, S, n, cfg.dim, feat_dim, cfg.walk_length - 1, fixed, s == 0)
        for s in range(S)
    ]
    p = init_params(n, cfg.dim, feat_dim, cfg.walk_length - 1,
                    np.random.default_rng(derive_seed(cfg.seed, "init")), features)  # fmt: skip
    servers[0].set_rows("W", 0, p.W)
    for srv in servers:
        srv.set_rows("O", 0, p.O)
        srv.set_rows("X", 0, p.X)
    workers = [
        ReplicaWorker(r, g.indptr, g.indices, g.weights, cfg, S, feat_dim, fixed) for r in range(P)
    ]
    counts = workers[0].node_counts(0, n * cfg.walks_per_node, cfg.walk_chunk)
    for w in workers:
        w.set_counts(counts)
        w.load(servers)
    merged, b, n_batches = (), 0, run.schedule.n_batches
    while b < n_batches:
        size = min(P * share, n_batches - b)
        cuts = [b + size * r // P for r in range(P + 1)]
        rates = [run.schedule.rate(s) for s in range(b, b + size)]
        outs = [
            w.train(0, cuts[r], cuts[r], rates[cuts[r] - b : cuts[r + 1] - b], *merged)
            for r, w in enumerate(workers)
        ]
        merged = [srv.merge(*[out[1 + s] for out in outs])[0] for s, srv in enumerate(servers)]
        merged = merged if P > 1 else ()
        b += size
    for w in workers:  # the last merge (RayEngine hands it on with the next round)
        w.absorb(*merged)
    flushed = [w.flush() for w in workers]  # the moments, as before a checkpoint
    merged = [srv.merge_moments(*[f[1 + s] for f in flushed])[0] for s, srv in enumerate(servers)]
    for w in workers if P > 1 else ():
        w.absorb_moments(*merged)
    tables = {
        name: interleave([srv.arrays[name] for srv in servers], 0, n, S)
        for name in ("O", "X", "bias")
    }
    tables["W"] = servers[0].arrays["W"]
    for name in workers[0].names:  # the moments the servers hold after the flush
        for which in ("m", "v"):
            if name == "W":  # server 0's
                tables[f"{which} W"] = getattr(servers[0].opt, which)["W"]
                continue
            parts = [getattr(srv.opt, which)[name] for srv in servers]
            tables[f"{which} {name}"] = interleave(parts, 0, n, S)
    return (g, cfg, given), tables, workers


def assert_moments_on_servers(tables, worker):
    """The servers' moments after a flush are the worker's, bit for bit."""
    for name in worker.names:
        for which in ("m", "v"):
            got = tables[f"{which} {name}"]
            assert np.array_equal(got, getattr(worker.opt, which)[name]), (which, name)


@pytest.mark.parametrize("fixed", [False, True])
def test_replica_rounds_in_process_equal_the_compiled_single_machine(fixed):
    """P = 1 in replica rounds (a worker trains 7 batches on its copy of the tables, the
    servers take the rows that changed): the single machine's compiled run bit for bit,
    on the servers and on the worker, with trained x or dense fixed features."""
    (g, cfg, given), tables, workers = replica_round_trip(1, 2, fixed)
    single = fit(g.indptr, g.indices, g.weights, cfg, features=given)
    for name in NAMES:
        assert np.array_equal(tables[name], getattr(single.params, name)), name
        assert np.array_equal(getattr(workers[0].params, name), tables[name]), name
    assert_moments_on_servers(tables, workers[0])  # what a checkpoint saves


def test_replica_rounds_two_workers_reproducible_whatever_the_servers():
    """P = 2: the same bits for S = 1 and S = 2 (each row merged in rank order), every
    worker's tables equal to the servers' after the last merge, and not P = 1's."""
    _, one_server, w1 = replica_round_trip(2, 1, False)
    _, two_servers, w2 = replica_round_trip(2, 2, False)
    _, single_worker, _ = replica_round_trip(1, 1, False)
    for name in NAMES:
        assert np.array_equal(one_server[name], two_servers[name]), name
        for w in w1:
            assert np.array_equal(getattr(w.params, name), one_server[name]), name
    for w in w1:  # after a flush, every worker holds the merged moments
        assert_moments_on_servers(one_server, w)
    assert all(np.array_equal(one_server[k], two_servers[k]) for k in one_server)
    assert not np.array_equal(one_server["O"], single_worker["O"])


def test_merge_rows_keeps_one_workers_bits_and_sums_the_changes_of_several():
    from caps2ne_np.training.ray.replica import merge_moments, merge_rows

    rng = np.random.default_rng(0)
    values, m, v = (rng.random((4, 3)).astype(np.float32) for _ in range(3))
    base, m_base = values.copy(), m.copy()
    a = (np.array([0, 2]), *(rng.random((2, 3)).astype(np.float32) for _ in range(3)))
    b = (np.array([2, 3]), *(rng.random((2, 3)).astype(np.float32) for _ in range(3)))
    rows, _ = merge_rows(values, [a[:2], None, b[:2]])
    assert rows.tolist() == [0, 2, 3]
    assert values[0].tobytes() == a[1][0].tobytes() and values[3].tobytes() == b[1][1].tobytes()
    assert np.array_equal(values[1], base[1])  # nobody changed it
    assert np.allclose(values[2], base[2] + (a[1][1] - base[2]) + (b[1][0] - base[2]))
    assert np.array_equal(m, m_base)  # the values' merge leaves the moments
    rows, *_ = merge_moments(m, v, [(a[0], a[2], a[3]), None, (b[0], b[2], b[3])])
    assert rows.tolist() == [0, 2, 3] and m[3].tobytes() == b[2][1].tobytes()
    assert np.array_equal(m[1], m_base[1])
    assert np.allclose(m[2], (a[2][1] + b[2][0]) / 2) and np.allclose(v[2], (a[3][1] + b[3][0]) / 2)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4", None])
def test_round_walks_is_a_whole_number_at_least_zero(bad):
    from caps2ne_np.training.ray.driver import check_round_walks

    assert check_round_walks(np.int64(2)) == 2 and check_round_walks(0) == 0
    with pytest.raises(InputError, match="round_walks"):
        check_round_walks(bad)


def test_sync_moments_is_one_of_its_choices(partition):
    from caps2ne_np.training.ray.driver import fit as fit_ray

    g, _ = partition
    with pytest.raises(InputError, match="sync_moments: one of auto, round, checkpoint"):
        fit_ray(g.indptr, g.indices, g.weights, TrainConfig(**CFG), sync_moments="often")


def test_cli_refuses_negative_round_walks(tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    graph = tmp_path / "g.txt"
    graph.write_text("a b\nb c\n")
    result = CliRunner().invoke(cli, ["train", "--graph", str(graph), "--round-walks", "-1"])
    assert result.exit_code == 2 and "--round-walks" in result.output


@pytest.fixture(scope="module")
def partition():
    adj, labels = planted_partition()
    return from_scipy(adj, directed=True, keep_self_loops=False), labels


@pytest.fixture(scope="module")
def single(partition):
    g, _ = partition
    return fit(g.indptr, g.indices, g.weights, TrainConfig(**CFG))


def run(g, P, S, **kwargs):
    from caps2ne_np.training.ray.driver import fit as fit_ray

    cfg = kwargs.pop("cfg", TrainConfig(**CFG))
    return fit_ray(g.indptr, g.indices, g.weights, cfg, workers=P, servers=S, **kwargs)


def assert_same(a, b):
    for name in NAMES:
        assert np.array_equal(getattr(a.params, name), getattr(b.params, name)), name
    assert [h["loss"] for h in a.history] == [h["loss"] for h in b.history]


@pytest.mark.slow
@pytest.mark.parametrize("S,w_placement", [(1, "server"), (2, "server"), (2, "workers")])
def test_one_worker_equals_single_machine_compiled_step_bitwise(
    ray_local, partition, single, S, w_placement
):
    g, _ = partition
    stats = {}
    assert_same(run(g, 1, S, w_placement=w_placement, stats=stats), single)
    kind = "compiled" if w_placement == "workers" else "compiled replica"
    assert [w["step"] for w in stats["workers"]] == [kind]


@pytest.mark.slow
@pytest.mark.parametrize("rounds", ["replicas", "replicas, moments at checkpoints", "rows"])
def test_fixed_workers_reproducible_and_independent_of_servers(
    ray_local, partition, single, rounds
):
    """P = 2 gives the same bits for S = 1 and 2, in replica rounds (the default: the
    moments merged every round; or only before checkpoints) and in the parameter
    server's rounds (``round_walks=0``; nor where W lives)."""
    g, _ = partition
    walks = 0 if rounds == "rows" else 4
    sync = "checkpoint" if "checkpoints" in rounds else "auto"
    stats = {}
    a = run(g, 2, 1, stats=stats, round_walks=walks, sync_moments=sync)
    b = run(g, 2, 2, w_placement="workers" if rounds == "rows" else "server", round_walks=walks,
            sync_moments=sync)  # fmt: skip
    assert_same(a, b)
    kind = "compiled" if rounds == "rows" else "compiled replica"
    assert [w["step"] for w in stats["workers"]] == [kind, kind]
    # two workers take the same batches, stale by a round: close to, not equal to, P = 1
    assert not np.array_equal(a.params.O, single.params.O)
    assert abs(a.history[-1]["loss"] - single.history[-1]["loss"]) < 0.05


@pytest.mark.slow
def test_two_workers_two_servers_learn_as_well_as_one_machine(ray_local, partition):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    g, labels = partition
    cfg = TrainConfig(
        dim=32,
        feat_dim=32,
        walks_per_node=8,
        epochs=5,
        num_sampled=32,
        lr=5e-3,
        adam="lazy",
        threads=1,
    )

    def accuracy(result):
        x_tr, x_te, y_tr, y_te = train_test_split(
            result.params.O, labels, test_size=0.5, random_state=0, stratify=labels
        )
        return LogisticRegression(max_iter=2000).fit(x_tr, y_tr).score(x_te, y_te)

    one = fit(g.indptr, g.indices, g.weights, cfg)
    two = run(g, 2, 2, cfg=cfg)
    assert two.history[-1]["loss"] < 0.85 * two.history[0]["loss"]
    assert accuracy(two) >= 0.95 and accuracy(two) >= accuracy(one) - 0.02


@pytest.mark.slow
def test_checkpoint_per_shard_and_resume_is_exact(ray_local, partition, single, tmp_path):
    g, _ = partition

    class Stop(Exception):
        pass

    def stop_at(epoch, batch, step):
        if step >= 70:
            raise Stop

    with pytest.raises(Stop):
        run(g, 1, 2, checkpoint_dir=tmp_path, checkpoint_every=30, step_callback=stop_at)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["driver.npz", "shard-0-of-2.1-60.npz", "shard-1-of-2.1-60.npz"]
    assert_same(run(g, 1, 2, checkpoint_dir=tmp_path, resume_from=tmp_path), single)
    with pytest.raises(InputError, match="--servers 2"):
        run(g, 1, 1, resume_from=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["servers", "workers"])
def test_killed_actor_restarts_from_checkpoint_and_loses_nothing(
    ray_local, partition, single, tmp_path, victim
):
    g, _ = partition
    stats, killed = {}, []

    def kill_at(epoch, batch, step):
        if step == 70 and not killed:
            actor = stats["actors"][victim][-1]
            os.kill(ray_local.get(actor.pid.remote()), signal.SIGKILL)
            killed.append(time.time())

    # a killed worker takes its replica of W with it: restored from the checkpoint too
    result = run(
        g,
        1,
        2,
        checkpoint_dir=tmp_path,
        checkpoint_every=25,
        step_callback=kill_at,
        stats=stats,
        w_placement="workers" if victim == "workers" else "server",
    )
    assert len(stats["failures"]) == 1
    assert stats["failures"][0]["time"] - killed[0] < 10.0  # noticed within seconds
    assert_same(result, single)


@pytest.mark.slow
def test_killed_actor_without_restarts_names_the_checkpoint(ray_local, partition, tmp_path):
    from caps2ne_np.training.ray.driver import WorkerLost

    g, _ = partition
    stats = {}

    def kill_at(epoch, batch, step):
        if step == 40:
            os.kill(ray_local.get(stats["actors"]["servers"][0].pid.remote()), signal.SIGKILL)

    with pytest.raises(WorkerLost, match=f"--resume {tmp_path}"):
        run(
            g,
            1,
            2,
            checkpoint_dir=tmp_path,
            checkpoint_every=25,
            step_callback=kill_at,
            stats=stats,
            max_restarts=0,
        )


@pytest.mark.slow
def test_row_limit_spreads_the_tables_and_no_actor_holds_all_rows(ray_local, partition):
    g, _ = partition
    n = g.n_nodes
    with pytest.raises(InputError, match="use at least 2"):
        run(g, 1, 1, max_rows_per_shard=n // 2)
    stats = {}
    run(g, 2, 2, max_rows_per_shard=n // 2, stats=stats)
    k, d = CFG["dim"], CFG["feat_dim"]
    full = n * (k + 1 + d) * 4 * 3  # values, m and v of O, bias, x
    rows = [s["rows"] for s in stats["servers"]]
    assert rows == [n // 2, n // 2]
    for s in stats["servers"]:
        assert s["row_bytes"] == full // 2  # half the rows; W only on server 0
        assert s["peak_rss"] > 0
    for w in stats["workers"]:  # the parameter server's rounds: no replica of the tables
        assert w["step"] == "compiled"
        assert 0 < w["max_rows"] < n  # a batch's rows, never all
        assert w["pulled"] > 0 and w["pushed"] > 0


@pytest.mark.slow
def test_estimator_engine_ray(ray_local, partition, single):
    from caps2ne_np.estimator.caps2ne import Caps2NE

    g, _ = partition
    model = Caps2NE(
        **{k: v for k, v in CFG.items() if k != "threads"},
        n_jobs=1,
        engine="ray",
        workers=1,
        servers=2,
    ).fit(g)
    assert np.array_equal(model.O_, single.params.O)  # (get_embedding: propagated)


@pytest.mark.slow
def test_cli_engine_ray_writes_the_single_machine_embeddings(ray_local, tmp_path):
    from click.testing import CliRunner

    from caps2ne_np.cli import cli

    edges = tmp_path / "g.edgelist"
    rng = np.random.default_rng(0)
    edges.write_text("".join(f"{a} {b}\n" for a, b in rng.integers(0, 60, size=(200, 2)) if a != b))
    common = [
        "train",
        "--graph",
        str(edges),
        "--dim",
        "8",
        "--feat-dim",
        "8",
        "--epochs",
        "1",
        "--walks-per-node",
        "2",
        "--num-sampled",
        "8",
        "--adam",
        "lazy",
        "--threads",
        "1",
        "--propagate",
        "none",  # both write the o_v as trained (Ray streams them unpropagated)
        "-q",
    ]
    runner = CliRunner()
    one = runner.invoke(cli, common + ["--out", str(tmp_path / "one.emb")])
    assert one.exit_code == 0, one.output
    two = runner.invoke(
        cli,
        common
        + [
            "--out",
            str(tmp_path / "two.emb"),
            "--engine",
            "ray",
            "--workers",
            "1",
            "--servers",
            "2",
        ],
    )
    assert two.exit_code == 0, two.output
    assert (tmp_path / "one.emb").read_text() == (tmp_path / "two.emb").read_text()
    options = [a if a != "lazy" else "dense" for a in common]
    dense = runner.invoke(cli, options + ["--engine", "ray", "--out", str(tmp_path / "x.emb")])
    assert dense.exit_code == 1 and "needs --adam lazy" in dense.output


@pytest.mark.slow
def test_cli_engine_ray_eval_every_epoch_resumes_like_the_uninterrupted_run(
    ray_local, tmp_path, monkeypatch
):
    """The Ray driver's checkpoint holds the best-epoch tracker (the epoch callback runs
    before the checkpoint, as on one machine): a run stopped after epoch 3 and resumed
    keeps the epoch the uninterrupted run keeps, and writes the same bytes."""
    from click.testing import CliRunner

    from caps2ne_np.cli import cli
    from clirun import CLIQUE_LABELS, CLIQUE_SPLITS, CLIQUES, EVAL

    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.txt").write_text(CLIQUES)
    (tmp_path / "l.txt").write_text(CLIQUE_LABELS)
    (tmp_path / "s.json").write_text(json.dumps(CLIQUE_SPLITS))
    ray_opts = ["--engine", "ray", "--adam", "lazy"]

    def go(out, *extra):
        r = CliRunner().invoke(
            cli, ["train", "--graph", "g.txt", "--out", out, *EVAL, *ray_opts, *extra]
        )
        assert r.exit_code == 0, r.stderr
        kept = [line for line in r.stderr.splitlines() if line.startswith("kept epoch")]
        assert kept, r.stderr
        return kept[0]

    full = go("full.emb", "--epochs", "6")
    go("part.emb", "--epochs", "3", "--checkpoint-dir", "ck")
    resumed = go("resumed.emb", "--epochs", "6", "--resume", "ck")
    assert int(full.split()[2]) <= 3  # kept before the interruption: the tracker must carry it
    assert resumed == full
    assert (tmp_path / "resumed.emb").read_bytes() == (tmp_path / "full.emb").read_bytes()


# -----------------------------------------------------------------


def cli_train(args, tmp_path, timeout=600):
    """``caps2ne train`` in a child process (its own Ray, its own stdout)."""
    return subprocess.run(
        [sys.executable, "-m", "caps2ne_np", "train", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        cwd=tmp_path,
        timeout=timeout,
    )


@pytest.mark.parametrize("quiet", [False, True])
def test_only_the_main_threads_writes_reach_stdout_while_ray_runs(capsys, quiet):
    """Ray's driver threads print the raylet's messages ('8 PYTHON worker processes have
    been started', a killed worker) and the actors' output with print() to sys.stdout,
    looked up when they print; --out - writes the results from the main thread."""
    import threading

    from caps2ne_np.training.ray.connect import results_only_stdout

    warning = "(raylet) WARNING: 8 PYTHON worker processes have been started on node"
    with results_only_stdout(quiet):
        print("2 1")
        thread = threading.Thread(target=lambda: print(warning))
        thread.start()
        thread.join()
        sys.stdout.write("a 0.5\nb 0.25\n")
        sys.stdout.flush()
    print("after")
    out, err = capsys.readouterr()
    assert out == "2 1\na 0.5\nb 0.25\nafter\n"
    assert err == ("" if quiet else warning + "\n")


@pytest.mark.slow
def test_cli_ray_out_dash_prints_only_the_embeddings_and_q_silences_ray(tmp_path):
    """--out - with 4 workers: stdout is exactly the embedding file --out writes; -q: not
    one line of Ray's own (its token-authentication warning, the raylet's) on stderr."""
    pytest.importorskip("ray")
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, 80, size=(300, 2))
    (tmp_path / "g.txt").write_text("".join(f"{a} {b}\n" for a, b in pairs if a != b))
    common = ["--graph", "g.txt", "--engine", "ray", "--workers", "4", "--adam", "lazy"]
    common += ["--dim", "8", "--feat-dim", "8", "--epochs", "1", "--walks-per-node", "2"]
    common += ["--threads", "1", "--batch-size", "8"]
    piped = cli_train([*common, "--out", "-", "-q"], tmp_path)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr[-3000:]
    written = cli_train([*common, "--out", "e.emb", "-q"], tmp_path)
    assert written.returncode == 0, written.stderr[-3000:]
    assert piped.stdout == (tmp_path / "e.emb").read_text()


def test_ray_address_forms_are_checked_before_ray_starts():
    pytest.importorskip("ray")
    from caps2ne_np.training.ray.connect import ray_address_target

    assert ray_address_target("auto") is None
    assert ray_address_target("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert ray_address_target("[::1]:6379") == ("::1", 6379)
    for bad in ("nonsense", "host:", ":6379", "host:0", "host:70000", "host:port"):
        with pytest.raises(InputError, match=f"--ray-address {bad}: expected 'auto', 'host:port'"):
            ray_address_target(bad)
    try:
        import grpc  # noqa: F401 -- Ray Client's dependency
    except ImportError:
        with pytest.raises(InputError, match=r"ray://h:10001: .*pip install 'ray\[client\]'"):
            ray_address_target("ray://h:10001")
    else:
        assert ray_address_target("ray://h:10001") == ("h", 10001)


def test_a_port_that_accepts_and_stays_silent_fails_within_the_timeout():
    """ray.init retried for minutes in native code against such a port (no Ctrl-C, no
    alarm gets through); the probe gives up after its timeout with one line."""
    import socket

    from caps2ne_np.training.ray.connect import _probe

    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        t0 = time.perf_counter()
        with pytest.raises(InputError) as err:
            _probe(f"127.0.0.1:{port}", "127.0.0.1", port, 1.0)
        assert time.perf_counter() - t0 < 10
    assert str(err.value) == (
        f"--ray-address 127.0.0.1:{port}: no Ray cluster at 127.0.0.1:{port} (no answer "
        "within 1 s); start one (ray start --head) or check the address"
    )


@pytest.mark.parametrize(
    "address,says",
    [
        ("127.0.0.1:1", "no Ray cluster at 127.0.0.1:1 (Connection refused)"),
        ("nonsense", "expected 'auto', 'host:port'"),
    ],
)
def test_cli_ray_address_fails_fast_with_one_line(tmp_path, address, says):
    """127.0.0.1:1 hung for over 200 s; 'nonsense' was an internal error."""
    pytest.importorskip("ray")
    (tmp_path / "g.txt").write_text("a b\nb c\nc a\n")
    args = ["--graph", "g.txt", "--out", "e.emb", "--engine", "ray", "--adam", "lazy"]
    t0 = time.perf_counter()
    proc = cli_train([*args, "--ray-address", address], tmp_path, timeout=120)
    assert time.perf_counter() - t0 < 60
    assert proc.returncode == 1 and proc.stdout == ""
    last = proc.stderr.splitlines()[-1]
    assert last.startswith(f"error: --ray-address {address}: ") and says in last, proc.stderr
    assert "internal error" not in proc.stderr and not (tmp_path / "e.emb").exists()


def test_workers_are_capped_by_the_batches_of_an_epoch(ray_local, partition, monkeypatch):
    """--workers 8 for a graph of 2 batches per epoch starts 2 workers (a round trains at
    most 2 batches), with the same bits as --workers 2, and warns above the CPU count."""
    import logging

    from caps2ne_np.training.ray.driver import cli_fit

    g, _ = partition
    cfg = TrainConfig(**dict(CFG, batch_size=400, epochs=1))  # 200 nodes x 4 walks: 2 batches
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("caps2ne_np")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.WARNING)  # an earlier -q in this process may have raised it
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    try:
        stats = {}
        capped = cli_fit(g.indptr, g.indices, g.weights, cfg, workers=8, servers=1, stats=stats)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert len(stats["workers"]) == 2
    assert "--workers 8: an epoch has 2 batches, so a round trains at most 2; " in lines[0]
    assert lines[1].startswith("--workers 2: more than the 1 CPUs of this machine")
    assert_same(capped, run(g, 2, 1, cfg=cfg))


def test_a_running_ray_clusters_gcs_passes_the_probe(ray_local):
    from caps2ne_np.training.ray.connect import _probe, ray_address_target

    address = ray_local.get_runtime_context().gcs_address
    _probe(address, *ray_address_target(address), 10.0)  # no InputError


@pytest.mark.parametrize(
    "user_env,expected",
    [
        ({}, {"GOMP_SPINCOUNT": "1000"}),  # actors share the cores: the short spin
        ({"GOMP_SPINCOUNT": "7"}, {}),  # the user's choice, inherited as it is
        ({"OMP_WAIT_POLICY": "PASSIVE"}, {}),
    ],
)
def test_ray_actors_start_with_the_short_openmp_spin(monkeypatch, user_env, expected):
    from caps2ne_np.training.ray import connect

    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in user_env.items():
        monkeypatch.setenv(name, value)
    seen = {}

    class FakeRay:
        def is_initialized(self):
            return False

        def init(self, **options):
            seen.update(options)

    monkeypatch.setattr(connect, "import_ray", FakeRay)
    assert connect.start_ray() is True
    env = seen["runtime_env"]["env_vars"]
    assert {k: v for k, v in env.items() if k != "PYTHONPATH"} == expected


def _sbm_edges(path, sizes=(30, 30, 30), seed=1):
    """A small 3-block graph with string ids, as an edge list at ``path``."""
    rng = np.random.default_rng(seed)
    block = np.repeat(np.arange(len(sizes)), sizes)
    n = block.size
    u, v = np.triu_indices(n, 1)
    p = np.where(block[u] == block[v], 0.3, 0.02)
    keep = rng.random(u.size) < p
    path.write_text("".join(f"n{a} n{b}\n" for a, b in zip(u[keep], v[keep], strict=True)))
    return path


@pytest.mark.parametrize("propagate", [None, "on", "none"])
def test_cli_engine_ray_writes_the_kind_of_rows_one_machine_writes(
    tmp_path, monkeypatch, propagate
):
    # no Ray needed: the Ray engine's seam (engines.fit) is stood in for by the single
    # machine's, which hands its result to write_outputs as ray.fit does when streaming
    from caps2ne_np.cli.train import run_train, train_params
    from caps2ne_np.training import engines

    real_fit, streamed = engines.fit, []

    def ray_stand_in(*args, engine="single", write_outputs=None, **kwargs):
        result = real_fit(*args, **kwargs)
        if engine == "ray" and write_outputs is not None:
            streamed.append(True)
            write_outputs(result)
        return result

    monkeypatch.setattr(engines, "fit", ray_stand_in)
    graph = _sbm_edges(tmp_path / "sbm.txt")
    common = dict(graph=str(graph), dim=8, feat_dim=8, epochs=1, walks_per_node=2, threads=1)
    common.update(num_sampled=8, quiet=True, propagate=propagate)
    run_train(train_params(out=str(tmp_path / "one.emb"), **common))
    run_train(train_params(out=str(tmp_path / "ray.emb"), engine="ray", **common))
    assert (tmp_path / "one.emb").read_bytes() == (tmp_path / "ray.emb").read_bytes()
    assert streamed == ([True] if propagate == "none" else [])  # only the o_v as trained


def test_starting_ray_keeps_this_processes_sigterm_handler(monkeypatch):
    # ray.init installs its own SIGTERM handler (exit 15 and a crash dump); the
    # command line's (temp files removed, 'terminated (SIGTERM)', 143) must stay
    import types

    from caps2ne_np.training.ray import connect

    def init(**options):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setitem(sys.modules, "ray", fake)

    def ours(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, ours)
    try:
        assert connect.start_ray(num_cpus=1) is True
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, old)


def test_cli_engine_ray_sigterm_is_the_documented_line_and_143(tmp_path):
    pytest.importorskip("ray")
    graph = _sbm_edges(tmp_path / "sbm.txt", sizes=(200, 200, 200))
    proc = subprocess.Popen(
        [
            sys.executable,
            os.path.join(ROOT, "cli.py"),
            "train",
            "--graph",
            str(graph),
            "--engine",
            "ray",
        ]
        + ["--epochs", "200", "--dim", "8", "--feat-dim", "8", "--walks-per-node", "1"]
        + ["--propagate", "none", "-q", "--checkpoint-dir", "ck", "--out", "o.emb"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.time() + 300
        while not (tmp_path / "ck").exists() and time.time() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.decode().rstrip().splitlines()[-1] == (
        "error: terminated (SIGTERM); no output was written"
    )
    assert not (tmp_path / "o.emb").exists()
