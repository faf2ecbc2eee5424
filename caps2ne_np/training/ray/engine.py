"""``RayEngine``, the Ray engine of loop.run_epochs, and ``Cluster``, the actors of
one run: S shard servers (``server.ShardServer``) and P workers (``worker.RayWorker``)."""

from pathlib import Path

import numpy as np

from ...defaults import ROUND_WALKS, SYNC_MOMENTS, SYNC_ROUND_MAX_WORKERS
from ...errors import InputError
from ...kernels.rng import derive_seed
from ...model.params import init_params
from .. import checkpoint
from ..step import fused
from . import outputs
from .checkpoints import load_driver, save_checkpoint
from .replica import RayReplicaWorker
from .server import ShardServer
from .shards import peak_rss
from .worker import RayWorker

INIT_CHUNK_ROWS = 1 << 16
"""Rows per chunk when the driver streams initial values to the servers."""
ROUND_PARTS = 4
"""Replica rounds (replica.py): a round trains about R = ``round_walks`` walks per node
(``--round-walks``, defaults.ROUND_WALKS: R N / B batches, split over the workers; at
most 1 / ROUND_PARTS of an epoch, so that the workers merge at least that often an
epoch), so that it carries about R L pairs per row it may change (L pairs per walk): a
row's values, 4 (k + d + 1) bytes, cost at most 4 (k + d + 1) / (R L) bytes per pair
each way, three times that when the moments merge every round (``sync_moments``).
The run's first round is one batch per worker (it compiles or loads the kernels).
R = 0: rounds of one batch per worker on rows pulled for it (the parameter server's
rounds, worker.py)."""


def replica_rounds(cfg, fixed, replicate_W, row_limit=None, n_nodes=0, round_walks=ROUND_WALKS):
    """True when a run trains in replica rounds: ``round_walks`` > 0, the compiled
    step trains it (fused.supports: no skip-gram term), W is not replicated on its own
    (``w_placement='workers'`` keeps the parameter server's rounds), and no row limit
    below the ``n_nodes`` is set (``max_rows_per_shard``: a worker holds every row)."""
    kind = "dense" if fixed else None
    fits = row_limit is None or row_limit >= n_nodes
    return round_walks > 0 and fused.supports(cfg, kind) and not replicate_W and fits


class Cluster:
    """The actors of one run: S servers, P workers."""

    def __init__(
        self,
        ray,
        indptr,
        indices,
        weights,
        cfg,
        n_nodes,
        feat_dim,
        fixed,
        P,
        S,
        threads,
        replicate_W,
        replicas=False,
    ):
        self.ray, self.replicate_W = ray, replicate_W
        cpus = float(ray.available_resources().get("CPU", 1.0))
        worker_cpus = min(1.0, max(cpus, 0.01) / (P + S))
        Server = ray.remote(ShardServer).options(
            num_cpus=0, max_restarts=0, scheduling_strategy="SPREAD"
        )
        self.servers = [
            Server.remote(
                s,
                S,
                n_nodes,
                cfg.dim,
                feat_dim,
                cfg.walk_length - 1,
                fixed,
                s == 0 and not replicate_W,
                threads,
            )
            for s in range(S)
        ]
        csr = [ray.put(a) for a in (indptr, indices)] + [
            None if weights is None else ray.put(weights)
        ]
        Worker = ray.remote(RayReplicaWorker if replicas else RayWorker).options(
            num_cpus=worker_cpus, max_restarts=0, scheduling_strategy="SPREAD"
        )
        if replicas:  # every table on every worker (replica.py)
            self.workers = [
                Worker.remote(r, *csr, cfg, S, feat_dim, fixed, threads, self.servers)
                for r in range(P)
            ]
            return
        self.workers = [
            Worker.remote(
                r,
                *csr,
                cfg,
                None,
                S,
                self.servers,
                fixed,
                threads,
                (P, feat_dim) if replicate_W else None,
            )
            for r in range(P)
        ]

    def actors(self):
        return self.servers + self.workers

    def kill(self):
        for a in self.actors():
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 -- already dead is fine
                pass


class RayEngine:
    """The Ray engine of loop.run_epochs: S shard servers and P workers (``Cluster``).

    A round runs batches b0 .. b0 + P - 1 of the epoch, batch b0 + r on worker r, all
    against the parameters at the start of the round; each server then applies the P
    pushes in rank order, as P lazy-Adam steps with their own step counts and rates.
    With a replicated W, a round's W gradients are applied on every worker at the start
    of the next round (or by ``finite``/``save``, which bring W up to date first)."""

    def __init__(
        self,
        ray,
        indptr,
        indices,
        weights,
        cfg,
        features,
        resume_from,
        P,
        S,
        replicate_W,
        stats,
        start=None,
        n_batches=None,
        row_limit=None,
        round_walks=ROUND_WALKS,
        sync_moments=SYNC_MOMENTS,
    ):
        self.ray, self.cfg, self.S, self.replicate_W = ray, cfg, S, replicate_W
        self.n_nodes = n_nodes = int(indptr.shape[0] - 1)
        self.features = features
        self.start = start  # spectral.SpectralStart: --spectral init / init_xo start x (and O)
        self.fixed = features is not None
        self.feat_dim = features.shape[1] if self.fixed else cfg.feat_dim
        self.graph_hash = checkpoint.fingerprint(indptr, indices, weights, features)
        ckpt = None
        if resume_from is not None:
            ckpt = load_driver(resume_from)
            checkpoint.check_compatible(ckpt, cfg.to_dict(), self.graph_hash)
            if ckpt["n_shards"] != S:
                raise InputError(
                    f"{ckpt['path']}: written with --servers {ckpt['n_shards']}; "
                    f"resume with the same number of servers (now {S})"
                )
        self.round_size = self.P = P
        # replica rounds: merge the moments every round, or only before a checkpoint
        self.sync_rounds = sync_moments == "round" or (
            sync_moments == "auto" and 2 <= P <= SYNC_ROUND_MAX_WORKERS
        )
        self.replicas = replica_rounds(
            cfg, self.fixed, replicate_W, row_limit, n_nodes, round_walks
        )
        if self.replicas:  # a round's batches per worker, after the first round's one
            most = max(1, int(n_batches or 1) // ROUND_PARTS)
            batches = min(most, -(-round_walks * n_nodes // cfg.batch_size))
            self.share = max(1, -(-batches // P))
        self.checkpoint_every = 0  # driver.fit sets it: replica rounds end at its multiples
        self._merged = ()  # replica rounds: the last round's merged rows (refs, one per server)
        self.cluster = Cluster(
            ray,
            indptr,
            indices,
            weights,
            cfg,
            n_nodes,
            self.feat_dim,
            self.fixed,
            P,
            S,
            cfg.threads,
            replicate_W,
            self.replicas,
        )
        if stats is not None:  # the actors of this attempt (tests kill one)
            stats["actors"] = dict(servers=self.cluster.servers, workers=self.cluster.workers)
        try:
            self._start(ckpt)
        except BaseException:
            self.cluster.kill()
            raise
        self.start = None  # sent with the initial values (or resumed): not held in training
        self.resumed = ckpt
        self._w_pending = None  # replicated W: last round's ((steps, rates), refs)

    def _start(self, ckpt):
        ray, cfg, workers = self.ray, self.cfg, self.cluster.workers
        if cfg.sampler == "unigram":
            n_walks = self.n_nodes * cfg.walks_per_node
            P = len(workers)
            cuts = [n_walks * r // P for r in range(P + 1)]
            parts = ray.get(
                [
                    w.node_counts.remote(cuts[r], cuts[r + 1], cfg.walk_chunk)
                    for r, w in enumerate(workers)
                ]
            )
            counts_ref = ray.put(np.sum(parts, axis=0))  # int64: any order, same sum
            ray.get([w.set_counts.remote(counts_ref) for w in workers])
        if ckpt is None:
            self._initialise()
        else:
            self._resume(ckpt)
        if self.replicas:  # every worker loads the tables from the servers
            ray.get([w.load_from_servers.remote() for w in workers])

    def _resume(self, ckpt):
        ray, servers, workers = self.ray, self.cluster.servers, self.cluster.workers
        directory = Path(ckpt["dir"])
        pending = [
            srv.load.remote(str(directory / name)) for srv, name in zip(servers, ckpt["shards"])
        ]
        if self.replicate_W:
            if not ckpt["w_file"]:
                raise InputError(
                    f"{ckpt['path']}: W was held by server 0 in that run; "
                    "resume with the same W placement"
                )
            pending += [w.load_W.remote(str(directory / ckpt["w_file"])) for w in workers]
        elif ckpt["w_file"]:
            raise InputError(
                f"{ckpt['path']}: W was replicated on the workers in that "
                "run; resume with the same W placement"
            )
        ray.get(pending)

    def _initialise(self):
        """The initial values of ``params.init_params``, sent to the servers in chunks of
        rows (the driver holds the initial tables only until they are sent)."""
        ray, cfg, servers = self.ray, self.cfg, self.cluster.servers
        rng = np.random.default_rng(derive_seed(cfg.seed, "init"))
        start = self.start
        given = {} if start is None else dict(X=start.X, O=start.O)  # as train.LocalEngine
        params = init_params(
            self.n_nodes, cfg.dim, self.feat_dim, cfg.walk_length - 1, rng, self.features, **given
        )
        if self.replicate_W:
            W_ref = ray.put(params.W)
            pending = [w.set_W.remote(W_ref) for w in self.cluster.workers]
        else:
            pending = [servers[0].set_rows.remote("W", 0, params.W)]
        for name in ("O", "X"):
            table = getattr(params, name)
            for lo in range(0, self.n_nodes, INIT_CHUNK_ROWS):
                chunk = ray.put(np.ascontiguousarray(table[lo : lo + INIT_CHUNK_ROWS]))
                pending.extend(srv.set_rows.remote(name, lo, chunk) for srv in servers)
                if len(pending) > 8 * len(servers):  # bound the chunks in flight
                    ray.get(pending)
                    pending.clear()
        ray.get(pending)

    def train(self, epoch, b0, step0, rates):
        if self.replicas:
            return self._train_replicas(epoch, b0, step0, rates)
        ray, S = self.ray, self.S
        servers, workers = self.cluster.servers, self.cluster.workers
        (w_steps, w_rates), w_refs = self._w_pending or (((), ()), ())
        refs = [
            workers[r]
            .step.options(num_returns=S + 2)
            .remote(epoch, b0 + r, step0 + r, w_steps, w_rates, *w_refs)
            for r in range(len(rates))
        ]
        steps = [step0 + r + 1 for r in range(len(rates))]
        applied = [
            srv.apply.remote(steps, rates, *[refs[r][s] for r in range(len(rates))])
            for s, srv in enumerate(servers)
        ]
        self._w_pending = (
            ((steps, rates), [refs[r][S] for r in range(len(rates))]) if self.replicate_W else None
        )
        done = ray.get([refs[r][S + 1] for r in range(len(rates))])
        ray.get(applied)
        return done

    def _train_replicas(self, epoch, b0, step0, rates):
        """A replica round: worker r trains the r-th of P consecutive parts of the
        round's batches on its tables (after copying the last round's merged rows in),
        then each server merges the P workers' changed rows in rank order."""
        ray, S, P = self.ray, self.S, self.P
        n = len(rates)
        cuts = [n * r // P for r in range(P + 1)]
        refs = [
            w.train.options(num_returns=S + 1).remote(
                epoch,
                b0 + cuts[r],
                step0 + cuts[r],
                list(rates[cuts[r] : cuts[r + 1]]),
                *self._merged,
            )  # fmt: skip
            for r, w in enumerate(self.cluster.workers)
        ]
        merged = [
            srv.merge.options(num_returns=2).remote(*[refs[r][1 + s] for r in range(P)])
            for s, srv in enumerate(self.cluster.servers)
        ]
        done = [rec for part in ray.get([refs[r][0] for r in range(P)]) for rec in part]
        ray.get([ok for _, ok in merged])  # the merged rows stay in the object store
        self._merged = tuple(rows for rows, _ in merged) if P > 1 else ()
        if self.sync_rounds:  # --sync-moments round: the moments too, every round
            self._flush_moments()
        size = P * self.share  # the first round: one batch per worker
        every, nxt = self.checkpoint_every, step0 + n
        if every:  # a round ends at each multiple of checkpoint_every (as train.LocalEngine's)
            size = min(size, every - nxt % every)
        self.round_size = size
        return done

    def _flush_W(self):
        """Replicated W: apply the last round's W gradients on every worker now."""
        if self._w_pending is not None:
            (steps, rates), refs = self._w_pending
            self.ray.get([w.apply_W.remote(steps, rates, *refs) for w in self.cluster.workers])
            self._w_pending = None

    def finite(self):
        self._flush_W()
        checks = [srv.finite.remote() for srv in self.cluster.servers]
        if self.replicate_W:
            checks.append(self.cluster.workers[0].finite_W.remote())
        return all(self.ray.get(checks))

    def _flush_moments(self):
        """Replica rounds: the workers' moments of the rows changed since the last
        flush, merged by the servers (replica.merge_moments) and, at P > 1, copied
        back into every worker: what a checkpoint saves from the servers."""
        ray, S, P = self.ray, self.S, self.P
        workers, servers = self.cluster.workers, self.cluster.servers
        refs = [w.flush.options(num_returns=S + 1).remote() for w in workers]
        merged = [
            srv.merge_moments.options(num_returns=2).remote(*[refs[r][1 + s] for r in range(P)])
            for s, srv in enumerate(servers)
        ]
        ray.get([ok for _, ok in merged])
        if P > 1:
            ray.get([w.absorb_moments.remote(*[rows for rows, _ in merged]) for w in workers])

    def save(self, directory, state, history, extra):
        self._flush_W()
        if self.replicas:
            self._flush_moments()
        save_checkpoint(
            self.ray,
            directory,
            self.cluster,
            state,
            self.cfg,
            history,
            self.graph_hash,
            self.S,
            self.replicate_W,
            extra,
        )

    def params(self):
        return outputs.gather(
            self.ray, self.cluster, self.n_nodes, self.fixed, self.features, self.replicate_W
        )

    def finish(self, result, stats, write_outputs):
        """After the last epoch: the actors' statistics, then the outputs streamed from
        the shards (``write_outputs``) or the gathered parameters in ``result``."""
        ray, cluster = self.ray, self.cluster
        if stats is not None:
            stats["servers"] = ray.get([srv.stats.remote() for srv in cluster.servers])
            stats["workers"] = ray.get([w.stats.remote() for w in cluster.workers])
            stats["driver_peak_rss"] = peak_rss()
        if write_outputs is not None:
            result.params = outputs.streamed_params(
                ray,
                cluster,
                self.n_nodes,
                self.cfg.dim,
                self.feat_dim,
                self.fixed,
                self.features,
                self.replicate_W,
            )
            write_outputs(result)
            result.params = None  # its blocks pull from actors about to stop
            return result
        result.params = self.params()
        return result
