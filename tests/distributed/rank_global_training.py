"""Global training on every rank: a data-parallel and a tensor-parallel MLP step (forward,
cross-entropy, backward, SGD) against the same step on one device; `Module.to_global`;
gradients of global leaves take the leaf's SBP; nn.Parameter of global tensors. Prints
`rank R: N checks passed`."""

from __future__ import annotations

import functools

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B, P = sbp.split, sbp.broadcast, sbp.partial_sum
pl = placement("cpu", list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, atol=1e-6, shapes=False)


def mlp() -> nn.Module:
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


rng = np.random.default_rng(0)
X = rng.standard_normal((10, 6)).astype(np.float32)  # 10 rows: uneven on 4 ranks
Y = rng.integers(0, 3, 10).astype(np.int64)


def step(model: nn.Module, x, y) -> flow.Tensor:
    opt = flow.optim.SGD(model.parameters(), lr=0.5)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    opt.step()
    return loss, grads


ref = mlp()
ref_before = [p.numpy().copy() for p in ref.parameters()]
ref_loss, ref_grads = step(ref, flow.tensor(X), flow.tensor(Y))

# ------------------------------------------------------------- Module.to_global
m = mlp()
params = list(m.parameters())
check(m.to_global(pl, B) is m, "to_global returns the module")
check(all(p is q for p, q in zip(params, m.parameters())), "same Parameter objects")
check(all(isinstance(p, nn.Parameter) and p.is_global and p.is_leaf and p.requires_grad
          for p in m.parameters()), "global trainable leaves")  # fmt: skip
check(all(p.sbp == (B,) and p.placement == pl for p in m.parameters()), "B on the placement")
for p, want in zip(m.parameters(), ref_before):
    close(p.numpy(), want, "to_global keeps the values")

# ------------------------------------------------------------- data parallel: S(0) batch
x = flow.tensor(X).to_global(pl, B).to_global(sbp=S(0))
y = flow.tensor(Y).to_global(pl, B).to_global(sbp=S(0))
loss, grads = step(m, x, y)
close(loss.numpy(), ref_loss.numpy(), "DP loss")
for g, want in zip(grads, ref_grads):
    check(g.is_global and g.sbp == (B,) and g.placement == pl, "DP grad of a B parameter is B")
    close(g.numpy(), want.numpy(), "DP grad equals the single-device one")
    close(g.to_local().numpy(), want.numpy(), "DP grad: every rank holds the whole grad")
for p, want in zip(m.parameters(), ref.parameters()):
    check(p.sbp == (B,), "DP parameter stays B after SGD")
    close(p.numpy(), want.numpy(), "DP parameters after SGD")

# ------------------------------------------------------------- tensor parallel (Megatron)
tp_sbp = {"0.weight": S(0), "0.bias": S(0), "2.weight": S(1), "2.bias": B}
t = mlp().to_global(pl, lambda name, _: tp_sbp[name])
check([p.sbp for p in t.parameters()] == [(tp_sbp[n],) for n, _ in t.named_parameters()],
      "TP parameters take their SBP")  # fmt: skip
xb = flow.tensor(X).to_global(pl, B)
yb = flow.tensor(Y).to_global(pl, B)
hidden = t[1](t[0](xb))
check(hidden.sbp == (S(1),), "column-parallel Linear gives S(1) activations")
loss, grads = step(t, xb, yb)
close(loss.numpy(), ref_loss.numpy(), "TP loss")
for (name, _p), g, want in zip(t.named_parameters(), grads, ref_grads):
    check(g.sbp == (tp_sbp[name],), f"TP grad of {name} takes the parameter's SBP")
    close(g.numpy(), want.numpy(), f"TP grad of {name}")
for p, want in zip(t.parameters(), ref.parameters()):
    close(p.numpy(), want.numpy(), "TP parameters after SGD")

# ------------------------------------------------------------- nn.Parameter of global tensors
shard = flow.tensor(ref_before[0]).to_global(pl, B).to_global(sbp=S(0))
pw = nn.Parameter(shard)
check(pw.is_global and pw.sbp == (S(0),) and pw.placement == pl and pw.requires_grad,
      "nn.Parameter keeps the placement and SBP")  # fmt: skip
close(pw.to_local().numpy(), shard.to_local().numpy(), "nn.Parameter holds this rank's shard")
close(pw.numpy(), ref_before[0], "nn.Parameter's global value")
check(not nn.Parameter(shard, requires_grad=False).requires_grad, "requires_grad=False kept")
built = mlp()
for (name, p_), want in zip(list(built.named_parameters()), ref_before):
    layer, attr = name.split(".")
    g = flow.tensor(want).to_global(pl, B).to_global(sbp=tp_sbp[name])
    setattr(built[int(layer)], attr, nn.Parameter(g))
check([p.sbp for p in built.parameters()] == [(tp_sbp[n],) for n, _ in built.named_parameters()],
      "a model built from global Parameters is tensor parallel")  # fmt: skip
loss, grads = step(built, xb, yb)
close(loss.numpy(), ref_loss.numpy(), "loss of the model built from global Parameters")
for p, want in zip(built.parameters(), ref.parameters()):
    close(p.numpy(), want.numpy(), "global Parameters after SGD")

# ------------------------------------------------------------- autograd details
a = flow.tensor(X, requires_grad=True)
ag = a.to_global(pl, S(0))  # each rank's X is its shard: the global tensor stacks them
check(tuple(ag.shape) == (10 * world, 6) and ag.is_global and not ag.is_leaf, "stacked shards")
(ag * ag).sum().backward()
check(not a.grad.is_global, "the gradient of a local tensor is local")
close(a.grad.numpy(), 2 * X, "to_global is differentiable: the grad is this rank's shard")
w = flow.tensor(np.ones((6, 3), np.float32)).to_global(pl, B)
w.requires_grad_(True)
(flow.tensor(X).to_global(pl, S(0)) @ w).sum().backward()
check(w.grad.sbp == (B,), "a P gradient is boxed to the B leaf")
close(w.grad.numpy(), world * X.sum(0)[:, None].repeat(3, 1), "matmul weight grad")

# ------------------------------------------------------------- 2-D hybrid: data x tensor parallel
if world == 4:
    mesh = placement("cpu", [[0, 1], [2, 3]])  # axis 0: data parallel, axis 1: tensor parallel
    hybrid_sbp = {"0.weight": (B, S(0)), "0.bias": (B, S(0)), "2.weight": (B, S(1)),
                  "2.bias": (B, B)}  # fmt: skip
    h = mlp().to_global(mesh, lambda name, _: hybrid_sbp[name])
    xh = flow.tensor(X).to_global(mesh, (B, B)).to_global(sbp=(S(0), B))
    yh = flow.tensor(Y).to_global(mesh, (B, B)).to_global(sbp=(S(0), B))
    loss, grads = step(h, xh, yh)
    close(loss.numpy(), ref_loss.numpy(), "2-D hybrid loss")
    for (name, _p), g, want in zip(h.named_parameters(), grads, ref_grads):
        check(g.sbp == hybrid_sbp[name], f"hybrid grad of {name} takes the parameter's SBP")
        close(g.numpy(), want.numpy(), f"hybrid grad of {name} equals the single-device one")
    for p, want in zip(h.parameters(), ref.parameters()):
        close(p.numpy(), want.numpy(), "hybrid parameters after SGD equal single device")

check.done()
