"""`graph.memory_analysis()` per rank (test_memory_per_rank.py): an Adam step of an MLP,
data parallel and under ZeRO stages 1 and 3. Each rank's argument and output bytes equal the
numpy bytes of its local shards (batch, parameters, optimizer state); ZeRO-1 holds 1/N of the
optimizer state and ZeRO-3 of the parameters too, so the arguments shrink by what the sharding
says, and so does the peak. Prints each layout's figures, then `rank R: N checks passed`."""

from __future__ import annotations

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
import flow.nn.functional as F
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S0, B = sbp.split(0), sbp.broadcast
pl = placement("cpu", list(range(world)))
check = Checks(rank)


class Step(nn.Graph):
    def __init__(self, model, opt, stage: int):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


def local_bytes(tensors) -> int:
    return sum(t.to_local().numpy().nbytes for t in tensors)


def train(stage: int) -> dict:
    flow.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 16)).to_global(pl, B)
    opt = flow.optim.Adam(model.parameters(), lr=1e-3)
    step = Step(model, opt, stage)
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((32, 64)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 16, 32))
    x, y = (v.to_global(pl, B).to_global(sbp=S0) for v in (x, y))
    for _ in range(2):  # the steady step
        loss = step(x, y)
    memory = step.memory_analysis()
    params = local_bytes(model.parameters())
    tensors = [v for s in opt.state.values() for v in s.values() if isinstance(v, flow.Tensor)]
    state = local_bytes(tensors)  # the moments, and each parameter's 0-d step count
    moments = local_bytes(v for v in tensors if v.ndim)
    lr = np.float32(0).nbytes  # the learning rate, a 0-d input of the step
    tag = f"zero-{stage}" if stage else "data parallel"
    check(memory.argument_size_in_bytes == local_bytes([x, y]) + params + state + lr,
          f"{tag}: arguments {memory.argument_size_in_bytes} bytes, expected the local batch, "
          f"parameters ({params}), state ({state}) and lr")  # fmt: skip
    check(memory.output_size_in_bytes == local_bytes([loss]) + params + state,
          f"{tag}: outputs {memory.output_size_in_bytes} bytes, expected the loss, "
          f"parameters ({params}) and state ({state})")  # fmt: skip
    print(f"rank {rank} {tag}: {memory!r}", flush=True)
    full = sum(p.numel() * 4 for p in model.parameters())
    return {"memory": memory, "params": params, "state": moments, "full": full}


dp, z1, z3 = train(0), train(1), train(3)
full = dp["full"]
check(dp["params"] == full and dp["state"] == 2 * full, "data parallel holds everything")
shard = sum(np.array_split(np.arange(p), world)[rank].size * q
            for p, q in ((256, 64 * 4), (256, 4), (16, 256 * 4), (16, 4)))  # rows x row bytes
check(z1["state"] == 2 * shard and z1["params"] == full, f"zero-1: state {z1['state']} bytes")
check(z3["state"] == 2 * shard and z3["params"] == shard, f"zero-3: params {z3['params']} bytes")
arg = {k: v["memory"].argument_size_in_bytes for k, v in (("dp", dp), ("z1", z1), ("z3", z3))}
check(arg["dp"] - arg["z1"] == 2 * (full - shard),
      f"zero-1 takes 2 x (full - shard) fewer argument bytes: {arg}")  # fmt: skip
check(arg["dp"] - arg["z3"] == 3 * (full - shard),
      f"zero-3 takes 3 x (full - shard) fewer argument bytes: {arg}")  # fmt: skip
peaks = [v["memory"].peak_live_bytes for v in (dp, z1, z3)]
check(peaks[0] > peaks[1] > peaks[2], f"the peak shrinks with the sharding: {peaks}")
check.done()
