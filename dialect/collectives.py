"""Collectives of the flow dialect: what `flow.boxing` lowers to, on local tensors.

Collectives within the ranks of one mesh axis of a placement (`all_reduce`,
`all_gather`, `reduce_scatter`, `all_to_all`), the communication-free local
conversions (`local_slice` for B→S, `local_partial` for B→P), point-to-point
`send` / `recv` for placement changes, and `fence`, which ties compute into the
order of the transfers. Which one a boxing needs is the boxing table's
(`flow.dialect.sbp.boxing_rule`); pieces follow the balanced split (shards.py).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I64, IntegerAttr, TensorType, i64
from xdsl.ir import Attribute
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from .attrs import PlacementAttr
from .base import verify_error
from .shards import balanced_split, expect_local, rank_groups, same_element_type
from .structured import ReduceKindAttr


class MeshAxisOp(IRDLOperation):
    """Base of the ops that act within the groups of one mesh axis of a placement.

    The group of a rank is the ranks of `placement` that share its
    coordinates on every other mesh axis (see `rank_groups`); every rank of
    the placement runs the op, each in its own group. Operands and results are
    local tensors.
    """

    placement = prop_def(PlacementAttr)
    mesh_axis = prop_def(IntegerAttr[I64])

    @property
    def axis(self) -> int:
        return self.mesh_axis.value.data

    @property
    def group_size(self) -> int:
        return self.placement.mesh_shape[self.axis]

    def groups(self) -> list[tuple[int, ...]]:
        return rank_groups(self.placement, self.axis)

    def verify_(self) -> None:
        ndim = len(self.placement.mesh_shape)
        if not 0 <= self.axis < ndim:
            raise verify_error(
                self.name, f"expected mesh axis in [0, {ndim}) of {self.placement}, got {self.axis}"
            )
        for i, o in enumerate(self.operands):
            expect_local(self.name, f"operand #{i}", o.type)
        for i, r in enumerate(self.results):
            expect_local(self.name, f"result #{i}", r.type)

    def _dim(self, value: int, ty: TensorType, what: str = "dim") -> int:
        rank = len(ty.get_shape())
        if not 0 <= value < rank:
            raise verify_error(self.name, f"expected {what} in [0, {rank}) for {ty}, got {value}")
        return value

    def _check_piece(self, full: TensorType, piece: TensorType, dim: int, what: str) -> None:
        """`piece` is `full` cut along `dim` into one of its balanced pieces for this axis."""
        same_element_type(self.name, full, piece)
        fs, ps = full.get_shape(), piece.get_shape()
        sizes = sorted(set(balanced_split(fs[dim], self.group_size)))
        expected = [
            str(TensorType(full.element_type, [s if d == dim else n for d, n in enumerate(fs)]))
            for s in sizes
        ]
        if len(fs) != len(ps) or any(a != b for d, (a, b) in enumerate(zip(fs, ps)) if d != dim):
            raise verify_error(self.name, f"expected {what} {' or '.join(expected)}, got {piece}")
        if ps[dim] not in sizes:
            raise verify_error(self.name, f"expected {what} {' or '.join(expected)}, got {piece}")


_MESH = "`on` qualified($placement) `axis` `=` $mesh_axis"


@irdl_op_definition
class AllReduceOp(MeshAxisOp):
    """Reduce (sum / max / min / prod) over the group and give every member the result.

    `flow.all_reduce sum %x on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x4xf32>`
    (boxing P→B).
    """

    name = "flow.all_reduce"
    T: ClassVar = VarConstraint("T", base(TensorType))
    operand = operand_def(T)
    result = result_def(T)
    kind = prop_def(ReduceKindAttr)
    assembly_format = f"$kind $operand {_MESH} attr-dict `:` type($result)"


@irdl_op_definition
class AllGatherOp(MeshAxisOp):
    """Concatenate the group's pieces along `dim`, in group order (boxing S(dim)→B).

        flow.all_gather %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0
            : tensor<4x4xf32> -> tensor<8x4xf32>

    Pieces may differ by one element (balanced split of the result's dim).
    """

    name = "flow.all_gather"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    assembly_format = (
        f"$operand {_MESH} `,` `dim` `=` $dim attr-dict `:` type($operand) `->` type($result)"
    )

    def verify_(self) -> None:
        super().verify_()
        res = self.result.type
        dim = self._dim(self.dim.value.data, res)
        self._check_piece(res, self.operand.type, dim, "operand")


@irdl_op_definition
class ReduceScatterOp(MeshAxisOp):
    """Reduce over the group, then keep this rank's balanced piece along `dim` (boxing P→S(dim)):

    flow.reduce_scatter sum %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0
        : tensor<8x4xf32> -> tensor<4x4xf32>
    """

    name = "flow.reduce_scatter"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(ReduceKindAttr)
    dim = prop_def(IntegerAttr[I64])
    assembly_format = (
        f"$kind $operand {_MESH} `,` `dim` `=` $dim attr-dict `:` type($operand) `->` type($result)"
    )

    def verify_(self) -> None:
        super().verify_()
        src = self.operand.type
        dim = self._dim(self.dim.value.data, src)
        self._check_piece(src, self.result.type, dim, "result")


@irdl_op_definition
class AllToAllOp(MeshAxisOp):
    """Cut along `split_dim`, send piece i to member i, concatenate what arrives along `concat_dim`.

    Boxing S(concat_dim)→S(split_dim): `flow.all_to_all %x on #flow.placement<"cpu", [0, 1]>
    axis = 0, split_dim = 1, concat_dim = 0 : tensor<4x8xf32> -> tensor<8x4xf32>`.
    """

    name = "flow.all_to_all"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    split_dim = prop_def(IntegerAttr[I64])
    concat_dim = prop_def(IntegerAttr[I64])
    assembly_format = (
        f"$operand {_MESH} `,` `split_dim` `=` $split_dim `,` `concat_dim` `=` $concat_dim "
        "attr-dict `:` type($operand) `->` type($result)"
    )

    def verify_(self) -> None:
        super().verify_()
        src, res = self.operand.type, self.result.type
        split = self._dim(self.split_dim.value.data, src, "split_dim")
        concat = self._dim(self.concat_dim.value.data, src, "concat_dim")
        if split == concat:
            raise verify_error(
                self.name, f"expected split_dim and concat_dim to differ, got {split}"
            )
        same_element_type(self.name, src, res)
        ss, rs = src.get_shape(), res.get_shape()
        k = self.group_size
        ok = len(ss) == len(rs) and all(
            a == b for d, (a, b) in enumerate(zip(ss, rs)) if d not in (split, concat)
        )
        ok = ok and rs[split] in balanced_split(ss[split], k)
        ok = ok and ss[concat] in balanced_split(rs[concat], k)
        if not ok:
            raise verify_error(
                self.name,
                f"expected the result to be the operand {src} cut into {k} along dim {split} "
                f"and gathered along dim {concat}, got {res}",
            )


@irdl_op_definition
class LocalSliceOp(MeshAxisOp):
    """This rank's balanced piece along `dim`, with no communication (boxing B→S(dim)).

        flow.local_slice %x on #flow.placement<"cpu", [0, 1]> axis = 0, dim = 0
            : tensor<8x4xf32> -> tensor<4x4xf32>

    The piece is picked by the rank's coordinate along the mesh axis.
    """

    name = "flow.local_slice"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = (
        f"$operand {_MESH} `,` `dim` `=` $dim attr-dict `:` type($operand) `->` type($result)"
    )

    def verify_(self) -> None:
        super().verify_()
        src = self.operand.type
        dim = self._dim(self.dim.value.data, src)
        self._check_piece(src, self.result.type, dim, "result")


@irdl_op_definition
class LocalPartialOp(MeshAxisOp):
    """Turn a replicated value into addends of a partial sum, with no communication (boxing B→P).

    The group's first rank (coordinate 0 along the mesh axis) keeps the value,
    every other member gets zeros, so the sum over the group is the value:
    `flow.local_partial %x on #flow.placement<"cpu", [0, 1]> axis = 0 : tensor<8x4xf32>`.
    """

    name = "flow.local_partial"
    T: ClassVar = VarConstraint("T", base(TensorType))
    operand = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = f"$operand {_MESH} attr-dict `:` type($result)"


# --------------------------------------------------------------------------- point to point


def _check_peer(op: IRDLOperation, peer: IntegerAttr) -> None:
    if peer.value.data < 0:
        raise verify_error(op.name, f"expected a non-negative peer rank, got {peer.value.data}")


@irdl_op_definition
class SendOp(IRDLOperation):
    """Send a local tensor to rank `peer`: `flow.send %x, peer = 1 : tensor<4xf32>`.

    Pairs with a `flow.recv` of the same type and `tag` (default 0) on the peer;
    messages between two ranks with one tag arrive in program order, and distinct
    tags let the ranks' programs order their transfers differently (a pipeline
    schedule). A send must not wait for its receive (the runtime buffers it),
    since a rank may send before it receives.
    """

    name = "flow.send"
    operand = operand_def(TensorType)
    peer = prop_def(IntegerAttr[I64])
    tag = opt_prop_def(IntegerAttr[I64])
    assembly_format = (
        "$operand `,` `peer` `=` $peer (`,` `tag` `=` $tag^)? attr-dict `:` type($operand)"
    )

    def verify_(self) -> None:
        expect_local(self.name, "operand", self.operand.type)
        _check_peer(self, self.peer)
        _check_tag(self, self.tag)


@irdl_op_definition
class RecvOp(IRDLOperation):
    """Receive a local tensor from rank `peer`: `%x = flow.recv peer = 0 : tensor<4xf32>`."""

    name = "flow.recv"
    result = result_def(TensorType)
    peer = prop_def(IntegerAttr[I64])
    tag = opt_prop_def(IntegerAttr[I64])
    assembly_format = "`peer` `=` $peer (`,` `tag` `=` $tag^)? attr-dict `:` type($result)"

    def verify_(self) -> None:
        expect_local(self.name, "result", self.result.type)
        _check_peer(self, self.peer)
        _check_tag(self, self.tag)


@irdl_op_definition
class FenceOp(IRDLOperation):
    """Have these local values computed here, in the order of the program's transfers:
    `flow.fence %a, %b : tensor<4xf32>, tensor<8xf32>`.

    Between sends and receives a compiler orders compute by data dependencies only, so
    it may put off work whose results are needed only at the end (a pipeline stage's
    weight gradients, and with them the activations they read). A fence ties its
    values into the chain of sends and receives: they are ready before the next
    transfer starts. flow-pipeline-schedule places one at the end of each micro-batch
    slot, which is what bounds 1F1B's activation memory at run time.
    """

    name = "flow.fence"
    values = var_operand_def(TensorType)
    assembly_format = "$values attr-dict `:` type($values)"

    def verify_(self) -> None:
        if not self.values:
            raise verify_error(self.name, "expected at least one value")
        for i, v in enumerate(self.values):
            expect_local(self.name, f"value #{i}", v.type)


MAX_TAG = 32767
"""The largest message tag every MPI implementation accepts."""


def _check_tag(op: IRDLOperation, tag: IntegerAttr | None) -> None:
    if tag is not None and not 0 <= tag.value.data <= MAX_TAG:
        raise verify_error(op.name, f"expected tag in [0, {MAX_TAG}], got {tag.value.data}")


def message_tag(op: IRDLOperation) -> int:
    """The tag of a flow.send / flow.recv (0 when absent)."""
    tag = getattr(op, "tag", None)
    return 0 if tag is None else tag.value.data


def mesh_props(placement: PlacementAttr, axis: int, **dims: int) -> dict[str, Attribute]:
    """Properties of a mesh-axis op: placement, mesh axis, and named dims (`dim=0`, ...)."""
    props: dict[str, Attribute] = {
        "placement": placement,
        "mesh_axis": IntegerAttr(axis, i64),
    }
    props.update({name: IntegerAttr(v, i64) for name, v in dims.items()})
    return props


COLLECTIVE_OPS: tuple[type[IRDLOperation], ...] = (
    AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, LocalSliceOp, LocalPartialOp,
    SendOp, RecvOp, FenceOp,
)  # fmt: skip

__all__ = [c.__name__ for c in COLLECTIVE_OPS] + [
    "MeshAxisOp", "mesh_props", "message_tag", "MAX_TAG",
]  # fmt: skip
