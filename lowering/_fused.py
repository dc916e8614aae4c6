"""Lowering rule for `flow.fused`: one all-parallel `linalg.generic` with several results.

The loop nest runs over the results' shape. Each region argument read
directly is an input with the identity map; each `flow.broadcast_in_dim` of an
argument is an input with a projected map (size-1 dims it expands are
collapsed away first, as in the single-op lowering, so every map stays a pure
projection). The body chains the scalar rules of the elementwise ops
(`_elementwise.scalar_body`), `flow.full` is a scalar constant, and the
generic yields one value per `flow.yield` operand.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, DenseArrayBase, i32
from xdsl.dialects.linalg.ops import GenericOp, YieldOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from flow.dialect import ops as flow
from flow.dialect.fused import FusedOp
from flow.dialect.fused import YieldOp as FlowYieldOp

from ._elementwise import scalar_body
from ._linalg_builders import (
    broadcast_input,
    build,
    constant,
    empty,
    identity_map,
    parallel,
)


def _read_key(op: Operation, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """How a body op reads a region argument: None directly, else the broadcast dims."""
    if isinstance(op, flow.BroadcastInDimOp) and tuple(op.operand.type.get_shape()) != shape:
        return tuple(op.broadcast_dimensions.get_values())
    return None


def lower_fused(op: FusedOp) -> tuple[list[Operation], list[SSAValue]]:
    """The ops replacing `op` and the values replacing its results."""
    region_block = op.body.block
    shape = op.iteration_shape
    rank = len(shape)
    ident = identity_map(rank)
    before: list[Operation] = []
    inputs: list[SSAValue] = []
    maps: list[AffineMapAttr] = []
    slots: dict[tuple[BlockArgument, tuple[int, ...] | None], int] = {}

    reads = {(v, _read_key(inner, shape)) for inner in region_block.ops
             for v in inner.operands if isinstance(v, BlockArgument)}  # fmt: skip
    for arg, dims in sorted(reads, key=lambda r: (r[0].index, r[1] is not None, r[1] or ())):
        value = op.inputs[arg.index]
        if dims is None:
            map_ = ident
        else:
            ops, value, map_ = broadcast_input(value, dims, shape)
            before.extend(ops)
        slots[(arg, dims)] = len(inputs)
        inputs.append(value)
        maps.append(map_)

    inits = [empty(r.type) for r in op.res]
    body = Block(arg_types=[*(v.type.element_type for v in inputs),
                            *(r.type.element_type for r in op.res)])  # fmt: skip
    scalars: dict[SSAValue, SSAValue] = {}

    def scalar(v: SSAValue, dims: tuple[int, ...] | None = None) -> SSAValue:
        if isinstance(v, BlockArgument):
            return body.args[slots[(v, dims)]]
        return scalars[v]

    for inner in region_block.ops:
        if isinstance(inner, FlowYieldOp):
            body.add_op(YieldOp.create(operands=[scalar(v) for v in inner.values]))
        elif isinstance(inner, flow.BroadcastInDimOp):
            scalars[inner.result] = scalar(inner.operand, _read_key(inner, shape))
        elif isinstance(inner, flow.FullOp):
            c = constant(inner.value)
            body.add_op(c)
            scalars[inner.result] = c.result
        else:
            ops, value = scalar_body(inner, [scalar(v) for v in inner.operands])
            body.add_ops(ops)
            scalars[inner.results[0]] = value
    props = {
        "indexing_maps": ArrayAttr((*maps, *[ident] * len(inits))),
        "iterator_types": parallel(rank),
        "operandSegmentSizes": DenseArrayBase.from_list(i32, (len(inputs), len(inits))),
    }
    gen = build(GenericOp, (*inputs, *(i.tensor for i in inits)), [r.type for r in op.res],
                props, (Region(body),))  # fmt: skip
    return [*before, *inits, gen], list(gen.results)


RULES: dict[type[Operation], Callable[[Operation], tuple[list[Operation], list[SSAValue]]]] = {
    FusedOp: lower_fused,
}
