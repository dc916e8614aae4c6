"""Compile a global flow program for one rank and run it over MPI.

    vmfb, groups = compile_for_rank(module, rank)   # same module text on every rank
    outputs = run_for_rank(vmfb, groups, "main", *my_shards)

`compile_for_rank` runs SBP inference (unless the program has it already) and the per-rank
pipeline of the lowering registry, `flow-partition-to-iree-input{rank=R}` (partition,
pipeline schedule, collectives as imports of the `comm` runtime module, hand-off), then
compiles. For cuda and rocm, `flow-partition-to-iree-input-native` keeps the collectives in
IREE: `flow.collective.*` on NCCL / RCCL channels, for an IREE runtime that provides those
channels; programs that flow itself runs use `comm` on every target, staging device buffers
through host memory. `run_for_rank` loads it with the program's group table (the
communicators are made on first use, by the members of each group only) and calls the
function with this rank's shards. `FLOW_COMM_PLAN=1` prints each rank's collectives.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from flow.dialect.attr_names import GROUPS_ATTR
from flow.lowering import run_pipeline, to_iree_text
from flow.lowering.lower_collectives import comm_groups
from flow.lowering.print_comm_plan import communication_plan

__all__ = [
    "absent_results", "communication_plan", "compile_for_rank", "held_inputs", "lower_for_rank",
    "rank_pipeline", "run_for_rank",
]  # fmt: skip

if TYPE_CHECKING:
    from flow.targets import Target

Group = tuple[int, ...]


def compile_for_rank(
    module: ModuleOp,
    rank: int,
    target: str | Target = "cpu",
    *,
    infer_sbp: bool = True,
    collectives: str | None = None,
    in_child: bool = False,
) -> tuple[bytes, list[Group]]:
    """Rank `rank`'s compiled program of the global program `module` (left unchanged), and the
    groups its collectives use, in registration order (group id = index + 1). `in_child`
    runs IREE as a child process (`compile_mlir`); nothing here communicates with the other
    ranks."""
    from flow.targets import compile_mlir

    text, groups = lower_for_rank(
        module, rank, target, infer_sbp=infer_sbp, collectives=collectives
    )
    return compile_mlir(text, target, in_child=in_child), groups


def lower_for_rank(
    module: ModuleOp,
    rank: int,
    target: str | Target = "cpu",
    *,
    infer_sbp: bool = True,
    collectives: str | None = None,
) -> tuple[str, list[Group]]:
    """Rank `rank`'s program of `module` as the text handed to IREE, and its groups.

    `collectives` (by default the target's own) picks the lowering: `comm` calls (MPI on host
    memory, which flow's runtime provides on every driver) or IREE's native collectives
    (cuda, rocm), whose channels are split from the whole global program's channel table so
    that every rank creates the same channels."""
    work = module.clone()
    spec = rank_pipeline(rank, target, collectives)
    run_pipeline(work, f"{'flow-infer-sbp,' if infer_sbp else ''}{spec}")
    groups = comm_groups(work)
    work.attributes.pop(GROUPS_ATTR, None)  # nothing named flow.* crosses to IREE
    return to_iree_text(work), groups


def rank_pipeline(rank: int, target: str | Target = "cpu", collectives: str | None = None
                  ) -> str:  # fmt: skip
    """The per-rank pipeline that lowers rank `rank`'s program for `target` (see
    `lower_for_rank` for `collectives`), with its options."""
    from flow.targets import get_target
    from flow.targets.blas_calibration import policy

    collectives = collectives or get_target(target).collectives
    if collectives not in ("comm", "native"):
        raise ValueError(f"collectives must be 'comm' or 'native', got {collectives!r}")
    pipeline = "flow-partition-to-iree-input" + ("-native" if collectives == "native" else "")
    return f"{pipeline}{{rank={rank} blas={policy(get_target(target))}}}"


def run_for_rank(
    vmfb: bytes,
    groups: Sequence[Group],
    function: str,
    *arrays: Any,
    target: str = "cpu",
    driver: str | None = None,
) -> tuple[np.ndarray, ...]:
    """Load `vmfb` with the `comm` collectives over its group table `groups` and call
    `function` on this rank's `arrays`. With more ranks than cores the CPU driver defaults
    to `local-sync`."""
    from flow.distributed import env
    from flow.targets import get_target, load, prepare_iree_for_mpi

    prepare_iree_for_mpi()
    crowded = env.get_world_size() >= (os.cpu_count() or 1)
    if driver is None and crowded and get_target(target).name == "cpu":
        driver = "local-sync"
    module = load(vmfb, target, driver=driver, collectives=True, groups=groups)
    return module[function](*arrays)


def _holds(info: Any) -> bool:
    from flow.distributed import env

    return info is None or env.get_rank() in info.placement.attr.rank_list


def held_inputs(lowered: Any, inputs: list) -> list:
    """The inputs of `lowered`'s per-rank program: flow-partition drops the arguments on
    placements that do not hold this rank (another pipeline stage's parameters)."""
    return [a for i, a in enumerate(inputs) if _holds(lowered.arg_dists.get(i))]


def absent_results(lowered: Any, outputs: list) -> list:
    """All of `lowered`'s results, with an empty shard (as eager mode has) for each one on
    a placement that does not hold this rank, which the per-rank program does not return."""
    f = lowered.module.body.block.first_op
    it = iter(outputs)
    out = []
    for ty, info in zip(f.function_type.outputs.data, lowered.out_dists):
        if _holds(info):
            out.append(next(it))
        else:
            out.append(_empty(ty.get_shape(), _dtype_of(ty.element_type)))
    return out


def _empty(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    from flow.distributed.placement import empty_shard as _empty

    return _empty(shape, dtype)


def _dtype_of(el) -> np.dtype:
    from flow.core import dtypes as _dtypes

    return np.dtype(_dtypes.from_ir(el).np_dtype)
