"""Every rank runs each collective of the compiled program and compares it with numpy on all
ranks' data (each rank can compute every other rank's input). Usage: rank_collectives.py VMFB"""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
from collective_programs import COLS, PLAN, ROWS

import flow.env
from flow.targets import load, register_group

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16, "i32": np.int32, "i64": np.int64}  # fmt: skip
REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}

rank, world = flow.env.get_rank(), flow.env.get_world_size()
module = load(open(sys.argv[1], "rb").read(), "cpu", collectives=True)
checks = 0


def data(r: int, rows: int, ty: str) -> np.ndarray:
    """Rank r's input: small integers in [-3, 3], exact in every element type."""
    v = (np.arange(rows * COLS).reshape(rows, COLS) * 3 + r * 5) % 7 - 3
    return v.astype(DTYPES[ty])


def check(name: str, got: np.ndarray, want: np.ndarray) -> None:
    global checks
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"rank {rank}: {name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}"
    )
    np.testing.assert_array_equal(got, want, err_msg=f"rank {rank}: {name}")
    checks += 1


def blocks(n: int, parts: int) -> list[slice]:
    sizes = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
    starts = np.cumsum([0, *sizes])
    return [slice(int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def run_group(gid: int, ranks: list[int]) -> None:
    """All collectives of the plan over one group (``ranks`` in group order)."""
    me, size = ranks.index(rank), len(ranks)
    mine = blocks(ROWS * size, size)[me]
    for name, types in PLAN.items():
        for ty in types:
            dt, fn = DTYPES[ty], module[f"{name}_{ty}"]
            every = [data(r, ROWS, ty) for r in ranks]
            big = [data(r, ROWS * size, ty) for r in ranks]
            if name.startswith("all_reduce_"):
                exact = REDUCE[name.rsplit("_", 1)[1]](np.stack(every).astype(np.float64), axis=0)
                got, want = fn(every[me], gid)[0], exact.astype(dt)
            elif name == "all_gather":
                got, want = fn(every[me], gid)[0], np.concatenate(every)
            elif name == "reduce_scatter_sum":
                exact = np.sum(np.stack(big).astype(np.float64), axis=0)
                got, want = fn(big[me], gid)[0], exact.astype(dt)[mine]
            elif name == "all_to_all":
                got, want = fn(big[me], gid)[0], np.concatenate([b[mine] for b in big])
            else:  # broadcast from the last rank of the group
                got, want = fn(every[me], size - 1, gid)[0], every[size - 1]
            check(f"{name}_{ty} over group {gid} {ranks}", got, want)


run_group(0, list(range(world)))
backwards = list(reversed(range(world)))
run_group(register_group(backwards), backwards)

x = data(rank, ROWS, "f32")
every = np.stack([data(r, ROWS, "f32") for r in range(world)])
y, arg = module["all_reduce_sum_inplace"](x, 0)
check("all_reduce_sum_inplace", y, (2 * every).sum(0))
check("all_reduce_sum_inplace operand", arg, x)
z, d = module["all_reduce_keeps_operand"](x, 0)
check("all_reduce_keeps_operand", z, (2 * every).sum(0) + 2 * x)
check("all_reduce_keeps_operand operand", d, 2 * x)

peer = rank ^ 1
if peer < world:
    fn = "send_then_recv" if rank % 2 == 0 else "recv_then_send"
    check(fn, module[fn](x, peer, 7, 0)[0], data(peer, ROWS, "f32"))
    mine_big, theirs = (np.full((512, 1024), r, np.float32) for r in (rank, peer))
    check("exchange", module["exchange"](mine_big, peer, 8, 0)[0], theirs)
check("barrier", module["barrier"](x, 0)[0], x)
got = module["all_reduce_sum_buffer_view"](x, 0)[0]
check("all_reduce_sum_buffer_view", got, (2 * every).sum(0) + x)

n = 2 * world + 1
big = [data(r, n, "f32") for r in range(world)]
mine = blocks(n, world)[rank]
got = module[f"reduce_scatter_uneven_r{rank}"](big[rank], 0)[0]
check("reduce_scatter_uneven", got, np.sum(big, axis=0)[mine])
got = module[f"all_to_all_uneven_r{rank}"](big[rank], 0)[0]
check("all_to_all_uneven", got, np.concatenate([b[mine] for b in big]))
local = [data(r, 3 if r == 0 else 2, "f32") for r in range(world)]
got = module[f"all_gather_uneven_r{rank}"](local[rank], 0)[0]
check("all_gather_uneven", got, np.concatenate(local))

sys.stdout.write(f"rank {rank}: {checks} checks passed\n")
