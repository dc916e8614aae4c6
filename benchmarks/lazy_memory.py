"""Resident memory of a `flow.lazy()` training loop with the cyclic garbage collector off.

Prints RSS (MB) and the number of tensors lazy mode tracks at a few steps; both stay flat
when nothing a step leaves behind waits for the collector. Usage:
`python benchmarks/lazy_memory.py [STEPS] [--optimizer sgd|adam]` (defaults 1500, adam).
"""

from __future__ import annotations

import argparse
import gc

import numpy as np
from _bench import machine

import flow
import flow.nn as nn
import flow.nn.functional as F
from flow.modes import lazy as _lazy


def rss_mb() -> float:
    """This process's resident set size, from /proc (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def run(steps: int, optimizer: str, report: tuple[int, ...]) -> dict[int, tuple[float, int]]:
    """Train a tiny MLP lazily for `steps` steps; {step: (rss MB, tracked tensors)} at `report`."""
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    params = model.parameters()
    opt = (flow.optim.Adam(params, lr=0.01) if optimizer == "adam"
           else flow.optim.SGD(params, lr=0.1, momentum=0.9))  # fmt: skip
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((8, 12)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 4, 8))
    seen: dict[int, tuple[float, int]] = {}
    gc.disable()
    try:
        with flow.lazy():
            for step in range(1, steps + 1):
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                loss.item()
                if step in report:
                    seen[step] = (rss_mb(), len(_lazy._tracked))
    finally:
        gc.enable()
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("steps", type=int, nargs="?", default=1500)
    ap.add_argument("--optimizer", choices=("sgd", "adam"), default="adam")
    ns = ap.parse_args()
    report = tuple(sorted({min(100, ns.steps), ns.steps // 2, ns.steps}))
    print(f"flow.lazy training, {ns.optimizer}, collector off [{machine()}]")
    for step, (mb, tracked) in run(ns.steps, ns.optimizer, report).items():
        print(f"step {step:6d}: rss {mb:8.1f} MB, tracked tensors {tracked}")


if __name__ == "__main__":
    main()
