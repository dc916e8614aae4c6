"""Movement primitives: slice, pad, concat, gather (dialect/movement.py, lowered by
lowering/_movement.py).

Each numpy kernel is registered against its dialect op with its VJP right after it, written
with `bind` on primitives so that inside a trace the backward pass becomes IR like the
forward pass. `slice_dims` and `slice_dim` (one slice) and `scatter_slice` (its adjoint) are the
helpers the ops build on.
"""

from __future__ import annotations

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.primitives.elementwise import cast, compare
from flow.primitives.registry import bind, primitive
from flow.primitives.structured import (
    broadcast_in_dim,
    full,
    iota,
    matmul,
    reshape,
    scalar_attr,
    transpose,
)

# --------------------------------------------------------------------------- helpers


def slice_dims(x: Tensor, spec: dict[int, tuple[int, int, int]]) -> Tensor:
    """One `flow.slice` taking (start, size, stride) on the dims in `spec`, all of the rest;
    `x` itself when that takes everything."""
    start, strides, sizes = [], [], []
    for d, n in enumerate(x.shape):
        s, k, st = spec.get(d, (0, n, 1))
        if k == 0:
            s, st = 0, 1
        start.append(s)
        sizes.append(k)
        strides.append(st)
    if sizes == list(x.shape) and all(s == 0 for s in start) and all(st == 1 for st in strides):
        return x
    return bind(slice_, x, start=tuple(start), strides=tuple(strides), sizes=tuple(sizes))


def slice_dim(x: Tensor, dim: int, start: int, size: int, stride: int = 1) -> Tensor:
    """`size` elements of dim `dim` from `start`, `stride` apart (one slice)."""
    return slice_dims(x, {dim: (start, size, stride)})


def _reshape(x: Tensor, shape) -> Tensor:
    shape = tuple(shape)
    return x if shape == tuple(x.shape) else bind(reshape, x, shape=shape)


def _permute(x: Tensor, perm) -> Tensor:
    perm = tuple(perm)
    return x if perm == tuple(range(x.ndim)) else bind(transpose, x, permutation=perm)


def _cast(x: Tensor, dtype: _dtypes.dtype) -> Tensor:
    return x if x.dtype is dtype else bind(cast, x, dtype=dtype)


def _pad_dim(g: Tensor, d: int, low: int, high: int) -> Tensor:
    """Zero-pad (or, for negative amounts, crop) dim `d` of `g`."""
    if low < 0 or high < 0:
        n = g.shape[d]
        start, stop = max(-low, 0), n - max(-high, 0)
        g = slice_dim(g, d, start, stop - start)
        low, high = max(low, 0), max(high, 0)
    if low == 0 and high == 0:
        return g
    lows, highs = [0] * g.ndim, [0] * g.ndim
    lows[d], highs[d] = low, high
    return bind(pad, g, low=tuple(lows), high=tuple(highs), value=0, dtype=g.dtype)


# --------------------------------------------------------------------------- slice


@primitive("slice", "SliceOp", quiet=True)
def slice_(x, *, start, strides, sizes):
    index = []
    for s, st, k in zip(start, strides, sizes):
        stop = s + k * st
        index.append(slice(0, 0) if k == 0 else slice(s, None if stop < 0 else stop, st))
    return x[tuple(index)]


def scatter_slice(ct: Tensor, shape, *, start, strides, sizes) -> Tensor:
    """Zeros of `shape` holding `ct` where `slice_(start, strides, sizes)` reads (the slice's
    adjoint), built one dim at a time from pads and reshapes: no arithmetic, so an inf or NaN
    stays in its own entry."""
    shape = tuple(shape)
    if any(k == 0 for k in sizes):
        return bind(full, value=0, shape=shape, dtype=ct.dtype)
    g = ct
    for d, (s, st, k) in enumerate(zip(start, strides, sizes)):
        if st < 0:  # reverse, so positions run upward from the last element read
            g = slice_dim(g, d, k - 1, k, -1)
            s, st = s + (k - 1) * st, -st
        if st > 1:  # spread the k values st apart: (.., k, 1, ..) -> pad -> (.., k*st, ..)
            now = list(g.shape)
            g = _reshape(g, (*now[: d + 1], 1, *now[d + 1 :]))
            g = _pad_dim(g, d + 1, 0, st - 1)
            g = _reshape(g, (*now[:d], k * st, *now[d + 1 :]))
            g = slice_dim(g, d, 0, (k - 1) * st + 1)
        g = _pad_dim(g, d, s, shape[d] - s - g.shape[d])
    return g


def _slice_vjp(ct, x, out, *, start, strides, sizes):
    """Scatter the slice's cotangent back into zeros of `x`'s shape."""
    return (scatter_slice(ct, x.shape, start=start, strides=strides, sizes=sizes),)


slice_.vjp = _slice_vjp

# --------------------------------------------------------------------------- pad


@primitive(
    "pad",
    "PadOp",
    to_ir=lambda p: {
        "low": p["low"],
        "high": p["high"],
        "value": scalar_attr(p["value"], p["dtype"]),
    },
)
def pad(x, *, low, high, value, dtype):
    return pad_constant(x, low, high, np.array(value).astype(dtype.np_dtype))


def pad_constant(x: np.ndarray, low, high, fill=0) -> np.ndarray:
    """`np.pad(x, zip(low, high), constant_values=fill)` for non-negative amounts, without
    np.pad's per-call argument handling (tens of microseconds, on every pad and conv)."""
    out = np.full([n + lo + hi for n, lo, hi in zip(x.shape, low, high)], fill, dtype=x.dtype)
    out[tuple(slice(lo, lo + n) for n, lo in zip(x.shape, low))] = x
    return out


def _pad_vjp(ct, x, out, *, low, high, value, dtype):
    g = ct
    for d, lo in enumerate(low):
        g = slice_dim(g, d, lo, x.shape[d])
    return (g,)


pad.vjp = _pad_vjp

# --------------------------------------------------------------------------- concat


@primitive("concat", "ConcatOp", quiet=True)
def concat(*xs, dim):
    return np.concatenate(xs, axis=dim)


def _concat_vjp(ct, *xs, out, dim):
    grads, offset = [], 0
    for x in xs:
        grads.append(slice_dim(ct, dim, offset, x.shape[dim]))
        offset += x.shape[dim]
    return tuple(grads)


concat.vjp = _concat_vjp

# --------------------------------------------------------------------------- gather


@primitive("gather", "GatherOp")
def gather(x, index, *, dim):
    """`torch.gather`; an index outside `[0, size)` raises (compiled code checks it after the
    call, see ops/index_checks.py: the gather itself clamps)."""
    n = x.shape[dim]
    bad = index[(index < 0) | (index >= n)]
    if bad.size:
        raise op_error(
            "gather",
            f"index {bad.reshape(-1)[0]} is out of bounds for dim {dim} with size {n}",
            cls=IndexError,
        )
    region = tuple(slice(None) if d == dim else slice(0, m) for d, m in enumerate(index.shape))
    return np.take_along_axis(x[region], index.astype(np.intp), axis=dim)


def _gather_vjp(ct, x, index, out, *, dim):
    """Scatter-add of the cotangent: a one-hot comparison of `index` with every position of
    `x` along `dim`, contracted with the cotangent (memory: index elements x size of `dim`)."""
    n, nd = x.shape[dim], index.ndim
    to_last = [d for d in range(nd) if d != dim] + [dim]
    idx, g = _permute(index, to_last), _permute(ct, to_last)  # [..., I]
    hits_shape = (*idx.shape, n)
    positions = bind(iota, dim=len(hits_shape) - 1, shape=hits_shape, dtype=_dtypes.int64)
    idx = bind(broadcast_in_dim, _cast(idx, _dtypes.int64), dims=tuple(range(idx.ndim)),
               shape=hits_shape)  # fmt: skip
    onehot = _cast(bind(compare, idx, positions, direction="eq"), g.dtype)  # [..., I, n]
    row = _reshape(g, (*g.shape[:-1], 1, g.shape[-1]))
    summed = _reshape(bind(matmul, row, onehot), (*g.shape[:-1], n))  # [..., n]
    grad = _permute(summed, [*range(dim), nd - 1, *range(dim, nd - 1)])
    for d in range(x.ndim):  # index may cover only a leading block of the other dims
        if d != dim and grad.shape[d] != x.shape[d]:
            grad = _pad_dim(grad, d, 0, x.shape[d] - grad.shape[d])
    return grad, None


gather.vjp = _gather_vjp

__all__ = ["concat", "gather", "pad", "slice_"]
