"""clip_grad_norm_ / clip_grad_value_ of a tensor-parallel MLP (S(0) and S(1) split weights)
on every rank against the same model on one device: the total norm is the global one and the
clipped gradients match. Prints `rank R: N checks passed`."""

from __future__ import annotations

import functools
import math

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
from flow.distributed.placement import placement, sbp
from flow.lowering import run_pipeline
from flow.lowering.print_comm_plan import communication_plan

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B = sbp.split, sbp.broadcast
pl = placement("cpu", list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-5, atol=1e-6, shapes=False)
TP = {"0.weight": S(0), "0.bias": S(0), "2.weight": S(1), "2.bias": B}

rng = np.random.default_rng(0)
X = rng.standard_normal((6, 5)).astype(np.float32)


def mlp() -> nn.Module:
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))  # 7: uneven on 2 ranks


def grads_of(model: nn.Module, x) -> None:
    model.zero_grad()
    (model(x) ** 2).sum().backward()


ref = mlp()
grads_of(ref, flow.tensor(X))
raw = [p.grad.numpy().copy() for p in ref.parameters()]
flat = np.concatenate([g.ravel() for g in raw]).astype(np.float64)

for norm_type in (2.0, 1.0, 3.0, math.inf):
    want = np.linalg.norm(flat, norm_type)
    for model, x in ((ref, flow.tensor(X)),
                     (mlp().to_global(pl, lambda n, _: TP[n]), flow.tensor(X).to_global(pl, B))):
        grads_of(model, x)
        max_norm = 0.25 * want
        total = nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)
        where = "global" if total.is_global else "local"
        close(total.numpy(), want, f"{where} total {norm_type}-norm")
        for (name, p), g in zip(model.named_parameters(), raw):
            if p.is_global:
                check(p.grad.is_global and p.grad.sbp == (TP[name],), f"{name} grad keeps SBP")
            close(p.grad.numpy(), g * (max_norm / (want + 1e-6)), f"{where} clipped {name}")

tp = mlp().to_global(pl, lambda n, _: TP[n])
grads_of(tp, flow.tensor(X).to_global(pl, B))
nn.utils.clip_grad_value_(tp.parameters(), 0.1)
for p, g in zip(tp.parameters(), raw):
    close(p.grad.numpy(), np.clip(g, -0.1, 0.1), "clip_grad_value_ of global grads")

# A data-parallel nn.Graph step of a model with more parameters than an IREE dispatch may
# bind buffers (32): the norm over every gradient (each the result of its own all-reduce) and
# the clipped SGD update run compiled, against the same step on one device.
def deep() -> nn.Module:
    flow.manual_seed(1)
    return nn.Sequential(*[nn.Linear(4, 4) for _ in range(20)])  # 40 parameters


class ClipStep(nn.Graph):
    def __init__(self, model):
        super().__init__(sync_compile=True)
        self.model = model
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.1))

    def build(self, x):
        loss = self.model(x).square().mean()
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 0.01)
        return loss


XD = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32)
one, dp = deep(), deep().to_global(pl, B)
want_loss = ClipStep(one)(flow.tensor(XD)).numpy()
dp_step = ClipStep(dp)
got_loss = dp_step(flow.tensor(XD).to_global(pl, B).to_global(sbp=sbp.split(0))).numpy()
close(got_loss, want_loss, "40-parameter data-parallel clipped step: loss")
for (name, p), q in zip(dp.named_parameters(), one.parameters()):
    close(p.numpy(), q.numpy(), f"40-parameter data-parallel clipped step: {name}")

# each gradient is all-reduced once, right after backward (boxed to its parameter's B), and
# the norm and the update read it so: no other collective in the step
m = dp_step._engine.last_lowered.module.clone()
run_pipeline(m, f"flow-infer-sbp,flow-partition{{rank={rank}}}")
plan = [line for line in communication_plan(m)  # local slices and partials: no traffic
        if not line.startswith(("flow.local_slice", "flow.local_partial"))]  # fmt: skip
reduced = sorted(int(line.split("(")[1].split()[0]) for line in plan
                 if line.startswith("flow.all_reduce"))  # fmt: skip
want = sorted(p.numel() * 4 for p in dp.parameters())
check(reduced == want and len(plan) == len(want),
      f"one all-reduce per gradient and nothing else: {len(plan)} collectives, "
      f"all-reduced bytes {reduced}, gradients {want}")  # fmt: skip
check.done()
