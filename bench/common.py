"""The bench/ harness: what every script shares, so that a script supplies only its
experiment and its rendering (the Markdown helpers are bench/report.py's).

    ap = common.parser(__doc__, threads=2, reps=5, smoke="d = 256 only", out="feature_dim")
    ap.add_argument("--dims", default="128,512")        # the script's own options
    args = ap.parse_args()
    with common.threads(args.threads), common.clock() as c:
        ...                                              # the experiment
    payload = common.payload(args, rows, seconds=c.seconds)
    common.write_results(args.out, payload, render(payload))

* the shared flags, defined once (``parser``, from bench/harness.py, which imports
  nothing but argparse so that the scripts that must not import this module use it
  too): ``--threads``, ``--reps``, ``--smoke`` and ``--out STEM`` (always a result
  stem: <RESULTS>/<STEM>.json and .md);
* one timer (``clock``; ``timed`` for one call), with ``median`` and ``spread``;
* one result schema (``payload``: the command, the arguments, the machine block, the
  rows, and the script's own fields) and one writer (``write_results``, atomic).

The scripts import the package of the checkout they sit in (this module puts its root
first on ``sys.path``), so a clone measures its own code whatever is installed.

``RESULTS`` is docs/results/, or the folder named by ``$CAPS2NE_BENCH_RESULTS``
(the tests point it at a temporary folder so that smoke runs leave docs/results/
alone); the scripts write their results there and read earlier results from there."""

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

# this checkout's package, as cli.py at the root runs it (not whichever one is installed):
# a bench script measures the code beside it
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from caps2ne_np.kernels import thread_layer
from caps2ne_np.kernels.thread_layer import usable_cores
from harness import parser  # noqa: F401 -- the shared flags (bench/harness.py: no import)

# the package sets the spin only while Numba's libgomp loads; here it stays set for the
# whole bench process, so that torch's own libgomp (the peer) spins the same way
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", thread_layer.SPIN_COUNT)
import numba  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits

BENCH = Path(__file__).resolve().parent
RESULTS = Path(os.environ.get("CAPS2NE_BENCH_RESULTS") or BENCH.parent / "docs" / "results")
REPO = BENCH.parent
ENV_VARS = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "OMP_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def torch_or_none():
    """The torch module, or None when it is not installed (it is optional)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def panel_adjacency(g):
    """A panel graph ``g`` (vs_deepwalk.PanelGraph) as the package reads it: its CSR with
    sorted indices, its edge weights (float32, or None when every weight is 1: the graph
    as it is, weights kept) and its symmetric adjacency (spectral.adjacency), as
    ``(adj, weights, A)``.  Numpy and the package's spectral module are imported here,
    so that importing this module stays light."""
    import numpy as np

    from caps2ne_np.spectral import prone as spectral

    adj = g.adj.tocsr()
    adj.sort_indices()
    data = np.asarray(adj.data, dtype=np.float32)
    weights = None if np.all(data == 1) else data
    return adj, weights, spectral.adjacency(adj.indptr, adj.indices, weights, g.n_nodes)


@contextlib.contextmanager
def threads(n, blas=None):
    """Run the block with n Numba threads, ``blas`` (default n) BLAS threads and (if loaded)
    n torch threads."""
    torch = sys.modules.get("torch")
    old_numba = numba.get_num_threads()
    old_torch = torch.get_num_threads() if torch is not None else None
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    if torch is not None:
        torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n if blas is None else blas):
            yield
    finally:
        numba.set_num_threads(old_numba)
        if torch is not None:
            torch.set_num_threads(old_torch)


class clock:
    """The harness's one timer: ``with clock() as c: ...``, then ``c.seconds`` (wall
    time, ``time.perf_counter``); ``c.elapsed()``, the time so far, also works on a
    clock used without ``with`` (it starts when made)."""

    def __init__(self):
        self.start = time.perf_counter()
        self.seconds = None

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def elapsed(self):
        return time.perf_counter() - self.start

    def __exit__(self, *exc):
        self.seconds = self.elapsed()
        return False


def timed(fn, *args):
    """Seconds taken by fn(*args) (``clock``)."""
    with clock() as c:
        fn(*args)
    return c.seconds


def median(values):
    return float(statistics.median(values))


def spread(values):
    """(min, max) / median - 1, as a percentage pair, to show how noisy a median is."""
    m = median(values)
    return (100.0 * (min(values) / m - 1.0), 100.0 * (max(values) / m - 1.0))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return [f for f in flags if f.startswith(("avx", "fma", "sse4"))]
    except OSError:
        pass
    return []


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*args):
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info():
    """The machine, short (``short_machine``): CPU model, cores, library versions, BLAS /
    OpenMP runtimes, the relevant environment variables that are set and the git commit
    (with a flag when the work tree has changes)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return short_machine(
        dict(
            cpu_model=cpu_model(),
            cpu_flags=cpu_flags(),
            logical_cores=os.cpu_count(),
            usable_cores=usable_cores(),
            python=platform.python_version(),
            versions={p: _version(p) for p in ("caps2ne_np", "numpy", "numba", "scipy", "torch")},
            numba_threading_layer=_threading_layer(),
            blas_and_openmp=threadpool_info(),
            env={k: os.environ.get(k) for k in ENV_VARS},
            git_commit=_git("rev-parse", "--short", "HEAD"),
            git_dirty=bool(status) if status is not None else None,
        )
    )


CPU_FLAGS_KEPT = 6  # the first SIMD flags of cpu_flags(), as the reports show them


def short_machine(info):
    """The machine block a result file keeps (once per file): the first SIMD flags, each
    BLAS / OpenMP runtime as one "library version (architecture)" string and only the
    environment variables that are set.  Idempotent, so it also shortens the block of
    an older result file (``threadpool_info()`` dicts, the full flag list, the platform
    string); report.machine_markdown renders both forms the same."""
    blas = [
        b
        if isinstance(b, str)
        else (
            f"{b.get('library') or b.get('internal_api')} {b.get('version') or ''} "
            f"({b.get('architecture') or os.path.basename(b.get('path') or b.get('filepath', ''))})"
        ).strip()
        for b in info["blas_and_openmp"]
    ]
    keep = (
        "cpu_model",
        "cpu_flags",
        "logical_cores",
        "usable_cores",
        "python",
        "versions",
        "numba_threading_layer",
        "blas_and_openmp",
        "env",
        "git_commit",
        "git_dirty",
    )
    out = {k: info[k] for k in keep if k in info}
    out["cpu_flags"] = list(info["cpu_flags"][:CPU_FLAGS_KEPT])
    out["blas_and_openmp"] = blas
    out["env"] = {k: v for k, v in info["env"].items() if v is not None}
    return out


def _threading_layer():
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet
        return None


DIGITS = 7  # significant digits kept in result files: timings on a shared machine vary more


def rounded(obj, digits=DIGITS):
    """``obj`` with every float rounded to ``digits`` significant digits (NumPy arrays and
    scalars become lists and Python numbers); ints, strings and None are kept."""
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    if hasattr(obj, "tolist"):  # NumPy arrays and scalars
        return rounded(obj.tolist(), digits)
    if isinstance(obj, float) and math.isfinite(obj):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def json_text(payload):
    """Compact JSON of ``payload`` (no indent, rounded floats, one line) for result files."""
    return json.dumps(rounded(payload), separators=(",", ":")) + "\n"


def write_text_atomic(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def write_json(path, payload):
    """Write ``payload`` to ``path`` as compact JSON (``json_text``), atomically."""
    return write_text_atomic(path, json_text(payload))


def write_results(name, payload, markdown):
    """Write RESULTS/<name>.json (compact) and <name>.md atomically; returns the two paths."""
    return [
        write_json(RESULTS / f"{name}.json", payload),
        write_text_atomic(RESULTS / f"{name}.md", markdown),
    ]


def command(argv=None):
    """The command line that ran this script, as the result files quote it."""
    argv = sys.argv if argv is None else argv
    return "python bench/" + " ".join([Path(argv[0]).name, *argv[1:]])


def payload(args, rows, **fields):
    """The harness's result schema: the command, the arguments, the machine block
    (``machine_info``), the rows of the experiment, and the script's own ``fields``."""
    return dict(
        command=command(),
        args=vars(args) if isinstance(args, argparse.Namespace) else dict(args),
        machine=machine_info(),
        rows=rows,
        **fields,
    )
