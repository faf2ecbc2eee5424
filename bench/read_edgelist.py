"""Time read_edgelist on a generated 1M-edge edge list, optionally against another graph.py.

    python bench/read_edgelist.py                       # this reader: integer, string, weighted ids
    git show 59ba5c7:caps2ne_np/graph.py > /tmp/old_graph.py
    python bench/read_edgelist.py --against /tmp/old_graph.py   # the Numba reader, side by side

Each round reads every file with each reader in turn (alternating, so load on the
machine hits both alike) after one warm-up read; prints the median seconds, the ratio
and whether the two Graphs are equal bit for bit.  Files go to a temporary folder.
"""

import importlib.util
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import common
from caps2ne_np.graphs import graph


def write_files(folder: Path, m: int, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, m).tolist(), rng.integers(0, n, m).tolist()
    w = rng.uniform(0.1, 10, m).tolist()
    files = {
        "integer ids": "".join(f"{a} {b}\n" for a, b in zip(u, v)),
        "string ids": "".join(f"n{a} n{b}\n" for a, b in zip(u, v)),
        "integer ids, weights": "".join(f"{a} {b} {c:.6g}\n" for a, b, c in zip(u, v, w)),
    }
    paths = {}
    for i, (name, text) in enumerate(files.items()):
        paths[name] = folder / f"edges{i}.txt"
        paths[name].write_text(text)
    return paths


def load_module(path: str):
    name = Path(path).stem  # Numba's kernel cache finds the module again by this name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def same(a, b) -> bool:
    wa = None if a.weights is None else a.weights.tobytes()
    wb = None if b.weights is None else b.weights.tobytes()
    return (
        a.node_ids == b.node_ids
        and a.stats == b.stats
        and wa == wb
        and a.indptr.tobytes() == b.indptr.tobytes()
        and a.indices.tobytes() == b.indices.tobytes()
    )


def main():
    ap = common.parser(__doc__, reps=5)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--against", help="path of another graph.py to time side by side")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    readers = {"this": graph.read_edgelist}
    if args.against:
        readers["other"] = load_module(args.against).read_edgelist
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in write_files(Path(tmp), args.edges, args.nodes).items():
            times = {key: [] for key in readers}
            graphs = {key: read(path) for key, read in readers.items()}  # warm-up (and JIT)
            for _ in range(args.reps):
                for key, read in readers.items():
                    times[key].append(common.timed(read, path))
            line = f"{name:22s}" + "".join(
                f"  {key} {statistics.median(t):.3f} s" for key, t in times.items()
            )
            if args.against:
                ratio = statistics.median(times["this"]) / statistics.median(times["other"])
                line += (
                    f"  this/other {ratio:.2f}  same graph: {same(graphs['this'], graphs['other'])}"
                )
            print(line, flush=True)


if __name__ == "__main__":
    main()
