"""The Ray engine's driver memory while writing the outputs (issue 18): the tables
gathered whole and handed to the writers, against streamed in row blocks from the
shards (``training.ray.outputs.streamed_params``).

    python bench/distributed_outputs.py [--nodes 1000000] [--dim 16] [--servers 2]

S server actors (``ShardServer``) on a local Ray instance are filled with random
O (N, k), biases and x (N, d), streamed from the driver in chunks (no training: only
the writing is measured); then, in a fresh driver process per mode, the driver writes
``--out`` (word2vec text), ``--npy`` (+ ``.nodes.txt``) and ``--model-out`` as the
CLI does.  Reported per mode: the peak of NumPy/Python allocations during the
writing (tracemalloc: the arrays built on the driver; Ray's zero-copy buffers are not
in it), the growth of the process's peak RSS during the writing (getrusage: also
the object-store pages it maps), the time, and that both modes wrote the same bytes.
Writes docs/results/distributed_outputs.md with ``--update``.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import common


def child(mode, nodes, dim, servers, block_rows, out_dir):
    import gc
    import resource
    import tracemalloc
    from types import SimpleNamespace

    import numpy as np

    from caps2ne_np.io.modelfile import save_model
    from caps2ne_np.io.npy import save_npy
    from caps2ne_np.io.word2vec import write_word2vec
    from caps2ne_np.training.ray import outputs, start_ray
    from caps2ne_np.training.ray.server import ShardServer

    started = start_ray(num_cpus=2)
    import ray

    Server = ray.remote(ShardServer).options(num_cpus=0)
    actors = [Server.remote(s, servers, nodes, dim, dim, 9, False, s == 0) for s in range(servers)]
    rng = np.random.default_rng(0)
    for name, width in (("O", dim), ("bias", None), ("X", dim)):
        for lo in range(0, nodes, 1 << 16):
            hi = min(lo + (1 << 16), nodes)
            shape = (hi - lo,) if width is None else (hi - lo, width)
            chunk = ray.put(rng.standard_normal(shape).astype(np.float32))
            ray.get([a.set_rows.remote(name, lo, chunk) for a in actors])
    cluster = SimpleNamespace(servers=actors, workers=[])
    ids = [f"n{i}" for i in range(nodes)]
    gc.collect()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    with common.clock() as c:
        if mode == "gather":
            params = outputs.gather(ray, cluster, nodes, False)
        else:
            params = outputs.streamed_params(
                ray, cluster, nodes, dim, dim, False, block_rows=block_rows
            )
        write_word2vec(Path(out_dir) / "e.emb", ids, params.O)
        save_npy(Path(out_dir) / "e.npy", params.O, ids)
        save_model(Path(out_dir) / "m.npz", params, ids, {"dim": dim}, 0.01, [])
    seconds = c.seconds
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if started:
        ray.shutdown()
    digests = {}
    for name in ("e.emb", "e.npy", "e.nodes.txt"):
        digests[name] = hashlib.sha256((Path(out_dir) / name).read_bytes()).hexdigest()[:16]
    import zipfile

    with zipfile.ZipFile(Path(out_dir) / "m.npz") as z:
        digests["m.npz members"] = hashlib.sha256(
            b"".join(z.read(i) for i in z.infolist())
        ).hexdigest()[:16]
    table_bytes = nodes * (2 * dim + 1) * 4
    print(
        json.dumps(
            dict(
                mode=mode,
                nodes=nodes,
                dim=dim,
                servers=servers,
                block_rows=block_rows or outputs.OUTPUT_BLOCK_ROWS,
                table_mb=table_bytes / 1e6,
                traced_peak_mb=peak / 1e6,
                rss_growth_mb=(rss1 - rss0) / 1e6,
                rss_peak_mb=rss1 / 1e6,
                seconds=seconds,
                digests=digests,
            )
        )
    )


def main():
    ap = common.parser(__doc__, out="distributed_outputs")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=16, help="k = d")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument(
        "--block-rows", type=int, default=0, help="0: training.ray.outputs.OUTPUT_BLOCK_ROWS"
    )
    ap.add_argument("--update", action="store_true", help="write the result files (--out)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.nodes, args.dim, args.servers, args.block_rows or None, args.out_dir)
        return
    rows = []
    for mode in ("gather", "stream"):
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    mode,
                    "--out-dir",
                    tmp,
                    "--nodes",
                    str(args.nodes),
                    "--dim",
                    str(args.dim),
                    "--servers",
                    str(args.servers),
                    "--block-rows",
                    str(args.block_rows),
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    same = rows[0]["digests"] == rows[1]["digests"]
    load = os.getloadavg()[0]
    r = rows[0]
    lines = [
        "# The Ray engine's outputs: driver memory while writing\n",
        f"`python bench/distributed_outputs.py --nodes {r['nodes']} --dim {r['dim']} --servers "
        f"{r['servers']} --update`\n",
        f"N = {r['nodes']:,} nodes, k = d = {r['dim']}, S = {r['servers']} servers on a local Ray "
        f"instance; O, biases and x hold {r['table_mb']:.0f} MB; the driver writes --out (text), "
        f"--npy (+ .nodes.txt) and --model-out; load average {load:.1f}. Same bytes in both "
        f"modes: {'yes' if same else 'NO'}.\n",
        "| mode | block rows | traced peak MB (tracemalloc) | peak RSS growth MB (getrusage) "
        "| peak RSS MB | seconds |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['mode']} | {row['block_rows'] if row['mode'] == 'stream' else '-'} | "
            f"{row['traced_peak_mb']:.1f} | {row['rss_growth_mb']:.1f} | "
            f"{row['rss_peak_mb']:.0f} | "
            f"{row['seconds']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.update:
        common.write_results(args.out, common.payload(args, rows), text)


if __name__ == "__main__":
    main()
