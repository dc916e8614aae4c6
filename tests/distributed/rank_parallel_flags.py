"""`model.to_global(flow.device("cpu"), parallel= | model_parallel= | pipeline_parallel=True)`
on every rank: a small MLP trained for a few steps, eagerly and in nn.Graph, equal to
single-device training; the SBP each flag gives the parameters, and the pipeline stages,
balanced by parameter count. Prints `rank R: N checks passed` at the end."""

from __future__ import annotations

import functools

import numpy as np
from rank_checks import Checks

import flow
import flow.env
import flow.nn as nn
import flow.nn.functional as F
from flow.distributed.placement import placement, sbp

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B = sbp.split, sbp.broadcast
pl = placement("cpu", list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4)
DEVICE = flow.device("cpu")


def mlp() -> nn.Sequential:
    """6 -> 16 -> 8 -> 3; parameters 112, 136 and 27 in its five children."""
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 8), nn.Tanh(),
                         nn.Linear(8, 3))  # fmt: skip


def sgd(model):
    return flow.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)


class Step(nn.Graph):
    def __init__(self, model, micro_batches: int = 1):
        super().__init__()
        self.model = model
        self.add_optimizer(sgd(model))
        self.config.set_gradient_accumulation_steps(micro_batches)

    def build(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        return loss


rng = np.random.default_rng(0)
batches = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
           for _ in range(3)]  # fmt: skip

# Single-device reference, and a numpy check of its first loss.
ref, ref_losses = mlp(), []
p = [t.numpy().astype(np.float64) for t in ref.parameters()]
h = np.tanh(np.maximum(batches[0][0] @ p[0].T + p[1], 0) @ p[2].T + p[3]) @ p[4].T + p[5]
logp = h - np.log(np.exp(h).sum(1, keepdims=True))
np_loss = -logp[np.arange(8), batches[0][1]].mean()
ref_act = ref[3](ref[2](ref[1](ref[0](flow.tensor(batches[0][0]))))).numpy()
opt = sgd(ref)
for x, y in batches:
    opt.zero_grad()
    loss = F.cross_entropy(ref(flow.tensor(x)), flow.tensor(y))
    loss.backward()
    opt.step()
    ref_losses.append(float(loss.numpy()))
close(ref_losses[0], np_loss, "single-device loss equals numpy")
want = [q.numpy() for q in ref.parameters()]


def glob(v, where=pl, nd=B):
    return flow.tensor(v).to_global(where, nd)


def compare(model, losses, what):
    for i, (got, exp) in enumerate(zip(losses, ref_losses)):
        close(got, exp, f"{what}: loss of step {i}")
    for (name, q), w in zip(model.named_parameters(), want):
        close(q.numpy(), w, f"{what}: {name} after {len(losses)} steps")


def train_eager(model, inputs):
    opt = sgd(model)
    losses = []
    for x, y in inputs:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.numpy()))
    return losses


# ----------------------------------------------------------------- parallel=True: data parallel
model = mlp().to_global(DEVICE, parallel=True)
check(all(q.placement == pl and q.sbp == (B,) for q in model.parameters()),
      "parallel=True: every parameter is broadcast over all ranks")  # fmt: skip
out = model(glob(batches[0][0]))
check(out.sbp == (S(0),), f"parallel=True: the batch is split, output sbp {out.sbp}")
compare(model, train_eager(model, [(glob(x), glob(y)) for x, y in batches]), "DP eager")

# each rank's local part of the batch (a data-parallel loader's), as OneFlow takes it
part = np.array_split(np.arange(8), world)[rank]
model = mlp().to_global(DEVICE, parallel=True)
inputs = [(flow.tensor(x[part]), flow.tensor(y[part]).to_global(pl, S(0))) for x, y in batches]
compare(model, train_eager(model, inputs), "DP eager, local parts of the batch")

model = mlp().to_global(DEVICE, parallel=True)
step = Step(model)
compare(model, [float(step(glob(x), glob(y)).numpy()) for x, y in batches], "DP nn.Graph")
check(all(q.sbp == (B,) for q in model.parameters()), "DP nn.Graph: parameters stay B")

# ----------------------------------------------------------------- model_parallel=True: Megatron
TP = {"0.weight": S(0), "0.bias": S(0), "2.weight": S(1), "2.bias": B, "4.weight": S(0),
      "4.bias": S(0)}  # fmt: skip
model = mlp().to_global(DEVICE, model_parallel=True)
for name, q in model.named_parameters():
    check(q.placement == pl and q.sbp == (TP[name],), f"model_parallel: {name} is {q.sbp}")
hidden = model[1](model[0](glob(batches[0][0])))
check(hidden.sbp == (S(1),), f"model_parallel: the activation is split, got {hidden.sbp}")
pair = model[2](hidden)  # a partial sum on each rank, reduced where it is needed (tanh)
check(pair.sbp in ((sbp.partial_sum,), (B,)), f"model_parallel: the pair gives {pair.sbp}")
act = model[3](pair)
check(act.sbp != (sbp.partial_sum,), f"model_parallel: tanh of the pair's sum, got {act.sbp}")
close(act.numpy(), ref_act, "model_parallel: the pair's activation equals single-device")
compare(model, train_eager(model, [(glob(x), glob(y)) for x, y in batches]), "TP eager")

model = mlp().to_global(DEVICE, model_parallel=True)
step = Step(model)
compare(model, [float(step(glob(x), glob(y)).numpy()) for x, y in batches], "TP nn.Graph")
for name, q in model.named_parameters():
    check(q.sbp == (TP[name],), f"TP nn.Graph: {name} keeps its sbp")



class Attention(nn.Module):
    """Embedding, one attention head (q, k, v, out_proj) and a residual."""

    def __init__(self, e=8):
        super().__init__()
        flow.manual_seed(1)
        self.embed = nn.Embedding(10, e)
        self.q, self.k, self.v = nn.Linear(e, e), nn.Linear(e, e), nn.Linear(e, e)
        self.out_proj = nn.Linear(e, e)

    def forward(self, ids):
        h = self.embed(ids)
        a = flow.softmax(self.q(h) @ self.k(h).transpose(0, 1) * 0.35, dim=-1)
        return (h + self.out_proj(a @ self.v(h))).sum(1)


ids = np.array([1, 4, 4, 9, 0, 2])
ref_attn = Attention()
ref_out = ref_attn(flow.tensor(ids))
ref_out.sum().backward()
attn = Attention().to_global(DEVICE, model_parallel=True)
for name in ("q", "k", "v", "out_proj"):
    want_sbp = S(1) if name == "out_proj" else S(0)
    check(getattr(attn, name).weight.sbp == (want_sbp,), f"attention: {name} is {want_sbp}")
check(attn.embed.weight.sbp == (S(1),), "attention: the embedding splits its hidden dim")
out = attn(flow.tensor(ids))
close(out.numpy(), ref_out.numpy(), "attention, tensor parallel: forward")
out.sum().backward()
for (name, q), r in zip(attn.named_parameters(), ref_attn.parameters()):
    close(q.grad.numpy(), r.grad.numpy(), f"attention, tensor parallel: gradient of {name}")



class HalfGrad(nn.Module):
    """The identity, with the gradient halved: a Module's own backward."""

    def forward(self, x):
        return x * 1.0

    def backward(self, g):
        return g * 0.5


def custom():
    flow.manual_seed(2)
    return nn.Sequential(nn.Linear(6, 4), HalfGrad(), nn.Linear(4, 1))


x0 = batches[0][0]
ref_c = custom()
(ref_c(flow.tensor(x0)) ** 2).mean().backward()
dp_c = custom().to_global(DEVICE, parallel=True)
(dp_c(glob(x0)) ** 2).mean().backward()
for (name, q), r in zip(dp_c.named_parameters(), ref_c.parameters()):
    close(q.grad.numpy(), r.grad.numpy(), f"custom backward, data parallel: gradient of {name}")
w2 = ref_c[2].weight.numpy()
g_h = 2 * (ref_c(flow.tensor(x0)).numpy()) / 8 @ w2 * 0.5  # through HalfGrad: halved
close(ref_c[0].bias.grad.numpy(), g_h.sum(0), "custom backward halves the gradient (numpy)")

# ----------------------------------------------------------------- pipeline_parallel=True
# Balanced by parameters (112, 0, 136, 0, 27): the largest stage is as small as it can be.
STAGES = {1: [0, 0, 0, 0, 0], 2: [0, 1, 1, 1, 1], 4: [0, 1, 2, 3, 3]}[world]
model = mlp().to_global(DEVICE, pipeline_parallel=True)
settings = [c.to(nn.graph.GraphModule) for c in model]
check([s.stage_id for s in settings] == STAGES, f"stages {[s.stage_id for s in settings]}")
for s, child in zip(settings, model):
    where = placement("cpu", [STAGES[list(model).index(child)]])
    check(s.placement == where, f"stage {s.stage_id} on {s.placement}")
    check(all(q.placement == where and q.sbp == (B,) for q in child.parameters()),
          f"stage {s.stage_id}: its parameters are on its rank")  # fmt: skip
first, last = settings[0].placement, settings[-1].placement
step = Step(model, micro_batches=4)
losses = []
for x, y in batches:
    loss = step(glob(x, first), glob(y, last))
    check(loss.placement == last, "the loss is on the last stage")
    losses.append(float(loss.numpy()))
compare(model, losses, "PP nn.Graph (1F1B, 4 micro-batches)")

model = mlp().to_global(DEVICE, pipeline_parallel=True)
compare(model, train_eager(model, [(flow.tensor(x), glob(y, last)) for x, y in batches]),
        "PP eager")  # fmt: skip

if world == 4:  # three children on four ranks: stage 0 is ranks 0 and 1, data parallel
    def short() -> nn.Sequential:
        flow.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))

    ref, ref_losses = short(), []
    opt = sgd(ref)
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(ref(flow.tensor(x)), flow.tensor(y))
        loss.backward()
        opt.step()
        ref_losses.append(float(loss.numpy()))
    want = [q.numpy() for q in ref.parameters()]
    model = short().to_global(DEVICE, pipeline_parallel=True)
    settings = [c.to(nn.graph.GraphModule) for c in model]
    check([s.placement.ranks for s in settings] == [[0, 1], [2], [3]],
          f"stage ranks {[s.placement.ranks for s in settings]}")  # fmt: skip
    check(model[0].weight.placement == placement("cpu", [0, 1]), "stage 0 holds its weights")
    first, last = settings[0].placement, settings[-1].placement
    step = Step(model, micro_batches=2)
    losses = [float(step(glob(x, first), glob(y, last)).numpy()) for x, y in batches]
    compare(model, losses, "PP nn.Graph, a data-parallel stage")

check.done()
