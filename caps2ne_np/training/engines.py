"""Which engine trains a run: the one place where the command line and the ``Caps2NE``
estimator choose between this process (train.fit: sync or async threads) and a Ray
cluster (ray.fit, which caps its workers at the batches of an epoch)."""

from ..errors import InputError

ENGINES = ("single", "ray")


def fit(
    indptr,
    indices,
    weights,
    cfg,
    *,
    engine="single",
    parallel="sync",
    workers=1,
    servers=1,
    ray_address=None,
    write_outputs=None,
    results_only_stdout=False,
    **kwargs,
):
    """Train with ``engine`` ('single': train.fit with ``parallel``; 'ray': ray.fit with
    P = ``workers``, S = ``servers``, ``ray_address``, and ``write_outputs``); the other
    arguments are train.fit's.  ``results_only_stdout``: while Ray runs, standard
    output carries only this process's results (the command line's ``--out -``).
    Returns a loop.TrainResult."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be 'single' or 'ray', got {engine!r}")
    if engine == "single":
        from .train import fit as fit_single

        return fit_single(indptr, indices, weights, cfg, parallel=parallel, **kwargs)
    if parallel != "sync":
        raise InputError(
            "parallel='async' trains on threads of one process; with "
            "engine='ray' the workers train batches at once"
        )
    import contextlib
    import logging

    from .ray import fit as fit_ray
    from .ray.connect import ray_logging_level
    from .ray.connect import results_only_stdout as only_results

    stdout = contextlib.nullcontext()
    if results_only_stdout:
        stdout = only_results(quiet=ray_logging_level() > logging.WARNING)
    with stdout:
        return fit_ray(
            indptr,
            indices,
            weights,
            cfg,
            workers=workers,
            servers=servers,
            address=ray_address,
            write_outputs=write_outputs,
            **kwargs,
        )
