"""Prototype (frozen as run; not part of the package, not linted):
a skip-gram-like auxiliary loss added to Caps2NE's loss by patching step.TrainStep.gradients.

aux = mean over pairs p and slots i of the sampled-softmax loss of
    z_t = f(x_{u_pi}) . o_{t_p} + b_{t_p} - log Q(t_p),
    z_s = f(x_{u_pi}) . o_s + b_s - log Q(s),  s in V'   (accidental hits removed)
with f = identity or squash.  Total = Caps2NE loss + lam * aux.

Usage:
    python aux.py check                       finite-difference check (float64)
    python aux.py run GRAPH --lam 1.0 [--squash] [--off] [--cfg JSON]
"""
import sys, time, json, argparse
from pathlib import Path
ROOT = Path(__file__).resolve().parents[3]  # the repository (this file: docs/results/aux_skipgram/)
sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "bench")); sys.path.insert(0, str(Path(__file__).parent))
import numpy as np

import caps2ne_np.step as STEP
from caps2ne_np.core import RowGrad
from caps2ne_np.capsules import EPS

STATE = dict(on=False, lam=1.0, squash=False, calls=0, aux_sum=0.0, base_sum=0.0, n=0, nonfinite=0)


def _squash(x):
    r2 = np.einsum("ij,ij->i", x, x)
    g = r2 / ((1.0 + r2) * np.sqrt(r2 + EPS))
    return g[:, None] * x


def _squash_backward(x, d_u):
    r2 = np.einsum("ij,ij->i", x, x)
    h = 1.0 / ((1.0 + r2) * np.sqrt(r2 + EPS))
    g = r2 * h
    gp = h * (1.0 / (1.0 + r2) - 0.5 * r2 / (r2 + EPS))
    s_dot = np.einsum("ij,ij->i", x, d_u)
    return g[:, None] * d_u + (2.0 * gp * s_dot)[:, None] * x


def aux_loss_and_grads(X, O, bias, ctx, targets, sampled, q_true, q_sampled, squash=False):
    """The aux loss (mean over the P*(q-1) (pair, slot) rows) and its row-sparse
    gradients, float64: returns (loss, (x_rows, d_X), (o_rows, d_O), d_bias)
    with d_bias on o_rows."""
    ctx = np.asarray(ctx, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    sampled = np.asarray(sampled, dtype=np.int64)
    P, I = ctx.shape
    M = P * I
    u_nodes = ctx.reshape(-1)                       # (M,) row m = p * I + i
    t_nodes = np.repeat(targets, I)                 # (M,)
    lq_t = np.repeat(np.log(np.asarray(q_true, dtype=np.float64)), I)
    lq_s = np.log(np.asarray(q_sampled, dtype=np.float64))
    x_nodes, x_inv = np.unique(u_nodes, return_inverse=True)
    xg = np.asarray(X[x_nodes], dtype=np.float64)   # (G, d)
    f = _squash(xg) if squash else xg
    Ot = np.asarray(O[targets], dtype=np.float64)   # (P, k)
    Os = np.asarray(O[sampled], dtype=np.float64)   # (S, k)
    bt = np.asarray(bias[targets], dtype=np.float64)
    bs = np.asarray(bias[sampled], dtype=np.float64)
    F = f[x_inv]                                    # (M, k)
    z_t = np.einsum("mk,mk->m", F, np.repeat(Ot, I, axis=0)) + np.repeat(bt, I) - lq_t
    z_s = F @ Os.T + (bs - lq_s)[None, :]           # (M, S)
    hit = sampled[None, :] == t_nodes[:, None]
    z_s = np.where(hit, -np.inf, z_s)
    zmax = np.maximum(z_t, z_s.max(axis=1))
    w_t = np.exp(z_t - zmax)
    w_s = np.exp(z_s - zmax[:, None])               # 0 at hits
    tot = w_t + w_s.sum(axis=1)
    loss_rows = zmax + np.log(tot) - z_t
    loss = loss_rows.mean()
    d_t = (w_t / tot - 1.0) / M                     # (M,)
    d_s = w_s / tot[:, None] / M                    # (M, S)
    # d f rows
    d_F = d_t[:, None] * np.repeat(Ot, I, axis=0) + d_s @ Os     # (M, k)
    d_f = np.zeros_like(f)
    np.add.at(d_f, x_inv, d_F)
    d_x = _squash_backward(xg, d_f) if squash else d_f
    # output side
    o_rows, o_inv = np.unique(np.concatenate([sampled, targets]), return_inverse=True)
    S = sampled.shape[0]
    d_O = np.zeros((o_rows.shape[0], O.shape[1]))
    d_b = np.zeros(o_rows.shape[0])
    d_O[o_inv[:S]] += d_s.T @ F
    d_b[o_inv[:S]] += d_s.sum(axis=0)
    # per pair: sum over slots of d_t * F
    d_t_p = d_t.reshape(P, I)
    dOt = np.einsum("pi,pik->pk", d_t_p, F.reshape(P, I, -1))
    np.add.at(d_O, o_inv[S:], dOt)
    np.add.at(d_b, o_inv[S:], d_t_p.sum(axis=1))
    return loss, (x_nodes, d_x), (o_rows, d_O), d_b


def merge(g, rows, values, scale):
    """RowGrad g + scale * (rows, values): union of rows, values added, g's dtype."""
    dtype = g.values.dtype
    gv = g.values.reshape(g.rows.shape[0], -1)
    vv = values.reshape(rows.shape[0], -1)
    u = np.union1d(g.rows, rows)
    out = np.zeros((u.shape[0], gv.shape[1]), dtype=np.float64)
    out[np.searchsorted(u, g.rows)] += gv
    out[np.searchsorted(u, rows)] += scale * vv
    out = out.astype(dtype)
    if g.values.ndim == 1:
        out = out.reshape(-1)
    return RowGrad(u.astype(np.int64), out)


_orig_gradients = STEP.TrainStep.gradients


def gradients(self, batch):
    STATE["calls"] += 1
    loss, grads = _orig_gradients(self, batch)
    if not STATE["on"]:
        STATE["base_sum"] += loss; STATE["n"] += 1
        return loss, grads
    p = self.params
    lam = STATE["lam"]
    fn = aux_loss_and_grads
    if STATE.get("fast"):
        from aux_fast import aux_loss_and_grads_fast as fn
    a, (xr, dx), (orows, dO), db = fn(
        p.X, p.O, p.bias, batch.ctx, batch.targets, batch.sampled, batch.q_true,
        batch.q_sampled, squash=STATE["squash"])
    grads = dict(grads)
    grads["X"] = merge(grads["X"], xr, dx, lam)
    grads["O"] = merge(grads["O"], orows, dO, lam)
    grads["bias"] = merge(grads["bias"], orows, db, lam)
    STATE["aux_sum"] += a; STATE["base_sum"] += loss; STATE["n"] += 1
    total = loss + lam * a
    if not np.isfinite(total):
        STATE["nonfinite"] += 1
    return float(total), grads


STEP.TrainStep.gradients = gradients


# ----------------------------------------------------------------------------------
def fd_check():
    from caps2ne_np.core import init_params, ModelConfig
    from caps2ne_np.batch import Batch
    from caps2ne_np.optim import Adam
    rng = np.random.default_rng(1)
    N, k, d, I, P, S = 12, 5, 5, 3, 6, 5
    params = init_params(N, k, d, I, rng, dtype=np.float64)
    # non-trivial scales so logits are not ~0
    params.O[...] = rng.normal(0, 0.7, params.O.shape)
    params.bias[...] = rng.normal(0, 0.3, N)
    params.X[...] = rng.normal(0, 0.8, params.X.shape)
    params.W[...] = rng.normal(0, 0.5, params.W.shape)
    ctx = rng.integers(0, N, size=(P, I))
    targets = rng.integers(0, N, size=P)
    targets[1] = targets[0]  # repeated target
    sampled = rng.choice(N, size=S, replace=False)
    targets[2] = sampled[0]  # accidental hit
    q_true = rng.uniform(0.1, 2.0, P)
    q_sampled = rng.uniform(0.1, 2.0, S)
    res = {}
    for sq in (False, True):
        def L(Xa, Oa, ba):
            return aux_loss_and_grads(Xa, Oa, ba, ctx, targets, sampled, q_true, q_sampled, squash=sq)[0]
        _, (xr, dx), (orr, dO), db = aux_loss_and_grads(params.X, params.O, params.bias, ctx, targets,
                                                         sampled, q_true, q_sampled, squash=sq)
        an = dict(X=np.zeros_like(params.X), O=np.zeros_like(params.O), bias=np.zeros_like(params.bias))
        an["X"][xr] = dx; an["O"][orr] = dO; an["bias"][orr] = db
        h = 1e-5
        worst = 0.0
        for name in ("X", "O", "bias"):
            arr = getattr(params, name)
            num = np.zeros_like(arr)
            it = np.nditer(arr, flags=["multi_index"])
            for _ in it:
                ix = it.multi_index
                old = arr[ix]
                arr[ix] = old + h; lp = L(params.X, params.O, params.bias)
                arr[ix] = old - h; lm = L(params.X, params.O, params.bias)
                arr[ix] = old
                num[ix] = (lp - lm) / (2 * h)
            rel = np.linalg.norm(num - an[name]) / max(np.linalg.norm(num), 1e-300)
            res[f"aux squash={sq} d{name}"] = rel
            worst = max(worst, rel)
        assert worst < 1e-6, (sq, res)
    # merged total through the patched TrainStep.gradients (checks the merge too)
    from caps2ne_np.core import loss_and_grads
    opt = Adam({n: getattr(params, n) for n in params.trainable()})
    step = STEP.TrainStep(params, opt, ModelConfig(), lazy=False)
    STATE.update(on=True, lam=0.7, squash=False)

    def total():
        b = Batch(ctx, targets, sampled, q_true, q_sampled)
        return step.gradients(b)[0]
    b = Batch(ctx, targets, sampled, q_true, q_sampled)
    _, g = step.gradients(b)
    for name in ("X", "O", "bias", "W"):
        arr = getattr(params, name)
        from caps2ne_np.core import row_matrix
        an = np.zeros_like(row_matrix(arr)) if name == "W" else np.zeros_like(arr)
        an = an.reshape(an.shape[0], -1)
        an[g[name].rows] = g[name].values.reshape(g[name].rows.shape[0], -1)
        num = np.zeros_like(arr)
        it = np.nditer(arr, flags=["multi_index"])
        for _ in it:
            ix = it.multi_index
            old = arr[ix]
            arr[ix] = old + h; lp = total()
            arr[ix] = old - h; lm = total()
            arr[ix] = old
            num[ix] = (lp - lm) / (2 * h)
        if name == "W":
            num = row_matrix(np.ascontiguousarray(num.transpose(0, 2, 1)).transpose(0, 2, 1))
        num = num.reshape(num.shape[0], -1)
        rel = np.linalg.norm(num - an) / np.linalg.norm(num)
        res[f"total(lam=0.7) d{name}"] = rel
    STATE.update(on=False)
    print(json.dumps({k_: float(f"{v:.3g}") for k_, v in res.items()}, indent=1))
    assert all(v < 1e-6 for v in res.values()), res
    print("FD CHECK PASSED")


def run(a):
    from caps2ne_np.train import TrainConfig, fit
    import scipy.sparse as sp
    import vs_deepwalk as vd
    STATE.update(on=not a.off, lam=a.lam, squash=a.squash, fast=a.fast)
    g = vd.panel_entry(a.graph)  # data: $CAPS2NE_DATA or ~/.cache/caps2ne_np
    adj = sp.csr_matrix(g.adj)
    indptr = adj.indptr.astype(np.int64); indices = adj.indices.astype(np.int32)
    cfg = TrainConfig(threads=2, **json.loads(a.cfg))
    t0 = time.perf_counter()
    res = fit(indptr, indices, None, cfg)
    dt = time.perf_counter() - t0
    O = np.asarray(res.params.O)
    finite = bool(np.all(np.isfinite(O)) and np.all(np.isfinite(res.params.X)))
    s = vd.score_embedding(g, O, fractions=(0.5,))
    n = max(STATE["n"], 1)
    out = dict(graph=a.graph, variant="baseline" if a.off else f"aux lam={a.lam}" + (" squash" if a.squash else "") + (" (fast impl)" if a.fast else ""),
               score_O=round(s["headline"], 2), secs=round(dt, 1), epochs=res.config.epochs, lr=res.config.lr,
               calls=STATE["calls"], mean_caps_loss=round(STATE["base_sum"] / n, 4),
               mean_aux_loss=round(STATE["aux_sum"] / n, 4), nonfinite_losses=STATE["nonfinite"],
               params_finite=finite)
    print(json.dumps(out), flush=True)
    with open("results.jsonl", "a") as fh:  # in the current folder
        fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("graph", nargs="?")
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--squash", action="store_true")
    ap.add_argument("--off", action="store_true")
    ap.add_argument("--fast", action="store_true")
    ap.add_argument("--cfg", default="{}")
    a = ap.parse_args()
    if a.mode == "check":
        fd_check()
    else:
        run(a)
