"""`flow.jit` on global tensors, on every rank: traced with `#flow.dist` argument types, SBP
inferred, each rank compiling and running its partition; checked against the eager global
result and single-device numpy. Prints `rank R: N checks passed` at the end."""

from __future__ import annotations

import functools

import numpy as np
from rank_checks import Checks

import flow
import flow.env
from flow.distributed.placement import placement, sbp
from flow.lowering import run_pipeline
from flow.lowering.print_comm_plan import communication_plan

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B, P = sbp.split, sbp.broadcast, sbp.partial_sum
pl = placement("cpu", list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4)


rng = np.random.default_rng(0)
X = rng.standard_normal((6, 4)).astype(np.float32)
W = rng.standard_normal((4, 3)).astype(np.float32)


def glob(value: np.ndarray, nd) -> flow.Tensor:
    return flow.tensor(value).to_global(pl, B).to_global(sbp=nd)


# ----------------------------------------------------------------- elementwise + matmul + reduce
def f(x, w):
    y = flow.matmul(flow.tanh(x) * 2.0 + 1.0, w)
    return y, y.sum(dim=1), (y * y).sum()


x, w = glob(X, S(0)), glob(W, B)
jf = flow.jit(f)
outs = jf(x, w)
eager = f(x, w)
tx = np.tanh(X) * 2 + 1
want = [tx @ W, (tx @ W).sum(1), ((tx @ W) ** 2).sum()]
for o, e, n, name in zip(outs, eager, want, ["y", "row sums", "total"]):
    check(o.is_global and o.placement == pl, f"{name} is global on {pl}")
    check(o.shape == e.shape and o.sbp == e.sbp, f"{name}: jit and eager agree on shape and sbp")
    # (the gathered value of a 0-d partial sum comes back with shape (1,): compare values)
    close(o.numpy().reshape(np.shape(n)), e.numpy().reshape(np.shape(n)), f"{name}: jit vs eager")
    close(o.numpy().reshape(np.shape(n)), n, f"{name}: jit vs numpy")
check(outs[0].sbp == (S(0),), f"y keeps the batch split, got {outs[0].sbp}")
check(len(jf._cache) == 1, "one compile")
outs2 = jf(x, w)  # cached
close(outs2[0].numpy(), want[0], "second call")
check(len(jf._cache) == 1, "cache hit for the same placement and sbp")
# Another SBP is another signature (and another compile).
outs3 = jf(glob(X, B), glob(W, S(1)))
check(len(jf._cache) == 2, "new sbp, new compile")
close(outs3[0].numpy(), want[0], "y under B x S(1)")
check(outs3[0].sbp == (S(1),), f"B x S(1) gives S(1), got {outs3[0].sbp}")


# ----------------------------------------------------------------- inference inserts a collective
@flow.jit
def contract(a, b):
    return flow.matmul(a, b) + 1.0  # S(1) x S(0) -> partial sum, then + 1: boxed to B


A = rng.standard_normal((3, 8)).astype(np.float32)
Bm = rng.standard_normal((8, 5)).astype(np.float32)
out = contract(glob(A, S(1)), glob(Bm, S(0)))
close(out.numpy(), A @ Bm + 1, "S(1) x S(0) matmul")
text = contract.lower(glob(A, S(1)), glob(Bm, S(0))).as_text()
check("#flow.dist" in text and "flow.boxing" in text, f"inferred program boxes:\n{text}")

# ----------------------------------------------------------------- captured global parameter
Wp = glob(W, B)


@flow.jit
def apply(xb):
    return flow.relu(flow.matmul(xb, Wp))


close(apply(glob(X, S(0))).numpy(), np.maximum(X @ W, 0), "captured B parameter")

# a captured S(0) tensor boxed to B inside the program: the boxing is traced, so each call
# reads the tensor's value at that call (ZeRO stage 3 gathers its parameters this way)
Ws = glob(W, S(0))


@flow.jit
def gathered(xb):
    return flow.matmul(xb, Ws.to_global(sbp=B))


for i, scale in enumerate((1.0, 3.0)):
    with flow.no_grad():
        Ws.copy_(glob(W * scale, S(0)))
    close(gathered(glob(X, S(0))).numpy(), X @ (W * scale), f"call {i}: captured S(0) boxed")


# a batch of sequences flattened to rows, as a transformer's embedding and loss do: with the
# batch a multiple of the ranks the reshape keeps S(0) (no collective); otherwise the rows
# are gathered first. Both give the single-device value.
def rows(xb):
    return flow.matmul(xb.reshape(-1, 3), flow.tensor(np.ones((3, 2), np.float32)))


for batch, gathers in ((4, 0), (3, None)):
    seq = np.arange(batch * 2 * 3, dtype=np.float32).reshape(batch, 2, 3)
    f = flow.jit(rows)
    out = f(glob(seq, S(0)))
    close(out.numpy(), seq.reshape(-1, 3) @ np.ones((3, 2)), f"flattened batch of {batch}")
    (prog,) = f._cache.values()
    m = prog.lowered.module.clone()
    run_pipeline(m, f"flow-infer-sbp,flow-partition{{rank={rank}}}")
    kinds = [line.split()[0] for line in communication_plan(m)]
    if gathers is not None:
        check(kinds.count("flow.all_gather") == gathers,
              f"flattened batch of {batch}: the split rows stay split, got {kinds}")  # fmt: skip


# ----------------------------------------------------------------- data-parallel nn.Graph SGD step
def mlp() -> flow.nn.Module:
    flow.manual_seed(0)
    return flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.ReLU(), flow.nn.Linear(8, 2))


class Step(flow.nn.Graph):
    def __init__(self, model, opt):
        super().__init__()
        self.model = model
        self.add_optimizer(opt)

    def build(self, xb, yb):
        loss = ((self.model(xb) - yb) ** 2).mean()
        loss.backward()
        return loss


Y = rng.standard_normal((6, 2)).astype(np.float32)
ref = mlp()  # single device
ref_step = Step(ref, flow.optim.SGD(ref.parameters(), lr=0.1))
dp = mlp().to_global(pl, B)  # B parameters, S(0) batch
dp_step = Step(dp, flow.optim.SGD(dp.parameters(), lr=0.1))
for i in range(2):
    want_loss = ref_step(flow.tensor(X), flow.tensor(Y))
    loss = dp_step(glob(X, S(0)), glob(Y, S(0)))
    close(loss.numpy().reshape(()), want_loss.numpy().reshape(()), f"step {i}: loss")
    for (name, p), q in zip(dp.named_parameters(), ref.parameters()):
        check(p.is_global and p.sbp == (B,), f"step {i}: {name} stays B")
        close(p.numpy(), q.numpy(), f"step {i}: {name} after the update")

check.done()
