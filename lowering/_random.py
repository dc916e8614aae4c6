"""Lowering rules for the flow dialect's random ops.

`flow.random_bits` becomes one all-parallel `linalg.generic` whose only input
is the rank-0 key: the body turns the loop indices (`linalg.index`) into the
row-major linear index and hashes it with the key in `i64` arithmetic, exactly
as the op's docstring specifies (arith's `addi`/`muli` wrap modulo 2**64 and
`shrui` is the unsigned shift), so compiled code and the eager kernel agree
bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, TensorType, i64
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Operation, SSAValue

from flow.dialect.random import (
    SPLITMIX64_FINAL_SHIFT,
    SPLITMIX64_GAMMA,
    SPLITMIX64_ROUNDS,
    RandomBitsOp,
)

from ._linalg_builders import (
    Lowered,
    affine_map,
    binary,
    build,
    empty,
    generic,
    identity_map,
    parallel,
    scalar_constant,
    unary,
)


class _Body:
    """Collects the scalar ops of a generic body: `b.op(arith.AddiOp, x, 3)` appends one."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def const(self, value: int) -> SSAValue:
        # i64 constants are printed signed; fold the unsigned spec constants into range.
        value &= (1 << 64) - 1
        c = scalar_constant(value - (1 << 64) if value >= 1 << 63 else value, i64)
        self.ops.append(c)
        return c.result

    def op(self, cls: type[Operation], x: SSAValue, y: SSAValue | int) -> SSAValue:
        rhs = self.const(y) if isinstance(y, int) else y
        new = binary(cls, x, rhs)
        self.ops.append(new)
        return new.results[0]

    def linear_index(self, shape: Sequence[int]) -> SSAValue:
        """The row-major linear index of the current element, as i64."""
        linear: SSAValue | None = None
        for d, size in enumerate(shape):
            idx = build(IndexOp, (), (IndexType(),), {"dim": IntegerAttr(d, i64)})
            as_int = unary(arith.IndexCastOp, idx.results[0], i64)
            self.ops += [idx, as_int]
            i = as_int.results[0]
            if linear is not None:
                i = self.op(arith.AddiOp, self.op(arith.MuliOp, linear, size), i)
            linear = i
        return self.const(0) if linear is None else linear


def _lower_random_bits(op: RandomBitsOp) -> Lowered:
    ty = op.result.type
    assert isinstance(ty, TensorType)
    shape = ty.get_shape()
    rank = len(shape)
    width = ty.element_type.width.data

    def body(args: Sequence[SSAValue]) -> Lowered:
        b = _Body()
        counter = b.op(arith.AddiOp, b.linear_index(shape), 1)
        z = b.op(arith.AddiOp, args[0], b.op(arith.MuliOp, counter, SPLITMIX64_GAMMA))
        for shift, mul in SPLITMIX64_ROUNDS:
            z = b.op(arith.MuliOp, b.op(arith.XOrIOp, z, b.op(arith.ShRUIOp, z, shift)), mul)
        z = b.op(arith.XOrIOp, z, b.op(arith.ShRUIOp, z, SPLITMIX64_FINAL_SHIFT))
        if width == 32:
            high = unary(arith.TruncIOp, b.op(arith.ShRUIOp, z, 32), ty.element_type)
            b.ops.append(high)
            z = high.results[0]
        return b.ops, z

    init = empty(ty)
    maps = [affine_map(rank, ()), identity_map(rank)]
    gen = generic(op.operands, init.tensor, maps, parallel(rank), body)
    return [init, gen], gen.results[0]


RULES: dict[type[Operation], Callable[[Operation], Lowered]] = {
    RandomBitsOp: _lower_random_bits,
}
