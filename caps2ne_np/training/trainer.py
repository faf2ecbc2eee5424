"""One training job from a graph to the rows it writes: ``train``, the one function
that both ``caps2ne train`` (cli/train.py) and ``Caps2NE.fit`` (estimator/caps2ne.py)
call.

In: the graph (a csr.Graph), its options (config.TrainConfig), fixed features or
None, the engine's options (engines.fit), the epoch selector of ``--eval-every-epoch``
/ ``fit(labels=, splits=)`` and the caller's callbacks and checkpoint options
(loop.LoopOptions' fields).  Out: a ``Trained``: the run's result (history, resolved
options, schedule), the parameters kept (the selector's epoch), ProNE's propagation of
their o_v when the run's ``propagate`` says so, and the rows written.  Between the two,
the steps neither caller repeats: the job bundled (loop.Run), the engine chosen
(engines.fit), the finished run reported, its training state freed (Adam's moments and
the engine's reference cycles, before the propagation runs beside the tables) and the
propagation (spectral/propagation.py).
"""

import gc
import logging
from dataclasses import dataclass

from . import engines
from .loop import LoopOptions, Run

log = logging.getLogger(__name__)


@dataclass
class Trained:
    """A finished job: ``result`` (loop.TrainResult: history, config, schedule, held-out
    sample, structure; its optimizer freed), ``params`` the parameters kept (the epoch
    the selector chose; without ``keep_model``, a Params holding only the o_v and the
    fixed features), ``propagated`` (propagation.Propagated, or None: the o_v are
    written as trained)."""

    result: object
    params: object
    propagated: object = None

    @property
    def written(self):
        """The rows a run writes: the propagated E, or the o_v as trained."""
        return self.params.O if self.propagated is None else self.propagated.E


def train(
    graph,
    cfg,
    features=None,
    *,
    resume_from=None,
    selector=None,
    engine=None,
    keep_model=True,
    streamed=False,
    write=None,
    starts=None,
    **options,
):
    """Train ``cfg`` (config.TrainConfig) on ``graph`` (csr.Graph) with ``features``
    ((N, d) fixed, or None to train x); returns a ``Trained``.

    ``resume_from``: a checkpoint folder to continue from (loop.Run).  ``selector``: an
    epoch_selection.EpochSelector (or None): called after every epoch before the
    caller's ``epoch_callback``, its state kept in every checkpoint, and its epoch's
    parameters kept.  ``engine``: engines.fit's keyword arguments (engine, parallel,
    workers, servers, ray_address, results_only_stdout).  ``keep_model``: keep the
    trained x and W (a model file or the estimator's state needs them); False frees
    them, only the o_v are written.  ``streamed``: the Ray engine hands the o_v from
    its shards to ``write`` block by block, and nothing is propagated.
    ``write(trained)``: the caller's outputs, called once the rows are ready (inside
    the Ray engine, while its actors live, when ``streamed``).  ``starts``: the nodes
    an epoch's walks start from (loop.Run; an update's), or None: every node.  ``options``:
    loop.LoopOptions' fields (progress, epoch_callback, checkpoint_dir,
    checkpoint_every, step_callback)."""
    options["epoch_callback"] = _both(selector, options.get("epoch_callback"))
    loop_options = LoopOptions(checkpoint_extra=selector, **options)
    run = Run(graph, cfg, features, resume_from, loop_options, starts)
    done = []

    def finish(result):
        trained = finished(result, graph, selector, keep_model, propagate=not streamed)
        if write is not None:
            write(trained)
        done.append(trained)

    result = engines.fit(run, **(engine or {}), write_outputs=finish if streamed else None)
    if not done:  # (a streamed run finished inside the engine)
        finish(result)
    return done[0]


def check_fresh(checkpoint_dir, resume_from, overwrite, engine="single"):
    """InputError, as ``caps2ne train --checkpoint-dir`` without ``--overwrite``, when
    ``checkpoint_dir`` holds the checkpoint of a run other than ``resume_from``'s (with
    ``engine='ray'``, a sharded one too); nothing without a folder (None, or '', which
    checkpoint.check_arguments names)."""
    if checkpoint_dir is None or str(checkpoint_dir) == "":
        return
    from . import checkpoint

    checkpoint.check_fresh(checkpoint_dir, overwrite, resume_from)
    if engine == "ray":
        from .ray.driver import check_fresh as check_sharded

        check_sharded(checkpoint_dir, resume_from, overwrite)


def finished(result, graph, selector=None, keep_model=True, propagate=True):
    """The ``Trained`` of a run's ``result`` on ``graph``: the run reported in the log,
    the selector's epoch kept, the training state freed (``free_training_state``), the
    o_v propagated when ``propagate`` and the run's options say so."""
    _report(result)
    params = result.params
    if selector is not None:
        params = selector.params_like(params)
    params = free_training_state(result, params, keep_model)
    propagated = None
    if propagate:
        from ..spectral import propagation

        propagated = propagation.apply(
            graph.indptr,
            graph.indices,
            graph.weights,
            result.config,
            params.O,
            held=getattr(result, "holdout", None),
            structure=getattr(result, "structure", None),
        )
    return Trained(result, params, propagated)


def free_training_state(result, params, keep_model=True):
    """What the outputs need of a finished run, the rest freed before the propagation
    runs beside it: Adam's two moments (2 x 4 N (k + d + 1) bytes) go, and without
    ``keep_model`` the trained x and W too (only the o_v are written); then a garbage
    collection, since the finished engine (which holds the tables, the moments, the
    batch stream and the compiled step's workspaces) sits in reference cycles that
    would otherwise live on through the propagation.  Returns the params to keep:
    ``params`` itself, or a Params holding only the o_v."""
    result.optimizer = None
    if not keep_model:
        from ..model.params import Params

        fixed = params.fixed_features
        params = Params(W=None, O=params.O, bias=None, X=None, fixed_features=fixed)
        result.params = params
    gc.collect()
    return params


def _report(result):
    """The log lines of a finished run: its epochs, time, final loss and throughput."""
    cfg, history = result.config, result.history  # every preset value filled in
    last = history[-1]
    seconds = sum(h["seconds"] for h in history)
    log.info(
        f"trained {len(history)} epoch{'s' * (len(history) != 1)} in {seconds:.1f}s: final "
        f"loss {last['loss']:.4f}, {last['pairs_per_s']:,.0f} pairs/s (lr {cfg.lr:g} "
        f"{cfg.lr_schedule})"
    )
    log.debug("resolved configuration: %s", cfg.to_dict())


def _both(first, second):
    """An epoch callback calling ``first`` then ``second`` (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(epoch, result):
        first(epoch, result)
        second(epoch, result)

    return both
