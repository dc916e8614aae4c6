"""`flow-lower-collectives{rank=R}`: rank R's collectives become calls of the `comm` runtime module.

The input is a per-rank local program (the output of `flow-partition{rank=R}`).
Each collective op becomes a `func.call` of an import of the `comm` module
(the Python runtime module that runs the MPI collective; its ABI is
documented in `flow.targets.collectives`), declared once per name at module
level as `func.func private @comm.<collective>.<types>`:

    %g = arith.constant 1 : i32
    %y = func.call @comm.all_reduce_sum.8x6xf32(%x, %g) : (tensor<8x6xf32>, i32) -> tensor<8x6xf32>

The ABI works on dim 0; other dims are moved there and back with
`flow.transpose` (which `flow-fold-transposes` cancels where it can).
`flow.all_to_all` with a concat dim that is split unevenly (rows of different
sizes per source, which the ABI cannot take) is done as an all_gather along
the concat dim followed by a local slice along the split dim.

`flow.local_slice` and `flow.local_partial` need no communication: they
become a `flow.slice` of rank R's balanced piece, and the value itself on the
first rank of the group or `flow.full 0` elsewhere. `flow.send` / `flow.recv`
address world ranks: they use group 0 (all ranks) and their tag (default 0;
messages between two ranks with one tag arrive in program order), and pass an
i32 token from each to the next, which keeps them in program order in IREE.

Groups: each (placement, mesh axis) pair the program uses names the group of
ranks that contains R (`rank_groups`); the groups are numbered 1, 2, ... in
order of first use and listed in the module attribute

    flow.comm_groups = [[0, 1], [0, 2]]

as the program's group table: id `i + 1` is entry `i`. The ids are the
program's own; at load time the runtime maps them to communicators
(`flow.targets.collectives.program_groups`), so ranks of different placements
may run programs with different tables.

Afterwards no flow collective op is left and `flow-to-iree-input` lowers the
rest. Chain it after partitioning, or use the `flow-partition-to-iree-input`
pass, which runs the three in order:

    flow-partition{rank=R},flow-lower-collectives{rank=R},flow-to-iree-input
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import (
    ArrayAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.passes import ModulePass

from flow.dialect import distributed as dd
from flow.dialect import movement as fm
from flow.dialect import ops as fo
from flow.dialect.attrs import PlacementAttr
from flow.dialect.ops import is_float

from .infer_sbp import atomically, fail

MODULE_NAME = "comm"
"""The name of the runtime module the calls import from."""

GROUPS_ATTR = "flow.comm_groups"
"""The module attribute listing the groups to register, in order (id = index + 1)."""

WORLD = 0
"""The group id of all ranks."""

_NO_RESULT = {"send", "barrier"}


def _mangle(ty: Attribute) -> str:
    """`tensor<2x?xf32>` -> `2xDxf32`: a type as symbol characters."""
    text = str(ty).strip()
    if text.startswith("tensor<") and text.endswith(">"):
        text = text[len("tensor<") : -1]
    return re.sub(r"[^A-Za-z0-9_]", "_", text.replace("?", "D"))


def comm_symbol(
    name: str, operand: Attribute | None = None, result: Attribute | None = None
) -> str:
    """The import symbol of collective `name` on these types, e.g. `comm.all_gather.2x3xf32.4x3xf32`.

    The operand type is appended, then the result type when it differs (the
    runtime ignores the suffix; an MLIR module declares each symbol once).
    Agrees with `flow.targets.collectives.import_name` (a test checks it).
    """
    parts = [MODULE_NAME, name]
    if operand is not None:
        parts.append(_mangle(operand))
        if result is not None and result != operand:
            parts.append(_mangle(result))
    return ".".join(parts)


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _to_front(dim: int, ndim: int) -> list[int]:
    return [dim] + [d for d in range(ndim) if d != dim]


class _Lowering:
    """Rewrites the collectives of one module for one rank, collecting declarations and groups."""

    def __init__(self, module: ModuleOp, rank: int):
        self.module = module
        self.rank = rank
        self.groups: list[tuple[int, ...]] = []
        self.group_ids: dict[tuple[PlacementAttr, int], int] = {}
        self.declared: dict[str, func.FuncOp] = {}
        self.ops: list[Operation] = []
        self.at: Operation | None = None
        self.tokens: dict[Block, SSAValue] = {}
        """Per function body: the token of its last send / recv (see `p2p`)."""

    # ---------------------------------------------------------------- building blocks

    def emit(self, op: Operation) -> Operation:
        assert self.at is not None and self.at.parent is not None
        op.location = self.at.location
        self.at.parent.insert_op_before(op, self.at)
        return op

    def transpose(self, x: SSAValue, perm: list[int]) -> SSAValue:
        if perm == sorted(perm):
            return x
        return self.emit(fo.TransposeOp.make(x, permutation=perm)).results[0]

    def reshape(self, x: SSAValue, shape: list[int]) -> SSAValue:
        return self.emit(fo.ReshapeOp.make(x, shape=shape)).results[0]

    def slice(self, x: SSAValue, dim: int, start: int, size: int) -> SSAValue:
        assert isinstance(x.type, TensorType)
        shape = list(x.type.get_shape())
        if start == 0 and size == shape[dim]:
            return x
        starts = [start if d == dim else 0 for d in range(len(shape))]
        sizes = [size if d == dim else n for d, n in enumerate(shape)]
        op = fm.SliceOp.make(x, start=starts, strides=[1] * len(shape), sizes=sizes)
        return self.emit(op).results[0]

    def zeros(self, ty: TensorType) -> SSAValue:
        el = ty.element_type
        value = FloatAttr(0.0, el) if is_float(el) else IntegerAttr(0, el)
        return self.emit(fo.FullOp.make(value=value, shape=ty.get_shape())).results[0]

    def constant(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, i32))).results[0]

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

    def coord(self, op: dd.MeshAxisOp) -> int:
        """This rank's position in its group of `op`."""
        return dd.mesh_coord(op.placement, self.rank)[op.axis]

    def call(
        self, name: str, x: SSAValue | None, result: TensorType | None, ints: list[int]
    ) -> SSAValue | None:
        """Call import `name` on `x` and the i32 arguments `ints` (the group id last)."""
        operand = x.type if x is not None else None
        symbol = comm_symbol(name, operand, result if name not in _NO_RESULT else None)
        results = [] if result is None else [result]
        if symbol not in self.declared:
            inputs = ([operand] if operand is not None else []) + [i32] * len(ints)
            self.declared[symbol] = func.FuncOp.external(symbol, inputs, results)
        args = ([x] if x is not None else []) + [self.constant(v) for v in ints]
        call = self.emit(func.CallOp(symbol, args, results))
        return call.results[0] if results else None

    def p2p(self, name: str, x: SSAValue, result: TensorType | None, peer: int, tag: int):
        """A send (`result` None) or receive (`x` gives its type), chained to the previous
        one by an i32 token so that the compiler keeps them in program order."""
        operand = x.type
        symbol = comm_symbol(name, operand, result)
        results = ([result] if result is not None else []) + [i32]
        if symbol not in self.declared:
            self.declared[symbol] = func.FuncOp.external(symbol, [operand] + [i32] * 4, results)
        assert self.at is not None and self.at.parent is not None
        block = self.at.parent
        after = self.tokens.get(block)
        if after is None:
            after = self.constant(0)
        args = [x, self.constant(peer), self.constant(tag), after, self.constant(WORLD)]
        call = self.emit(func.CallOp(symbol, args, results))
        self.tokens[block] = call.results[-1]
        return call.results[0] if result is not None else None

    def fence(self, x: SSAValue) -> None:
        """A comm.fence call: `x` computed before the next send / receive / fence."""
        symbol = comm_symbol("fence", x.type)
        if symbol not in self.declared:
            self.declared[symbol] = func.FuncOp.external(symbol, [x.type, i32], [i32])
        assert self.at is not None and self.at.parent is not None
        block = self.at.parent
        after = self.tokens.get(block)
        if after is None:
            after = self.constant(0)
        self.tokens[block] = self.emit(func.CallOp(symbol, [x, after], [i32])).results[0]

    def along(self, name: str, x: SSAValue, dim: int, result: TensorType, group: int) -> SSAValue:
        """A dim-0 collective applied along `dim` (transposes around the call)."""
        assert isinstance(x.type, TensorType)
        perm = _to_front(dim, len(x.type.get_shape()))
        rshape = result.get_shape()
        front = TensorType(result.element_type, [rshape[p] for p in perm])
        y = self.call(name, self.transpose(x, perm), front, [group])
        assert y is not None
        return self.transpose(y, _inverse(perm))

    # ---------------------------------------------------------------- the ops

    def lower(self, op: Operation) -> SSAValue | None:
        if isinstance(op, dd.AllReduceOp):
            kind = op.kind.data.value
            return self.call(f"all_reduce_{kind}", op.operand, op.result.type, [self.group(op)])
        if isinstance(op, dd.AllGatherOp):
            dim = op.dim.value.data
            return self.along("all_gather", op.operand, dim, op.result.type, self.group(op))
        if isinstance(op, dd.ReduceScatterOp):
            name = f"reduce_scatter_{op.kind.data.value}"
            return self.along(name, op.operand, op.dim.value.data, op.result.type, self.group(op))
        if isinstance(op, dd.AllToAllOp):
            return self.all_to_all(op)
        if isinstance(op, dd.LocalSliceOp):
            dim, size = op.dim.value.data, op.group_size
            n = op.operand.type.get_shape()[dim]
            c = self.coord(op)
            start = dd.balanced_offset(n, size, c)
            return self.slice(op.operand, dim, start, dd.balanced_split(n, size)[c])
        if isinstance(op, dd.LocalPartialOp):
            return op.operand if self.coord(op) == 0 else self.zeros(op.result.type)
        if isinstance(op, dd.SendOp):
            self.p2p("send", op.operand, None, op.peer.value.data, dd.message_tag(op))
            return None
        if isinstance(op, dd.FenceOp):
            for v in op.values:
                self.fence(v)
            return None
        if isinstance(op, dd.RecvOp):
            like = self.zeros(op.result.type)
            return self.p2p("recv", like, op.result.type, op.peer.value.data, dd.message_tag(op))
        raise fail(op, "has no lowering to comm calls")

    def all_to_all(self, op: dd.AllToAllOp) -> SSAValue:
        """Split along `split_dim`, exchange, concatenate along `concat_dim`.

        With the split dim moved to the front and the concat dim second, the
        ABI's all_to_all returns the received blocks stacked along dim 0 (source
        order); a reshape and transpose move the source index next to the concat
        dim. The ABI needs equal row sizes from every source, so an uneven
        concat dim goes through all_gather and a local slice instead.
        """
        x, res = op.operand, op.result.type
        assert isinstance(x.type, TensorType)
        s, c = op.split_dim.value.data, op.concat_dim.value.data
        g, k = self.group(op), op.group_size
        shape, rshape = list(x.type.get_shape()), list(res.get_shape())
        if rshape[c] % k:
            full = TensorType(
                res.element_type, [rshape[c] if d == c else n for d, n in enumerate(shape)]
            )
            whole = self.along("all_gather", x, c, full, g)
            return self.slice(whole, s, dd.balanced_offset(shape[s], k, self.coord(op)), rshape[s])
        perm = [s, c] + [d for d in range(len(shape)) if d not in (s, c)]
        xt = self.transpose(x, perm)
        rest = [shape[d] for d in perm[2:]]
        mine, nc = rshape[s], shape[c]
        stacked = TensorType(res.element_type, [k * mine, nc, *rest])
        y = self.call("all_to_all", xt, stacked, [g])
        assert y is not None
        y = self.reshape(y, [k, mine, nc, *rest])
        y = self.transpose(y, [1, 0, *range(2, len(shape) + 1)])
        y = self.reshape(y, [mine, k * nc, *rest])
        return self.transpose(y, _inverse(perm))

    # ---------------------------------------------------------------- the module

    def run(self) -> None:
        todo = [op for op in self.module.walk() if isinstance(op, dd.COLLECTIVE_OPS)]
        for op in todo:
            self.at = op
            value = self.lower(op)
            if op.results:
                assert value is not None
                if value.type != op.results[0].type:
                    raise fail(op, f"lowered to {value.type}, expected {op.results[0].type}")
                op.results[0].replace_all_uses_with(value)
            assert op.parent is not None
            op.parent.erase_op(op)
        body = self.module.body.block
        existing = {o.sym_name.data for o in body.ops if isinstance(o, func.FuncOp)}
        for symbol, decl in self.declared.items():
            if symbol not in existing:
                body.add_op(decl)


def lower_collectives(module: ModuleOp, rank: int) -> list[tuple[int, ...]]:
    """Rewrite rank `rank`'s collectives in `module` into `comm` calls; returns the groups
    and records them in the module attribute `flow.comm_groups` (when there are any)."""
    groups: list[tuple[int, ...]] = []

    def rewrite(work: ModuleOp) -> None:
        lowering = _Lowering(work, rank)
        lowering.run()
        groups.extend(lowering.groups)

    atomically(module, rewrite)  # keeps the module's attributes, replaces its body
    if groups:
        module.attributes[GROUPS_ATTR] = ArrayAttr(
            [ArrayAttr([IntegerAttr(r, i64) for r in g]) for g in groups]
        )
    return groups


def comm_groups(module: ModuleOp) -> list[tuple[int, ...]]:
    """The groups recorded by this pass (`flow.comm_groups`), in registration order."""
    attr = module.attributes.get(GROUPS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return []
    return [tuple(r.value.data for r in g.data) for g in attr.data]  # type: ignore[attr-defined]


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


@dataclass(frozen=True)
class PartitionToIreeInputPass(ModulePass):
    """`flow-partition{rank=R},flow-lower-collectives{rank=R},flow-to-iree-input` as one pass.

    Named pipelines take no options, so this chain is a pass of its own.
    """

    name = "flow-partition-to-iree-input"
    rank: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from ._registry import expand_pipeline, get_all_passes

        passes = get_all_passes()
        spec = (
            f"flow-partition{{rank={self.rank}}},flow-lower-collectives{{rank={self.rank}}},"
            "flow-to-iree-input"
        )
        for step in expand_pipeline(spec):
            passes[step.name]().from_spec(step).apply(ctx, op)
