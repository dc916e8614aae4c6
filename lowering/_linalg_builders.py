"""Helpers that build `tensor`/`linalg`/`arith` IR objects directly (no text, no rewriter).

Every lowering rule returns the ops to insert before the flow op it replaces
plus the value that replaces the flow op's result. Ops are made with
`Operation.create` and their properties' default values (`build`), skipping
IRDL's argument processing in the op constructors, which is most of the
lowering time in xDSL. Affine maps, iterator types and operand segment sizes
are cached: a traced model repeats the same few ranks thousands of times.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import TypeVar

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import (
    AffineMapAttr,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    i32,
    i64,
)
from xdsl.dialects.linalg.attrs import IteratorTypeAttr
from xdsl.dialects.linalg.ops import FillOp, GenericOp, YieldOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from flow.dialect.ops import is_float

PARALLEL = IteratorTypeAttr.parallel()
REDUCTION = IteratorTypeAttr.reduction()

BodyFn = Callable[[Sequence[SSAValue]], tuple[list[Operation], SSAValue]]
"""Builds a linalg body from its block arguments: (ops, value to yield)."""

Lowered = tuple[list[Operation], SSAValue]
"""What a lowering rule returns: ops to insert, and the replacement value."""


@cache
def _default_properties(cls: type[Operation]) -> dict[str, Attribute]:
    props = cls.get_irdl_definition().properties  # type: ignore[attr-defined]
    return {k: p.default_value for k, p in props.items() if p.default_value is not None}


OpT = TypeVar("OpT", bound=Operation)


def build(
    cls: type[OpT],
    operands: Sequence[SSAValue],
    result_types: Sequence[Attribute],
    properties: dict[str, Attribute] | None = None,
    regions: Sequence[Region] = (),
) -> OpT:
    """`cls` with its default-valued properties (e.g. `fastmath<none>`), built without IRDL."""
    props = dict(_default_properties(cls))
    if properties:
        props.update(properties)
    return cls.create(operands=operands, result_types=result_types, properties=props,
                      regions=regions)  # fmt: skip


def unary(cls: type[Operation], x: SSAValue, result_type: Attribute | None = None) -> Operation:
    return build(cls, (x,), (x.type if result_type is None else result_type,))


def binary(cls: type[Operation], x: SSAValue, y: SSAValue) -> Operation:
    return build(cls, (x, y), (x.type,))


@cache
def _segments(n_inputs: int, n_outputs: int) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, (n_inputs, n_outputs))


@cache
def _maps(maps: tuple[AffineMapAttr, ...]) -> ArrayAttr:
    return ArrayAttr(maps)


@cache
def affine_map(num_dims: int, results: tuple[int, ...]) -> AffineMapAttr:
    """`affine_map<(d0, ..., d{num_dims-1}) -> (d{results[0]}, ...)>`, a pure projection."""
    exprs = tuple(AffineExpr.dimension(r) for r in results)
    return AffineMapAttr(AffineMap(num_dims, 0, exprs))


def identity_map(rank: int) -> AffineMapAttr:
    return affine_map(rank, tuple(range(rank)))


@cache
def iterators(kinds: tuple[bool, ...]) -> ArrayAttr:
    """Iterator types, `True` marking a reduction loop."""
    return ArrayAttr(REDUCTION if r else PARALLEL for r in kinds)


def parallel(rank: int) -> ArrayAttr:
    return iterators((False,) * rank)


def constant(value: Attribute) -> arith.ConstantOp:
    """`arith.constant` of a typed attribute (scalar or dense)."""
    return build(arith.ConstantOp, (), (value.get_type(),), {"value": value})


def scalar_constant(value: float, el: Attribute) -> arith.ConstantOp:
    """An `arith.constant` scalar of element type `el`."""
    if is_float(el):
        return constant(FloatAttr(float(value), el))
    assert isinstance(el, IntegerType)
    return constant(IntegerAttr(int(value), el))


def empty(ty: TensorType) -> tensor.EmptyOp:
    return build(tensor.EmptyOp, (), (ty,))


def filled(value: SSAValue, ty: TensorType) -> Lowered:
    """A tensor of type `ty` whose every element is the scalar `value`."""
    init = empty(ty)
    block = Block(arg_types=(value.type, ty.element_type))
    block.add_op(YieldOp.create(operands=(block.args[0],)))
    props = {"operandSegmentSizes": _segments(1, 1)}
    fill = build(FillOp, (value, init.tensor), (ty,), props, (Region(block),))
    return [init, fill], fill.results[0]


def generic(
    inputs: Sequence[SSAValue],
    init: SSAValue,
    maps: Sequence[AffineMapAttr],
    iterator_types: ArrayAttr,
    body: BodyFn,
) -> GenericOp:
    """A single-result `linalg.generic` whose body is built by `body` from its arguments."""
    out_ty = init.type
    assert isinstance(out_ty, TensorType)
    arg_types = [_element(v.type) for v in inputs]
    arg_types.append(out_ty.element_type)
    block = Block(arg_types=arg_types)
    ops, value = body(block.args)
    ops.append(YieldOp.create(operands=(value,)))
    block.add_ops(ops)
    props = {
        "indexing_maps": _maps(tuple(maps)),
        "iterator_types": iterator_types,
        "operandSegmentSizes": _segments(len(inputs), 1),
    }
    return build(GenericOp, (*inputs, init), (out_ty,), props, (Region(block),))


def elementwise(inputs: Sequence[SSAValue], result_type: TensorType, body: BodyFn) -> Lowered:
    """`tensor.empty` + an all-parallel `linalg.generic` with identity maps."""
    rank = len(result_type.get_shape())
    init = empty(result_type)
    ident = identity_map(rank)
    op = generic(inputs, init.tensor, [ident] * (len(inputs) + 1), parallel(rank), body)
    return [init, op], op.results[0]


def reassociation(groups: Sequence[Sequence[int]]) -> ArrayAttr:
    return ArrayAttr(ArrayAttr(IntegerAttr(d, i64) for d in g) for g in groups)


def collapse(value: SSAValue, groups: Sequence[Sequence[int]], ty: TensorType) -> Operation:
    """`tensor.collapse_shape` of `value` to `ty` (an empty `groups` collapses to rank 0)."""
    return build(tensor.CollapseShapeOp, (value,), (ty,), {"reassociation": reassociation(groups)})


def expand(value: SSAValue, groups: Sequence[Sequence[int]], ty: TensorType) -> Operation:
    """`tensor.expand_shape` of `value` to the static type `ty`."""
    props = {
        "reassociation": reassociation(groups),
        "static_output_shape": DenseArrayBase.from_list(i64, ty.get_shape()),
    }
    return build(tensor.ExpandShapeOp, (value,), (ty,), props)


def _element(ty: Attribute) -> Attribute:
    return ty.element_type if isinstance(ty, TensorType) else ty


def broadcast_input(
    value: SSAValue, dims: Sequence[int], shape: Sequence[int]
) -> tuple[list[Operation], SSAValue, AffineMapAttr]:
    """`value` read as broadcast to `shape` (operand dim i -> result dim dims[i]).

    Size-1 operand dims that broadcast are collapsed away, so the map is a
    projection: (ops to insert, the value to read, its indexing map).
    """
    ty = value.type
    assert isinstance(ty, TensorType)
    src = ty.get_shape()
    keep = [i for i, d in enumerate(dims) if src[i] == shape[d]]
    ops: list[Operation] = []
    if len(keep) != len(src):
        groups: list[list[int]] = []
        pending: list[int] = []
        for i in range(len(src)):
            pending.append(i)
            if i in keep:
                groups.append(pending)
                pending = []
        if groups:
            groups[-1].extend(pending)
        c = collapse(value, groups, TensorType(ty.element_type, [src[i] for i in keep]))
        ops.append(c)
        value = c.results[0]
    return ops, value, affine_map(len(shape), tuple(dims[i] for i in keep))
