"""Which engine trains a run: the one place where the training driver (trainer.py, which
the command line and the ``Caps2NE`` estimator call) chooses between this process
(train.fit_run: sync or async threads) and a Ray cluster (ray.fit_run, which caps its
workers at the batches of an epoch)."""

from ..defaults import ROUND_WALKS, SYNC_MOMENTS
from ..errors import InputError

ENGINES = ("single", "ray")
ENGINE_OPTIONS = (
    "parallel",
    "engine",
    "workers",
    "servers",
    "ray_address",
    "round_walks",
    "sync_moments",
)
"""``fit``'s keyword arguments that choose the engine: the command line's options and
the estimator's parameters of these names."""


def fit(
    run,
    *,
    engine="single",
    parallel="sync",
    workers=1,
    servers=1,
    ray_address=None,
    round_walks=ROUND_WALKS,
    sync_moments=SYNC_MOMENTS,
    write_outputs=None,
    results_only_stdout=False,
):
    """Train the job ``run`` (loop.Run) with ``engine`` ('single': train.fit_run with
    ``parallel``; 'ray': ray.fit_run with P = ``workers``, S = ``servers``,
    ``ray_address``, ``round_walks`` (walks per node of a replica round: defaults.
    ROUND_WALKS), ``sync_moments`` (when the workers' moments merge: defaults.
    SYNC_MOMENTS) and ``write_outputs``).  ``results_only_stdout``: while Ray runs,
    standard output carries only this process's results (the command line's
    ``--out -``).  Returns a loop.TrainResult."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be 'single' or 'ray', got {engine!r}")
    if engine == "single":
        from .train import fit_run

        return fit_run(run, parallel=parallel)
    if getattr(run, "starts", None) is not None:
        raise InputError("an update trains on one machine: use engine='single'")
    if parallel != "sync":
        raise InputError(
            "parallel='async' trains on threads of one process; with "
            "engine='ray' the workers train batches at once"
        )
    import contextlib
    import logging

    from .ray.connect import ray_logging_level
    from .ray.connect import results_only_stdout as only_results
    from .ray.driver import fit_run as fit_ray

    stdout = contextlib.nullcontext()
    if results_only_stdout:
        stdout = only_results(quiet=ray_logging_level() > logging.WARNING)
    with stdout:
        return fit_ray(
            run,
            workers=workers,
            servers=servers,
            address=ray_address,
            round_walks=round_walks,
            sync_moments=sync_moments,
            write_outputs=write_outputs,
        )
