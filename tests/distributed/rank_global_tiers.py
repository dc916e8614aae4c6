"""Global programs on the execution tiers (compile/tiers.py), on every rank: a global flow.jit
function, a data-parallel nn.Graph training step (S(0) batch, broadcast parameters, SGD with
momentum) and a two-stage pipeline run interpreted while each rank compiles its partition in
the background, then compiled; every call matches a single-device numpy / eager reference,
and every rank switches at the same call. A background compile that fails on one rank makes
every rank raise at the same call, and the call after starts over. Run with
`FLOW_SYNC_COMPILE=0` and an empty compile cache. Prints `rank R: WHAT switched at call K`
lines and `rank R: N checks passed`."""

from __future__ import annotations

import functools
import sys

import numpy as np
from rank_checks import Checks
from rank_models import Step, mlp

import flow
import flow.env
from flow.compile import tiers
from flow.distributed.placement import placement, sbp
from flow.targets import CompileError, compiler

rank, world = flow.env.get_rank(), flow.env.get_world_size()
S, B, P = sbp.split, sbp.broadcast, sbp.partial_sum
pl = placement("cpu", list(range(world)))
check = Checks(rank)
close = functools.partial(check.close, rtol=1e-4, atol=1e-5)
check(not tiers.sync_compile(), "run with FLOW_SYNC_COMPILE=0")
MAX_INTERPRETED = 4  # calls before waiting for the compile (a slow machine)


def glob(value: np.ndarray, nd) -> flow.Tensor:
    return flow.tensor(value).to_global(pl, B).to_global(sbp=nd)


def only_program(cache) -> tiers.Tiered:
    (program,) = cache.values()
    check(isinstance(program, tiers.Tiered), f"tiered, got {type(program).__name__}")
    return program


def run_tiered(call, program_of, what: str, calls: int, *, own_wait: bool = False) -> None:
    """`call(i)` for i in range(calls), checking its results against the reference itself;
    waits for the compile after MAX_INTERPRETED interpreted calls, with `Tiered.wait` (every
    rank) or, `own_wait`, for this rank's compile only, so that the next call's agreement
    switches; reports the switch."""
    program = None
    switched = None
    for i in range(calls):
        if program is not None and program.tier == "interpreted" and i == MAX_INTERPRETED:
            if own_wait:
                program._job.done.wait()  # no collective: the call's agreement switches
            else:
                program.wait()  # collective: every rank waits here, on the same call
        call(i)
        program = program_of()
        if program.tier == "compiled" and switched is None:
            switched = i
        check(program.interpreted_calls == (i + 1 if switched is None else switched),
              f"{what}: interpreted calls counted")  # fmt: skip
    check(switched is not None and switched >= 1, f"{what}: interpreted first, then compiled")
    # one line, as Checks.done writes (ranks share the launcher's stdout)
    sys.stdout.write(f"rank {rank}: {what} switched at call {switched}\n")
    sys.stdout.flush()


# ----------------------------------------------------------------- a global flow.jit function
rng = np.random.default_rng(0)
X = rng.standard_normal((6, 4)).astype(np.float32)
W = rng.standard_normal((4, 5)).astype(np.float32)


@flow.jit
def layer(x, w):
    h = flow.tanh(x @ w)  # S(0) @ B -> S(0)
    part = x.to_global(sbp=S(1)) @ w.to_global(sbp=S(0))  # -> P: a partial-sum result
    return h, h.sum(), part


def check_layer(i: int) -> None:
    x, w = X + i, W * (i + 1)
    h, total, part = layer(glob(x, S(0)), glob(w, B))
    want = np.tanh(x @ w)
    check(h.sbp == (S(0),) and part.sbp == (P,), f"call {i}: result sbps {h.sbp} {part.sbp}")
    close(h.numpy(), want, f"call {i}: S(0) result")
    close(total.numpy().reshape(()), want.sum(), f"call {i}: sum", atol=1e-4)
    close(part.numpy(), x @ w, f"call {i}: partial-sum result")
    close((part + 1.0).numpy(), x @ w + 1, f"call {i}: partial-sum result, used eagerly")


run_tiered(check_layer, lambda: only_program(layer._cache), "jit", 7, own_wait=True)


# ----------------------------------------------------------------- data-parallel nn.Graph training
ref = mlp()
ref_opt = flow.optim.SGD(ref.parameters(), lr=0.5, momentum=0.9)
dp = mlp()
dp.to_global(pl, B)
dp_step = Step(dp, flow.optim.SGD(dp.parameters(), lr=0.5, momentum=0.9))
BATCHES = [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8))
           for _ in range(8)]  # fmt: skip


def train(i: int) -> None:
    xb, yb = BATCHES[i]
    ref_opt.zero_grad()
    want = flow.nn.functional.cross_entropy(ref(flow.tensor(xb)), flow.tensor(yb))
    want.backward()
    ref_opt.step()
    got = dp_step(glob(xb, S(0)), glob(yb, S(0)))
    close(got.numpy().reshape(()), want.numpy().reshape(()), f"step {i}: loss")
    for (name, p), q in zip(dp.named_parameters(), ref.parameters()):
        check(p.sbp == (B,), f"step {i}: {name} stays broadcast")
        close(p.numpy(), q.numpy(), f"step {i}: {name}")


# (the momentum buffers are made before the first step: one program serves every step)
run_tiered(train, lambda: only_program(dp_step._engine.programs), "graph", len(BATCHES))


# ----------------------------------------------------------------- a two-stage pipeline
# Each stage's parameters live on its ranks only: the interpreter gathers and computes every
# stage on every rank, then keeps this rank's shards (empty ones off its stage).
if world > 1:
    P0 = placement("cpu", list(range(world // 2)))
    P1 = placement("cpu", list(range(world // 2, world)))

    def stages() -> list[flow.nn.Module]:
        flow.manual_seed(0)
        return [flow.nn.Sequential(flow.nn.Linear(6, 8), flow.nn.ReLU()), flow.nn.Linear(8, 3)]

    class Pipeline(flow.nn.Graph):
        def __init__(self, first, second, *, staged: bool):
            super().__init__()
            self.first, self.second = first, second
            params = [*first.parameters(), *second.parameters()]
            self.add_optimizer(flow.optim.SGD(params, lr=0.5, momentum=0.9))
            if staged:
                self.first.to(flow.nn.graph.GraphModule).set_stage(stage_id=0, placement=P0)
                self.second.to(flow.nn.graph.GraphModule).set_stage(stage_id=1, placement=P1)
            self.config.set_gradient_accumulation_steps(2)

        def build(self, x, y):
            loss = flow.nn.functional.cross_entropy(self.second(self.first(x)), y)
            loss.backward()
            return loss

    ref_pipe = Pipeline(*stages(), staged=False)
    first, second = stages()
    first.to_global(P0, B)
    second.to_global(P1, B)
    pipe = Pipeline(first, second, staged=True)

    def pipeline_step(i: int) -> None:
        xb, yb = BATCHES[i]
        want = ref_pipe(flow.tensor(xb), flow.tensor(yb))
        got = pipe(flow.tensor(xb).to_global(P0, B), flow.tensor(yb).to_global(P1, B))
        check(got.placement == P1, f"pipeline step {i}: the loss is on the last stage")
        close(got.numpy().reshape(()), want.numpy().reshape(()), f"pipeline step {i}: loss")

    run_tiered(pipeline_step, lambda: only_program(pipe._engine.programs), "pipeline", 6)
    for p, q in zip([*first.parameters(), *second.parameters()],
                    [*ref_pipe.first.parameters(), *ref_pipe.second.parameters()]):  # fmt: skip
        close(p.numpy(), q.numpy(), "pipeline parameters after the steps")


# ----------------------------------------------------------------- a compile failing on one rank
@flow.jit
def scaled(x):
    return x * 3.0 + 1.0


if rank == world - 1:  # this rank's background iree-compile fails (exits 1, writes nothing)
    real = compiler._iree_compile
    compiler._iree_compile = lambda: "false"
x = glob(X, S(0))
close(scaled(x).numpy(), X * 3 + 1, "interpreted while the compile fails")
program = only_program(scaled._cache)
try:
    program.wait()
except CompileError as err:
    check(rank == world - 1, f"the failing rank raises its own error: {err}")
except RuntimeError as err:
    check(rank != world - 1 and f"rank {world - 1}" in str(err),
          f"the other ranks raise too, naming the failing rank: {err}")  # fmt: skip
else:
    check(False, "a failed compile raises on every rank")
check(len(scaled._cache) == 0, "the failed program is dropped on every rank")
if rank == world - 1:
    compiler._iree_compile = real
close(scaled(x).numpy(), X * 3 + 1, "the next call starts over")
only_program(scaled._cache).wait()
close(scaled(x).numpy(), X * 3 + 1, "then compiled")
check(only_program(scaled._cache).tier == "compiled", "compiled after the wait")

check.done()
