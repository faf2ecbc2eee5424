"""Numba's threading layer, started with a chosen OpenMP spin unless the user chose one.

A training step is ~20 short kernels, 5 of them parallel regions, with Python between
them, so how long an idle OpenMP worker spins before it sleeps decides whether a
second thread helps: a worker that slept during the Python between two regions pays a
futex wake-up (tens to hundreds of microseconds) at the next one.  Measured on a quiet
2-core machine, the featureless default step (B = 16 walks, Cora), 676 steps, median:
1.89-1.90 ms on one thread; on two (two rounds), 2.64-2.74 ms with
``GOMP_SPINCOUNT=1000`` (slower than one), 1.71-1.80 with 10,000, 1.60-1.63 with 30,000,
1.50-1.51 with 100,000, 1.41-1.50 with 300,000 (libgomp's default)
(docs/results/threads_spin.md).  A long spin is a disaster only when another
process wants the core the worker spins on; ``StepThreads`` below then moves the steps
to one thread (no parallel regions, so nothing spins), and processes that share the
cores by design (Ray's actors, training.ray.start_ray) start with
``SHARED_SPIN_COUNT``.

libgomp reads ``GOMP_SPINCOUNT`` once, when it is loaded, and Numba loads it when its
threading layer starts (the first parallel launch or ``numba.get_num_threads`` /
``set_num_threads``).  So ``jit``, which every kernel module imports, calls
``start()``, which starts the layer with the variable set for that moment only:
``os.environ`` ends as it began, and child processes do not inherit the setting.

Numba reads ``NUMBA_NUM_THREADS`` when it is imported (0 or -1 fail there with a
traceback; 'abc' prints a warning and is ignored) and ``NUMBA_THREADING_LAYER`` when the
layer starts.  ``check_environment`` reads the first before Numba is imported (this
module imports Numba only inside its functions) and ``check_layer`` starts the layer:
each turns a bad value into an ``InputError`` naming the variable (the command line's
one line on stderr, exit 1).
"""

import os
import time

from ..errors import InputError

SPIN_COUNT = "100000"
"""``GOMP_SPINCOUNT`` for Numba's OpenMP workers when the user set neither it nor
``OMP_WAIT_POLICY``: about as fast as libgomp's default (300,000) between a step's
regions, and an idle worker stops spinning sooner."""

SHARED_SPIN_COUNT = "1000"
"""The spin of processes that share the cores with others by design (Ray's actors):
a few microseconds, so that an idle worker gives its core back almost at once."""


def check_environment(environ=None):
    """``InputError`` unless ``NUMBA_NUM_THREADS`` is unset or a whole number >= 1; call
    it before Numba is imported (``import numba`` itself fails on 0)."""
    environ = os.environ if environ is None else environ
    value = environ.get("NUMBA_NUM_THREADS")
    if value is None:
        return
    try:
        ok = int(value) >= 1
    except ValueError:
        ok = False
    if not ok:
        raise InputError(
            f"NUMBA_NUM_THREADS={value!r}: Numba's thread count must be a whole number "
            ">= 1; set it so or unset it "
            "(train --threads or Caps2NE(n_jobs=...) chooses the threads of a run)"
        )


LAYERS = ("tbb", "omp", "workqueue")
"""Numba's threading layers, by the names ``NUMBA_THREADING_LAYER`` takes."""


def available_layers():
    """The threading layers whose libraries load in this process."""
    import importlib

    found = []
    for name in LAYERS:
        try:
            if name == "tbb":
                from numba.np.ufunc.parallel import _check_tbb_version_compatible

                _check_tbb_version_compatible()
            importlib.import_module(f"numba.np.ufunc.{name}{'' if name == 'workqueue' else 'pool'}")
        except Exception:  # noqa: BLE001 -- any failure to load: not available
            continue
        found.append(name)
    return found


def check_layer():
    """Start Numba's threading layer (``start`` first, for its spin); ``InputError``
    naming ``NUMBA_THREADING_LAYER`` (or ``NUMBA_THREADING_LAYER_PRIORITY``) and the
    layers that load here when it cannot start."""
    import numba

    start()
    try:
        numba.get_num_threads()
    except ValueError as err:
        chosen = {
            name: os.environ[name]
            for name in ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY")
            if name in os.environ
        }
        given = ", ".join(f"{k}={v}" for k, v in chosen.items()) or "Numba's default layer"
        layers = ", ".join(available_layers()) or "none"
        reason = " ".join(str(err).split())
        raise InputError(
            f"{given}: Numba's threading layer could not start ({reason}); the layers that "
            f"load here: {layers}; set NUMBA_THREADING_LAYER to one of them or unset it"
        ) from None


def start():
    """Start Numba's threading layer with ``GOMP_SPINCOUNT=SPIN_COUNT`` unless
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` is set; ``os.environ`` ends as it began.

    Notes: setting the variable after the layer started changes nothing (measured with
    ``GOMP_SPINCOUNT=INFINITE``: after a kernel, an idle worker used 0.10-0.16 s of CPU
    in a 0.5 s sleep when the variable was set only while the layer started, and
    0.001-0.005 s when it was set just after).  If another library loaded the same
    libgomp earlier, its settings stand, as they would anyway."""
    import numba

    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        numba.get_num_threads()  # starts the threading layer: libgomp loads
    except ValueError:
        pass  # no usable layer: Numba raises again at launch
    finally:
        del os.environ["GOMP_SPINCOUNT"]


class StepThreads:
    """The thread count of each training step, chosen by timing steps.

    A step splits into many short parallel regions; each costs a fork and a join, and
    a wake-up of workers that slept during the Python between kernels: measured
    10-40 us per empty region on 2 threads, 30-500 us when other processes share the
    cores (docs/results/threads_profile.md).  Whether N threads beat fewer therefore
    depends on the batch and on the machine's load, so it is measured, not guessed:

    * the first ``warmup`` steps run on ``max_threads`` (kernels compile or load);
    * then ``rounds`` rounds each run one step on every candidate count (1, 2, 4, ...
      up to ``max_threads``, and ``max_threads``), in alternating order;
    * the count with the lowest median step time wins, where more threads win only
      if at least ``margin`` faster than the best of fewer: so the run is never
      slower (within the timing noise) than on fewer threads;
    * the trial repeats every ``recheck`` steps, as the load changes, and at once when
      the median of the last ``watch`` steps is more than ``drift`` slower than the
      chosen count's median in the trial (another process took a core: a worker
      spinning on it, ``SPIN_COUNT``, would slow every step until the next recheck),
      or, with ``spike``, when one step is more than ``spike`` times that median (the
      compiled step's rounds are long: one such round is evidence enough);
    * with ``backoff`` > 1, a trial that confirms the count chosen before doubles the
      interval to the next, up to ``backoff`` times ``recheck`` (a trial costs steps on
      the slower count: on 2 threads beside a busy process, a parallel round ran 20x
      slower than on one); a changed choice, a drift or a spike resets it.

    The choice never changes a result: every kernel gives the same bits on any number
    of threads (tests/test_train.py).  step.TrainStep makes none when
    ``jit.PAR_MIN_WORK = 0`` (tests: every kernel parallel, on every thread).

    Use::

        chooser = StepThreads(numba.get_num_threads())
        chooser.begin()    # sets Numba's thread count for this step, starts its clock
        ...                # the step
        chooser.end()      # its time goes into the trial
    """

    def __init__(
        self,
        max_threads,
        warmup=5,
        rounds=5,
        margin=0.03,
        recheck=2000,
        watch=50,
        drift=0.5,
        spike=None,
        backoff=1,
        clock=time.perf_counter,
        set_threads=None,
    ):
        self.max_threads = max(1, int(max_threads))
        self.warmup, self.rounds, self.margin, self.recheck = warmup, rounds, margin, recheck
        self.watch, self.drift, self.spike, self.backoff = watch, drift, spike, backoff
        self._interval = recheck  # steps from a trial's end to the next trial
        self.clock = clock
        if set_threads is None:
            import numba

            set_threads = numba.set_num_threads
        self.set_threads = set_threads
        self.candidates = self.candidate_counts(self.max_threads)
        self.chosen = self.max_threads
        self.history = []  # (step, chosen count) after every trial
        self._step = 0  # steps ended
        self._plan = []  # thread counts of the running trial's remaining steps
        self._times = {}  # count -> step seconds, in the running trial
        self._trial_end = None  # step at which the last trial ended
        self._current = self._t0 = None
        self._timed = False
        self._chosen_time = None  # the chosen count's median step time in the last trial
        self._recent = []  # step times since the trial, on the chosen count

    @staticmethod
    def candidate_counts(max_threads):
        """1, 2, 4, ... below ``max_threads``, and ``max_threads``."""
        out, n = [], 1
        while n < max_threads:
            out.append(n)
            n *= 2
        return out + [max_threads]

    def _trial_plan(self):
        plan = []
        for r in range(self.rounds):
            plan += self.candidates if r % 2 == 0 else self.candidates[::-1]
        return plan

    @property
    def timed(self):
        """True while the step ``begin`` started is a trial step."""
        return self._timed

    def trial_next(self):
        """True when the step ``begin`` starts next is a trial step (timed on a count
        that may be the slower one): a caller whose steps vary in size keeps it short."""
        if self.max_threads <= 1 or self._step < self.warmup:
            return False
        return bool(self._plan) or self._due()

    def _due(self):
        return self._trial_end is None or self._step - self._trial_end >= self._interval

    def _retrial(self):
        """A new trial at the next step, with the interval back at ``recheck``."""
        self._interval = self.recheck
        self._trial_end = self._step + 1 - self.recheck

    def begin(self):
        """Set Numba's thread count for the step about to run and start its clock;
        returns the count."""
        n, self._timed = self.max_threads, False
        if self.max_threads > 1 and self._step >= self.warmup:
            if not self._plan and self._due():
                self._plan, self._times = self._trial_plan(), {}
            if self._plan:
                n, self._timed = self._plan.pop(0), True
            else:
                n = self.chosen
        self.set_threads(n)
        self._current, self._t0 = n, self.clock()
        return n

    def end(self):
        """Stop the clock of the step ``begin`` started: a trial step's time is kept,
        and the trial's last step makes the choice."""
        if self._t0 is None:
            return
        seconds, self._t0 = self.clock() - self._t0, None
        if self._timed:
            self._times.setdefault(self._current, []).append(seconds)
            if not self._plan:
                before = self.chosen if self.history else None
                self.chosen = self.choose(self._times, self.margin)
                self.history.append((self._step, self.chosen))
                if self.chosen == before:
                    self._interval = min(2 * self._interval, self.backoff * self.recheck)
                else:
                    self._interval = self.recheck
                self._trial_end = self._step + 1
                self._chosen_time = _median(self._times[self.chosen])
                self._recent = []
        elif self._chosen_time is not None:
            self._recent.append(seconds)
            if self.spike is not None and seconds > self._chosen_time * self.spike:
                self._retrial()  # one round far slower: another process took a core
                self._recent = []
            elif len(self._recent) >= self.watch:
                if _median(self._recent) > self._chosen_time * (1.0 + self.drift):
                    self._retrial()
                self._recent = []
        self._step += 1

    @staticmethod
    def choose(times, margin):
        """The count with the lowest median time, more threads only when at least
        ``margin`` faster than the best of fewer.  ``times``: count -> step seconds."""
        med = {n: _median(ts) for n, ts in times.items() if ts}
        best = min(med)
        for n in sorted(med):
            if med[n] < med[best] * (1.0 - margin):
                best = n
        return best


def _median(values):
    return sorted(values)[len(values) // 2]


def usable_cores():
    """The cores this process may run on (its CPU affinity; else the machine's): the
    default ``--threads`` of ``caps2ne train`` and of the bench scripts."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def threads_used(requested):
    """The Numba threads a run asking for ``requested`` gets: at most the pool Numba
    started with (``NUMBA_NUM_THREADS``, else the machine's cores)."""
    import numba

    return max(1, min(int(requested), numba.config.NUMBA_NUM_THREADS))
