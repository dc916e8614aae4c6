"""All-reduce of 64 MiB f32 from a compiled program vs a raw mpi4py Allreduce, in the same run.

    flow-run -n 2 benchmarks/allreduce.py [--mib 64] [--iters 10]

Each figure is the median over iterations of the slowest rank's time (ranks start together after
a barrier; the rows take turns in every iteration). Rows:
  * mpi4py Allreduce, out of place and in place, on preallocated numpy buffers: the floor;
    and into a new array each time, like the compiled import's fresh result buffer;
  * the compiled ``comm.all_reduce_sum`` import on an input already on the device (the
    collective path: map, allocate the result, MPI), and from a numpy input (flow's call path,
    which also copies the input to the device);
  * ``2*x`` then the all_reduce, out of place and ``_inplace`` (on the dead ``2*x``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import iree.runtime as rt
import numpy as np
from _bench import machine

import flow.env
from flow.targets import collectives, compile_mlir, load


def program(n: int) -> str:
    t = f"tensor<{n}xf32>"
    sym = collectives.import_name("all_reduce_sum", t)
    sym_in = collectives.import_name("all_reduce_sum_inplace", t)
    return f"""
{collectives.declare("all_reduce_sum", t)}
{collectives.declare("all_reduce_sum_inplace", t)}
func.func @all_reduce(%x: {t}) -> {t} {{
  %g = arith.constant 0 : i32
  %t = arith.constant 0 : i32
  %y, %t1 = func.call @{sym}(%x, %t, %g) : ({t}, i32, i32) -> ({t}, i32)
  return %y : {t}
}}
func.func @double_all_reduce(%x: {t}) -> {t} {{
  %g = arith.constant 0 : i32
  %d = arith.addf %x, %x : {t}
  %t = arith.constant 0 : i32
  %y, %t1 = func.call @{sym}(%d, %t, %g) : ({t}, i32, i32) -> ({t}, i32)
  return %y : {t}
}}
func.func @double_all_reduce_inplace(%x: {t}) -> {t} {{
  %g = arith.constant 0 : i32
  %d = arith.addf %x, %x : {t}
  %t = arith.constant 0 : i32
  %y, %t1 = func.call @{sym_in}(%d, %t, %g) : ({t}, i32, i32) -> ({t}, i32)
  return %y : {t}
}}
"""


def timed(rows: list[tuple[str, Callable[[], object]]], iters: int) -> list[tuple[str, float]]:
    """Median over iterations of the slowest rank's seconds, per row. Rows take turns within
    each iteration, so a change in machine load affects them alike."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    for _, fn in rows:
        fn()  # warm up: first touch of buffers, lazy initialisation
    times: dict[str, list[float]] = {name: [] for name, _ in rows}
    for _ in range(iters):
        for name, fn in rows:
            world.Barrier()
            t0 = time.perf_counter()
            fn()
            times[name].append(world.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return [(name, float(np.median(t))) for name, t in times.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    n = args.mib * 2**20 // 4
    x = np.full(n, rank + 1, np.float32)
    want = np.float32(size * (size + 1) / 2)

    module = load(compile_mlir(program(n), "cpu"), "cpu")
    on_device = rt.asdevicearray(module.device, x)
    (got,) = module["all_reduce"](x)
    assert got[0] == want and got[-1] == want, (got[0], want)
    (got,) = module["double_all_reduce_inplace"](x)
    assert got[0] == 2 * want, (got[0], 2 * want)

    out, buf = np.empty_like(x), x.copy()
    rows = [
        ("mpi4py Allreduce out of place", lambda: world.Allreduce(x, out)),
        ("mpi4py Allreduce in place", lambda: world.Allreduce(MPI.IN_PLACE, buf)),
        ("mpi4py Allreduce into a new array", lambda: world.Allreduce(x, np.empty_like(x))),
        ("compiled all_reduce, device input", lambda: module["all_reduce"](on_device)),
        ("compiled all_reduce, numpy input", lambda: module["all_reduce"](x)),
        ("compiled 2*x + all_reduce", lambda: module["double_all_reduce"](on_device)),
        (
            "compiled 2*x + all_reduce_inplace",
            lambda: module["double_all_reduce_inplace"](on_device),
        ),
    ]
    results = timed(rows, args.iters)
    if rank == 0:
        floor = results[0][1]
        print(f"all_reduce sum of {args.mib} MiB f32 on {size} ranks, driver {module.driver} "
              f"[{machine()}]")
        print(f"{'':40s} {'ms':>8s} {'vs mpi4py':>10s} {'GB/s':>7s}")
        for name, sec in results:
            print(f"{name:40s} {sec * 1e3:8.1f} {sec / floor:9.2f}x {x.nbytes / sec / 1e9:7.2f}")


if __name__ == "__main__":
    main()
