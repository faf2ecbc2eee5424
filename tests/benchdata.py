"""Where the tests find the paper's benchmark data, and the marker for tests that need it.

conftest.py gives the test session its own data folder (``$CAPS2NE_DATA``, a temporary
folder removed at exit) and copies into it, SHA-256 checked, every registry file it
finds in a local mirror (``$CAPS2NE_DATA_MIRROR``, or ``shared/data`` beside the
checkout) or in the user's own data folder (``caps2ne fetch-data`` puts the files in
``~/.cache/caps2ne_np``).  Tests read and write only that copy, never the user's
folder, and never download (the session's mirror is local or an empty folder).

A test that needs data says which sets: ``@needs_data("cora", "ppi")`` (or bare
``@needs_data`` on a test parametrized by ``name``; ``features=False`` when it reads no
feature files).  It skips, naming the missing files, when one of their files is absent;
the long explanation is printed once, at the end of the run.  ``-m "not needs_data"``
leaves them out.  tests/test_markers.py checks that every test reading ``DATA`` carries
the marker.
"""

from pathlib import Path

import pytest

from caps2ne_np.graphs.datasets import dataset_files
from caps2ne_np.graphs.downloads import default_data_dir

DATA = Path(default_data_dir())
HOWTO = (
    "Tests marked needs_data read the paper's benchmark sets from a copy of the data folder "
    "(~/.cache/caps2ne_np, or $CAPS2NE_DATA) made for the test session; they skip when a file "
    "they need is not there.  Fetch the sets once with 'caps2ne fetch-data' (or "
    "'python -m caps2ne_np fetch-data cora citeseer'; needs network), or point "
    "CAPS2NE_DATA_MIRROR at a local copy of the files; '-m \"not needs_data\"' leaves these "
    "tests out."
)
REASON = "no benchmark data (see 'benchmark data' at the end)"


def missing(names, features=True) -> list:
    """The files of the sets ``names`` that are not in ``DATA`` (paths inside it)."""
    return [
        rel
        for name in names
        for rel in dataset_files(name, features=features)
        if not (DATA / rel).is_file()
    ]


def have(name="cora", features=True) -> bool:
    """True if every file of benchmark set ``name`` is in ``DATA``."""
    return not missing([name], features)


def skip_reason(names, features=True):
    """The short skip reason for a test that needs ``names``, or None when all is there."""
    short = [name for name in names if missing([name], features)]
    if not short:
        return None
    return f"{REASON}: {', '.join(short)}"


needs_data = pytest.mark.needs_data
