import atexit
import os
import re
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

# tests/naive_walks.py and the other helper modules are imported by plain name.
sys.path.insert(0, os.path.dirname(__file__))

# Ray (2.60+) starts a local cluster with token authentication and, when no token is
# given, writes one to ~/.ray/auth_token: a file in the user's home.  The tests' Ray
# instances (and the subprocesses that start their own) get a session token instead.
os.environ.setdefault("RAY_AUTH_TOKEN", uuid.uuid4().hex)


def _session_data():
    """Give the test session its own data folder and a local (or empty) mirror.

    Every registry file found in a local mirror ($CAPS2NE_DATA_MIRROR when it is a
    folder or file:// URL, or shared/data beside the checkout) or in the user's data
    folder ($CAPS2NE_DATA, else ~/.cache/caps2ne_np) is copied, if its SHA-256 matches,
    into a temporary folder that becomes $CAPS2NE_DATA for this process and every
    process it starts; $CAPS2NE_DATA_MIRROR becomes the local mirror or an empty folder.
    So no test writes into the user's folders or downloads anything, and a test that
    needs a file nobody has skips (tests/benchdata.py).  Returns the sources used."""
    from caps2ne_np.graphs import downloads

    mirror = downloads.data_mirror()
    if mirror is not None and mirror.startswith("file://"):
        from urllib.parse import unquote, urlparse

        mirror = unquote(urlparse(mirror).path)
    local = mirror if mirror is not None and "://" not in mirror else None
    sources = [Path(p) for p in (local, downloads.default_data_dir()) if p]
    tmp = Path(tempfile.mkdtemp(prefix="caps2ne_tests_"))
    pid = os.getpid()
    atexit.register(lambda: os.getpid() == pid and shutil.rmtree(tmp, ignore_errors=True))
    data, empty = tmp / "data", tmp / "no-mirror"
    empty.mkdir()
    for rel in downloads.FILES:
        for src in sources:
            if (src / rel).is_file() and downloads.matches_registry(src / rel, rel):
                (data / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / rel, data / rel)
                break
    os.environ["CAPS2NE_DATA"] = str(data)
    os.environ["CAPS2NE_DATA_MIRROR"] = str(local or empty)
    return sources, local


SOURCES, LOCAL_MIRROR = _session_data()


# ---------------------------------------------------------------- skips: data and CI
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PROVIDED = set(os.environ.get("CAPS2NE_CI_PROVIDES", "data gensim networkx pandas ray").split())
"""What .ci/run installs or fetches ($CAPS2NE_CI_PROVIDES): in CI a test skipped for lack
of one of these fails instead."""
_DATA_SKIPS = []


def _needed_sets(item, marker):
    """(dataset names, features) a ``needs_data`` marker asks for (the test's ``name``
    parameter when the marker names none)."""
    from caps2ne_np.graphs.datasets import NAMES

    names = list(marker.args)
    if not names:
        param = getattr(getattr(item, "callspec", None), "params", {}).get("name")
        names = [param] if param in NAMES else ["cora"]
    return names, marker.kwargs.get("features", True)


def pytest_collection_modifyitems(config, items):
    """Skip each ``needs_data`` test whose files are not in the session's data folder
    (in CI, fail it instead, unless .ci/run's mirror lacks those files too)."""
    from benchdata import missing, skip_reason

    for item in items:
        marker = item.get_closest_marker("needs_data")
        if marker is None:
            continue
        names, features = _needed_sets(item, marker)
        reason = skip_reason(names, features)
        if reason is None:
            continue
        _DATA_SKIPS.append(item.nodeid)
        item.add_marker(pytest.mark.skip(reason=reason))
        if CI and "data" in PROVIDED:
            held = [r for r in missing(names, features) if any((s / r).is_file() for s in SOURCES)]
            if held or LOCAL_MIRROR is None:
                what = ", ".join(held) if held else "a data mirror (CAPS2NE_DATA_MIRROR)"
                item.user_properties.append(("ci_must_run", f"data: {what}"))


def _ci_provided_reason(item, reason):
    """What .ci/run provides that a skip with ``reason`` says is missing, or None."""
    for key, why in item.user_properties:
        if key == "ci_must_run":
            return why
    for package in sorted(PROVIDED - {"data"}):
        if re.search(rf"(?<![\w.]){re.escape(package)}(?![\w])", reason):
            return package
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CI=true), a skip for a package or data that .ci/run provides is a failure."""
    outcome = yield
    report = outcome.get_result()
    if not CI or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    what = _ci_provided_reason(item, reason)
    if what is not None:
        report.outcome = "failed"
        report.longrepr = (
            f"CI=true: skipped ({reason}), but .ci/run provides {what} "
            f"(CAPS2NE_CI_PROVIDES={' '.join(sorted(PROVIDED))})"
        )


def pytest_terminal_summary(terminalreporter, config):
    """The long explanation of the data skips, once; and, unless -rs (or -ra) lists the
    skips, their count in one line (setup.cfg's -rfE lists failures and errors only; in
    CI a skip of what .ci/run provides is a failure, so it is listed)."""
    from benchdata import HOWTO

    every = terminalreporter.stats.get("skipped", [])
    skipped = [r for r in every if r.nodeid in set(_DATA_SKIPS)]
    if skipped:
        terminalreporter.write_sep("-", "benchmark data")
        terminalreporter.write_line(f"{len(skipped)} tests skipped without benchmark data. {HOWTO}")
    chars = getattr(config.option, "reportchars", "") or ""
    if every and not set(chars) & set("saA"):
        terminalreporter.write_line(
            f"{len(every)} tests skipped ({len(skipped)} without benchmark data); "
            "pytest -rs lists them"
        )


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray instance (2 CPUs) for one test module, shut down after it if this
    fixture started it; skips without ray.  A Ray that is installed but fails to start is
    an error of the test, not a skip.  Ray's workers run the single machine's step (the
    compiled one where fused.supports the run), so one worker is compared with one
    machine bit for bit."""
    ray = pytest.importorskip("ray")
    from caps2ne_np.training.ray.connect import start_ray

    started = start_ray(num_cpus=2)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(autouse=True)
def _default_logging_after_each_test():
    """A command run in-process (click's test runner) leaves the ``caps2ne_np`` logger
    as its -q/-v set it (not propagating); later tests' caplog would see nothing."""
    yield
    from caps2ne_np.cli.run import reset_logging

    reset_logging()
