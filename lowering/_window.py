"""Lowering rules for the flow dialect's window ops: convolution and reduce_window.

Both become `tensor.pad` (and `tensor.extract_slice` when the windows never
reach the operand's last elements) plus one `linalg.generic` whose input map
reads the padded operand at `out * stride + window * dilation` (an affine,
non-projected map, as linalg's named conv and pooling ops use).
Convolution is a contraction over input channels and kernel positions into a
zero-filled result; grouped convolution first splits the channel dims with
`tensor.expand_shape` so each group is an extra parallel loop. An ungrouped one of
static shapes is instead a copy of the input's patches (read through that same map) and
one 2-D product, which IREE data-tiles (`_conv_as_gemm`), unless the patches would be too
large. reduce_window takes a `tensor.empty` of the window shape as a second input, as
linalg's pooling ops do, so the window positions are reduction loops of the domain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

from xdsl.dialects import tensor
from xdsl.dialects.builtin import AffineMapAttr, DenseArrayBase, IndexType, TensorType, i32, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from flow.dialect import window as flow
from flow.dialect.ops import is_float
from flow.dialect.sbp import element_bytes, tensor_bytes

from ._iree_ops import OptimizationBarrierOp as UtilBarrierOp
from ._linalg_builders import (
    Lowered,
    binary,
    build,
    collapse,
    empty,
    expand,
    generic,
    identity_map,
    iterators,
    scalar_constant,
)
from ._structured import (
    _COMBINERS,
    _copy_body,
    _identity,
    _init,
    _multiply_add,
    matmul_2d,
    transpose,
)


def _pad(value: SSAValue, pads: Sequence[Sequence[int]], fill: float) -> Lowered:
    """`tensor.pad` of `value` by `(low, high)` per dim with the constant `fill`."""
    ty = value.type
    assert isinstance(ty, TensorType)
    if not any(lo or hi for lo, hi in pads):
        return [], value
    shape = [s + lo + hi for s, (lo, hi) in zip(ty.get_shape(), pads)]
    out_ty = TensorType(ty.element_type, shape)
    block = Block(arg_types=[IndexType()] * len(shape))
    cst = scalar_constant(fill, ty.element_type)
    block.add_ops([cst, tensor.YieldOp.create(operands=(cst.result,))])
    props = {
        "static_low": DenseArrayBase.from_list(i64, [lo for lo, _ in pads]),
        "static_high": DenseArrayBase.from_list(i64, [hi for _, hi in pads]),
        "operandSegmentSizes": DenseArrayBase.from_list(i32, (1, 0, 0)),
    }
    pad = build(tensor.PadOp, (value,), (out_ty,), props, (Region(block),))
    return [pad], pad.results[0]


def _head(value: SSAValue, sizes: Sequence[int]) -> Lowered:
    """The leading `sizes` elements of every dim (`tensor.extract_slice` at offset 0)."""
    ty = value.type
    assert isinstance(ty, TensorType)
    if list(sizes) == list(ty.get_shape()):
        return [], value
    if 0 in ty.get_shape():
        # No elements to keep (and MLIR rejects offset 0 into an empty dim).
        e = empty(TensorType(ty.element_type, sizes))
        return [e], e.tensor
    props = {
        "static_offsets": DenseArrayBase.from_list(i64, [0] * len(sizes)),
        "static_sizes": DenseArrayBase.from_list(i64, sizes),
        "static_strides": DenseArrayBase.from_list(i64, [1] * len(sizes)),
        "operandSegmentSizes": DenseArrayBase.from_list(i32, (1, 0, 0, 0)),
    }
    op = build(tensor.ExtractSliceOp, (value,), (TensorType(ty.element_type, sizes),), props)
    return [op], op.results[0]


def _windowed(value: SSAValue, pads: Sequence[Sequence[int]], extents: Sequence[int],
              fill: float) -> Lowered:  # fmt: skip
    """The padded operand cut to exactly `extents`, the span the windows read per dim.

    Elements past the last window are dropped (sliced off the source, or padded less), so
    every dim of the read operand is fully covered by `out * stride + window * dilation`:
    once IREE folds a unit output dim away, that map becomes a plain loop dim whose range
    must then equal the operand's size.
    """
    ty = value.type
    assert isinstance(ty, TensorType)
    keep, new_pads = [], []
    for size, (lo, _), extent in zip(ty.get_shape(), pads, extents):
        extent = max(extent, 0)
        low = min(lo, extent)
        kept = max(0, min(size, extent - low))
        keep.append(kept)
        new_pads.append((low, extent - low - kept))
    ops, value = _head(value, keep)
    pad_ops, value = _pad(value, new_pads, fill)
    return ops + pad_ops, value


def _extent(out: int, window: int, stride: int, dilation: int) -> int:
    """How far along a dim the windows of `out` results read."""
    return (out - 1) * stride + dilation * (window - 1) + 1


def _window_expr(out: int, win: int | None, stride: int, dilation: int) -> AffineExpr:
    """`d<out> * stride + d<win> * dilation` (the window term only when `win` is a loop)."""
    expr = AffineExpr.dimension(out)
    if stride != 1:
        expr = expr * stride
    if win is None:
        return expr
    w = AffineExpr.dimension(win)
    return expr + (w * dilation if dilation != 1 else w)


def _map(num_dims: int, exprs: Sequence[AffineExpr | int]) -> AffineMapAttr:
    """An affine map whose int entries stand for plain loop dims."""
    results = tuple(AffineExpr.dimension(e) if isinstance(e, int) else e for e in exprs)
    return AffineMapAttr(AffineMap(num_dims, 0, results))


def _lower_conv(op: flow.ConvOp) -> Lowered:
    """Loops `(n, [g,] oc, o..., ic, k...)`; the input is read at `o * stride + k * dilation`.
    An ungrouped convolution of static shapes whose patches fit `IM2COL_MAX_BYTES` is
    lowered as a matrix product of patches instead (`_conv_as_gemm`)."""
    ty = op.result.type
    el = ty.element_type
    p = op.params()
    xs, ws = op.input.type.get_shape(), op.weight.type.get_shape()
    n = len(xs) - 2
    groups = p["groups"]
    out_shape = ty.get_shape()
    extents = [
        _extent(o, k, s, d)
        for o, k, s, d in zip(out_shape[2:], ws[2:], p["strides"], p["dilations"])
    ]
    ops, x = _windowed(op.input, [(0, 0), (0, 0), *p["padding"]], [*xs[:2], *extents], 0)
    if _patches_bytes(op):
        gemm_ops, value = _conv_as_gemm(x, op.weight, ty, p["strides"], p["dilations"])
        return ops + gemm_ops, value
    w: SSAValue = op.weight
    g = 1 if groups > 1 else 0  # an extra loop for the group
    if g:
        x_ty = x.type
        assert isinstance(x_ty, TensorType)
        xp = x_ty.get_shape()
        split = [[0], [1, 2], *([3 + i] for i in range(n))]
        ex = expand(x, split, TensorType(el, [xp[0], groups, xp[1] // groups, *xp[2:]]))
        ew_groups = [[0, 1], *([2 + i] for i in range(n + 1))]
        ew = expand(w, ew_groups, TensorType(el, [groups, ws[0] // groups, *ws[1:]]))
        ops += [ex, ew]
        x, w = ex.results[0], ew.results[0]
    b, oc, ic = 0, 1 + g, 2 + g + n
    outs = [2 + g + i for i in range(n)]
    ks = [3 + g + n + i for i in range(n)]
    nd = 3 + g + 2 * n
    grp = [1] if g else []
    spatial = [
        _window_expr(o, k, s, d) for o, k, s, d in zip(outs, ks, p["strides"], p["dilations"])
    ]
    maps = [
        _map(nd, [b, *grp, ic, *spatial]),
        _map(nd, [*grp, oc, ic, *ks]),
        _map(nd, [b, *grp, oc, *outs]),
    ]
    acc_ty = (
        TensorType(el, [out_shape[0], groups, out_shape[1] // groups, *out_shape[2:]]) if g else ty
    )
    init_ops, init = _init(0, acc_ty)
    kinds = (False,) * (2 + g + n) + (True,) * (1 + n)
    gen = generic([x, w], init, maps, iterators(kinds), _multiply_add(el))
    ops += [*init_ops, gen]
    value = gen.results[0]
    if g:
        c = collapse(value, [[0], [1, 2], *([3 + i] for i in range(n))], ty)
        ops.append(c)
        value = c.results[0]
    return ops, value


# The largest patches tensor (`[C_in * prod(kernel), N * prod(out)]`) a convolution is
# lowered through; larger ones keep the direct loop nest, which reads the input in place.
IM2COL_MAX_BYTES = 1 << 27


def _patches_bytes(op: flow.ConvOp) -> int:
    """The bytes of the patches `op` is lowered through (`_conv_as_gemm`); 0 when it keeps the
    loop nest: grouped, dynamic (-1) or empty dims, or patches over `IM2COL_MAX_BYTES`."""
    ty = op.result.type
    xs, ws, out_shape = op.input.type.get_shape(), op.weight.type.get_shape(), ty.get_shape()
    if op.params()["groups"] != 1 or any(s <= 0 for s in [*xs, *ws, *out_shape]):
        return 0
    elements = ws[1] * prod(ws[2:]) * out_shape[0] * prod(out_shape[2:])
    size = elements * element_bytes(ty.element_type)
    return size if size <= IM2COL_MAX_BYTES else 0


def conv_workspace_bytes(op: flow.ConvOp) -> int:
    """The bytes `op`'s lowering allocates beside its operands and result while it runs: of
    a product of patches (`_conv_as_gemm`) the patches, the copy a data-tiled product packs
    them into, and the product before its transpose; of the loop nest none (for
    flow.lowering.memory_analysis)."""
    patches = _patches_bytes(op)
    if not patches:
        return 0
    return 2 * patches + tensor_bytes(op.result.type)


def _conv_as_gemm(x: SSAValue, w: SSAValue, ty: TensorType, strides: Sequence[int],
                  dilations: Sequence[int]) -> Lowered:  # fmt: skip
    """An ungrouped convolution of the windowed input `x` `[N, C_in, *extents]` with `w`
    `[C_out, C_in, *k]` as one 2-D matrix product (im2col, as Caffe and cuDNN's GEMM
    algorithms do): the patches `[C_in * prod(k), N * prod(out)]` are copied out of `x`,
    `w` is read as `[C_out, C_in * prod(k)]`, and the `[C_out, N, *out]` product is
    transposed to `[N, C_out, *out]`. IREE data-tiles a plain product; its code for the
    direct loop nest of a small convolution runs an order of magnitude slower."""
    el = ty.element_type
    out_shape = ty.get_shape()
    ws = w.type.get_shape()
    n = len(out_shape) - 2
    batch, c_out, outs = out_shape[0], out_shape[1], out_shape[2:]
    c_in, ks = ws[1], ws[2:]
    rows, cols = c_in * prod(ks), batch * prod(outs)
    # patches: loops (ic, k..., b, o...), reading x at (b, ic, o * stride + k * dilation)
    nd = 2 + 2 * n
    ic, b = 0, 1 + n
    kd = [1 + i for i in range(n)]
    od = [2 + n + i for i in range(n)]
    spatial = [_window_expr(o, k, s, d) for o, k, s, d in zip(od, kd, strides, dilations)]
    patch_ty = TensorType(el, [c_in, *ks, batch, *outs])
    init = empty(patch_ty)
    patches = generic([x], init.tensor, [_map(nd, [b, ic, *spatial]), identity_map(nd)],
                      iterators((False,) * nd), _copy_body)  # fmt: skip
    flat_patches = collapse(patches.results[0], [list(range(1 + n)), list(range(1 + n, nd))],
                            TensorType(el, [rows, cols]))  # fmt: skip
    flat_w = collapse(w, [[0], list(range(1, 2 + n))], TensorType(el, [c_out, rows]))
    gemm_ops, product = matmul_2d(flat_w.results[0], flat_patches.results[0],
                                  TensorType(el, [c_out, cols]))  # fmt: skip
    # (a barrier: IREE would otherwise fold the transpose below into the product, whose
    # batched result layout it then does not data-tile)
    barrier = UtilBarrierOp.make([product])
    gemm_ops.append(barrier)
    grid = expand(barrier.results[0], [[0], list(range(1, 2 + n))],
                  TensorType(el, [c_out, batch, *outs]))  # fmt: skip
    swap_ops, value = transpose(grid.results[0], (1, 0, *range(2, 2 + n)), ty)
    return [init, patches, flat_patches, flat_w, *gemm_ops, grid, *swap_ops], value


def _lower_reduce_window(op: flow.ReduceWindowOp) -> Lowered:
    """Loops `(o..., w...)` over result dims and the dims whose window is wider than 1."""
    ty = op.result.type
    el = ty.element_type
    p = op.params()
    kind = p["kind"]
    rank = len(ty.get_shape())
    extents = [_extent(*a) for a in zip(ty.get_shape(), p["window"], p["strides"], p["dilations"])]
    ops, x = _windowed(op.operand, p["padding"], extents, _identity(kind, el))
    pooled = [i for i in range(rank) if p["window"][i] > 1]
    nd = rank + len(pooled)
    win_loop = {d: rank + j for j, d in enumerate(pooled)}
    reads = [
        _window_expr(i, win_loop.get(i), p["strides"][i], p["dilations"][i]) for i in range(rank)
    ]
    out_map = identity_map(rank) if not pooled else _map(nd, range(rank))
    if not pooled:
        # Every window is one element: a strided copy.
        init = empty(ty)
        gen = generic([x], init.tensor, [_map(nd, reads), out_map], iterators((False,) * rank),
                      _copy_body)  # fmt: skip
        return [*ops, init, gen], gen.results[0]
    win = empty(TensorType(el, [p["window"][d] for d in pooled]))
    maps = [_map(nd, reads), _map(nd, [win_loop[d] for d in pooled]), out_map]
    combine = _COMBINERS[kind][0 if is_float(el) else 1]

    def body(a: Sequence[SSAValue]) -> Lowered:
        c = binary(combine, a[2], a[0])
        return [c], c.results[0]

    init_ops, init = _init(_identity(kind, el), ty)
    kinds = (False,) * rank + (True,) * len(pooled)
    gen = generic([x, win.tensor], init, maps, iterators(kinds), body)
    return [*ops, win, *init_ops, gen], gen.results[0]


RULES: dict[type[Operation], Callable[[Operation], Lowered]] = {
    flow.ConvOp: _lower_conv,
    flow.ReduceWindowOp: _lower_reduce_window,
}
