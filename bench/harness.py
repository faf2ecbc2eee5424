"""The bench/ harness's argument parser: the shared flags, defined once.

Every bench script builds its parser with ``parser`` (bench/common.py re-exports it as
``common.parser``).  This module imports only the standard library, so that the scripts
which must not import bench/common.py (it imports the package and Numba and sets the
OpenMP spin of the process) build their parser here too: the peers (deepwalk_peer.py,
peers/prone_peer.py: the commands being timed, which report their own import phase),
walks_vs_pecanpy.py (its worker runs in PecanPy's interpreter, without this package)
and scale.py (its workers set their thread environment before Numba loads).
"""

import argparse


def _thread_counts(text):
    """'1,2' -> [1, 2] (``--threads`` of a script that sweeps thread counts)."""
    try:
        counts = [int(v) for v in str(text).split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,M,..., got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1, got {text!r}")
    return counts


def _usable_cores():
    """The package's count of usable cores, imported only when asked for (threads=0)."""
    from caps2ne_np.kernels.thread_layer import usable_cores

    return usable_cores()


def parser(doc, *, threads=None, reps=None, smoke=None, out=None, threads_help=None):
    """An ``argparse`` parser with the harness's shared flags, each defined here once;
    a keyword left None leaves its flag out.  The description is ``doc``'s first line.

    threads       default of ``--threads N`` (Numba and BLAS threads): an int; 0 for the
                  usable cores; a string such as "1,2" for a sweep (``args.threads`` is
                  then a list of ints)
    reps          default of ``--reps N``: timed repetitions, medians reported
    smoke         help of ``--smoke``: what the configuration of seconds for the tests runs
    out           default of ``--out STEM``: the results go to <RESULTS>/<STEM>.json and .md
                  (``--out`` is always a result stem; a script that writes an embedding
                  names that file with a flag of its own)
    threads_help  what ``--threads`` sets, when not Numba and BLAS threads
    """
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    if isinstance(threads, str):
        ap.add_argument(
            "--threads",
            type=_thread_counts,
            default=_thread_counts(threads),
            help=f"{threads_help or 'thread counts'}, comma-separated (default {threads})",
        )
    elif threads is not None:
        ap.add_argument(
            "--threads",
            type=int,
            default=threads or _usable_cores(),
            help=f"{threads_help or 'Numba and BLAS threads'} (default %(default)s"
            + (": the usable cores)" if not threads else ")"),
        )
    if reps is not None:
        ap.add_argument(
            "--reps", type=int, default=reps, help="timed repetitions, medians reported"
        )
    if smoke is not None:
        ap.add_argument("--smoke", action="store_true", help=f"seconds, for the tests: {smoke}")
    if out is not None:
        ap.add_argument(
            "--out",
            default=out,
            metavar="STEM",
            help=f"result stem: <results>/STEM.json and .md (default {out}; the folder is "
            "docs/results or $CAPS2NE_BENCH_RESULTS)",
        )
    return ap
