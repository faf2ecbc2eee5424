"""Checkpoints of the Ray engine: one file per server
(``shard-<s>-of-<S>.<epoch>-<step>.npz``, written by the server; ``W.<epoch>-<step>.npz``
by worker 0 when W is replicated) plus the driver's state ``driver.npz``, which names
them.  The driver file is replaced atomically after every shard file is complete, so
the directory always holds one whole checkpoint."""

from pathlib import Path

import numpy as np

from ...errors import InputError

DRIVER_FILE = "driver.npz"
FORMAT = "caps2ne_np.distributed_checkpoint"


def save_checkpoint(
    ray, directory, cluster, state, cfg, history, graph_hash, S, replicate_W, extra=None
):
    """Every server writes its shard for this step (and worker 0 the replicated W),
    then the driver file naming them (and holding the caller's ``extra`` arrays, as
    ``extra_<name>``) replaces the previous one (atomic); older files are removed
    after."""
    import json

    from ...io.npy import save_npz

    directory = Path(directory).absolute()  # the actors' working folder is not ours
    directory.mkdir(parents=True, exist_ok=True)
    tag = f"{state['epoch']}-{state['step']}"
    names = [f"shard-{s}-of-{S}.{tag}.npz" for s in range(S)]
    pending = [srv.save.remote(str(directory / name)) for srv, name in zip(cluster.servers, names)]
    w_file = f"W.{tag}.npz" if replicate_W else ""
    if replicate_W:
        pending.append(cluster.workers[0].save_W.remote(str(directory / w_file)))
    ray.get(pending)
    save_npz(
        directory / DRIVER_FILE,
        overwrite=True,
        format=np.asarray(FORMAT),
        config=np.asarray(json.dumps(cfg.to_dict())),
        history=np.asarray(json.dumps(history)),
        state=np.asarray(json.dumps(state)),
        graph_hash=np.asarray(graph_hash),
        n_shards=np.int64(S),
        shards=np.asarray(json.dumps(names)),
        w_file=np.asarray(w_file),
        **{f"extra_{name}": value for name, value in (extra or {}).items()},
    )
    keep = set(names) | {w_file}
    for old in list(directory.glob(f"shard-*-of-{S}.*.npz")) + list(directory.glob("W.*.npz")):
        if old.name not in keep:
            old.unlink()


def load_driver(directory):
    """The driver state of a sharded checkpoint (InputError when there is none)."""
    import json

    from ...io.npy import load_npz

    path = Path(directory) / DRIVER_FILE
    if not path.is_file():
        raise InputError(
            f"{directory}: no {DRIVER_FILE} to resume from; was the run started "
            "with --engine ray --checkpoint-dir?"
        )
    z = load_npz(path)
    if str(z.get("format", "")) != FORMAT:
        raise InputError(f"{path}: not a caps2ne_np sharded checkpoint")
    return {
        "config": json.loads(str(z["config"])),
        "history": json.loads(str(z["history"])),
        "state": json.loads(str(z["state"])),
        "graph_hash": str(z["graph_hash"]),
        "n_shards": int(z["n_shards"]),
        "shards": json.loads(str(z["shards"])),
        "w_file": str(z["w_file"]),
        "extra": {k[len("extra_") :]: z[k] for k in z if k.startswith("extra_")},
        "path": str(path),
        "dir": str(Path(directory).absolute()),
    }
