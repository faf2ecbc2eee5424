"""A run's batches.

``BatchStream`` makes batch b of an epoch (``Batch``) from the run's walks: its walks
(drawn with replacement, or the epoch's seeded order with batch_mode 'shuffle'),
their (context, target) pairs, the sampled set V' and their expected counts; every
draw is keyed by (seed, epoch, b, step), so the local engine and every Ray worker
make the same batch b.  On a single machine the stream also indexes each batch as it
is made (model/rows.py: its distinct (slot, node) rows and the feature columns they
touch), once, before its forward pass.
"""

from collections import namedtuple
from dataclasses import dataclass

import numpy as np

from ...kernels.rng import derive_seed
from ...model.rows import BatchRows, batch_rows
from ...walks import walks as walks_mod
from .samplers import make_sampler


@dataclass
class Batch:
    """One training batch (``BatchStream.batch``).

    ctx        (P, I) int    context nodes of each pair, walk order (slot i uses W_i)
    targets    (P,) int      target node of each pair
    sampled    (S,) int      the sampled set V' (distinct nodes, shared by the batch)
    q_true     (P,) float    expected count Q(t_p) of each target under the sampler
    q_sampled  (S,) float    expected count Q(s) of each sampled node
    rows       BatchRows     its index (``rows.batch_rows``), once made
    u_hat_rows (R, k)        W_i u of every row of ``rows``, when a fused W update has
                             computed them ahead (step.FusedSparseW); else None
    key        (seed, step)  keys the skip-gram term's negatives (skipgram.py)
    """

    ctx: np.ndarray
    targets: np.ndarray
    sampled: np.ndarray
    q_true: np.ndarray
    q_sampled: np.ndarray
    rows: BatchRows | None = None
    u_hat_rows: np.ndarray | None = None
    key: tuple = (0, 0)

    @property
    def n_pairs(self):
        return self.targets.shape[0]


Draws = namedtuple(
    "Draws", "walk_seed n_walks batch_size order seed_batch positions seed_pos walk_ids"
)
"""What a compiled kernel needs to make an epoch's batches as ``BatchStream.batch`` does
(``BatchStream.draws``): the epoch's walk seed and number of walks, B, the epoch's walk
order (empty: B walks drawn with replacement), the seed of those draws, the target
positions (empty: one random position per walk), the seed of the random ones, and the
walk id of each of the epoch's walks (``start_walk_ids``; empty: walk w is walk id w)."""


def start_walk_ids(starts, n_nodes, walks_per_node):
    """(S T,) int64: the walk ids of T walks from each of the nodes ``starts`` (S,,
    sorted; a node may repeat): walk j = t S + s is walk id starts[s] + N (c T + t), c
    the times starts[s] came before it, which starts at starts[s] (walk id w starts at
    w mod N) and is that node's (c T + t)-th walk of a run from every node: a node
    given c times has c T distinct walks."""
    starts = np.asarray(starts, dtype=np.int64)
    c = np.arange(starts.size, dtype=np.int64)
    if starts.size:
        c -= np.searchsorted(starts, starts, side="left")  # copies before it
    T = np.int64(walks_per_node)
    t = np.arange(walks_per_node, dtype=np.int64)[:, None]
    return (starts[None, :] + np.int64(n_nodes) * (c[None, :] * T + t)).ravel()


def walk_seed(seed, epoch):
    """The walk seed of an epoch: epoch 0 (and every epoch with ``walks='fixed'``) uses
    the run's walk seed; later epochs with ``walks='fresh'`` each their own."""
    return derive_seed(seed, "walks" if epoch == 0 else f"walks/{epoch}")


class BatchStream:
    """The batches of a run of ``cfg`` (resolved: presets.resolve) on a CSR graph.

    ``batch(epoch, b, step)`` is batch b of the epoch: its walks (a
    walks.WalkSource, never stored: ``walks='fixed'`` replays epoch 0's, 'fresh' draws
    the epoch's own), chosen with replacement from (seed, epoch, b) or, with
    batch_mode 'shuffle', the epoch's seeded order; their (context, target) pairs at
    the target positions (one random position per walk, keyed by the global
    ``step``, with targets 'random'); and V' with the expected counts (keyed by
    ``step``).  ``index``: index each batch (``rows.batch_rows``) as it is made, with
    ``sparse_features`` (the features.SparseFeatures of the run, or None) for its column
    index; the Ray workers leave theirs unindexed (core indexes them on local rows).
    ``counts``: node counts for the unigram sampler, or None to give them later
    (``set_counts``; ``node_counts`` counts a share of the walks).  ``starts``: the
    nodes an epoch's walks start from, T each (``start_walk_ids``: an update's), or
    None: every node; the sampler's counts stay those of every node's walks."""

    def __init__(
        self,
        indptr,
        indices,
        weights,
        cfg,
        index=False,
        sparse_features=None,
        counts=None,
        starts=None,
    ):
        self.cfg = cfg
        self.n_nodes = int(indptr.shape[0] - 1)
        self.source = walks_mod.WalkSource(
            indptr,
            indices,
            weights,
            cfg.walks_per_node,
            cfg.walk_length,
            walk_seed(cfg.seed, 0),
            cfg.node2vec_p,
            cfg.node2vec_q,
        )
        self.positions = walks_mod.target_positions(cfg.targets, cfg.walk_length)
        self.seed_batch = derive_seed(cfg.seed, "batch")
        self.seed_pos = derive_seed(cfg.seed, "positions")
        self.seed_sample = derive_seed(cfg.seed, "sampler")
        self.index, self.sparse_features = index, sparse_features
        self.sampler = None
        if cfg.sampler != "unigram" or counts is not None:
            self.set_counts(counts)
        self._epoch = self._order = self._walks = None
        self.walk_ids = None  # walk j of an epoch is walk id j
        if starts is not None:
            self.walk_ids = start_walk_ids(starts, self.n_nodes, cfg.walks_per_node)
        self.n_walks = self.source.n_walks if self.walk_ids is None else self.walk_ids.size
        """An epoch's walks (N T, or S T from ``starts``)."""

    def node_counts(self, lo, hi, chunk):
        """Node counts over walks [lo, hi) of epoch 0 (a share of the unigram sampler's
        counts; int64, so shares add up in any order)."""
        counts = np.zeros(self.n_nodes, dtype=np.int64)
        for a in range(lo, hi, chunk):
            ids = np.arange(a, min(a + chunk, hi), dtype=np.int64)
            counts += np.bincount(self.source.walks(ids).ravel(), minlength=self.n_nodes)
        return counts

    def set_counts(self, counts):
        self.sampler = make_sampler(self.cfg.sampler, self.n_nodes, counts=counts)

    def set_epoch(self, epoch):
        """Make ``epoch`` the current one (its walk order and walks): ``batch`` does it;
        threads sharing the stream (train.AsyncEngine) call it first, once."""
        if self._epoch != epoch:
            cfg = self.cfg
            self._order = None
            if cfg.batch_mode == "shuffle":
                self._order = walks_mod.epoch_permutation(self.n_walks, self.seed_batch, epoch)
                if self.walk_ids is not None:
                    self._order = self.walk_ids[self._order]
            self._walks = (
                self.source
                if cfg.walks == "fixed"
                else self.source.reseeded(walk_seed(cfg.seed, epoch))
            )
            self._epoch = epoch

    def draws(self, epoch):
        """The epoch's batches as a compiled kernel makes them (``Draws``; with
        ``self.source.graph()`` and ``sampler_tables``: training/step/fused.py)."""
        self.set_epoch(epoch)
        none = np.empty(0, dtype=np.int64)
        return Draws(
            int(self._walks.seed),
            int(self.n_walks),
            int(self.cfg.batch_size),
            self._order if self._order is not None else none,
            int(self.seed_batch),
            self.positions if self.positions is not None else none,
            int(self.seed_pos),
            self.walk_ids if self.walk_ids is not None else none,
        )

    def sampler_tables(self):
        """The sampler of V' as a compiled kernel draws it (samplers.SamplerTables)."""
        return self.sampler.tables(self.seed_sample, self.cfg.num_sampled)

    def batch(self, epoch, b, step):
        """Batch b of the epoch, at global step ``step`` (a Batch; indexed when the
        stream has features)."""
        self.set_epoch(epoch)
        B = self.cfg.batch_size
        if self._order is None:
            walk_ids = walks_mod.batch_walk_ids(self.n_walks, B, self.seed_batch, epoch, b)
            if self.walk_ids is not None:
                walk_ids = self.walk_ids[walk_ids]
        else:
            walk_ids = self._order[b * B : (b + 1) * B]
        batch_walks = self._walks.walks(walk_ids)
        ctx, tgt = walks_mod.training_pairs(
            batch_walks,
            np.arange(batch_walks.shape[0]),
            self.positions if self.positions is not None else "random",
            seed=self.seed_pos,
            key=step,
        )
        sampled, tries = self.sampler.sample(self.cfg.num_sampled, self.seed_sample, step)
        batch = Batch(
            ctx,
            tgt,
            sampled,
            self.sampler.expected_count(tgt, tries),
            self.sampler.expected_count(sampled, tries),
            key=(self.seed_sample, step),
        )
        if self.index:
            batch.rows = batch_rows(ctx, self.n_nodes, self.sparse_features)
        return batch
