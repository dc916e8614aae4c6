"""Structured ops of the flow dialect: matmul, reductions, shape changes and constants.

Matmul and reduce are the ops with a contraction or a reduction (a
`linalg.generic` with a reduction iterator once lowered); reshape, transpose
and broadcast_in_dim change a tensor's shape without computing; constant, full
and iota make tensors from their properties alone. The grouping follows
lowering/_structured.py, which lowers the same ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    AnyAttr,
    ParamAttrConstraint,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.str_enum import StrEnum

from .base import FlowOp, check_dims, expect_tensor, i64_array, is_float, is_int, verify_error


@irdl_op_definition
class MatmulOp(FlowOp):
    """Matrix product over the last two dims, `[..., M, K] x [..., K, N] -> [..., M, N]`.

    Leading (batch) dims must be equal; the frontend broadcasts them first.
    """

    name = "flow.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    @classmethod
    def infer(cls, operand_types, **params):
        lhs, rhs = (expect_tensor(t, cls.name, "operands") for t in operand_types)
        ls, rs = lhs.get_shape(), rhs.get_shape()
        if len(ls) < 2 or len(ls) != len(rs):
            raise verify_error(
                cls.name, f"expected operands of equal rank >= 2, got {lhs} and {rhs}"
            )
        if lhs.element_type != rhs.element_type:
            raise verify_error(cls.name, f"expected equal element types, got {lhs} and {rhs}")
        if not (is_float(lhs.element_type) or is_int(lhs.element_type)):
            raise verify_error(cls.name, f"expected float or integer operands, got {lhs}")
        if ls[:-2] != rs[:-2]:
            raise verify_error(
                cls.name, f"expected equal batch dims, got {list(ls[:-2])} and {list(rs[:-2])}"
            )
        if ls[-1] != rs[-2]:
            raise verify_error(
                cls.name,
                f"expected contracting dims to match, got lhs {lhs} (K={ls[-1]}) "
                f"and rhs {rhs} (K={rs[-2]})",
            )
        return TensorType(lhs.element_type, (*ls[:-1], rs[-1]))


class ReduceKind(StrEnum):
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """The combiner of `flow.reduce`."""

    name = "flow.reduce_kind"


@irdl_op_definition
class ReduceOp(FlowOp):
    """Reduce over `dims` with sum / max / min / prod; reduced dims are dropped."""

    name = "flow.reduce"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    kind = prop_def(ReduceKindAttr)
    dims = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$kind $operand `,` `dims` `=` $dims attr-dict `:` type($operand) `->` type($result)"
    )

    @classmethod
    def infer(cls, operand_types, *, kind: str, dims: Sequence[int]):
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        shape = ty.get_shape()
        dims = check_dims(dims, len(shape), cls.name, "reduction dims")
        if kind not in {k.value for k in ReduceKind}:
            raise verify_error(cls.name, f"expected kind in sum/max/min/prod, got {kind!r}")
        if not (is_float(ty.element_type) or is_int(ty.element_type)):
            raise verify_error(cls.name, f"expected a float or integer operand, got {ty}")
        return TensorType(ty.element_type, [s for i, s in enumerate(shape) if i not in dims])

    def params(self):
        return {"kind": self.kind.data.value, "dims": self.dims.get_values()}

    @classmethod
    def _props(cls, *, kind: str, dims: Sequence[int]):
        return {"kind": ReduceKindAttr(ReduceKind(kind)), "dims": i64_array(sorted(dims))}


@irdl_op_definition
class ReshapeOp(FlowOp):
    """Row-major reshape to a static shape with the same number of elements."""

    name = "flow.reshape"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    @classmethod
    def infer(cls, operand_types, *, shape: Sequence[int]):
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape) or prod(shape) != prod(ty.get_shape()):
            raise verify_error(
                cls.name,
                f"cannot reshape {ty} ({prod(ty.get_shape())} elements) to shape {list(shape)}",
            )
        return TensorType(ty.element_type, shape)

    def params(self):
        return {"shape": self.result.type.get_shape()}


@irdl_op_definition
class TransposeOp(FlowOp):
    """Permute dims: result dim i is operand dim `permutation[i]`."""

    name = "flow.transpose"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    permutation = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `permutation` `=` $permutation attr-dict "
        "`:` type($operand) `->` type($result)"
    )

    @classmethod
    def infer(cls, operand_types, *, permutation: Sequence[int]):
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        shape = ty.get_shape()
        perm = check_dims(permutation, len(shape), cls.name, "permutation entries")
        if len(perm) != len(shape):
            raise verify_error(
                cls.name, f"expected a permutation of {len(shape)} dims, got {list(perm)}"
            )
        return TensorType(ty.element_type, [shape[p] for p in perm])

    def params(self):
        return {"permutation": self.permutation.get_values()}

    @classmethod
    def _props(cls, *, permutation: Sequence[int]):
        return {"permutation": i64_array(permutation)}


@irdl_op_definition
class BroadcastInDimOp(FlowOp):
    """Broadcast to `shape`: operand dim i becomes result dim `dims[i]` (size equal or 1)."""

    name = "flow.broadcast_in_dim"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    broadcast_dimensions = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `dims` `=` $broadcast_dimensions attr-dict "
        "`:` type($operand) `->` type($result)"
    )

    @classmethod
    def infer(cls, operand_types, *, dims: Sequence[int], shape: Sequence[int]):
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        src, shape = ty.get_shape(), tuple(int(s) for s in shape)
        dims = check_dims(dims, len(shape), cls.name, "broadcast dims")
        if len(dims) != len(src):
            raise verify_error(
                cls.name, f"expected {len(src)} broadcast dims for {ty}, got {list(dims)}"
            )
        if list(dims) != sorted(dims):
            raise verify_error(cls.name, f"expected increasing broadcast dims, got {list(dims)}")
        for i, d in enumerate(dims):
            if src[i] not in (1, shape[d]):
                raise verify_error(
                    cls.name,
                    f"cannot broadcast operand dim {i} of size {src[i]} to result dim {d} "
                    f"of size {shape[d]} ({ty} -> shape {list(shape)})",
                )
        return TensorType(ty.element_type, shape)

    def params(self):
        return {
            "dims": self.broadcast_dimensions.get_values(),
            "shape": self.result.type.get_shape(),
        }

    @classmethod
    def _props(cls, *, dims: Sequence[int], shape: Sequence[int]):
        return {"broadcast_dimensions": i64_array(dims)}


# --------------------------------------------------------------------------- constants


@irdl_op_definition
class ConstantOp(FlowOp):
    """A tensor constant given by a dense elements attribute."""

    name = "flow.constant"
    T: ClassVar = VarConstraint("T", base(TensorType))
    value = prop_def(ParamAttrConstraint(DenseIntOrFPElementsAttr, (T, AnyAttr())))
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "attr-dict $value"

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    @classmethod
    def infer(cls, operand_types, *, value: DenseIntOrFPElementsAttr):
        return value.type

    def params(self):
        return {"value": self.value}

    @classmethod
    def make(cls, *operands, encoding=None, value: DenseIntOrFPElementsAttr):
        return cls(value)


@irdl_op_definition
class FullOp(FlowOp):
    """A tensor of static shape filled with one typed scalar: `flow.full 1.0 : f32 -> tensor<4xf32>`."""

    name = "flow.full"
    value = prop_def(FloatAttr | IntegerAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$value attr-dict `->` type($result)"

    @classmethod
    def infer(cls, operand_types, *, value: Attribute, shape: Sequence[int]):
        el = value.type
        if not (is_float(el) or isinstance(el, IntegerType)):
            raise verify_error(cls.name, f"expected a float or integer fill value, got {value}")
        return TensorType(el, [int(s) for s in shape])

    def params(self):
        return {"value": self.value, "shape": self.result.type.get_shape()}

    @classmethod
    def _props(cls, *, value: Attribute, shape: Sequence[int]):
        return {"value": value}


@irdl_op_definition
class IotaOp(FlowOp):
    """Indices along `dim` of a tensor of static shape: `flow.iota dim = 1 -> tensor<2x3xi64>`."""

    name = "flow.iota"
    result = result_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "`dim` `=` $dimension attr-dict `->` type($result)"

    @classmethod
    def infer(cls, operand_types, *, dim: int, shape: Sequence[int], element_type: Attribute):
        shape = tuple(int(s) for s in shape)
        if not 0 <= dim < len(shape):
            raise verify_error(cls.name, f"expected dim in [0, {len(shape)}), got {dim}")
        if not (is_float(element_type) or is_int(element_type)):
            raise verify_error(
                cls.name, f"expected a float or integer element type, got {element_type}"
            )
        return TensorType(element_type, shape)

    def params(self):
        ty = self.result.type
        return {
            "dim": self.dimension.value.data,
            "shape": ty.get_shape(),
            "element_type": ty.element_type,
        }

    @classmethod
    def _props(cls, *, dim: int, shape, element_type):
        return {"dimension": IntegerAttr(int(dim), i64)}


@irdl_op_definition
class OptimizationBarrierOp(FlowOp):
    """`value`, unchanged, behind a wall the compiler may not look through, and not
    computed before `dep` is: `flow.optimization_barrier %x, %g : tensor<4xf32>, tensor<2xf32>`.

    Activation checkpointing recomputes a block's forward ops in the backward pass from its
    inputs passed through here (with a gradient as `dep`), so that common-subexpression
    elimination cannot merge the recomputed ops with the originals (which would keep the
    block's activations alive), nor can they move ahead of the backward pass. Lowers to
    IREE's `util.optimization_barrier` on both values.
    """

    name = "flow.optimization_barrier"
    T: ClassVar = VarConstraint("T", base(TensorType))
    value = operand_def(T)
    dep = operand_def(TensorType)
    result = result_def(T)
    assembly_format = "$value `,` $dep attr-dict `:` type($value) `,` type($dep)"

    @classmethod
    def infer(cls, operand_types):
        value, dep = operand_types
        value = expect_tensor(value, cls.name, "value")
        expect_tensor(dep, cls.name, "dep")
        return value


STRUCTURED_OPS: tuple[type[FlowOp], ...] = (
    MatmulOp, ReduceOp, ReshapeOp, TransposeOp, BroadcastInDimOp, ConstantOp, FullOp, IotaOp,
    OptimizationBarrierOp,
)  # fmt: skip
OPS = STRUCTURED_OPS
ATTRS: tuple = (ReduceKindAttr,)

__all__ = [c.__name__ for c in OPS] + ["ReduceKind", "ReduceKindAttr", "STRUCTURED_OPS"]
