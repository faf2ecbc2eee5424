"""The written spectrum (--spectrum-power): the defaults' trained o_v written as
rownorm(U S^p) of their filtered SVD for several p, both protocols, beside the graph's
structure measure (the stop rule's), to choose the rule on the tuning graphs and check it
on the test graphs.

    python bench/spectrum_power.py --graphs cora,citeseer --seeds 0,1,2 --out spectrum_power

Each (graph, seed) trains the defaults once with ``--propagate none`` (the o_v the
defaults propagate: the stop rule ends the run where it would), then filters them over
the graph (ProNE's filter, the defaults' order and band, float64) and writes, for each
p of ``--powers``, the rows rownorm(U S^p) at the default length (--row-norm) from a
dense float64 SVD (a reference, not the package's float32 path: the two agree to float32
rounding, tests/test_propagation.py).  Scores: bench/vs_deepwalk.py's protocols (C = 1
and C tuned per split).  The structure: training/budget.structure seeded as a run with
that seed seeds it.  Per-run records go to <results>/<STEM>.runs/ as they finish, so an
interrupted sweep keeps what it measured; ``--summarize`` renders them alone."""

import json
import sys
import time

import numpy as np
import scipy.sparse as sp

import common
import vs_deepwalk


def measure(name, seed, powers, threads):
    """One (graph, seed): dict(structure, seconds, scores {p: (C = 1, tuned)})."""
    from caps2ne_np import Caps2NE
    from caps2ne_np.defaults import DEFAULTS
    from caps2ne_np.kernels.rng import derive_seed
    from caps2ne_np.model import propagation, spectral
    from caps2ne_np.training import budget

    g = vs_deepwalk.panel_entry(name)
    A = sp.csr_matrix(g.adj, dtype=np.float64)
    A.setdiag(0)
    A.eliminate_zeros()
    t0 = time.perf_counter()
    model = Caps2NE(propagate="none", random_state=seed, n_jobs=threads).fit(g.adj)
    seconds = time.perf_counter() - t0
    O = model.get_embedding().astype(np.float64)
    structure = budget.structure(
        A, derive_seed(seed, "stop structure") % (2**32), progress=spectral._silent
    )
    Ot = propagation.filtered(
        A, O, DEFAULTS["prone_order"], DEFAULTS["prone_mu"], DEFAULTS["prone_theta"]
    )
    U, S, _ = np.linalg.svd(Ot, full_matrices=False)
    scores = {}
    for p in powers:
        E = spectral.rownorm(U * S**p) * DEFAULTS["row_norm"]
        s = vs_deepwalk.score_protocols(g, E.astype(np.float32), 5)
        scores[f"{p:g}"] = (s["headline"], s["tuned"]["headline"])
        print(f"  {name} seed {seed} p {p:g}: {s['headline']:.2f} / {s['tuned']['headline']:.2f}")
    return dict(graph=name, seed=seed, structure=structure, seconds=seconds, scores=scores)


def render(runs, powers, commands):
    """The Markdown table: per graph, the structure range and each p's mean +- sd over
    seeds, C = 1 / tuned, and the p the rule picks."""
    from caps2ne_np.model import propagation

    lines = [
        "# The written spectrum: rownorm(U S^p) of the defaults' filtered o_v",
        "",
        "Commands (bench/spectrum_power.py's docstring says what it measures):",
        "",
        *(f"    {c}" for c in commands),
        "",
        "Mean +- sample sd over seeds, C = 1 / C tuned per split; structure: the stop "
        "rule's measure (min-max over seeds); auto: the p that `--spectrum-power auto` "
        f"picks (1 at structure >= {propagation.POWER_STRUCTURE:g}, else 0.5).",
        "",
        "| graph | role | seeds | structure | "
        + " | ".join(f"p = {p:g}" for p in powers)
        + " | auto |",
        "| --- | --- | --- | --- | " + " | ".join("---" for _ in powers) + " | --- |",
    ]
    graphs = list(dict.fromkeys(r["graph"] for r in runs))
    import panel

    for name in graphs:
        rs = [r for r in runs if r["graph"] == name]
        st = [r["structure"] for r in rs if r["structure"] is not None]
        cells = []
        for p in powers:
            key = f"{p:g}"
            c1 = [r["scores"][key][0] for r in rs if key in r["scores"]]
            tu = [r["scores"][key][1] for r in rs if key in r["scores"]]
            cells.append(f"{_pm(c1)} / {_pm(tu)}" if c1 else "-")
        auto = sorted({1 if s >= propagation.POWER_STRUCTURE else 0.5 for s in st})
        lines.append(
            f"| {name} | {panel.role(name)} | {len(rs)} | "
            + (f"{min(st):.3f}-{max(st):.3f}" if st else "-")
            + " | "
            + " | ".join(cells)
            + f" | {', '.join(f'{a:g}' for a in auto) or '0.5 (not measured)'} |"
        )
    return "\n".join(lines) + "\n"


def _pm(values):
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{np.mean(values):.2f} +- {np.std(values, ddof=1):.2f}"


def main(argv=None):
    ap = common.parser(__doc__, threads=2, out="spectrum_power")
    ap.add_argument("--graphs", default="cora,citeseer", help="comma-separated panel names")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    ap.add_argument("--powers", default="0.5,1", help="comma-separated p")
    ap.add_argument("--summarize", action="store_true", help="render the records only")
    args = ap.parse_args(argv)
    powers = [float(p) for p in args.powers.split(",")]
    path = common.RESULTS / f"{args.out}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    runs, commands = old.get("runs", []), old.get("commands", [])
    if not args.summarize:
        commands.append(common.command(sys.argv if argv is None else argv))
        with common.threads(args.threads):
            for name in args.graphs.split(","):
                for seed in (int(s) for s in args.seeds.split(",")):
                    rec = measure(name, seed, powers, args.threads)
                    runs = [r for r in runs if (r["graph"], r["seed"]) != (name, seed)]
                    runs.append(rec)
                    common.write_json(
                        path, dict(machine=common.machine_info(), commands=commands, runs=runs)
                    )
    text = render(runs, powers, commands)
    common.write_text_atomic(common.RESULTS / f"{args.out}.md", text)
    print(text)


if __name__ == "__main__":
    main()
