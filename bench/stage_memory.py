"""Peak memory and time of each stage of one ``caps2ne train`` run.

Runs ``caps2ne_np.cli`` in this process with the given ``train`` arguments, samples the
resident set size (/proc/self/statm) every ``--every`` seconds in a thread, and gives
each sample to the stage the run's log lines say it is in: a stage starts with its
``<stage>: ... ...`` line (spectral.Stage: the spectral start, the stop rule's
structure measure, the propagation) and ends at the next line that is not its own;
between them, the rest of the run ("load and set-up" before training's first line,
"training", "write").  Prints one line per stage (seconds, peak RSS) and the
process's peak (getrusage), the figure ``/usr/bin/time -v`` reports.

    python bench/scale.py --stages --graph /tmp/g200k.txt --out /tmp/o.emb --overwrite \\
        --epochs 1 --walks-per-node 1            # docs/results/scale_spectral.md
"""

import logging
import os
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, as cli.py runs it
STAGES = ("spectral start", "stop rule", "propagation")
TRAINING = ("compiling kernels", "counted nodes", "first step", "epoch ", "progress:")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Stages(logging.Handler):
    """Stage of the run from its log lines, and each stage's (seconds, peak RSS)."""

    def __init__(self):
        super().__init__()
        self.stage, self.t = "load and set-up", time.monotonic()
        self.order, self.peak, self.seconds = [self.stage], {self.stage: 0}, {}
        self.mutex = threading.Lock()  # not Handler.lock, which emit runs under

    def enter(self, stage):
        with self.mutex:
            if stage == self.stage:
                return
            now = time.monotonic()
            self.seconds[self.stage] = self.seconds.get(self.stage, 0.0) + now - self.t
            self.stage, self.t = stage, now
            if stage not in self.peak:
                self.order.append(stage)
                self.peak[stage] = 0
        self.sample()

    def sample(self):
        value = rss()
        with self.mutex:
            self.peak[self.stage] = max(self.peak[self.stage], value)

    def emit(self, record):
        msg = record.getMessage()
        name = msg.split(":", 1)[0]
        if msg.endswith(" ...") and name in STAGES:
            self.enter(name)
        elif msg.startswith(TRAINING):
            self.enter("training")
        elif self.stage not in ("load and set-up", "training") and not msg.startswith(name):
            self.enter("training" if self.stage != "propagation" else "write")
        elif self.stage == "propagation" and msg.startswith("written embeddings"):
            self.enter("write")

    def finish(self):
        self.enter("end")


def main(argv):
    every = 0.02
    if argv[:1] == ["--every"]:
        every, argv = float(argv[1]), argv[2:]
    from caps2ne_np.cli import cli

    stages = Stages()
    logging.getLogger("caps2ne_np").addHandler(stages)
    done = threading.Event()

    def sampler():
        while not done.wait(every):
            stages.sample()

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    t0 = time.monotonic()
    try:
        cli.main(["train", *argv], standalone_mode=False)
    finally:
        done.set()
        thread.join()
        stages.finish()
    wall = time.monotonic() - t0
    print(f"{'stage':<18} {'seconds':>8} {'peak RSS MiB':>13}")
    for stage in stages.order[:-1]:
        print(f"{stage:<18} {stages.seconds[stage]:8.1f} {stages.peak[stage] / 2**20:13.0f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'whole run':<18} {wall:8.1f} {peak:13.0f}")
