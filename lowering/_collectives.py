"""What the two collective lowerings share: the rewrite of a rank's collective ops to dim-0 calls.

`flow-lower-collectives` (calls of the `comm` runtime module) and
`flow-lower-collectives-native` (IREE's own collective ops) lower the same ops the same way
up to how one collective is issued: the ABI works on dim 0, so other dims are moved there and
back with `flow.transpose`; `flow.all_to_all` with an uneven concat dim becomes an all_gather
and a local slice; `flow.local_slice` and `flow.local_partial` need no communication. A
subclass of `CollectiveLowering` says how a group is named, how a dim-0 collective and a
point-to-point transfer are issued, and what the module needs afterwards.

The groups a lowering uses are recorded on the module (`flow.comm_groups`, read back by
`recorded_groups`) for the runtime that makes their communicators.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, TensorType, i32, i64
from xdsl.ir import Operation, SSAValue

from flow.dialect import distributed as dd
from flow.dialect import movement as fm
from flow.dialect import ops as fo
from flow.dialect.attr_names import GROUPS_ATTR

from ._support import atomically, fail, inverse_permutation, to_front, zero

__all__ = ["CollectiveLowering", "record_groups", "recorded_groups"]

Group = tuple[int, ...]


class CollectiveLowering:
    """Rewrites the collectives of one module for one rank (see the module docstring)."""

    kind = "collective calls"
    """What this lowering makes of collectives, for errors."""

    def __init__(self, module: ModuleOp, rank: int):
        self.module = module
        self.rank = rank
        self.groups: list[Group] = []
        """The groups this lowering uses, in the order their ids were given."""
        self.at: Operation | None = None
        """The op being lowered: new ops go before it and take its location."""

    # ---------------------------------------------------------------- to define

    def group(self, op: dd.MeshAxisOp) -> int:
        """The id the calls of `op`'s placement and axis name their group by."""
        raise NotImplementedError

    def collective(self, name: str, x: SSAValue, result: TensorType, group: int) -> SSAValue:
        """The dim-0 collective `name` (an import name of `flow.targets.comm_abi`, e.g.
        `all_reduce_sum`, `all_gather`) of `x` on `group`, of type `result`."""
        raise NotImplementedError

    def send(self, op: dd.SendOp) -> None:
        raise NotImplementedError

    def recv(self, op: dd.RecvOp) -> SSAValue:
        raise NotImplementedError

    def fence(self, op: dd.FenceOp) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Add what the rewritten module needs (declarations, channels)."""

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
        op = fo.FullOp.make(value=zero(ty.element_type), shape=ty.get_shape())
        return self.emit(op).results[0]

    def constant(self, value: int) -> SSAValue:
        return self.emit(arith.ConstantOp(IntegerAttr(value, i32))).results[0]

    def coord(self, op: dd.MeshAxisOp) -> int:
        """This rank's position in its group of `op`."""
        return dd.mesh_coord(op.placement, self.rank)[op.axis]

    def along(self, name: str, x: SSAValue, dim: int, result: TensorType, group: int) -> SSAValue:
        """A dim-0 collective applied along `dim` (transposes around the call)."""
        assert isinstance(x.type, TensorType)
        perm = to_front(dim, len(x.type.get_shape()))
        rshape = result.get_shape()
        front = TensorType(result.element_type, [rshape[p] for p in perm])
        y = self.collective(name, self.transpose(x, perm), front, group)
        return self.transpose(y, inverse_permutation(perm))

    # ---------------------------------------------------------------- the ops

    def lower(self, op: Operation) -> SSAValue | None:
        if isinstance(op, dd.AllReduceOp):
            kind = op.kind.data.value
            return self.collective(f"all_reduce_{kind}", op.operand, op.result.type, self.group(op))
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
            self.send(op)
            return None
        if isinstance(op, dd.FenceOp):
            self.fence(op)
            return None
        if isinstance(op, dd.RecvOp):
            return self.recv(op)
        raise fail(op, f"has no lowering to {self.kind}")

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
        y = self.collective("all_to_all", xt, stacked, g)
        y = self.reshape(y, [k, mine, nc, *rest])
        y = self.transpose(y, [1, 0, *range(2, len(shape) + 1)])
        y = self.reshape(y, [mine, k * nc, *rest])
        return self.transpose(y, inverse_permutation(perm))

    # ---------------------------------------------------------------- the module

    def run(self) -> None:
        """Rewrite every collective of the module, then `finish` it."""
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
        self.finish()

    @classmethod
    def apply_to(cls, module: ModuleOp, rank: int, *args: object) -> list[Group]:
        """Lower `module`'s collectives for `rank` all or nothing (a failure leaves it intact);
        record and return the groups used."""
        groups: list[Group] = []

        def rewrite(work: ModuleOp) -> None:
            lowering = cls(work, rank, *args)
            lowering.run()
            groups.extend(lowering.groups)

        atomically(module, rewrite)  # keeps the module's attributes, replaces its body
        record_groups(module, groups)
        return groups


def record_groups(module: ModuleOp, groups: list[Group]) -> None:
    """Record `groups` on the module (`GROUPS_ATTR`), when there are any."""
    if groups:
        module.attributes[GROUPS_ATTR] = ArrayAttr(
            [ArrayAttr([IntegerAttr(r, i64) for r in g]) for g in groups]
        )


def recorded_groups(module: ModuleOp) -> list[Group]:
    """The groups a collective lowering recorded on the module, in registration order."""
    attr = module.attributes.get(GROUPS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return []
    return [tuple(r.value.data for r in g.data) for g in attr.data]  # type: ignore[attr-defined]
