"""A data-parallel MLP training step traced by `flow.jit` on every rank, then compiled for
this rank with native collectives for cuda and rocm (no GPU needed to compile). Prints
`rank R: TARGET all_reduce=N channels=M vmfb=BYTES` per target."""

from __future__ import annotations

import sys

import numpy as np

import flow
import flow.env
import flow.nn as nn
import flow.nn.functional as F
from flow.compile.per_rank import lower_for_rank
from flow.distributed.placement import placement, sbp
from flow.targets import compile_mlir

rank, world = flow.env.get_rank(), flow.env.get_world_size()
pl = placement("cpu", list(range(world)))
flow.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
model.to_global(pl, sbp.broadcast)
opt = flow.optim.SGD(model.parameters(), lr=0.1)


def step(x, y):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


rng = np.random.default_rng(0)
x = flow.tensor(rng.standard_normal((16, 32)).astype(np.float32))
y = flow.tensor(rng.integers(0, 10, 16))
x, y = (t.to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0)) for t in (x, y))
lowered = flow.jit(step).lower(x, y)
assert lowered.is_global
for target in sys.argv[1:]:
    text, groups = lower_for_rank(lowered.module, rank, target, infer_sbp=False)
    assert "comm." not in text and groups == [tuple(range(world))], (text, groups)
    vmfb = compile_mlir(text, target)
    reduces = text.count('"flow.collective.all_reduce"')
    channels = text.count('"flow.channel.split"')
    print(f"rank {rank}: {target} all_reduce={reduces} channels={channels} vmfb={len(vmfb)}")
