"""Slow, obvious NumPy references for the model kernels: loops that follow the
paper's lines, pair-major shapes, no Numba.  The fast kernels must agree with these.
"""

import numpy as np

EPS = 1e-9


def squash(s):
    """squash(s) = |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + EPS), row-wise."""
    s = np.asarray(s, dtype=np.float64)
    out = np.empty_like(s)
    for r in range(s.shape[0]):
        r2 = float(np.dot(s[r], s[r]))
        out[r] = r2 / (1.0 + r2) * s[r] / np.sqrt(r2 + EPS)
    return out


def route(u_hat, iters, scale, rule, c_fixed=None):
    """Algorithm 1 for one pair: u_hat (I, k) -> (e, list of c per iteration).

    rule 'paper': b_i = u_hat_i . e;  'sabour': b_i = b_i + u_hat_i . e.
    ``c_fixed`` (I,) skips the routing and uses these coefficients (stop-gradient
    mode's finite differences)."""
    n_slots = u_hat.shape[0]
    if c_fixed is not None:
        s = sum(c_fixed[i] * u_hat[i] for i in range(n_slots))
        return squash(s[None])[0], [np.asarray(c_fixed)]
    b = np.zeros(n_slots)
    cs = []
    e = None
    for r in range(iters):
        c = scale * np.exp(b) / np.sum(np.exp(b))
        cs.append(c)
        s = sum(c[i] * u_hat[i] for i in range(n_slots))
        e = squash(s[None])[0]
        if r < iters - 1:
            for i in range(n_slots):
                agree = float(np.dot(u_hat[i], e))
                b[i] = b[i] + agree if rule == "sabour" else agree
    return e, cs


def capsule_output(W, X, ctx, iters, scale, rule, c_fixed=None):
    """e_v for every pair: x -> squash -> W_i u -> routing.  Returns (e (P, k), cs)."""
    n_pairs, n_slots = ctx.shape
    es, all_cs = [], []
    for p in range(n_pairs):
        u_hat = np.stack([W[i] @ squash(X[ctx[p, i]][None])[0] for i in range(n_slots)])
        e, cs = route(u_hat, iters, scale, rule, None if c_fixed is None else c_fixed[p])
        es.append(e)
        all_cs.append(cs)
    return np.array(es), all_cs


def sampled_softmax_loss(e, O, bias, targets, sampled, q_true, q_sampled):
    """Mean over pairs of -z_t + log(exp z_t + sum_{s != t} exp z_s), TensorFlow's
    sampled_softmax_loss with subtract_log_q and remove_accidental_hits."""
    losses = []
    for p in range(e.shape[0]):
        t = targets[p]
        z_t = e[p] @ O[t] + bias[t] - np.log(q_true[p])
        zs = [z_t]
        for j, node in enumerate(sampled):
            if node != t:
                zs.append(e[p] @ O[node] + bias[node] - np.log(q_sampled[j]))
        zs = np.array(zs)
        losses.append(-z_t + np.log(np.sum(np.exp(zs))))
    return float(np.mean(losses))


def loss(W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, iters, scale, rule, c_fixed=None):
    """The whole Caps2NE batch loss, in float64."""
    e, _ = capsule_output(W, X, ctx, iters, scale, rule, c_fixed)
    return sampled_softmax_loss(e, O, bias, targets, sampled, q_true, q_sampled)


def skipgram_negatives(seed, step, n_items, n_negatives, n_sampled):
    """(M, K) positions in V' of each item's negatives: the stream (seed, TAG_SKIPGRAM,
    step, m) of rng.py, drawn through the kernels' Python bodies (naive_walks.pyrng)."""
    from caps2ne_np import rng
    from naive_walks import pyrng

    out = np.empty((n_items, n_negatives), dtype=np.int64)
    with rng.quiet_wraparound():
        for m in range(n_items):
            state = pyrng.stream3(seed, rng.TAG_SKIPGRAM, step, m)
            for j in range(n_negatives):
                state, out[m, j] = pyrng.rand_below(state, n_sampled)
    return out


def skipgram_loss(X, O, bias, ctx, targets, sampled, q_true, q_sampled, negatives=0, key=(0, 0)):
    """The skip-gram term (caps2ne_np/skipgram.py), float64: the mean over pairs p and
    slots i (item m = p I + i) of, with u = ctx[p, i] and t = targets[p],

    negatives 0:  -z_t + log(exp z_t + sum_{s in V', s != t} exp z_s),
                  z_t = x_u . o_t + b_t - log Q(t),  z_s = x_u . o_s + b_s - log Q(s)
    negatives K:  -log sigma(x_u . o_t + b_t) - sum_j log sigma(-(x_u . o_n + b_n)),
                  n = V'[neg[m, j]] for the K positions of ``skipgram_negatives``,
                  a negative equal to t left out."""
    n_pairs, n_slots = ctx.shape
    if negatives:
        neg = skipgram_negatives(key[0], key[1], n_pairs * n_slots, negatives, len(sampled))
    losses = []
    for p in range(n_pairs):
        t = targets[p]
        for i in range(n_slots):
            x = X[ctx[p, i]]
            if negatives == 0:
                z_t = x @ O[t] + bias[t] - np.log(q_true[p])
                zs = [z_t]
                for j, node in enumerate(sampled):
                    if node != t:
                        zs.append(x @ O[node] + bias[node] - np.log(q_sampled[j]))
                losses.append(-z_t + np.log(np.sum(np.exp(np.array(zs)))))
            else:
                item = np.log1p(np.exp(-(x @ O[t] + bias[t])))
                for j in neg[p * n_slots + i]:
                    node = sampled[j]
                    if node != t:
                        item += np.log1p(np.exp(x @ O[node] + bias[node]))
                losses.append(item)
    return float(np.mean(losses))


def full_softmax_loss(e, O, bias, targets):
    """Mean over pairs of the full softmax cross-entropy over all N nodes."""
    z = e @ O.T + bias
    z_max = z.max(axis=1, keepdims=True)
    log_z = z_max[:, 0] + np.log(np.exp(z - z_max).sum(axis=1))
    return float(np.mean(log_z - z[np.arange(len(targets)), targets]))


def adam_tf1(param, grad, m, v, t, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    """TensorFlow 1 Adam: lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t);
    m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; p -= lr_t m / (sqrt(v) + eps).
    Returns new (param, m, v) without touching the inputs."""
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    lr_t = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
    return param - lr_t * m / (np.sqrt(v) + eps), m, v


def numeric_grad(f, a, h=1e-6):
    """Central differences of scalar f() with respect to array a (perturbed in place)."""
    g = np.zeros_like(a, dtype=np.float64)
    it = np.nditer(a, flags=["multi_index"])
    for _ in it:
        idx = it.multi_index
        old = a[idx]
        a[idx] = old + h
        f_plus = f()
        a[idx] = old - h
        f_minus = f()
        a[idx] = old
        g[idx] = (f_plus - f_minus) / (2 * h)
    return g


def rel_error(a, b):
    """max |a - b| / max(|a| + |b|) over the array, floored at 1e-8."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-8))
