"""The results of node classification for people and files: a plain-text table of any
protocol's result (:func:`format_table`) and its JSON form (:func:`jsonable`)."""

from __future__ import annotations

import numpy as np


def jsonable(obj, finite=True):
    """``obj`` with NumPy arrays and scalars turned into lists and Python numbers, and
    (``finite``) every NaN or infinite float as None (JSON null; NaN is not JSON)."""
    import math

    if isinstance(obj, dict):
        return {k: jsonable(v, finite) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, finite) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist(), finite)
    if isinstance(obj, np.generic):
        obj = obj.item()
    if finite and isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def format_table(results) -> str:
    """Plain-text table (percentages, mean +- std) of any result of the protocols
    (single-label, epoch selection, multi-label)."""
    protocol = results.get("protocol")
    if protocol in ("single-label", "epoch-selection"):
        with_epoch = protocol == "epoch-selection"
        with_macro = "test_macro_f1" in results  # and the C each split used
        header = ["split", "val acc %", "test acc %"] + (["epoch"] if with_epoch else [])
        header += ["test macro-F1 %", "C"] if with_macro else []
        rows = []
        for s in range(len(results["test"])):
            row = [str(s), _pct(results["val"][s]), _pct(results["test"][s])]
            row += [str(int(results["epochs"][s]))] if with_epoch else []
            row += [_pct(results["test_macro_f1"][s]), f"{results['C'][s]:g}"] if with_macro else []
            rows.append(row)
        rows.append(
            [
                "mean",
                _pm(results["val_mean"], results["val_std"]),
                _pm(results["test_mean"], results["test_std"]),
            ]
            + ([""] if with_epoch else [])
            + ([_pct(results["test_macro_f1_mean"]), ""] if with_macro else [])
        )
    elif protocol == "multi-label":
        header = ["train fraction", "micro-F1 %", "macro-F1 %"]
        rows = [
            [
                f"{100 * g:g}%",
                _pm(results["micro_mean"][f], results["micro_std"][f]),
                _pm(results["macro_mean"][f], results["macro_std"][f]),
            ]
            for f, g in enumerate(results["fractions"])
        ]
    else:
        raise ValueError(f"results: unknown protocol {protocol!r}; pass a result of this module")
    widths = [max(len(r[c]) for r in [header] + rows) for c in range(len(header))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r, widths)) for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _pct(value: float) -> str:
    return "-" if np.isnan(value) else f"{100 * value:.2f}"


def _pm(mean: float, std: float) -> str:
    if np.isnan(mean):
        return "-"
    return f"{100 * mean:.2f} +- {100 * std:.2f}"
