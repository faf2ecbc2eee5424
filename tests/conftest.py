import os
import sys

import pytest

# tests/naive.py and the other reference modules are imported by plain name.
sys.path.insert(0, os.path.dirname(__file__))


def _fetch_benchmark_data():
    """Copy the benchmark sets from a local mirror ($CAPS2NE_DATA_MIRROR, or shared/data
    beside the checkout) into datasets.default_data_dir(), checking every SHA-256: the
    download path of datasets.fetch, offline.  Nothing happens without a local mirror;
    tests that need the data then skip (tests/benchdata.py)."""
    from caps2ne_np import datasets
    from caps2ne_np.errors import InputError

    mirror = datasets.data_mirror()
    if mirror is None or mirror.startswith(("http://", "https://")):
        return
    for name in datasets.PLANETOID_NAMES + tuple(datasets.MAT_FILES):
        for features in (True, False):  # Pubmed's allx is missing from shared/data
            if datasets.available(name, features=features):
                try:
                    datasets.fetch(name, features=features)
                except InputError as err:
                    print(f"conftest: {err}", file=sys.stderr)
                break


_fetch_benchmark_data()


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked ``needs_data`` when the benchmark data are absent."""
    from benchdata import REASON, have

    if have():
        return
    skip = pytest.mark.skip(reason=REASON)
    for item in items:
        if item.get_closest_marker("needs_data") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray instance (2 CPUs) for one test module, shut down after it if this
    fixture started it; skips without ray, or where Ray is installed but cannot start."""
    ray = pytest.importorskip("ray")
    from caps2ne_np.distributed import start_ray

    try:
        started = start_ray(num_cpus=2)
    except Exception as err:  # noqa: BLE001 -- a machine where Ray cannot start (no shm, ...)
        pytest.skip(f"Ray is installed but could not start here: {err}")
    yield ray
    if started:
        ray.shutdown()
