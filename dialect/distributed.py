"""Distribution ops of the flow dialect: boxing, the global/local boundary, collectives.

A global tensor's distribution is its type's `#flow.dist` encoding. Three ops
work on global tensors: `flow.boxing` changes a value's distribution,
`flow.to_local` takes this rank's shard out and `flow.to_global` wraps a shard
back up (`flow.redistribute`, what a traced `to_global` emits, becomes a boxing
once flow-infer-sbp knows its operand's distribution). The others are what boxing lowers to, on local (per-rank) tensors:
collectives within the ranks of one mesh axis of a placement (`all_reduce`,
`all_gather`, `reduce_scatter`, `all_to_all`), the communication-free local
conversions (`local_slice` for B→S, `local_partial` for B→P), and point-to-point
`send` / `recv` for placement changes.

Splits are balanced like OneFlow's: `n` elements over `k` ranks give the first
`n % k` ranks one more element than the rest. A shard's shape can therefore
depend on the rank; the verifiers accept any shape some rank of the placement
has, and the per-rank program (flow-partition{rank=R}) picks its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
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
from xdsl.utils.exceptions import VerifyException

from .attrs import DistAttr, PlacementAttr, Sbp, dist_of, verify_dist_fits
from .ops import ReduceKindAttr

# --------------------------------------------------------------------------- balanced splits


def balanced_split(n: int, k: int) -> tuple[int, ...]:
    """Sizes of the `k` pieces of `n` elements: the first `n % k` get one more."""
    base_, rem = divmod(n, k)
    return tuple(base_ + (1 if i < rem else 0) for i in range(k))


def balanced_offset(n: int, k: int, i: int) -> int:
    """Where piece `i` of `balanced_split(n, k)` starts."""
    base_, rem = divmod(n, k)
    return i * base_ + min(i, rem)


def mesh_coord(placement: PlacementAttr, rank: int) -> tuple[int, ...]:
    """The mesh coordinates of `rank` in `placement` (ValueError if it is not there)."""
    ranks = placement.rank_list
    if rank not in ranks:
        raise ValueError(f"rank {rank} is not in placement {placement} (ranks {list(ranks)})")
    index, coord = ranks.index(rank), []
    for size in reversed(placement.mesh_shape):
        index, c = divmod(index, size)
        coord.append(c)
    return tuple(reversed(coord))


def rank_groups(placement: PlacementAttr, axis: int) -> list[tuple[int, ...]]:
    """The groups a collective along mesh `axis` runs in: ranks that differ only in `axis`.

    Each group lists its ranks in order of their coordinate along `axis`.
    """
    shape, ranks = placement.mesh_shape, placement.rank_list
    others = [range(s) if a != axis else range(1) for a, s in enumerate(shape)]
    groups = []
    for start in product(*others):
        group = []
        for i in range(shape[axis]):
            coord = list(start)
            coord[axis] = i
            flat = 0
            for c, s in zip(coord, shape):
                flat = flat * s + c
            group.append(ranks[flat])
        groups.append(tuple(group))
    return groups


def local_shape(
    shape: Sequence[int], mesh: Sequence[int], sbps: Sequence[Sbp], coord: Sequence[int]
) -> tuple[int, ...]:
    """The shard shape at mesh `coord`: mesh axes split their dim in order, outer axis first."""
    out = list(shape)
    for size, sbp, c in zip(mesh, sbps, coord):
        if sbp.kind == "S":
            out[sbp.dim] = balanced_split(out[sbp.dim], size)[c]
    return tuple(out)


def local_shapes(ty: TensorType) -> set[tuple[int, ...]]:
    """Every shard shape of the global tensor type `ty`, over all ranks of its placement."""
    dist = dist_of(ty)
    assert dist is not None
    mesh, sbps = dist.placement.mesh_shape, dist.sbp.sbps
    return {local_shape(ty.get_shape(), mesh, sbps, c) for c in product(*map(range, mesh))}


class UnevenSplitError(ValueError):
    """A shard shape depends on the rank, and no rank was given."""


def local_type(ty: Attribute, rank: int | None = None) -> Attribute:
    """The type of `rank`'s shard of `ty` (a local type is returned as is).

    Without a rank the shard shape must be the same on every rank of the
    placement (every split even); otherwise this raises `UnevenSplitError`.
    """
    dist = dist_of(ty)
    if dist is None:
        return ty
    assert isinstance(ty, TensorType)
    if rank is None:
        shapes = local_shapes(ty)
        if len(shapes) != 1:
            raise UnevenSplitError(
                f"the shards of {ty} have different shapes on different ranks "
                f"({', '.join(str(list(s)) for s in sorted(shapes))}): an uneven split needs "
                "a per-rank program (give the pass option rank=R)"
            )
        (shape,) = shapes
    else:
        coord = mesh_coord(dist.placement, rank)
        shape = local_shape(ty.get_shape(), dist.placement.mesh_shape, dist.sbp.sbps, coord)
    return TensorType(ty.element_type, shape)


# --------------------------------------------------------------------------- verifier helpers


def _err(op_name: str, msg: str) -> VerifyException:
    return VerifyException(f"'{op_name}' op {msg}")


def _global(op_name: str, what: str, ty: Attribute) -> DistAttr:
    dist = dist_of(ty)
    if dist is None:
        raise _err(
            op_name, f"expected {what} to be a global tensor (#flow.dist encoding), got {ty}"
        )
    assert isinstance(ty, TensorType)
    verify_dist_fits(ty)
    return dist


def _local(op_name: str, what: str, ty: Attribute) -> TensorType:
    if not isinstance(ty, TensorType) or dist_of(ty) is not None:
        raise _err(op_name, f"expected {what} to be a local tensor (no #flow.dist), got {ty}")
    return ty


def _same_element_type(op_name: str, a: TensorType, b: TensorType) -> None:
    if a.element_type != b.element_type:
        raise _err(op_name, f"expected operand and result element types to match, got {a} and {b}")


# --------------------------------------------------------------------------- global ops


@irdl_op_definition
class BoxingOp(IRDLOperation):
    """Change a global tensor's distribution (its `#flow.dist` encoding), not its value.

    Operand and result have the same global shape and element type and
    different `#flow.dist` encodings. Within one placement, boxing lowers to
    the collectives of OneFlow's table (flow-boxing-to-collectives); between
    placements, to send / recv:

        flow.boxing %x : tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[P]>>>
                      -> tensor<8xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>>
    """

    name = "flow.boxing"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.operand.type, self.result.type
        _global(self.name, "operand", src)
        _global(self.name, "result", dst)
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        if (src.get_shape(), src.element_type) != (dst.get_shape(), dst.element_type):
            raise _err(
                self.name,
                f"expected operand and result to have the same shape and element type, "
                f"got {src} and {dst}",
            )
        if src.encoding == dst.encoding:
            raise _err(self.name, f"expected a change of distribution, got {src} on both sides")


def _check_shard(op_name: str, global_ty: TensorType, local_ty: TensorType) -> None:
    if global_ty.element_type != local_ty.element_type:
        raise _err(op_name, f"expected equal element types, got {global_ty} and {local_ty}")
    shapes = local_shapes(global_ty)
    if local_ty.get_shape() not in shapes:
        expected = " or ".join(str(TensorType(local_ty.element_type, s)) for s in sorted(shapes))
        raise _err(op_name, f"expected a shard of {global_ty}: {expected}, got {local_ty}")


@irdl_op_definition
class ToLocalOp(IRDLOperation):
    """This rank's shard of a global tensor, as a plain tensor of the local shape.

        flow.to_local %x : tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>,
                                                  #flow.sbp<[S(0)]>>> -> tensor<4x4xf32>

    S(d) divides dim d by the mesh axis size (balanced: uneven splits give
    the first ranks one more element, so any rank's shard shape verifies);
    B and P keep the global shape (for P the shard is this rank's addend).
    """

    name = "flow.to_local"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def verify_(self) -> None:
        _global(self.name, "operand", self.operand.type)
        res = _local(self.name, "result", self.result.type)
        _check_shard(self.name, self.operand.type, res)


@irdl_op_definition
class ToGlobalOp(IRDLOperation):
    """View this rank's shard as its part of a global tensor (the inverse of `flow.to_local`).

    `flow.to_global %l : tensor<4x4xf32> -> tensor<8x4xf32, #flow.dist<...S(0)...>>`:
    for S the shards concatenate, for B every rank holds the same value, for P
    the global value is the sum of the shards. No data moves.
    """

    name = "flow.to_global"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def verify_(self) -> None:
        src = _local(self.name, "operand", self.operand.type)
        _global(self.name, "result", self.result.type)
        _check_shard(self.name, self.result.type, src)


@irdl_op_definition
class RedistributeOp(IRDLOperation):
    """Give a value the distribution `dist`, whatever distribution it turns out to have.

    What `Tensor.to_global(placement, sbp)` traces to inside `flow.jit` / `nn.Graph`:
    there the operand's distribution is not known yet (a traced program is typed
    without encodings until flow-infer-sbp), so the op names only the target.
    flow-infer-sbp replaces it by a `flow.boxing` from the operand's inferred
    distribution (nothing when they agree; a local value the same on every rank is
    first taken as broadcast). The result is typed with `dist` or, before
    inference, without an encoding:

        %y = flow.redistribute %x to #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[B]>>
               : tensor<8xf32> -> tensor<8xf32>
    """

    name = "flow.redistribute"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    dist = prop_def(Attribute)  # a DistAttr; untyped so that it prints with its #flow.dist prefix
    traits = traits_def(Pure())
    assembly_format = "$operand `to` $dist attr-dict `:` type($operand) `->` type($result)"

    def verify_(self) -> None:
        src, dst = self.operand.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        if not isinstance(self.dist, DistAttr):
            raise _err(self.name, f"expected dist to be a #flow.dist attribute, got {self.dist}")
        if (src.get_shape(), src.element_type) != (dst.get_shape(), dst.element_type):
            raise _err(
                self.name,
                f"expected operand and result to have the same shape and element type, "
                f"got {src} and {dst}",
            )
        target = TensorType(dst.element_type, dst.get_shape(), self.dist)
        try:
            verify_dist_fits(target)
        except VerifyException as err:
            raise _err(self.name, str(err)) from None
        if dist_of(dst) is not None and dist_of(dst) != self.dist:
            raise _err(self.name, f"expected the result to be typed with {self.dist}, got {dst}")


# --------------------------------------------------------------------------- collectives


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
            raise _err(
                self.name, f"expected mesh axis in [0, {ndim}) of {self.placement}, got {self.axis}"
            )
        for i, o in enumerate(self.operands):
            _local(self.name, f"operand #{i}", o.type)
        for i, r in enumerate(self.results):
            _local(self.name, f"result #{i}", r.type)

    def _dim(self, value: int, ty: TensorType, what: str = "dim") -> int:
        rank = len(ty.get_shape())
        if not 0 <= value < rank:
            raise _err(self.name, f"expected {what} in [0, {rank}) for {ty}, got {value}")
        return value

    def _check_piece(self, full: TensorType, piece: TensorType, dim: int, what: str) -> None:
        """`piece` is `full` cut along `dim` into one of its balanced pieces for this axis."""
        _same_element_type(self.name, full, piece)
        fs, ps = full.get_shape(), piece.get_shape()
        sizes = sorted(set(balanced_split(fs[dim], self.group_size)))
        expected = [
            str(TensorType(full.element_type, [s if d == dim else n for d, n in enumerate(fs)]))
            for s in sizes
        ]
        if len(fs) != len(ps) or any(a != b for d, (a, b) in enumerate(zip(fs, ps)) if d != dim):
            raise _err(self.name, f"expected {what} {' or '.join(expected)}, got {piece}")
        if ps[dim] not in sizes:
            raise _err(self.name, f"expected {what} {' or '.join(expected)}, got {piece}")


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
            raise _err(self.name, f"expected split_dim and concat_dim to differ, got {split}")
        _same_element_type(self.name, src, res)
        ss, rs = src.get_shape(), res.get_shape()
        k = self.group_size
        ok = len(ss) == len(rs) and all(
            a == b for d, (a, b) in enumerate(zip(ss, rs)) if d not in (split, concat)
        )
        ok = ok and rs[split] in balanced_split(ss[split], k)
        ok = ok and ss[concat] in balanced_split(rs[concat], k)
        if not ok:
            raise _err(
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
        raise _err(op.name, f"expected a non-negative peer rank, got {peer.value.data}")


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
        _local(self.name, "operand", self.operand.type)
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
        _local(self.name, "result", self.result.type)
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
            raise _err(self.name, "expected at least one value")
        for i, v in enumerate(self.values):
            _local(self.name, f"value #{i}", v.type)


MAX_TAG = 32767
"""The largest message tag every MPI implementation accepts."""


def _check_tag(op: IRDLOperation, tag: IntegerAttr | None) -> None:
    if tag is not None and not 0 <= tag.value.data <= MAX_TAG:
        raise _err(op.name, f"expected tag in [0, {MAX_TAG}], got {tag.value.data}")


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


GLOBAL_OPS: tuple[type[IRDLOperation], ...] = (BoxingOp, ToLocalOp, ToGlobalOp, RedistributeOp)
COLLECTIVE_OPS: tuple[type[IRDLOperation], ...] = (
    AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, LocalSliceOp, LocalPartialOp,
    SendOp, RecvOp, FenceOp,
)  # fmt: skip
OPS: tuple[type[IRDLOperation], ...] = GLOBAL_OPS + COLLECTIVE_OPS
ATTRS: tuple = ()

__all__ = [c.__name__ for c in OPS] + [
    "MeshAxisOp", "UnevenSplitError", "balanced_split", "balanced_offset", "mesh_coord",
    "rank_groups", "local_shape", "local_shapes", "local_type", "mesh_props", "message_tag",
    "MAX_TAG",
]  # fmt: skip
