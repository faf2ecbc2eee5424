"""The driver of a Ray run: ``fit_run`` (the set-up every engine shares, loop.set_up, with
the cap on the workers, ``worker_count``; the cluster's attempts and the restart loop
after an actor dies) and ``cli_fit`` (as ``caps2ne train --engine ray`` called it; the
command line now goes through training/engines.py, with ``check_fresh``)."""

import logging
import math
import os
import time
from pathlib import Path

import numpy as np

from ...defaults import ROUND_WALKS, SYNC_MOMENTS, SYNC_MOMENTS_CHOICES
from ...errors import InputError
from .. import budget
from ..loop import LoopOptions, Run, TrainResult, run_epochs, set_up
from .checkpoints import DRIVER_FILE
from .connect import import_ray, one_line, ray_logging_level, results_only_stdout, start_ray
from .engine import RayEngine
from .shards import shard_rows

log = logging.getLogger(__name__)

W_PLACEMENTS = ("server", "workers")


class WorkerLost(ConnectionError):
    """An actor died and the run could not continue on its own (a ConnectionError, so
    the command line reports it in one line, exit code 1)."""


def fit(indptr, indices, weights, cfg, features=None, resume_from=None, **kwargs):
    """``fit_run`` of the graph given by CSR arrays: ``kwargs`` are loop.LoopOptions'
    fields (as ``train.fit`` takes them) and ``fit_run``'s own."""
    loop = {k: kwargs.pop(k) for k in LoopOptions.__dataclass_fields__ if k in kwargs}
    run = Run.of(indptr, indices, weights, cfg, features, resume_from, **loop)
    return fit_run(run, **kwargs)


def fit_run(
    run,
    workers=1,
    servers=1,
    address=None,
    max_restarts=2,
    max_rows_per_shard=None,
    stats=None,
    w_placement="server",
    round_walks=ROUND_WALKS,
    sync_moments=SYNC_MOMENTS,
    write_outputs=None,
):
    """``train.fit_run`` on a Ray cluster (P = ``workers``, S = ``servers``): the same
    job (loop.Run) and result, plus the engine's own arguments.

    address: a Ray cluster ('auto', 'ray://host:10001', ...) or None for a local
    instance sized to this machine.  max_restarts: automatic restarts from the last
    checkpoint after an actor dies (needs ``checkpoint_dir``).  max_rows_per_shard:
    refuse a layout whose servers would each hold more rows (a guard for memory
    planning and the tests); below N it also keeps the rows off the workers (the
    parameter server's rounds, not replica rounds: engine.replica_rounds).  stats: a
    dict, filled with per-actor traffic and memory.  w_placement: 'server' (the
    default: replica rounds, replica.py, where the compiled step trains the run; else
    the parameter server's rounds with W and its moments on server 0: every worker
    pulls W and pushes its gradient each batch) or 'workers' (the parameter server's
    rounds with a replica of W on every worker, each applying all P gradients of a
    round in rank order).  At P = 1 every choice gives the single machine's bits.
    round_walks: the walks per node of a replica round (defaults.ROUND_WALKS; engine.
    ROUND_PARTS caps a round at a quarter of an epoch): fewer, the workers' reads are
    less stale at P > 1 and more bytes move per trained pair; 0: the parameter
    server's rounds.  At P = 1 any value gives the single machine's bits.
    sync_moments: when a replica round's workers merge their Adam moments: 'round'
    (with the values, every round), 'checkpoint' (before a checkpoint only) or 'auto'
    (defaults.SYNC_MOMENTS: every round at 2 to SYNC_ROUND_MAX_WORKERS workers).
    write_outputs: called as ``write_outputs(result)`` after training, while the actors
    still live, with ``result.params`` holding W and, instead of the N-row tables,
    ``io.RowBlocks`` that pull consecutive row blocks from the shards (see
    ``outputs.streamed_params``): the writers of ``io`` stream them, and the driver
    never holds a whole table.  The returned result then has ``params=None``.
    The run's ``checkpoint_extra`` is stored in the driver's file.
    """
    from ..checkpoint import check_arguments

    options, resume_from = run.options, run.resume_from
    checkpoint_dir = options.checkpoint_dir
    check_arguments(checkpoint_dir, options.checkpoint_every, resume_from)
    P, S = int(workers), int(servers)
    _check_layout(P, S, run.graph.n_nodes, w_placement, max_rows_per_shard)
    round_walks = check_round_walks(round_walks)
    if sync_moments not in SYNC_MOMENTS_CHOICES:
        raise InputError(
            f"sync_moments: one of {', '.join(SYNC_MOMENTS_CHOICES)}; got {sync_moments!r}"
        )
    setup, P = _set_up(run, P, address)
    layout = dict(P=P, S=S, replicate_W=w_placement == "workers", stats=stats)
    layout.update(row_limit=max_rows_per_shard)  # a limit below N: no replica rounds
    layout.update(round_walks=round_walks, sync_moments=sync_moments)
    started = start_ray(address)
    ray = import_ray()
    # the spectral start goes into the first attempt's initial values only (a restart
    # resumes from a checkpoint): that attempt's engine drops it once they are sent
    starts, setup.start = [setup.start], None
    try:
        attempt = 0
        while True:
            try:
                # --stop holdout: the graph without its held-out edges
                return _attempt(ray, setup, starts, resume_from, layout, write_outputs, options)
            except _actor_lost_errors(ray) as err:
                attempt += 1
                resume_from = _restart_or_stop(err, checkpoint_dir, attempt, max_restarts, stats)
    finally:
        if started:
            ray.shutdown()


def _set_up(run, P, address):
    """(loop.Setup, P): the set-up every engine shares, with the workers capped by
    :func:`worker_count` once the schedule is known; dense fixed features only."""

    def cap(cfg, schedule):  # a round trains at most an epoch's batches
        nonlocal P
        P = worker_count(P, schedule.n_batches, address)

    setup = set_up(run, on_resolved=cap, check=_check_lazy_adam)
    if setup.features is not None and not isinstance(setup.features, np.ndarray):
        raise InputError(
            "--engine ray: sparse fixed features are not supported yet; "
            "pass them dense (.npy) or use the single-machine engine"
        )
    return setup, P


def _attempt(ray, run, starts, resume_from, layout, write_outputs, options):
    """One attempt of the run (loop.Setup ``run``): its actors, the epoch loop (with
    ``options``, a loop.LoopOptions), the outputs; the actors are killed at the end,
    whatever happens.  ``starts``: [the spectral start] for the first attempt, then
    empty (taken)."""
    start = starts.pop() if starts else None
    g = run.graph
    engine = RayEngine(
        ray, g.indptr, g.indices, g.weights, run.cfg, run.features, resume_from, start=start,
        n_batches=run.schedule.n_batches, **layout,
    )  # fmt: skip
    del start  # the engine's, until its initial values are sent
    engine.checkpoint_every = options.checkpoint_every
    try:
        result = TrainResult(
            params=None, config=run.cfg, notes=run.notes, holdout=run.held, structure=run.structure
        )
        stop = budget.stop_rule(run.cfg, run.structure, run.held)  # a fresh rule every attempt
        run_epochs(engine, result, run.schedule, options, stop_rule=stop)
        return engine.finish(result, layout["stats"], write_outputs)
    finally:
        engine.cluster.kill()


def _check_lazy_adam(cfg):
    if cfg.adam != "lazy":
        raise InputError(
            "--engine ray: needs --adam lazy (a server updates only the rows "
            f"it is sent), got --adam {cfg.adam}"
        )


def _restart_or_stop(err, checkpoint_dir, attempt, max_restarts, stats):
    """After an actor died (``err``): the checkpoint folder to restart attempt number
    ``attempt`` from, or WorkerLost when there is no checkpoint or no restart left."""
    have = checkpoint_dir is not None and (Path(checkpoint_dir) / DRIVER_FILE).is_file()
    what = one_line(err)
    if stats is not None:
        stats.setdefault("failures", []).append(dict(time=time.time(), what=what))
    if have and attempt <= max_restarts:
        log.warning(
            "an actor died (%s); restarting every actor from the checkpoint "
            "in %s (restart %d of %d)",
            what,
            checkpoint_dir,
            attempt,
            max_restarts,
        )
        return checkpoint_dir
    if have:
        raise WorkerLost(
            f"an actor died ({what}); the last checkpoint is in "
            f"{checkpoint_dir}: continue with --resume "
            f"{checkpoint_dir}"
        ) from None
    raise WorkerLost(
        f"an actor died ({what}); nothing was checkpointed (give "
        "--checkpoint-dir to be able to resume)"
    ) from None


def check_round_walks(round_walks):
    """``round_walks`` as an int >= 0; InputError (one line) otherwise."""
    if isinstance(round_walks, bool) or not isinstance(round_walks, (int, np.integer)):
        raise InputError(f"round_walks: a whole number >= 0, got {round_walks!r}")
    if round_walks < 0:
        raise InputError(
            f"round_walks: at least 0 (0: the parameter server's rounds), got {round_walks}"
        )
    return int(round_walks)


def _check_layout(P, S, n_nodes, w_placement, max_rows_per_shard):
    """InputError (one line) for a layout that cannot run: P workers, S servers."""
    if P < 1:
        raise InputError(f"--workers: must be >= 1, got {P}")
    if w_placement not in W_PLACEMENTS:
        raise InputError(f"w_placement: must be one of {W_PLACEMENTS}, got {w_placement!r}")
    if S < 1:
        raise InputError(f"--servers: must be >= 1, got {S}")
    if S > n_nodes:
        raise InputError(f"--servers: at most the number of nodes ({n_nodes}), got {S}")
    if max_rows_per_shard is not None and shard_rows(n_nodes, S, 0) > max_rows_per_shard:
        raise InputError(
            f"--servers: {S} servers hold up to {shard_rows(n_nodes, S, 0)} rows "
            f"each, above the limit of {max_rows_per_shard}; use at least "
            f"{math.ceil(n_nodes / max_rows_per_shard)}"
        )


def _actor_lost_errors(ray):
    """The errors by which Ray reports an actor gone: killed, crashed, or stopped by
    Ray's memory monitor."""
    e = ray.exceptions
    return (e.RayActorError, e.WorkerCrashedError, e.OutOfMemoryError)


def cli_fit(indptr, indices, weights, cfg, overwrite=False, ray_address=None, **kwargs):
    """``fit`` as ``caps2ne train --engine ray`` calls it: refuses to start a new run
    over a sharded checkpoint unless ``overwrite``; standard output carries only the
    command's results while Ray runs."""
    check_fresh(kwargs.get("checkpoint_dir"), kwargs.get("resume_from"), overwrite)
    with results_only_stdout(quiet=ray_logging_level() > logging.WARNING):
        return fit(indptr, indices, weights, cfg, address=ray_address, **kwargs)


def check_fresh(directory, resume_from, overwrite):
    """InputError when ``directory`` holds a sharded checkpoint that a new run (no
    ``resume_from``) or one resumed from another folder would replace, unless
    ``overwrite`` (checkpoint.check_fresh)."""
    if directory:
        from ..checkpoint import check_fresh as check

        check(directory, overwrite, resume_from, name=DRIVER_FILE)


def worker_count(workers, n_batches, address=None):
    """``workers`` capped by the ``n_batches`` of an epoch (a round trains at most that
    many: the extra workers would only start and idle; the result is the same bits),
    with a warning, and a warning when a local run has more workers than CPUs."""
    P = int(workers)
    if P > n_batches:
        log.warning(
            "--workers %d: an epoch has %d batches, so a round trains at most %d; "
            "starting %d workers",
            P,
            n_batches,
            n_batches,
            n_batches,
        )
        P = n_batches
    cpus = os.cpu_count() or 1
    if not address and P > cpus:
        log.warning(
            "--workers %d: more than the %d CPUs of this machine; the workers share "
            "them (slower per worker, and each one a process of its own)",
            P,
            cpus,
        )
    return P
