"""Data parallelism over MPI: boxing P→B against raw MPI, and a data-parallel training step.

    flow-run -n 2 benchmarks/data_parallel.py

(1) flow's eager boxing of a 64 MiB f32 partial-sum tensor to broadcast
    (`x.to_global(sbp=flow.sbp.broadcast)`, an all-reduce) beside a raw mpi4py
    Allreduce of the same buffer, in the same run.
(2) One nn.Graph SGD step of an MLP (batch 256, 784-1024-10) with the batch
    split over the ranks (S(0)) and the parameters broadcast (B), beside the
    same step on one rank with the whole batch. Prints medians and ratios on rank 0.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from _bench import machine

import flow
import flow.nn as nn


def _median(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        flow.env.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_boxing(rank: int, world: int) -> None:
    from mpi4py import MPI

    n = 64 * 1024 * 1024 // 4
    placement = flow.placement("cpu", list(range(world)))
    local = np.full(n, rank + 1, np.float32)
    partial = flow.from_numpy(local).to_global(placement, flow.sbp.partial_sum)
    out = np.empty_like(local)

    t_flow = _median(lambda: partial.to_global(placement, flow.sbp.broadcast), 5)
    t_mpi = _median(lambda: MPI.COMM_WORLD.Allreduce(local, out), 5)
    check = partial.to_global(placement, flow.sbp.broadcast).to_local().numpy()
    assert float(check[0]) == world * (world + 1) / 2
    if rank == 0:
        print(f"boxing P->B of 64 MiB f32 on {world} ranks [{machine()}]:")
        print(f"  flow eager boxing      {t_flow * 1e3:8.1f} ms")
        print(f"  mpi4py Allreduce       {t_mpi * 1e3:8.1f} ms   (flow / mpi4py = "
              f"{t_flow / t_mpi:.2f}x)")  # fmt: skip


def _mlp():
    flow.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 10))


class Step(nn.Graph):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.01))

    def build(self, x, y):
        loss = self.loss_fn(self.model(x), y)
        loss.backward()
        return loss


def bench_step(rank: int, world: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 784)).astype(np.float32)
    y = rng.integers(0, 10, 256).astype(np.int64)
    placement = flow.placement("cpu", list(range(world)))

    dp_model = _mlp()
    dp_model.to_global(placement, flow.sbp.broadcast)
    dp = Step(dp_model)
    gx = flow.tensor(x).to_global(placement, flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
    gy = flow.tensor(y).to_global(placement, flow.sbp.broadcast).to_global(sbp=flow.sbp.split(0))
    t_dp = _median(lambda: dp(gx, gy), 10)

    single = Step(_mlp())
    xt, yt = flow.tensor(x), flow.tensor(y)
    t_single = _median(lambda: single(xt, yt), 10)
    if rank == 0:
        print(f"MLP 784-1024-10 SGD step, batch 256, nn.Graph, cpu [{machine()}]:")
        print(f"  one rank, whole batch          {t_single * 1e3:8.2f} ms")
        print(f"  {world} ranks, batch split (DP)    {t_dp * 1e3:8.2f} ms   "
              f"(DP / one rank = {t_dp / t_single:.2f}x)")  # fmt: skip


def main() -> None:
    rank, world = flow.env.get_rank(), flow.env.get_world_size()
    if world < 2:
        raise SystemExit("launch with several ranks: flow-run -n 2 benchmarks/data_parallel.py")
    bench_boxing(rank, world)
    bench_step(rank, world)


if __name__ == "__main__":
    main()
