"""`flow-partition-to-iree-input{rank=R}`: rank R's program of a global program, for IREE.

A named pipeline with an option: its steps are in the registry (`PIPELINES` in
lowering/_registry.py), its option is a field of its pass class, here. For a global program
whose values carry their distributions (the output of `flow-infer-sbp`):

    flow-partition{rank=R}           rank R's local program; boxing becomes collectives
    flow-pipeline-schedule{rank=R}   a pipeline stage's micro-batches in schedule order
    flow-print-comm-plan{rank=R}     with FLOW_COMM_PLAN=1: the collectives, on stderr
    flow-lower-collectives{rank=R}   collectives become calls of the `comm` runtime module
    flow-to-iree-input               the hand-off

`flow-partition-to-iree-input-native{rank=R}` records the global program's channel table
first (`flow-channel-table`) and lowers the collectives to IREE's own
(`flow-lower-collectives-native`), for cuda and rocm. This is what `compile_for_rank`
runs on every rank; the groups the program uses are left in the module attribute
`flow.comm_groups` for the runtime (remove it before handing the text to IREE).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._registry import PipelinePass

__all__ = ["PartitionToIreeInputNativePass", "PartitionToIreeInputPass"]


@dataclass(frozen=True)
class PartitionToIreeInputPass(PipelinePass):
    """Rank `rank`'s program of a global program, its collectives `comm` calls (see above)."""

    name = "flow-partition-to-iree-input"
    rank: int = -1
    """The rank whose program to make; -1: the one program every rank runs (even splits)."""
    blas: str = "none"
    """As for `flow-to-iree-input` (lowering/to_iree_input.py)."""


@dataclass(frozen=True)
class PartitionToIreeInputNativePass(PartitionToIreeInputPass):
    """Rank `rank`'s program of a global program, with IREE's native collectives."""

    name = "flow-partition-to-iree-input-native"
