"""One training step of Caps2NE, printed intermediate by intermediate (docs/math.md).

    python examples/one_step.py

No arguments.  It builds a 6-node graph, samples one batch of (context, target)
pairs and one sampled set V', runs the forward pass and the hand-derived backward
pass of caps2ne_np in float64, prints every intermediate with its shape, checks
every gradient against central finite differences of the float64 reference
(caps2ne_np/model/reference.py, the paper line by line), and takes one Adam step.  It
runs in a few seconds, most of it Numba compiling the kernels on the first run
(they are cached on disk afterwards).

The sizes are those of the paper's Figure 1: walks of q = 6 nodes (so I = q - 1 = 5
context slots), features of size d = 4, embeddings of size k = 3.  Each printed
section names the section of docs/math.md that derives it and the function that
computes it.  The last line is "all N gradient checks passed" (exit code 0), or
"FAILED: ..." (exit code 1).
"""

import sys

import numpy as np

from caps2ne_np.graphs.csr import from_edges
from caps2ne_np.model import capsules, grads, reference, skipgram
from caps2ne_np.model.batch_forward import forward
from caps2ne_np.model.core import loss_and_grads, loss_and_row_grads
from caps2ne_np.model.model_config import ModelConfig
from caps2ne_np.model.params import init_params
from caps2ne_np.training.step import samplers
from caps2ne_np.training.step.optim import Adam
from caps2ne_np.walks import walks

SEED = 3
N_NODES = 6  # nodes of the toy graph
Q = 6  # walk length q; I = q - 1 context slots
D = 4  # feature size d
K = 3  # embedding size k
T = 2  # walks per node
B = 2  # walks in the batch; one random target per walk gives P = B pairs
NUM_SAMPLED = 3  # |V'|
M = 3  # routing iterations m
W_STD = 1.5  # std of W, larger than the authors' 0.01: see "Parameters" in main()

H = 1e-6  # central-difference step
BAR = 1e-6  # largest accepted relative error (float64; docs/math.md#checking-gradients)
LR = 0.01  # Adam learning rate for the one step


# --------------------------------------------------------------------------- helpers


RESULTS = []


def check(name, analytic, numeric):
    """Record and print one gradient check."""
    err = reference.rel_error(analytic, numeric)
    ok = err < BAR
    RESULTS.append((name, err, ok))
    print(f"  check {name:<46} rel. error {err:.1e}  {'ok' if ok else 'FAILED'}")


def section(title, where):
    print()
    print(f"== {title}  [{where}]")


def show(name, arr, note=""):
    arr = np.asarray(arr)
    print(f"{name:<12} shape {str(arr.shape):<12} {arr.dtype}  {note}")
    text = np.array2string(arr, precision=4, suppress_small=True, max_line_width=100)
    print("    " + text.replace("\n", "\n    "))


def dot(a, b):
    """<a, b> as a float.  With a = y(input) and b = d_y held fixed, the gradient of
    <y(input), d_y> with respect to the input is exactly what y's backward function
    returns (docs/math.md#reading-a-backward-pass, fact 4)."""
    return float(np.sum(a * b))


# --------------------------------------------------------------------------- forward pieces


def squash_rows(a):
    """reference.squash over the last axis of a."""
    return reference.squash(a.reshape(-1, a.shape[-1])).reshape(a.shape)


def mean_loss_of_logits(z_t, z_s, targets, sampled):
    """L = mean_p loss_p from the corrected logits (capsules.softmax_rows)."""
    return float(capsules.softmax_rows(z_t, z_s, targets, sampled)[0].mean())


def main():
    np.set_printoptions(precision=4, suppress=True)
    print(__doc__.strip().splitlines()[0])

    # ------------------------------------------------------------------ the data
    section("Graph, walks and one batch", "docs/math.md#where-a-batch-comes-from")
    # Two triangles {0, 1, 2} and {3, 4, 5} joined by the edge 2 - 3.
    src = np.array([0, 0, 1, 2, 3, 3, 4])
    dst = np.array([1, 2, 2, 3, 4, 5, 5])
    g = from_edges(src, dst, None, [str(v) for v in range(N_NODES)])
    print(f"graph: {g.n_nodes} nodes, {g.n_edges // 2} undirected edges, CSR indptr {g.indptr}")
    all_walks = walks.uniform_walks(g.indptr, g.indices, g.weights, T, Q, seed=SEED)
    show("walks", all_walks, "(N*T, q) walks.uniform_walks: T walks of q nodes from every node")
    walk_ids = walks.batch_walk_ids(all_walks.shape[0], B, seed=SEED, epoch=0, step=0)
    ctx, targets = walks.training_pairs(all_walks, walk_ids, "random", seed=SEED, key=0)
    targets = targets.astype(np.int64)
    print(f"batch walk ids {walk_ids}")
    show("ctx", ctx, "(P, I) walks.training_pairs: context C_v of each pair, walk order")
    show("targets", targets, "(P,) target node v of each pair")
    P, n_slots = ctx.shape

    sampler = samplers.make_sampler("log_uniform", N_NODES)
    sampled, num_tries = sampler.sample(NUM_SAMPLED, seed=SEED, key=0)
    q_true = sampler.expected_count(targets, num_tries)
    q_sampled = sampler.expected_count(sampled, num_tries)
    show("V'", sampled, f"(S,) distinct nodes; {num_tries} draws (num_tries) to find {NUM_SAMPLED}")
    show("p(V')", sampler.probs(sampled), "log-uniform P(v) = log((v+2)/(v+1)) / log(N+1)")
    show("Q(V')", q_sampled, "expected counts Q = 1 - (1 - P)^num_tries")
    show("Q(t)", q_true, "expected counts of the targets")
    hits = [(p, int(t)) for p, t in enumerate(targets) if t in sampled]
    print(f"accidental hits (pair, node): {hits}  -> removed from that pair's softmax")

    # ------------------------------------------------------------------ parameters
    section("Parameters", "params.init_params")
    params = init_params(N_NODES, K, D, n_slots, np.random.default_rng(SEED), dtype=np.float64)
    # The authors' W ~ N(0, 0.01^2) makes u_hat and e tiny, so b = u_hat . e is about
    # 1e-6 and c never leaves 1: the routing (and its gradient) would be invisible.
    # W ~ N(0, 1.5^2) gives the routing something to do.
    params.W *= W_STD / 0.01
    cfg = ModelConfig(routing_iters=M, routing_rule="paper", grad_mode="exact")
    scale = cfg.scale_for(n_slots)
    for name in ("W", "O", "bias", "X"):
        show(name, getattr(params, name))

    # ------------------------------------------------------------------ forward
    section("Forward: gather and squash the features", "docs/math.md#squash, capsules.squash")
    fw = forward(params, ctx, cfg)
    # Per pair, as in the equations.  (batch_forward.forward squashes each distinct node once
    # and multiplies each distinct (slot, node) once, rows.share_slots: same numbers.)
    x = params.X[np.asarray(ctx).T]
    u = capsules.squash(x.reshape(-1, D)).reshape(x.shape)
    show("x", x, "(I, P, d) x = X[ctx.T], position-major")
    show("|x|^2", np.sum(x * x, axis=2), "(I, P)")
    show("u", u, "(I, P, d) u = squash(x) = g(|x|^2) x")
    show("|u|", np.linalg.norm(u, axis=2), "(I, P) all below 1")

    section(
        "Forward: predictions",
        "docs/math.md#prediction, blas.segment_matmul, capsules.gather_rows",
    )
    u_hat = fw.u_hat
    show("u_hat", u_hat, "(I, P, k) u_hat_i = W_i u_i")
    same_u_hat = np.allclose(u_hat, reference.predict(u, params.W), rtol=1e-12, atol=1e-15)
    print(
        f"{fw.u_hat_rows.shape[0]} distinct (slot, node) rows for {u_hat.shape[0] * P} "
        f"(slot, pair) products; equal to reference.predict pair by pair: {same_u_hat}"
    )

    section(
        f"Forward: routing, m = {M}, rule 'paper', scale = {scale:g}",
        "docs/math.md#routing, capsules.route",
    )
    c, s, e_all = fw.c, fw.s, fw.e_all
    show("c", c, "(m, P, I) c = scale softmax(b) of every iteration; c[0] = 1")
    show("s", s, "(m, P, k) s = sum_i c_i u_hat_i of every iteration")
    show("e", e_all, "(m, P, k) e = squash(s) of every iteration")
    e = np.ascontiguousarray(fw.e)
    show("e_v", e, "(P, k) the capsule output e = e[m-1]")

    section(
        "Forward: sampled softmax",
        "docs/math.md#sampled-softmax, capsules.output_logits, capsules.softmax_rows",
    )
    log_q_true, log_q_sampled = np.log(q_true), np.log(q_sampled)
    z_t, z_s = capsules.output_logits(
        e, params.O, params.bias, targets, sampled, log_q_true, log_q_sampled
    )
    show("z_t", z_t, "(P,) z_t = e . o_t + bias_t - log Q(t)")
    show("z_s", z_s, "(P, S) z_s = e . o_s + bias_s - log Q(s); hits are ignored")
    loss, d_z_t, d_z_s = capsules.softmax_rows(z_t, z_s, targets, sampled)
    L = float(loss.mean())
    show("loss_p", loss, "(P,) -z_t + log(exp z_t + sum_{s != t} exp z_s)")
    print(f"L = mean_p loss_p = {L:.6f}")

    # ------------------------------------------------------------------ backward
    section("Backward: softmax rows", "docs/math.md#sampled-softmax, capsules.softmax_rows")
    show("d_z_t", d_z_t, "(P,) (softmax_t - 1) / P")
    show("d_z_s", d_z_s, "(P, S) softmax_s / P, 0 on accidental hits")
    check(
        "dL/dz_t (capsules.softmax_rows)",
        d_z_t,
        reference.numeric_grad(lambda: mean_loss_of_logits(z_t, z_s, targets, sampled), z_t),
    )
    check(
        "dL/dz_s (capsules.softmax_rows)",
        d_z_s,
        reference.numeric_grad(lambda: mean_loss_of_logits(z_t, z_s, targets, sampled), z_s),
    )

    section(
        "Backward: output layer",
        "docs/math.md#sampled-softmax, grads.sampled_softmax_backward_rows",
    )
    d_e, o_rows, d_O_rows, d_bias_rows = grads.sampled_softmax_backward_rows(
        e, params.O, targets, sampled, d_z_t, d_z_s
    )
    d_e = np.ascontiguousarray(d_e)
    d_O = np.zeros_like(params.O)
    d_bias = np.zeros_like(params.bias)
    d_O[o_rows], d_bias[o_rows] = d_O_rows, d_bias_rows
    show("d_e", d_e, "(P, k) d_z_t o_t + sum_s d_z_s o_s")
    show("rows", o_rows, "the rows of O the batch touches: targets and V'")
    show("d_O", d_O, "(N, k) non-zero only on those rows")
    show("d_bias", d_bias, "(N,)")
    ref = reference.sampled_softmax_backward(e, params.O, targets, sampled, d_z_t, d_z_s)
    same_out = all(
        np.allclose(a, b, rtol=1e-12, atol=1e-15) for a, b in zip(ref, (d_e, d_O, d_bias))
    )
    print(f"equal to reference.sampled_softmax_backward (dense): {same_out}")

    def loss_of_output_layer():
        return reference.sampled_softmax_loss(
            e, params.O, params.bias, targets, sampled, q_true, q_sampled
        )

    for name, grad, arr in (("e", d_e, e), ("O", d_O, params.O), ("bias", d_bias, params.bias)):
        check(
            f"dL/d{name} (grads.sampled_softmax_backward_rows)",
            grad,
            reference.numeric_grad(loss_of_output_layer, arr),
        )

    section(
        "Backward: routing, both rules and both gradient modes",
        "docs/math.md#routing-backward, grads.route_backward",
    )
    by_mode = {}
    for rule in ("paper", "sabour"):
        for exact in (True, False):
            c_r, s_r, e_r = capsules.route(u_hat, M, scale, rule)
            d_u_hat_r = grads.route_backward(u_hat, c_r, s_r, e_r, d_e, scale, rule, exact)
            if exact:
                # f(u_hat) = <e(u_hat), d_e> through all m iterations
                def f_route(rule=rule):
                    return dot(capsules.route(u_hat, M, scale, rule)[2][M - 1], d_e)
            else:
                # c frozen at the forward values: f = <squash(sum_i c_i u_hat_i), d_e>
                c_frozen = c_r[M - 1].copy()

                def f_route(c_frozen=c_frozen):
                    s_f = np.einsum("pi,ipk->pk", c_frozen, u_hat)
                    return dot(squash_rows(s_f), d_e)

            mode = "exact" if exact else "stop, c frozen"
            check(f"dL/du_hat ({rule}, {mode})", d_u_hat_r, reference.numeric_grad(f_route, u_hat))
            by_mode[rule, exact] = d_u_hat_r
    d_u_hat = by_mode[cfg.routing_rule, cfg.grad_mode == "exact"]
    for rule in ("paper", "sabour"):
        diff = reference.rel_error(by_mode[rule, True], by_mode[rule, False])
        print(
            f"  rule {rule!r}: exact and stop gradients differ by {diff:.1e} (relative): "
            f"the path through c"
        )
    show("d_u_hat", d_u_hat, "(I, P, k) rule 'paper', exact: the one the model uses")

    section("Backward: predictions", "docs/math.md#prediction, reference.predict_backward")
    # pair by pair, as the equations; core.loss_and_row_grads sums d_u_hat over the pairs
    # that share a row first (grads.gather_rows_backward): the same numbers
    d_W, d_u = reference.predict_backward(u, params.W, d_u_hat)
    show("d_W", d_W, "(I, k, d) d_W_i = sum_p d_u_hat_i u_i^T")
    show("d_u", d_u, "(I, P, d) d_u_i = W_i^T d_u_hat_i")
    check(
        "dL/dW (reference.predict_backward)",
        d_W,
        reference.numeric_grad(lambda: dot(reference.predict(u, params.W), d_u_hat), params.W),
    )
    check(
        "dL/du (reference.predict_backward)",
        d_u,
        reference.numeric_grad(lambda: dot(reference.predict(u, params.W), d_u_hat), u),
    )

    section(
        "Backward: first squash and the gather",
        "docs/math.md#squash, grads.squash_backward, grads.scatter_add_rows",
    )
    d_x = grads.squash_backward(x.reshape(-1, D), d_u.reshape(-1, D)).reshape(x.shape)
    show("d_x", d_x, "(I, P, d) g d_u + 2 g'(|x|^2) (x . d_u) x")
    check(
        "dL/dx (grads.squash_backward)",
        d_x,
        reference.numeric_grad(lambda: dot(squash_rows(x), d_u), x),
    )
    d_X = np.zeros_like(params.X)
    grads.scatter_add_rows(d_X, fw.rows.ctx_t.reshape(-1), d_x.reshape(-1, D))
    show("d_X", d_X, "(N, d) d_x summed into the rows of the context nodes")

    # ------------------------------------------------------------------ end to end
    section("The whole step: core.loss_and_grads", "docs/math.md#the-whole-batch")
    L2, gr = loss_and_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    pairs = ((L, L2), (d_W, gr.W), (d_O, gr.O), (d_bias, gr.bias), (d_X, gr.X))
    same = all(np.allclose(a, b, rtol=1e-12, atol=1e-15) for a, b in pairs)
    print(
        f"L = {L2:.6f}; the loss and gradients above, assembled step by step, "
        f"equal loss_and_grads's: {same}"
    )

    def full_loss():
        f = forward(params, ctx, cfg)
        return reference.sampled_softmax_loss(
            f.e, params.O, params.bias, targets, sampled, q_true, q_sampled
        )

    for name in ("W", "O", "bias", "X"):
        check(
            f"dL/d{name} end to end (core.loss_and_grads)",
            getattr(gr, name),
            reference.numeric_grad(full_loss, getattr(params, name)),
        )

    # ------------------------------------------------------------------ skip-gram term
    section("Beyond the paper: the skip-gram term", "docs/math.md#the-skip-gram-term")
    # x_u . o_v needs d = k: a copy of the model with trained x of size k
    sg = init_params(N_NODES, K, K, n_slots, np.random.default_rng(SEED + 1), dtype=np.float64)
    sg.W *= W_STD / 0.01
    sg.X *= 3.0  # larger x: the term's logits away from 0
    lam = 0.5
    for negatives in (0, 2):
        cfg_sg = ModelConfig(routing_iters=M, skipgram_weight=lam, skipgram_negatives=negatives)
        neg = None
        if negatives:
            neg = np.empty((P * n_slots, negatives), dtype=np.int64)
            skipgram.negative_positions(0, 0, P * n_slots, negatives, NUM_SAMPLED, neg)
            show("negatives", neg, "(M, K) positions in V' (skipgram.negative_positions)")
        parts = {}
        L_sg, g_sg = loss_and_grads(
            sg, ctx, targets, sampled, q_true, q_sampled, cfg_sg, parts=parts
        )
        form = f"{negatives} negatives per item" if negatives else "sampled softmax over V'"
        print(
            f"{form}: L = L_caps + {lam:g} L_sg = {parts['capsule']:.6f} + {lam:g} x "
            f"{parts['skipgram']:.6f} = {L_sg:.6f}"
        )

        def total(neg=neg, cfg_sg=cfg_sg):
            f = forward(sg, ctx, cfg_sg)
            caps = reference.sampled_softmax_loss(
                f.e, sg.O, sg.bias, targets, sampled, q_true, q_sampled
            )
            return caps + lam * reference.skipgram_loss(
                sg.X, sg.O, sg.bias, ctx, targets, sampled, q_true, q_sampled, neg
            )

        check(f"L_sg itself ({form})", np.array(parts["skipgram"]), np.array(
            reference.skipgram_loss(sg.X, sg.O, sg.bias, ctx, targets, sampled, q_true,
                                    q_sampled, neg)))  # fmt: skip
        for name in ("W", "O", "bias", "X"):
            check(
                f"dL/d{name} with the term ({'NS' if negatives else 'softmax'})",
                getattr(g_sg, name),
                reference.numeric_grad(total, getattr(sg, name)),
            )

    # ------------------------------------------------------------------ Adam
    section(f"One Adam step, lr = {LR:g}", "docs/math.md#adam, optim.Adam")
    names = params.trainable()
    before = {name: getattr(params, name).copy() for name in names}
    opt = Adam({name: getattr(params, name) for name in names}, lr=LR)
    _, row_grads = loss_and_row_grads(params, ctx, targets, sampled, q_true, q_sampled, cfg)
    opt.step(row_grads)  # as training does: the same gradients, row-sparse
    print(f"t = {opt.t}, lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t) = {opt.lr_t():.6g}")
    adam_ok = True
    for name in names:
        step = getattr(params, name) - before[name]
        grad = getattr(gr, name)
        # first step from m = v = 0: step = -lr g / (|g| + eps / sqrt(1 - beta2))
        closed = -LR * grad / (np.abs(grad) + opt.eps / np.sqrt(1.0 - opt.beta2))
        adam_ok &= bool(np.allclose(step, closed, rtol=1e-9, atol=1e-15))
        moved = np.count_nonzero(step)
        print(
            f"  {name:<5} max |step| {np.max(np.abs(step)):.4g} (about lr where g != 0); "
            f"{moved} of {step.size} entries moved"
        )
    print(f"Adam's first step equals -lr g / (|g| + eps / sqrt(1 - beta2)): {adam_ok}")
    print(f"loss before {L:.6f}, after {full_loss():.6f}")

    # ------------------------------------------------------------------ verdict
    print()
    failed = [name for name, _, ok in RESULTS if not ok]
    if not same:
        failed.append("step-by-step pass != core.loss_and_grads")
    if not (same_u_hat and same_out):
        failed.append("training's kernels != the float64 reference")
    if not adam_ok:
        failed.append("Adam step != closed form")
    if failed:
        what = ", ".join(failed)
        print(f"FAILED: {what} ({len(RESULTS)} gradient checks run)")
        return 1
    print(f"all {len(RESULTS)} gradient checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
