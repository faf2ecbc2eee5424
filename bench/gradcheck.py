"""Worst relative error of every hand-derived gradient against central differences
(float64, h = 1e-6), over the configurations the tests check: m in {1, 2, 3}, both
routing rules, both gradient modes, both coupling scales, trainable / fixed dense /
fixed sparse features, two random problems each.  Prints a table and writes
bench/results/gradcheck.json + .md.

    python bench/gradcheck.py
"""

import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import naive  # noqa: E402
from test_grads import CONFIGS, make_case  # noqa: E402

from caps2ne_np.core import ModelConfig, Params, SparseFeatures, forward, loss_and_grads  # noqa: E402


def main():
    rows, worst = [], 0.0
    for m, rule, mode, scale in CONFIGS:
        for features in ("trainable", "fixed", "sparse"):
            for seed in (0, 1):
                W, O, bias, X, ctx, targets, sampled, q_t, q_s = make_case(seed)
                cfg = ModelConfig(routing_iters=m, routing_rule=rule, routing_scale=scale,
                                  grad_mode=mode)
                if features == "sparse":
                    X[np.random.default_rng(seed + 100).random(X.shape) < 0.6] = 0.0
                    X[2] = 0.0
                    params = Params(W, O, bias, SparseFeatures.from_scipy(sp.csr_matrix(X),
                                                                          np.float64), True)
                else:
                    params = Params(W, O, bias, X, fixed_features=features != "trainable")
                _, g = loss_and_grads(params, ctx, targets, sampled, q_t, q_s, cfg)
                sc = float(ctx.shape[1]) if scale is None else scale
                c_fixed = forward(params, ctx, cfg)["c"][m - 1] if mode == "stop" else None

                def f():
                    return naive.loss(W, O, bias, X, ctx, targets, sampled, q_t, q_s, m, sc, rule,
                                      c_fixed)

                named = [("W", W, g.W), ("O", O, g.O), ("bias", bias, g.bias)]
                if features == "trainable":
                    named.append(("X", X, g.X))
                for name, arr, analytic in named:
                    err = naive.rel_error(analytic, naive.numeric_grad(f, arr, h=1e-6))
                    worst = max(worst, err)
                    rows.append(dict(m=m, rule=rule, mode=mode, scale=scale, features=features,
                                     seed=seed, param=name, rel_error=err))
    by_param = {}
    for r in rows:
        by_param[r["param"]] = max(by_param.get(r["param"], 0.0), r["rel_error"])
    table = ["| parameter | worst relative error | checks |", "| --- | --- | --- |"]
    for name, err in by_param.items():
        table.append(f"| {name} | {err:.2e} | {sum(r['param'] == name for r in rows)} |")
    text = "\n".join(table)
    print(text)
    print(f"worst over {len(rows)} checks: {worst:.2e}")
    from common import RESULTS as out   # bench/results or $CAPS2NE_BENCH_RESULTS
    out.mkdir(parents=True, exist_ok=True)
    (out / "gradcheck.json").write_text(json.dumps(dict(worst=worst, checks=rows), indent=1))
    (out / "gradcheck.md").write_text(
        "# Gradient checks: hand-derived vs central differences (float64, h = 1e-6)\n\n"
        "`python bench/gradcheck.py`: every configuration of tests/test_grads.py "
        "(m in {1,2,3}, rules paper/sabour, modes exact/stop, scale q-1 / 1, trainable, "
        "fixed dense and fixed sparse features, 2 random problems each). Relative error = "
        "max |a - n| / max(|a| + |n|).\n\n" + text + f"\n\nWorst over {len(rows)} checks: "
        f"{worst:.2e} (bar: 1e-6).\n")


if __name__ == "__main__":
    main()
