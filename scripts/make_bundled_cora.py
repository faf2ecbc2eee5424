"""Write the Cora files shipped in caps2ne_np/data from the Planetoid originals.

    python scripts/make_bundled_cora.py [--data-dir ../shared/data] [--overwrite]

Outputs (plain text, each < 100 KB):
  cora.edgelist     one undirected edge 'u v' per line, u < v, sorted, no duplicates or self loops
  cora.labels       'node class' per line, classes 0..6 (argmax of the Planetoid one-hot rows)
  cora.splits.json  the paper's 10 train/val/test splits (copy of splits/cora.json)
"""

import json
import os
import sys
import tempfile
from pathlib import Path

import click
import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from caps2ne_np.graphs.datasets import load_planetoid  # noqa: E402
from caps2ne_np.graphs.downloads import default_data_dir  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent.parent / "caps2ne_np" / "data"

SOURCE = """\
# Source: Planetoid files ind.cora.* (Z. Yang, W. Cohen, R. Salakhutdinov, Revisiting Semi-Supervised
#   Learning with Graph Embeddings, ICML 2016), as shipped in github.com/daiquocnguyen/Caps2NE (commit bb9dc9f);
#   node n = row n of the standard Planetoid assembly (vstack(allx, tx), tx row k -> node test.index[k]).
# Original data: P. Sen, G. Namata, M. Bilgic, L. Getoor, B. Gallagher, T. Eliassi-Rad, Collective
#   Classification in Network Data, AI Magazine 29(3), 2008 (LINQS). No separate licence is stated
#   upstream; cite Sen et al. 2008 (and Yang et al. 2016) when publishing results.
# Written by scripts/make_bundled_cora.py.
"""  # noqa: E501 -- the header text the bundled cora.edgelist carries, kept verbatim


def _write(path: Path, text: str, overwrite: bool) -> None:
    if path.exists() and not overwrite:
        raise click.ClickException(f"{path}: exists; pass --overwrite to replace it")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)  # mkstemp creates 0600; shipped data must be world-readable
    os.replace(tmp, path)


@click.command()
@click.option(
    "--data-dir",
    default=default_data_dir(),
    show_default=True,
    type=click.Path(exists=True, file_okay=False),
    help="Benchmark data root holding planetoid/ and splits/.",
)
@click.option(
    "--out-dir",
    default=str(OUT_DIR),
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where to write the three files.",
)
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
def main(data_dir, out_dir, overwrite):
    """Write cora.edgelist, cora.labels and cora.splits.json from the Planetoid Cora files."""
    ds = load_planetoid("cora", data_dir, features=False)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    upper = sp.triu(ds.adj, k=1).tocoo()  # the adjacency is symmetric: u < v gives each edge once
    order = np.lexsort((upper.col, upper.row))
    u, v = upper.row[order], upper.col[order]
    n_nodes, n_classes = ds.n_nodes, ds.n_classes
    head = (
        f"# Cora citation graph: {n_nodes} nodes (ids 0..{n_nodes - 1}), "
        f"{u.size} undirected edges 'u v' (u < v),\n"
    )
    head += "# deduplicated, no self loops. Labels: cora.labels; splits: cora.splits.json.\n"
    _write(
        out / "cora.edgelist",
        head + SOURCE + "".join(f"{a} {b}\n" for a, b in zip(u, v)),
        overwrite,
    )

    labelled = np.flatnonzero(ds.labels >= 0)
    head = f"# Cora classes: {n_classes} topics, 'node class' per line\n"
    head += "# (class = argmax of the Planetoid one-hot label).\n"
    _write(
        out / "cora.labels",
        head + SOURCE + "".join(f"{i} {ds.labels[i]}\n" for i in labelled),
        overwrite,
    )

    lines = [
        json.dumps({p: s[p].tolist() for p in ("train", "val", "test")}, separators=(",", ":"))
        for s in ds.splits
    ]
    _write(out / "cora.splits.json", "[\n" + ",\n".join(lines) + "\n]\n", overwrite)
    click.echo(
        f"{out}: {n_nodes} nodes, {u.size} edges, {n_classes} classes, {len(ds.splits)} splits",
        err=True,
    )


if __name__ == "__main__":
    main()
