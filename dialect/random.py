"""The flow dialect's random ops: counter-based random bits.

Random numbers in flow are a pure function of a key and an element's position
(a counter-based generator, like JAX's and Philox): no hidden state lives in
the IR, so a program draws the same numbers eagerly, compiled, or split across
devices, and the frontend decides where keys come from.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerType, Signedness, TensorType, i64
from xdsl.ir import Attribute
from xdsl.irdl import irdl_op_definition, operand_def, result_def, traits_def
from xdsl.traits import Pure

from .base import FlowOp, expect_tensor, verify_error
from .semantics import (  # noqa: F401  (the op's semantics, defined without xDSL)
    RANDOM_BITS_WIDTHS,
    SPLITMIX64_FINAL_SHIFT,
    SPLITMIX64_GAMMA,
    SPLITMIX64_ROUNDS,
    splitmix64,
)

@irdl_op_definition
class RandomBitsOp(FlowOp):
    """Random bits of a static shape, each a pure function of a key and its position.

    For the element at row-major linear index `i` of the result, with unsigned
    64-bit arithmetic modulo 2**64 and `k` the key's bits (SplitMix64 with
    state `k + (i + 1) * gamma`):

        z = k + (i + 1) * 0x9E3779B97F4A7C15
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) * 0x94D049BB133111EB
        z = z ^ (z >> 31)

    An `i64` result holds `z`; an `i32` result holds its high half `z >> 32`.
    The key is a `tensor<i64>`; the result, `tensor<...xi32>` or
    `tensor<...xi64>`: `flow.random_bits %key : tensor<i64> -> tensor<4x8xi32>`.
    """

    name = "flow.random_bits"
    key = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$key attr-dict `:` type($key) `->` type($result)"

    @classmethod
    def infer(cls, operand_types, *, shape: Sequence[int], element_type: Attribute):
        (key,) = operand_types
        key = expect_tensor(key, cls.name, "key")
        if key.get_shape() != () or key.element_type != i64:
            raise verify_error(cls.name, f"expected key of type tensor<i64>, got {key}")
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise verify_error(
                cls.name, f"expected a static shape of non-negative sizes, got {list(shape)}"
            )
        if not (
            isinstance(element_type, IntegerType)
            and element_type.width.data in RANDOM_BITS_WIDTHS
            and element_type.signedness.data == Signedness.SIGNLESS
        ):
            raise verify_error(cls.name, f"expected result elements i32 or i64, got {element_type}")
        return TensorType(element_type, shape)

    def params(self):
        ty = self.result.type
        return {"shape": ty.get_shape(), "element_type": ty.element_type}


OPS: tuple = (RandomBitsOp,)
ATTRS: tuple = ()

__all__: list[str] = ["RandomBitsOp"]
