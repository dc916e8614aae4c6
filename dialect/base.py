"""The base class of the flow compute ops and the helpers their verifiers share.

Every primitive's static semantics live on its op, once: `infer(operand_types,
**params)` computes the result type (raising `VerifyException` with an
MLIR-style message), the verifier checks the op against it, and the frontend's
tracer and eager mode call the same function. The op families (elementwise,
structured, movement, window, random) build on `FlowOp` and the helpers here.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    NoneAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from .attrs import verify_dist_fits

FLOAT_TYPES = (BFloat16Type, Float16Type, Float32Type, Float64Type)


def is_float(t: Attribute) -> bool:
    return isinstance(t, FLOAT_TYPES)


def is_bool(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data == 1


def is_int(t: Attribute) -> bool:
    return isinstance(t, IntegerType) and t.width.data > 1


def verify_error(op_name: str, msg: str) -> VerifyException:
    """A verifier error in MLIR's wording: `'flow.x' op <msg>`."""
    return VerifyException(f"'{op_name}' op {msg}")


def expect_tensor(ty: Attribute, op_name: str, what: str) -> TensorType:
    """`ty` as a ranked tensor type whose distribution (if any) fits its rank."""
    if not isinstance(ty, TensorType):
        raise verify_error(op_name, f"expected {what} to be a ranked tensor, got {ty}")
    verify_dist_fits(ty)
    return ty


def check_dims(values: Sequence[int], rank: int, op_name: str, what: str) -> tuple[int, ...]:
    """Check a list of dims: in range, no repeats."""
    values = tuple(int(v) for v in values)
    for v in values:
        if not 0 <= v < rank:
            raise verify_error(op_name, f"expected {what} in [0, {rank}), got {list(values)}")
    if len(set(values)) != len(values):
        raise verify_error(op_name, f"expected distinct {what}, got {list(values)}")
    return values


def i64_array(values: Sequence[int]) -> DenseArrayBase:
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
            raise verify_error(self.name, f"expected result type {expected}, got {actual}")


__all__ = [
    "FlowOp", "FLOAT_TYPES", "is_float", "is_int", "is_bool", "verify_error", "expect_tensor",
    "check_dims", "i64_array",
]  # fmt: skip
