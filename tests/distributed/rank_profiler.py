"""A profiled data-parallel nn.Graph step on every rank, exported as one trace: the path is
argv[1]. The step's parameters are broadcast global tensors and its batch is split, so the
compiled per-rank program all-reduces the weight gradients through the `comm` module; an
eager all-reduce of a global tensor runs too. Prints `rank R: profiled` when done."""

from __future__ import annotations

import sys

import numpy as np

import flow
import flow.nn as nn
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
pl = placement("cpu", list(range(world)))
flow.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to_global(pl, sbp.broadcast)
opt = flow.optim.SGD(model.parameters(), lr=0.1)


class Step(nn.Graph):
    def __init__(self):
        super().__init__(sync_compile=True)  # compiled calls from the first step on
        self.model = model
        self.add_optimizer(opt)

    def build(self, x, y):
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


step = Step()
rng = np.random.default_rng(0)
x = flow.tensor(rng.standard_normal((8, 8)).astype(np.float32))
y = flow.tensor(rng.integers(0, 4, 8).astype(np.int64))
x = x.to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0))
y = y.to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0))
step(x, y)  # traced and compiled before the profile: what is profiled is the steady step

with flow.profiler.profile() as prof:
    for _ in range(3):
        loss = step(x, y)
        prof.step()
    partial = flow.ones(4).to_global(pl, sbp.partial_sum).to_global(sbp=sbp.broadcast)
path = prof.export_chrome_trace(sys.argv[1])
assert (path is not None) == (rank == 0), path
print(f"rank {rank}: profiled", flush=True)
