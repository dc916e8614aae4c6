"""`flow-channel-table`: record a global program's channel table for its per-rank programs.

IREE's native collectives (`flow-lower-collectives-native`) run on channels split from the
world channel, and a split is a collective over the whole world: every rank must split the
same channels in the same order, even the ranks a channel does not hold. The table is
every (placement, mesh axis of more than one rank) of the *global* program, in order of
first appearance, so this pass records it before partitioning drops the other ranks' values:

    builtin.module attributes {flow.channel_table = [[#flow.placement<"cpu", [0, 1]>, 0 : i64]]}

A module that already has a table keeps it. The native lowering reads the table and
removes the attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, TensorType, i64
from xdsl.ir import Attribute
from xdsl.passes import ModulePass

from flow.dialect.attrs import PlacementAttr, dist_of

from ._support import fail

__all__ = [
    "CHANNEL_TABLE_ATTR", "Channel", "ChannelTablePass", "channel_table", "read_channel_table",
    "set_channel_table",
]  # fmt: skip

CHANNEL_TABLE_ATTR = "flow.channel_table"
"""Module attribute: the global program's channel table, `[[placement, axis], ...]`."""

Channel = tuple[PlacementAttr, int]


def channel_table(module: ModuleOp) -> list[Channel]:
    """Every (placement, mesh axis) of a global program that a collective may run on: each
    placement of its values and ops, in order of first appearance, with each of its axes of
    more than one rank. The same on every rank, since every rank compiles the same program."""
    seen: list[PlacementAttr] = []

    def note(attr: Attribute) -> None:
        dist = dist_of(attr) if isinstance(attr, TensorType) else None
        placement = dist.placement if dist is not None else attr
        if isinstance(placement, PlacementAttr) and placement not in seen:
            seen.append(placement)

    for op in module.walk():
        if isinstance(op, func.FuncOp):
            for ty in (*op.function_type.inputs.data, *op.function_type.outputs.data):
                note(ty)
        for value in (*op.operands, *op.results):
            note(value.type)
        for attr in op.properties.values():
            note(attr)
    return [(p, axis) for p in seen for axis, n in enumerate(p.mesh_shape) if n > 1]


def set_channel_table(module: ModuleOp, table: list[Channel]) -> None:
    """Record `table` on a per-rank program for flow-lower-collectives-native."""
    module.attributes[CHANNEL_TABLE_ATTR] = ArrayAttr(
        [ArrayAttr([p, IntegerAttr(axis, i64)]) for p, axis in table]
    )


def read_channel_table(module: ModuleOp) -> list[Channel] | None:
    """The table recorded on `module` (None when it has none); raises on a malformed one."""
    attr = module.attributes.get(CHANNEL_TABLE_ATTR)
    if attr is None:
        return None
    table = []
    for entry in attr.data if isinstance(attr, ArrayAttr) else ():
        p, axis = entry.data if isinstance(entry, ArrayAttr) and len(entry.data) == 2 else (0, 0)
        if not isinstance(p, PlacementAttr) or not isinstance(axis, IntegerAttr):
            raise fail(
                module, f"expected {CHANNEL_TABLE_ATTR} = [[placement, axis], ...], got {attr}"
            )
        table.append((p, axis.value.data))
    return table


@dataclass(frozen=True)
class ChannelTablePass(ModulePass):
    """Record the global program's channel table on the module (see the module docstring)."""

    name = "flow-channel-table"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if CHANNEL_TABLE_ATTR not in op.attributes:
            set_channel_table(op, channel_table(op))
