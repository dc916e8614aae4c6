"""Distribution changes inside compiled programs, on every rank: `to_global` traced into
`flow.jit` (boxing within a placement, a change of placement through compiled send/recv,
creation ops with `placement=`), and a tensor-parallel `nn.Graph` training step with
momentum, against eager global execution and single-device training.
Prints `rank R: N checks passed` at the end."""

from __future__ import annotations

import functools

import numpy as np
from rank_checks import Checks
from rank_models import Step, mlp

import flow
import flow.env
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B, P = sbp.split, sbp.broadcast, sbp.partial_sum
pl = placement("cpu", list(range(world)))
half = world // 2 or 1
first = placement("cpu", list(range(half)))
second = placement("cpu", list(range(half, world)) or [0])
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4)


rng = np.random.default_rng(0)
X = rng.standard_normal((5, 6)).astype(np.float32)  # 5 rows: uneven over 2 and 4 ranks


def glob(value: np.ndarray, nd, where=pl) -> flow.Tensor:
    return flow.tensor(value).to_global(where, B).to_global(sbp=nd)


# ----------------------------------------------------------------- boxing inside flow.jit
# Every transition of OneFlow's table, written as to_global in the traced function.
TRANSITIONS = [(S(0), B), (S(0), S(1)), (S(1), S(0)), (B, S(1)), (B, P), (P, B), (P, S(0))]


def moved(x, src, dst):
    y = (x * 2.0).to_global(sbp=src)  # a value of the program, then its new distribution
    return y.to_global(sbp=dst) + 1.0


for src, dst in TRANSITIONS:
    x = glob(X, B)
    jf = flow.jit(lambda x, src=src, dst=dst: moved(x, src, dst))
    out, eager = jf(x), moved(x, src, dst)
    name = f"jit to_global {src} -> {dst}"
    check(out.is_global and out.placement == pl, f"{name}: global on {pl}")
    close(out.numpy(), X * 2 + 1, f"{name}: value")
    close(out.numpy(), eager.numpy(), f"{name}: jit vs eager")
    text = jf.lower(x).as_text()
    check("flow.boxing" in text or src == dst, f"{name}: the program boxes:\n{text}")


# ----------------------------------------------------------------- creation ops inside flow.jit
traced_sbps = []


@flow.jit
def biased(x):
    ones = flow.ones(5, 6, placement=pl, sbp=S(1))
    ramp = flow.arange(6, placement=pl, sbp=S(0))
    traced_sbps.append((ones.sbp, ramp.placement))
    return x * ones + ramp.to(flow.float32)


out = biased(glob(X, S(0)))
check(traced_sbps == [((S(1),), pl)], f"traced tensors know their distribution: {traced_sbps}")
close(out.numpy(), X + np.arange(6), "creation ops with placement= in a compiled program")


# ----------------------------------------------------------------- change of placement
@flow.jit
def hop(x):
    y = flow.tanh(x).to_global(second, B)  # from `first` to `second`: send / recv
    z = (y * 3.0).to_global(first, S(0))  # and back, split
    return y.sum(), z


x = glob(X, S(0), first)
total, z = hop(x)
check(total.placement == second and z.placement == first, "results keep their placements")
close(total.numpy().reshape(()), np.tanh(X).sum(), "sum on the second placement", atol=1e-4)
close(z.numpy(), np.tanh(X) * 3, "value moved back, split")
if world > 1:
    text = hop.lower(x).as_text()
    check(text.count("flow.boxing") >= 2, f"placement changes box:\n{text}")


# ----------------------------------------------------------------- tensor-parallel nn.Graph step
TP = {"0.weight": S(0), "0.bias": S(0), "2.weight": S(1), "2.bias": B}
ref = mlp()
ref_step = Step(ref, flow.optim.SGD(ref.parameters(), lr=0.5, momentum=0.9))
tp = mlp()
tp.to_global(pl, lambda name, _: TP[name])
tp_step = Step(tp, flow.optim.SGD(tp.parameters(), lr=0.5, momentum=0.9))
for i in range(3):
    xb = rng.standard_normal((10, 6)).astype(np.float32)
    yb = rng.integers(0, 3, 10)
    want = ref_step(flow.tensor(xb), flow.tensor(yb))
    got = tp_step(glob(xb, B), glob(yb, B))
    close(got.numpy().reshape(()), want.numpy().reshape(()), f"TP step {i}: loss")
for (name, p), q in zip(tp.named_parameters(), ref.parameters()):
    check(p.sbp == (TP[name],), f"{name} keeps its sbp {TP[name]}, got {p.sbp}")
    close(p.numpy(), q.numpy(), f"TP after 3 steps: {name}")
check(len(tp_step._compiled) == 1, f"one steady-step program cached, got {len(tp_step._compiled)}")

check.done()
