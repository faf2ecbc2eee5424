"""The benchmark datasets of the paper: one registry, downloads, loaders.

Every loader returns plain NumPy / scipy.sparse objects in a :class:`Dataset`: row
``i`` of every matrix is node ``i`` and ``node_ids[i]`` is its name
(``csr.from_scipy`` turns ``Dataset.adj`` into the training graph).  :data:`NAMES`
lists the sets, in this order:

==============  ======================================================  ================
name            source (``shared/data/README.md``)                      labels
==============  ======================================================  ================
cora            Planetoid ``ind.cora.*`` + the paper's splits            7 classes
citeseer        Planetoid ``ind.citeseer.*`` (15 unlabelled nodes)       6 classes
pubmed          Planetoid ``ind.pubmed.*`` (``allx`` may be missing)     3 classes
ppi, pos,       DeepWalk ``.mat`` files (``network``, ``group``)          multi-label
blogcatalog
musae-*         MUSAE ``musae/<name>/{edges,target}.csv``                 2 classes
wiki, actor,    ``more/``: OpenNE's Wiki, Geom-GCN's Actor, struc2vec's   17, 5, 4, 4
*-airports      Brazil and Europe airports (``graphs.more_graphs``)      classes
cora-bundled    the Cora graph, labels and splits shipped in             7 classes
                ``caps2ne_np/data`` (no features), read by ``graph.read_edgelist``
==============  ======================================================  ================

:func:`load_dataset` fetches missing files into :func:`default_data_dir` (the user's
cache folder unless ``$CAPS2NE_DATA`` says otherwise) from the authors' repository at
a fixed commit, checking the SHA-256 held in :data:`FILES`; ``$CAPS2NE_DATA_MIRROR``
points it at a local copy instead (tests, CI, machines without network).  The
Planetoid pickles are read by :mod:`caps2ne_np.graphs.planetoid` (restricted unpickling), a
user's own features, labels and splits by :mod:`caps2ne_np.graphs.nodefiles` (imported
from there).  Importing this module is light (no scipy, no pickle): the CLI reads
:data:`NAMES` at start-up.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, InputWarning
from .downloads import (
    FETCH_DEADLINE,
    FILES,
    data_mirror,
    default_data_dir,
    download,
    matches_registry,
    mirror_has,
    refetch_command,
)
from .more_graphs import MORE_FILES, read_more
from .nodefiles import load_labels, load_splits

if TYPE_CHECKING:
    import scipy.sparse as sp

log = logging.getLogger(__name__)

__all__ = [
    "NAMES",
    "Dataset",
    "PLANETOID_NAMES",
    "MAT_FILES",
    "MUSAE_NAMES",
    "load_more",
    "available",
    "dataset_files",
    "fetch",
    "check_files",
    "paper_splits",
    "load_planetoid",
    "load_mat",
    "load_dataset",
    "load_bundled_cora",
    "bundled_cora_splits",
]

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
MAT_FILES = {"ppi": "PPI.mat", "pos": "POS.mat", "blogcatalog": "blogcatalog.mat"}
MUSAE_NAMES = {"musae-wikipedia": "wikipedia", "musae-github": "github"}
"""The MUSAE graphs: name -> folder under ``musae/`` (``edges.csv``, ``target.csv``)."""
NAMES = (
    PLANETOID_NAMES + tuple(MAT_FILES) + tuple(MUSAE_NAMES) + tuple(MORE_FILES) + ("cora-bundled",)
)
"""Every name :func:`load_dataset` takes, in the order the CLI lists them."""


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
        ``'0' .. 'N-1'`` for the benchmark sets; for the graphs of ``more/``, the ids of their
        label file in node order (``more_graphs.node_order``: also ``'0' .. 'N-1'`` there).
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
    if key in MUSAE_NAMES:
        return [f"musae/{MUSAE_NAMES[key]}/{part}.csv" for part in ("edges", "target")]
    if key in MORE_FILES:
        return list(MORE_FILES[key])
    if key == "cora-bundled":
        return []
    raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(NAMES)}")


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
        if mirror is not None and mirror_has(mirror, rel):
            continue
        if network and mirror is None:
            continue
        return False
    return True


def check_files(name: str, data_dir=None, *, features: bool = True) -> list[str]:
    """The files of ``name`` that are missing from ``data_dir`` or differ from the registry
    (size or SHA-256: modified, truncated, another version), as keys of :data:`FILES`.

    InputError when a directory stands where a file should be."""
    base = Path(data_dir if data_dir is not None else default_data_dir())
    todo = []
    for rel in dataset_files(name, features=features):
        path = base / rel
        if path.is_dir():
            raise InputError(
                f"{path}: a directory where the file {path.name} should be; remove or rename it, "
                f"then run '{refetch_command(name, base)}'"
            )
        if not path.is_file():
            todo.append(rel)
        elif not matches_registry(path, rel):
            log.warning(
                "%s: differs from the registry's copy (size or SHA-256: modified or truncated)",
                path,
            )
            todo.append(rel)
    return todo


def fetch(
    name: str,
    data_dir=None,
    *,
    features: bool = True,
    timeout: float = 60.0,
    deadline: float = FETCH_DEADLINE,
) -> str:
    """Make sure the files of benchmark set ``name`` are in ``data_dir``; return ``data_dir``.

    Each file that is missing, or differs from the registry (size and SHA-256 in
    :data:`SIZES` / :data:`FILES`: a modified or truncated copy), is copied from
    :func:`data_mirror` or downloaded from its upstream repository (:data:`FILES`),
    checked against the SHA-256, and stored as ``data_dir/<its path in FILES>``
    (``planetoid/``, ``multilabel/``, ``musae/`` or ``more/``; written to a temporary
    name, then renamed, so an interrupted download leaves nothing half-written).
    ``timeout`` bounds each read, ``deadline`` (seconds) the whole fetch.  Without
    network, :class:`InputError` says which file to put where.
    """
    import time

    base = Path(data_dir if data_dir is not None else default_data_dir())
    missing = check_files(name, base, features=features)
    stop = time.monotonic() + deadline
    for k, rel in enumerate(missing):
        more = [Path(r).name for r in missing[k + 1 :]]
        hint = ""
        if more:
            hint += f" (then the same for {', '.join(more)})"
        if rel.endswith(("allx", ".tx")):
            hint += "; or load it without features (--featureless, features=False)"
        download(rel, base / rel, timeout, hint, deadline=stop)
    return str(base)


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
        raise InputError(
            f"no paper splits for {name!r}; they exist for {', '.join(PLANETOID_NAMES)}"
        )
    return _bundled(f"{key}.splits.json")


def _subdir(data_dir, sub: str) -> Path:
    """``data_dir/sub`` if that directory exists (data_dir is the data root), else data_dir."""
    base = Path(data_dir if data_dir is not None else default_data_dir())
    if not base.is_dir():
        raise InputError(
            f"{base}: data directory not found; pass --data-dir (data_dir=) or set CAPS2NE_DATA "
            "to the folder holding planetoid/ and multilabel/, or use load_dataset, which "
            "downloads them"
        )
    return base / sub if (base / sub).is_dir() else base


def _root(folder: Path, sub: str) -> Path:
    """The data root of ``folder`` (its parent when it is the ``sub`` folder)."""
    return folder.parent if folder.name == sub else folder


def _refetch_hint(err: InputError, name: str, folder: Path, rels) -> InputError:
    """``err``, plus how to fetch the originals again when a file named as a registry file
    in ``folder`` differs from it (a damaged download, not the user's own file)."""
    for rel in rels:
        path = folder / Path(rel).name
        if path.is_file() and not matches_registry(path, rel):
            cmd = refetch_command(name, _root(folder, rel.split("/")[0]))
            return InputError(
                f"{err}; {path.name} differs from the original (modified or truncated): "
                f"fetch it again with '{cmd}'"
            )
    return err


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
    from . import planetoid

    name = str(name).lower()
    if name not in PLANETOID_NAMES:
        raise InputError(
            f"unknown Planetoid dataset {name!r}; choose one of {', '.join(PLANETOID_NAMES)}"
        )
    pdir = _subdir(data_dir, "planetoid")
    try:
        adj, feats, labels, n = planetoid.read(name, pdir, features)
    except InputError as err:
        raise _refetch_hint(err, name, pdir, dataset_files(name, features=features)) from None
    if splits is None:
        auto = pdir.parent / "splits" / f"{name}.json"
        splits = auto if auto.is_file() else paper_splits(name)
    split_list = load_splits(splits, n) if splits is not False else None
    for s, split in enumerate(split_list or []):
        for part in ("train", "val", "test"):
            unlabelled = split[part][labels[split[part]] < 0]
            if unlabelled.size:
                raise InputError(
                    f"{splits}: split {s} '{part}' contains unlabelled node "
                    f"{int(unlabelled[0])}; use splits drawn from labelled nodes only"
                )
    return Dataset(name, adj, feats, labels, False, [str(i) for i in range(n)], split_list)


# --------------------------------------------------------------------------- .mat (DeepWalk)


def load_mat(path_or_name, data_dir=None) -> Dataset:
    """A DeepWalk/node2vec ``.mat`` graph: ``network`` (N x N, weights kept), ``group`` (N x L).

    ``path_or_name`` is a file path or one of ``'ppi'``, ``'pos'``, ``'blogcatalog'``,
    which map to ``<data_dir>/multilabel/{PPI,POS,blogcatalog}.mat``. Labels are a
    0/1 int64 CSR indicator (multi-label); there are no features and no splits.
    """
    import scipy.io
    import scipy.sparse as sp

    key = str(path_or_name).lower()
    if key in MAT_FILES:
        path = _subdir(data_dir, "multilabel") / MAT_FILES[key]
        name = key
    else:
        path = Path(path_or_name)
        name = path.stem.lower()
    rel = f"multilabel/{path.name}"
    registry = rel in FILES and path.is_file() and not matches_registry(path, rel)
    fix = (
        f"it differs from the original {path.name}: fetch it again with "
        f"'{refetch_command(name, _root(path.parent, 'multilabel'))}'"
        if registry
        else "save it with scipy.io.savemat or MATLAB -v7"
    )
    try:
        mat = scipy.io.loadmat(str(path))
    except FileNotFoundError:
        raise InputError(
            f"{path}: file not found; expected a DeepWalk .mat file with 'network' and 'group'"
        ) from None
    except Exception as err:
        raise InputError(
            f"{path}: not a readable MATLAB 5 .mat file ({type(err).__name__}: "
            f"{' '.join(str(err).split())}); {fix}"
        ) from None
    for var in ("network", "group"):
        if var not in mat:
            raise InputError(
                f"{path}: no variable {var!r}; expected 'network' (N x N) and 'group' (N x L)"
            )
    adj = sp.csr_matrix(mat["network"], dtype=np.float32)
    adj.sum_duplicates()
    adj.sort_indices()
    n = adj.shape[0]
    if adj.shape != (n, n):
        raise InputError(
            f"{path}: 'network' has shape {adj.shape}; expected a square N x N adjacency matrix"
        )
    group = sp.csr_matrix(mat["group"])
    if group.shape[0] != n:
        raise InputError(
            f"{path}: 'group' has {group.shape[0]} rows but 'network' has {n} nodes; expected N x L"
        )
    group.eliminate_zeros()
    labels = sp.csr_matrix(
        (np.ones(group.nnz, dtype=np.int64), group.indices, group.indptr), shape=group.shape
    )
    labels.sort_indices()
    return Dataset(name, adj, None, labels, True, [str(i) for i in range(n)])


# --------------------------------------------------------------------------- MUSAE (CSV)


def _read_csv_ints(path: Path, header: str, what: str) -> np.ndarray:
    """The (m, 2) int64 rows of a two-column CSV file whose first line is ``header``."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = fh.readline().strip()
            if first != header:
                raise InputError(f"{path}: first line {first[:40]!r}; expected {header!r} ({what})")
            rows = np.loadtxt(fh, delimiter=",", dtype=np.int64, ndmin=2)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found ({what})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not a CSV of two integer columns ({what}): {err}") from None
    if rows.shape[1] != 2 or (rows.size and rows.min() < 0):
        raise InputError(f"{path}: expected two non-negative integer columns ({what})")
    return rows


def load_musae(name: str, data_dir=None) -> Dataset:
    """A MUSAE graph (``musae-wikipedia``, ``musae-github``) from ``musae/<name>/``:
    ``edges.csv`` (``id_1,id_2``, one undirected edge a line, ids 0..N-1) and
    ``target.csv`` (``id,target``, one class a node).  The collection's node features
    are not read: the graph is structure only.  No splits (the panel draws stratified
    ones); labels int64 (N,)."""
    import scipy.sparse as sp

    key = str(name).lower()
    if key not in MUSAE_NAMES:
        raise InputError(f"unknown MUSAE graph {name!r}; choose one of {', '.join(MUSAE_NAMES)}")
    folder = _subdir(data_dir, "musae") / MUSAE_NAMES[key]
    edges = _read_csv_ints(folder / "edges.csv", "id_1,id_2", "the edges")
    target = _read_csv_ints(folder / "target.csv", "id,target", "a class per node")
    n = int(target.shape[0])
    if not np.array_equal(np.sort(target[:, 0]), np.arange(n)):
        raise InputError(f"{folder / 'target.csv'}: expected one line for each node 0..{n - 1}")
    if edges.size and edges.max() >= n:
        raise InputError(
            f"{folder / 'edges.csv'}: node {int(edges.max())} has no class in target.csv"
        )
    labels = np.empty(n, dtype=np.int64)
    labels[target[:, 0]] = target[:, 1]
    keep = edges[:, 0] != edges[:, 1]  # no self loops in these files; drop any
    u, v = edges[keep, 0], edges[keep, 1]
    adj = sp.csr_matrix(
        (np.ones(2 * u.size, dtype=np.float32), (np.r_[u, v], np.r_[v, u])), shape=(n, n)
    )
    adj.sum_duplicates()
    adj.data[:] = 1.0  # an edge listed both ways is one edge
    adj.sort_indices()
    return Dataset(key, adj, None, labels, False, [str(i) for i in range(n)])


# --------------------------------------------------------------------------- dispatch


def _load_bundled_cora() -> Dataset:
    """The bundled Cora read by ``graph.read_edgelist``; node ``i`` is the id ``i``."""
    import scipy.sparse as sp

    from .graph import read_edgelist

    edges_path, labels_path = load_bundled_cora()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        g = read_edgelist(edges_path, keep_self_loops=True)
    ids = np.array(g.node_ids, dtype=np.int64)  # index in the Graph -> Cora id
    n = int(ids.max()) + 1
    rows = np.repeat(ids, g.degree())
    adj = sp.csr_matrix(
        (np.ones(rows.size, dtype=np.float32), (rows, ids[g.indices])), shape=(n, n)
    )
    adj.sort_indices()
    node_ids = [str(i) for i in range(n)]
    labels, multilabel = load_labels(labels_path, node_ids)
    return Dataset(
        "cora-bundled",
        adj,
        None,
        labels,
        multilabel,
        node_ids,
        load_splits(bundled_cora_splits(), n),
    )


def load_more(name: str, data_dir=None) -> Dataset:
    """A graph of ``more/`` (``wiki``, ``actor``, ``brazil-airports``, ``europe-airports``)
    as :func:`caps2ne_np.graphs.more_graphs.read_more` reads it: no features, no splits.
    :func:`load_dataset` checks the files' SHA-256 (and fetches them) first; this reads
    what is there."""
    adj, labels, ids = read_more(name, data_dir)
    return Dataset(str(name).lower(), adj, None, labels, False, ids)


def load_dataset(name: str, data_dir=None, *, download: bool = True, **kwargs) -> Dataset:
    """Load a benchmark set by name: cora, citeseer, pubmed, ppi, pos, blogcatalog,
    musae-wikipedia, musae-github, wiki, actor, brazil-airports, europe-airports, cora-bundled.

    ``data_dir`` defaults to :func:`default_data_dir` (``$CAPS2NE_DATA``, else the user's
    cache folder). Every file is checked against the registry's size and SHA-256
    first (once per process and file version); with ``download`` (the default) files
    missing there or differing are fetched (:func:`fetch`: a mirror or the authors'
    repository), without it a differing file is an InputError that says how to
    fetch it again.
    ``kwargs`` go to :func:`load_planetoid` (``features=False``, ``splits=``) for the
    Planetoid sets. ``cora-bundled`` needs no data directory.
    """
    key = str(name).lower()
    if key in PLANETOID_NAMES + tuple(MAT_FILES) + tuple(MUSAE_NAMES) + tuple(MORE_FILES):
        if download:
            data_dir = fetch(key, data_dir, features=kwargs.get("features", True))
        else:
            base = Path(data_dir if data_dir is not None else default_data_dir())
            bad = [
                rel
                for rel in check_files(key, base, features=kwargs.get("features", True))
                if (base / rel).is_file()
            ]
            if bad:
                raise InputError(
                    f"{base / bad[0]}: differs from the original file (size or SHA-256: modified "
                    f"or truncated); fetch it again with '{refetch_command(key, base)}'"
                )
    if key in PLANETOID_NAMES:
        return load_planetoid(key, data_dir, **kwargs)
    if kwargs:
        raise TypeError(f"load_dataset({name!r}) takes no options {sorted(kwargs)}")
    if key in MAT_FILES:
        return load_mat(key, data_dir)
    if key in MUSAE_NAMES:
        return load_musae(key, data_dir)
    if key in MORE_FILES:
        return load_more(key, data_dir)
    if key == "cora-bundled":
        return _load_bundled_cora()
    raise InputError(f"unknown dataset {name!r}; choose one of {', '.join(NAMES)}")
