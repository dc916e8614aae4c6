"""Global programs on a device placement (argv[1]: vulkan, cuda, ...), on every rank: a
flow.jit program with a split batch, then data-parallel and tensor-parallel nn.Graph training
steps with momentum, each equal to single-device training on the cpu. Collectives run over
MPI, the device's buffers staged through host memory (targets/collectives.py). Prints
`rank R: N checks passed` at the end."""

from __future__ import annotations

import functools
import sys

import numpy as np
from rank_checks import Checks
from rank_models import Step, mlp

import flow
import flow.env
from flow.distributed.placement import placement, sbp

DEVICE = sys.argv[1]
rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B = sbp.split, sbp.broadcast
pl = placement(DEVICE, list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4, atol=1e-5)
rng = np.random.default_rng(0)


def glob(value: np.ndarray, nd) -> flow.Tensor:
    return flow.tensor(value).to_global(pl, B).to_global(sbp=nd)


# ----------------------------------------------------------------- flow.jit: split batch, sums
X = rng.standard_normal((8, 4)).astype(np.float32)
W = rng.standard_normal((4, 3)).astype(np.float32)


def f(x, w):
    y = flow.matmul(flow.tanh(x), w)
    return y, (y * y).sum(), y.sum(0)


outs = flow.jit(f)(glob(X, S(0)), glob(W, B))
y = np.tanh(X) @ W
for o, want, name in zip(outs, [y, (y * y).sum(), y.sum(0)], ["y", "total", "column sums"]):
    close(o.numpy().reshape(np.shape(want)), want, f"jit {name} vs numpy")
    check(str(o.device) == f"{DEVICE}:0", f"jit {name} lives on {DEVICE}, got {o.device}")
check(outs[0].sbp == (S(0),), f"y keeps the batch split, got {outs[0].sbp}")


# ----------------------------------------------------------------- nn.Graph training steps
LAYOUTS = {
    "data-parallel": ({}, S(0)),
    "tensor-parallel": ({"0.weight": S(0), "0.bias": S(0), "2.weight": S(1)}, B),
}
batches = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
           for _ in range(3)]  # fmt: skip
for layout, (param_sbp, data_sbp) in LAYOUTS.items():
    ref = mlp()
    ref_step = Step(ref, flow.optim.SGD(ref.parameters(), lr=0.5, momentum=0.9))
    model = mlp()
    model.to_global(pl, lambda name, _, nd=param_sbp: nd.get(name, B))
    step = Step(model, flow.optim.SGD(model.parameters(), lr=0.5, momentum=0.9))
    for i, (xb, yb) in enumerate(batches):
        want = ref_step(flow.tensor(xb), flow.tensor(yb))
        got = step(glob(xb, data_sbp), glob(yb, data_sbp))
        close(got.numpy().reshape(()), want.numpy().reshape(()), f"{layout} step {i}: loss")
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.numpy(), q.numpy(), f"{layout} after 3 steps: {name}")
        check(str(p.device) == f"{DEVICE}:0", f"{layout}: {name} lives on {DEVICE}")

check.done()
