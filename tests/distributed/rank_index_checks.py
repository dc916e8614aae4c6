"""Index checks of a global program, on every rank: a data-parallel nn.Graph step whose bad
label sits in one rank's shard raises the same IndexError on every rank, after the same call,
and changes no parameter; a good step then runs (no rank was left waiting). Prints
`rank R: N checks passed` at the end."""

from __future__ import annotations

import numpy as np
from rank_checks import Checks
from rank_models import Step, mlp

import flow
import flow.env
from flow import optim
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B = sbp.split, sbp.broadcast
pl = placement("cpu", list(range(world)))
check = Checks(rank)

rng = np.random.default_rng(0)
X = rng.standard_normal((4 * world, 6)).astype(np.float32)
GOOD = rng.integers(0, 3, 4 * world)
BAD = GOOD.copy()
BAD[-1] = 3  # in the last rank's shard only


def glob(value: np.ndarray, nd) -> flow.Tensor:
    return flow.tensor(value).to_global(pl, B).to_global(sbp=nd)


model = mlp().to_global(pl, B)
opt = optim.SGD(model.parameters(), lr=0.1)
step = Step(model, opt)
x = glob(X, S(0))
for k in range(2):
    before = [p.numpy().copy() for p in model.parameters()]
    try:
        step(x, glob(BAD, S(0)))
        check(False, f"step {k}: a bad label raises")
    except IndexError as err:
        first = str(err).splitlines()[0]
        check(first == "cross_entropy: target 3 is out of bounds for 3 classes",
              f"step {k}: the error names the target, got {first!r}")  # fmt: skip
    after = [p.numpy() for p in model.parameters()]
    check(all(np.array_equal(a, b) for a, b in zip(after, before)), f"step {k}: no update")
    loss = step(x, glob(GOOD, S(0)))
    check(np.isfinite(float(loss.numpy().reshape(-1)[0])), f"step {k}: a good step runs")
    changed = [p.numpy() for p in model.parameters()]
    check(not np.array_equal(changed[0], before[0]), f"step {k}: the good step updates")
check.done()
