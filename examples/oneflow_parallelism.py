"""The parallelism examples of OneFlow's documentation, in OneFlow's own API, each checked
against numpy or a single-device run:

    flow-run -n 2 examples/oneflow_parallelism.py
    flow-run -n 4 examples/oneflow_parallelism.py      # adds the 2-D SBP mesh

* global tensors: local pieces made global (`S(0)`, `B`), a global matmul, boxing, `to_local`;
* 2-D SBP: a model broadcast over a 2x2 mesh fed `(B, S(0))` data (4 ranks);
* DDP: `flow.nn.parallel.DistributedDataParallel` training on each rank's shard of the batch;
* pipeline: a two-stage `nn.Graph` (`set_stage`, gradient accumulation) training step;
* hybrid: stage 0 data parallel on the first half of the ranks, stage 1 model parallel
  (weight `S(1)`) on the second half, eager and as an `nn.Graph`.

Every rank prints `rank R: <example> ok` per example, then `rank R: N examples passed`.
"""

from __future__ import annotations

import sys

import numpy as np

import flow
import flow.nn as nn

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B = flow.sbp.split, flow.sbp.broadcast
ALL = flow.placement("cpu", ranks=list(range(world)))
FIRST = flow.placement("cpu", ranks=list(range(max(1, world // 2))))
SECOND = flow.placement("cpu", ranks=list(range(world // 2, world)) or [0])
passed = []


def agree(got, want, what: str, tol: float = 1e-4) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        raise AssertionError(f"rank {rank}: {what}: got {got} (shape {got.shape}), "
                             f"expected {want} (shape {want.shape})")  # fmt: skip


def say(line: str) -> None:
    sys.stdout.write(f"rank {rank}: {line}\n")  # one write: the ranks share one stdout
    sys.stdout.flush()


def example(fn):
    fn()
    passed.append(fn.__name__)
    say(f"{fn.__name__} ok")
    return fn


@example
def global_tensors():
    """Local pieces become one global tensor; ops on it equal numpy on the whole value."""
    x = flow.randn(2, 5)  # each rank its own rows
    gx = x.to_global(placement=ALL, sbp=S(0))
    assert tuple(gx.shape) == (2 * world, 5) and gx.sbp == (S(0),)
    whole_x = gx.numpy()
    agree(whole_x[2 * rank : 2 * rank + 2], x.numpy(), "S(0): this rank's rows")
    w = flow.randn(5, 8, placement=ALL, sbp=B)
    y = flow.matmul(gx, w)
    assert y.sbp == (S(0),) and tuple(y.to_local().shape) == (2, 8)
    agree(y.numpy(), whole_x @ w.numpy(), "matmul of S(0) by B")
    yb = y.to_global(sbp=B)
    agree(yb.to_local().numpy(), whole_x @ w.numpy(), "S(0) -> B gives the whole value")
    p = flow.matmul(gx.to_global(sbp=S(1)), w.to_global(sbp=S(0)))
    assert p.sbp == (flow.sbp.partial_sum,)
    agree(p.to_global(sbp=B).to_local().numpy(), whole_x @ w.numpy(), "S(1) x S(0) is P")


@example
def sbp_2d():
    """The 2-D SBP page: a model broadcast on the mesh [[0, 1], [2, 3]], data (B, S(0))."""
    if world != 4:
        return
    mesh = flow.placement("cpu", ranks=[[0, 1], [2, 3]])
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2))
    model = model.to_global(placement=mesh, sbp=(B, B))
    x = flow.randn(1, 2, 8)
    gx = x.to_global(placement=mesh, sbp=(B, S(0)))
    pred = model(gx)
    # along the broadcast axis each rank holds the piece of the axis's first rank
    firsts = flow.tensor(x.numpy()[None]).to_global(placement=ALL, sbp=S(0)).numpy()
    agree(gx.to_local().numpy(), firsts[rank % 2], "(B, S(0)) piece")
    whole = np.concatenate([firsts[0], firsts[1]])
    w1, b1, w2, b2 = (p.numpy() for p in model.parameters())
    agree(pred.numpy(), np.maximum(whole @ w1.T + b1, 0) @ w2.T + b2, "2-D SBP forward")


@example
def ddp():
    """DistributedDataParallel over local tensors equals full-batch training in one process."""
    flow.manual_seed(1)  # the same data on every rank; the model comes from rank 0
    data, target = np.random.default_rng(0).normal(size=(2, 4 * world, 6)).astype(np.float32)
    target = target[:, :3]
    model = nn.Linear(6, 3)
    w, b = model.weight.numpy().copy(), model.bias.numpy().copy()
    model = flow.nn.parallel.DistributedDataParallel(model)
    opt = flow.optim.SGD(model.parameters(), lr=0.1)
    mine = slice(4 * rank, 4 * rank + 4)
    for _ in range(3):
        out = model(flow.tensor(data[mine]))
        loss = ((out - flow.tensor(target[mine])) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        err = data @ w.T + b - target  # numpy: the same step on the whole batch
        gw, gb = 2 * err.T @ data / err.size, 2 * err.sum(0) / err.size
        w, b = w - 0.1 * gw, b - 0.1 * gb
    agree(model.weight.numpy(), w, "DDP weight after 3 steps")
    agree(model.bias.numpy(), b, "DDP bias after 3 steps")


class _Stage0(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten, self.linear0, self.relu0 = nn.Flatten(), nn.Linear(16, 12), nn.ReLU()

    def forward(self, x):
        return self.relu0(self.linear0(self.flatten(x)))


class _Stage1(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(12, 4)

    def forward(self, x):
        return self.linear1(x)


class _PipelineModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.m_stage0, self.m_stage1 = _Stage0(), _Stage1()
        self.m_stage0.to_global(placement=FIRST, sbp=B)
        self.m_stage1.to_global(placement=SECOND, sbp=B)

    def forward(self, x):
        return self.m_stage1(self.m_stage0(x).to_global(placement=SECOND, sbp=B))


class _PipelineGraph(nn.Graph):
    def __init__(self, module, optimizer):
        super().__init__()
        self.module_pipeline = module
        self.module_pipeline.m_stage0.to(nn.graph.GraphModule).set_stage(stage_id=0,
                                                                          placement=FIRST)
        self.module_pipeline.m_stage1.to(nn.graph.GraphModule).set_stage(stage_id=1,
                                                                          placement=SECOND)
        self.loss_fn = nn.CrossEntropyLoss()
        self.config.set_gradient_accumulation_steps(2)
        self.add_optimizer(optimizer)

    def build(self, x, y):
        loss = self.loss_fn(self.module_pipeline(x), y)
        loss.backward()
        return loss


@example
def pipeline():
    """The pipeline page: two stages on two placements, one nn.Graph training step per batch
    of two micro-batches, equal to eager training of the same model on one device."""
    flow.manual_seed(2)
    module = _PipelineModule()
    start = {k: v.numpy().copy() for k, v in module.state_dict().items()}
    graph = _PipelineGraph(module, flow.optim.SGD(module.parameters(), lr=0.05))
    reference = nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 4))
    names = {"1": "m_stage0.linear0", "3": "m_stage1.linear1"}  # the same layers, one device
    reference.load_state_dict({f"{i}.{p}": flow.tensor(start[f"{n}.{p}"])
                               for i, n in names.items() for p in ("weight", "bias")})  # fmt: skip
    ref_opt = flow.optim.SGD(reference.parameters(), lr=0.05)
    rng = np.random.default_rng(3)
    for _ in range(2):
        x = rng.normal(size=(8, 1, 4, 4)).astype(np.float32)
        y = rng.integers(0, 4, size=8).astype(np.int64)
        loss = graph(flow.tensor(x).to_global(FIRST, B), flow.tensor(y).to_global(SECOND, B))
        ref_loss = nn.functional.cross_entropy(reference(flow.tensor(x)), flow.tensor(y))
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        agree(loss.numpy(), ref_loss.numpy(), "pipeline loss")
    agree(module.m_stage1.linear1.weight.numpy(), reference[3].weight.numpy(), "stage 1 weight")
    agree(module.m_stage0.linear0.weight.numpy(), reference[1].weight.numpy(), "stage 0 weight")


class _StageModule(nn.Module):
    def __init__(self, in_dims, out_dims, placement=None, sbp=None):
        super().__init__()
        self.w = nn.Parameter(flow.randn(in_dims, out_dims, placement=placement, sbp=sbp))

    def forward(self, x):
        return flow.matmul(x, self.w)


class _HybridModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.m_stage0 = _StageModule(5, 8, placement=FIRST, sbp=B)  # data parallel
        self.m_stage1 = _StageModule(8, 4, placement=SECOND, sbp=S(1))  # model parallel

    def forward(self, x):
        out_stage0 = self.m_stage0(x)
        out_stage1 = self.m_stage1(out_stage0.to_global(placement=SECOND, sbp=B))
        return out_stage0, out_stage1


class _HybridGraph(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def build(self, x):
        return self.model(x)


@example
def hybrid():
    """The mixed-parallelism example, eager and as an nn.Graph."""
    model = _HybridModel()
    assert model.m_stage1.w.sbp == (S(1),) and model.m_stage1.w.placement == SECOND
    x = flow.randn(4, 5, placement=FIRST, sbp=S(0))
    w0, w1, whole = model.m_stage0.w.numpy(), model.m_stage1.w.numpy(), x.numpy()
    for mode, run in (("eager", model), ("graph", _HybridGraph(model))):
        out0, out1 = run(x)
        assert tuple(out0.shape) == (4, 8) and tuple(out1.shape) == (4, 4), mode
        assert out1.sbp == (S(1),), f"{mode}: stage 1 output sbp {out1.sbp}"
        agree(out0.numpy(), whole @ w0, f"{mode}: stage 0")
        agree(out1.numpy(), whole @ w0 @ w1, f"{mode}: stage 1")


say(f"{len(passed)} examples passed")
