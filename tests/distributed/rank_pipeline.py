"""Pipeline-parallel nn.Graph training on every rank: two stages (`set_stage`), four
micro-batches, SGD with momentum, under the 1F1B and GPipe schedules, against single-device
training with the same effective batch. On 2 ranks each stage is one rank; on 4 ranks each
stage is two ranks that also split the stage's layers tensor-parallel (`tp`) or its batch
data-parallel (`dp`): pipeline x tensor / data parallel through SBP and stages only.
Usage: rank_pipeline.py [tp|dp]. Prints `rank R: N checks passed` at the end."""

from __future__ import annotations

import functools
import sys

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
import flow.nn.functional as F
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
mode = sys.argv[1] if len(sys.argv) > 1 else "tp"
S, B = sbp.split, sbp.broadcast
half = world // 2
P0 = placement("cpu", list(range(half)))
P1 = placement("cpu", list(range(half, world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4)


def stages() -> tuple[nn.Module, nn.Module]:
    flow.manual_seed(0)
    first = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
    second = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))
    return first, second


# Within a stage of two ranks: Megatron-style splits (tp) or replicated weights (dp).
TP0 = {"0.weight": S(0), "0.bias": S(0)}
TP1 = {"0.weight": S(1), "0.bias": B, "2.weight": B, "2.bias": B}


class Step(nn.Graph):
    def __init__(self, first, second, opt, *, staged: bool, schedule: str = "1f1b"):
        super().__init__()
        self.first, self.second = first, second
        self.add_optimizer(opt)
        if staged:
            self.first.to(nn.graph.GraphModule).set_stage(stage_id=0, placement=P0)
            self.second.to(nn.graph.GraphModule).set_stage(stage_id=1, placement=P1)
            self.config.set_pipeline_schedule(schedule)
        self.config.set_gradient_accumulation_steps(4)

    def build(self, x, y):
        loss = F.cross_entropy(self.second(self.first(x)), y)
        loss.backward()
        return loss


def sgd(first, second):
    return flow.optim.SGD([*first.parameters(), *second.parameters()], lr=0.5, momentum=0.9)


rng = np.random.default_rng(0)
batches = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
           for _ in range(3)]  # fmt: skip
ref = stages()
ref_step = Step(*ref, sgd(*ref), staged=False)
want = [float(ref_step(flow.tensor(x), flow.tensor(y)).numpy()) for x, y in batches]

for schedule in ("1f1b", "gpipe"):
    first, second = stages()
    if world == 4 and mode == "tp":
        first.to_global(P0, lambda name, _: TP0[name])
        second.to_global(P1, lambda name, _: TP1[name])
        x_sbp = B
    else:
        first.to_global(P0, B)
        second.to_global(P1, B)
        x_sbp = S(0) if world == 4 else B
    step = Step(first, second, sgd(first, second), staged=True, schedule=schedule)
    for i, (x, y) in enumerate(batches):
        xb = flow.tensor(x).to_global(P0, B).to_global(sbp=x_sbp)
        yb = flow.tensor(y).to_global(P1, B)
        loss = step(xb, yb)
        check(loss.placement == P1, f"{schedule}: the loss is on the last stage")
        close(float(loss.numpy()), want[i], f"{schedule} step {i}: loss")
    for (name, p), q in zip([*first.named_parameters(), *second.named_parameters()],
                            [*ref[0].parameters(), *ref[1].parameters()]):  # fmt: skip
        check(p.placement in (P0, P1), f"{name} stays on its stage")
        close(p.numpy(), q.numpy(), f"{schedule}: {name} after 3 steps")

check.done()
