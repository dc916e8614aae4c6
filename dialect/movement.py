"""Data-movement ops of the flow dialect: strided slice, constant pad, concat and gather.

Together with reshape / transpose / broadcast_in_dim (structured.py) these are
all the frontend needs for indexing, `cat`/`stack`/`split`, `flip`/`roll`,
`pad` and embedding lookups. Every parameter is static: shapes never depend on
data, so each op's result type follows from its operands and properties alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from .base import FlowOp, expect_tensor, i64_array, verify_error


def _per_dim(values: Sequence[int], rank: int, op_name: str, what: str, ty) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if len(values) != rank:
        raise verify_error(op_name, f"expected {rank} {what} entries for {ty}, got {list(values)}")
    return values


def _check_dim(dim: int, rank: int, op_name: str) -> int:
    if not 0 <= int(dim) < rank:
        raise verify_error(op_name, f"expected dim in [0, {rank}), got {dim}")
    return int(dim)


@irdl_op_definition
class SliceOp(FlowOp):
    """Strided slice: `result[i0, i1, ...] = operand[start0 + i0*stride0, start1 + i1*stride1, ...]`.

    Strides may be negative, so reversed and stepped views (`x[::-1]`, `flip`) are
    one op. The result type gives the size per dim; every index read must lie
    inside the operand, which the verifier checks statically.
    """

    name = "flow.slice"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    start = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `start` `=` $start `,` `strides` `=` $strides attr-dict "
        "`:` type($operand) `->` type($result)"
    )

    @classmethod
    def infer(
        cls, operand_types, *, start: Sequence[int], strides: Sequence[int], sizes: Sequence[int]
    ):
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        shape = ty.get_shape()
        rank = len(shape)
        start = _per_dim(start, rank, cls.name, "start", ty)
        strides = _per_dim(strides, rank, cls.name, "stride", ty)
        sizes = _per_dim(sizes, rank, cls.name, "size", ty)
        for d, (n, s, st, k) in enumerate(zip(shape, start, strides, sizes)):
            if st == 0:
                raise verify_error(cls.name, f"expected non-zero strides, got {list(strides)}")
            if k < 0:
                raise verify_error(cls.name, f"expected non-negative sizes, got {list(sizes)}")
            last = s + (k - 1) * st
            if k > 0 and not (0 <= s < n and 0 <= last < n):
                raise verify_error(
                    cls.name,
                    f"dim {d} reads indices {s} to {last} (start {s}, stride {st}, size {k}) "
                    f"outside [0, {n}) of {ty}",
                )
        return TensorType(ty.element_type, sizes)

    def params(self):
        return {
            "start": self.start.get_values(),
            "strides": self.strides.get_values(),
            "sizes": self.result.type.get_shape(),
        }

    @classmethod
    def _props(cls, *, start, strides, sizes):
        return {"start": i64_array(start), "strides": i64_array(strides)}


@irdl_op_definition
class PadOp(FlowOp):
    """Pad with a constant: `low[d]` / `high[d]` copies of `value` before / after each dim.

    Padding is non-negative (the frontend crops with `flow.slice`); the value is a
    typed scalar like `flow.full`'s and must have the operand's element type.
    """

    name = "flow.pad"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    low = prop_def(DenseArrayBase.constr(i64))
    high = prop_def(DenseArrayBase.constr(i64))
    value = prop_def(FloatAttr | IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` `low` `=` $low `,` `high` `=` $high `,` `value` `=` `(` $value `)` "
        "attr-dict `:` type($operand) `->` type($result)"
    )

    @classmethod
    def infer(cls, operand_types, *, low: Sequence[int], high: Sequence[int], value: Attribute):
        (ty,) = operand_types
        ty = expect_tensor(ty, cls.name, "operand")
        shape = ty.get_shape()
        low = _per_dim(low, len(shape), cls.name, "low padding", ty)
        high = _per_dim(high, len(shape), cls.name, "high padding", ty)
        if any(p < 0 for p in (*low, *high)):
            raise verify_error(
                cls.name, f"expected non-negative padding, got low {list(low)}, high {list(high)}"
            )
        if not isinstance(value, (FloatAttr, IntegerAttr)) or value.type != ty.element_type:
            raise verify_error(
                cls.name, f"expected a padding value of type {ty.element_type}, got {value}"
            )
        return TensorType(ty.element_type, [n + lo + hi for n, lo, hi in zip(shape, low, high)])

    def params(self):
        return {"low": self.low.get_values(), "high": self.high.get_values(), "value": self.value}

    @classmethod
    def _props(cls, *, low, high, value):
        return {"low": i64_array(low), "high": i64_array(high), "value": value}


@irdl_op_definition
class ConcatOp(FlowOp):
    """Concatenate one or more tensors of one element type along `dim`.

    All operands have the same rank (at least 1) and equal sizes in every other
    dim; operands of size 0 along `dim` are allowed.
    """

    name = "flow.concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = (
        "`dim` `=` $dimension `,` $inputs attr-dict `:` type($inputs) `->` type($result)"
    )

    @classmethod
    def infer(cls, operand_types, *, dim: int):
        if not operand_types:
            raise verify_error(cls.name, "expected at least one operand")
        tys = [expect_tensor(t, cls.name, "operands") for t in operand_types]
        first = tys[0]
        shape = first.get_shape()
        if not shape:
            raise verify_error(cls.name, f"expected operands of rank >= 1, got {first}")
        dim = _check_dim(dim, len(shape), cls.name)
        total = 0
        for i, ty in enumerate(tys):
            s = ty.get_shape()
            if ty.element_type != first.element_type:
                raise verify_error(
                    cls.name,
                    f"expected every operand to have element type {first.element_type}, "
                    f"got {ty} (operand #{i})",
                )
            if len(s) != len(shape) or any(
                a != b for d, (a, b) in enumerate(zip(s, shape)) if d != dim
            ):
                raise verify_error(
                    cls.name,
                    f"expected operand #{i} to match operand #0 in every dim but {dim}, "
                    f"got {ty} and {first}",
                )
            total += s[dim]
        return TensorType(
            first.element_type, [total if d == dim else n for d, n in enumerate(shape)]
        )

    def params(self):
        return {"dim": self.dimension.value.data}

    @classmethod
    def _props(cls, *, dim):
        return {"dimension": IntegerAttr(int(dim), i64)}

    @classmethod
    def make(cls, *operands, encoding=None, **params) -> ConcatOp:
        """Like `FlowOp.make`; the operands form one variadic group."""
        ty = cls.infer([o.type for o in operands], **params)
        if encoding is not None and encoding != NoneAttr():
            ty = TensorType(ty.element_type, ty.get_shape(), encoding)
        return cls(operands=[list(operands)], result_types=[ty], properties=cls._props(**params))


@irdl_op_definition
class GatherOp(FlowOp):
    """`torch.gather`: `result[i][j][k] = operand[i][indices[i][j][k]][k]` for `dim = 1`.

    `indices` is an integer tensor of the operand's rank; the result has its
    shape and is never larger than the operand in the other dims. Indices are
    data, so the compiled code clamps each one into `[0, size)`: a bad index
    reads a wrong element, never outside the operand (eager mode raises).
    """

    name = "flow.gather"
    operand = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)
    dimension = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = (
        "$operand `,` $indices `,` `dim` `=` $dimension attr-dict "
        "`:` type($operand) `,` type($indices) `->` type($result)"
    )

    @classmethod
    def infer(cls, operand_types, *, dim: int):
        ty, idx = (expect_tensor(t, cls.name, "operands") for t in operand_types)
        el = idx.element_type
        if not isinstance(el, IntegerType) or el.width.data == 1:
            raise verify_error(cls.name, f"expected integer indices, got {idx}")
        shape, ishape = ty.get_shape(), idx.get_shape()
        if len(ishape) != len(shape):
            raise verify_error(
                cls.name, f"expected indices of rank {len(shape)} like the operand {ty}, got {idx}"
            )
        dim = _check_dim(dim, len(shape), cls.name)
        for d, (n, m) in enumerate(zip(shape, ishape)):
            if d != dim and m > n:
                raise verify_error(
                    cls.name,
                    f"expected indices dim {d} (size {m}) to be at most operand dim {d} "
                    f"(size {n}), got {idx} and {ty}",
                )
        if shape[dim] == 0 and 0 not in ishape:
            raise verify_error(cls.name, f"cannot gather along dim {dim} of size 0 of {ty}")
        return TensorType(ty.element_type, ishape)

    def params(self):
        return {"dim": self.dimension.value.data}

    @classmethod
    def _props(cls, *, dim):
        return {"dimension": IntegerAttr(int(dim), i64)}


OPS: tuple[type[FlowOp], ...] = (SliceOp, PadOp, ConcatOp, GatherOp)
ATTRS: tuple = ()

__all__ = ["SliceOp", "PadOp", "ConcatOp", "GatherOp"]
