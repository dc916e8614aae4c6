"""ZeRO in nn.Graph (`config.enable_zero(True, stage=1|2|3)`) on every rank: 3 data-parallel
training steps with SGD momentum and with Adam equal single-process training for plain data
parallel and each stage; sharded optimizer state (stage 3: parameters too) is S(0) with a
local shard of 1/N of the rows; the comm plan of the step has the stage's collectives; the
graph's state dict loads into a plain data-parallel graph. Prints the per-rank state bytes and
collectives per step, then `rank R: N checks passed`."""

from __future__ import annotations

import functools

import numpy as np
from rank_checks import Checks
from rank_models import Step, mlp

import flow
import flow.env
from flow.distributed.global_tensor import to_global_
from flow.distributed.placement import placement, sbp
from flow.lowering import run_pipeline
from flow.lowering.print_comm_plan import communication_plan

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S0, B = sbp.split(0), sbp.broadcast
pl = placement("cpu", list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4, atol=1e-5)

rng = np.random.default_rng(0)
BATCHES = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
           for _ in range(3)]  # fmt: skip
OPTS = {
    "sgd": lambda ps: flow.optim.SGD(ps, lr=0.5, momentum=0.9),
    "adam": lambda ps: flow.optim.Adam(ps, lr=0.05),
}


class ZeroStep(Step):
    def __init__(self, model, opt, stage):
        super().__init__(model, opt)
        if stage:
            self.config.enable_zero(True, stage=stage, shard_min_size=1)


def _lowered(graph):
    m = graph._engine.last_lowered.module.clone()
    run_pipeline(m, f"flow-infer-sbp,flow-partition{{rank={rank}}}")
    return m


def collectives(graph) -> dict[str, int]:
    """This rank's collectives per step in the last compiled step, by kind."""
    kinds: dict[str, int] = {}
    for line in communication_plan(_lowered(graph)):
        kinds[line.split()[0]] = kinds.get(line.split()[0], 0) + 1
    return kinds


def state_bytes(opt) -> int:
    return sum(v.to_local().numpy().nbytes for st in opt.state.values() for v in st.values()
               if isinstance(v, flow.Tensor) and v.ndim)  # fmt: skip


def train(name, stage):
    model = mlp().to_global(pl, B)
    opt = OPTS[name](model.parameters())
    graph = ZeroStep(model, opt, stage)
    losses = [graph(flow.tensor(x).to_global(pl, B).to_global(sbp=S0),
                    flow.tensor(y).to_global(pl, B).to_global(sbp=S0)).numpy()
              for x, y in BATCHES]  # fmt: skip
    return model, opt, graph, losses


STAGES = (0, 1, 2, 3)  # 0: plain data parallel
report = []
for name in OPTS:
    ref = mlp()
    ref_opt = OPTS[name](ref.parameters())
    ref_step = Step(ref, ref_opt)
    want = [ref_step(flow.tensor(x), flow.tensor(y)).numpy() for x, y in BATCHES]
    for stage in STAGES:
        tag = f"{name} stage {stage}"
        model, opt, graph, losses = train(name, stage)
        for i, (a, b) in enumerate(zip(losses, want)):
            close(a.reshape(()), b.reshape(()), f"{tag}: loss of step {i}")
        for (pname, p), q in zip(model.named_parameters(), ref.parameters()):
            close(p.numpy(), q.numpy(), f"{tag}: {pname} after 3 steps")
            sharded = stage and p.shape[0] >= world
            want_sbp = (S0,) if sharded and stage == 3 else (B,)
            check(p.sbp == want_sbp, f"{tag}: {pname} is {want_sbp} between steps, got {p.sbp}")
            for key, v in opt.state[p].items():
                if not v.ndim:
                    continue
                rows = np.array_split(np.arange(p.shape[0]), world)[rank].size
                want_rows = rows if sharded else p.shape[0]
                check(v.sbp == ((S0,) if sharded else (B,)), f"{tag}: {pname} {key} sbp {v.sbp}")
                check(v.to_local().shape[0] == want_rows,
                      f"{tag}: {pname} {key} local shard {v.to_local().shape}, "
                      f"expected {want_rows} rows")  # fmt: skip
                close(v.numpy(), ref_opt.state[q][key].numpy(), f"{tag}: {pname} {key} value")
        check(len(graph._compiled) == 1, f"{tag}: one steady-step program")
        kinds = collectives(graph)
        n = sum(p.shape[0] >= world for p in model.parameters())  # sharded parameters
        if stage in (0, 2):  # each gradient boxed once, after backward: no other traffic
            params = list(model.parameters())
            typed = {f"tensor<{'x'.join(map(str, p.shape))}xf32>" for p in params}
            boxed = sorted(line.split()[:2] for line in communication_plan(_lowered(graph))
                           if line.split()[1] in typed and "local_" not in line.split()[0])
            expected = []
            for p in params:
                ty = f"tensor<{'x'.join(map(str, p.shape))}xf32>"
                kind = "all_reduce" if stage == 0 or p.shape[0] < world else "reduce_scatter"
                expected.append([f"flow.{kind}", ty])  # (all-gathers name the shards' types)
            check(boxed == sorted(expected), f"{tag}: collectives of parameter shapes "
                                             f"{boxed}, expected {sorted(expected)}")  # fmt: skip
        if stage == 1:
            check(kinds.get("flow.all_reduce", 0) >= n and kinds.get("flow.all_gather", 0) >= n,
                  f"{tag}: all-reduce, then all-gather of the new parameters: {kinds}")  # fmt: skip
        elif stage:
            check(kinds.get("flow.reduce_scatter", 0) >= n and kinds.get("flow.all_gather", 0) >= n,
                  f"{tag}: reduce-scatter of gradients, all-gather of parameters: {kinds}")  # fmt: skip
        report.append(f"{tag}: state {state_bytes(opt)} bytes/rank, collectives {kinds}")

        if stage:  # the state dict boxed back to B loads into a plain data-parallel graph
            saved = graph.state_dict()
            dp_model = mlp().to_global(pl, B)
            dp_opt = OPTS[name](dp_model.parameters())
            dp = ZeroStep(dp_model, dp_opt, 0)
            dp.load_state_dict(saved)
            x, y = BATCHES[0]
            xg, yg = (flow.tensor(v).to_global(pl, B).to_global(sbp=S0) for v in (x, y))
            close(dp(xg, yg).numpy(), graph(xg, yg).numpy(), f"{tag}: DP graph from the state")
            for p, q in zip(dp_model.parameters(), model.parameters()):
                close(p.numpy(), q.numpy(), f"{tag}: DP graph from the state: parameters")

# a split parameter has no data-parallel axis: a clear error at the first call
split = mlp().to_global(pl, B)
to_global_(split[0].weight, sbp_=sbp.split(1))
bad = ZeroStep(split, OPTS["sgd"](split.parameters()), 2)
x, y = BATCHES[0]
try:
    bad(flow.tensor(x).to_global(pl, B), flow.tensor(y).to_global(pl, B))
    check(False, "ZeRO on a split parameter raises")
except RuntimeError as e:
    check("a split parameter has no data-parallel axis" in str(e) and "model.0.weight" in str(e),
          f"ZeRO on a split parameter: {e}")

if rank == 0:
    print("\n".join(report))
check.done()
