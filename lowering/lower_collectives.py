"""`flow-lower-collectives{rank=R}`: rank R's collectives become calls of the `comm` runtime module.

The input is a per-rank local program (the output of `flow-partition{rank=R}`).
Each collective op becomes a `func.call` of an import of the `comm` module
(the Python runtime module that runs the MPI collective; its ABI is
documented in `flow.targets.collectives`), declared once per name at module
level as `func.func private @comm.<collective>.<types>`:

    %g = arith.constant 1 : i32
    %y, %t1 = func.call @comm.all_reduce_sum.8x6xf32(%x, %t0, %g)
        : (tensor<8x6xf32>, i32, i32) -> (tensor<8x6xf32>, i32)

Each call takes the i32 token the previous call of its function returned (0 for the first)
and returns the next: the chain keeps the calls in program order in IREE, so that every rank
enters its collectives in one order (IREE reorders independent calls, and differently on
ranks whose pieces differ in shape, which would leave ranks waiting in different collectives).

The ABI works on dim 0; other dims are moved there and back with
`flow.transpose` (which `flow-fold-transposes` cancels where it can).
`flow.all_to_all` with a concat dim that is split unevenly (rows of different
sizes per source, which the ABI cannot take) is done as an all_gather along
the concat dim followed by a local slice along the split dim.

`flow.local_slice` and `flow.local_partial` need no communication: they
become a `flow.slice` of rank R's balanced piece, and the value itself on the
first rank of the group or `flow.full 0` elsewhere. `flow.send` / `flow.recv`
address world ranks: they use group 0 (all ranks) and their tag (default 0;
messages between two ranks with one tag arrive in program order).

Groups: each (placement, mesh axis) pair the program uses names the group of
ranks that contains R (`rank_groups`); the groups are numbered 1, 2, ... in
order of first use and listed in the module attribute

    flow.comm_groups = [[0, 1], [0, 2]]

as the program's group table: id `i + 1` is entry `i`. The ids are the
program's own; at load time the runtime maps them to communicators
(`flow.targets.collectives.program_groups`), so ranks of different placements
may run programs with different tables.

The rewrite itself (transposes around dim-0 calls, all_to_all, local slices) is
shared with `flow-lower-collectives-native` (`_collectives.CollectiveLowering`);
the import names are the runtime's (`flow.targets.comm_abi`), so they agree.

Afterwards no flow collective op is left and `flow-to-iree-input` lowers the
rest. Chain it after partitioning, or use the `flow-partition-to-iree-input`
pipeline (lowering/_registry.py), which runs rank R's whole chain:

    flow-partition-to-iree-input{rank=R}
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, i32
from xdsl.ir import Attribute, Block, SSAValue
from xdsl.passes import ModulePass

from flow.dialect import distributed as dd
from flow.dialect.attr_names import GROUPS_ATTR
from flow.dialect.attrs import PlacementAttr
from flow.targets.comm_abi import MODULE_NAME, WORLD, import_name

from ._collectives import CollectiveLowering, recorded_groups
from ._support import fail

__all__ = [
    "GROUPS_ATTR", "MODULE_NAME", "WORLD", "CommLowering", "LowerCollectivesPass", "comm_groups",
    "comm_symbol", "lower_collectives",
]  # fmt: skip

def comm_symbol(
    name: str, operand: Attribute | None = None, result: Attribute | None = None
) -> str:
    """The import symbol of collective `name` on these types, e.g. `comm.all_gather.2x3xf32.4x3xf32`
    (`flow.targets.comm_abi.import_name` of their text: the runtime owns the names)."""
    return import_name(
        name, None if operand is None else str(operand), None if result is None else str(result)
    )


class CommLowering(CollectiveLowering):
    """Rewrites the collectives of one module for one rank into `comm` calls, collecting the
    declarations and the group table."""

    kind = "comm calls"

    def __init__(self, module: ModuleOp, rank: int):
        super().__init__(module, rank)
        self.group_ids: dict[tuple[PlacementAttr, int], int] = {}
        self.declared: dict[str, func.FuncOp] = {}
        self.tokens: dict[Block, SSAValue] = {}
        """Per function body: the token of its last call (see `call`)."""

    def group(self, op: dd.MeshAxisOp) -> int:
        """The id of the group of `op`'s placement and axis that holds this rank."""
        key = (op.placement, op.axis)
        if key not in self.group_ids:
            mine = [g for g in op.groups() if self.rank in g]
            if not mine:
                raise fail(op, f"runs on {op.placement}, which does not hold rank {self.rank}")
            self.groups.append(mine[0])
            self.group_ids[key] = len(self.groups)
        return self.group_ids[key]

    def call(
        self,
        name: str,
        x: SSAValue,
        result: TensorType | None,
        ints: list[int],
        group: int | None = WORLD,
    ) -> SSAValue | None:
        """Call import `name` on `x`, the i32 arguments `ints`, the token of the enclosing
        block's previous call (0 before the first) and `group` (`None`: the import takes
        none); returns the tensor result, if any. Every call returns a token that the next
        one takes: the chain makes the calls data-dependent, so IREE keeps them in program
        order, and so every rank enters its collectives in the same order (IREE otherwise
        reorders independent calls, differently on ranks whose pieces differ in shape)."""
        assert self.at is not None and self.at.parent is not None
        block = self.at.parent
        symbol = comm_symbol(name, x.type, result)
        results = ([result] if result is not None else []) + [i32]
        after = self.tokens.get(block)
        args = [x, *(self.constant(v) for v in ints)]
        args.append(self.constant(0) if after is None else after)
        if group is not None:
            args.append(self.constant(group))
        if symbol not in self.declared:
            inputs = [a.type for a in args]
            self.declared[symbol] = func.FuncOp.external(symbol, inputs, results)
        call = self.emit(func.CallOp(symbol, args, results))
        self.tokens[block] = call.results[-1]
        return call.results[0] if result is not None else None

    def collective(self, name: str, x: SSAValue, result: TensorType, group: int) -> SSAValue:
        y = self.call(name, x, result, [], group)
        assert y is not None
        return y

    def p2p(self, name: str, x: SSAValue, result: TensorType | None, peer: int, tag: int):
        """A send (`result` None) or receive (`x` gives its type) between world ranks."""
        return self.call(name, x, result, [peer, tag])

    def send(self, op: dd.SendOp) -> None:
        self.p2p("send", op.operand, None, op.peer.value.data, dd.message_tag(op))

    def recv(self, op: dd.RecvOp) -> SSAValue:
        like = self.zeros(op.result.type)
        value = self.p2p("recv", like, op.result.type, op.peer.value.data, dd.message_tag(op))
        assert value is not None
        return value

    def fence(self, op: dd.FenceOp) -> None:
        """A comm.fence call per value: each computed before the next call."""
        for x in op.values:
            self.call("fence", x, None, [], None)

    def finish(self) -> None:
        """Declare the imports called, once each."""
        body = self.module.body.block
        existing = {o.sym_name.data for o in body.ops if isinstance(o, func.FuncOp)}
        for symbol, decl in self.declared.items():
            if symbol not in existing:
                body.add_op(decl)


def lower_collectives(module: ModuleOp, rank: int) -> list[tuple[int, ...]]:
    """Rewrite rank `rank`'s collectives in `module` into `comm` calls; returns the groups
    and records them in the module attribute `flow.comm_groups` (when there are any)."""
    return CommLowering.apply_to(module, rank)


def comm_groups(module: ModuleOp) -> list[tuple[int, ...]]:
    """The groups recorded by this pass (`flow.comm_groups`), in registration order."""
    return recorded_groups(module)


@dataclass(frozen=True)
class LowerCollectivesPass(ModulePass):
    """Rewrite collectives into calls of the `comm` runtime module (see the module docstring)."""

    name = "flow-lower-collectives"
    rank: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.rank < 0:
            if any(isinstance(o, dd.COLLECTIVE_OPS) for o in op.walk()):
                raise fail(op, "flow-lower-collectives needs the option rank=R")
            return
        lower_collectives(op, self.rank)
