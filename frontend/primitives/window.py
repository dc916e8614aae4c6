"""Window primitives: `conv` and `reduce_window` (dialect/window.py, lowered by
lowering/_window.py), each numpy kernel with its VJP right after it.

The VJPs are written with primitives (conv, reduce_window, slice, pad, reshape, transpose,
select), so inside `flow.jit` / `nn.Graph` the backward pass is traced into IR like the
forward pass. They share one picture of a window op: result position p reads padded
position `p * stride + k * dilation` at window offset k, i.e. unpadded position
`p * stride + k * dilation - low`. conv's input cotangent, `transposed_conv`, is also the
transposed convolution of ops/conv.py (`conv_transpose*d`, `fold`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.dialect.semantics import window_output_size
from flow.primitives.conv_kernels import conv_kernel
from flow.primitives.elementwise import add, and_, cast, compare, mul, or_, select
from flow.primitives.movement import pad, pad_constant, slice_dims
from flow.primitives.registry import bind, composite, primitive
from flow.primitives.structured import broadcast_in_dim, constant, full, reshape, transpose

# --------------------------------------------------------------------------- host constants


def _capture(arr: np.ndarray) -> Tensor:
    return Tensor._eager(np.array(arr, order="C"))


_CAPTURE: list[Callable[[np.ndarray], Tensor]] = [_capture]


def set_host_capture(capture: Callable[[np.ndarray], Tensor]) -> None:
    """Register how a larger host array becomes a captured tensor. ops/window.py registers
    `flow.tensor` marked as the same on every rank (the distributed layer's `mark_constant`),
    so that a global op meeting it takes it as broadcast."""
    _CAPTURE[0] = capture


def host_tensor(arr: np.ndarray) -> Tensor:
    """A host-computed array as a flow tensor: a small one is an IR constant, a larger one a
    captured tensor (a function argument inside `flow.jit`), so the IR stays small."""
    if arr.size <= 64:
        return bind(constant, array=arr)
    return _CAPTURE[0](arr)


# --------------------------------------------------------------------------- shared by the VJPs


def _zeros(shape, dtype) -> Tensor:
    return bind(full, value=0, shape=tuple(shape), dtype=dtype)


def _spread(g: Tensor, strides: Sequence[int]) -> Tensor:
    """`g` with `stride - 1` zeros after each element per dim (size `out * stride`): the
    result positions laid out at their window starts. One reshape-pad-reshape for all dims."""
    if all(s == 1 for s in strides):
        return g
    split, highs, merged = [], [], []
    for n, s in zip(g.shape, strides):
        split += [n, 1] if s > 1 else [n]
        highs += [0, s - 1] if s > 1 else [0]
        merged.append(n * s)
    if isinstance(g, np.ndarray):  # (an eager kernel's array: the same steps)
        return pad_constant(g.reshape(split), (0,) * len(highs), highs).reshape(merged)
    g = bind(reshape, g, shape=tuple(split))
    g = bind(pad, g, low=(0,) * len(highs), high=tuple(highs), value=0, dtype=g.dtype)
    return bind(reshape, g, shape=tuple(merged))


def _place(g: Tensor, lows: Sequence[int], highs: Sequence[int]) -> Tensor | None:
    """`g` padded with zeros by (low, high) per dim, negative amounts cropping instead; None
    when a crop leaves nothing (every element fell outside)."""
    spec = {}
    for d, (n, lo, hi) in enumerate(zip(g.shape, lows, highs)):
        if lo < 0 or hi < 0:
            start, stop = max(-lo, 0), n - max(-hi, 0)
            if stop <= start:
                return None
            spec[d] = (start, stop - start, 1)
    array = isinstance(g, np.ndarray)  # (an eager kernel's array: the same steps)
    if spec:
        g = g[tuple(slice(spec[d][0], spec[d][0] + spec[d][1]) if d in spec else slice(None)
                    for d in range(g.ndim))] if array else slice_dims(g, spec)  # fmt: skip
    lows, highs = tuple(max(v, 0) for v in lows), tuple(max(v, 0) for v in highs)
    if any(lows) or any(highs):
        g = pad_constant(g, lows, highs) if array else \
            bind(pad, g, low=lows, high=highs, value=0, dtype=g.dtype)  # fmt: skip
    return g


def _transposed(ct: Tensor, sizes, window, strides, dilations, padding):
    """The operand and (non-negative) padding of the transposed window op over the trailing
    `len(window)` dims of `ct` (leading dims pass through unpadded).

    Input position i receives `sum_k ct[(i + low - k * dilation) / stride]` over the offsets
    k where that index is a whole result position. Spreading `ct` by the strides makes every
    such term a plain element, and the sum becomes a stride-1 window op with the same
    dilation over the spread cotangent, padded low by `dilation * (window - 1) - low` and
    high so exactly `sizes` windows fit (negative amounts crop). The window itself must be
    applied flipped (a convolution, not a correlation). None when nothing reaches the input.
    """
    lead = ct.ndim - len(window)
    outs = ct.shape[lead:]
    lows = [0] * lead + [d * (k - 1) - lo for k, d, (lo, _) in zip(window, dilations, padding)]
    highs = [0] * lead + [n + lo - o * s for n, o, s, (lo, _) in zip(sizes, outs, strides, padding)]
    g = _place(_spread(ct, (1,) * lead + tuple(strides)), [min(v, 0) for v in lows],
               [min(v, 0) for v in highs])  # fmt: skip
    if g is None:
        return None, None
    return g, tuple((max(lo, 0), max(hi, 0)) for lo, hi in zip(lows, highs))


# --------------------------------------------------------------------------- conv


def _window_slices(offsets, strides, dilations, out_shape) -> tuple[slice, ...]:
    """The strided slice of a padded operand that window position `offsets` reads."""
    return tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s)
        for k, s, d, o in zip(offsets, strides, dilations, out_shape)
    )


@primitive("conv", "ConvOp")
def conv(x, w, *, strides, dilations, padding, groups):
    """Grouped N-d cross-correlation (the kernel: `conv_kernels.conv_kernel`)."""
    return conv_kernel(x, w, strides=strides, dilations=dilations, padding=padding,
                       groups=groups)  # fmt: skip


def transposed_conv(ct, w, sizes, strides, dilations, padding, groups) -> Tensor:
    """The transposed convolution of `ct` [N, C_out, *outs] to spatial `sizes`: the input
    cotangent of `conv` with weight `w` [C_out, C_in/g, *k], and so PyTorch's conv_transpose
    with that weight. `w` is regrouped to [C_in, C_out/g, *k] (in and out channels swapped
    within each group) and flipped in space. Only the low padding is read: `sizes` says how
    far the result reaches at the high end (a conv's unread tail, conv_transpose's
    output_padding), and positions no window reaches get zeros. Eagerly one op
    (`conv_input_grad`)."""
    return bind(conv_input_grad, ct, w, sizes=tuple(sizes), strides=tuple(strides),
                dilations=tuple(dilations), padding=tuple(tuple(p) for p in padding),
                groups=groups)  # fmt: skip


def _transposed_conv(ct, w, *, sizes, strides, dilations, padding, groups) -> Tensor:
    """`transposed_conv` in primitives: what traced programs get."""
    n = ct.ndim - 2
    c_out, c_in_g, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    g, pads = _transposed(ct, sizes, kernel, strides, dilations, padding)
    if g is None:
        return _zeros((ct.shape[0], c_in_g * groups, *sizes), ct.dtype)
    wt = bind(reshape, w, shape=(groups, c_out // groups, c_in_g, *kernel))
    wt = bind(transpose, wt, permutation=(0, 2, 1, *range(3, 3 + n)))
    wt = bind(reshape, wt, shape=(groups * c_in_g, c_out // groups, *kernel))
    wt = slice_dims(wt, {2 + i: (k - 1, k, -1) for i, k in enumerate(kernel) if k > 1})
    return bind(conv, g, wt, strides=(1,) * n, dilations=tuple(dilations), padding=pads[2:],
                groups=groups)  # fmt: skip


@composite("conv_input_grad", _transposed_conv)
def conv_input_grad(ct, w, *, sizes, strides, dilations, padding, groups):
    """`_transposed_conv` as one eager kernel: its steps on the arrays (`_transposed` takes
    arrays too; views, and the conv kernel its primitives run), so the same bits."""
    n = ct.ndim - 2
    c_out, c_in_g, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    g, pads = _transposed(ct, sizes, kernel, strides, dilations, padding)
    if g is None:
        return np.zeros((ct.shape[0], c_in_g * groups, *sizes), ct.dtype)
    wt = w.reshape(groups, c_out // groups, c_in_g, *kernel).transpose(0, 2, 1, *range(3, 3 + n))
    wt = wt.reshape(groups * c_in_g, c_out // groups, *kernel)[(slice(None), slice(None),
                                                                *(slice(None, None, -1),) * n)]
    return conv.impl(g, wt, strides=(1,) * n, dilations=tuple(dilations), padding=pads[2:],
                     groups=groups)  # fmt: skip


def _weight_grad_geometry(x_shape, w_shape, ct_shape, strides, dilations, padding):
    """How `_conv_weight_grad` reads the input: per spatial dim, the crop of rows no window
    reads (end, or None) and the padding that remains; None when no window reads any row."""
    crops, pads = [], []
    for size, k, o, s, d, (lo, _) in zip(x_shape[2:], w_shape[2:], ct_shape[2:], strides,
                                         dilations, padding):  # fmt: skip
        # Pad exactly to the extent the windows read; rows no window reads are cut.
        hi = (o - 1) * s + d * (k - 1) + 1 - size - lo
        if hi < 0 and size + hi <= 0:
            return None
        crops.append(size + hi if hi < 0 else None)
        pads.append((lo, max(hi, 0)))
    return crops, tuple(pads)


def _conv_weight_grad(ct, x, w, strides, dilations, padding, groups) -> Tensor:
    """`dw[o, c, k] = sum_{n, p} ct[n, o, p] * x_padded[n, c, p * stride + k * dilation]`: a
    convolution of the input (input channels as the batch, batch x groups as channels) with
    the cotangent as the kernel, where stride and dilation swap roles. Eagerly one op
    (`conv_weight_grad`)."""
    n = x.ndim - 2
    batch, c_in_g = x.shape[0], w.shape[1]
    geometry = _weight_grad_geometry(x.shape, w.shape, ct.shape, strides, dilations, padding)
    if geometry is None:
        return _zeros(w.shape, w.dtype)
    crops, pads = geometry
    xs = slice_dims(x, {2 + i: (0, end, 1) for i, end in enumerate(crops) if end is not None})
    spatial = tuple(xs.shape[2:])
    rest = tuple(range(3, 3 + n))
    xt = bind(reshape, xs, shape=(batch, groups, c_in_g, *spatial))
    xt = bind(transpose, xt, permutation=(2, 1, 0, *rest))
    xt = bind(reshape, xt, shape=(c_in_g, groups * batch, *spatial))
    ctt = bind(transpose, ct, permutation=(1, 0, *range(2, 2 + n)))
    r = bind(conv, xt, ctt, strides=tuple(dilations), dilations=tuple(strides),
             padding=pads, groups=groups)  # fmt: skip
    return bind(transpose, r, permutation=(1, 0, *range(2, 2 + n)))


@composite("conv_weight_grad",
           lambda ct, x, w, **p: _conv_weight_grad(ct, x, w, p["strides"], p["dilations"],
                                                   p["padding"], p["groups"]))  # fmt: skip
def conv_weight_grad(ct, x, w, *, strides, dilations, padding, groups):
    """`_conv_weight_grad` as one eager kernel: its steps on the arrays (the views and the
    conv kernel its primitives run), so the same bits without an op per step."""
    n = x.ndim - 2
    geometry = _weight_grad_geometry(x.shape, w.shape, ct.shape, strides, dilations, padding)
    if geometry is None:
        return np.zeros(w.shape, w.dtype)
    crops, pads = geometry
    xs = x[(slice(None), slice(None), *(slice(end) for end in crops))]
    batch, c_in_g, spatial = x.shape[0], w.shape[1], xs.shape[2:]
    xt = xs.reshape(batch, groups, c_in_g, *spatial).transpose(2, 1, 0, *range(3, 3 + n))
    xt = xt.reshape(c_in_g, groups * batch, *spatial)
    r = conv.impl(xt, ct.transpose(1, 0, *range(2, 2 + n)), strides=tuple(dilations),
                  dilations=tuple(strides), padding=pads, groups=groups)  # fmt: skip
    return r.transpose(1, 0, *range(2, 2 + n))


def _conv_vjp(ct, x, w, *, out, strides, dilations, padding, groups):
    """Input and weight cotangents of `conv`, each computed only when that operand needs it."""
    gx = gw = None
    if x.requires_grad:
        gx = transposed_conv(ct, w, x.shape[2:], strides, dilations, padding, groups)
    if w.requires_grad:
        gw = bind(conv_weight_grad, ct, x, w, strides=tuple(strides), dilations=tuple(dilations),
                  padding=tuple(padding), groups=groups)  # fmt: skip
    return gx, gw


conv.vjp = _conv_vjp

# --------------------------------------------------------------------------- reduce_window

_NP_COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _identity(kind: str, dt: np.dtype):
    """The neutral element of `kind` in numpy dtype `dt` (what padding holds)."""
    if kind in ("sum", "prod"):
        return 0 if kind == "sum" else 1
    if dt.kind == "f" or dt.kind == "V":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if kind == "max" else info.max


@primitive("reduce_window", "ReduceWindowOp")
def reduce_window(x, *, kind, window, strides, dilations, padding):
    """Per window position, a strided slice of the identity-padded operand folded into the
    result (16-bit float sums and products accumulate in float32)."""
    wide = kind in ("sum", "prod") and x.dtype.kind in "fV" and x.dtype.itemsize < 4
    xp = x.astype(np.float32) if wide else x
    if any(lo or hi for lo, hi in padding):
        xp = pad_constant(xp, [lo for lo, _ in padding], [hi for _, hi in padding],
                          _identity(kind, x.dtype))  # fmt: skip
    out, views = _window_views(x.shape, tuple(window), tuple(strides), tuple(dilations),
                               tuple(padding))  # fmt: skip
    combine = _NP_COMBINE[kind]
    if kind == "sum":  # from +0, as the compiled reduction starts: -0.0 + -0.0 would stay -0.0
        acc = np.zeros(out, dtype=xp.dtype)
    elif views:  # max, min, prod: from the first offset's elements, as exact as from identity
        acc, views = xp[views[0]].copy(), views[1:]
    else:
        acc = np.full(out, _identity(kind, x.dtype), dtype=xp.dtype)
    for view in views:
        combine(acc, xp[view], out=acc)
    return acc.astype(x.dtype, copy=False)


@functools.lru_cache(maxsize=256)
def _window_views(shape, window, strides, dilations, padding):
    """`reduce_window`'s result shape, and the strided slice of the padded operand that each
    window offset reads (row-major offsets)."""
    out = tuple(window_output_size(*a) for a in zip(shape, window, strides, dilations, padding))
    return out, tuple(_window_slices(k, strides, dilations, out) for k in np.ndindex(*window))


def _inside(k, out_shape, sizes, window_args) -> list[np.ndarray] | None:
    """Per dim, which result positions read a real (unpadded) element at window offset `k`;
    None when no position does (the offset only ever reads padding)."""
    masks = []
    for kk, o, size, s, d, (lo, _) in zip(k, out_shape, sizes, *window_args):
        pos = kk * d + np.arange(o) * s - lo
        masks.append((pos >= 0) & (pos < size))
        if not masks[-1].any():
            return None
    return masks


def _offset_mask(masks: list[np.ndarray], out_shape) -> Tensor | None:
    """The per-dim masks of `_inside` as one bool tensor of the result's shape (None: all)."""
    mask = None
    for dim, inside in enumerate(masks):
        if inside.all():
            continue
        m = bind(broadcast_in_dim, host_tensor(inside), dims=(dim,), shape=tuple(out_shape))
        mask = m if mask is None else bind(and_, mask, m)
    return mask


def _reduce_window_vjp(ct, x, *, out, kind, window, strides, dilations, padding):
    """Cotangent of `reduce_window`: sum spreads each window's cotangent over its elements
    (the transposed window sum); max / min route it to the first element of the window in
    row-major order that attains the result (a NaN counts as attaining it; PyTorch's CPU
    kernel takes the last NaN instead), as PyTorch's pooling backward does; prod gives each
    element the product of the window's other elements, from prefix and suffix products so
    zeros are exact. Padding never receives gradient."""
    sizes = tuple(x.shape)
    if math.prod(ct.shape) == 0:
        return (_zeros(sizes, x.dtype),)
    if kind == "sum":
        g, pads = _transposed(ct, sizes, window, strides, dilations, padding)
        if g is None:
            return (_zeros(sizes, x.dtype),)
        return (bind(reduce_window, g, kind="sum", window=tuple(window), strides=(1,) * x.ndim,
                     dilations=tuple(dilations), padding=pads),)  # fmt: skip
    if kind in ("max", "min") and _tiles(window, strides, dilations, padding):
        return (bind(tiled_extreme_grad, ct, x, out, window=tuple(window)),)
    args = (strides, dilations, padding)
    inside = {k: _inside(k, ct.shape, sizes, args) for k in np.ndindex(*window)}
    offsets = [k for k, masks in inside.items() if masks is not None]

    def scatter(k, c):
        """Place a per-result contribution at the input positions offset `k` reads."""
        lows = [kk * d - lo for kk, d, (lo, _) in zip(k, dilations, padding)]
        highs = [n - low - o * s for n, low, o, s in zip(sizes, lows, ct.shape, strides)]
        return _place(_spread(c, strides), lows, highs)

    if math.prod(window) == 1:  # every window is one element: its cotangent, strided back
        contributions = [(k, ct) for k in offsets]
    else:
        fill = _identity(kind, x.dtype.np_dtype) if kind in ("max", "min") else 1
        low, high = tuple(lo for lo, _ in padding), tuple(hi for _, hi in padding)
        xp = x if not any(low) and not any(high) else bind(
            pad, x, low=low, high=high, value=fill, dtype=x.dtype)  # fmt: skip
        taps = [slice_dims(xp, {i: (kk * d, o, s) for i, (kk, d, o, s)
                                 in enumerate(zip(k, dilations, ct.shape, strides))})
                for k in offsets]  # fmt: skip
        contributions = (
            _routed(ct, out, taps, offsets, inside)
            if kind in ("max", "min")
            else _others(ct, taps, offsets)
        )
    grad = None
    for k, c in contributions:
        placed = scatter(k, c)
        if placed is not None:
            grad = placed if grad is None else bind(add, grad, placed)
    return (_zeros(sizes, x.dtype) if grad is None else grad,)


def _tiles(window, strides, dilations, padding) -> bool:
    """Whether the windows tile the operand: side by side (stride = window), unpadded."""
    return math.prod(window) > 1 and all(
        s == w and (d == 1 or w == 1) and lo == 0 and hi == 0
        for w, s, d, (lo, hi) in zip(window, strides, dilations, padding)
    )


def _tiled_extreme_vjp(ct, x, out, *, window):
    """max / min cotangent over windows that tile `x` (`_tiles`; rows past the last whole
    window get none), routed as `_routed` routes it, in a fixed handful of ops: the windows'
    elements in row-major order along a leading axis, and the first element attaining the
    result (or NaN) as the hit whose running count of hits along that axis is 1.

    The element axis leads, and only dims with a window wider than 1 are split, so every
    op reads whole contiguous blocks of the result's size (eagerly, a trailing axis of a few
    elements costs several times more per element)."""
    n, outs = x.ndim, tuple(ct.shape)
    used = tuple(o * w for o, w in zip(outs, window))
    elems = math.prod(window)
    rows = (elems, *outs)
    split, wins, keep = [], [], []  # the split shape; where its window and result dims are
    for o, w in zip(outs, window):
        if w > 1:
            wins.append(len(split) + 1)
            split += [o, w]
        else:
            split.append(o)
        keep.append(len(split) - 1 - (w > 1))
    to_rows = (*wins, *keep)
    back = [0] * len(split)
    for i, p in enumerate(to_rows):
        back[p] = i
    xs = slice_dims(x, {d: (0, u, 1) for d, u in enumerate(used)})
    v = bind(transpose, bind(reshape, xs, shape=tuple(split)), permutation=to_rows)
    v = bind(reshape, v, shape=rows)
    spread_dims = tuple(range(1, n + 1))
    result = bind(broadcast_in_dim, out, dims=spread_dims, shape=rows)
    hit = bind(or_, bind(compare, v, result, direction="eq"),
               bind(compare, v, v, direction="ne"))  # fmt: skip
    ones = bind(cast, hit, dtype=_dtypes.float32)
    count = bind(reduce_window, ones, kind="sum", window=(elems,) + (1,) * n,
                 strides=(1,) * (n + 1), dilations=(1,) * (n + 1),
                 padding=((elems - 1, 0),) + ((0, 0),) * n)  # fmt: skip
    one = bind(full, value=1, shape=rows, dtype=_dtypes.float32)
    first = bind(and_, hit, bind(compare, count, one, direction="eq"))
    spread = bind(broadcast_in_dim, ct, dims=spread_dims, shape=rows)
    g = bind(select, first, spread, _zeros(rows, ct.dtype))
    g = bind(reshape, g, shape=tuple(split[i] for i in to_rows))
    g = bind(reshape, bind(transpose, g, permutation=tuple(back)), shape=used)
    if used == tuple(x.shape):
        return g
    return bind(pad, g, low=(0,) * n, high=tuple(s - u for s, u in zip(x.shape, used)), value=0,
                dtype=g.dtype)  # fmt: skip


def _routed(ct, out, taps, offsets, inside):
    """Per window offset, the cotangent of the windows whose first extreme element sits there:
    the part not yet routed by an earlier offset, where that offset's element equals the
    result (or is NaN) and is not padding."""
    zero = _zeros(ct.shape, ct.dtype)
    left, result = ct, []
    for i, (k, v) in enumerate(zip(offsets, taps)):
        hit = bind(or_, bind(compare, v, out, direction="eq"),
                   bind(compare, v, v, direction="ne"))  # fmt: skip
        mask = _offset_mask(inside[k], ct.shape)
        if mask is not None:
            hit = bind(and_, hit, mask)
        result.append((k, bind(select, hit, left, zero)))
        if i + 1 < len(offsets):
            left = bind(select, hit, zero, left)
    return result


def _others(ct, taps, offsets):
    """Per window offset, `ct` times the product of the window's other elements (prefix times
    suffix products over the offsets; padding and skipped offsets hold 1)."""
    n = len(taps)
    prefix, suffix = [None] * n, [None] * n
    for i in range(1, n):
        prev = prefix[i - 1]
        prefix[i] = taps[i - 1] if prev is None else bind(mul, prev, taps[i - 1])
        nxt = suffix[n - i]
        suffix[n - 1 - i] = taps[n - i] if nxt is None else bind(mul, taps[n - i], nxt)
    result = []
    for k, pre, suf in zip(offsets, prefix, suffix):
        others = pre if suf is None else suf if pre is None else bind(mul, pre, suf)
        result.append((k, ct if others is None else bind(mul, ct, others)))
    return result


reduce_window.vjp = _reduce_window_vjp

__all__ = ["conv", "reduce_window"]


@composite("tiled_extreme_grad", _tiled_extreme_vjp)
def tiled_extreme_grad(ct, x, out, *, window):
    """`_tiled_extreme_vjp` as one eager kernel: window offset by offset in row-major order,
    the strided view of `x` that the offset reads, and each result's cotangent written at
    the first offset whose element attains it (or is NaN); a selection, so the same bits as
    the composite's. Rows past the last whole window get none."""
    # A NaN element makes its window's result NaN, so without NaN results none is looked for.
    nan = out.dtype.kind not in "biu" and bool((out != out).any())
    grad = np.zeros(x.shape, ct.dtype)
    todo = np.ones(out.shape, np.bool_)  # the results whose element is still to be found
    views = _tile_views(out.shape, tuple(window))
    for i, at in enumerate(views):
        v = x[at]
        hit = v == out
        if nan:
            hit |= v != v
        hit &= todo
        np.copyto(grad[at], ct, where=hit)
        if i + 1 < len(views):
            todo ^= hit
    return grad


@functools.lru_cache(maxsize=256)
def _tile_views(outs, window) -> list[tuple[slice, ...]]:
    """Per window offset (row-major) of windows tiling an operand, the strided slice it reads."""
    return [tuple(slice(kk, o * w, w) for kk, o, w in zip(k, outs, window))
            for k in np.ndindex(*window)]  # fmt: skip
