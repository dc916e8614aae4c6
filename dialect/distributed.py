"""Distribution ops of the flow dialect: boxing and the global/local boundary.

A global tensor's distribution is its type's `#flow.dist` encoding. Three ops
work on global tensors: `flow.boxing` changes a value's distribution,
`flow.to_local` takes this rank's shard out and `flow.to_global` wraps a shard
back up (`flow.redistribute`, what a traced `to_global` emits, becomes a boxing
once flow-infer-sbp knows its operand's distribution). What boxing lowers to,
on local (per-rank) tensors, is in collectives.py; shard shapes (balanced
splits) in shards.py. This module also re-exports both, as `flow.dialect.distributed`
has always held them.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from . import collectives, shards
from .attrs import DistAttr, dist_of, verify_dist_fits
from .base import verify_error
from .collectives import *  # noqa: F403
from .collectives import COLLECTIVE_OPS
from .shards import *  # noqa: F403
from .shards import expect_global, expect_local, local_shapes


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
        expect_global(self.name, "operand", src)
        expect_global(self.name, "result", dst)
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        if (src.get_shape(), src.element_type) != (dst.get_shape(), dst.element_type):
            raise verify_error(
                self.name,
                f"expected operand and result to have the same shape and element type, "
                f"got {src} and {dst}",
            )
        if src.encoding == dst.encoding:
            raise verify_error(
                self.name, f"expected a change of distribution, got {src} on both sides"
            )


def _check_shard(op_name: str, global_ty: TensorType, local_ty: TensorType) -> None:
    if global_ty.element_type != local_ty.element_type:
        raise verify_error(op_name, f"expected equal element types, got {global_ty} and {local_ty}")
    shapes = local_shapes(global_ty)
    if local_ty.get_shape() not in shapes:
        expected = " or ".join(str(TensorType(local_ty.element_type, s)) for s in sorted(shapes))
        raise verify_error(op_name, f"expected a shard of {global_ty}: {expected}, got {local_ty}")


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
        expect_global(self.name, "operand", self.operand.type)
        res = expect_local(self.name, "result", self.result.type)
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
        src = expect_local(self.name, "operand", self.operand.type)
        expect_global(self.name, "result", self.result.type)
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
            raise verify_error(
                self.name, f"expected dist to be a #flow.dist attribute, got {self.dist}"
            )
        if (src.get_shape(), src.element_type) != (dst.get_shape(), dst.element_type):
            raise verify_error(
                self.name,
                f"expected operand and result to have the same shape and element type, "
                f"got {src} and {dst}",
            )
        target = TensorType(dst.element_type, dst.get_shape(), self.dist)
        try:
            verify_dist_fits(target)
        except VerifyException as err:
            raise verify_error(self.name, str(err)) from None
        if dist_of(dst) is not None and dist_of(dst) != self.dist:
            raise verify_error(
                self.name, f"expected the result to be typed with {self.dist}, got {dst}"
            )


GLOBAL_OPS: tuple[type[IRDLOperation], ...] = (BoxingOp, ToLocalOp, ToGlobalOp, RedistributeOp)
OPS: tuple[type[IRDLOperation], ...] = GLOBAL_OPS + COLLECTIVE_OPS
ATTRS: tuple = ()

__all__ = [c.__name__ for c in GLOBAL_OPS] + collectives.__all__ + shards.__all__
