"""Lowering rules for the movement ops: slice, pad, concat and gather.

Slices with positive strides become `tensor.extract_slice`, pads `tensor.pad`
and concats `tensor.concat`, which IREE folds into its dispatches. Reads whose
position is computed (negative strides, gathers) are a `linalg.generic` over
the result whose body builds the operand index from `linalg.index` / the index
tensor and reads it with `tensor.extract`. A negative-stride input map such as
`(d0) -> (-d0 + 3)` would be shorter, but IREE 3.13's CUDA backend fails to
compile it, while the extract form compiles for every target. Results with no
elements are a plain `tensor.empty`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    TensorType,
    i32,
    i64,
)
from xdsl.dialects.linalg.ops import IndexOp
from xdsl.ir import Block, Operation, Region, SSAValue

from flow.dialect import movement as flow

from ._linalg_builders import (
    Lowered,
    binary,
    build,
    constant,
    empty,
    filled,
    generic,
    identity_map,
    parallel,
)

INDEX = IndexType()


def _i64s(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def _segments(*sizes: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, sizes)


def _index_constant(value: int) -> arith.ConstantOp:
    return constant(IntegerAttr(int(value), INDEX))


def _loop_index(dim: int) -> Operation:
    return build(IndexOp, (), (INDEX,), {"dim": IntegerAttr(dim, i64)})


def _nothing(ty: TensorType) -> Lowered | None:
    """A result without elements needs no computation: `tensor.empty` of its type."""
    if prod(ty.get_shape()) == 0:
        e = empty(ty)
        return [e], e.tensor
    return None


# --------------------------------------------------------------------------- slice


def _lower_slice(op: flow.SliceOp) -> Lowered:
    src, ty = op.operand.type, op.result.type
    start, strides = op.start.get_values(), op.strides.get_values()
    shape, sizes = src.get_shape(), ty.get_shape()
    if all(s == 0 for s in start) and all(st == 1 for st in strides) and sizes == shape:
        return [], op.operand
    if (done := _nothing(ty)) is not None:
        return done
    if all(st > 0 for st in strides):
        props = {
            "static_offsets": _i64s(start),
            "static_sizes": _i64s(sizes),
            "static_strides": _i64s(strides),
            "operandSegmentSizes": _segments(1, 0, 0, 0),
        }
        s = build(tensor.ExtractSliceOp, (op.operand,), (ty,), props)
        return [s], s.results[0]

    def position(d: int, args) -> tuple[list[Operation], SSAValue]:
        """`start + i * stride` for loop index i of dim d."""
        i = _loop_index(d)
        ops: list[Operation] = [i]
        value = i.results[0]
        if strides[d] != 1:
            c = _index_constant(strides[d])
            m = binary(arith.MuliOp, value, c.result)
            ops += [c, m]
            value = m.results[0]
        if start[d] != 0:
            c = _index_constant(start[d])
            a = binary(arith.AddiOp, value, c.result)
            ops += [c, a]
            value = a.results[0]
        return ops, value

    return _generic_read(op.operand, ty, (), position)


def _generic_read(
    source: SSAValue,
    ty: TensorType,
    inputs: Sequence[SSAValue],
    position: Callable[[int, Sequence[SSAValue]], tuple[list[Operation], SSAValue]],
) -> Lowered:
    """An all-parallel generic over `ty` (identity-mapped `inputs`) yielding `source[position]`.

    `position(d, block_args)` builds the index into dim `d` of `source`.
    """
    rank = len(ty.get_shape())

    def body(args: Sequence[SSAValue]) -> Lowered:
        ops: list[Operation] = []
        at: list[SSAValue] = []
        for d in range(len(source.type.get_shape())):
            new, value = position(d, args)
            ops += new
            at.append(value)
        read = build(tensor.ExtractOp, (source, *at), (ty.element_type,))
        return [*ops, read], read.results[0]

    init = empty(ty)
    maps = [identity_map(rank)] * (len(inputs) + 1)
    gen = generic(inputs, init.tensor, maps, parallel(rank), body)
    return [init, gen], gen.results[0]


# --------------------------------------------------------------------------- pad


def _lower_pad(op: flow.PadOp) -> Lowered:
    src, ty = op.operand.type, op.result.type
    low, high = op.low.get_values(), op.high.get_values()
    if not any(low) and not any(high):
        return [], op.operand
    cst = constant(op.value)
    if prod(src.get_shape()) == 0:
        ops, value = filled(cst.result, ty)
        return [cst, *ops], value
    block = Block(arg_types=[INDEX] * len(low))
    block.add_op(tensor.YieldOp.create(operands=(cst.result,)))
    props = {
        "static_low": _i64s(low),
        "static_high": _i64s(high),
        "operandSegmentSizes": _segments(1, 0, 0),
    }
    pad = build(tensor.PadOp, (op.operand,), (ty,), props, (Region(block),))
    return [cst, pad], pad.results[0]


# --------------------------------------------------------------------------- concat


def _lower_concat(op: flow.ConcatOp) -> Lowered:
    ty = op.result.type
    dim = op.dimension.value.data
    if (done := _nothing(ty)) is not None:
        return done
    parts = [v for v in op.inputs if v.type.get_shape()[dim] > 0]
    if len(parts) == 1:
        return [], parts[0]
    c = build(tensor.ConcatOp, parts, (ty,), {"dim": IntegerAttr(dim, i64)})
    return [c], c.results[0]


# --------------------------------------------------------------------------- gather


def _lower_gather(op: flow.GatherOp) -> Lowered:
    """A generic over the indices reading `operand[..., clamp(index), ...]` with `tensor.extract`."""
    ty = op.result.type
    dim = op.dimension.value.data
    if (done := _nothing(ty)) is not None:
        return done
    size = op.operand.type.get_shape()[dim]

    def position(d: int, args: Sequence[SSAValue]) -> tuple[list[Operation], SSAValue]:
        if d != dim:
            i = _loop_index(d)
            return [i], i.results[0]
        cast = build(arith.IndexCastOp, (args[0],), (INDEX,))
        lo, hi = _index_constant(0), _index_constant(size - 1)
        above = binary(arith.MaxSIOp, cast.results[0], lo.result)
        inside = binary(arith.MinSIOp, above.results[0], hi.result)
        return [cast, lo, hi, above, inside], inside.results[0]

    return _generic_read(op.operand, ty, (op.indices,), position)


RULES: dict[type[Operation], Callable[[Operation], Lowered]] = {
    flow.SliceOp: _lower_slice,
    flow.PadOp: _lower_pad,
    flow.ConcatOp: _lower_concat,
    flow.GatherOp: _lower_gather,
}
