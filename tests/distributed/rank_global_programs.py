"""Run every global program of global_programs.py for this world size on this rank.

Each rank parses the same global program, compiles its own partition
(compile_for_rank), builds the global inputs from one seed, passes its shards
(cut as the argument types say: balanced splits for S, the value for B, and
addends for P: random on the other ranks, the remainder on the first) and
checks its outputs against numpy: S and B outputs shard by shard, P outputs
summed over the ranks (mpi4py). Prints `rank R: N cases ok` at the end.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from global_programs import CASES
from xdsl.dialects import func
from xdsl.parser import Parser

import flow.env
from flow.compile.per_rank import compile_for_rank, run_for_rank
from flow.dialect import make_context
from flow.dialect.attrs import dist_of
from flow.dialect.distributed import balanced_offset, balanced_split, mesh_coord
from flow.targets.collectives import mpi

SEED = 1234


def shard(value: np.ndarray, ty, rank: int, rng: np.random.Generator) -> np.ndarray:
    """This rank's shard of the global `value` of type `ty` (axes applied outer first)."""
    dist = dist_of(ty)
    coord = mesh_coord(dist.placement, rank)
    out = value
    for size, sbp, c in zip(dist.placement.mesh_shape, dist.sbp.sbps, coord):
        if sbp.kind == "S":
            n = out.shape[sbp.dim]
            start = balanced_offset(n, size, c)
            index = [slice(None)] * out.ndim
            index[sbp.dim] = slice(start, start + balanced_split(n, size)[c])
            out = out[tuple(index)]
        elif sbp.kind == "P":
            others = [rng.standard_normal(out.shape).astype(out.dtype) for _ in range(size - 1)]
            out = out - sum(others) if c == 0 else others[c - 1]
    return np.ascontiguousarray(out)


def check(case, rank: int, world) -> None:
    module = Parser(make_context(), case.program).parse_module()
    (f,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    ftype = f.function_type
    vmfb, groups = compile_for_rank(module, rank)
    values = case.inputs(np.random.default_rng(SEED))
    split_rng = np.random.default_rng(SEED + 1)  # the same addends on every rank
    args = [shard(v, ty, rank, split_rng) for v, ty in zip(values, ftype.inputs.data)]
    outputs = run_for_rank(vmfb, groups, "f", *args)
    expected = case.reference(*values)
    for i, (got, want, ty) in enumerate(zip(outputs, expected, ftype.outputs.data)):
        sbps = dist_of(ty).sbp.sbps
        if any(s.kind == "P" for s in sbps):
            assert all(s.kind == "P" for s in sbps), "mixed P outputs are not checked"
            got = world.allreduce(np.asarray(got, np.float64))
            mine = want
        else:
            mine = shard(want, ty, rank, split_rng)
        np.testing.assert_allclose(
            got, mine, rtol=1e-4, atol=1e-4, err_msg=f"{case.name} output {i} on rank {rank}"
        )


def main() -> None:
    rank, size = flow.env.get_rank(), flow.env.get_world_size()
    world = mpi().COMM_WORLD
    names = sys.argv[1:]
    cases = [c for c in CASES if c.world == size and (not names or c.name in names)]
    for case in cases:
        start = time.monotonic()
        check(case, rank, world)
        print(f"rank {rank}: {case.name} ok ({time.monotonic() - start:.2f}s)", flush=True)
    print(f"rank {rank}: {len(cases)} cases ok", flush=True)


if __name__ == "__main__":
    main()
