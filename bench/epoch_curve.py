"""The defaults' whole budget (--stop none) on a panel graph, the whole graph in the
seed's node order, the written rows scored at C = 1 after every epoch, and the drift.

    python bench/epoch_curve.py blogcatalog 0 > curve.jsonl

Kept for the record of docs/results/heldout_stop.md (removed from bench/ in the next
commit); one JSON line per epoch."""
import json, sys, time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import numpy as np, scipy.sparse as sp
import common, vs_deepwalk
from caps2ne_np.kernels.rng import derive_seed
from caps2ne_np.model import propagation
from caps2ne_np.training import budget
from caps2ne_np.training.config import TrainConfig
from caps2ne_np.training.train import fit

name, seed = sys.argv[1], int(sys.argv[2])
g = vs_deepwalk.panel_entry(name, None)
perm = np.random.default_rng([seed, 20261127]).permutation(g.n_nodes)
P = sp.csr_matrix((np.ones(g.n_nodes), (perm, np.arange(g.n_nodes))), shape=(g.n_nodes,) * 2)
g_adj = (P @ g.adj @ P.T).tocsr()
class G: pass
gp = G(); gp.adj = g_adj; gp.n_nodes = g.n_nodes
adj, weights, A = common.panel_adjacency(gp)
indptr, indices = adj.indptr.astype(np.int64), adj.indices.astype(np.int32)
structure = budget.structure(A, derive_seed(seed, "stop structure") % (2**32))
state = dict(t=time.perf_counter())
def on_epoch(epoch, result):
    t_train = time.perf_counter() - state["t"]
    O = np.array(result.params.O, dtype=np.float32)
    drift = None if "O" not in state else budget.drift(state["O"], O)
    state["O"] = O
    p = propagation.apply(indptr, indices, weights, result.config, O, structure=structure)
    E = (O if p is None else p.E)[perm]  # row i: node i of the panel graph
    sc = vs_deepwalk.score_embedding(g, E, 5, fractions=(0.5,))["headline"]
    print(json.dumps(dict(graph=name, seed=seed, epoch=epoch, drift=drift, c1=sc, train_s=t_train)), flush=True)
    state["t"] = time.perf_counter()
fit(indptr, indices, weights, TrainConfig(seed=seed, threads=2, stop="none"), epoch_callback=on_epoch)
