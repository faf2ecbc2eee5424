"""Training throughput (pairs/s) of caps2ne_np against a PyTorch (CPU) peer, and against
the float32 GEMM rate of the same machine.

A pair is one (context, target) example; a step is one batch, timed end to end:
batch walk ids, (context, target) pairs, the sampled set V' and its expected counts,
forward, backward and the Adam update of every parameter.  Both implementations run
the same input pipeline (caps2ne_np.walks.walks / samplers), on the same batches, from the
same initial parameters, in the same process, with the same thread count, and their
repetitions are interleaved so that they see the same machine load.

Configs (q = 10, |V'| = 256, log-uniform sampler, grad_mode 'exact',
routing rule 'paper'):
  a  Cora, fixed row-normalised bag-of-words features (d = 1,433), k = 128,
     64 walks x targets at positions {3,4,5,6} = 256 pairs per step, m = 1
  b  BlogCatalog graph (10,312 nodes, its edges), no features: x trained, d = k = 128,
     128 walks x 10 targets = 1,280 pairs per step, m = 1
  c  as a with m = 3
  d  Citeseer (d = 3,703) as a
  e  Citeseer featureless (trained x, d = 128) as a
  f  the 'converge' preset on a featureless graph: Cora, trained x d = k = 128,
     B = 16 walks x 10 targets = 160 pairs per step, lazy Adam, unigram sampler
  g  f with B = 128 walks (1,280 pairs per step), measured beside it

Configs f and g time the step as ``train.fit`` runs it, with the per-step thread rule
(caps2ne_np/kernels/thread_layer.py, StepThreads: each step on the thread count that timed fastest);
``ours-fixed`` is the same step forced onto every thread (the rule off), on >1 thread.
``--skipgram-weight W`` adds ``ours-skipgram`` (f, g): the step with the skip-gram term
(docs/training.md), when this caps2ne_np's ModelConfig has the option (else a note, and no row).

    python bench/perf.py --configs f,g --threads 1,2 --no-peer   # the thread targets

Writes docs/results/perf.json and perf.md (or <--out>.*).

    python bench/perf.py                      # all configs, 1 and 2 threads (~3 min)
    python bench/perf.py --configs a,b --threads 1 --reps 3
    python bench/perf.py --smoke              # < 30 s: a and b, 1 thread, few steps
"""

import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from numba import njit, prange
from threadpoolctl import threadpool_limits

# first: common sets GOMP_SPINCOUNT before torch's OpenMP runtime starts, and puts this
# checkout's package first on sys.path
import common

# isort: split
import caps2ne_np
import report
from caps2ne_np.errors import InputError
from caps2ne_np.graphs.csr import from_scipy
from caps2ne_np.graphs.datasets import load_dataset
from caps2ne_np.graphs.downloads import default_data_dir
from caps2ne_np.graphs.graph import read_edgelist
from caps2ne_np.model import features as model_features
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import init_params
from caps2ne_np.model.rows import batch_rows
from caps2ne_np.training.step.batch import Batch
from caps2ne_np.training.step.optim import Adam
from caps2ne_np.training.step.python_step import TrainStep
from caps2ne_np.training.step.samplers import make_sampler
from caps2ne_np.walks import walks as walks_mod

CONFIGS = {
    "a": dict(
        dataset="cora", features=True, dim=128, batch=64, targets=(3, 4, 5, 6), routing_iters=1
    ),
    "b": dict(
        dataset="blogcatalog",
        features=False,
        feat_dim=128,
        dim=128,
        batch=128,
        targets="all",
        routing_iters=1,
    ),
    "c": dict(
        dataset="cora", features=True, dim=128, batch=64, targets=(3, 4, 5, 6), routing_iters=3
    ),
    "d": dict(
        dataset="citeseer", features=True, dim=128, batch=64, targets=(3, 4, 5, 6), routing_iters=1
    ),
    "e": dict(
        dataset="citeseer",
        features=False,
        feat_dim=128,
        dim=128,
        batch=64,
        targets=(3, 4, 5, 6),
        routing_iters=1,
    ),
    "f": dict(
        dataset="cora.edgelist",
        features=False,
        feat_dim=128,
        dim=128,
        batch=16,
        targets="all",
        routing_iters=1,
        sampler="unigram",
        adam="lazy",
    ),
    "g": dict(
        dataset="cora.edgelist",
        features=False,
        feat_dim=128,
        dim=128,
        batch=128,
        targets="all",
        routing_iters=1,
        sampler="unigram",
        adam="lazy",
    ),
}
CONVERGE = ("f", "g")  # the featureless default (f) beside B = 128 walks (g)
COMMON = dict(
    walk_length=10,
    num_sampled=256,
    walks_per_node=4,
    sampler="log_uniform",
    routing_rule="paper",
    grad_mode="exact",
    seed=0,
)
LABELS = {
    "a": "Cora, fixed features d=1,433, k=128, 256 pairs/step, m=1",
    "b": "BlogCatalog graph, trained x d=k=128, 1,280 pairs/step, m=1",
    "c": "Cora as (a), m=3",
    "d": "Citeseer, fixed features d=3,703, as (a)",
    "e": "Citeseer featureless, trained x d=128, as (a)",
    "f": "converge preset: Cora featureless, 160 pairs/step (B=16), lazy Adam, unigram",
    "g": "converge preset as (f), 1,280 pairs/step (B=128)",
}
FEATURE_PARITY = ("d", "e")  # d = 3,703 sparse at least as fast as trained d = 128
SCALING_CONFIGS = ("a", "b")  # the 2-thread speed-up target's configs
# the thresholds: report.TARGETS
LR = {True: 1e-4, False: 1e-3}  # the library's defaults (fixed features / trained x)


# --------------------------------------------------------------------------- the problem


def row_normalise(features):
    """x_v / sum(x_v) per row, as the authors (rows summing to 0 stay 0): CSR float32."""
    csr = sp.csr_matrix(features, dtype=np.float64)
    sums = np.asarray(csr.sum(axis=1)).ravel()
    inv = np.zeros_like(sums)
    np.divide(1.0, sums, out=inv, where=sums != 0)
    return sp.csr_matrix(sp.diags(inv) @ csr, dtype=np.float32)


def feature_input(csr, mode):
    """The fixed-feature input handed to ``params.init_params``: the one place that decides.

    mode 'sparse' -> the scipy CSR matrix (core keeps it sparse: ``features.SparseFeatures``),
    'dense' -> a dense float32 array, 'auto' -> sparse when ``model.features`` has it.
    """
    if mode == "auto":
        mode = "sparse" if hasattr(model_features, "SparseFeatures") else "dense"
    if mode == "sparse":
        if not hasattr(model_features, "SparseFeatures"):
            raise SystemExit("--features sparse: this caps2ne_np has no sparse feature input")
        return csr, "sparse"
    return np.ascontiguousarray(csr.toarray(), dtype=np.float32), "dense"


def load_problem(cfg):
    """Graph CSR (as the estimator builds it), row-normalised features or None, and walks.
    A dataset named ``*.edgelist`` is that file of caps2ne_np/data (no features), as
    ``caps2ne train --graph caps2ne_np/data/cora.edgelist`` reads it."""
    if cfg["dataset"].endswith(".edgelist"):
        g = read_edgelist(str(Path(caps2ne_np.__file__).parent / "data" / cfg["dataset"]))
        features = None
    else:
        try:
            ds = load_dataset(cfg["dataset"], default_data_dir())
        except InputError as err:  # e.g. offline without BlogCatalog: one line, not a traceback
            raise SystemExit(
                f"bench/perf.py: needs the {cfg['dataset']} data set "
                f"('caps2ne fetch-data {cfg['dataset']}'): {err}"
            ) from None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Citeseer's self loops are dropped, as in fit
            g = from_scipy(ds.adj)
        features = row_normalise(ds.features) if cfg["features"] else None
    walks = walks_mod.uniform_walks(
        g.indptr, g.indices, g.weights, COMMON["walks_per_node"], COMMON["walk_length"], 1
    )
    return dict(n_nodes=g.n_nodes, features=features, walks=walks)


class Batches:
    """The per-step input pipeline of ``batch.BatchStream``: batch walk ids (with replacement),
    (context, target) pairs, V' and the expected counts Q."""

    def __init__(self, problem, cfg):
        self.walks = problem["walks"]
        self.batch = cfg["batch"]
        self.positions = walks_mod.target_positions(cfg["targets"], COMMON["walk_length"])
        sampler = cfg.get("sampler", COMMON["sampler"])
        counts = (
            np.bincount(problem["walks"].ravel(), minlength=problem["n_nodes"])
            if sampler == "unigram"
            else None
        )
        self.sampler = make_sampler(sampler, problem["n_nodes"], counts=counts)
        self.num_sampled = COMMON["num_sampled"]

    def __call__(self, step):
        walk_ids = walks_mod.batch_walk_ids(self.walks.shape[0], self.batch, 11, 0, step)
        ctx, tgt = walks_mod.training_pairs(self.walks, walk_ids, self.positions, seed=12, key=step)
        sampled, tries = self.sampler.sample(self.num_sampled, 13, step)
        return (
            ctx,
            tgt,
            sampled,
            self.sampler.expected_count(tgt, tries),
            self.sampler.expected_count(sampled, tries),
        )

    def pairs_per_step(self):
        return self.batch * len(self.positions)


class Ours:
    """caps2ne_np: ``step.TrainStep`` (``core.loss_and_row_grads`` + ``optim.Adam``,
    dense), exactly as ``train.LocalEngine`` runs a step, the next batch drawn before the
    update as there; BLAS held at one thread as ``train.fit`` does (products run on
    Numba's threads, caps2ne_np/kernels/blas.py).  ``fused=False`` times the separate
    kernels instead of step.FusedSparseW (sparse features only)."""

    name = "ours"

    def __init__(
        self,
        problem,
        cfg,
        feature_mode,
        adam="dense",
        fused=True,
        name=None,
        adaptive_threads=False,
        mcfg_extra=None,
    ):
        n_slots = COMMON["walk_length"] - 1
        rng = np.random.default_rng(0)
        features, self.feature_kind = (
            feature_input(problem["features"], feature_mode)
            if cfg["features"]
            else (None, "trained")
        )
        feat_dim = cfg["feat_dim"] if features is None else features.shape[1]
        self.params = init_params(
            problem["n_nodes"], cfg["dim"], feat_dim, n_slots, rng, features=features
        )
        self.names = self.params.trainable()
        self.opt = Adam({n: getattr(self.params, n) for n in self.names}, lr=LR[cfg["features"]])
        self.mcfg = ModelConfig(
            cfg["routing_iters"], COMMON["routing_rule"], None, COMMON["grad_mode"]
        )
        for field_name, value in (mcfg_extra or {}).items():
            setattr(self.mcfg, field_name, value)
        self.batches = Batches(problem, cfg)
        self.step = 0
        self.losses = []
        self.adam_seconds = 0.0
        self.lazy = adam == "lazy"
        if self.lazy:  # a different runner: kept apart from the peers
            self.name = "ours-lazy"
        if name is not None:
            self.name = name
        kw = dict(adaptive_threads=adaptive_threads) if _HAS_RULE else {}
        self.train_step = TrainStep(
            self.params, self.opt, self.mcfg, lazy=self.lazy, fused=fused, **kw
        )
        self._batch = None

    def _indexed(self, batch):
        """``batch`` with its rows (rows.batch_rows), as batch.BatchStream gives them."""
        X = self.params.X
        batch.rows = batch_rows(batch.ctx, X.shape[0], X if self.params.sparse else None)
        return batch

    def run(self, n_steps):
        with threadpool_limits(limits=1):
            for _ in range(n_steps):
                batch = self._batch or self._indexed(Batch(*self.batches(self.step)))
                loss, grads = self.train_step.gradients(batch)
                if not math.isfinite(loss):
                    raise RuntimeError(f"ours: loss {loss} at step {self.step}")
                # as fit: the next batch is known before Adam (indexed outside adam_seconds)
                self._batch = self._indexed(Batch(*self.batches(self.step + 1)))
                t0 = time.perf_counter()
                self.train_step.update(grads, self._batch)
                self.adam_seconds += time.perf_counter() - t0
                self.losses.append(loss)
                self.step += 1


class Peer:
    """The PyTorch peer (bench/peers/torch_caps2ne.py), same batches and initial parameters."""

    def __init__(self, problem, cfg, ours, feature_mode, adam):
        import torch

        from peers.torch_caps2ne import TorchCaps2NE

        self.name = "torch" if feature_mode is None else f"torch-{feature_mode}"
        n_slots = COMMON["walk_length"] - 1
        kwargs = dict(
            routing_iters=cfg["routing_iters"],
            routing_rule=COMMON["routing_rule"],
            grad_mode=COMMON["grad_mode"],
            dtype=torch.float32,
        )
        if cfg["features"]:
            feats = problem["features"] if feature_mode == "bag" else problem["features"].toarray()
            self.model = TorchCaps2NE(
                problem["n_nodes"],
                cfg["dim"],
                n_slots,
                features=feats,
                feature_mode=feature_mode,
                **kwargs,
            )
            self.model.load_numpy(ours.params.W, ours.params.O, ours.params.bias)
        else:
            self.model = TorchCaps2NE(
                problem["n_nodes"], cfg["dim"], n_slots, feat_dim=cfg["feat_dim"], **kwargs
            )
            self.model.load_numpy(ours.params.W, ours.params.O, ours.params.bias, ours.params.X)
        self.model.make_optimizer(lr=LR[cfg["features"]], **ADAM_OPTIONS[adam])
        self.batches = Batches(problem, cfg)
        self.step = 0
        self.losses = []

    @property
    def adam_seconds(self):
        """Seconds spent in torch's optimizer.step (timed inside train_step)."""
        return self.model.optimizer_seconds

    @adam_seconds.setter
    def adam_seconds(self, value):
        self.model.optimizer_seconds = value

    def run(self, n_steps):
        for _ in range(n_steps):
            loss = self.model.train_step(*self.batches(self.step))
            if not math.isfinite(loss):
                raise RuntimeError(f"{self.name}: loss {loss} at step {self.step}")
            self.losses.append(loss)
            self.step += 1


_HAS_RULE = "adaptive_threads" in TrainStep.__init__.__code__.co_varnames


def skipgram_supported():
    """True when this caps2ne_np's ModelConfig has the skip-gram term's weight."""
    import dataclasses

    return "skipgram_weight" in {f.name for f in dataclasses.fields(ModelConfig)}


def converge_runners(problem, cfg, n_threads, args):
    """Configs f and g: the step with the per-step thread rule ('ours', as train.fit runs
    it), forced onto every thread ('ours-fixed', >1 thread), and with the skip-gram term
    ('ours-skipgram', when --skipgram-weight is given and supported)."""
    runners = [Ours(problem, cfg, args.features, adam="lazy", name="ours", adaptive_threads=True)]
    if n_threads > 1 and _HAS_RULE:
        runners.append(Ours(problem, cfg, args.features, adam="lazy", name="ours-fixed"))
    if args.skipgram_weight is not None and skipgram_supported():
        runners.append(
            Ours(
                problem,
                cfg,
                args.features,
                adam="lazy",
                name="ours-skipgram",
                adaptive_threads=True,
                mcfg_extra=dict(skipgram_weight=args.skipgram_weight),
            )
        )
    return runners


ADAM_OPTIONS = {"default": {}, "foreach": dict(foreach=True), "fused": dict(fused=True)}


# --------------------------------------------------------------------------- FLOPs and GEMM rate


def flops_per_pair(cfg, n_slots=None, num_sampled=None, rows_per_pair=None):
    """Analytic floating-point operations per pair of one training step (forward + backward),
    for trained features (config b).  A multiply-add counts 2.  Returns a dict of terms.

    GEMM terms (BLAS): u_hat = W_i u (2 I d k), d_W (2 I d k), d_u (2 I d k);
    logits e . o for the target and V' (2 (S+1) k), d_e (2 (S+1) k), d_o (2 (S+1) k).
    Other terms (Numba kernels, leading order): squash of x and its backward (3 d + 6 d per slot),
    routing s = sum c u_hat (2 I k per iteration, + 2 I k agreement per inner iteration),
    its backward (4 I k per iteration in exact mode), squash of s and backward (9 k per
    iteration), softmax (4 (S+1)).  Adam is not counted: it touches every parameter once per
    step (memory-bound), see ``adam_elements``.

    ``rows_per_pair``: the distinct (slot, node) rows per pair that caps2ne_np actually
    multiplies (rows.share_slots); None counts every slot of every pair (the model as
    written, and what the peer computes).
    """
    I = n_slots or COMMON["walk_length"] - 1
    R = I if rows_per_pair is None else rows_per_pair
    S = num_sampled or COMMON["num_sampled"]
    d = cfg.get("feat_dim", 128)
    k, m = cfg["dim"], cfg["routing_iters"]
    gemm = dict(
        predict=round(2 * R * d * k),
        d_W=round(2 * R * d * k),
        d_u=round(2 * R * d * k),
        logits=2 * (S + 1) * k,
        d_e=2 * (S + 1) * k,
        d_O=2 * (S + 1) * k,
    )
    other = dict(
        squash_x=round(9 * R * d),
        routing=2 * I * k * m + 2 * I * k * (m - 1),
        routing_backward=4 * I * k * m,
        squash_s=9 * k * m,
        softmax=4 * (S + 1),
    )
    return dict(
        gemm=gemm,
        other=other,
        gemm_total=sum(gemm.values()),
        total=sum(gemm.values()) + sum(other.values()),
    )


def gemm_rate(cfg, n_pairs, reps, inner=5, rows_per_slot=None):
    """Measured float32 GEMM GFLOP/s on the shapes of one step of config b, through
    numpy.matmul: u (I,R,d) @ W^T, d_u_hat^T @ u, d_u_hat @ W with R rows per slot
    (``rows_per_slot``, default P: every pair), e @ O_s^T, G @ O_s, G^T @ e.  Median
    over reps of ``inner`` repetitions each."""
    I, S = COMMON["walk_length"] - 1, COMMON["num_sampled"]
    d, k, P = cfg.get("feat_dim", 128), cfg["dim"], n_pairs
    R = P if rows_per_slot is None else int(round(rows_per_slot))
    rng = np.random.default_rng(0)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    u, W, d_u_hat = f32(I, R, d), f32(I, k, d), f32(I, R, k)
    e, O_s, G = f32(P, k), f32(S, k), f32(P, S)

    def step():
        for _ in range(inner):
            np.matmul(u, W.transpose(0, 2, 1))
            np.matmul(d_u_hat.transpose(0, 2, 1), u)
            np.matmul(d_u_hat, W)
            e @ O_s.T
            G @ O_s
            G.T @ e

    flops = inner * (3 * 2 * I * R * d * k + 3 * 2 * P * S * k)
    step()
    times = [common.timed(step) for _ in range(reps)]
    return flops / common.median(times) / 1e9, times


def square_gemm_rate(n=1024, reps=5):
    """float32 n x n x n matmul GFLOP/s (median): the BLAS peak for reference."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    a @ b
    times = [common.timed(np.matmul, a, b) for _ in range(reps)]
    return 2.0 * n**3 / common.median(times) / 1e9


@njit(inline="always")
def _traffic_span(p, m, v, b1, b2, lr):
    for j in range(p.shape[0]):
        mj = b1 * m[j]
        m[j] = mj
        v[j] = b2 * v[j]
        p[j] -= lr * mj


@njit(parallel=True, cache=True, error_model="numpy")
def _adam_traffic(p, m, v, b1, b2, lr):
    """Dense Adam's memory traffic without its arithmetic: read and write p, m and v of
    every weight (m <- b1 m, v <- b2 v, p <- p - lr m), in blocks as optim._adam_dense."""
    n = p.shape[0]
    for blk in prange((n + 4095) // 4096):
        lo, hi = blk * 4096, min(n, (blk + 1) * 4096)
        _traffic_span(p[lo:hi], m[lo:hi], v[lo:hi], b1, b2, lr)


def adam_floor_ms(n_elements, n_threads, reps=7):
    """Milliseconds to stream p, m and v of ``n_elements`` float32 weights in and out
    once (``_adam_traffic``), on n Numba threads, median: the time a dense Adam step
    would take if its square roots and divisions were free."""
    p, m, v = (np.full(n_elements, 0.5, dtype=np.float32) for _ in range(3))
    args = (np.float32(0.9), np.float32(0.999), np.float32(1e-4))
    with common.threads(n_threads):
        _adam_traffic(p, m, v, *args)
        times = [common.timed(_adam_traffic, p, m, v, *args) for _ in range(reps)]
    return 1e3 * common.median(times)


def distinct_rows(problem, cfg, n_batches=20):
    """Mean distinct (slot, node) rows per pair and per slot over the first batches:
    the rows caps2ne_np's products run on (rows.share_slots)."""
    from caps2ne_np.model.rows import share_slots

    batches, per_pair, per_slot = Batches(problem, cfg), [], []
    for step in range(n_batches):
        ctx = batches(step)[0]
        nodes, ptr, _ = share_slots(np.ascontiguousarray(ctx.T.astype(np.int64)))
        per_pair.append(nodes.shape[0] / ctx.shape[0])
        per_slot.append(nodes.shape[0] / (ptr.shape[0] - 1))
    return float(np.mean(per_pair)), float(np.mean(per_slot))


# --------------------------------------------------------------------------- driver


def measure(key, problem, n_threads, args, torch_ok):
    """Interleaved repetitions of every implementation of config ``key``; returns a row."""
    cfg = CONFIGS[key]
    with common.threads(n_threads, blas=args.blas_threads):
        if key in CONVERGE:
            runners = converge_runners(problem, cfg, n_threads, args)
        else:
            runners = [Ours(problem, cfg, args.features)]
        if args.ours_lazy and key not in CONVERGE:
            runners.append(Ours(problem, cfg, args.features, adam="lazy"))
        if torch_ok and key not in FEATURE_PARITY[1:] and key not in CONVERGE:
            modes = (
                [None]
                if not cfg["features"]
                else ["bag", "dense"]
                if args.peer_features == "both"
                else [args.peer_features]
            )
            runners += [Peer(problem, cfg, runners[0], mode, args.peer_adam) for mode in modes]
        for r in runners:
            # the per-step thread rule times 5 + 5 x 2 steps first (StepThreads' trial)
            r.run(max(args.warmup, 16) if key in CONVERGE else args.warmup)
            r.adam_seconds = 0.0
        times = {r.name: [] for r in runners}
        for _ in range(args.reps):
            for r in runners:
                times[r.name].append(common.timed(r.run, args.steps))
    pairs = args.steps * runners[0].batches.pairs_per_step()
    out = dict(
        config=key,
        threads=n_threads,
        pairs_per_step=runners[0].batches.pairs_per_step(),
        ours_features=runners[0].feature_kind,
        impl={},
        adam_elements=int(sum(getattr(runners[0].params, n).size for n in runners[0].names)),
    )
    for r in runners:
        rates = [pairs / t for t in times[r.name]]
        out["impl"][r.name] = dict(
            pairs_per_s=common.median(rates),  # the file keeps the median and the spread
            step_ms=1e3 * common.median(times[r.name]) / args.steps,
            spread_pct=common.spread(rates),
            first_loss=r.losses[0],  # the peers' first steps agree (first_loss_rel_diff)
        )
        if hasattr(r, "adam_seconds"):
            out["impl"][r.name]["adam_ms"] = 1e3 * r.adam_seconds / (args.reps * args.steps)
    peers = {n: v for n, v in out["impl"].items() if not n.startswith("ours")}
    if peers:
        best = max(peers, key=lambda n: peers[n]["pairs_per_s"])
        out["best_peer"] = best
        out["ratio"] = out["impl"]["ours"]["pairs_per_s"] / peers[best]["pairs_per_s"]
        out["first_loss_rel_diff"] = abs(
            out["impl"]["ours"]["first_loss"] - peers[best]["first_loss"]
        ) / abs(out["impl"]["ours"]["first_loss"])
    return out


def main(argv=None):
    ap = common.parser(
        __doc__,
        threads="1,2",
        reps=5,
        smoke="configs a,b, 1 thread, 3 steps x 2 reps",
        out="perf",  # perf_smoke with --smoke
    )
    ap.add_argument(
        "--configs", default="a,b,c,d,e,f,g", help="comma-separated subset of a,b,c,d,e,f,g"
    )
    ap.add_argument("--steps", type=int, default=20, help="training steps per timed repetition")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (JIT, caches)")
    ap.add_argument(
        "--features",
        choices=("auto", "dense", "sparse"),
        default="auto",
        help="our fixed-feature input: auto = sparse when caps2ne_np has a sparse path",
    )
    ap.add_argument(
        "--peer-features",
        choices=("both", "bag", "dense"),
        default="both",
        help="the peer's fixed-feature path(s); the ratio uses the fastest",
    )
    ap.add_argument(
        "--peer-adam",
        choices=tuple(ADAM_OPTIONS),
        default="fused",
        help="torch.optim.Adam implementation of the peer (fused: its fastest on CPU)",
    )
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="BLAS threads for ours (default: the thread count), to separate Numba and BLAS "
        "scaling",
    )
    ap.add_argument("--no-peer", action="store_true", help="skip the PyTorch peer")
    ap.add_argument(
        "--ours-lazy",
        action="store_true",
        help="also time ours with row-sparse (lazy) Adam for O, biases and x "
        "(train --adam lazy); the ratio column stays dense-vs-dense",
    )
    ap.add_argument(
        "--skipgram-weight",
        type=float,
        default=None,
        help="configs f, g: also time the step with the skip-gram term of this weight, "
        "when caps2ne_np has it",
    )
    ap.add_argument(
        "--report-only", action="store_true", help="re-render <out>.md from <out>.json (no timing)"
    )
    args = ap.parse_args(argv)
    if args.report_only:
        name = "perf_smoke" if args.smoke and args.out == "perf" else args.out
        payload = json.loads((common.RESULTS / f"{name}.json").read_text())
        payload["gemm"] = {int(t): g for t, g in (payload.get("gemm") or {}).items()} or None
        thread_counts = sorted({r["threads"] for r in payload["rows"]})
        payload["targets"] = evaluate_targets(payload["rows"], payload["gemm"], thread_counts)
        md = render(payload, list(payload["configs"]))
        print(md)
        common.write_results(name, payload, md)
        return payload
    if args.smoke:
        args.configs, args.threads, args.steps, args.reps, args.warmup = "a,b", [1], 3, 2, 1
    out_name = "perf_smoke" if args.smoke and args.out == "perf" else args.out
    keys = [k.strip() for k in args.configs.split(",") if k.strip()]
    bad = [k for k in keys if k not in CONFIGS]
    if bad:
        ap.error(f"unknown config(s) {bad}; choose from {sorted(CONFIGS)}")
    thread_counts = list(args.threads)
    if args.skipgram_weight is not None and not skipgram_supported():
        print(
            "--skipgram-weight: this caps2ne_np has no skip-gram term (ModelConfig."
            "skipgram_weight); configs f, g are timed without it",
            file=sys.stderr,
        )

    torch = None if args.no_peer else common.torch_or_none()
    if torch is None and not args.no_peer:
        print(
            "torch is not installed: the peer is skipped (pip install torch==2.13.0)",
            file=sys.stderr,
        )
    t_start = time.perf_counter()
    load_before = os.getloadavg()
    rows = []
    problems = {}
    for key in keys:
        name = CONFIGS[key]["dataset"]
        if name not in problems:
            problems[name] = load_problem(CONFIGS[key])
        for n_threads in thread_counts:
            row = measure(key, problems[name], n_threads, args, torch is not None)
            row["adam_floor_ms"] = adam_floor_ms(row["adam_elements"], n_threads)
            rows.append(row)
            impl = row["impl"]
            peer_txt = (
                f"  peer {row['best_peer']} {impl[row['best_peer']]['pairs_per_s']:>9,.0f}"
                f"  ratio {row['ratio']:.2f}"
                if "ratio" in row
                else ""
            )
            print(
                f"({key}) {n_threads} thr: ours {impl['ours']['pairs_per_s']:>9,.0f} pairs/s"
                f"{peer_txt}",
                flush=True,
            )

    flop = gemm = None
    if "b" in keys:
        cfg_b = CONFIGS["b"]
        rows_pair, rows_slot = distinct_rows(problems[cfg_b["dataset"]], cfg_b)
        model = flops_per_pair(cfg_b)
        executed = flops_per_pair(cfg_b, rows_per_pair=rows_pair)
        n_pairs = Batches(problems[cfg_b["dataset"]], cfg_b).pairs_per_step()
        gemm = {}
        for n_threads in thread_counts:
            with common.threads(n_threads, blas=args.blas_threads):
                rate, _ = gemm_rate(cfg_b, n_pairs, reps=max(3, args.reps), rows_per_slot=rows_slot)
                rate_model, _ = gemm_rate(cfg_b, n_pairs, reps=max(3, args.reps))
                peak = None if args.smoke else square_gemm_rate()
            ours_rate = next(
                r["impl"]["ours"]["pairs_per_s"]
                for r in rows
                if r["config"] == "b" and r["threads"] == n_threads
            )
            achieved = executed["total"] * ours_rate / 1e9
            gemm[n_threads] = dict(
                gemm_gflops=rate,
                gemm_model_shapes_gflops=rate_model,
                square_1024_gflops=peak,
                achieved_gflops=achieved,
                model_gflops=model["total"] * ours_rate / 1e9,
                fraction=achieved / rate,
            )
        n_b, I = problems[cfg_b["dataset"]]["n_nodes"], COMMON["walk_length"] - 1
        d, k = cfg_b["feat_dim"], cfg_b["dim"]
        flop = dict(
            per_pair=model,
            executed_per_pair=executed,
            rows_per_pair=rows_pair,
            rows_per_slot=rows_slot,
            pairs_per_step=n_pairs,
            adam_elements=I * k * d + n_b * k + n_b + n_b * d,
        )  # W, O, bias, X

    payload = dict(
        command="python bench/perf.py " + " ".join(sys.argv[1:] if argv is None else argv),
        args=vars(args),
        machine=common.machine_info(),
        common=COMMON,
        configs={k: CONFIGS[k] for k in keys},
        rows=rows,
        flops=flop,
        gemm=gemm,
        seconds=time.perf_counter() - t_start,
        load_avg_before=load_before,
        load_avg_after=os.getloadavg(),
    )
    payload["targets"] = evaluate_targets(rows, gemm, thread_counts)
    md = render(payload, keys)
    print(md)
    common.write_results(out_name, payload, md)
    return payload


def evaluate_targets(rows, gemm, thread_counts):
    """Every target that this run can check (report.TARGETS): [{target, value, met}]."""
    T = report.TARGETS
    out = []
    for r in rows:
        if "ratio" in r:
            goal = T["peer_ratio"][r["config"]]
            out.append(
                report.target(
                    f"({r['config']}) ours >= {goal:g}x peer, {r['threads']} thread(s)",
                    round(r["ratio"], 3),
                    r["ratio"] >= goal,
                )
            )
    by = {(r["config"], r["threads"]): r["impl"]["ours"]["pairs_per_s"] for r in rows}
    if 1 in thread_counts and 2 in thread_counts:
        for key in SCALING_CONFIGS:
            if (key, 1) in by and (key, 2) in by:
                s = by[(key, 2)] / by[(key, 1)]
                out.append(
                    report.target(
                        f"({key}) 2 threads >= {T['thread_scaling']}x 1 thread (ours)",
                        round(s, 3),
                        s >= T["thread_scaling"],
                    )
                )
    a, b = FEATURE_PARITY
    for n_threads in thread_counts:
        if (a, n_threads) in by and (b, n_threads) in by:
            s = by[(a, n_threads)] / by[(b, n_threads)]
            out.append(
                report.target(
                    f"({a}) sparse d=3,703 >= ({b}) trained d=128, {n_threads} thread(s)",
                    round(s, 3),
                    s >= T["feature_parity"],
                )
            )
    out += converge_targets(by)
    goal = T["gemm_fraction"]
    for n_threads, g in (gemm or {}).items():
        out.append(
            report.target(
                f"(b) >= {goal:.0%} of the GEMM rate, FLOPs executed "
                f"(shared rows), {n_threads} thread(s)",
                round(g["fraction"], 3),
                g["fraction"] >= goal,
            )
        )
        model = g["model_gflops"] / g["gemm_model_shapes_gflops"]
        out.append(
            report.target(
                f"(b) >= {goal:.0%} of the GEMM rate, model FLOPs per "
                f"pair (the model's analytic count), {n_threads} thread(s)",
                round(model, 3),
                model >= goal,
            )
        )
    return out


def converge_targets(by):
    """The targets over configs f and g: ``by`` (config, threads) -> ours pairs/s."""
    T, out = report.TARGETS, []
    for key in CONVERGE:
        if (key, 1) in by and (key, 2) in by:
            s = by[(key, 2)] / by[(key, 1)]
            out.append(
                report.target(
                    f"({key}) 2 threads not slower than 1 (per-step rule; >= "
                    f"{T['never_slower']}x, timing noise)",
                    round(s, 3),
                    s >= T["never_slower"],
                )
            )
    if ("f", 1) in by and ("f", 2) in by:
        s = by[("f", 2)] / by[("f", 1)]
        goal = T["converge_thread_scaling"]
        out.append(report.target(f"(f) 2 threads >= {goal}x 1 thread", round(s, 3), s >= goal))
    if ("f", 2) in by and ("g", 2) in by:
        s = by[("f", 2)] / by[("g", 2)]
        goal = T["converge_vs_large_batch"]
        out.append(report.target(f"(f) >= {goal}x (g) pairs/s, 2 threads", round(s, 3), s >= goal))
    return out


def other_targets():
    """The walk and time-to-accuracy targets from their scripts' latest result files, as
    rows of report.targets_table."""
    rows = []
    walks = common.RESULTS / "walks_vs_pecanpy.json"
    if walks.exists():
        w = json.loads(walks.read_text())
        for t in w.get("targets", []):
            if "simulate_walks" in t["target"]:
                rows.append(
                    [
                        f"walks: {t['target']} (walks_vs_pecanpy.md, commit "
                        f"{w['machine'].get('git_commit', '?')})",
                        t["value"],
                        report.yes_no(t["met"]),
                    ]
                )
    tta = common.RESULTS / "time_to_accuracy.json"
    if tta.exists():
        runs = json.loads(tta.read_text())
        last = runs[-1] if isinstance(runs, list) else runs
        limit = report.TARGETS["cora_80_seconds"]
        ok = bool(last["reached"]) and last["seconds"] <= limit
        rows.append(
            [
                f"Cora 80% transductive accuracy <= {limit:.0f} s from a cold start "
                f"(time_to_accuracy.md, `{last['command']}`)",
                f"{last['seconds']:.1f} s",
                report.yes_no(ok),
            ]
        )
    return rows


def bounds_section(p):
    """What caps each ratio, from this run's own timings: both sides' optimizer time
    and the rest of the step, and the dense-Adam floor at the measured memory rate."""
    rows = [r for r in p["rows"] if "ratio" in r and "adam_ms" in r["impl"][r["best_peer"]]]
    if not rows:
        return scaling_bounds(p)
    lines = [
        "## What bounds the ratio (same run)\n",
        "Each step split into the optimizer and the rest, on both sides; 'Adam floor': "
        "streaming p, m and v once (`_adam_traffic`); 'ceiling': the peer's step over our "
        "Adam time; 'rest allowed': what the rest of our step may take for the target "
        "(docs/benchmarks.md, `bench/perf.py`).\n",
    ]
    table = []
    for r in rows:
        o, q = r["impl"]["ours"], r["impl"][r["best_peer"]]
        goal = report.TARGETS["peer_ratio"][r["config"]]
        floor = r.get("adam_floor_ms", float("nan"))
        rest_o, rest_q = o["step_ms"] - o["adam_ms"], q["step_ms"] - q["adam_ms"]
        allowed = q["step_ms"] / goal - o["adam_ms"]
        table.append(
            [
                f"({r['config']})",
                r["threads"],
                f"{r['adam_elements'] / 1e6:.2f} M",
                f"{o['step_ms']:.2f}",
                f"{o['adam_ms']:.2f}",
                f"{floor:.2f}",
                f"{rest_o:.2f}",
                f"{q['step_ms']:.2f}",
                f"{q['adam_ms']:.2f}",
                f"{rest_q:.2f}",
                f"{q['adam_ms'] / o['adam_ms']:.2f}",
                f"{rest_q / rest_o:.2f}",
                f"{r['ratio']:.2f}",
                f"{q['step_ms'] / o['adam_ms']:.1f}",
                f"{goal:g}x",
                f"{allowed:.2f}" if allowed > 0 else "none",
            ]
        )
    lines.append(
        report.markdown_table(
            [
                "config",
                "threads",
                "weights",
                "ours ms/step",
                "ours Adam ms",
                "Adam floor ms",
                "ours rest ms",
                "peer ms/step",
                "peer Adam ms",
                "peer rest ms",
                "Adam ratio",
                "rest ratio",
                "step ratio",
                "ceiling",
                "target",
                "rest allowed ms",
            ],
            table,
        )
        + "\n"
    )
    return lines + scaling_bounds(p)


def scaling_bounds(p):
    """Amdahl's bound on the 2-thread speed-up from this run's own timings: the update
    (memory-bound) as measured on 2 threads, everything else twice as fast."""
    by = {(r["config"], r["threads"]): r["impl"]["ours"] for r in p["rows"]}
    table = []
    for key in SCALING_CONFIGS:
        if (key, 1) in by and (key, 2) in by:
            one, two = by[(key, 1)], by[(key, 2)]
            bound = one["step_ms"] / (two["adam_ms"] + (one["step_ms"] - one["adam_ms"]) / 2)
            table.append(
                [
                    f"({key})",
                    f"{one['step_ms']:.2f}",
                    f"{one['adam_ms']:.2f}",
                    f"{two['step_ms']:.2f}",
                    f"{two['adam_ms']:.2f}",
                    f"{one['step_ms'] / two['step_ms']:.2f}",
                    f"{bound:.2f}",
                    f"{report.TARGETS['thread_scaling']:g}x",
                ]
            )
    if not table:
        return []
    return [
        "The 2-thread speed-up against Amdahl's bound (the update at its measured "
        "2-thread time, the rest exactly twice as fast).\n",
        report.markdown_table(
            [
                "config",
                "1 thread ms/step",
                "1 thread update ms",
                "2 threads ms/step",
                "2 threads update ms",
                "speed-up",
                "bound",
                "target",
            ],
            table,
        )
        + "\n",
    ]


def render(p, keys):
    a = p["args"]
    lines = [
        "# Training throughput: caps2ne_np vs a PyTorch peer\n",
        report.run_line(
            p["command"],
            p["seconds"],
            p["load_avg_before"][0],
            p["load_avg_after"][0],
            how=f"{a['reps']} repetitions of {a['steps']} "
            f"steps after {a['warmup']} warm-up steps; medians",
        ),
        report.machine_markdown(p["machine"])
        + (
            f"- BLAS threads fixed at {a['blas_threads']} for ours (--blas-threads)\n"
            if a["blas_threads"]
            else ""
        ),
        "Pairs/s end to end per step (pairs, V', forward, backward, the Adam update of every "
        "parameter); q = 10, |V'| = 256 (log-uniform), routing 'paper', grad 'exact'. Ours: "
        "`step.TrainStep`, BLAS at one thread. Peer: bench/peers/torch_caps2ne.py, "
        f"torch.optim.Adam '{a['peer_adam']}'; the ratio uses its faster feature path. "
        "Config (e): the feature-size parity only (no peer). Configs (f), (g) "
        "(the featureless default and B = 128 walks): unigram sampler, lazy Adam, no peer; "
        "'ours' with the per-step thread rule, "
        "'ours-fixed' every step on every thread.\n",
        report.doc_pointer("`bench/perf.py`: training throughput"),
    ]
    headers = ["config", "threads", "ours features", "ours pairs/s", "ours ms/step", "ours Adam ms"]
    peer_names = sorted({n for r in p["rows"] for n in r["impl"] if n != "ours"})
    # 'ours-lazy' (if timed) shows as a column of its own; ratios use the peers only
    headers += [f"{n} pairs/s" for n in peer_names] + ["ours / best peer", "first-loss rel. diff"]
    table = []
    for r in p["rows"]:
        o = r["impl"]["ours"]
        row = [
            f"({r['config']}) {LABELS[r['config']]}",
            r["threads"],
            r["ours_features"],
            report.fmt_int(o["pairs_per_s"]),
            f"{o['step_ms']:.2f}",
            f"{o.get('adam_ms', 0):.2f}",
        ]
        row += [
            report.fmt_int(r["impl"][n]["pairs_per_s"]) if n in r["impl"] else ""
            for n in peer_names
        ]
        row += [
            f"{r['ratio']:.2f}" if "ratio" in r else "",
            f"{r['first_loss_rel_diff']:.1e}" if "first_loss_rel_diff" in r else "",
        ]
        table.append(row)
    lines.append(report.markdown_table(headers, table) + "\n")
    if p["flops"]:
        fl = p["flops"]
        f, x = fl["per_pair"], fl["executed_per_pair"]
        lines.append("## Config (b) against the hardware ceiling\n")
        lines.append(
            f"Model FLOPs per pair (every slot of every pair, as the peer computes): "
            f"{f['total']:,} ({f['gemm_total']:,} in GEMMs: "
            + ", ".join(f"{k} {v:,}" for k, v in f["gemm"].items())
            + ").\n"
        )
        lines.append(
            f"Executed by ours: {fl['rows_per_pair']:.2f} distinct (slot, node) rows per pair "
            f"instead of 9 ({fl['rows_per_slot']:.0f} rows per slot GEMM for "
            f"{fl['pairs_per_step']:,} pairs), so {x['total']:,} FLOPs per pair "
            f"({x['gemm_total']:,} in GEMMs). Adam excluded: {fl['adam_elements']:,} "
            "parameters updated per step.\n"
        )
        grows = [
            [
                t,
                f"{g['gemm_gflops']:.1f}",
                f"{g['gemm_model_shapes_gflops']:.1f}",
                f"{g['square_1024_gflops']:.1f}" if g["square_1024_gflops"] else "",
                f"{g['achieved_gflops']:.1f}",
                f"{g['model_gflops']:.1f}",
                f"{g['fraction']:.0%}",
            ]
            for t, g in p["gemm"].items()
        ]
        lines.append(
            report.markdown_table(
                [
                    "threads",
                    "GEMM GFLOP/s (our shapes)",
                    "GEMM GFLOP/s (per-pair shapes)",
                    "GEMM GFLOP/s (1024^3)",
                    "ours executed GFLOP/s",
                    "ours model GFLOP/s",
                    "executed / GEMM rate",
                ],
                grows,
            )
            + "\n"
        )
    lines += bounds_section(p)
    lines.append("## Targets\n")
    lines.append(
        "This run's, then the other scripts' from their latest result files "
        "(`--report-only` re-reads them). The causes of the gaps, measured: "
        "[perf_notes.md](perf_notes.md).\n"
    )
    lines.append(report.targets_table(p["targets"], other_targets()) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
