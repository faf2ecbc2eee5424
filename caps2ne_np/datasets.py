"""Benchmark datasets of the paper and readers for a user's own features, labels and splits.

Every loader returns plain NumPy / scipy.sparse objects in a :class:`Dataset`, so
nothing here depends on the rest of the package beyond ``errors`` and the checked
``.npy`` / ``.npz`` readers of ``io`` (``graph.from_scipy`` turns ``Dataset.adj``
into the training graph). Row ``i`` of every matrix is node ``i`` and
``node_ids[i]`` is its name.

==============  ======================================================  ================
name            source (``shared/data/README.md``)                      labels
==============  ======================================================  ================
cora            Planetoid ``ind.cora.*`` + the paper's splits            7 classes
citeseer        Planetoid ``ind.citeseer.*`` (15 unlabelled nodes)       6 classes
pubmed          Planetoid ``ind.pubmed.*`` (``allx`` may be missing)     3 classes
ppi, pos,       DeepWalk ``.mat`` files (``network``, ``group``)          multi-label
blogcatalog
cora-bundled    the Cora graph, labels and splits shipped in             7 classes
                ``caps2ne_np/data`` (no features)
==============  ======================================================  ================

:func:`load_dataset` fetches missing files into :func:`default_data_dir` (the user's
cache folder unless ``$CAPS2NE_DATA`` says otherwise) from the authors' repository at
a fixed commit, checking the SHA-256 held in :data:`FILES`; ``$CAPS2NE_DATA_MIRROR``
points it at a local copy instead (tests, CI, machines without network).

Planetoid files are pickles. Unpickling runs code named by the file, so they are
read with :class:`RestrictedUnpickler`, which resolves only the six globals these
files use and refuses everything else before it can run.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import logging
import os
import pickle
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from caps2ne_np.errors import InputError
from caps2ne_np.io import check_npy_header, read_sparse_npz

try:  # NumPy >= 2 moved the pickled name numpy.core.multiarray to numpy._core.multiarray
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core.multiarray import _reconstruct as _np_reconstruct

log = logging.getLogger(__name__)

__all__ = [
    "Dataset",
    "PLANETOID_NAMES",
    "MAT_FILES",
    "DATASET_NAMES",
    "RestrictedUnpickler",
    "FILES",
    "UPSTREAM",
    "available",
    "data_mirror",
    "dataset_files",
    "default_data_dir",
    "fetch",
    "paper_splits",
    "load_planetoid",
    "load_mat",
    "load_splits",
    "load_features",
    "load_labels",
    "load_dataset",
    "load_bundled_cora",
    "bundled_cora_splits",
]

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
MAT_FILES = {"ppi": "PPI.mat", "pos": "POS.mat", "blogcatalog": "blogcatalog.mat"}
DATASET_NAMES = PLANETOID_NAMES + tuple(MAT_FILES) + ("cora-bundled",)
_PLANETOID_PARTS = ("allx", "ally", "tx", "ty", "graph")


@dataclass
class Dataset:
    """A graph with labels, optional node features and optional evaluation splits.

    Attributes
    ----------
    name : str
    adj : scipy.sparse.csr_matrix, (N, N) float32
        As stored upstream (symmetric for the benchmark sets); duplicate entries
        collapsed (value 1 for unweighted graphs); self loops kept as they are.
    features : scipy.sparse.csr_matrix or numpy.ndarray, (N, d) float32, or None
        Row-unnormalised; ``None`` for a featureless graph.
    labels : numpy.ndarray or scipy.sparse.csr_matrix
        Single-label: int64 (N,) class index, -1 for unlabelled nodes.
        Multi-label: int64 (N, L) 0/1 indicator, CSR.
    multilabel : bool
    node_ids : list of str
        ``'0' .. 'N-1'`` for the benchmark sets.
    splits : list of dict or None
        ``[{'train': int64 array, 'val': ..., 'test': ...}, ...]`` of node indices.
    """

    name: str
    adj: sp.csr_matrix
    features: sp.csr_matrix | np.ndarray | None
    labels: np.ndarray | sp.csr_matrix
    multilabel: bool
    node_ids: list[str]
    splits: list[dict] | None = None

    @property
    def n_nodes(self) -> int:
        """N, the number of nodes."""
        return self.adj.shape[0]

    @property
    def n_classes(self) -> int:
        """Number of classes (single-label) or labels L (multi-label)."""
        if self.multilabel:
            return self.labels.shape[1]
        return int(self.labels.max()) + 1 if self.labels.size else 0


# --------------------------------------------------------------------------- paths and downloads

#: Every file is fetched from the authors' repository at a fixed commit, so the bytes,
#: and therefore the SHA-256 held here, cannot change (shared/data/README.md, section 4).
UPSTREAM = "https://raw.githubusercontent.com/daiquocnguyen/Caps2NE/bb9dc9f2a2eb8a40d193473c5c3424084e0918ed/"

#: path inside the data folder -> (path in the upstream repository, SHA-256 of the file)
FILES = {
    "planetoid/ind.cora.allx": ("data/ind.cora.allx", "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543"),
    "planetoid/ind.cora.ally": ("data/ind.cora.ally", "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71"),
    "planetoid/ind.cora.graph": ("data/ind.cora.graph", "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d"),
    "planetoid/ind.cora.test.index": ("data/ind.cora.test.index", "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875"),
    "planetoid/ind.cora.tx": ("data/ind.cora.tx", "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a"),
    "planetoid/ind.cora.ty": ("data/ind.cora.ty", "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad"),
    "planetoid/ind.citeseer.allx": ("data/ind.citeseer.allx", "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668"),
    "planetoid/ind.citeseer.ally": ("data/ind.citeseer.ally", "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95"),
    "planetoid/ind.citeseer.graph": ("data/ind.citeseer.graph", "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7"),
    "planetoid/ind.citeseer.test.index": ("data/ind.citeseer.test.index", "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4"),
    "planetoid/ind.citeseer.tx": ("data/ind.citeseer.tx", "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21"),
    "planetoid/ind.citeseer.ty": ("data/ind.citeseer.ty", "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce"),
    "planetoid/ind.pubmed.allx": ("data/ind.pubmed.allx", "508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e"),
    "planetoid/ind.pubmed.ally": ("data/ind.pubmed.ally", "0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e"),
    "planetoid/ind.pubmed.graph": ("data/ind.pubmed.graph", "5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9"),
    "planetoid/ind.pubmed.test.index": ("data/ind.pubmed.test.index", "b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5"),
    "planetoid/ind.pubmed.tx": ("data/ind.pubmed.tx", "4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d"),
    "planetoid/ind.pubmed.ty": ("data/ind.pubmed.ty", "ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd"),
    "multilabel/PPI.mat": ("graph/PPI.mat", "8a32b88b0576276f02d7aaa3fd282e8617a3e6db8d39abb6212a283363bf1183"),
    "multilabel/POS.mat": ("graph/POS.mat", "b40977b48dec1d5016af0f6d5d2bce6f1c1037ccab948c2bbe324cea16754835"),
    "multilabel/blogcatalog.mat": ("graph/blogcatalog.mat", "d4f4fb89ce1ccd4b7e2a183386c000773cc9362cc61f1be5b246a6d9c259da8f"),
}


def dataset_files(name: str, *, features: bool = True) -> list[str]:
    """The files ``name`` needs, as paths inside the data folder (keys of :data:`FILES`).

    The Planetoid loader reads ``ally``, ``ty``, ``graph``, ``test.index`` and, with
    ``features``, ``allx`` and ``tx`` (``x``/``y`` are the first rows of those and are
    not needed). The paper's splits ship with the package (``caps2ne_np/data``).
    """
    key = str(name).lower()
    if key in PLANETOID_NAMES:
        parts = ("ally", "ty", "graph", "test.index") + (("allx", "tx") if features else ())
        return [f"planetoid/ind.{key}.{part}" for part in parts]
    if key in MAT_FILES:
        return [f"multilabel/{MAT_FILES[key]}"]
    if key == "cora-bundled":
        return []
    raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASET_NAMES)}")


def default_data_dir() -> str:
    """The benchmark data folder: ``$CAPS2NE_DATA``, else the user's cache folder.

    The cache folder is ``$XDG_CACHE_HOME/caps2ne_np``, else ``~/.cache/caps2ne_np``.
    It holds ``planetoid/`` and ``multilabel/`` as ``shared/data`` does; files missing
    from it are downloaded on first use (:func:`fetch`). The path is returned even when
    it does not exist yet.
    """
    env = os.environ.get("CAPS2NE_DATA")
    if env:
        return env
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "caps2ne_np")


def data_mirror() -> str | None:
    """Where missing files are copied from instead of GitHub, or None (download from :data:`UPSTREAM`).

    ``$CAPS2NE_DATA_MIRROR`` (a folder laid out as ``shared/data``, or a ``file://``,
    ``http://`` or ``https://`` URL of one); else, in a source checkout with a
    ``shared/data`` folder beside it (the development setup), that folder. A plain
    clone or an installed package has none and downloads from GitHub.
    """
    env = os.environ.get("CAPS2NE_DATA_MIRROR")
    if env:
        return env
    beside = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    if (beside / "planetoid").is_dir() or (beside / "multilabel").is_dir():
        return str(beside)
    return None


def _mirror_url(mirror: str, rel: str) -> str:
    if "://" in mirror:
        return mirror.rstrip("/") + "/" + rel
    return (Path(mirror).resolve() / rel).as_uri()


def _local_mirror_has(mirror: str, rel: str) -> bool:
    """True if a folder / file:// mirror holds ``rel``; an HTTP mirror is assumed to."""
    if mirror.startswith(("http://", "https://")):
        return True
    if mirror.startswith("file://"):
        from urllib.parse import unquote, urlparse

        mirror = unquote(urlparse(mirror).path)
    return (Path(mirror) / rel).is_file()


def available(name: str, data_dir=None, *, features: bool = True, network: bool = False) -> bool:
    """True if ``name`` can be loaded: its files are in ``data_dir`` or on a mirror.

    Without ``network`` nothing is downloaded and a missing file counts only when a
    folder (or ``file://``) mirror holds it; tests use this to skip cleanly.
    """
    base = Path(data_dir if data_dir is not None else default_data_dir())
    mirror = data_mirror()
    for rel in dataset_files(name, features=features):
        if (base / rel).is_file():
            continue
        if mirror is not None and _local_mirror_has(mirror, rel):
            continue
        if network and mirror is None:
            continue
        return False
    return True


def sha256_file(path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(name: str, data_dir=None, *, features: bool = True, timeout: float = 60.0) -> str:
    """Make sure the files of benchmark set ``name`` are in ``data_dir``; return ``data_dir``.

    Each missing file is copied from :func:`data_mirror` or downloaded from the authors'
    repository (:data:`UPSTREAM`), checked against the SHA-256 in :data:`FILES`, and
    stored as ``data_dir/<planetoid|multilabel>/<file>`` (written to a temporary name,
    then renamed, so an interrupted download leaves nothing half-written). Files
    already there are used as they are. Without network, :class:`InputError` says
    which file to put where.
    """
    base = Path(data_dir if data_dir is not None else default_data_dir())
    missing = [rel for rel in dataset_files(name, features=features) if not (base / rel).is_file()]
    for k, rel in enumerate(missing):
        more = [Path(r).name for r in missing[k + 1:]]
        hint = ""
        if more:
            hint += f" (then the same for {', '.join(more)})"
        if rel.endswith(("allx", ".tx")):
            hint += "; or load it without features (--featureless, features=False)"
        _download(rel, base / rel, timeout, hint)
    return str(base)


def _download(rel: str, dest: Path, timeout: float, hint: str = "") -> None:
    import urllib.error
    import urllib.request

    upstream, sha = FILES[rel]
    canonical = UPSTREAM + upstream
    mirror = data_mirror()
    url = _mirror_url(mirror, rel) if mirror is not None else canonical
    by_hand = f"download {canonical} (SHA-256 {sha}) and put it at {dest}"
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"{dest.parent}: cannot create the data folder ({err.strerror or err}); "
                         "pass a writable --data-dir or set CAPS2NE_DATA") from None
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    log.info("downloading %s to %s", url, dest)
    try:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as fh:
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                fh.write(block)
        if digest.hexdigest() != sha:
            raise InputError(f"{url}: SHA-256 {digest.hexdigest()} differs from the expected {sha} "
                             f"(corrupt or changed copy); {by_hand}")
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
        where = f"the mirror {mirror}" if mirror is not None else "GitHub"
        raise InputError(f"{rel}: cannot get it from {where} ({reason}); without network, "
                         f"{by_hand}{hint}") from None
    finally:
        tmp.unlink(missing_ok=True)


def _bundled(filename: str) -> str:
    return str(resources.files("caps2ne_np").joinpath("data").joinpath(filename))


def load_bundled_cora() -> tuple[str, str]:
    """Paths of the Cora edge list and label file shipped in ``caps2ne_np/data``.

    ``cora.edgelist`` holds one undirected edge ``u v`` per line (5,278 edges,
    nodes 0..2707, ``#`` header comments); ``cora.labels`` holds ``node class``
    lines (7 classes). See ``caps2ne_np/data/README.md`` for source and citation.
    """
    return _bundled("cora.edgelist"), _bundled("cora.labels")


def bundled_cora_splits() -> str:
    """Path of ``cora.splits.json``, the paper's 10 Cora splits shipped with the package."""
    return _bundled("cora.splits.json")


def paper_splits(name: str) -> str:
    """Path of ``<name>.splits.json``: the paper's 10 splits of cora, citeseer or pubmed.

    They ship with the package, byte-identical to ``shared/data/splits/<name>.json``
    (converted from the authors' ``data/<name>.10sampledtimes`` pickles), so no
    pickle of theirs is ever downloaded or read.
    """
    key = str(name).lower()
    if key not in PLANETOID_NAMES:
        raise InputError(f"no paper splits for {name!r}; they exist for {', '.join(PLANETOID_NAMES)}")
    return _bundled(f"{key}.splits.json")


def _subdir(data_dir, sub: str) -> Path:
    """``data_dir/sub`` if that directory exists (data_dir is the data root), else data_dir."""
    base = Path(data_dir if data_dir is not None else default_data_dir())
    if not base.is_dir():
        raise InputError(
            f"{base}: data directory not found; pass --data-dir (data_dir=) or set CAPS2NE_DATA "
            "to the folder holding planetoid/ and multilabel/, or use load_dataset, which downloads them"
        )
    return base / sub if (base / sub).is_dir() else base


def _read_lines(path, expected: str) -> list[str]:
    """The lines of a UTF-8 text file (``\n``, ``\r\n`` or ``\r`` endings), without the ends.

    InputError (path:line) for binary content (a NUL byte) or invalid UTF-8, and
    (path) for a missing or unreadable file; ``expected`` says what the file should hold.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; expected {expected}") from None
    except OSError as err:
        raise InputError(f"{path}: cannot be read ({err.strerror or err}); expected {expected}") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InputError(f"{path}:{line}: binary content (NUL byte); expected {expected}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(
            f"{path}:{line}: invalid UTF-8 (byte 0x{data[err.start]:02x}); expected {expected} as UTF-8 text"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# --------------------------------------------------------------------------- safe unpickling


class _PickledCSR:
    """Inert stand-in for the pickled ``scipy.sparse.csr.csr_matrix``: it only stores its state.

    A real ``csr_matrix`` would take the attribute names of the SciPy version that
    wrote the file; the stand-in keeps the arrays and :func:`_as_csr` builds a fresh,
    fully checked matrix from them.
    """

    def __setstate__(self, state):
        self.state = state


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler for Planetoid files that resolves only the globals those files use.

    Allowed: ``numpy.core.multiarray._reconstruct`` (mapped to ``numpy._core`` on
    NumPy 2), ``numpy.ndarray``, ``numpy.dtype``, ``scipy.sparse.csr.csr_matrix``
    (to an inert stand-in), ``collections.defaultdict``, ``__builtin__.list``. Any
    other global raises :class:`InputError` from ``find_class``, i.e. before the
    pickle can call it. Use with ``encoding='latin1'`` (Python 2 pickles).
    """

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"): _np_reconstruct,
        ("numpy._core.multiarray", "_reconstruct"): _np_reconstruct,
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("scipy.sparse.csr", "csr_matrix"): _PickledCSR,
        ("scipy.sparse._csr", "csr_matrix"): _PickledCSR,
        ("scipy.sparse", "csr_matrix"): _PickledCSR,
        ("collections", "defaultdict"): collections.defaultdict,
        ("__builtin__", "list"): list,
        ("builtins", "list"): list,
    }

    def __init__(self, file, path="<pickle>"):
        super().__init__(file, encoding="latin1")
        self.path = str(path)

    def find_class(self, module, name):
        try:
            return self.ALLOWED[(module, name)]
        except KeyError:
            raise InputError(
                f"{self.path}: refusing to unpickle global {module}.{name}; Planetoid files only "
                "hold NumPy arrays, SciPy CSR matrices and a defaultdict of lists - use the "
                "original ind.* files"
            ) from None


def _unpickle(path: Path):
    """Read one Planetoid pickle with :class:`RestrictedUnpickler`; InputError names the file."""
    try:
        with open(path, "rb") as fh:
            return RestrictedUnpickler(fh, path).load()
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; expected a Planetoid ind.* file here") from None
    except InputError:
        raise
    except Exception as err:  # truncated or corrupt pickles raise many types
        raise InputError(
            f"{path}: not a readable Planetoid pickle ({type(err).__name__}: {err}); "
            "replace it with the original file"
        ) from None


def _as_csr(obj, path: Path) -> sp.csr_matrix:
    """A fresh float32 CSR matrix from an unpickled ``_PickledCSR``, checked in full."""
    state = getattr(obj, "state", None)
    if not isinstance(obj, _PickledCSR) or not isinstance(state, dict):
        raise InputError(f"{path}: expected a pickled scipy.sparse CSR matrix, got {type(obj).__name__}")
    shape = state.get("_shape", state.get("shape"))
    try:
        mat = sp.csr_matrix((state["data"], state["indices"], state["indptr"]), shape=tuple(shape))
        mat.check_format(full_check=True)
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"{path}: malformed CSR matrix in pickle ({err}); replace the file") from None
    return mat.astype(np.float32)


def _as_dense(obj, path: Path) -> np.ndarray:
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise InputError(f"{path}: expected a 2-D NumPy array of one-hot labels, got {type(obj).__name__}")
    return obj


# --------------------------------------------------------------------------- Planetoid


def load_planetoid(name: str, data_dir=None, *, features: bool = True, splits=None) -> Dataset:
    """Cora, Citeseer or Pubmed from the Planetoid ``ind.<name>.*`` files (standard assembly).

    Node ``n`` is row ``n`` of ``vstack(allx, tx)`` after placing ``tx`` row ``k`` at node
    ``test.index[k]`` (README section 1, steps 1-2). Test ids absent from ``test.index``
    (15 for Citeseer, step 3) get an all-zero feature row and label -1. The class of a
    node is the argmax of its one-hot row.

    Parameters
    ----------
    name : {'cora', 'citeseer', 'pubmed'}
    data_dir : path, optional
        The data root holding ``planetoid/`` (and ``splits/``), or the Planetoid folder
        itself. Default: :func:`default_data_dir`.
    features : bool
        ``False`` skips ``allx``/``tx`` and returns ``features=None`` (a featureless
        graph). Needed for Pubmed when ``ind.pubmed.allx`` is missing.
    splits : path, False or None
        JSON splits to attach. ``None``: ``<planetoid dir>/../splits/<name>.json`` if it
        exists, else the paper's splits shipped with the package (:func:`paper_splits`);
        ``False``: none.

    Returns
    -------
    Dataset
        features: CSR float32, row-unnormalised (binary for Cora/Citeseer, TF-IDF for
        Pubmed); labels: int64 (N,); adj: float32 CSR with the ``.graph`` lists' entries
        as ones (duplicates collapsed, self loops kept).
    """
    name = str(name).lower()
    if name not in PLANETOID_NAMES:
        raise InputError(f"unknown Planetoid dataset {name!r}; choose one of {', '.join(PLANETOID_NAMES)}")
    pdir = _subdir(data_dir, "planetoid")

    def path(part):
        return pdir / f"ind.{name}.{part}"

    parts = ("ally", "ty", "graph") + (("allx", "tx") if features else ())
    for part in parts + ("test.index",):
        if not path(part).is_file():
            hint = (
                "; pass features=False to load it as a featureless graph, or add the file from "
                "the Planetoid distribution"
                if part in ("allx", "tx")
                else "; copy the complete Planetoid ind.* files into that folder"
            )
            raise InputError(f"{path(part)}: file not found{hint}")

    test_idx = _read_test_index(path("test.index"))
    ally = _as_dense(_unpickle(path("ally")), path("ally"))
    ty = _as_dense(_unpickle(path("ty")), path("ty"))
    n_known = ally.shape[0]
    if ty.shape[1] != ally.shape[1]:
        raise InputError(f"{path('ty')}: {ty.shape[1]} classes but ally has {ally.shape[1]}; use matching files")
    if ty.shape[0] != test_idx.size:
        raise InputError(
            f"{path('ty')}: {ty.shape[0]} rows but test.index lists {test_idx.size} nodes; use matching files"
        )
    if test_idx.min() < n_known or np.unique(test_idx).size != test_idx.size:
        raise InputError(
            f"{path('test.index')}: test ids must be unique and >= {n_known} (the number of ally rows); "
            "use the file matching ind.*.ally"
        )
    n = int(test_idx.max()) + 1

    # source[n] = row of the stacked matrix [allx; tx; one zero row] that becomes node n
    source = np.full(n, n_known + test_idx.size, dtype=np.int64)
    source[:n_known] = np.arange(n_known, dtype=np.int64)
    source[test_idx] = n_known + np.arange(test_idx.size, dtype=np.int64)

    onehot = np.vstack([ally, ty, np.zeros((1, ally.shape[1]), dtype=ally.dtype)])[source]
    counts = np.count_nonzero(onehot, axis=1)
    if counts.max() > 1:
        bad = int(np.argmax(counts > 1))
        raise InputError(f"{pdir}/ind.{name}.ally|ty: label rows must be one-hot, node {bad} has several classes")
    labels = np.where(counts == 1, np.argmax(onehot, axis=1), -1).astype(np.int64)

    feats = None
    if features:
        allx = _as_csr(_unpickle(path("allx")), path("allx"))
        tx = _as_csr(_unpickle(path("tx")), path("tx"))
        if allx.shape[0] != n_known or tx.shape[0] != test_idx.size or allx.shape[1] != tx.shape[1]:
            raise InputError(
                f"{path('allx')}: shapes allx {allx.shape}, tx {tx.shape} do not match ally ({n_known} rows) "
                f"and test.index ({test_idx.size} ids); use files from one Planetoid download"
            )
        stacked = sp.vstack([allx, tx, sp.csr_matrix((1, allx.shape[1]), dtype=np.float32)], format="csr")
        feats = stacked[source].tocsr()
        feats.sort_indices()

    graph = _unpickle(path("graph"))
    adj = _graph_dict_to_csr(graph, n, path("graph"))

    if splits is None:
        auto = pdir.parent / "splits" / f"{name}.json"
        splits = auto if auto.is_file() else paper_splits(name)
    split_list = load_splits(splits, n) if splits is not False else None
    if split_list is not None:
        _check_splits_labelled(split_list, labels, splits)

    return Dataset(
        name=name,
        adj=adj,
        features=feats,
        labels=labels,
        multilabel=False,
        node_ids=[str(i) for i in range(n)],
        splits=split_list,
    )


def _read_test_index(path: Path) -> np.ndarray:
    ids = []
    for lineno, line in enumerate(_read_lines(path, "one integer node id per line"), 1):
        text = line.strip()
        if not text:
            continue
        try:
            ids.append(int(text))
        except ValueError:
            raise InputError(f"{path}:{lineno}: expected one integer node id per line, got {text!r}") from None
    if not ids:
        raise InputError(f"{path}: no node ids; use the original Planetoid test.index file")
    return np.asarray(ids, dtype=np.int64)


def _graph_dict_to_csr(graph, n: int, path: Path) -> sp.csr_matrix:
    """Adjacency lists {u: [v, ...]} -> (n, n) float32 CSR of ones (duplicates collapsed)."""
    if not isinstance(graph, dict):
        raise InputError(f"{path}: expected a dict of adjacency lists, got {type(graph).__name__}")
    try:
        keys = np.fromiter(graph.keys(), dtype=np.int64, count=len(graph))
        degrees = np.fromiter((len(v) for v in graph.values()), dtype=np.int64, count=len(graph))
        cols = np.fromiter(itertools.chain.from_iterable(graph.values()), dtype=np.int64, count=int(degrees.sum()))
    except (TypeError, ValueError):
        raise InputError(f"{path}: adjacency lists must map integer node ids to lists of integer ids") from None
    rows = np.repeat(keys, degrees)
    bad = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= n)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{path}: edge {rows[i]} -> {cols[i]} names a node outside 0..{n - 1} (the nodes of the "
            "feature/label files); use files from one Planetoid download"
        )
    adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.sort_indices()
    adj.data[:] = 1.0
    return adj


def _check_splits_labelled(splits, labels, path):
    for s, split in enumerate(splits):
        for part in ("train", "val", "test"):
            unlabelled = split[part][labels[split[part]] < 0]
            if unlabelled.size:
                raise InputError(
                    f"{path}: split {s} '{part}' contains unlabelled node {int(unlabelled[0])}; "
                    "use splits drawn from labelled nodes only"
                )


# --------------------------------------------------------------------------- .mat (DeepWalk)


def load_mat(path_or_name, data_dir=None) -> Dataset:
    """A DeepWalk/node2vec ``.mat`` graph: ``network`` (N x N, weights kept), ``group`` (N x L).

    ``path_or_name`` is a file path or one of ``'ppi'``, ``'pos'``, ``'blogcatalog'``,
    which map to ``<data_dir>/multilabel/{PPI,POS,blogcatalog}.mat``. Labels are a
    0/1 int64 CSR indicator (multi-label); there are no features and no splits.
    """
    key = str(path_or_name).lower()
    if key in MAT_FILES:
        path = _subdir(data_dir, "multilabel") / MAT_FILES[key]
        name = key
    else:
        path = Path(path_or_name)
        name = path.stem.lower()
    try:
        mat = scipy.io.loadmat(str(path))
    except FileNotFoundError:
        raise InputError(f"{path}: file not found; expected a DeepWalk .mat file with 'network' and 'group'") from None
    except Exception as err:
        raise InputError(
            f"{path}: not a readable MATLAB 5 .mat file ({type(err).__name__}: {err}); "
            "save it with scipy.io.savemat or MATLAB -v7"
        ) from None
    for var in ("network", "group"):
        if var not in mat:
            raise InputError(f"{path}: no variable {var!r}; expected 'network' (N x N) and 'group' (N x L)")
    adj = sp.csr_matrix(mat["network"], dtype=np.float32)
    adj.sum_duplicates()
    adj.sort_indices()
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise InputError(f"{path}: 'network' has shape {adj.shape}; expected a square N x N adjacency matrix")
    group = sp.csr_matrix(mat["group"])
    if group.shape[0] != n:
        raise InputError(f"{path}: 'group' has {group.shape[0]} rows but 'network' has {n} nodes; expected N x L")
    group.eliminate_zeros()
    labels = sp.csr_matrix((np.ones(group.nnz, dtype=np.int64), group.indices, group.indptr), shape=group.shape)
    labels.sort_indices()
    return Dataset(
        name=name,
        adj=adj,
        features=None,
        labels=labels,
        multilabel=True,
        node_ids=[str(i) for i in range(n)],
        splits=None,
    )


# --------------------------------------------------------------------------- user files


def load_splits(path, n_nodes: int, *, node_ids=None) -> list[dict]:
    """Read evaluation splits: a JSON list of ``{"train": [...], "val": [...], "test": [...]}``.

    Entries are node indices ``0 .. n_nodes-1``; with ``node_ids`` given they are node
    IDs instead (ints are compared as strings). Each part must be free of repeats and
    the three parts pairwise disjoint. Returns int64 index arrays, in file order.
    """
    path = str(path)
    expected = '[{"train": [...], "val": [...], "test": [...]}, ...]'
    text = "\n".join(_read_lines(path, "a JSON list of train/val/test splits"))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{path}: malformed JSON at line {err.lineno}, column {err.colno} ({err.msg}); expected {expected}"
        ) from None
    except (ValueError, RecursionError) as err:  # an integer of > 4300 digits; nesting too deep
        raise InputError(f"{path}: unreadable JSON ({type(err).__name__}: {err}); expected {expected}") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise InputError(f"{path}: expected a non-empty JSON list of {{\"train\", \"val\", \"test\"}} objects")
    index = {nid: i for i, nid in enumerate(node_ids)} if node_ids is not None else None
    limit = len(node_ids) if node_ids is not None else int(n_nodes)
    out = []
    for s, split in enumerate(data):
        if not isinstance(split, dict) or set(split) != {"train", "val", "test"}:
            got = sorted(split) if isinstance(split, dict) else type(split).__name__
            raise InputError(f"{path}: split {s}: expected exactly the keys train, val, test; got {got}")
        parts = {}
        for part in ("train", "val", "test"):
            parts[part] = _split_part(split[part], path, s, part, index, limit)
        for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
            both = np.intersect1d(parts[a], parts[b])
            if both.size:
                shown = node_ids[both[0]] if node_ids is not None else int(both[0])
                raise InputError(
                    f"{path}: split {s}: '{a}' and '{b}' share {both.size} node(s), e.g. {shown}; "
                    "make the parts disjoint"
                )
        out.append(parts)
    return out


def _split_part(values, path, s, part, index, limit):
    if not isinstance(values, list):
        raise InputError(f"{path}: split {s} '{part}': expected a list of node ids, got {type(values).__name__}")
    ids = np.empty(len(values), dtype=np.int64)
    for j, v in enumerate(values):
        if index is not None and isinstance(v, (str, int)) and not isinstance(v, bool):
            i = index.get(str(v), -1)
            if i < 0:
                raise InputError(f"{path}: split {s} '{part}': unknown node id {v!r}; use ids of the graph")
        elif isinstance(v, int) and not isinstance(v, bool):
            i = v
            if not 0 <= i < limit:
                raise InputError(
                    f"{path}: split {s} '{part}': node {v} out of range 0..{limit - 1}; "
                    "use 0-based node indices of the graph"
                )
        else:
            raise InputError(f"{path}: split {s} '{part}': expected integer node indices, got {v!r}")
        ids[j] = i
    if np.unique(ids).size != ids.size:
        seen = set()
        for v, i in zip(values, ids.tolist()):
            if i in seen:
                raise InputError(f"{path}: split {s} '{part}': node {v!r} listed twice; remove repeats")
            seen.add(i)
    return ids


def _read_id_file(path) -> list[str]:
    ids = []
    for lineno, line in enumerate(_read_lines(path, "one node id per feature row"), 1):
        text = line.strip()
        if not text or len(text.split()) != 1:
            raise InputError(f"{path}:{lineno}: expected one node id per line (no spaces, no blank lines)")
        ids.append(text)
    seen = {}
    for lineno, nid in enumerate(ids, 1):
        if nid in seen:
            raise InputError(f"{path}:{lineno}: node id {nid!r} repeats line {seen[nid]}; list each node once")
        seen[nid] = lineno
    return ids


def load_features(path, node_ids_path=None, node_ids=None):
    """Node features from ``.npz`` (``scipy.sparse.save_npz``, -> CSR) or ``.npy`` (-> ndarray), float32.

    Row ``r`` belongs to the node on line ``r`` of ``node_ids_path`` (one id per line);
    without it, row ``i`` is node ``i``. With ``node_ids`` (the graph's IDs, in index
    order) the rows are reordered so that row ``i`` is ``node_ids[i]``; every node
    needs exactly one row and every row must name a node of the graph.
    """
    path = str(path)
    if not os.path.isfile(path):
        raise InputError(f"{path}: file not found; expected node features as .npz (scipy.sparse) or .npy")
    if path.endswith(".npz"):
        try:
            x = read_sparse_npz(path).tocsr()
        except Exception as err:
            raise InputError(
                f"{path}: not a scipy.sparse.save_npz file ({err}); save sparse features with "
                "scipy.sparse.save_npz or dense ones with numpy.save (.npy)"
            ) from None
    elif path.endswith(".npy"):
        check_npy_header(path)
        try:
            x = np.load(path, allow_pickle=False)
        except Exception as err:
            raise InputError(f"{path}: not a readable .npy array ({err}); save with numpy.save") from None
    else:
        raise InputError(f"{path}: unknown feature format; use .npz (scipy.sparse.save_npz) or .npy (numpy.save)")
    if x.ndim != 2 or not (x.dtype.kind in "biuf"):
        raise InputError(f"{path}: expected a 2-D real (nodes x features) matrix, got shape {x.shape} dtype {x.dtype}")
    with np.errstate(over="ignore"):  # values beyond float32 become inf and are reported below
        x = x.astype(np.float32)
    values = x.data if sp.issparse(x) else x
    if not np.all(np.isfinite(values)):
        raise InputError(f"{path}: features contain NaN or inf (or values beyond float32); clean or rescale them")

    if node_ids_path is not None:
        row_ids = _read_id_file(node_ids_path)
        if len(row_ids) != x.shape[0]:
            raise InputError(
                f"{node_ids_path}: {len(row_ids)} node ids for {x.shape[0]} feature rows in {path}; "
                "list one id per feature row, in row order"
            )
    else:
        row_ids = None
    if node_ids is None:
        return x
    node_ids = [str(i) for i in node_ids]
    if row_ids is None:
        if x.shape[0] != len(node_ids):
            raise InputError(
                f"{path}: {x.shape[0]} feature rows for {len(node_ids)} nodes; give one row per node "
                "in node order, or a node-id file naming each row"
            )
        return x
    where = {nid: r for r, nid in enumerate(row_ids)}
    known = set(node_ids)
    unknown = [nid for nid in row_ids if nid not in known]
    if unknown:
        raise InputError(
            f"{node_ids_path}: node {unknown[0]!r} is not in the graph ({len(unknown)} such ids); remove those rows"
        )
    missing = [nid for nid in node_ids if nid not in where]
    if missing:
        raise InputError(
            f"{node_ids_path}: no feature row for node {missing[0]!r} ({len(missing)} nodes missing); add their rows"
        )
    order = np.fromiter((where[nid] for nid in node_ids), dtype=np.int64, count=len(node_ids))
    return x[order].tocsr() if sp.issparse(x) else np.ascontiguousarray(x[order])


def load_labels(path, node_ids, *, return_classes: bool = False):
    """Node labels from lines ``node label`` (``#`` comments and blank lines skipped).

    A node on several lines with different labels makes the set multi-label. Classes
    are numbered in sorted order (numerically when every label is an integer).

    Returns
    -------
    labels : int64 (N,) with -1 for unlabelled nodes, or int64 (N, L) CSR 0/1 indicator
    multilabel : bool
    classes : list of str, only with ``return_classes=True`` (class index -> label)
    """
    path = str(path)
    index = {str(nid): i for i, nid in enumerate(node_ids)}
    pairs = set()
    for lineno, line in enumerate(_read_lines(path, "'node label' lines"), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.split()
        if len(fields) != 2:
            raise InputError(f"{path}:{lineno}: expected 'node label' (two fields), got {len(fields)} fields")
        node = index.get(fields[0], -1)
        if node < 0:
            raise InputError(f"{path}:{lineno}: node {fields[0]!r} is not in the graph; remove the line or fix the id")
        pairs.add((node, fields[1]))
    if not pairs:
        raise InputError(f"{path}: no labels found; expected 'node label' lines")
    names = {lab for _, lab in pairs}
    try:
        classes = sorted(names, key=lambda s: (int(s), s))
    except ValueError:
        classes = sorted(names)
    cls = {c: k for k, c in enumerate(classes)}
    nodes = np.fromiter((p[0] for p in pairs), dtype=np.int64, count=len(pairs))
    ks = np.fromiter((cls[p[1]] for p in pairs), dtype=np.int64, count=len(pairs))
    n = len(index)
    multilabel = np.unique(nodes).size != nodes.size
    if multilabel:
        labels = sp.csr_matrix((np.ones(nodes.size, dtype=np.int64), (nodes, ks)), shape=(n, len(classes)))
        labels.sort_indices()
    else:
        labels = np.full(n, -1, dtype=np.int64)
        labels[nodes] = ks
    return (labels, multilabel, classes) if return_classes else (labels, multilabel)


# --------------------------------------------------------------------------- dispatch


def _read_edge_pairs(path) -> np.ndarray:
    """Integer ``u v`` lines of the bundled edge list -> (E, 2) int64 (``#`` lines skipped)."""
    pairs = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            fields = text.split()
            try:
                u, v = int(fields[0]), int(fields[1])
            except (ValueError, IndexError):
                raise InputError(f"{path}:{lineno}: expected 'u v' with integer node ids") from None
            pairs.append((u, v))
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)


def _load_bundled_cora() -> Dataset:
    edges_path, labels_path = load_bundled_cora()
    edges = _read_edge_pairs(edges_path)
    n = int(edges.max()) + 1
    rows = np.concatenate([edges[:, 0], edges[:, 1]])
    cols = np.concatenate([edges[:, 1], edges[:, 0]])
    adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.sort_indices()
    adj.data[:] = 1.0
    node_ids = [str(i) for i in range(n)]
    labels, multilabel = load_labels(labels_path, node_ids)
    return Dataset(
        name="cora-bundled",
        adj=adj,
        features=None,
        labels=labels,
        multilabel=multilabel,
        node_ids=node_ids,
        splits=load_splits(bundled_cora_splits(), n),
    )


def load_dataset(name: str, data_dir=None, *, download: bool = True, **kwargs) -> Dataset:
    """Load a benchmark set by name: cora, citeseer, pubmed, ppi, pos, blogcatalog, cora-bundled.

    ``data_dir`` defaults to :func:`default_data_dir` (``$CAPS2NE_DATA``, else the user's
    cache folder). With ``download`` (the default) files missing there are fetched
    first (:func:`fetch`: a mirror or the authors' repository, SHA-256 checked).
    ``kwargs`` go to :func:`load_planetoid` (``features=False``, ``splits=``) for the
    Planetoid sets. ``cora-bundled`` needs no data directory.
    """
    key = str(name).lower()
    if download and key in PLANETOID_NAMES + tuple(MAT_FILES):
        data_dir = fetch(key, data_dir, features=kwargs.get("features", True))
    if key in PLANETOID_NAMES:
        return load_planetoid(key, data_dir, **kwargs)
    if kwargs:
        raise TypeError(f"load_dataset({name!r}) takes no options {sorted(kwargs)}")
    if key in MAT_FILES:
        return load_mat(key, data_dir)
    if key == "cora-bundled":
        return _load_bundled_cora()
    raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(DATASET_NAMES)}")
