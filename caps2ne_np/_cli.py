"""The command line: ``python cli.py train ...`` and the installed ``caps2ne`` script.

Importing this module compiles nothing and imports no heavy dependency: every
command imports what it needs when it runs, so ``--help`` is instant.

Exit codes: 0 success, 2 usage errors (click's own), 1 bad input data or a
failed run, with one line on stderr; ``--debug`` shows the traceback instead.
"""

import logging
import os
import sys
import warnings
from pathlib import Path

import click

from . import __version__
from .errors import InputError, InputWarning

DEFAULTS = dict(dim=128, feat_dim=128, walk_length=10, walks_per_node=32, epochs=10,
                batch_size=64, routing_iters=1)


class _Failure(click.ClickException):
    """One-line error, exit code 1."""

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


def _run(debug, fn, *args, **kwargs):
    """Call fn; turn user-facing errors into one-line messages unless --debug."""
    from .train import TrainingDiverged

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        try:
            return fn(*args, **kwargs)
        except (InputError, TrainingDiverged, OSError) as err:
            if debug:
                raise
            raise _Failure(_one_line(err)) from None
        except KeyboardInterrupt:
            raise _Failure("interrupted; no output was written") from None
        except Exception as err:  # noqa: BLE001 -- last resort: never a bare traceback
            if debug:
                raise
            raise _Failure(f"internal error ({type(err).__name__}: {_one_line(err)}); "
                           "rerun with --debug for the traceback and please report it") from None
        finally:
            for w in caught:
                if issubclass(w.category, InputWarning):
                    click.echo(f"warning: {w.message}", err=True)
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _one_line(err):
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}"
    return " ".join(str(err).split())


def _parse_targets(value):
    value = value.strip().lower()
    if value in ("all", "random"):
        return value
    try:
        return tuple(int(t) for t in value.split(","))
    except ValueError:
        raise click.BadParameter("expected 'all', 'random' or comma-separated 0-based positions "
                                 "such as 3,4,5,6") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(version=__version__, message="caps2ne_np %(version)s")
def cli():
    """Caps2NE node embeddings (Nguyen et al., CIKM 2020) on CPU with NumPy + Numba."""


@cli.command()
@click.option("--graph", required=True, type=click.Path(dir_okay=False),
              help="Edge list: 'u v' or 'u v weight' per line, '#' comments; or a scipy .npz / .mat.")
@click.option("--directed", is_flag=True, help="Treat each line as u->v only (default: undirected).")
@click.option("--keep-self-loops", is_flag=True, help="Keep u-u edges (dropped by default).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Embeddings in word2vec text format [default: <graph stem>.emb].")
@click.option("--npy", "npy_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the embeddings as .npy (+ <stem>.nodes.txt with the node ids).")
@click.option("--model-out", type=click.Path(dir_okay=False), default=None,
              help="Also write the whole trained model (parameters, config, node ids) to .npz.")
@click.option("--overwrite", is_flag=True, help="Replace existing output files.")
@click.option("--dim", default=DEFAULTS["dim"], type=click.IntRange(min=1),
              help="Embedding size k (size of e_v and o_v).")
@click.option("--feat-dim", default=DEFAULTS["feat_dim"], type=click.IntRange(min=1),
              help="Size d of the trainable input features x (featureless graphs).")
@click.option("--walk-length", default=DEFAULTS["walk_length"], type=click.IntRange(min=2),
              help="Walk length q (q - 1 context nodes per target).")
@click.option("--walks-per-node", default=DEFAULTS["walks_per_node"], type=click.IntRange(min=1),
              help="Random walks T started from every node.")
@click.option("--epochs", default=DEFAULTS["epochs"], type=click.IntRange(min=1),
              help="Epochs; each is ceil(#walks / batch-size) batches.")
@click.option("--batch-size", default=DEFAULTS["batch_size"], type=click.IntRange(min=1),
              help="Walks per batch B (each walk gives one pair per target position).")
@click.option("--lr", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Adam learning rate [default: 1e-3 with trainable features, 1e-4 with fixed "
                   "features; the paper's grid is 1e-5, 5e-5, 1e-4].")
@click.option("--num-sampled", default=None, type=click.IntRange(min=1),
              help="Sampled nodes |V'| per batch in the sampled softmax, < number of nodes "
                   "[default: 256, or N - 1 on graphs of at most 256 nodes].")
@click.option("--sampler", default="log_uniform",
              type=click.Choice(["log_uniform", "unigram", "uniform"]),
              help="Candidate sampler for V': TensorFlow's log-uniform (by node index), "
                   "walk-frequency^0.75, or uniform.")
@click.option("--routing-iters", default=DEFAULTS["routing_iters"], type=click.IntRange(min=1),
              help="Routing iterations m (Algorithm 1).")
@click.option("--routing-rule", default="paper", type=click.Choice(["paper", "sabour"]),
              help="Logit update: paper b_i = u_hat_i.e, or Sabour et al. b_i += u_hat_i.e.")
@click.option("--routing-scale", default=None, type=click.FloatRange(min=0, min_open=True),
              help="c = scale * softmax(b) [default: q - 1 as the authors' code; 1 = plain softmax].")
@click.option("--grad-mode", default="exact", type=click.Choice(["exact", "stop"]),
              help="exact: true gradient through routing; stop: c treated as constant (authors).")
@click.option("--targets", default="all", callback=lambda c, p, v: _parse_targets(v),
              help="Target positions in each walk: all, random (one per walk), or 0-based "
                   "positions such as 3,4,5,6 (authors, citation graphs).")
@click.option("--batch-mode", default="random", type=click.Choice(["random", "shuffle"]),
              help="random: B walks drawn with replacement (authors); shuffle: each walk once.")
@click.option("--threads", default=1, type=click.IntRange(min=1),
              help="Threads for Numba kernels and BLAS.")
@click.option("--seed", default=0, type=click.IntRange(min=0), help="Seed of every random stream.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or per-epoch log.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def train(graph, directed, keep_self_loops, out, npy_out, model_out, overwrite, debug, quiet,
          **options):
    """Learn Caps2NE node embeddings for the graph in --graph.

    The embeddings written out are the output vectors o_v, one per node, in the
    user's node ids (word2vec text format, readable by gensim).
    """
    if out is None:
        out = Path(graph).name.split(".")[0] + ".emb"
    _setup_logging(quiet)
    _run(debug, _train, graph, directed, keep_self_loops, out, npy_out, model_out, overwrite,
         quiet, options)


def _train(graph_path, directed, keep_self_loops, out, npy_out, model_out, overwrite, quiet,
           options):
    from .graph import read_graph
    from .io import save_npy, write_word2vec
    from .model import Caps2NE

    outputs = [p for p in (out, npy_out, model_out) if p]
    for path in outputs:                      # fail before training, not after
        _check_writable(path, overwrite)
    g = read_graph(graph_path, directed=directed, keep_self_loops=keep_self_loops)
    click.echo(f"graph: {g.n_nodes} nodes, {g.n_edges} directed edges "
               f"({'directed' if directed else 'undirected'}"
               f"{', weighted' if g.weights is not None else ''})", err=True)
    threads = options.pop("threads")
    seed = options.pop("seed")
    model = Caps2NE(**options, n_jobs=threads, random_state=seed, progress=not quiet)
    model.fit(g)
    last = model.history_[-1]
    click.echo(f"trained {len(model.history_)} epochs: final loss {last['loss']:.4f}, "
               f"{last['pairs_per_s']:,.0f} pairs/s (lr {model.lr_:g})", err=True)
    write_word2vec(out, model.node_ids_, model.O_, overwrite=overwrite)
    click.echo(f"wrote {out}", err=True)
    if npy_out:
        save_npy(npy_out, model.O_, model.node_ids_, overwrite=overwrite)
        click.echo(f"wrote {npy_out}", err=True)
    if model_out:
        model.save(model_out, overwrite=overwrite)
        click.echo(f"wrote {model_out}", err=True)


def _check_writable(path, overwrite):
    """InputError now if ``path`` would be refused later (exists, or no such folder)."""
    target = Path(path)
    if target.exists() and not overwrite:
        raise InputError(f"{path}: exists; pass --overwrite to replace it")
    if target.is_dir():
        raise InputError(f"{path}: is a directory; give a file name")
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{path}: folder {parent} does not exist")


def _setup_logging(quiet):
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO,
                        format="%(message)s", stream=sys.stderr)


def main():
    """Entry point of the ``caps2ne`` console script."""
    cli(prog_name=os.environ.get("CAPS2NE_PROG", "caps2ne"))
