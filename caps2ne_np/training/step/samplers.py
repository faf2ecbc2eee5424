"""Candidate samplers for the sampled softmax (paper, Eq. 3; Jean et al. 2015).

Caps2NE's loss is a softmax over a sampled set V' of |V'| = ``num_sampled`` nodes.
As in TensorFlow's ``tf.nn.sampled_softmax_loss`` with ``unique=True`` (the
authors' code), one set V' serves a whole batch: nodes are drawn from a base
distribution P until |V'| distinct ones are found, and ``num_tries`` counts all
draws, repeats included.  The logits are then corrected by log Q(c), where the
expected count of a node of probability p = P(c) is::

    Q(c) = 1 - (1 - p)^num_tries = -expm1(num_tries * log1p(-p))

(the probability that c appears among num_tries draws; an approximation of its
inclusion probability under the stop-at-|V'|-distinct rule, as in TensorFlow).

Base distributions (``make_sampler(name, n, counts)``):

* ``'log_uniform'``: P(c) = log((c+2)/(c+1)) / log(n+1), Zipfian by node index (the
  TensorFlow default, which assumes low indices are frequent); drawn by inversion,
  c = floor(exp(u log(n+1))) - 1.
* ``'unigram'``: P(c) proportional to count(c)^power (power 0.75, word2vec), with
  counts = node frequencies in the walks (``walks.node_counts``); drawn in O(1)
  with an alias table built once in O(n) (Walker/Vose).
* ``'uniform'``: P(c) = 1/n.

A draw set is keyed by (seed, key): ``stream2(seed, TAG_SAMPLER, key)``, so the
training loop passes, e.g., its global step as the key.  Deduplication uses an
open-addressing hash set of size O(|V'|), so a call costs O(num_tries), never O(n).
"""

import numbers
from collections import namedtuple

import numpy as np

from ...defaults import SAMPLERS
from ...errors import InputError, check_int
from ...kernels.jit import inline, kernel
from ...kernels.rng import (
    TAG_SAMPLER,
    hash_slot,
    quiet_wraparound,
    rand_below,
    rand_uniform,
    stream2,
)

KIND_UNIFORM = 0
KIND_LOG_UNIFORM = 1
KIND_ALIAS = 2

SamplerTables = namedtuple("SamplerTables", "kind n log_range prob alias p seed num_sampled")
"""What a compiled kernel needs to draw V' and its expected counts (``_Sampler.tables``):
the base distribution's kind, n, log(n + 1), alias table (``prob``, ``alias``) and P
itself (``p``, unigram; empty otherwise), and the draws' seed and |V'|."""


@inline
def node_probability(kind, n, log_range, p, c):
    """P(c) of the base distribution ``kind``: p[c] (unigram), log((c+2)/(c+1)) /
    log(n+1) (log-uniform), 1/n (uniform); ``c`` a node or (from NumPy) an array of
    them.  ``_Sampler.probs`` and the compiled step (training/step/fused.py) evaluate it."""
    if kind == KIND_ALIAS:
        return p[c]
    if kind == KIND_LOG_UNIFORM:
        return np.log1p(1.0 / (c + 1.0)) / log_range
    return 1.0 / n


@inline
def expected_count_of(prob, num_tries):
    """Q(c) = 1 - (1 - P(c))^num_tries = -expm1(num_tries log1p(-P(c))) of a node of
    probability ``prob`` (or, from NumPy, an array of them)."""
    return -np.expm1(num_tries * np.log1p(-prob))


@inline
def hash_table_size(num_sampled):
    """Slots of the open-addressing table that draws ``num_sampled`` distinct nodes:
    the smallest power of two at least twice their number (at most half full).
    ``sample_unique``, the compiled step and the Ray workers size it here."""
    size = 2
    while size < 2 * num_sampled:
        size *= 2
    return size


# --------------------------------------------------------------------------- kernels


@inline
def _file_entry(i, scaled, small, n_small, large, n_large):
    """Vose's step: entry i onto the small list (scaled[i] < 1) or the large one;
    returns the lists' new lengths."""
    if scaled[i] < 1.0:
        small[n_small] = i
        return n_small + 1, n_large
    large[n_large] = i
    return n_small, n_large + 1


@kernel
def build_alias(p, prob, alias):
    """Vose's alias table for P = p (float64 (n,), sums to 1): prob float64 (n,), alias
    int64 (n,), written.

    A draw i ~ Uniform{0..n-1}, u ~ U[0, 1) returns i if u < prob[i] else alias[i], so
    P(c) = (prob[c] + sum_{i: alias[i] = c} (1 - prob[i])) / n.  O(n).

    Notes: entries left over when one list empties (only rounding leaves any) get
    prob 1, as in Vose (1991); an entry with p = 0 is never left over, so it is
    never drawn.
    """
    n = p.shape[0]
    scaled = np.empty(n, dtype=np.float64)
    small = np.empty(n, dtype=np.int64)
    large = np.empty(n, dtype=np.int64)
    n_small = 0
    n_large = 0
    for i in range(n):
        scaled[i] = p[i] * n
        n_small, n_large = _file_entry(i, scaled, small, n_small, large, n_large)
    while n_small > 0 and n_large > 0:
        n_small -= 1
        s = small[n_small]
        n_large -= 1
        g = large[n_large]
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = (scaled[g] + scaled[s]) - 1.0
        n_small, n_large = _file_entry(g, scaled, small, n_small, large, n_large)
    for k in range(n_large):
        prob[large[k]] = 1.0
        alias[large[k]] = large[k]
    for k in range(n_small):
        prob[small[k]] = 1.0
        alias[small[k]] = small[k]


@kernel
def _draw(kind, n, log_range, prob, alias, state):
    """One draw c ~ P from the stream state: (state, c int64 in [0, n)).

    kind KIND_UNIFORM: c ~ Uniform{0..n-1}.  KIND_LOG_UNIFORM: c = floor(exp(u log_range)) - 1,
    clamped to [0, n-1] against rounding.  KIND_ALIAS: i ~ Uniform{0..n-1}, then i or alias[i].
    """
    if kind == KIND_UNIFORM:
        return rand_below(state, n)
    if kind == KIND_LOG_UNIFORM:
        state, u = rand_uniform(state)
        c = np.int64(np.floor(np.exp(u * log_range))) - 1
        if c < 0:
            c = 0
        elif c > n - 1:
            c = n - 1
        return state, c
    state, i = rand_below(state, n)
    state, u = rand_uniform(state)
    if u < prob[i]:
        return state, i
    return state, alias[i]


@kernel
def _draws(kind, n, log_range, prob, alias, seed, key, out):
    """out[t] ~ P independently (with replacement), t = 0..len(out)-1; the stream of
    ``sample_unique``."""
    state = stream2(seed, TAG_SAMPLER, key)
    for t in range(out.shape[0]):
        state, c = _draw(kind, n, log_range, prob, alias, state)
        out[t] = c


@kernel
def sample_unique(kind, n, log_range, prob, alias, seed, key, out, table):
    """V' = the first len(out) distinct draws of c ~ P, in order of appearance; returns
    num_tries (int64).

    out int64 (|V'|,) written; table int64 (2^m,) scratch, 2^m >= 2|V'|, an
    open-addressing hash set (linear probing, -1 = empty).  The caller guarantees
    that P has at least |V'| nodes of positive probability.
    """
    state = stream2(seed, TAG_SAMPLER, key)
    mask = table.shape[0] - 1
    for s in range(table.shape[0]):
        table[s] = -1
    found = 0
    num_tries = 0
    while found < out.shape[0]:
        state, c = _draw(kind, n, log_range, prob, alias, state)
        num_tries += 1
        s = hash_slot(c, mask)
        while True:
            if table[s] == -1:
                table[s] = c
                out[found] = c
                found += 1
                break
            if table[s] == c:
                break
            s = (s + 1) & mask
    return num_tries


# --------------------------------------------------------------------------- samplers


_check_int = check_int


class _Sampler:
    """Shared machinery: subclasses set ``n``, ``_kind``, ``_log_range``, ``_prob``,
    ``_alias``, ``_p``, ``_support``."""

    name = ""

    def __init__(self, n):
        self.n = _check_int("n", n, 2)
        self._log_range = 0.0
        self._prob = np.empty(0, dtype=np.float64)
        self._alias = np.empty(0, dtype=np.int64)
        self._p = np.empty(0, dtype=np.float64)
        self._support = self.n

    def __repr__(self):
        return f"{type(self).__name__}(n={self.n})"

    def _ids(self, ids):
        ids = np.asarray(ids)
        if not np.issubdtype(ids.dtype, np.integer):
            raise InputError(f"ids must hold integer node indices, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.n):
            raise InputError(f"ids must lie in [0, {self.n})")
        return ids.astype(np.int64, copy=False)

    def probs(self, ids):
        """P(c) for each c in ids, float64 of the shape of ids (``node_probability``)."""
        ids = self._ids(ids)
        p = node_probability(self._kind, self.n, self._log_range, self._p, ids)
        return np.array(np.broadcast_to(p, ids.shape), dtype=np.float64)

    def tables(self, seed, num_sampled):
        """The sampler as a compiled kernel reads it (``SamplerTables``), drawing
        ``num_sampled`` nodes per set from ``seed``."""
        return SamplerTables(
            int(self._kind),
            int(self.n),
            float(self._log_range),
            self._prob,
            self._alias,
            self._p,
            int(seed),
            int(num_sampled),
        )

    def draw(self, size, seed, key):
        """``size`` independent draws c ~ P (with replacement), int64 (size,).

        The same stream as ``sample``: ``sample(...)[0]`` is the distinct values of
        ``draw(num_tries, ...)`` in order of first appearance.
        """
        size = _check_int("size", size, 0)
        seed = _check_int("seed", seed, 0, 2**63 - 1)
        key = _check_int("key", key, 0, 2**63 - 1)
        out = np.empty(size, dtype=np.int64)
        with quiet_wraparound():
            _draws(self._kind, self.n, self._log_range, self._prob, self._alias, seed, key, out)
        return out

    def sample(self, num_sampled, seed, key):
        """V': ``num_sampled`` distinct nodes drawn from P, and num_tries (draws incl. repeats).

        Returns (sampled int64 (num_sampled,), num_tries int), deterministic in (seed, key).
        ``num_sampled`` must be in [1, n-1] (room for the target) and at most the
        number of nodes with P(c) > 0.
        """
        num_sampled = _check_int("num_sampled", num_sampled, 1, self.n - 1)
        if num_sampled > self._support:
            raise InputError(
                f"num_sampled must be at most the {self._support} nodes of positive "
                f"probability, got {num_sampled}"
            )
        seed = _check_int("seed", seed, 0, 2**63 - 1)
        key = _check_int("key", key, 0, 2**63 - 1)
        table = np.empty(hash_table_size(num_sampled), dtype=np.int64)
        out = np.empty(num_sampled, dtype=np.int64)
        with quiet_wraparound():
            num_tries = sample_unique(
                self._kind, self.n, self._log_range, self._prob, self._alias, seed, key, out, table
            )
        return out, int(num_tries)

    def expected_count(self, ids, num_tries, num_sampled=None):
        """Q(c) = 1 - (1 - P(c))^num_tries = -expm1(num_tries log1p(-P(c))), float64 of the
        shape of ids.

        With ``num_sampled`` given and equal to ``num_tries`` (no repeats were
        drawn), returns P(c) * num_sampled instead, as TensorFlow's unique samplers
        do; leave it ``None`` for the formula above in every case.
        """
        num_tries = _check_int("num_tries", num_tries, 1)
        p = self.probs(ids)
        if num_sampled is not None and _check_int("num_sampled", num_sampled, 1) == num_tries:
            return p * num_tries
        return expected_count_of(p, num_tries)


class UniformSampler(_Sampler):
    """P(c) = 1/n."""

    name = "uniform"

    def __init__(self, n):
        super().__init__(n)
        self._kind = KIND_UNIFORM


class LogUniformSampler(_Sampler):
    """P(c) = log((c+2)/(c+1)) / log(n+1): Zipfian by node index (TensorFlow's default)."""

    name = "log_uniform"

    def __init__(self, n):
        super().__init__(n)
        self._kind = KIND_LOG_UNIFORM
        self._log_range = float(np.log(self.n + 1.0))


class UnigramSampler(_Sampler):
    """P(c) = count(c)^power / sum_c' count(c')^power, drawn with an alias table.

    counts: non-negative finite (n,) with a positive sum, e.g. ``walks.node_counts``.
    Nodes with count 0 (and power > 0) are never drawn.
    """

    name = "unigram"

    def __init__(self, counts, power=0.75):
        counts = np.asarray(counts, dtype=np.float64)
        if counts.ndim != 1:
            raise InputError(f"counts must be 1-D, got shape {counts.shape}")
        super().__init__(counts.shape[0])
        if not np.all(np.isfinite(counts)) or np.any(counts < 0):
            raise InputError("counts must be finite and non-negative")
        if (
            isinstance(power, bool)
            or not isinstance(power, numbers.Real)
            or not np.isfinite(power)
            or power < 0
        ):
            raise InputError(f"power must be a finite number >= 0, got {power!r}")
        self.power = float(power)
        weights = counts**self.power
        total = weights.sum()
        if not total > 0:
            raise InputError("counts must have a positive sum")
        self._p = np.ascontiguousarray(weights / total, dtype=np.float64)
        self._support = int(np.count_nonzero(self._p))
        self._kind = KIND_ALIAS
        self._prob = np.empty(self.n, dtype=np.float64)
        self._alias = np.empty(self.n, dtype=np.int64)
        build_alias(self._p, self._prob, self._alias)

    def __repr__(self):
        return f"UnigramSampler(n={self.n}, power={self.power})"


def make_sampler(name, n, counts=None, power=0.75):
    """The sampler ``name`` (one of ``defaults.SAMPLERS``: 'log_uniform', 'unigram',
    'uniform') over n nodes.

    'unigram' needs ``counts`` (n,) (node frequencies in the walks) and uses ``power``.
    """
    if name not in SAMPLERS:
        raise InputError(f"sampler must be one of {', '.join(SAMPLERS)}, got {name!r}")
    n = _check_int("n", n, 2)
    if name == "unigram":
        if counts is None:
            raise InputError("the 'unigram' sampler needs counts (node frequencies in the walks)")
        counts = np.asarray(counts)
        if counts.shape != (n,):
            raise InputError(f"counts must have shape ({n},), got {counts.shape}")
        return UnigramSampler(counts, power)
    if name == "log_uniform":
        return LogUniformSampler(n)
    return UniformSampler(n)
