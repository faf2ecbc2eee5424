"""``ShardServer``: one shard of the N-row tables and their lazy-Adam state (the Ray
actor of a server wraps it; tests and benchmarks call it directly)."""

import os
import time

import numpy as np

from ...errors import InputError
from ...model.params import slot_major
from ...model.row_grad import RowGrad
from ..step.optim import Adam
from .replica import merge_moments, merge_rows, rows_of, shard_moments
from .shards import peak_rss, set_threads, shard_rows


class ShardServer:
    """One shard of the tables and their lazy-Adam state (plain Python; the Ray actor
    wraps it).  ``owns_W``: this shard also holds W and its moments."""

    def __init__(
        self, shard, n_shards, n_nodes, dim, feat_dim, n_slots, fixed_features, owns_W, threads=1
    ):
        set_threads(threads)
        self.shard, self.n_shards = shard, n_shards
        self.n_rows = shard_rows(n_nodes, n_shards, shard)
        self.fixed_features = fixed_features
        self.owns_W = owns_W
        self.arrays = {
            "O": np.zeros((self.n_rows, dim), dtype=np.float32),
            "bias": np.zeros(self.n_rows, dtype=np.float32),
            "X": np.zeros((self.n_rows, feat_dim), dtype=np.float32),
        }
        if owns_W:
            self.arrays["W"] = slot_major(np.zeros((n_slots, dim, feat_dim), dtype=np.float32))
        self.trainable = [
            n
            for n in ("W", "O", "bias", "X")
            if n in self.arrays and not (n == "X" and fixed_features)
        ]
        self.opt = Adam({n: self.arrays[n] for n in self.trainable}, lr=None)  # rates: apply's
        self.pulled = self.pushed = 0  # bytes served / received
        self.seconds = dict(apply=0.0, pushes=0)

    def pid(self):
        return os.getpid()

    def set_rows(self, name, first_global, values):
        """Store the rows of global nodes [first_global, first_global + len(values))
        that this shard owns (the driver streams initial values in chunks)."""
        if name == "W":
            self.arrays["W"][...] = values
            return
        nodes = np.arange(first_global, first_global + values.shape[0])
        mine = nodes % self.n_shards == self.shard
        self.arrays[name][nodes[mine] // self.n_shards] = values[mine]

    def pull(self, o_rows, x_rows, with_W):
        """O and bias rows ``o_rows``, X rows ``x_rows`` (local rows), and W (as its
        contiguous (I, d, k) buffer) if asked."""
        a = self.arrays
        out = [
            a["O"][o_rows],
            a["bias"][o_rows],
            a["X"][x_rows],
            a["W"].transpose(0, 2, 1) if with_W else None,
        ]
        self.pulled += sum(x.nbytes for x in out if x is not None)
        return out

    def apply(self, steps, rates, *pushes):
        """Apply the pushes of a round in rank order: push r is one lazy-Adam step with
        step count ``steps[r]`` (1-based t) and rate ``rates[r]``: optim.adam_span on
        each row it carries (and every row of W), fused._adam's arithmetic."""
        t0 = time.perf_counter()
        for t, lr, push in zip(steps, rates, pushes):
            if push.get("skip"):  # a non-finite loss: no update (as on one machine)
                continue
            self.pushed += sum(v.nbytes for v in push.values() if isinstance(v, np.ndarray))
            self.opt.t = t - 1  # step() increments t
            rows = {
                "O": RowGrad(push["o_rows"], push["d_O"]),
                "bias": RowGrad(push["o_rows"], push["d_bias"]),
            }
            if not self.fixed_features:
                rows["X"] = RowGrad(push["x_rows"], push["d_X"])
            if self.owns_W:  # every row of W
                d_W_t = push["d_W_t"]
                rows["W"] = RowGrad.every_row(d_W_t.reshape(-1, d_W_t.shape[2]))
            self.opt.step(rows, lazy=True, lr=lr)
        self.seconds["apply"] += time.perf_counter() - t0
        self.seconds["pushes"] += len(pushes)
        return True

    def moments(self, name, first, last):
        """Adam's m and v of this shard's rows of global nodes [first, last) (``rows``),
        or of W whole, as its (I, d, k) buffer."""
        return shard_moments(self, name, first, last)

    def merge(self, *pushes):
        """Replica rounds: merge the P workers' changed rows (``pushes`` in rank order,
        each {name: (local rows, values)}) into this shard (replica.merge_rows) and
        return (the merged rows {name: (rows, values)} for the workers, or None when
        there is one worker: its tables are this shard's already; True)."""
        return self._merge(pushes, lambda name: [rows_of(name, self.arrays[name])], merge_rows)

    def merge_moments(self, *pushes):
        """Replica rounds, before a checkpoint (and after every round with
        --sync-moments round): merge the P workers' moments of the rows they changed
        since the last flush (``pushes``, each {name: (local rows, m, v)}) into this
        shard's (replica.merge_moments); returns as ``merge`` does."""

        def tables(name):
            return [rows_of(name, self.opt.m[name]), rows_of(name, self.opt.v[name])]

        return self._merge(pushes, tables, merge_moments)

    def _merge(self, pushes, tables, merge):
        t0 = time.perf_counter()
        merged = {}
        for name in self.trainable:
            if name == "W" and not self.owns_W:
                continue
            given = [p.get(name) for p in pushes]
            self.pushed += sum(a.nbytes for g in given if g is not None for a in g)
            update = merge(*tables(name), given)
            if update is not None:
                merged[name] = update
        self.seconds["apply"] += time.perf_counter() - t0
        self.seconds["pushes"] += len(pushes)
        if len(pushes) < 2:
            return None, True
        self.pulled += sum(a.nbytes for entry in merged.values() for a in entry)
        return merged, True

    def finite(self):
        return all(bool(np.isfinite(self.arrays[n]).all()) for n in self.trainable)

    def table(self, name):
        return self.arrays[name]

    def rows(self, name, first, last):
        """This shard's rows of global nodes [first, last) (a view: local rows
        ceil((first - s) / S) .. ceil((last - s) / S))."""
        S, s = self.n_shards, self.shard
        return self.arrays[name][shard_rows(first, S, s) : shard_rows(last, S, s)]

    def stats(self):
        def size(n):
            return self.arrays[n].nbytes + (
                self.opt.m[n].nbytes + self.opt.v[n].nbytes if n in self.trainable else 0
            )

        return dict(
            rows=self.n_rows,
            row_bytes=sum(size(n) for n in ("O", "bias", "X")),
            held_bytes=sum(size(n) for n in self.arrays),
            pulled=self.pulled,
            pushed=self.pushed,
            peak_rss=peak_rss(),
            **self.seconds,
        )

    def save(self, path):
        from ...io.npy import save_npz

        arrays = {f"param_{n}": self.arrays[n] for n in self.arrays}
        for n in self.trainable:
            arrays[f"m_{n}"], arrays[f"v_{n}"] = self.opt.m[n], self.opt.v[n]
        if self.owns_W:  # W is saved in its (I, d, k) memory order
            for key in ("param_W", "m_W", "v_W"):
                arrays[key] = arrays[key].transpose(0, 2, 1)
        save_npz(
            path,
            overwrite=True,
            shard=np.int64(self.shard),
            n_shards=np.int64(self.n_shards),
            **arrays,
        )
        return str(path)

    def load(self, path):
        from ...io.npy import load_npz

        z = load_npz(path)
        if int(z["shard"]) != self.shard or int(z["n_shards"]) != self.n_shards:
            raise InputError(
                f"{path}: shard {int(z['shard'])} of {int(z['n_shards'])}, "
                f"expected {self.shard} of {self.n_shards}"
            )
        for n in self.arrays:
            self._copy(self.arrays[n], z[f"param_{n}"], n)
        for n in self.trainable:
            self._copy(self.opt.m[n], z[f"m_{n}"], n)
            self._copy(self.opt.v[n], z[f"v_{n}"], n)
        return True

    @staticmethod
    def _copy(dst, src, name):
        if name == "W":
            dst.transpose(0, 2, 1)[...] = src
        else:
            dst[...] = src
