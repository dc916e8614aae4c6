"""Operations of the `flow` dialect.

Every primitive is one op with a custom assembly format and a verifier. Its
static semantics live here, once: `infer(operand_types, **params)` computes the
result type (raising `VerifyException` with an MLIR-style message), the verifier
checks the op against it, and the frontend's tracer and eager mode call the
same function. Ops carry no implicit broadcasting: the frontend inserts
`flow.broadcast_in_dim`, so every elementwise op sees operands of one type.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    BFloat16Type,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    TensorType,
    i1,
    i64,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
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
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from .attrs import verify_dist_fits

FLOAT_TYPES = (BFloat16Type, Float16Type, Float32Type, Float64Type)


def is_float(t: Attribute) -> bool:
    return isinstance(t, FLOAT_TYPES)


def is_bool(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data == 1


def is_int(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data > 1


def _err(op_name: str, msg: str) -> VerifyException:
    return VerifyException(f"'{op_name}' op {msg}")


def _tensor(ty: Attribute, op_name: str, what: str) -> TensorType:
    if not isinstance(ty, TensorType):
        raise _err(op_name, f"expected {what} to be a ranked tensor, got {ty}")
    verify_dist_fits(ty)
    return ty


def _dims(values: Sequence[int], rank: int, op_name: str, what: str) -> tuple[int, ...]:
    """Check a list of dims: in range, no repeats."""
    values = tuple(int(v) for v in values)
    for v in values:
        if not 0 <= v < rank:
            raise _err(op_name, f"expected {what} in [0, {rank}), got {list(values)}")
    if len(set(values)) != len(values):
        raise _err(op_name, f"expected distinct {what}, got {list(values)}")
    return values


def _i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


class FlowOp(IRDLOperation):
    """Base of all flow ops: the verifier checks the result against `infer`."""

    @classmethod
    def infer(cls, operand_types: Sequence[Attribute], **params) -> TensorType:
        raise NotImplementedError

    def params(self) -> dict:
        """This op's parameters as Python values, as `infer` and `make` take them."""
        return {}

    @classmethod
    def make(cls, *operands: SSAValue, encoding: Attribute | None = None, **params) -> FlowOp:
        """Create the op with its inferred result type (the frontend's entry point)."""
        ty = cls.infer([o.type for o in operands], **params)
        if encoding is not None and encoding != NoneAttr():
            ty = TensorType(ty.element_type, ty.get_shape(), encoding)
        return cls(operands=list(operands), result_types=[ty], properties=cls._props(**params))

    @classmethod
    def _props(cls, **params) -> dict[str, Attribute]:
        return {}

    def verify_(self) -> None:
        expected = self.infer([o.type for o in self.operands], **self.params())
        actual = self.results[0].type
        assert isinstance(actual, TensorType)
        if (expected.get_shape(), expected.element_type) != (
            actual.get_shape(),
            actual.element_type,
        ):
            raise _err(self.name, f"expected result type {expected}, got {actual}")


# --------------------------------------------------------------------------- elementwise


class ElementwiseOp(FlowOp):
    """Ops that map equal-shaped operands to a result point by point (fusable)."""


class UnaryOp(ElementwiseOp):
    T: ClassVar = VarConstraint("T", base(TensorType))
    operand = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($result)"

    FLOAT_ONLY: ClassVar[bool] = True

    @classmethod
    def infer(cls, operand_types, **params):
        (ty,) = operand_types
        ty = _tensor(ty, cls.name, "operand")
        el = ty.element_type
        if cls.FLOAT_ONLY and not is_float(el):
            raise _err(cls.name, f"expected a floating-point tensor, got {ty}")
        if not cls.FLOAT_ONLY and not (is_float(el) or is_int(el)):
            raise _err(cls.name, f"expected a floating-point or integer tensor, got {ty}")
        return ty


class BinaryOp(ElementwiseOp):
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    FLOAT_ONLY: ClassVar[bool] = False

    @classmethod
    def infer(cls, operand_types, **params):
        lhs, rhs = (_tensor(t, cls.name, "operands") for t in operand_types)
        if lhs != rhs:
            raise _err(
                cls.name, f"requires both operands to have the same type, got {lhs} and {rhs}"
            )
        el = lhs.element_type
        if cls.FLOAT_ONLY and not is_float(el):
            raise _err(cls.name, f"expected floating-point operands, got {lhs}")
        if not (is_float(el) or is_int(el)):
            raise _err(cls.name, f"expected floating-point or integer operands, got {lhs}")
        return lhs


class _NumericUnaryOp(UnaryOp):
    FLOAT_ONLY: ClassVar[bool] = False


class _FloatBinaryOp(BinaryOp):
    FLOAT_ONLY: ClassVar[bool] = True


def _unary(op_name: str, doc: str, float_only: bool = True) -> type[UnaryOp]:
    parent = UnaryOp if float_only else _NumericUnaryOp
    cls = type(
        op_name[0].upper() + op_name[1:] + "Op",
        (parent,),
        {"name": f"flow.{op_name}", "__doc__": doc},
    )
    return irdl_op_definition(cls)


def _binary(op_name: str, doc: str, float_only: bool = False) -> type[BinaryOp]:
    parent = _FloatBinaryOp if float_only else BinaryOp
    cls = type(
        op_name[0].upper() + op_name[1:] + "Op",
        (parent,),
        {"name": f"flow.{op_name}", "__doc__": doc},
    )
    return irdl_op_definition(cls)


NegOp = _unary("neg", "Elementwise negation.", float_only=False)
AbsOp = _unary("abs", "Elementwise absolute value.", float_only=False)
ExpOp = _unary("exp", "Elementwise e**x.")
LogOp = _unary("log", "Elementwise natural logarithm.")
SqrtOp = _unary("sqrt", "Elementwise square root.")
RsqrtOp = _unary("rsqrt", "Elementwise reciprocal square root.")
TanhOp = _unary("tanh", "Elementwise hyperbolic tangent.")

AddOp = _binary("add", "Elementwise addition of two tensors of one type.")
SubOp = _binary("sub", "Elementwise subtraction.")
MulOp = _binary("mul", "Elementwise multiplication.")
DivOp = _binary("div", "Elementwise division (truncating for integers).")
MaximumOp = _binary("maximum", "Elementwise maximum (NaN-propagating for floats).")
MinimumOp = _binary("minimum", "Elementwise minimum (NaN-propagating for floats).")
PowOp = _binary("pow", "Elementwise power x**y of floats.", float_only=True)
RemOp = _binary("rem", "Elementwise remainder with the sign of the dividend (C fmod).")
Atan2Op = _binary("atan2", "Elementwise atan2(y, x) of floats.", float_only=True)

SinOp = _unary("sin", "Elementwise sine.")
CosOp = _unary("cos", "Elementwise cosine.")
TanOp = _unary("tan", "Elementwise tangent.")
AsinOp = _unary("asin", "Elementwise arcsine.")
AcosOp = _unary("acos", "Elementwise arccosine.")
AtanOp = _unary("atan", "Elementwise arctangent.")
SinhOp = _unary("sinh", "Elementwise hyperbolic sine.")
CoshOp = _unary("cosh", "Elementwise hyperbolic cosine.")
FloorOp = _unary("floor", "Elementwise floor.")
CeilOp = _unary("ceil", "Elementwise ceiling.")
RoundOp = _unary("round", "Elementwise round half to even (like torch.round).")
TruncOp = _unary("trunc", "Elementwise round toward zero.")
ErfOp = _unary("erf", "Elementwise error function.")
Log1pOp = _unary("log1p", "Elementwise log(1 + x), accurate near 0.")
Expm1Op = _unary("expm1", "Elementwise exp(x) - 1, accurate near 0.")
Log2Op = _unary("log2", "Elementwise base-2 logarithm.")
Log10Op = _unary("log10", "Elementwise base-10 logarithm.")


class BitwiseOp(BinaryOp):
    """Bitwise ops on integers; on i1 they are the logical and / or / xor."""

    @classmethod
    def infer(cls, operand_types, **params):
        lhs, rhs = (_tensor(t, cls.name, "operands") for t in operand_types)
        if lhs != rhs:
            raise _err(
                cls.name, f"requires both operands to have the same type, got {lhs} and {rhs}"
            )
        if not isinstance(lhs.element_type, IntegerType):
            raise _err(cls.name, f"expected integer or i1 operands, got {lhs}")
        return lhs


def _bitwise(op_name: str, doc: str) -> type[BitwiseOp]:
    cls = type(
        op_name[0].upper() + op_name[1:] + "Op",
        (BitwiseOp,),
        {"name": f"flow.{op_name}", "__doc__": doc},
    )
    return irdl_op_definition(cls)


AndOp = _bitwise("and", "Elementwise bitwise (logical for i1) and.")
OrOp = _bitwise("or", "Elementwise bitwise (logical for i1) or.")
XorOp = _bitwise("xor", "Elementwise bitwise (logical for i1) exclusive or.")


class CompareDirection(StrEnum):
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"


@irdl_attr_definition
class CompareDirectionAttr(EnumAttribute[CompareDirection], SpacedOpaqueSyntaxAttribute):
    """The predicate of `flow.compare`."""

    name = "flow.compare_direction"


@irdl_op_definition
class CompareOp(ElementwiseOp):
    """Elementwise comparison `lhs <direction> rhs`, giving an i1 tensor of the same shape."""

    name = "flow.compare"
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorType)
    direction = prop_def(CompareDirectionAttr)
    traits = traits_def(Pure())
    assembly_format = "$direction `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    @classmethod
    def infer(cls, operand_types, *, direction: str):
        lhs, rhs = (_tensor(t, cls.name, "operands") for t in operand_types)
        if lhs != rhs:
            raise _err(
                cls.name, f"requires both operands to have the same type, got {lhs} and {rhs}"
            )
        if direction not in {d.value for d in CompareDirection}:
            raise _err(cls.name, f"expected direction in eq/ne/lt/le/gt/ge, got {direction!r}")
        return TensorType(i1, lhs.get_shape(), lhs.encoding)

    def params(self):
        return {"direction": self.direction.data.value}

    @classmethod
    def _props(cls, *, direction: str):
        return {"direction": CompareDirectionAttr(CompareDirection(direction))}


@irdl_op_definition
class SelectOp(ElementwiseOp):
    """Elementwise `pred ? on_true : on_false`."""

    name = "flow.select"
    T: ClassVar = VarConstraint("T", base(TensorType))
    pred = operand_def(TensorType)
    on_true = operand_def(T)
    on_false = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,` type($result)"

    @classmethod
    def infer(cls, operand_types, **params):
        pred, a, b = (_tensor(t, cls.name, "operands") for t in operand_types)
        if a != b:
            raise _err(cls.name, f"requires both branches to have the same type, got {a} and {b}")
        if not is_bool(pred.element_type) or pred.get_shape() != a.get_shape():
            raise _err(
                cls.name,
                f"expected predicate of type {TensorType(i1, a.get_shape(), a.encoding)}, "
                f"got {pred}",
            )
        return a


@irdl_op_definition
class CastOp(ElementwiseOp):
    """Elementwise element-type conversion (float↔int truncates toward zero; x != 0 → i1)."""

    name = "flow.cast"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    @classmethod
    def infer(cls, operand_types, *, element_type: Attribute | None = None):
        (ty,) = operand_types
        ty = _tensor(ty, cls.name, "operand")
        if element_type is None:
            raise _err(cls.name, "needs a target element type")
        if not (is_float(element_type) or isinstance(element_type, IntegerType)):
            raise _err(cls.name, f"expected a float or integer target type, got {element_type}")
        return TensorType(element_type, ty.get_shape(), ty.encoding)

    def params(self):
        return {"element_type": self.result.type.element_type}

    def verify_(self) -> None:
        src, dst = self.operand.type, self.result.type
        if src.get_shape() != dst.get_shape() or src.encoding != dst.encoding:
            raise _err(self.name, f"expected result of shape {src.get_shape()}, got {dst}")
        super().verify_()


# --------------------------------------------------------------------------- structured


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
        lhs, rhs = (_tensor(t, cls.name, "operands") for t in operand_types)
        ls, rs = lhs.get_shape(), rhs.get_shape()
        if len(ls) < 2 or len(ls) != len(rs):
            raise _err(cls.name, f"expected operands of equal rank >= 2, got {lhs} and {rhs}")
        if lhs.element_type != rhs.element_type:
            raise _err(cls.name, f"expected equal element types, got {lhs} and {rhs}")
        if not (is_float(lhs.element_type) or is_int(lhs.element_type)):
            raise _err(cls.name, f"expected float or integer operands, got {lhs}")
        if ls[:-2] != rs[:-2]:
            raise _err(
                cls.name, f"expected equal batch dims, got {list(ls[:-2])} and {list(rs[:-2])}"
            )
        if ls[-1] != rs[-2]:
            raise _err(
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
        ty = _tensor(ty, cls.name, "operand")
        shape = ty.get_shape()
        dims = _dims(dims, len(shape), cls.name, "reduction dims")
        if kind not in {k.value for k in ReduceKind}:
            raise _err(cls.name, f"expected kind in sum/max/min/prod, got {kind!r}")
        if not (is_float(ty.element_type) or is_int(ty.element_type)):
            raise _err(cls.name, f"expected a float or integer operand, got {ty}")
        return TensorType(ty.element_type, [s for i, s in enumerate(shape) if i not in dims])

    def params(self):
        return {"kind": self.kind.data.value, "dims": self.dims.get_values()}

    @classmethod
    def _props(cls, *, kind: str, dims: Sequence[int]):
        return {"kind": ReduceKindAttr(ReduceKind(kind)), "dims": _i64_array(sorted(dims))}


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
        ty = _tensor(ty, cls.name, "operand")
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape) or prod(shape) != prod(ty.get_shape()):
            raise _err(
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
        ty = _tensor(ty, cls.name, "operand")
        shape = ty.get_shape()
        perm = _dims(permutation, len(shape), cls.name, "permutation entries")
        if len(perm) != len(shape):
            raise _err(cls.name, f"expected a permutation of {len(shape)} dims, got {list(perm)}")
        return TensorType(ty.element_type, [shape[p] for p in perm])

    def params(self):
        return {"permutation": self.permutation.get_values()}

    @classmethod
    def _props(cls, *, permutation: Sequence[int]):
        return {"permutation": _i64_array(permutation)}


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
        ty = _tensor(ty, cls.name, "operand")
        src, shape = ty.get_shape(), tuple(int(s) for s in shape)
        dims = _dims(dims, len(shape), cls.name, "broadcast dims")
        if len(dims) != len(src):
            raise _err(cls.name, f"expected {len(src)} broadcast dims for {ty}, got {list(dims)}")
        if list(dims) != sorted(dims):
            raise _err(cls.name, f"expected increasing broadcast dims, got {list(dims)}")
        for i, d in enumerate(dims):
            if src[i] not in (1, shape[d]):
                raise _err(
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
        return {"broadcast_dimensions": _i64_array(dims)}


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
            raise _err(cls.name, f"expected a float or integer fill value, got {value}")
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
            raise _err(cls.name, f"expected dim in [0, {len(shape)}), got {dim}")
        if not (is_float(element_type) or is_int(element_type)):
            raise _err(cls.name, f"expected a float or integer element type, got {element_type}")
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


ELEMENTWISE_OPS: tuple[type[ElementwiseOp], ...] = (
    NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp,
    SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, FloorOp, CeilOp, RoundOp,
    TruncOp, ErfOp, Log1pOp, Expm1Op, Log2Op, Log10Op,
    AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, PowOp, RemOp, Atan2Op,
    AndOp, OrOp, XorOp,
    CompareOp, SelectOp, CastOp,
)  # fmt: skip

STRUCTURED_OPS: tuple[type[FlowOp], ...] = (
    MatmulOp, ReduceOp, ReshapeOp, TransposeOp, BroadcastInDimOp, ConstantOp, FullOp, IotaOp,
)  # fmt: skip

ALL_OPS = ELEMENTWISE_OPS + STRUCTURED_OPS

__all__ = [c.__name__ for c in ALL_OPS] + [
    "CompareDirection", "CompareDirectionAttr", "ElementwiseOp", "FlowOp", "BitwiseOp",
    "ReduceKind", "ReduceKindAttr", "ELEMENTWISE_OPS", "STRUCTURED_OPS", "ALL_OPS",
    "is_float", "is_int", "is_bool",
]  # fmt: skip
