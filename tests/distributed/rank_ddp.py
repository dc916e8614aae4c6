"""DistributedDataParallel on every rank: each rank trains on its own shard of the batch; the
parameters start from rank 0's, stay identical on every rank, and match a single-process model
trained on the whole batch (computed here, without collectives), for several bucket sizes.
Also: a parameter only one rank uses, one no rank uses, gradient accumulation without
zero_grad, buffers broadcast before forward, and the errors. Prints `rank R: N checks passed`.
"""

from __future__ import annotations

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
from flow.nn.parallel import DistributedDataParallel as ddp
from flow.targets import collectives

rank, world = flow.env.get_rank(), flow.env.get_world_size()
check = Checks(rank)
ROWS = 4  # rows of the batch on each rank
STEPS = 4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 8)
        self.fc2 = nn.Linear(8, 2)
        self.extra = nn.Linear(8, 2)  # used only when forward is asked to
        self.never = nn.Parameter(flow.zeros(2))  # used by no forward
        self.lr = 0.05  # a plain attribute, still reachable after wrapping

    def forward(self, x, use_extra=False):
        h = flow.tanh(self.fc1(x))
        y = self.fc2(h)
        return y + self.extra(h) if use_extra else y


def init_state(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {k: rng.normal(size=tuple(v.shape)).astype(np.float32) * 0.5
            for k, v in Net().state_dict().items()}  # fmt: skip


def make_net(seed: int) -> Net:
    net = Net()
    net.load_state_dict(init_state(seed))
    return net


def batch(step: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole batch of a step (every rank can make it; each trains on its rows)."""
    rng = np.random.default_rng(100 + step)
    x = rng.normal(size=(world * ROWS, 3)).astype(np.float32)
    return x, np.sin(x[:, :2] * 2).astype(np.float32)


def shard(a: np.ndarray, r: int = rank) -> flow.Tensor:
    return flow.tensor(a[r * ROWS:(r + 1) * ROWS])


def params_np(net: Net) -> dict:
    return {k: v.numpy().copy() for k, v in net.state_dict().items()}


def train(net: Net, *, whole: bool) -> dict:
    opt = flow.optim.SGD(net.parameters(), lr=net.lr, momentum=0.9)
    loss_fn = nn.MSELoss()
    for step in range(STEPS):
        x, y = batch(step)
        xs, ys = (flow.tensor(x), flow.tensor(y)) if whole else (shard(x), shard(y))
        opt.zero_grad()
        loss_fn(net(xs), ys).backward()
        opt.step()
    return params_np(net)


def same_on_every_rank(values: dict, what: str) -> None:
    every = collectives.all_gather_object(values)
    for r, theirs in enumerate(every):
        for k in values:
            check.close(theirs[k], values[k], f"{what}: {k} of rank {r}", rtol=1e-6, atol=1e-7)


# The reference: one process, the whole batch, rank 0's initial parameters.
reference = train(make_net(0), whole=True)

# Each rank starts from its own parameters; wrapping broadcasts rank 0's.
for kwargs in ({}, {"bucket_size": 1}, {"bucket_size": 2}, {"bucket_size": 1000},
               {"use_bucket": False}):  # fmt: skip
    net = make_net(rank)
    wrapped = ddp(net, **kwargs)
    check(wrapped is net and wrapped.lr == 0.05, "the module itself is returned")
    start = params_np(net)
    for k, v in init_state(0).items():
        check.close(start[k], v, f"{kwargs}: {k} is rank 0's after wrapping", rtol=0, atol=0)
    final = train(net, whole=False)
    same_on_every_rank(final, f"{kwargs}: after {STEPS} steps")
    for k in reference:
        check.close(final[k], reference[k], f"{kwargs}: {k} vs the whole-batch run", atol=2e-5)
    check(net.extra.weight.grad is None and net.never.grad is None,
          f"{kwargs}: parameters no rank used keep grad None")  # fmt: skip


def local_grads(net_state: dict, x: np.ndarray, y: np.ndarray, use_extra: bool) -> dict:
    """The gradients of one rank's loss, on an unwrapped copy (no collectives)."""
    net = Net()
    net.load_state_dict(net_state)
    nn.MSELoss()(net(flow.tensor(x), use_extra=use_extra), flow.tensor(y)).backward()
    return {k: (None if p.grad is None else p.grad.numpy()) for k, p in net.named_parameters()}


# A parameter that only rank 0 uses: a bucket waits for it on the other ranks, and the
# end of backward all-reduces it (zeros from those ranks): no hang, the average everywhere.
# Then a second backward without zero_grad adds the new average to the gradients.
net = ddp(make_net(7), bucket_size=3)
state = {k: v.copy() for k, v in params_np(net).items()}
x0, y0 = batch(50)
x1, y1 = batch(51)
expected: dict = {}
for phase, (x, y) in enumerate(((x0, y0), (x1, y1))):
    for r in range(world):
        rows = slice(r * ROWS, (r + 1) * ROWS)
        for k, g in local_grads(state, x[rows], y[rows], phase == 0 and r == 0).items():
            if g is not None:
                expected[k] = expected.get(k, 0) + g / world
    if phase == 0:
        after_first = dict(expected)
for step, (x, y, extra) in enumerate(((x0, y0, rank == 0), (x1, y1, False))):
    nn.MSELoss()(net(shard(x), use_extra=extra), shard(y)).backward()
    want = after_first if step == 0 else expected
    for k, p in net.named_parameters():
        if k in want:
            check(p.grad is not None, f"step {step}: {k} has a gradient on every rank")
            check.close(p.grad.numpy(), want[k], f"step {step}: averaged gradient of {k}")
        else:
            check(p.grad is None, f"step {step}: {k} no rank used has no gradient")
check("extra.weight" in after_first, "rank 0 used the extra layer")


# Buffers: rank 0's before each forward (or each rank's own with broadcast_buffers=False).
class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(flow.ones(2))
        self.register_buffer("shift", flow.tensor([float(rank), 1.0]))

    def forward(self, x):
        return x * self.w + self.shift


for broadcast in (True, False):
    m = ddp(WithBuffer(), broadcast_buffers=broadcast)
    check.close(m.shift.numpy(), [rank, 1.0], f"broadcast_buffers={broadcast}: untouched at wrap")
    out = m(flow.tensor([1.0, 2.0]))
    first = 0.0 if broadcast else float(rank)
    check.close(m.shift.numpy(), [first, 1.0], f"broadcast_buffers={broadcast}: buffer")
    check.close(out.numpy(), [1.0 + first, 3.0], f"broadcast_buffers={broadcast}: output")
    out.sum().backward()
    check.close(m.w.grad.numpy(), [1.0, 2.0], f"broadcast_buffers={broadcast}: gradient")

# Errors, the same on every rank (so every rank catches them).
class Step(nn.Graph):
    def __init__(self):
        super().__init__()
        self.net = net

    def build(self, x):
        return self.net(x)


try:
    Step()(shard(x0))
    check(False, "a wrapped module inside nn.Graph raises")
except Exception as e:  # noqa: BLE001 -- the message is what is checked
    check("runs eagerly over local tensors" in str(e) and "to_global" in str(e),
          f"a wrapped module inside nn.Graph: {type(e).__name__}: {e}")  # fmt: skip
try:
    ddp(net)
    check(False, "wrapping twice raises")
except ValueError as e:
    check("wrapped already" in str(e), f"wrapping twice: {e}")
lopsided = nn.Linear(3, 2 + (rank == world - 1))
try:
    ddp(lopsided)
    check(False, "a model that differs between ranks raises")
except ValueError as e:
    check("differ from those of rank" in str(e) and "every rank must wrap the same model"
          in str(e), f"a model that differs between ranks: {e}")  # fmt: skip
try:
    ddp(net.fc1, bucket_size=0)
    check(False, "bucket_size=0 raises")
except ValueError as e:
    check("bucket_size" in str(e) and "positive int" in str(e), f"bucket_size=0: {e}")

check.done()
