"""Per-step metrics of a data-parallel nn.Graph step under `flow-run -n 2`, written by
`FLOW_METRICS` (the environment names the path; rank r writes `<stem>.rank<r><suffix>`).
Prints, on each rank, `rank R: grads B` with B the bytes of the step's gradients, which the
step all-reduces (parameters broadcast, batch split)."""

from __future__ import annotations

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
        super().__init__(sync_compile=True)
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
for _ in range(4):
    float(step(x, y).to_local().numpy())
grads = sum(p.to_local().numpy().nbytes for p in model.parameters())
print(flow.profiler.format_summary(flow.profiler.enable_metrics().summary(since=1)))
print(f"rank {rank}: grads {grads}", flush=True)
