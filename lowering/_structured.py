"""Lowering rules for structured flow ops: matmul, reduce, movement ops and constants.

Contractions and reductions are `linalg.fill` of the combiner's identity plus
a `linalg.generic` with reduction iterators (never `linalg.matmul`, whose
indexing maps xDSL's printer drops). Movement ops keep every indexing map a
pure projection or permutation, which is what IREE's fusion handles best.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType, TensorType, i64
from xdsl.dialects.linalg.ops import GenericOp, IndexOp, YieldOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr

from flow.dialect import ops as flow
from flow.dialect.ops import is_float

from . import _half_casts
from ._iree_ops import OptimizationBarrierOp as UtilBarrierOp
from ._linalg_builders import (
    Lowered,
    affine_map,
    binary,
    broadcast_input,
    build,
    collapse,
    constant,
    empty,
    expand,
    filled,
    generic,
    identity_map,
    iterators,
    scalar_constant,
)


def _identity(kind: str, el: Attribute) -> float:
    """The neutral element of a reduction over `el`."""
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if is_float(el):
        return float("-inf") if kind == "max" else float("inf")
    assert isinstance(el, IntegerType)
    bits = el.width.data
    return -(1 << (bits - 1)) if kind == "max" else (1 << (bits - 1)) - 1


_COMBINERS: dict[str, tuple[type[Operation], type[Operation]]] = {
    "sum": (arith.AddfOp, arith.AddiOp),
    "prod": (arith.MulfOp, arith.MuliOp),
    "max": (arith.MaximumfOp, arith.MaxSIOp),
    "min": (arith.MinimumfOp, arith.MinSIOp),
}


def _init(value: float, ty: TensorType) -> Lowered:
    cst = scalar_constant(value, ty.element_type)
    ops, init = filled(cst.result, ty)
    return [cst, *ops], init


def _lower_matmul(op: flow.MatmulOp) -> Lowered:
    """`[..., M, K] x [..., K, N]`: loops (batch..., m, n, k), k the only reduction."""
    ty = op.result.type
    el = ty.element_type
    nb = len(ty.get_shape()) - 2
    batch = tuple(range(nb))
    m, n, k = nb, nb + 1, nb + 2
    lhs, lhs_dims = _through_transpose(op.lhs, (*batch, m, k))
    rhs, rhs_dims = _through_transpose(op.rhs, (*batch, k, n))
    maps = [
        affine_map(nb + 3, lhs_dims),
        affine_map(nb + 3, rhs_dims),
        affine_map(nb + 3, (*batch, m, n)),
    ]
    ops, init = _init(0, ty)
    gen = generic([lhs, rhs], init, maps, iterators((False,) * (nb + 2) + (True,)),
                  _multiply_add(el))  # fmt: skip
    return [*ops, gen], gen.results[0]


def matmul_2d(lhs: SSAValue, rhs: SSAValue, ty: TensorType) -> Lowered:
    """The product `[M, K] x [K, N]` of two tensors, of type `ty` `[M, N]`."""
    maps = [affine_map(3, (0, 2)), affine_map(3, (2, 1)), affine_map(3, (0, 1))]
    ops, init = _init(0, ty)
    gen = generic([lhs, rhs], init, maps, iterators((False, False, True)),
                  _multiply_add(ty.element_type))  # fmt: skip
    return [*ops, gen], gen.results[0]


def _multiply_add(el: Attribute) -> Callable[[Sequence[SSAValue]], Lowered]:
    """The body of a contraction over `el`: `acc + a * b`."""
    mul, add = (arith.MulfOp, arith.AddfOp) if is_float(el) else (arith.MuliOp, arith.AddiOp)

    def body(a: Sequence[SSAValue]) -> Lowered:
        p = binary(mul, a[0], a[1])
        s = binary(add, a[2], p.results[0])
        return [p, s], s.results[0]

    return body


def _through_transpose(value: SSAValue, dims: tuple[int, ...]) -> tuple[SSAValue, tuple[int, ...]]:
    """Read through a producer that only permutes dims (a lowered flow.transpose).

    A contraction reading `transpose(x)` at loop dims `dims` reads `x` at the
    permuted dims instead: IREE then sees one matmul with a transposed operand,
    which it packs for data tiling directly, rather than a transpose fused into
    the pack (which IREE 3.13's CPU backend can fail to vectorize).
    """
    gen = value.owner
    if not isinstance(gen, GenericOp) or len(gen.inputs) != 1 or len(gen.outputs) != 1:
        return value, dims
    in_map, out_map = (m.data for m in gen.indexing_maps.data)
    block = gen.body.block
    yielded = block.last_op
    if (
        out_map != identity_map(len(dims)).data
        or len(block.ops) != 1
        or not isinstance(yielded, YieldOp)
        or yielded.operands[0] is not block.args[0]
        or any(not isinstance(e, AffineDimExpr) for e in in_map.results)
        or sorted(e.position for e in in_map.results) != list(range(len(dims)))
    ):
        return value, dims
    return gen.inputs[0], tuple(dims[e.position] for e in in_map.results)


def _lower_reduce(op: flow.ReduceOp) -> Lowered:
    src, ty = op.operand.type, op.result.type
    dims = set(op.dims.get_values())
    if not dims:
        return [], op.operand
    rank = len(src.get_shape())
    kind = op.kind.data.value
    combine = _COMBINERS[kind][0 if is_float(ty.element_type) else 1]
    maps = [identity_map(rank), affine_map(rank, tuple(d for d in range(rank) if d not in dims))]

    def body(a: Sequence[SSAValue]) -> tuple[list[Operation], SSAValue]:
        c = binary(combine, a[0], a[1])
        return [c], c.results[0]

    ops, init = _init(_identity(kind, ty.element_type), ty)
    gen = generic(op.operands, init, maps, iterators(tuple(d in dims for d in range(rank))), body)
    return [*ops, gen], gen.results[0]


def _copy_body(a: Sequence[SSAValue]) -> tuple[list[Operation], SSAValue]:
    return [], a[0]


def _lower_transpose(op: flow.TransposeOp) -> Lowered:
    return transpose(op.operand, op.permutation.get_values(), op.result.type)


def transpose(value: SSAValue, perm: Sequence[int], ty: TensorType) -> Lowered:
    """`value` with its dims permuted to `ty`: result dim i is operand dim perm[i], so operand
    dim j is read at loop inv[j]."""
    rank = len(perm)
    if tuple(perm) == tuple(range(rank)):
        return [], value
    inv = [0] * rank
    for i, p in enumerate(perm):
        inv[p] = i
    init = empty(ty)
    maps = [affine_map(rank, tuple(inv)), identity_map(rank)]
    gen = generic([value], init.tensor, maps, iterators((False,) * rank), _copy_body)
    return [init, gen], gen.results[0]


def _lower_broadcast_in_dim(op: flow.BroadcastInDimOp) -> Lowered:
    """Collapse away broadcast size-1 operand dims, then read with a projected map."""
    ty = op.result.type
    shape = ty.get_shape()
    if op.operand.type.get_shape() == shape:
        return [], op.operand
    ops, value, read = broadcast_input(op.operand, op.broadcast_dimensions.get_values(), shape)
    rank = len(shape)
    init = empty(ty)
    maps = [read, identity_map(rank)]
    gen = generic((value,), init.tensor, maps, iterators((False,) * rank), _copy_body)
    return [*ops, init, gen], gen.results[0]


def _broadcast_scalar(value: SSAValue, ty: TensorType) -> Lowered:
    rank = len(ty.get_shape())
    init = empty(ty)
    maps = [affine_map(rank, ()), identity_map(rank)]
    gen = generic((value,), init.tensor, maps, iterators((False,) * rank), _copy_body)
    return [init, gen], gen.results[0]


def _lower_reshape(op: flow.ReshapeOp) -> Lowered:
    """Collapse to 1-D, then expand to the target; rank-0 ends need no 1-D step."""
    src, ty = op.operand.type, op.result.type
    src_shape, shape = src.get_shape(), ty.get_shape()
    if src_shape == shape:
        return [], op.operand
    if not src_shape:
        # A rank-0 tensor to all-ones dims: xDSL rejects `tensor.expand_shape` with an
        # empty reassociation (MLIR allows it), so read the scalar in a generic instead.
        return _broadcast_scalar(op.operand, ty)
    if not shape:
        c = collapse(op.operand, [], ty)
        return [c], c.results[0]
    ops: list[Operation] = []
    value = op.operand
    if len(src_shape) > 1:
        flat = TensorType(src.element_type, [prod(src_shape)])
        c = collapse(value, [list(range(len(src_shape)))], flat)
        ops.append(c)
        value = c.results[0]
    if len(shape) > 1:
        e = expand(value, [list(range(len(shape)))], ty)
        ops.append(e)
        value = e.results[0]
    return ops, value


def _lower_constant(op: flow.ConstantOp) -> Lowered:
    c = constant(op.value)
    return [c], c.result


def _lower_full(op: flow.FullOp) -> Lowered:
    """A scalar constant filled into `tensor.empty` (stays O(1) in the IR for any size)."""
    cst = constant(op.value)
    ops, value = filled(cst.result, op.result.type)
    return [cst, *ops], value


def _lower_iota(op: flow.IotaOp) -> Lowered:
    """An all-parallel `linalg.generic` with no inputs whose body casts `linalg.index`."""
    ty = op.result.type
    el = ty.element_type
    rank = len(ty.get_shape())
    dim = op.dimension.value.data

    def body(args: Sequence[SSAValue]) -> Lowered:
        idx = build(IndexOp, (), (IndexType(),), {"dim": IntegerAttr(dim, i64)})
        as_int = build(arith.IndexCastOp, (idx.results[0],), (i64,))
        ops: list[Operation] = [idx, as_int]
        value = as_int.results[0]
        if el == _half_casts.BF16:  # sitofp to bf16 needs a libcall on CPUs without bf16
            ops += _half_casts.half_cast(value, i64, el)[0]
        elif is_float(el):
            ops.append(build(arith.SIToFPOp, (value,), (el,)))
        elif el != i64:
            ops.append(build(arith.TruncIOp, (value,), (el,)))
        return ops, ops[-1].results[0]

    init = empty(ty)
    gen = generic([], init.tensor, [identity_map(rank)], iterators((False,) * rank), body)
    return [init, gen], gen.results[0]


def _lower_optimization_barrier(op: flow.OptimizationBarrierOp) -> Lowered:
    """IREE's `util.optimization_barrier` on the value and its dependency; the value's result."""
    barrier = UtilBarrierOp.make([op.value, op.dep])
    return [barrier], barrier.results[0]


RULES: dict[type[Operation], Callable[[Operation], Lowered]] = {
    flow.OptimizationBarrierOp: _lower_optimization_barrier,
    flow.IotaOp: _lower_iota,
    flow.MatmulOp: _lower_matmul,
    flow.ReduceOp: _lower_reduce,
    flow.TransposeOp: _lower_transpose,
    flow.BroadcastInDimOp: _lower_broadcast_in_dim,
    flow.ReshapeOp: _lower_reshape,
    flow.ConstantOp: _lower_constant,
    flow.FullOp: _lower_full,
}
