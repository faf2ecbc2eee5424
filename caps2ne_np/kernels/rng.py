"""Counter-based random streams: the one place in the package with unsigned integers.

Every random decision in caps2ne_np is drawn from a *stream* keyed by what it is
for, never by which thread runs it, so a result is bitwise identical on 1 and N
threads (docs/walks.md, "Randomness")::

    state = stream(seed, w)                  # walk w
    state, j = rand_below(state, deg)        # int64 in [0, deg)
    state, u = rand_uniform(state)           # float64 in [0, 1)

The generator is splitmix64 (Steele, Lea & Flood, "Fast splittable pseudorandom
number generators", OOPSLA 2014): the state is a 64-bit counter advanced by the
odd constant ``GAMMA``, and each output is the counter passed through the
``mix64`` finalizer (a bijection on 64-bit words).  A stream's starting counter is
a hash of (seed, key, ...), absorbed one word at a time with ``mix64``, so streams
with different keys start at unrelated points of the 2^64 cycle; two streams
overlap only if their starts lie within a few draws of each other, with
probability about (draws per stream) / 2^64.

Domain tags (``TAG_*``) keep streams used for different purposes apart: walk w uses
``stream(seed, w)``; everything else uses ``stream2``/``stream3`` with a tag as the
first key, e.g. ``stream3(seed, TAG_BATCH, epoch, step)``.

All functions are Numba kernels so other kernels can call them; through ``.py_func``
they also run as plain Python on NumPy scalars (the naive references do this).
NumPy warns about the intended wrap-around of uint64 scalar arithmetic there, so
Python callers wrap the calls in ``quiet_wraparound()`` (``np.errstate(over="ignore")``).

Numba typing: every unsigned operation keeps both operands ``np.uint64`` (mixing
uint64 with int64 gives float64), and values leave as int64 or float64 only at
the end.  Seeds and keys are non-negative integers below 2**63.
"""

import zlib

import numpy as np

from .jit import kernel

GAMMA = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio, odd: the counter increment
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_ONE = np.uint64(1)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2^-53

# Domain tags: the first key of stream2/stream3 for each use of randomness.
TAG_BATCH = 1  # batch_walk_ids: stream3(seed, TAG_BATCH, epoch, step)
TAG_POSITION = 2  # random target positions: stream3(seed, TAG_POSITION, key, walk id)
TAG_PERMUTATION = 3  # epoch_permutation: stream2(seed, TAG_PERMUTATION, epoch)
TAG_SAMPLER = 4  # candidate samplers: stream2(seed, TAG_SAMPLER, key)
TAG_INFER = 5  # inference contexts (inference/infer.py): stream3(seed, TAG_INFER, node index, z)
TAG_SKIPGRAM = (
    6  # the skip-gram term's negatives (skipgram.py): stream3(seed, TAG_SKIPGRAM, step, item)
)


def quiet_wraparound():
    """``np.errstate(over="ignore")``: silences NumPy's warnings about the intended uint64
    wrap-around when the kernels run as Python (``.py_func``, NUMBA_DISABLE_JIT=1)."""
    return np.errstate(over="ignore")


@kernel
def mix64(z):
    """splitmix64 finalizer: z ^= z>>30; z *= M1; z ^= z>>27; z *= M2; z ^= z>>31.

    A bijection on uint64 with full avalanche.  ``z`` is ``np.uint64``; returns ``np.uint64``.
    """
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@kernel
def _absorb(h, key):
    """Hash one more key word into the running hash h: mix64((h ^ key) + GAMMA).

    For a fixed h this is a bijection in key, so distinct keys give distinct states.
    """
    return mix64((h ^ np.uint64(key)) + GAMMA)


@kernel
def stream(seed, key):
    """Starting state of the stream keyed by (seed, key): mix64 of seed, then key absorbed.

    seed, key: non-negative integers (< 2**63).  Returns the state, ``np.uint64``.
    """
    return _absorb(mix64(np.uint64(seed) + GAMMA), key)


@kernel
def stream2(seed, key1, key2):
    """Starting state of the stream keyed by (seed, key1, key2); ``np.uint64``."""
    return _absorb(stream(seed, key1), key2)


@kernel
def stream3(seed, key1, key2, key3):
    """Starting state of the stream keyed by (seed, key1, key2, key3); ``np.uint64``."""
    return _absorb(stream2(seed, key1, key2), key3)


@kernel
def next_u64(state):
    """(state + GAMMA, mix64(state + GAMMA)): advance the counter; returns (state, value),
    both uint64."""
    state = state + GAMMA
    return state, mix64(state)


@kernel
def rand_below(state, n):
    """(state, j) with j uniform on [0, n), int64; requires n >= 1.

    Exactly unbiased: a raw draw r is rejected when r < 2^64 mod n (so the accepted
    range is a multiple of n) and j = r mod n.  A rejection has probability
    < n / 2^64, so in practice one draw is consumed; either way the result depends
    only on the stream, never on the thread.
    """
    nu = np.uint64(n)
    threshold = (~nu + _ONE) % nu  # (2^64 - n) mod n == 2^64 mod n
    while True:
        state, r = next_u64(state)
        if r >= threshold:
            return state, np.int64(r % nu)


@kernel
def rand_uniform(state):
    """(state, u) with u = (top 53 bits of a draw) * 2^-53, a float64 in [0, 1)."""
    state, r = next_u64(state)
    return state, np.int64(r >> _S11) * _TWO_M53


@kernel
def hash_slot(x, mask):
    """mix64(x) & mask as int64: a slot of an open-addressing table of size mask + 1 (a
    power of two).

    x, mask: non-negative int64.  Used by the samplers' small hash sets.
    """
    return np.int64(mix64(np.uint64(x)) & np.uint64(mask))


def derive_seed(seed, purpose):
    """An independent 63-bit seed for one purpose ('walks', 'init', 'infer', ...) of a run
    seed: the first word of ``SeedSequence([seed, crc32(purpose)])``, shifted right by one
    bit so that it fits an int64 (the streams' keys are below 2**63)."""
    words = np.random.SeedSequence([int(seed), zlib.crc32(purpose.encode())])
    return int(words.generate_state(1, np.uint64)[0] >> np.uint64(1))
