r"""Caps2NE in float64 NumPy, written as the paper writes it: the reference edition.

Training never runs this module.  It is the model of docs/math.md in plain loops and
pair-major shapes, slow and meant to be obviously right: the fast kernels that
training runs (``capsules``, ``grads``, ``core``, ``skipgram``, ``optim``) are tested
against it (tests/), and examples/one_step.py checks them against it step by step.

Shapes: P pairs, I = q - 1 context slots, features of size d, embeddings of size k,
a sampled set V' of S distinct nodes.

=========================  ======================================================
``squash``                 Eq. 1, row-wise
``predict``                Eq. 2, u_hat_i = W_i u_i for every slot and pair
``predict_backward``       its gradients with respect to W and u
``route``                  Algorithm 1 for one pair
``capsule_output``         x -> squash -> W_i u -> routing, every pair
``sampled_softmax_loss``   Eq. 3 as TensorFlow's ``sampled_softmax_loss``
``sampled_softmax_backward``  its gradients with respect to e, O and the biases
``loss``                   the whole batch loss
``skipgram_loss``          the skip-gram term (beyond the paper; skipgram.py)
``full_softmax_loss``      the softmax over all N nodes that Eq. 3 samples
``adam_tf1``               TensorFlow 1's Adam step
``numeric_grad``           central differences, for checking any gradient
=========================  ======================================================
"""

import numpy as np

EPS = 1e-9
"""The epsilon inside the squash's square root (authors' code)."""


def squash(s):
    """squash(s) = |s|^2 / (1 + |s|^2) * s / sqrt(|s|^2 + EPS), row by row of s (n, k)."""
    s = np.asarray(s, dtype=np.float64)
    out = np.empty_like(s)
    for r in range(s.shape[0]):
        r2 = float(np.dot(s[r], s[r]))
        out[r] = r2 / (1.0 + r2) * s[r] / np.sqrt(r2 + EPS)
    return out


def predict(u, W):
    """u_hat[i, p] = W_i u[i, p] for every slot i and pair p   [Eq. 2]

    u (I, P, d), W (I, k, d) -> u_hat (I, P, k)."""
    n_slots, n_pairs, _ = u.shape
    u_hat = np.empty((n_slots, n_pairs, W.shape[1]))
    for i in range(n_slots):
        for p in range(n_pairs):
            u_hat[i, p] = W[i] @ u[i, p]
    return u_hat


def predict_backward(u, W, d_u_hat):
    """d_W_i = sum_p d_u_hat[i, p] u[i, p]^T  and  d_u[i, p] = W_i^T d_u_hat[i, p]:
    the gradients of <predict(u, W), d_u_hat> (W_i is shared by every pair of slot i).

    Returns ``(d_W (I, k, d), d_u (I, P, d))``."""
    n_slots, n_pairs, _ = u.shape
    d_W = np.zeros(W.shape)
    d_u = np.empty(u.shape)
    for i in range(n_slots):
        for p in range(n_pairs):
            d_W[i] += np.outer(d_u_hat[i, p], u[i, p])
            d_u[i, p] = W[i].T @ d_u_hat[i, p]
    return d_W, d_u


def route(u_hat, iters, scale, rule, c_fixed=None):
    """Algorithm 1 for one pair: u_hat (I, k) -> (e (k,), the list of c per iteration).

    c = scale * softmax(b); s = sum_i c_i u_hat_i; e = squash(s); then
    rule 'paper': b_i = u_hat_i . e;  'sabour': b_i = b_i + u_hat_i . e.
    ``c_fixed`` (I,) skips the routing and uses these coefficients (the finite
    differences of the stop-gradient mode, docs/math.md#routing-backward)."""
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
    """e_v for every pair: x -> squash -> W_i u -> routing.

    W (I, k, d), X (N, d), ctx (P, I) -> ``(e (P, k), the c's of each pair)``."""
    n_pairs, n_slots = ctx.shape
    es, all_cs = [], []
    for p in range(n_pairs):
        u_hat = np.stack([W[i] @ squash(X[ctx[p, i]][None])[0] for i in range(n_slots)])
        e, cs = route(u_hat, iters, scale, rule, None if c_fixed is None else c_fixed[p])
        es.append(e)
        all_cs.append(cs)
    return np.array(es), all_cs


def sampled_softmax_loss(e, O, bias, targets, sampled, q_true, q_sampled):
    """Mean over pairs of -z_t + log(exp z_t + sum_{s in V', s != t} exp z_s), with
    z_j = e . o_j + b_j - log Q(j): TensorFlow's ``sampled_softmax_loss`` with
    ``subtract_log_q`` and ``remove_accidental_hits``   [Eq. 3]"""
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


def sampled_softmax_backward(e, O, targets, sampled, d_true, d_sampled):
    """The gradients of the logits z_t = e . o_t + b_t - log Q(t) (d_true (P,)) and
    z_s = e . o_s + b_s - log Q(s) (d_sampled (P, S)) with respect to e, O and the
    biases:

        d_e_p = d_z_{p,t} o_{t_p} + sum_s d_z_{p,s} o_s
        d_o_v = sum_{p: t_p = v} d_z_{p,t} e_p + sum_p d_z_{p,v} e_p [v in V']
        d_b_v = sum_{p: t_p = v} d_z_{p,t}     + sum_p d_z_{p,v}     [v in V']

    Returns ``(d_e (P, k), d_O (N, k), d_bias (N,))``, dense."""
    d_e = np.zeros(e.shape)
    d_O = np.zeros(O.shape)
    d_bias = np.zeros(O.shape[0])
    for p in range(e.shape[0]):
        t = targets[p]
        d_e[p] += d_true[p] * O[t]
        d_O[t] += d_true[p] * e[p]
        d_bias[t] += d_true[p]
        for j, node in enumerate(sampled):
            d_e[p] += d_sampled[p, j] * O[node]
            d_O[node] += d_sampled[p, j] * e[p]
            d_bias[node] += d_sampled[p, j]
    return d_e, d_O, d_bias


def loss(W, O, bias, X, ctx, targets, sampled, q_true, q_sampled, iters, scale, rule, c_fixed=None):
    """The whole Caps2NE batch loss: ``capsule_output``, then ``sampled_softmax_loss``."""
    e, _ = capsule_output(W, X, ctx, iters, scale, rule, c_fixed)
    return sampled_softmax_loss(e, O, bias, targets, sampled, q_true, q_sampled)


def skipgram_loss(X, O, bias, ctx, targets, sampled, q_true, q_sampled, neg=None):
    """The skip-gram term (skipgram.py; docs/math.md#the-skip-gram-term): the mean over
    pairs p and slots i (item m = p I + i) of, with u = ctx[p, i] and t = targets[p],

    neg None:    -z_t + log(exp z_t + sum_{s in V', s != t} exp z_s),
                 z_t = x_u . o_t + b_t - log Q(t),  z_s = x_u . o_s + b_s - log Q(s)
    neg (M, K):  -log sigma(x_u . o_t + b_t) - sum_j log sigma(-(x_u . o_n + b_n)),
                 n = V'[neg[m, j]], the K positions in V' of item m's negatives
                 (skipgram.negative_positions), a negative equal to t left out."""
    n_pairs, n_slots = ctx.shape
    losses = []
    for p in range(n_pairs):
        t = targets[p]
        for i in range(n_slots):
            x = X[ctx[p, i]]
            if neg is None:
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
    """Central differences (f(a + h e_j) - f(a - h e_j)) / 2h of the scalar f() with
    respect to every entry j of the array a, which f reads (perturbed in place and
    restored)."""
    g = np.zeros(a.shape, dtype=np.float64)
    for j in np.ndindex(a.shape):  # index a itself: W may be a transposed view
        old = a[j]
        a[j] = old + h
        f_plus = f()
        a[j] = old - h
        f_minus = f()
        a[j] = old
        g[j] = (f_plus - f_minus) / (2 * h)
    return g


def rel_error(a, b):
    """max |a - b| / max(|a| + |b|) over the array, the denominator floored at 1e-8."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-8))
