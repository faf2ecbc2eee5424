"""The Markdown of the bench reports: tables, the run line, the machine, and the
targets, whose thresholds are data here (``TARGETS``), in one place.

Every script renders its ``<name>.md`` with these.  A report holds the run's figures and
the settings that produced them; what the figures mean, and what was found with them, is
in docs/benchmarks.md (``doc_pointer`` links it).
"""

# The targets.  A script measures; whether a figure meets its target is
# decided here, against these numbers, and the reports print the verdicts.
TARGETS = {
    # bench/perf.py: our pairs/s over the PyTorch peer's, per config
    "peer_ratio": {"a": 4.0, "b": 1.5, "c": 4.0, "d": 6.0},
    "thread_scaling": 1.7,  # 2 threads / 1 thread, pairs/s (configs a and b)
    "gemm_fraction": 0.5,  # config b: GFLOP/s achieved / the measured float32 GEMM rate
    "feature_parity": 1.0,  # (d) sparse d = 3,703 / (e) trained d = 128, pairs/s
    # configs f (converge preset, B = 16 walks) and g (B = 128), pairs/s
    "converge_thread_scaling": 1.7,  # (f) 2 threads / (f) 1 thread
    "converge_vs_large_batch": 0.9,  # (f) 2 threads / (g) 2 threads
    "never_slower": 0.97,  # (f), (g): 2 threads / 1 thread with the per-step rule (3% noise)
    # bench/walks_vs_pecanpy.py: our steps/s over PecanPy's
    "walks_vs_pecanpy": 5.0,
    # time_to_accuracy (no longer re-run; docs/results/investigations.md): a cold start
    # to 80% Cora test accuracy
    "cora_80_seconds": 120.0,
    # bench/scale.py, at its largest size (1,000,000 nodes)
    "load_s": 20.0,  # reading the text edge list
    "load_peak_ratio": 3.0,  # peak memory while loading / (CSR + id map)
    "cache_load_s": 2.0,  # reading the binary graph cache
    "throughput_ratio": 0.7,  # pairs/s / the BlogCatalog-size reference's
    "rss_ratio": 1.5,  # peak RSS / the memory formula
    "scale_total_s": 15 * 60,  # the whole scale benchmark
    # bench/run_all.py: the performance suite
    "suite_s": 15 * 60,
}


def target(what, value, met):
    """One target's verdict: ``what`` names the target with its threshold, ``value`` is
    the measured figure (a number or a short text)."""
    return dict(target=what, value=value, met=bool(met))


def targets_table(targets, extra_rows=()):
    """The targets as a Markdown table (target, measured, met); ``extra_rows`` are
    [target, measured, 'yes' / '**no**'] rows quoted from other result files."""
    rows = [[t["target"], t["value"], yes_no(t["met"])] for t in targets]
    return markdown_table(["target", "measured", "met"], rows + list(extra_rows))


def yes_no(met):
    return "yes" if met else "**no**"


def markdown_table(headers, rows):
    """A GitHub Markdown table; cells are formatted with str()."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_int(x):
    return f"{x:,.0f}"


def run_line(command, seconds, load_before, load_after, how=""):
    """`command` (how; N s in all; load average a before, b after): a report's second line."""
    how = f"{how}; " if how else ""
    return (
        f"`{command.strip()}` ({how}{seconds:.0f} s in all; load average "
        f"{load_before:.1f} before, {load_after:.1f} after)\n"
    )


def doc_pointer(section):
    """A line linking the section of docs/benchmarks.md that explains a report (the link
    works from docs/results/)."""
    return (
        f"How to read this report, and what it found: docs/benchmarks.md, [{section}]"
        f"(../benchmarks.md#{_anchor(section)}).\n"
    )


def _anchor(title):
    """GitHub's anchor of a Markdown heading."""
    keep = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return keep.replace(" ", "-")


def machine_markdown(info):
    """The machine of ``common.machine_info()`` (or an older result file's longer block) as
    a Markdown list."""
    v = info["versions"]
    blas = ", ".join(
        b
        if isinstance(b, str)  # common.short_machine's form
        else f"{b['library']} {b['version'] or ''} ({b['architecture'] or b['path']})".strip()
        for b in info["blas_and_openmp"]
    )
    env = ", ".join(f"{k}={val}" for k, val in info["env"].items() if val is not None) or "none set"
    dirty = " (with uncommitted changes)" if info.get("git_dirty") else ""
    return (
        f"- CPU: {info['cpu_model']}, {info['usable_cores']} usable cores "
        f"({', '.join(info['cpu_flags'][:6])}...)\n"
        f"- Python {info['python']}, numpy {v['numpy']}, numba {v['numba']} "
        f"(threading layer {info['numba_threading_layer']}), scipy {v['scipy']}, "
        f"torch {v['torch']}\n"
        f"- BLAS / OpenMP runtimes: {blas}\n"
        f"- environment: {env}\n"
        f"- commit: {info['git_commit']}{dirty}\n"
    )
