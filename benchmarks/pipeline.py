"""Pipeline parallelism: GPipe against 1F1B on a two-stage MLP, in time, memory and bubble.

    flow-run -n 2 benchmarks/pipeline.py   # one rank per stage
    flow-run -n 4 benchmarks/pipeline.py   # two stages of two ranks, data parallel inside each

An nn.Graph SGD step of an MLP (batch 512: 784-512-512 on stage 0, 512-512-512-10 on
stage 1) with 8 micro-batches (gradient accumulation), under each schedule; every rank
computes on one core (`FLOW_CPU_DRIVER=local-sync`). Rank 0 prints:

* step time: the median over rounds (warm-up excluded) of the slowest rank's time; the
  schedules and the references below take turns in each round, so load hits all alike;
* peak memory per rank, (a) static: `graph.memory_analysis().peak_live_bytes` of the rank's
  program after `flow-partition`, `flow-pipeline-schedule` and fusion: the most bytes of
  tensors alive at once in the schedule's op order, parameters and inputs included;
  (b) at run time: the peak of IREE's device allocator statistics, from a fresh run of this
  script per schedule (the peak cannot be reset); freed buffers stay in IREE's caching pool,
  so this is the memory IREE holds. Process RSS would mostly measure the compiler, the
  libraries and what malloc keeps, so it is not used. The run-time order follows the
  schedule because flow-pipeline-schedule fences each slot's results into the chain of
  sends and receives (IREE would otherwise put a stage's backward work off until its last
  receive); the allocator peak still includes IREE's cached pool and transient buffers;
* the bubble: theoretical (p-1)/(m+p-1) for p stages and m micro-batches, and measured,
  1 - (T/n)/T_step for n ranks, with T the same step without stages on one rank: T_one on
  rank 0 alone (the other ranks sleep), and T_all on every rank at once, which also counts
  how much the ranks slow each other down when they share the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from _bench import machine

import flow
import flow.nn as nn
import flow.nn.functional as F
from flow import placement, sbp

SCHEDULES = ("gpipe", "1f1b")
MIB = 1024 * 1024


def _comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


def idle_barrier() -> None:
    """A barrier that sleeps while it waits (MPI's spins, taking a core from the rank at work)."""
    req = _comm().Ibarrier()
    while not req.Test():
        time.sleep(0.005)


def make_stages(hidden: int) -> tuple[nn.Module, nn.Module]:
    flow.manual_seed(0)
    first = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
    second = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                           nn.ReLU(), nn.Linear(hidden, 10))  # fmt: skip
    return first, second


class Step(nn.Graph):
    def __init__(self, first, second, micro_batches: int, stages=None, schedule: str = "1f1b"):
        super().__init__()
        self.first, self.second = first, second
        self.add_optimizer(flow.optim.SGD([*first.parameters(), *second.parameters()], lr=0.01))
        self.config.set_gradient_accumulation_steps(micro_batches)
        if stages is not None:
            (p0, p1), inner = stages
            self.first.to(nn.graph.GraphModule).set_stage(stage_id=0, placement=p0)
            self.second.to(nn.graph.GraphModule).set_stage(stage_id=1, placement=p1, sbp=inner)
            self.config.set_pipeline_schedule(schedule)

    def build(self, x, y):
        loss = F.cross_entropy(self.second(self.first(x)), y)
        loss.backward()
        return loss


class Setup:
    """The placements, data and graphs of one run."""

    def __init__(self, args):
        self.args = args
        self.rank, self.world = flow.env.get_rank(), flow.env.get_world_size()
        half = self.world // 2
        self.p0 = placement("cpu", list(range(half)))
        self.p1 = placement("cpu", list(range(half, self.world)))
        # Two ranks per stage: each takes half of every micro-batch (data parallel).
        self.inner = sbp.split(0) if half > 1 else sbp.broadcast
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((args.batch, 784)).astype(np.float32)
        self.y = rng.integers(0, 10, args.batch).astype(np.int64)

    def staged(self, schedule: str) -> tuple[Step, tuple]:
        first, second = make_stages(self.args.hidden)
        first.to_global(self.p0, sbp.broadcast)
        second.to_global(self.p1, sbp.broadcast)
        step = Step(first, second, self.args.micro_batches,
                    ((self.p0, self.p1), self.inner), schedule)  # fmt: skip
        x = flow.tensor(self.x).to_global(self.p0, sbp.broadcast).to_global(sbp=self.inner)
        y = flow.tensor(self.y).to_global(self.p1, sbp.broadcast).to_global(sbp=self.inner)
        return step, (x, y)

    def single(self) -> tuple[Step, tuple]:
        step = Step(*make_stages(self.args.hidden), self.args.micro_batches)
        return step, (flow.tensor(self.x), flow.tensor(self.y))


def static_peak(step: Step) -> int:
    """The peak live bytes of this rank's program after partitioning and scheduling
    (`graph.memory_analysis()`, flow/lowering/memory_analysis.py)."""
    return step.memory_analysis().peak_live_bytes


def allocator_peak() -> int:
    from flow.targets.runtime import device_config

    return int(device_config("cpu").device.allocator.statistics["device_bytes_peak"])


def measure_memory(setup: Setup, schedule: str) -> None:
    """Child run: a few steps of one schedule, then rank 0 prints every rank's allocator peak."""
    step, inputs = setup.staged(schedule)
    for _ in range(3):
        step(*inputs)
    peaks = _comm().gather(allocator_peak(), root=0)
    if setup.rank == 0:
        print("MEMORY " + json.dumps(peaks), flush=True)


def runtime_peaks(setup: Setup) -> dict[str, list[int] | None]:
    """Each schedule's allocator peaks per rank, from a fresh run of this script (rank 0
    launches it; the others sleep)."""
    from flow.distributed.launch import launch_command, launch_env

    out: dict[str, list[int] | None] = {}
    if setup.rank == 0:
        for schedule in SCHEDULES:
            argv = [*sys.argv[1:], "--memory", schedule]
            cmd = launch_command(setup.world, os.path.abspath(__file__), argv)
            env = {**launch_env(setup.world), "FLOW_SYNC_COMPILE": "1"}  # IREE from the start
            run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            lines = [ln for ln in run.stdout.splitlines() if ln.startswith("MEMORY ")]
            if run.returncode != 0 or not lines:
                print(f"  (runtime memory of {schedule} not measured: exit {run.returncode}\n"
                      f"{run.stderr[-2000:]})")  # fmt: skip
                out[schedule] = None
            else:
                out[schedule] = json.loads(lines[-1].split(" ", 1)[1])
    idle_barrier()
    return out


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def time_steps(setup: Setup, steps: dict[str, tuple[Step, tuple]]) -> dict[str, float]:
    """Median seconds of a step under each schedule (the slowest rank's); of the unstaged
    step on rank 0 alone ("one", the other ranks sleeping) and on every rank at once ("all",
    the slowest rank's). Timed in alternating rounds, so a burst of load hits all alike."""
    single = setup.single()
    samples: dict[str, list[float]] = {name: [] for name in [*steps, "one", "all"]}

    def sample(name: str, t: float, r: int) -> None:
        if r >= setup.args.warmup:
            samples[name].append(t)

    for r in range(setup.args.warmup + setup.args.rounds):
        for name, (step, inputs) in steps.items():
            flow.env.barrier()
            sample(name, timed(step, *inputs), r)
        if setup.rank == 0:
            sample("one", timed(single[0], *single[1]), r)
        idle_barrier()
        flow.env.barrier()  # start together
        sample("all", timed(single[0], *single[1]), r)
    comm = _comm()
    out = {name: statistics.median(np.max(comm.allgather(samples[name]), axis=0))
           for name in [*steps, "all"]}  # fmt: skip
    out["one"] = comm.bcast(statistics.median(samples["one"]) if setup.rank == 0 else 0.0)
    return out


def report(setup: Setup, times, static, runtime) -> None:
    a, world = setup.args, setup.world
    p, m, h = 2, a.micro_batches, a.hidden
    cores = len(os.sched_getaffinity(0))
    inside = "one rank" if world == 2 else f"{world // 2} ranks, data parallel"
    print(f"Pipeline MLP 784-{h}-{h} | {h}-{h}-{h}-10, batch {a.batch}, {m} micro-batches, SGD; "
          f"{p} stages of {inside}; {world} ranks on {cores} cores, "
          f"{os.environ.get('FLOW_CPU_DRIVER')} [{machine()}]")  # fmt: skip
    print(f"  {'':46} {'GPipe':>10} {'1F1B':>10} {'1F1B/GPipe':>11}")

    def row(label: str, g: float | None, f: float | None) -> None:
        if g is None or f is None:
            print(f"  {label:46} {'n/a':>10} {'n/a':>10}")
        else:
            print(f"  {label:46} {g:10.2f} {f:10.2f} {f / g:10.2f}x")

    def pct(label: str, g: float, f: float) -> None:
        print(f"  {label:46} {g:10.1%} {f:10.1%}")

    row("step time, ms (median)", times["gpipe"] * 1e3, times["1f1b"] * 1e3)
    for r in range(world):
        row(f"static peak live, MiB, rank {r} (params incl.)",
            static["gpipe"][r] / MIB, static["1f1b"][r] / MIB)  # fmt: skip
    for r in range(world):
        g, f = runtime.get("gpipe"), runtime.get("1f1b")
        row(f"IREE allocator peak, MiB, rank {r}",
            None if g is None else g[r] / MIB, None if f is None else f[r] / MIB)  # fmt: skip
    print("  (the allocator peak includes IREE's caching pool and transients; see the docstring)")
    theory = (p - 1) / (m + p - 1)
    pct("bubble, theoretical (p-1)/(m+p-1)", theory, theory)
    for key, what in (("one", "T_one"), ("all", "T_all")):
        ideal = times[key] / world
        pct(f"bubble, measured 1-({what}/{world})/T_step",
            1 - ideal / times["gpipe"], 1 - ideal / times["1f1b"])  # fmt: skip
    print(f"  T_one: the step without stages on rank 0 alone: {times['one'] * 1e3:.2f} ms")
    print(f"  T_all: the same on every rank at once:         {times['all'] * 1e3:.2f} ms "
          f"(T_all/T_one = {times['all'] / times['one']:.2f}: how much the ranks slow each "
          "other down)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10, help="timed steps per schedule")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--memory", choices=SCHEDULES, help=argparse.SUPPRESS)  # child runs
    args = parser.parse_args()
    os.environ.setdefault("FLOW_CPU_DRIVER", "local-sync")  # one core per rank
    setup = Setup(args)
    if setup.world < 2 or setup.world % 2:
        raise SystemExit(
            "launch with an even number of ranks: flow-run -n 2 benchmarks/pipeline.py"
        )
    if args.memory:
        measure_memory(setup, args.memory)
        return
    runtime = runtime_peaks(setup)
    steps = {schedule: setup.staged(schedule) for schedule in SCHEDULES}
    times = time_steps(setup, steps)
    static = {s: _comm().gather(static_peak(step), root=0)
              for s, (step, _) in steps.items()}  # fmt: skip
    if setup.rank == 0:
        report(setup, times, static, runtime)


if __name__ == "__main__":
    main()
