"""Elementwise ops of the flow dialect: unary, binary, bitwise, compare, select and cast.

Each maps operands of one shape to a result of that shape point by point, so
any chain of them fuses (`flow.fused`). Ops carry no implicit broadcasting: the
frontend inserts `flow.broadcast_in_dim`, so every elementwise op sees operands
of one type.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerType, TensorType, i1
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import Attribute, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
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

from .base import FlowOp, expect_tensor, is_bool, is_float, is_int, verify_error


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
        ty = expect_tensor(ty, cls.name, "operand")
        el = ty.element_type
        if cls.FLOAT_ONLY and not is_float(el):
            raise verify_error(cls.name, f"expected a floating-point tensor, got {ty}")
        if not cls.FLOAT_ONLY and not (is_float(el) or is_int(el)):
            raise verify_error(cls.name, f"expected a floating-point or integer tensor, got {ty}")
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
        lhs, rhs = (expect_tensor(t, cls.name, "operands") for t in operand_types)
        if lhs != rhs:
            raise verify_error(
                cls.name, f"requires both operands to have the same type, got {lhs} and {rhs}"
            )
        el = lhs.element_type
        if cls.FLOAT_ONLY and not is_float(el):
            raise verify_error(cls.name, f"expected floating-point operands, got {lhs}")
        if not (is_float(el) or is_int(el)):
            raise verify_error(cls.name, f"expected floating-point or integer operands, got {lhs}")
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
        {"name": f"flow.{op_name}", "__doc__": doc, "__module__": __name__},
    )
    return irdl_op_definition(cls)


def _binary(op_name: str, doc: str, float_only: bool = False) -> type[BinaryOp]:
    parent = _FloatBinaryOp if float_only else BinaryOp
    cls = type(
        op_name[0].upper() + op_name[1:] + "Op",
        (parent,),
        {"name": f"flow.{op_name}", "__doc__": doc, "__module__": __name__},
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
        lhs, rhs = (expect_tensor(t, cls.name, "operands") for t in operand_types)
        if lhs != rhs:
            raise verify_error(
                cls.name, f"requires both operands to have the same type, got {lhs} and {rhs}"
            )
        if not isinstance(lhs.element_type, IntegerType):
            raise verify_error(cls.name, f"expected integer or i1 operands, got {lhs}")
        return lhs


def _bitwise(op_name: str, doc: str) -> type[BitwiseOp]:
    cls = type(
        op_name[0].upper() + op_name[1:] + "Op",
        (BitwiseOp,),
        {"name": f"flow.{op_name}", "__doc__": doc, "__module__": __name__},
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
        lhs, rhs = (expect_tensor(t, cls.name, "operands") for t in operand_types)
        if lhs != rhs:
            raise verify_error(
                cls.name, f"requires both operands to have the same type, got {lhs} and {rhs}"
            )
        if direction not in {d.value for d in CompareDirection}:
            raise verify_error(
                cls.name, f"expected direction in eq/ne/lt/le/gt/ge, got {direction!r}"
            )
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
        pred, a, b = (expect_tensor(t, cls.name, "operands") for t in operand_types)
        if a != b:
            raise verify_error(
                cls.name, f"requires both branches to have the same type, got {a} and {b}"
            )
        if not is_bool(pred.element_type) or pred.get_shape() != a.get_shape():
            raise verify_error(
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
        ty = expect_tensor(ty, cls.name, "operand")
        if element_type is None:
            raise verify_error(cls.name, "needs a target element type")
        if not (is_float(element_type) or isinstance(element_type, IntegerType)):
            raise verify_error(
                cls.name, f"expected a float or integer target type, got {element_type}"
            )
        return TensorType(element_type, ty.get_shape(), ty.encoding)

    def params(self):
        return {"element_type": self.result.type.element_type}

    def verify_(self) -> None:
        src, dst = self.operand.type, self.result.type
        if src.get_shape() != dst.get_shape() or src.encoding != dst.encoding:
            raise verify_error(self.name, f"expected result of shape {src.get_shape()}, got {dst}")
        super().verify_()


ELEMENTWISE_OPS: tuple[type[ElementwiseOp], ...] = (
    NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp,
    SinOp, CosOp, TanOp, AsinOp, AcosOp, AtanOp, SinhOp, CoshOp, FloorOp, CeilOp, RoundOp,
    TruncOp, ErfOp, Log1pOp, Expm1Op, Log2Op, Log10Op,
    AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, PowOp, RemOp, Atan2Op,
    AndOp, OrOp, XorOp,
    CompareOp, SelectOp, CastOp,
)  # fmt: skip
OPS = ELEMENTWISE_OPS
ATTRS: tuple = (CompareDirectionAttr,)

__all__ = [c.__name__ for c in OPS] + [
    "ElementwiseOp", "UnaryOp", "BinaryOp", "BitwiseOp", "CompareDirection",
    "CompareDirectionAttr", "ELEMENTWISE_OPS",
]  # fmt: skip
