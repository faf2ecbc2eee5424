"""Where the tests find the paper's benchmark data, and the marker for tests that need it.

conftest.py copies the data (SHA-256 checked, ``datasets.fetch``) into
``datasets.default_data_dir()`` from a local mirror when there is one; without
one (a plain clone on a machine without the data) the tests marked ``needs_data``
skip and say why (conftest.py), and ``-m "not needs_data"`` leaves them out.
tests/test_markers.py checks that every test reading ``DATA`` carries the marker.
"""

from pathlib import Path

import pytest

from caps2ne_np.datasets import default_data_dir

DATA = Path(default_data_dir())
REASON = (
    f"benchmark data not found at {DATA} and no local mirror: set CAPS2NE_DATA to a "
    "folder holding planetoid/ and multilabel/, or CAPS2NE_DATA_MIRROR to a copy of "
    "shared/data, or run 'caps2ne fetch-data' with network"
)


def have(part="planetoid"):
    """True if ``DATA/part`` exists (``planetoid``, ``multilabel`` or a file below them)."""
    return (DATA / part).exists()


needs_data = pytest.mark.needs_data
