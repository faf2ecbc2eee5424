"""Where the benchmark files live and how they get here: the authors' repository at a fixed
commit, a mirror, SHA-256 checks (used by :mod:`caps2ne_np.datasets`, which re-exports these).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from caps2ne_np.errors import InputError

log = logging.getLogger(__name__)

#: Every file is fetched from the authors' repository at a fixed commit, so the bytes,
#: and therefore the SHA-256 held here, cannot change (shared/data/README.md, section 4).
UPSTREAM = (
    "https://raw.githubusercontent.com/daiquocnguyen/Caps2NE/"
    "bb9dc9f2a2eb8a40d193473c5c3424084e0918ed/"
)

_SHA256 = """
planetoid/ind.cora.allx           9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543
planetoid/ind.cora.ally           2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71
planetoid/ind.cora.graph          58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d
planetoid/ind.cora.test.index     297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875
planetoid/ind.cora.tx             b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a
planetoid/ind.cora.ty             41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad
planetoid/ind.citeseer.allx       2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668
planetoid/ind.citeseer.ally       f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95
planetoid/ind.citeseer.graph      d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7
planetoid/ind.citeseer.test.index 2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4
planetoid/ind.citeseer.tx         539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21
planetoid/ind.citeseer.ty         55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce
planetoid/ind.pubmed.allx         508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e
planetoid/ind.pubmed.ally         0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e
planetoid/ind.pubmed.graph        5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9
planetoid/ind.pubmed.test.index   b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5
planetoid/ind.pubmed.tx           4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d
planetoid/ind.pubmed.ty           ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd
multilabel/PPI.mat                8a32b88b0576276f02d7aaa3fd282e8617a3e6db8d39abb6212a283363bf1183
multilabel/POS.mat                b40977b48dec1d5016af0f6d5d2bce6f1c1037ccab948c2bbe324cea16754835
multilabel/blogcatalog.mat        d4f4fb89ce1ccd4b7e2a183386c000773cc9362cc61f1be5b246a6d9c259da8f
"""
#: path inside the data folder -> (path in the upstream repository, SHA-256 of the file)
FILES = {
    rel: (rel.replace("planetoid/", "data/").replace("multilabel/", "graph/"), sha)
    for rel, sha in (line.split() for line in _SHA256.strip().split("\n"))
}


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
    """Where missing files are copied from instead of GitHub; None: from :data:`UPSTREAM`.

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


def mirror_has(mirror: str, rel: str) -> bool:
    """True if a folder / file:// mirror holds ``rel``; an HTTP mirror is assumed to."""
    if mirror.startswith(("http://", "https://")):
        return True
    if mirror.startswith("file://"):
        from urllib.parse import unquote, urlparse

        mirror = unquote(urlparse(mirror).path)
    return (Path(mirror) / rel).is_file()


def sha256_file(path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(rel: str, dest: Path, timeout: float, hint: str = "") -> None:
    """Copy ``rel`` (a key of :data:`FILES`) from the mirror or GitHub to ``dest``, SHA-256
    checked, through a temporary name; InputError says how to place it by hand."""
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
        raise InputError(
            f"{dest.parent}: cannot create the data folder ({err.strerror or err}); "
            "pass a writable --data-dir or set CAPS2NE_DATA"
        ) from None
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    log.info("downloading %s to %s", url, dest)
    try:
        digest = hashlib.sha256()
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as fh:
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                fh.write(block)
        if digest.hexdigest() != sha:
            raise InputError(
                f"{url}: SHA-256 {digest.hexdigest()} differs from the expected {sha} "
                f"(corrupt or changed copy); {by_hand}"
            )
        os.replace(tmp, dest)
    except (urllib.error.URLError, OSError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
        where = f"the mirror {mirror}" if mirror is not None else "GitHub"
        raise InputError(
            f"{rel}: cannot get it from {where} ({reason}); without network, {by_hand}{hint}"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
