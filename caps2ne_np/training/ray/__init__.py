"""Sharded training on Ray (``--engine ray``): the parameter server of docs/scaling.md,
layout B.

The N-row tables (O, the biases, x: trained or fixed) and their lazy-Adam moments
are split by node id over S *server* actors: node v lives on server ``v % S`` at
local row ``v // S``.  W (small) and its Adam moments live on server 0, or on every
worker (``w_placement='workers'``: a replica each, see ``fit``).  P *worker*
actors hold the CSR (shared through Ray's object store) and, in the parameter
server's rounds, nothing of size N except the sampler's table; each builds its own
batches from (seed, epoch, batch) exactly as ``train.fit`` does, pulls the rows the
batch needs, runs the single machine's step on those rows only (node ids renumbered
to local rows in id order): the compiled step's kernels (compiled.py), or
``core.loss_and_row_grads`` with the skip-gram term, as ``train.fit`` then; and
returns one push of row gradients per server.

By default (the compiled step: no skip-gram term) the workers train in *replica
rounds* (replica.py): each holds a replica of every table and its moments, trains
about 4 walks per node of batches per round with the single machine's compiled
chunk, and sends the servers the rows that changed; the servers merge the P workers'
rows in rank order (one worker's rows as they are, several workers' changes summed,
their moments averaged).  P = 1 is then ``train.fit`` bit for bit, for any S.

Otherwise (the skip-gram term, ``w_placement='workers'``, or ``max_rows_per_shard``
below N) a *round* runs batches ``b0 + r`` (r = 0 .. P - 1) of the epoch on worker r, all
against the parameters at the start of the round; each server then applies the P
pushes **in rank order**, each as one lazy-Adam step with the step count and rate
of its global batch number, as ``train.fit`` would have applied them one after the
other.  So:

* P = 1 takes the very steps of ``train.fit`` with ``adam='lazy'`` (the compiled
  step, the default): the same embeddings, bit for bit, for any S
  (tests/test_ray.py);
* P > 1 takes the same batches, the same number of Adam steps and the same rates,
  but the gradient of push r is computed r updates late (bounded staleness P - 1);
  a run is reproducible for fixed P (any S gives the same bits).

The driver (this process) only orchestrates: it never holds a table during training;
it makes the initial values (``params.init_params``) and sends them to the servers chunk
by chunk.  Its epoch loop is loop.run_epochs, shared with ``train.fit``; ``RayEngine``
supplies the rounds, the checks and the checkpoints.  The outputs are streamed too
(``write_outputs``: consecutive row blocks pulled from the shards into the block-wise
writers of ``io``); only a caller that wants the arrays (the estimator's ``O_``, an
``epoch_callback``) makes the driver gather whole tables.

Checkpoints: one file per server plus the driver's state ``driver.npz``, which names
them (checkpoints.py).  A killed actor surfaces as ``RayActorError`` in the current
round; the driver then restarts every actor from the last checkpoint (``max_restarts``
times) or stops with ``WorkerLost``, naming the checkpoint to ``--resume`` from.

One module per concern:

    shards.py       the layout (node v on shard v % S, local row v // S)
    server.py       ShardServer: a shard of the tables and their lazy Adam
    replica.py      ReplicaWorker, merge_rows: replica rounds
    worker.py       BatchWorker: a rank's batches and steps; RayWorker, its actor
    compiled.py     CompiledBatches: the compiled step on a worker's pulled rows
    connect.py      connecting to Ray (address probe), its log level, a results-only stdout
    engine.py       RayEngine (the engine of loop.run_epochs) and Cluster (a run's actors)
    outputs.py      the parameters gathered, or streamed in row blocks to the writers
    checkpoints.py  the sharded checkpoint files
    driver.py       fit_run (the shared set-up, attempts, restarts), fit (of CSR arrays),
                    cli_fit, check_fresh, worker_count

Ray is imported only by these modules, and only when this engine runs.
"""

from .connect import start_ray
from .driver import WorkerLost, check_fresh, cli_fit, fit, fit_run, worker_count

__all__ = [
    "WorkerLost",
    "check_fresh",
    "cli_fit",
    "fit",
    "fit_run",
    "start_ray",
    "worker_count",
]
