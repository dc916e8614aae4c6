"""Compile a global flow program for one rank and run it over MPI.

    vmfb, groups = compile_for_rank(module, rank)   # same module text on every rank
    outputs = run_for_rank(vmfb, groups, "main", *my_shards)

`compile_for_rank` runs SBP inference, `flow-partition{rank=R}`,
`flow-lower-collectives{rank=R}` and `flow-to-iree-input`, then compiles; the
collectives become imports of the `comm` runtime module. `run_for_rank`
registers the program's groups (every rank must call it, with programs that
use the same sequence of placements and mesh axes, since registration is
collective) and calls the function with this rank's shards.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from flow.lowering import run_pipeline, to_iree_text
from flow.lowering.lower_collectives import GROUPS_ATTR, comm_groups

__all__ = ["communication_plan", "compile_for_rank", "run_for_rank"]

Group = tuple[int, ...]


def compile_for_rank(
    module: ModuleOp, rank: int, target: str = "cpu", *, infer_sbp: bool = True
) -> tuple[bytes, list[Group]]:
    """Rank `rank`'s compiled program of the global program `module` (left unchanged), and the
    groups its collectives use, in registration order (group id = index + 1)."""
    from flow.targets import compile_mlir

    work = module.clone()
    steps = "flow-infer-sbp," if infer_sbp else ""
    run_pipeline(work, f"{steps}flow-partition{{rank={rank}}}")
    if os.environ.get("FLOW_COMM_PLAN"):
        print(f"communication plan of rank {rank}:", file=sys.stderr)
        for line in communication_plan(work) or ["(no communication)"]:
            print(f"  {line}", file=sys.stderr)
    run_pipeline(work, f"flow-lower-collectives{{rank={rank}}},flow-to-iree-input")
    groups = comm_groups(work)
    work.attributes.pop(GROUPS_ATTR, None)  # nothing named flow.* crosses to IREE
    return compile_mlir(to_iree_text(work), target), groups


_COLLECTIVES = ("flow.all_reduce", "flow.all_gather", "flow.reduce_scatter", "flow.all_to_all",
                "flow.send", "flow.recv", "flow.local_slice", "flow.local_partial")  # fmt: skip


def communication_plan(partitioned: ModuleOp) -> list[str]:
    """One line per collective of a partitioned (per-rank) program: the op, the local tensor
    it moves, its size in bytes and the user source line (`FLOW_COMM_PLAN=1` prints it)."""
    lines = []
    for op in partitioned.walk():
        if op.name not in _COLLECTIVES:
            continue
        value = op.operands[0] if op.operands else op.results[0]
        ty = value.type
        n = int(np.prod(ty.get_shape())) if ty.get_shape() else 1
        nbytes = n * _itemsize(ty.element_type)
        loc = op.location
        where = f"  at {loc.filename.data}:{loc.line.data}" if hasattr(loc, "filename") else ""
        props = ", ".join(f"{k}={v}" for k, v in op.properties.items() if k != "placement")
        lines.append(f"{op.name} {ty} ({nbytes} bytes){' ' + props if props else ''}{where}")
    return lines


def _itemsize(el) -> int:
    width = getattr(el, "bitwidth", None) or getattr(getattr(el, "width", None), "data", 32)
    return max(1, int(width) // 8)


_registered: list[Group] = []
"""The groups this process registered, in order: group id i + 1 is entry i."""


def _register(groups: Sequence[Group]) -> None:
    from flow.targets.collectives import register_group

    for i, group in enumerate(groups):
        if i < len(_registered):
            if _registered[i] != tuple(group):
                raise ValueError(
                    f"group {i + 1} is already registered as {list(_registered[i])}, this "
                    f"program needs {list(group)}: programs run in one process must use "
                    "their groups in the same order"
                )
            continue
        gid = register_group(group)
        if gid != i + 1:
            raise RuntimeError(f"group {list(group)} got id {gid}, expected {i + 1}")
        _registered.append(tuple(group))


def run_for_rank(
    vmfb: bytes,
    groups: Sequence[Group],
    function: str,
    *arrays: Any,
    target: str = "cpu",
    driver: str | None = None,
) -> tuple[np.ndarray, ...]:
    """Register `groups` (collective: every rank calls this), load `vmfb` with the `comm`
    collectives and call `function` on this rank's `arrays`. With more ranks than cores the
    CPU driver defaults to `local-sync`."""
    from flow import env
    from flow.targets import load, prepare_iree_for_mpi

    prepare_iree_for_mpi()
    _register(groups)
    if driver is None and env.get_world_size() >= (os.cpu_count() or 1):
        driver = "local-sync"
    module = load(vmfb, target, driver=driver, collectives=True)
    return module[function](*arrays)
