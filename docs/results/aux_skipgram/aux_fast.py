"""The same aux loss as aux.aux_loss_and_grads, with the (node, sampled) logits formed
once per distinct context node instead of once per (pair, slot): G x S instead of M x S."""
import numpy as np
from aux import _squash, _squash_backward


def aux_loss_and_grads_fast(X, O, bias, ctx, targets, sampled, q_true, q_sampled, squash=False):
    ctx = np.asarray(ctx, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    sampled = np.asarray(sampled, dtype=np.int64)
    P, I = ctx.shape
    M = P * I
    S = sampled.shape[0]
    u_nodes = ctx.reshape(-1)
    x_nodes, x_inv = np.unique(u_nodes, return_inverse=True)
    G = x_nodes.shape[0]
    xg = np.asarray(X[x_nodes], dtype=np.float64)
    f = _squash(xg) if squash else xg
    Ot = np.asarray(O[targets], dtype=np.float64)
    Os = np.asarray(O[sampled], dtype=np.float64)
    lq_s = np.log(np.asarray(q_sampled, dtype=np.float64))
    zs = f @ Os.T + (np.asarray(bias[sampled], dtype=np.float64) - lq_s)[None, :]   # (G, S)
    c = zs.max(axis=1)
    ws = np.exp(zs - c[:, None])                                                    # (G, S)
    Ssum = ws.sum(axis=1)
    pair = np.repeat(np.arange(P), I)
    # z_t per row: f_u . o_t + b_t - log Q(t)
    zt = (np.einsum("mk,mk->m", f[x_inv], Ot[pair])
          + np.repeat(np.asarray(bias[targets], dtype=np.float64) - np.log(np.asarray(q_true, dtype=np.float64)), I))
    # accidental hits: index of the row's target in sampled, or -1
    order = np.argsort(sampled)
    pos = np.searchsorted(sampled[order], targets)
    pos = np.minimum(pos, S - 1)
    hit_j = np.where(sampled[order][pos] == targets, order[pos], -1)[pair]          # (M,)
    hit = hit_j >= 0
    cu = c[x_inv]
    shift = np.maximum(zt, cu)
    scale = np.exp(cu - shift)
    w_hit = np.where(hit, ws[x_inv, np.maximum(hit_j, 0)], 0.0)
    w_t = np.exp(zt - shift)
    tot = w_t + (Ssum[x_inv] - w_hit) * scale
    loss = (shift + np.log(tot) - zt).mean()
    d_t = (w_t / tot - 1.0) / M
    a_m = scale / tot / M                                                            # (M,)
    a_u = np.bincount(x_inv, weights=a_m, minlength=G)
    D = ws * a_u[:, None]
    if hit.any():
        np.subtract.at(D, (x_inv[hit], hit_j[hit]), ws[x_inv[hit], hit_j[hit]] * a_m[hit])
    d_f = D @ Os
    # target side: d_f_u += sum_{m: u_m = u} d_t_m o_{t_m};  d_o_t += sum d_t_m f_{u_m}
    import scipy.sparse as sp
    A = sp.csr_matrix((d_t, (x_inv, pair)), shape=(G, P))                           # (G, P)
    d_f += A @ Ot
    d_x = _squash_backward(xg, d_f) if squash else d_f
    o_rows, o_inv = np.unique(np.concatenate([sampled, targets]), return_inverse=True)
    d_O = np.zeros((o_rows.shape[0], O.shape[1]))
    d_b = np.zeros(o_rows.shape[0])
    d_O[o_inv[:S]] += D.T @ f
    d_b[o_inv[:S]] += D.sum(axis=0)
    dOt = A.T @ f                                                                    # (P, k)
    np.add.at(d_O, o_inv[S:], dOt)
    np.add.at(d_b, o_inv[S:], np.asarray(A.sum(axis=0)).ravel())
    return loss, (x_nodes, d_x), (o_rows, d_O), d_b
