"""Data-parallel training on the ranks of whichever launcher started them (OneFlow's variables,
flow-run --hosts, or none): an MLP trained for a few SGD steps on an S(0) batch against the same
steps written out in numpy. Prints each step's loss, the address this rank reaches
``sys.argv[1]`` from (the test tells hosts apart by it), and `rank R: N checks passed`."""

from __future__ import annotations

import socket
import sys

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
pl = placement("cpu", list(range(world)))
check = Checks(rank)
STEPS, LR = 3, 0.1

rng = np.random.default_rng(0)
X = rng.standard_normal((8, 4)).astype(np.float32)
Y = rng.standard_normal((8, 2)).astype(np.float32)
W1 = (rng.standard_normal((5, 4)) * 0.5).astype(np.float32)  # nn.Linear's (out, in)
B1 = (rng.standard_normal(5) * 0.1).astype(np.float32)
W2 = (rng.standard_normal((2, 5)) * 0.5).astype(np.float32)
B2 = (rng.standard_normal(2) * 0.1).astype(np.float32)


def numpy_training() -> tuple[list[float], list[np.ndarray]]:
    """The reference: forward, MSE loss, hand-written gradients, SGD, in float64."""
    w1, c1, w2, c2 = (a.astype(np.float64) for a in (W1, B1, W2, B2))
    x, y = X.astype(np.float64), Y.astype(np.float64)
    losses = []
    for _ in range(STEPS):
        h = x @ w1.T + c1
        a = np.maximum(h, 0)
        d = a @ w2.T + c2 - y
        losses.append(float(np.mean(d**2)))
        g_out = 2 * d / d.size
        g_h = (g_out @ w2) * (h > 0)
        grads = (g_h.T @ x, g_h.sum(0), g_out.T @ a, g_out.sum(0))
        w1, c1, w2, c2 = (p - LR * g for p, g in zip((w1, c1, w2, c2), grads))
    return losses, [w1, c1, w2, c2]


model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
model.load_state_dict({"0.weight": flow.tensor(W1), "0.bias": flow.tensor(B1),
                       "2.weight": flow.tensor(W2), "2.bias": flow.tensor(B2)})  # fmt: skip
model.to_global(pl, sbp.broadcast)
opt = flow.optim.SGD(model.parameters(), lr=LR)
x = flow.tensor(X).to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0))
y = flow.tensor(Y).to_global(pl, sbp.broadcast).to_global(sbp=sbp.split(0))
check(x.to_local().shape[0] == 8 // world, "each rank holds its part of the batch")
losses = []
for _ in range(STEPS):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(float(loss.numpy()))

want_losses, want_params = numpy_training()
check.close(losses, want_losses, "losses equal numpy's", rtol=1e-4, atol=1e-5)
for p, want in zip(model.parameters(), want_params):
    check.close(p.numpy(), want, "parameters equal numpy's after SGD", rtol=1e-4, atol=1e-5)
    check.close(p.to_local().numpy(), want, "every rank holds the whole parameter", rtol=1e-4,
                atol=1e-5)  # fmt: skip
host = "-"
if len(sys.argv) > 1:  # the address of this rank's machine (network namespace) towards argv[1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((sys.argv[1], 9))
        host = probe.getsockname()[0]
sys.stdout.write(f"rank {rank}: world={world} host={host} losses="
                 f"{' '.join(f'{v:.6f}' for v in losses)}\n")  # fmt: skip
check.done()
