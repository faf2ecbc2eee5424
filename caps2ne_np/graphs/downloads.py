"""Where the benchmark files live and how they get here: the authors' repository at a fixed
commit, a mirror, SHA-256 checks (used by :mod:`caps2ne_np.graphs.datasets`; callers
import these names from here).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from ..errors import InputError

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
# sizes in bytes ('-': not recorded)
_SIZES = """
planetoid/ind.cora.allx             257305
planetoid/ind.cora.ally              47959
planetoid/ind.cora.graph             59847
planetoid/ind.cora.test.index         5000
planetoid/ind.cora.tx               148025
planetoid/ind.cora.ty                28135
planetoid/ind.citeseer.allx         595021
planetoid/ind.citeseer.ally          55623
planetoid/ind.citeseer.graph         61987
planetoid/ind.citeseer.test.index     5000
planetoid/ind.citeseer.tx           260321
planetoid/ind.citeseer.ty            24135
planetoid/ind.pubmed.allx                -
planetoid/ind.pubmed.ally           224739
planetoid/ind.pubmed.graph          471808
planetoid/ind.pubmed.test.index       6000
planetoid/ind.pubmed.tx             405505
planetoid/ind.pubmed.ty              12135
multilabel/PPI.mat                 1014752
multilabel/POS.mat                 2318552
multilabel/blogcatalog.mat         1255783
"""
#: The MUSAE graphs (Rozemberczki et al., Journal of Complex Networks 2021) come from the
#: karateclub repository at a fixed commit, data files unchanged (shared/data/README.md,
#: section 4): a Wikipedia page network and a GitHub developer network, structure and
#: one binary label per node.
MUSAE_UPSTREAM = (
    "https://raw.githubusercontent.com/benedekrozemberczki/karateclub/"
    "cb46a91df8dcbeb2570debcf6a9d0c518107a2de/dataset/node_level/"
)
_MUSAE = """
musae/wikipedia/edges.csv   d73dcbbdace474b0f6c5ac55425d281a0ab2967411c4e0d5437bfa5fa75e88ba 1873095
musae/wikipedia/target.csv  19d61f7d5093b5bd1f3a0cb61fa6375a78f5d675a6f0e59bc38cd8350a00a958   81948
musae/github/edges.csv      34c57382246949d1b3b7fa641a8532672001ecae8e9558f0b3c113cc035bd781 3306139
musae/github/target.csv     2e733f092fd69ef436c68883907d2c184ded3cb95a89b33e435cbd2f2678355b  290500
"""
#: The graphs of ``more/`` (shared/data/README.md, section 5), each from its own repository at a
#: fixed commit, data files unchanged: Wiki (OpenNE), Actor (Geom-GCN's ``film``), the Brazil and
#: Europe airport graphs (struc2vec).  Folder in the data folder -> the upstream folder's URL.
MORE_UPSTREAM = {
    "more/wiki/": "https://raw.githubusercontent.com/thunlp/OpenNE/"
    "7b86f4ca25fca3f441f593335fa57dc7dffb3b29/data/wiki/",
    "more/actor/": "https://raw.githubusercontent.com/graphdml-uiuc-jlu/geom-gcn/"
    "f1fc0d14b3b019c562737240d06ec83b07d16a8f/new_data/film/",
    "more/airports/": "https://raw.githubusercontent.com/leoribeiro/struc2vec/"
    "77b4cc63e79a37b1496f340c7772d932038417ec/graph/",
}
_MORE = """
wiki/Wiki_edgelist.txt              72fccd28e5a927a752b6fbf38c971884b0a783dd124c5e8e2c9e27ac7bdd84f5
wiki/Wiki_category.txt              600541ba4563097b1e1796b6b0ffa110f17a0e71b1ac7e5c66dc11c512077774
actor/out1_graph_edges.txt          997cdce67ea9c29257d3ffe796328391931901cf823830affa453178b60e2c3e
actor/out1_node_feature_label.txt   1d5cdd094f8b91e770f6decfca85b35cf42f75d1efb51055fd6af16e11820ff8
airports/brazil-airports.edgelist   896b7bd460ad2da9160888d99bc9099ffe8ed7de3e410833889ea393831bcaa7
airports/labels-brazil-airports.txt 8f9d19f10192fbaeb91dfb46dd7eae0fef28bfe1272d41ab96a4494a0d06785f
airports/europe-airports.edgelist   bd202178d0d1253c15bd3c9a22cc2a25f630244bbef9060bc30adbf0a5e130f6
airports/labels-europe-airports.txt 92bace031cc02937ac9629d6c69387458e5d5016a7dab98490fbf33e392cec4e
"""
# sizes in bytes
_MORE_SIZES = """
wiki/Wiki_edgelist.txt              162007
wiki/Wiki_category.txt               16625
actor/out1_graph_edges.txt          323820
actor/out1_node_feature_label.txt   207718
airports/brazil-airports.edgelist     6047
airports/labels-brazil-airports.txt    687
airports/europe-airports.edgelist    40007
airports/labels-europe-airports.txt   2295
"""
#: path inside the data folder -> (the file's URL, or its path in :data:`UPSTREAM`, SHA-256)
FILES = {
    rel: (rel.replace("planetoid/", "data/").replace("multilabel/", "graph/"), sha)
    for rel, sha in (line.split() for line in _SHA256.strip().split("\n"))
}
FILES.update(
    (rel, (MUSAE_UPSTREAM + rel[len("musae/") :], sha))
    for rel, sha, _ in (line.split() for line in _MUSAE.strip().split("\n"))
)
FILES.update(
    ("more/" + rel, (MORE_UPSTREAM["more/" + rel.split("/")[0] + "/"] + rel.split("/")[1], sha))
    for rel, sha in (line.split() for line in _MORE.strip().split("\n"))
)
#: path inside the data folder -> size in bytes, or None where the registry has none
SIZES = {
    rel: None if size == "-" else int(size)
    for rel, size in (line.split() for line in _SIZES.strip().split("\n"))
}
SIZES.update(
    (rel, int(size)) for rel, _, size in (line.split() for line in _MUSAE.strip().split("\n"))
)
SIZES.update(
    ("more/" + rel, int(size))
    for rel, size in (line.split() for line in _MORE_SIZES.strip().split("\n"))
)
#: a download of a file without a recorded size stops beyond this many bytes
MAX_UNKNOWN_SIZE = 64 << 20
#: seconds a whole fetch may take (every file of a data set), beside the per-read timeout
FETCH_DEADLINE = 900.0


def default_data_dir() -> str:
    """The benchmark data folder: ``$CAPS2NE_DATA``, else the user's cache folder.

    The cache folder is ``$XDG_CACHE_HOME/caps2ne_np``, else ``~/.cache/caps2ne_np``.
    It holds ``planetoid/``, ``multilabel/``, ``musae/`` and ``more/`` as ``shared/data``
    does; files missing from it are downloaded on first use (:func:`fetch`). The path is
    returned even when it does not exist yet.
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
    beside = Path(__file__).resolve().parents[3] / "shared" / "data"
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


_VERDICTS: dict = {}  # (path, size, mtime_ns, inode) -> True when the SHA-256 matched


def matches_registry(path, rel: str) -> bool:
    """True if the file at ``path`` is the registry's ``rel``: its size and SHA-256 match
    :data:`SIZES` and :data:`FILES`.  The verdict is kept per process, keyed by the
    file's size, mtime and inode, so a file is hashed once until it changes."""
    st = os.stat(path)
    key = (os.fspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _VERDICTS:
        size = SIZES[rel]
        _VERDICTS[key] = (size is None or st.st_size == size) and sha256_file(path) == FILES[rel][1]
    return _VERDICTS[key]


def refetch_command(name: str, data_dir) -> str:
    """The command that downloads ``name`` again into ``data_dir`` (repairing what differs)."""
    where = "" if os.fspath(data_dir) == default_data_dir() else f" --data-dir {data_dir}"
    return f"caps2ne fetch-data {name}{where}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process (or a number no process has): leave the file
    return True


def remove_stale_parts(dest: Path) -> list:
    """Delete ``.<name>.<pid>.part`` files beside ``dest`` whose process has died (a fetch
    killed with ``kill -9`` leaves one); return the paths removed."""
    removed = []
    for part in dest.parent.glob(f".{dest.name}.*.part"):
        pid = part.name[len(dest.name) + 2 : -len(".part")]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            try:
                part.unlink()
                removed.append(part)
            except OSError:
                pass
    return removed


def not_writable(folder, err) -> InputError:
    """The one-line error for a data folder where a file cannot be written."""
    return InputError(
        f"{folder}: the data folder is not writable ({getattr(err, 'strerror', None) or err}); "
        "pass a writable --data-dir (data_dir=) or set CAPS2NE_DATA"
    )


def download(rel: str, dest: Path, timeout: float, hint: str = "", deadline=None) -> None:
    """Copy ``rel`` (a key of :data:`FILES`) from the mirror or GitHub to ``dest``, SHA-256
    checked, through a temporary name; InputError says how to place it by hand.

    ``timeout`` bounds each read; ``deadline`` (a ``time.monotonic()`` value) the whole
    download, checked after every read, so a trickling server cannot keep it alive.  At
    most :data:`SIZES` ``[rel] + 1`` bytes are read (a copy that is too long stops
    there).  Temporary files of killed fetches (``.<name>.<pid>.part``) are removed."""
    import time
    import urllib.error
    import urllib.request

    upstream, sha = FILES[rel]
    canonical = upstream if "://" in upstream else UPSTREAM + upstream
    mirror = data_mirror()
    url = _mirror_url(mirror, rel) if mirror is not None else canonical
    by_hand = f"download {canonical} (SHA-256 {sha}) and put it at {dest}"
    if dest.is_dir():
        raise InputError(
            f"{dest}: a directory where the file {dest.name} should be; remove or rename it"
        )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise not_writable(dest.parent, err) from None
    remove_stale_parts(dest)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        out = open(tmp, "wb")
    except OSError as err:
        raise not_writable(dest.parent, err) from None
    limit = (SIZES[rel] if SIZES[rel] is not None else MAX_UNKNOWN_SIZE) + 1
    log.info("downloading %s to %s", url, dest)
    try:
        digest, total = hashlib.sha256(), 0
        with out, urllib.request.urlopen(url, timeout=timeout) as response:
            read = getattr(response, "read1", response.read)  # what has arrived, not 1 MiB
            while True:
                block = read(min(1 << 20, limit - total))
                if not block:
                    break
                total += len(block)
                digest.update(block)
                out.write(block)
                if total >= limit:
                    raise InputError(
                        f"{url}: more than the {limit - 1} bytes of {rel} (stopped reading; a "
                        f"wrong or corrupt copy); {by_hand}"
                    )
                if deadline is not None and time.monotonic() > deadline:
                    raise InputError(
                        f"{url}: download not finished in time ({total} bytes so far; a slow or "
                        f"stalled server); retry later, or {by_hand}"
                    )
        if digest.hexdigest() != sha:
            raise InputError(
                f"{url}: SHA-256 {digest.hexdigest()} differs from the expected {sha} "
                f"(corrupt or changed copy); {by_hand}"
            )
        try:
            os.replace(tmp, dest)
        except OSError as err:
            raise not_writable(dest.parent, err) from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        if isinstance(err, InputError):
            raise
        if isinstance(err, OSError) and err.filename is not None and str(tmp) in str(err.filename):
            raise not_writable(dest.parent, err) from None
        reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
        where = f"the mirror {mirror}" if mirror is not None else "GitHub"
        raise InputError(
            f"{rel}: cannot get it from {where} ({reason}); without network, {by_hand}{hint}"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
