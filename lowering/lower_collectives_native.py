"""`flow-lower-collectives-native{rank=R}`: rank R's collectives become IREE's native collectives.

The GPU counterpart of `flow-lower-collectives` (which calls the `comm`
runtime module over MPI, for CPU programs): on cuda and rocm, IREE runs
`flow.collective.*` ops itself (NCCL / RCCL), so the per-rank program keeps
its collectives inside IREE:

    %ch = "util.global.load"() <{global = @__flow_channel_1}> : () -> !flow.channel
    %e = "tensor.empty"() : () -> tensor<8x6xf32>
    %y = "flow.collective.all_reduce"(%e, %x, %ch) <{element_type = 9 : i32,
           reduction_op = 1 : i32, tied_operands = [0 : index]}> : (...) -> tensor<8x6xf32>

(those `flow.` names are IREE's Flow dialect, declared in `_iree_ops`).

Channels: `@__flow_channel_0` is the world (`flow.channel.default`); channel
`i + 1` belongs to entry `i` of the channel table, one entry per (placement,
mesh axis), and is `flow.channel.split` of the world with color = the index
of this rank's group among the axis's groups (`rank_groups`) and key = its
position in the group, or color -1 (in no group) on ranks outside the
placement. A split is a collective over the whole world, so every rank must
split the same table in the same order: `flow-channel-table` (lowering/channel_table.py)
records the table of the global program before partitioning, in the module attribute
`flow.channel_table` (`[[placement, axis], ...]`); without it the table is
the program's own (placement, axis) pairs in order of first use, which is the
same on every rank of a program that runs on one placement. The channels are
public `util.global`s filled by one `util.initializer`: made once at load
time, and kept (with their splits) even where the program never uses them.

Ops: all_reduce maps one to one. IREE's all_gather, reduce_scatter and
all_to_all work on dim 0 with pieces of one size (as NCCL does), so other
dims are moved to the front with transposes (as in the CPU pass), and uneven
pieces are padded to the largest piece and cut back afterwards. A group of
one rank needs no communication. `flow.send` / `flow.recv` become
`flow.collective.send_recv` on the world channel (peer = world rank, the
other side -1). NCCL has no message tags: the sends from one rank to another
pair with the other's receives in program order, so both ranks' programs must
issue the transfers of each direction in the same order. Where the CPU pass
chains all transfers with an i32 token, this pass chains those of each (peer,
direction) with `util.optimization_barrier`: a transfer's source passes
through a barrier with the previous such transfer's result (and the values of
any `flow.fence` since the last transfer), and the function's results pass
through one with every chain's last, so that IREE keeps that order and does
not drop a send whose result nobody reads. Transfers of different chains stay
unordered, so IREE may issue a send and a receive together (as one NCCL
group): two ranks that both send before they receive do not wait on each other.

The groups of the channels this rank belongs to are recorded as the CPU pass records its
groups (`flow.comm_groups`). Afterwards no flow collective op is left and
`flow-to-iree-input` lowers the rest; `flow-partition-to-iree-input-native{rank=R}` runs
rank R's whole chain.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from flow.dialect import distributed as dd
from flow.dialect import movement as fm

from . import _iree_ops as iree
from ._collectives import CollectiveLowering
from ._support import fail, zero
from .channel_table import (
    CHANNEL_TABLE_ATTR,
    Channel,
    channel_table,
    read_channel_table,
    set_channel_table,
)

__all__ = [
    "CHANNEL_TABLE_ATTR", "SINGLE", "WORLD", "LowerCollectivesNativePass", "NativeLowering",
    "channel_symbol", "channel_table", "lower_collectives_native", "set_channel_table",
]  # fmt: skip

WORLD = 0
"""The channel id of all ranks (`flow.channel.default`)."""

SINGLE = -1
"""The channel id of a mesh axis of one rank: its collectives are the identity."""


def channel_symbol(channel: int) -> str:
    """The `util.global` holding channel `channel` (0 = world)."""
    return f"__flow_channel_{channel}"


def _element(op: Operation, ty: TensorType) -> int:
    code = iree.ELEMENT_TYPES.get(str(ty.element_type))
    if code is None:
        known = ", ".join(sorted(iree.ELEMENT_TYPES))
        raise fail(op, f"moves {ty}: IREE collectives take only {known}")
    return code


class NativeLowering(CollectiveLowering):
    """Rewrites the collectives of one module for one rank into IREE's collective ops."""

    kind = "IREE collectives"

    def __init__(self, module: ModuleOp, rank: int, table: list[Channel] | None):
        super().__init__(module, rank)
        self.fixed = table is not None
        self.table: list[Channel] = list(table or [])
        self.loads: dict[tuple[Block, int], SSAValue] = {}
        self.chains: dict[Block, dict[tuple[int, bool], SSAValue]] = {}
        """Per function body: the last transfer of each (peer, is a send)."""
        self.pending: dict[Block, list[SSAValue]] = {}
        """Per function body: values fenced since its last transfer."""

    # ---------------------------------------------------------------- channels

    def group(self, op: dd.MeshAxisOp) -> int:
        """The channel id of `op`'s placement and axis (its table index + 1)."""
        key = (op.placement, op.axis)
        if self.rank not in op.placement.rank_list:
            raise fail(op, f"runs on {op.placement}, which does not hold rank {self.rank}")
        if op.group_size == 1:
            return SINGLE
        if key not in self.table:
            if self.fixed:
                raise fail(op, f"runs on axis {op.axis} of {op.placement}, which is not in "
                               f"the program's {CHANNEL_TABLE_ATTR}")  # fmt: skip
            self.table.append(key)
        return self.table.index(key) + 1

    def channel(self, channel: int) -> SSAValue:
        """Channel `channel` loaded once at the top of the enclosing function."""
        assert self.at is not None
        f = self.at
        while not isinstance(f, func.FuncOp):
            f = f.parent_op()
            assert f is not None, "collective outside a function"
        entry = f.body.block
        if (entry, channel) not in self.loads:
            load = iree.GlobalLoadOp.make(channel_symbol(channel), iree.ChannelType())
            entry.insert_op_before(load, entry.first_op) if entry.first_op else entry.add_op(load)
            self.loads[entry, channel] = load.result
        return self.loads[entry, channel]

    def index(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, IndexType()))).results[0]

    def empty(self, ty: TensorType) -> SSAValue:
        return self.emit(tensor.EmptyOp([], ty)).results[0]

    # ---------------------------------------------------------------- collectives

    def collective(self, name: str, x: SSAValue, result: TensorType, group: int) -> SSAValue:
        """The dim-0 collective `name` on channel `group`, natively."""
        assert isinstance(x.type, TensorType)
        op, ch = self.at, group
        assert op is not None
        if ch == SINGLE:
            return x
        k = self.table[ch - 1][0].mesh_shape[self.table[ch - 1][1]]
        element = _element(op, x.type)
        kind = name.rsplit("_", 1)[1] if name.startswith(("all_reduce_", "reduce_scatter_")) else ""
        if name.startswith("all_reduce_"):
            return self.native(iree.AllReduceOp, result, x, ch, element, iree.REDUCTIONS[kind])
        n_in, n_out = x.type.get_shape()[0], result.get_shape()[0]
        if name == "all_gather":
            sizes = dd.balanced_split(n_out, k)
            if len(set(sizes)) == 1:
                return self.native(iree.AllGatherOp, result, x, ch, element)
            big = self.pad_rows(x, sizes[0])
            y = self.native(iree.AllGatherOp, self.rows(big.type, k * sizes[0]), big, ch, element)
            return self.unpad(y, sizes[0], sizes)
        if name.startswith("reduce_scatter_"):
            sizes = dd.balanced_split(n_in, k)
            reduce = iree.REDUCTIONS[kind]
            if len(set(sizes)) == 1:
                return self.native(iree.ReduceScatterOp, result, x, ch, element, reduce)
            padded = self.pad_pieces(x, sizes)
            y = self.native(iree.ReduceScatterOp, self.rows(x.type, sizes[0]), padded, ch, element,
                            reduce)  # fmt: skip
            return self.slice(y, 0, 0, n_out)
        if name == "all_to_all":
            sizes = dd.balanced_split(n_in, k)
            if len(set(sizes)) == 1:
                return self.native(iree.AllToAllOp, result, x, ch, element)
            padded = self.pad_pieces(x, sizes)
            y = self.native(iree.AllToAllOp, padded.type, padded, ch, element)
            return self.unpad(y, sizes[0], [n_out // k] * k)
        raise fail(op, f"has no native lowering ({name})")

    def native(self, cls, result, source, channel, element, reduce=None) -> SSAValue:
        op = cls.make(self.empty(result), source, self.channel(channel), element, reduce)
        return self.emit(op).results[0]

    # ---------------------------------------------------------------- uneven pieces

    @staticmethod
    def rows(ty: Attribute, n: int) -> TensorType:
        assert isinstance(ty, TensorType)
        return TensorType(ty.element_type, [n, *ty.get_shape()[1:]])

    def pad_rows(self, x: SSAValue, n: int) -> SSAValue:
        """`x` with zero rows appended up to `n` rows."""
        assert isinstance(x.type, TensorType)
        shape = x.type.get_shape()
        if shape[0] == n:
            return x
        low, high = [0] * len(shape), [n - shape[0]] + [0] * (len(shape) - 1)
        op = fm.PadOp.make(x, low=low, high=high, value=zero(x.type.element_type))
        return self.emit(op).results[0]

    def pad_pieces(self, x: SSAValue, sizes: list[int] | tuple[int, ...]) -> SSAValue:
        """`x`'s balanced pieces along dim 0, each padded to the largest, concatenated."""
        pieces, at = [], 0
        for size in sizes:
            pieces.append(self.pad_rows(self.slice(x, 0, at, size), sizes[0]))
            at += size
        return self.emit(fm.ConcatOp.make(*pieces, dim=0)).results[0]

    def unpad(self, y: SSAValue, stride: int, sizes: list[int] | tuple[int, ...]) -> SSAValue:
        """Block `j` of `y` (every `stride` rows) cut to `sizes[j]` rows, concatenated."""
        pieces = [self.slice(y, 0, j * stride, size) for j, size in enumerate(sizes)]
        return self.emit(fm.ConcatOp.make(*pieces, dim=0)).results[0]

    # ---------------------------------------------------------------- point to point

    def transfer(self, source: SSAValue, send: int, recv: int) -> SSAValue:
        """A send_recv on the world channel, after the previous transfer of its chain and the
        values fenced since the last transfer."""
        assert self.at is not None and self.at.parent is not None
        assert isinstance(source.type, TensorType)
        block = self.at.parent
        chains = self.chains.setdefault(block, {})
        chain = (send, True) if send >= 0 else (recv, False)
        after = ([chains[chain]] if chain in chains else []) + self.pending.pop(block, [])
        if after:
            source = self.emit(iree.OptimizationBarrierOp.make([source, *after])).results[0]
        op = iree.SendRecvOp.make(
            self.empty(source.type), source, self.channel(WORLD), self.index(send),
            self.index(recv), _element(self.at, source.type),
        )  # fmt: skip
        chains[chain] = self.emit(op).results[0]
        return chains[chain]

    def send(self, op: dd.SendOp) -> None:
        self.transfer(op.operand, op.peer.value.data, -1)

    def recv(self, op: dd.RecvOp) -> SSAValue:
        return self.transfer(self.empty(op.result.type), -1, op.peer.value.data)

    def fence(self, op: dd.FenceOp) -> None:
        assert op.parent is not None
        self.pending.setdefault(op.parent, []).extend(op.values)

    # ---------------------------------------------------------------- the module

    def finish(self) -> None:
        """Tie each function's results to its last transfers; declare and make the channels."""
        for block in dict.fromkeys([*self.chains, *self.pending]):
            ret = block.last_op
            after = [*self.chains.get(block, {}).values(), *self.pending.get(block, [])]
            assert ret is not None
            values = list(ret.operands)
            barrier = iree.OptimizationBarrierOp.make([*values, *after])
            block.insert_op_before(barrier, ret)
            ret.operands = list(barrier.results[: len(values)])
        if not self.table and not self.loads:
            return
        body = self.module.body.block
        ops: list[Operation] = [world := iree.ChannelDefaultOp(result_types=[iree.ChannelType()])]
        ops.append(iree.GlobalStoreOp.make(world.result, channel_symbol(WORLD)))
        globals_ = [iree.GlobalOp.make(channel_symbol(WORLD), iree.ChannelType())]
        for i, (placement, axis) in enumerate(self.table, start=1):
            groups = dd.rank_groups(placement, axis)
            mine = [g for g in groups if self.rank in g]
            color, key = (groups.index(mine[0]), mine[0].index(self.rank)) if mine else (-1, 0)
            c = arith.ConstantOp(IntegerAttr(color, IndexType()))
            kk = arith.ConstantOp(IntegerAttr(key, IndexType()))
            split = iree.ChannelSplitOp(
                operands=[world.result, c.result, kk.result], result_types=[iree.ChannelType()]
            )
            ops += [c, kk, split, iree.GlobalStoreOp.make(split.result, channel_symbol(i))]
            globals_.append(iree.GlobalOp.make(channel_symbol(i), iree.ChannelType()))
            if mine:
                self.groups.append(mine[0])
        ops.append(iree.ReturnOp())
        body.add_ops([*globals_, iree.InitializerOp.make(Region(Block(ops)))])


def lower_collectives_native(module: ModuleOp, rank: int) -> list[tuple[int, ...]]:
    """Rewrite rank `rank`'s collectives in `module` into IREE's collective ops; returns the
    groups of the channels this rank belongs to (channel table order), also recorded in the
    module attribute `flow.comm_groups` (when there are any)."""
    groups = NativeLowering.apply_to(module, rank, read_channel_table(module))
    module.attributes.pop(CHANNEL_TABLE_ATTR, None)
    return groups


@dataclass(frozen=True)
class LowerCollectivesNativePass(ModulePass):
    """Rewrite collectives into IREE's native collective ops (see the module docstring)."""

    name = "flow-lower-collectives-native"
    rank: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.rank < 0:
            if any(isinstance(o, dd.COLLECTIVE_OPS) for o in op.walk()):
                raise fail(op, "flow-lower-collectives-native needs the option rank=R")
            return
        lower_collectives_native(op, self.rank)
