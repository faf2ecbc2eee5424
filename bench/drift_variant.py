"""A panel graph's defaults through the CLI with the drift threshold
(budget.STOP_DRIFT) set for the run, in the panel's node order (bench/panel.py) and
scored under its protocols.

    python bench/drift_variant.py blogcatalog 0.18 0,1,2

Kept for the record of docs/results/heldout_stop.md (removed from bench/ in the next
commit); one JSON line per seed."""
import json, os, subprocess, sys, tempfile, time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import numpy as np
import common, panel, vs_deepwalk

graph_name, drift, seeds = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
driver = ("import sys; from caps2ne_np.training import budget; budget.STOP_DRIFT = %s; "
          "sys.argv[0] = 'cli.py'; from caps2ne_np.cli import main; main()" % drift)
graph = vs_deepwalk.panel_entry(graph_name, None)
out = []
for seed in seeds:
    perm = np.random.default_rng([seed, 20261127]).permutation(graph.n_nodes)
    with tempfile.TemporaryDirectory() as d:
        panel.write_graph(os.path.join(d, "g.txt"), graph.adj, perm)
        cmd = [sys.executable, "-c", driver, "train", "--graph", os.path.join(d, "g.txt"),
               "--out", os.path.join(d, "o.emb"), "--seed", str(seed)]
        t = time.time(); p = subprocess.run(cmd, capture_output=True, text=True, cwd=BENCH.parent); t = time.time() - t
        stop = [l for l in p.stderr.splitlines() if l.startswith("stop after")]
        emb, _ = vs_deepwalk.load_embedding(os.path.join(d, "o.emb"), graph.n_nodes)
        sc = vs_deepwalk.score_protocols(graph, emb[perm], 5, ())
        rec = dict(seed=seed, drift=drift, seconds=t, stop=stop, c1=sc["headline"], tuned=sc["tuned"]["headline"])
        print(json.dumps(rec), flush=True); out.append(rec)
