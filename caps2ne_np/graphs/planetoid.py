"""The Planetoid files of Cora, Citeseer and Pubmed (``ind.<name>.*``), read safely.

Planetoid files are pickles.  Unpickling runs code named by the file, so they are read
with :class:`RestrictedUnpickler`, which resolves only the globals these files use
and refuses everything else before it can run.  :func:`read` assembles the graph,
features and labels in the standard way (shared/data/README.md, section 1);
``datasets.load_planetoid`` adds the splits.
"""

from __future__ import annotations

import collections
import itertools
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import InputError
from ..io.files import read_lines

try:  # NumPy >= 2 moved the pickled name numpy.core.multiarray to numpy._core.multiarray
    from numpy._core.multiarray import _reconstruct as _np_reconstruct
except ImportError:  # pragma: no cover - NumPy 1.x
    from numpy.core.multiarray import _reconstruct as _np_reconstruct


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
        raise InputError(
            f"{path}: expected a pickled scipy.sparse CSR matrix, got {type(obj).__name__}"
        )
    shape = state.get("_shape", state.get("shape"))
    try:
        mat = sp.csr_matrix((state["data"], state["indices"], state["indptr"]), shape=tuple(shape))
        mat.check_format(full_check=True)
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(
            f"{path}: malformed CSR matrix in pickle ({err}); replace the file"
        ) from None
    return mat.astype(np.float32)


def _as_dense(obj, path: Path) -> np.ndarray:
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise InputError(
            f"{path}: expected a 2-D NumPy array of one-hot labels, got {type(obj).__name__}"
        )
    return obj


def read(name: str, pdir: Path, features: bool = True):
    """(adj, features or None, labels, n) of Planetoid set ``name`` from the folder ``pdir``.

    Node ``n`` is row ``n`` of ``vstack(allx, tx)`` after placing ``tx`` row ``k`` at node
    ``test.index[k]``.  Test ids absent from ``test.index`` (15 for Citeseer) get an
    all-zero feature row and label -1.  The class of a node is the argmax of its
    one-hot row.  ``adj``: float32 CSR with the ``.graph`` lists' entries as ones.
    """

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
        raise InputError(
            f"{path('ty')}: {ty.shape[1]} classes but ally has {ally.shape[1]}; use matching files"
        )
    if ty.shape[0] != test_idx.size:
        raise InputError(
            f"{path('ty')}: {ty.shape[0]} rows but test.index lists {test_idx.size} nodes; use "
            "matching files"
        )
    if test_idx.min() < n_known or np.unique(test_idx).size != test_idx.size:
        raise InputError(
            f"{path('test.index')}: test ids must be unique and >= {n_known} (the number of ally "
            "rows); "
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
        raise InputError(
            f"{pdir}/ind.{name}.ally|ty: label rows must be one-hot, node {bad} has several classes"
        )
    labels = np.where(counts == 1, np.argmax(onehot, axis=1), -1).astype(np.int64)

    feats = None
    if features:
        allx = _as_csr(_unpickle(path("allx")), path("allx"))
        tx = _as_csr(_unpickle(path("tx")), path("tx"))
        if allx.shape[0] != n_known or tx.shape[0] != test_idx.size or allx.shape[1] != tx.shape[1]:
            raise InputError(
                f"{path('allx')}: shapes allx {allx.shape}, tx {tx.shape} do not match ally "
                f"({n_known} rows) "
                f"and test.index ({test_idx.size} ids); use files from one Planetoid download"
            )
        stacked = sp.vstack(
            [allx, tx, sp.csr_matrix((1, allx.shape[1]), dtype=np.float32)], format="csr"
        )
        feats = stacked[source].tocsr()
        feats.sort_indices()

    graph = _unpickle(path("graph"))
    adj = _graph_dict_to_csr(graph, n, path("graph"))
    return adj, feats, labels, n


def _read_test_index(path: Path) -> np.ndarray:
    ids = []
    for lineno, line in enumerate(read_lines(path, "one integer node id per line"), 1):
        text = line.strip()
        if not text:
            continue
        try:
            ids.append(int(text))
        except ValueError:
            raise InputError(
                f"{path}:{lineno}: expected one integer node id per line, got {text!r}"
            ) from None
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
        cols = np.fromiter(
            itertools.chain.from_iterable(graph.values()), dtype=np.int64, count=int(degrees.sum())
        )
    except (TypeError, ValueError):
        raise InputError(
            f"{path}: adjacency lists must map integer node ids to lists of integer ids"
        ) from None
    rows = np.repeat(keys, degrees)
    bad = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= n)
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"{path}: edge {rows[i]} -> {cols[i]} names a node outside 0..{n - 1} (the nodes of "
            "the "
            "feature/label files); use files from one Planetoid download"
        )
    adj = sp.csr_matrix((np.ones(rows.size, dtype=np.float32), (rows, cols)), shape=(n, n))
    adj.sum_duplicates()
    adj.sort_indices()
    adj.data[:] = 1.0
    return adj
