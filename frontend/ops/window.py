"""flow's window primitives (numpy kernel + dialect op) and the public ops built on them.

Two primitives, `conv` and `reduce_window`, carry convolution and pooling;
everything else is composed from them and existing ops, with PyTorch's
argument names, defaults, output-size rules and validation. Average pooling
divides a windowed sum by a divisor computed on the host per spatial dim (so
`ceil_mode` windows that hang off the end and `count_include_pad` follow
PyTorch exactly). Adaptive pooling and interpolation are separable: per
spatial dim, a host-built matrix holding PyTorch's window or interpolation
weights is applied with a matmul, unless a cheaper exact form exists (uniform
windows via `reduce_window`, integer nearest-neighbour factors via broadcast
or strided windows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from flow import dialect as fd
from flow.dialect.window import window_output_size

from flow.core import dtypes as _dtypes
from flow import primitives as P
from flow.ops.movement import _slice_dims, pad_
from flow.ops.basic import _as_tensor, broadcast_to, div, full, matmul, mul, reshape, tensor
from flow.primitives.registry import bind, primitive
from flow.core.errors import op_error
from flow.core.tensor import Tensor

# --------------------------------------------------------------------------- primitives


def _window_slices(offsets, strides, dilations, out_shape) -> tuple[slice, ...]:
    """The strided slice of a padded operand that window position `offsets` reads."""
    return tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s)
        for k, s, d, o in zip(offsets, strides, dilations, out_shape)
    )


@primitive("conv", fd.ConvOp)
def conv(x, w, *, strides, dilations, padding, groups):
    """Grouped N-d cross-correlation: per kernel tap, a strided slice contracted over channels."""
    n = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0), *padding])
    out = [window_output_size(x.shape[2 + i], w.shape[2 + i], strides[i], dilations[i],
                              padding[i]) for i in range(n)]  # fmt: skip
    batch, c_in, c_out = x.shape[0], x.shape[1], w.shape[0]
    xg = xp.reshape(batch, groups, c_in // groups, *xp.shape[2:])
    wg = w.reshape(groups, c_out // groups, c_in // groups, *w.shape[2:])
    # 16-bit floats accumulate in float32, as PyTorch does on the CPU.
    acc_dt = np.float32 if x.dtype.kind in "fV" and x.dtype.itemsize < 4 else x.dtype
    xg, wg = xg.astype(acc_dt, copy=False), wg.astype(acc_dt, copy=False)
    acc = np.zeros((batch, groups, c_out // groups, *out), dtype=acc_dt)
    for k in np.ndindex(*w.shape[2:]):
        patch = xg[(..., *_window_slices(k, strides, dilations, out))]
        acc += np.einsum("ngc...,goc->ngo...", patch, wg[(..., *k)])
    return acc.reshape(batch, c_out, *out).astype(x.dtype)


_NP_COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def _identity(kind: str, dt: np.dtype):
    """The neutral element of `kind` in numpy dtype `dt` (what padding holds)."""
    if kind in ("sum", "prod"):
        return 0 if kind == "sum" else 1
    if dt.kind == "f" or dt.kind == "V":
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if kind == "max" else info.max


@primitive("reduce_window", fd.ReduceWindowOp)
def reduce_window(x, *, kind, window, strides, dilations, padding):
    """Per window position, a strided slice of the identity-padded operand folded into the
    result (16-bit float sums and products accumulate in float32)."""
    wide = kind in ("sum", "prod") and x.dtype.kind in "fV" and x.dtype.itemsize < 4
    xp = np.pad(x.astype(np.float32) if wide else x, padding,
                constant_values=_identity(kind, x.dtype))  # fmt: skip
    out = [window_output_size(*a) for a in zip(x.shape, window, strides, dilations, padding)]
    acc = np.full(out, _identity(kind, x.dtype), dtype=xp.dtype)
    for k in np.ndindex(*window):
        acc = _NP_COMBINE[kind](acc, xp[_window_slices(k, strides, dilations, out)])
    return acc.astype(x.dtype, copy=False)


# --------------------------------------------------------------------------- argument checks


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _ntuple(op: str, name: str, value, n: int, low: int) -> tuple[int, ...]:
    """An int or a sequence of 1 or `n` ints, each >= `low`, as `n` ints (PyTorch's expansion)."""
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if not values or not all(_is_int(v) for v in values):
        raise op_error(op, f"expected {name} to be an int or a tuple of {n} ints, got {value!r}",
                       cls=TypeError)  # fmt: skip
    if len(values) not in (1, n):
        raise op_error(op, f"expected {name} to be an int or a tuple of {n} ints, got {value!r} "
                           f"({len(values)} values)")  # fmt: skip
    out = tuple(int(v) for v in values) * (n if len(values) == 1 else 1)
    if any(v < low for v in out):
        raise op_error(op, f"expected {name} >= {low}, got {value!r}")
    return out


def _spatial_input(op: str, input, n: int, *, float_only: bool) -> Tensor:
    """The input as a tensor of rank n + 1 (unbatched) or n + 2, with non-empty non-batch dims."""
    x = _as_tensor(input)
    if x.ndim not in (n + 1, n + 2):
        raise op_error(op, f"expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, "
                           f"got input of shape {list(x.shape)}")  # fmt: skip
    if any(s == 0 for s in x.shape[-(n + 1) :]):
        raise op_error(op, "expected non-zero sizes for the non-batch dims of the input, "
                           f"got input of shape {list(x.shape)}")  # fmt: skip
    if x.dtype is _dtypes.bool_ or (float_only and not x.dtype.is_floating_point):
        kind = "floating-point" if float_only else "numeric"
        raise op_error(op, f"expected a {kind} input, got {x.dtype!r}", cls=TypeError)
    return x


def _host_tensor(arr: np.ndarray) -> Tensor:
    """A host-computed array as a flow tensor: a small one is an IR constant, a larger one a
    captured tensor (a function argument inside `flow.jit`), so the IR stays small."""
    if arr.size <= 64:
        return bind(P.constant, array=arr)
    from flow.distributed.global_tensor import mark_constant

    return mark_constant(tensor(arr))  # the same on every rank: broadcast next to global ones


# --------------------------------------------------------------------------- convolution


def _conv_padding(
    op: str, padding, n: int, stride, dilation, kernel
) -> tuple[tuple[int, int], ...]:
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise op_error(op, f"padding='same' is not supported for strided convolutions, "
                                   f"got stride={list(stride)}")  # fmt: skip
            # The extra element of an odd total goes at the end, as in PyTorch.
            totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
            return tuple((t // 2, t - t // 2) for t in totals)
        raise op_error(op, f"expected padding to be 'valid', 'same', an int or a tuple of {n} "
                           f"ints, got {padding!r}")  # fmt: skip
    pads = _ntuple(op, "padding", padding, n, 0)
    return tuple((p, p) for p in pads)


def _conv(op: str, n: int, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x = _spatial_input(op, input, n, float_only=True)
    w = _as_tensor(weight)
    kdims = ", ".join("kD kH kW".split()[3 - n :])
    if w.ndim != n + 2:
        raise op_error(op, f"expected a {n + 2}-D weight [out_channels, in_channels / groups, "
                           f"{kdims}], got weight of shape {list(w.shape)}")  # fmt: skip
    if w.dtype is not x.dtype:
        raise op_error(op, f"expected input and weight of one dtype, got {x.dtype!r} and "
                           f"{w.dtype!r}", cls=TypeError)  # fmt: skip
    if not _is_int(groups):
        raise op_error(op, f"expected groups to be an int, got {groups!r}", cls=TypeError)
    if groups < 1:
        raise op_error(op, f"expected groups >= 1, got {groups}")
    stride = _ntuple(op, "stride", stride, n, 1)
    dilation = _ntuple(op, "dilation", dilation, n, 1)
    kernel = tuple(w.shape[2:])
    pads = _conv_padding(op, padding, n, stride, dilation, kernel)
    in_shape = list(x.shape)
    unbatched = x.ndim == n + 1
    if unbatched:
        x = reshape(x, 1, *x.shape)
    c_out = w.shape[0]
    if c_out % groups:
        raise op_error(op, f"expected weight dim 0 (out_channels = {c_out}) to be divisible by "
                           f"groups={groups}, got weight of shape {list(w.shape)}")  # fmt: skip
    if x.shape[1] != w.shape[1] * groups:
        raise op_error(op, f"expected input with {w.shape[1] * groups} channels (weight of shape "
                           f"{list(w.shape)}, groups={groups}), got input of shape "
                           f"{in_shape} with {x.shape[1]} channels")  # fmt: skip
    padded = [s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads)]
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    if any(e > p for e, p in zip(extent, padded)):
        raise op_error(op, f"padded input size per channel ({' x '.join(map(str, padded))}) is "
                           f"smaller than the dilated kernel size "
                           f"({' x '.join(map(str, extent))}): the kernel size can't be greater "
                           "than the padded input size")  # fmt: skip
    out = bind(conv, x, w, strides=stride, dilations=dilation, padding=pads, groups=groups)
    if bias is not None:
        b = _as_tensor(bias)
        if tuple(b.shape) != (c_out,):
            raise op_error(op, f"expected bias of shape [{c_out}], got {list(b.shape)}")
        if b.dtype is not x.dtype:
            raise op_error(op, f"expected bias of dtype {x.dtype!r}, got {b.dtype!r}",
                           cls=TypeError)  # fmt: skip
        out = out + reshape(b, 1, c_out, *(1,) * n)
    return reshape(out, *out.shape[1:]) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution of (N, C_in, L) or (C_in, L) with (C_out, C_in / groups, kL)."""
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """2-D convolution of (N, C_in, H, W) or (C_in, H, W) with (C_out, C_in / groups, kH, kW)."""
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """3-D convolution of (N, C_in, D, H, W) or unbatched input with (C_out, C_in / groups, kD,
    kH, kW)."""
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


# --------------------------------------------------------------------------- pooling


def _pool_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size; in ceil mode the last window must start inside the
    input or its left padding."""
    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool(op: str, n: int, kind: str, x: Tensor, kernel_size, stride, padding, dilation,
          ceil_mode: bool) -> tuple[Tensor, list[tuple[int, int, int, int, int]]]:  # fmt: skip
    """The windowed `kind` reduction of a checked input, and per spatial dim (size, out, k, s, p)."""
    k = _ntuple(op, "kernel_size", kernel_size, n, 1)
    s = k if stride is None or stride == () or stride == [] else _ntuple(op, "stride", stride, n, 1)
    p = _ntuple(op, "padding", padding, n, 0)
    d = _ntuple(op, "dilation", dilation, n, 1)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise op_error(op, f"pad should be at most half of kernel size, but got padding={list(p)} "
                           f"and kernel_size={list(k)}")  # fmt: skip
    sizes = x.shape[-n:]
    outs = [_pool_size(*a, ceil_mode) for a in zip(sizes, k, s, p, d)]
    if any(o < 1 for o in outs):
        shown = "x".join(map(str, x.shape[-n - 1 :]))
        raise op_error(op, f"given input size ({shown}), the calculated output size "
                           f"({'x'.join(map(str, [x.shape[-n - 1], *outs]))}) is too small")  # fmt: skip
    # High padding so exactly `out` windows fit: more than `p` when a ceil-mode window hangs off.
    pads = [(pi, max(pi, (o - 1) * si + di * (ki - 1) + 1 - size - pi))
            for size, o, ki, si, pi, di in zip(sizes, outs, k, s, p, d)]  # fmt: skip
    lead = x.ndim - n
    y = bind(reduce_window, x, kind=kind, window=(1,) * lead + k, strides=(1,) * lead + s,
             dilations=(1,) * lead + d, padding=((0, 0),) * lead + tuple(pads))  # fmt: skip
    return y, list(zip(sizes, outs, k, s, p))


def _max_pool(op: str, n: int, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices) -> Tensor:  # fmt: skip
    if return_indices:
        raise op_error(op, "return_indices=True is not supported; the pooled values are "
                           "available with return_indices=False", cls=NotImplementedError)  # fmt: skip
    x = _spatial_input(op, input, n, float_only=False)
    return _pool(op, n, "max", x, kernel_size, stride, padding, dilation, ceil_mode)[0]


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False) -> Tensor:  # fmt: skip
    """1-D max pooling of (N, C, L) or (C, L); padding never wins (it is -inf)."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False) -> Tensor:  # fmt: skip
    """2-D max pooling of (N, C, H, W) or (C, H, W)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False) -> Tensor:  # fmt: skip
    """3-D max pooling of (N, C, D, H, W) or (C, D, H, W)."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def _avg_divisor(size: int, out: int, k: int, s: int, p: int, include_pad: bool) -> np.ndarray:
    """PyTorch's per-window element count along one dim: the window clipped to the padded
    input (count_include_pad) or to the input itself."""
    start = np.arange(out) * s - p
    end = np.minimum(start + k, size + p)
    if include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


def _scaled(x: Tensor, divisors: list[np.ndarray]) -> Tensor:
    """`x` divided by the outer product of per-trailing-dim divisors (exact small integers),
    formed in the graph from 1-D constants so the IR stays small."""
    n = len(divisors)
    const = 1
    divisor: Tensor | None = None
    for i, dv in enumerate(divisors):
        if np.all(dv == dv[0]):
            const *= int(dv[0])
            continue
        shape = [1] * n
        shape[i] = dv.shape[0]
        piece = _host_tensor(dv.astype(x.dtype.np_dtype).reshape(shape))
        divisor = piece if divisor is None else mul(divisor, piece)
    if divisor is None:
        return x if const == 1 else div(x, const)
    return div(x, divisor if const == 1 else mul(divisor, const))


def _avg_pool(op: str, n: int, input, kernel_size, stride, padding, ceil_mode,
              count_include_pad, divisor_override) -> Tensor:  # fmt: skip
    x = _spatial_input(op, input, n, float_only=True)
    if divisor_override is not None:
        if not _is_int(divisor_override):
            raise op_error(op, f"expected divisor_override to be an int, got "
                               f"{divisor_override!r}", cls=TypeError)  # fmt: skip
        if divisor_override == 0:
            raise op_error(op, "divisor_override must be non-zero, got 0")
    kernel = _ntuple(op, "kernel_size", kernel_size, n, 1)
    if n == 3 and any(s < k for s, k in zip(x.shape[-3:], kernel)):
        # PyTorch's avg_pool3d (only) rejects inputs smaller than the kernel before padding.
        raise op_error(op, f"input image (T: {x.shape[-3]} H: {x.shape[-2]} W: {x.shape[-1]}) "
                           f"smaller than kernel size (kT: {kernel[0]} kH: {kernel[1]} "
                           f"kW: {kernel[2]})")  # fmt: skip
    total, dims = _pool(op, n, "sum", x, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        return div(total, int(divisor_override))
    return _scaled(total, [_avg_divisor(*d, count_include_pad) for d in dims])


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True) -> Tensor:  # fmt: skip
    """1-D average pooling of (N, C, L) or (C, L)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)  # fmt: skip


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None) -> Tensor:  # fmt: skip
    """2-D average pooling of (N, C, H, W) or (C, H, W)."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)  # fmt: skip


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None) -> Tensor:  # fmt: skip
    """3-D average pooling of (N, C, D, H, W) or (C, D, H, W)."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)  # fmt: skip


# --------------------------------------------------------------------------- separable maps


def _along(x: Tensor, axis: int, m: np.ndarray) -> Tensor:
    """Contract dim `axis` of `x` (size L) with the host matrix `m` of shape (O, L)."""
    shape = list(x.shape)
    lead = math.prod(shape[:axis])
    after = math.prod(shape[axis + 1 :])
    m = m.astype(x.dtype.np_dtype)
    if after == 1:
        y = matmul(reshape(x, lead, shape[axis]), _host_tensor(np.ascontiguousarray(m.T)))
    else:
        y = matmul(_host_tensor(m), reshape(x, lead, shape[axis], after))
    return reshape(y, *shape[:axis], m.shape[0], *shape[axis + 1 :])


def _repeat(x: Tensor, axis: int, factor: int) -> Tensor:
    """Each element along `axis` repeated `factor` times (nearest upsampling by an integer)."""
    shape = list(x.shape)
    y = reshape(x, *shape[: axis + 1], 1, *shape[axis + 1 :])
    y = broadcast_to(y, (*shape[: axis + 1], factor, *shape[axis + 1 :]))
    return reshape(y, *shape[:axis], shape[axis] * factor, *shape[axis + 1 :])


def _take_strided(x: Tensor, axis: int, step: int) -> Tensor:
    """Elements `0, step, 2 * step, ...` along `axis` (a window of one with a stride)."""
    ones = (1,) * x.ndim
    strides = tuple(step if i == axis else 1 for i in range(x.ndim))
    return bind(reduce_window, x, kind="max", window=ones, strides=strides, dilations=ones,
                padding=((0, 0),) * x.ndim)  # fmt: skip


def _gather(x: Tensor, axis: int, index: np.ndarray) -> Tensor:
    """`x` indexed along `axis` by a host index vector, by the cheapest exact route."""
    size, out = x.shape[axis], index.shape[0]
    o = np.arange(out)
    if out == size and np.array_equal(index, o):
        return x
    if out % size == 0 and np.array_equal(index, o // (out // size)):
        return _repeat(x, axis, out // size)
    step = int(index[1] - index[0]) if out > 1 else size
    if step > 0 and (size - 1) // step + 1 == out and np.array_equal(index, o * step):
        return _take_strided(x, axis, step)
    onehot = np.zeros((out, size), dtype=x.dtype.np_dtype)
    onehot[o, index] = 1
    return _along(x, axis, onehot)


def _window_bounds(size: int, out: int) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive pooling windows: start = floor(i * L / out), end = ceil((i + 1) * L / out)."""
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def _adaptive_avg(x: Tensor, n: int, outs: Sequence[int]) -> Tensor:
    """Average over PyTorch's adaptive windows of the last `n` dims of `x`."""
    lead = x.ndim - n
    sizes = x.shape[lead:]
    if any(o == 0 for o in outs):
        return full((*x.shape[:lead], *outs), 0, x.dtype)
    # Dims split into equal windows are one reduce_window; the others take a 0/1 matmul.
    window = [s // o if s % o == 0 else 1 for s, o in zip(sizes, outs)]
    y = x
    if any(w > 1 for w in window):
        ones = (1,) * lead
        y = bind(reduce_window, y, kind="sum", window=ones + tuple(window),
                 strides=ones + tuple(window), dilations=(1,) * x.ndim,
                 padding=((0, 0),) * x.ndim)  # fmt: skip
    counts = []
    for i, (s, o) in enumerate(zip(sizes, outs)):
        start, end = _window_bounds(s, o)
        counts.append(end - start)
        if s % o:
            m = (np.arange(s) >= start[:, None]) & (np.arange(s) < end[:, None])
            y = _along(y, lead + i, m)
    return _scaled(y, counts)


def _adaptive(op: str, n: int, input, output_size) -> Tensor:
    x = _spatial_input(op, input, n, float_only=True)
    sizes = output_size if isinstance(output_size, (tuple, list)) else [output_size]
    if len(sizes) == 1:
        sizes = list(sizes) * n
    if len(sizes) != n or not all(s is None or _is_int(s) for s in sizes):
        raise op_error(op, f"expected output_size to be an int or a tuple of {n} ints or None, "
                           f"got {output_size!r}",
                       cls=TypeError if len(sizes) == n else ValueError)  # fmt: skip
    outs = [x.shape[x.ndim - n + i] if s is None else int(s) for i, s in enumerate(sizes)]
    if any(o < 0 for o in outs):
        raise op_error(op, f"expected output_size >= 0, got {output_size!r}")
    return _adaptive_avg(x, n, outs)


def adaptive_avg_pool1d(input, output_size) -> Tensor:
    """Average pooling of (N, C, L) or (C, L) to length `output_size` over PyTorch's adaptive
    windows (they overlap when L is not a multiple of the output size)."""
    return _adaptive("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size) -> Tensor:
    """Adaptive average pooling of (N, C, H, W) or (C, H, W); `None` keeps a dim's size."""
    return _adaptive("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input, output_size) -> Tensor:
    """Adaptive average pooling of (N, C, D, H, W) or (C, D, H, W); `None` keeps a dim."""
    return _adaptive("adaptive_avg_pool3d", 3, input, output_size)


# --------------------------------------------------------------------------- interpolation


def _inverse_scale(size: int, out: int, scale: float | None, dt) -> np.floating:
    """PyTorch's source/destination ratio: 1 / scale_factor when given, else in / out."""
    if scale is not None and scale > 0:
        return dt(1.0 / scale)
    return dt(size) / dt(out)


def _nearest_index(size: int, out: int, scale: float | None, mode: str, n: int, dt) -> np.ndarray:
    """Source index per output index as PyTorch's CPU kernels compute it: `floor(i * ratio)`,
    or for nearest-exact `floor(max(ratio * (i + 0.5) - 0.5, 0) + 0.5)`, in dtype `dt` with
    the final rounding in float32. PyTorch's 2-D nearest kernel copies when out == in and
    halves the index when out == 2 * in, whatever the scale factor; its 1-D and 3-D ones
    do not, and neither do we there."""
    exact = mode == "nearest-exact"
    if not exact and n == 2 and out in (size, 2 * size):
        return np.arange(out) // (out // size)
    o = np.arange(out).astype(dt)
    ratio = _inverse_scale(size, out, scale, dt)
    if exact:
        real = np.maximum(ratio * (o + dt(0.5)) - dt(0.5), dt(0))
        src = np.floor((real.astype(np.float64) + 0.5).astype(np.float32))
    else:
        src = np.floor((ratio * o).astype(np.float32))
    return np.minimum(src.astype(np.int64), size - 1)


def _source_coords(size, out, scale, align_corners, cubic, dt) -> np.ndarray:
    """PyTorch's `area_pixel_compute_source_index` for every output index, in dtype `dt`."""
    o = np.arange(out).astype(dt)
    if align_corners:
        ratio = dt(size - 1) / dt(out - 1) if out > 1 else dt(0)
        return (ratio * o).astype(dt)
    src = (_inverse_scale(size, out, scale, dt) * (o + dt(0.5)) - dt(0.5)).astype(dt)
    return src if cubic else np.maximum(src, dt(0))


def _guard(src: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer part (at most size - 1) and fraction (in [0, 1]) of source coordinates."""
    i0 = np.minimum(np.floor(src).astype(np.int64), size - 1)
    frac = np.clip(src - i0.astype(src.dtype), 0, 1).astype(src.dtype)
    return i0, frac


def _linear_matrix(size, out, scale, align_corners, dt) -> np.ndarray:
    m = np.zeros((out, size), dt)
    if out == size:
        np.fill_diagonal(m, 1)
        return m
    i0, lam1 = _guard(_source_coords(size, out, scale, align_corners, False, dt), size)
    i1 = np.where(i0 < size - 1, i0 + 1, i0)
    o = np.arange(out)
    np.add.at(m, (o, i0), (dt(1) - lam1).astype(dt))
    np.add.at(m, (o, i1), lam1)
    return m


def _cubic_matrix(size, out, scale, align_corners, dt) -> np.ndarray:
    """Keys' cubic convolution (A = -0.75) with clamped source indices, as PyTorch."""
    a = dt(-0.75)
    i0, t = _guard(_source_coords(size, out, scale, align_corners, True, dt), size)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    one = dt(1)
    coeffs = [far(t + one), near(t), near(one - t), far(one - t + one)]
    m = np.zeros((out, size), dt)
    o = np.arange(out)
    for j, c in enumerate(coeffs):
        np.add.at(m, (o, np.clip(i0 - 1 + j, 0, size - 1)), c.astype(dt))
    return m


_MODE_RANKS = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")


def _interp_sizes(op, x, n, size, scale_factor, recompute_scale_factor, allow_empty):
    """Output sizes and the scales the coordinate maps use (None: in / out)."""
    spatial = list(x.shape[2:])
    if (size is None) == (scale_factor is None):
        which = "either" if size is None else "only one of"
        raise op_error(op, f"{which} size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise op_error(op, "recompute_scale_factor is not meaningful with an explicit size")
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * n
        if len(sizes) != n:
            raise op_error(op, f"expected size with {n} entries to match the input's spatial "
                               f"dims {spatial}, got size={list(sizes)}")  # fmt: skip
        if not all(_is_int(s) for s in sizes):
            raise op_error(op, f"expected size to be ints, got {size!r}", cls=TypeError)
        outs, scales = [int(s) for s in sizes], [None] * n
    else:
        factors = (
            list(scale_factor) if isinstance(scale_factor, (tuple, list)) else [scale_factor] * n
        )
        if len(factors) != n:
            raise op_error(op, f"expected scale_factor with {n} entries to match the input's "
                               f"spatial dims {spatial}, got scale_factor={factors}")  # fmt: skip
        if not all(isinstance(f, (int, float, np.number)) and not isinstance(f, bool)
                   for f in factors):  # fmt: skip
            raise op_error(op, f"expected scale_factor to be numbers, got {scale_factor!r}",
                           cls=TypeError)  # fmt: skip
        outs = [math.floor(float(s) * float(f)) for s, f in zip(spatial, factors)]
        scales = [None] * n if recompute_scale_factor else [float(f) for f in factors]
    if any(o < 0 or (o == 0 and not allow_empty) for o in outs):
        raise op_error(op, f"input and output sizes should be greater than 0, got input "
                           f"{spatial} and output {outs}")  # fmt: skip
    return outs, scales


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False) -> Tensor:  # fmt: skip
    """Resize the spatial dims of (N, C, *spatial) with PyTorch's coordinate rules.

    Modes: nearest, nearest-exact, linear (3-D), bilinear / bicubic (4-D),
    trilinear (5-D) and area (adaptive average pooling). Output sizes from
    `scale_factor` are `floor(in * scale_factor)`, and the coordinate maps use
    `1 / scale_factor` unless `recompute_scale_factor` is set, as in PyTorch.
    """
    op = "interpolate"
    x = _as_tensor(input)
    if mode not in _MODES:
        raise op_error(op, f"expected mode to be one of {' | '.join(_MODES)}, got {mode!r}")
    if x.ndim not in (3, 4, 5):
        raise op_error(op, f"expected a 3-D, 4-D or 5-D input (N, C, spatial...), got input of "
                           f"shape {list(x.shape)}")  # fmt: skip
    n = x.ndim - 2
    linear = mode in _MODE_RANKS
    if align_corners is not None and not linear:
        raise op_error(op, "align_corners option can only be set with the interpolating modes: "
                           f"linear | bilinear | bicubic | trilinear, got mode={mode!r}")  # fmt: skip
    if linear and _MODE_RANKS[mode] != x.ndim:
        raise op_error(op, f"got {x.ndim}-D input, but {mode} mode needs "
                           f"{_MODE_RANKS[mode]}-D input")  # fmt: skip
    if antialias:
        raise op_error(op, "antialias=True is not supported", cls=NotImplementedError)
    x = _spatial_input(op, x, n, float_only=mode != "nearest" and mode != "nearest-exact")
    # Area mode is adaptive average pooling, which (like PyTorch's) allows empty outputs.
    outs, scales = _interp_sizes(op, x, n, size, scale_factor, recompute_scale_factor,
                                 mode == "area")  # fmt: skip
    if mode == "area":
        return _adaptive_avg(x, n, outs)
    opmath = np.float64 if x.dtype is _dtypes.float64 else np.float32
    y = x
    for i, (s, o, sc) in enumerate(zip(x.shape[2:], outs, scales)):
        if not linear:
            y = _gather(y, 2 + i, _nearest_index(s, o, sc, mode, n, opmath))
            continue
        build = _cubic_matrix if mode == "bicubic" else _linear_matrix
        m = build(s, o, sc, bool(align_corners), opmath)
        if not (o == s and np.array_equal(m, np.eye(s))):
            y = _along(y, 2 + i, m)
    return y


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None) -> Tensor:
    """`interpolate` under its older name."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None) -> Tensor:
    """Nearest-neighbour upsampling (`interpolate(mode="nearest")`)."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None) -> Tensor:
    """Bilinear upsampling with `align_corners=True`, as PyTorch's deprecated helper does."""
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


TENSOR_METHODS: dict = {}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__: list[str] = [
    "conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d",
    "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
    "adaptive_avg_pool3d", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
]  # fmt: skip


# --------------------------------------------------------------------------- VJP rules
#
# Both rules are written with primitives (conv, reduce_window, slice, pad,
# reshape, transpose, select), so inside `flow.jit` / `nn.Graph` the backward
# pass is traced into IR like the forward pass. They share one picture of a
# window op: result position p reads padded position `p * stride + k * dilation`
# at window offset k, i.e. unpadded position `p * stride + k * dilation - low`.


def _zeros(shape, dtype) -> Tensor:
    return bind(P.full, value=0, shape=tuple(shape), dtype=dtype)


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
    g = bind(P.reshape, g, shape=tuple(split))
    g = bind(pad_, g, low=(0,) * len(highs), high=tuple(highs), value=0, dtype=g.dtype)
    return bind(P.reshape, g, shape=tuple(merged))


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
    if spec:
        g = _slice_dims(g, spec)
    lows, highs = tuple(max(v, 0) for v in lows), tuple(max(v, 0) for v in highs)
    if any(lows) or any(highs):
        g = bind(pad_, g, low=lows, high=highs, value=0, dtype=g.dtype)
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


def _conv_input_grad(ct, w, sizes, strides, dilations, padding, groups) -> Tensor:
    """The transposed convolution of `ct`: weight [C_out, C_in/g, *k] regrouped to
    [C_in, C_out/g, *k] (in and out channels swapped within each group), flipped in space."""
    n = ct.ndim - 2
    c_out, c_in_g, kernel = w.shape[0], w.shape[1], tuple(w.shape[2:])
    g, pads = _transposed(ct, sizes, kernel, strides, dilations, padding)
    if g is None:
        return _zeros((ct.shape[0], c_in_g * groups, *sizes), ct.dtype)
    wt = bind(P.reshape, w, shape=(groups, c_out // groups, c_in_g, *kernel))
    wt = bind(P.transpose, wt, permutation=(0, 2, 1, *range(3, 3 + n)))
    wt = bind(P.reshape, wt, shape=(groups * c_in_g, c_out // groups, *kernel))
    wt = _slice_dims(wt, {2 + i: (k - 1, k, -1) for i, k in enumerate(kernel) if k > 1})
    return bind(conv, g, wt, strides=(1,) * n, dilations=tuple(dilations), padding=pads[2:],
                groups=groups)  # fmt: skip


def _conv_weight_grad(ct, x, w, strides, dilations, padding, groups) -> Tensor:
    """`dw[o, c, k] = sum_{n, p} ct[n, o, p] * x_padded[n, c, p * stride + k * dilation]`: a
    convolution of the input (input channels as the batch, batch x groups as channels) with
    the cotangent as the kernel, where stride and dilation swap roles."""
    n = x.ndim - 2
    batch, c_in_g = x.shape[0], w.shape[1]
    sizes, kernel, outs = x.shape[2:], w.shape[2:], ct.shape[2:]
    pads, crop = [], {}
    for i, (size, k, o, s, d, (lo, _)) in enumerate(
        zip(sizes, kernel, outs, strides, dilations, padding)
    ):
        # Pad exactly to the extent the windows read; rows no window reads are cut.
        hi = (o - 1) * s + d * (k - 1) + 1 - size - lo
        if hi < 0:
            if size + hi <= 0:
                return _zeros(w.shape, w.dtype)
            crop[2 + i] = (0, size + hi, 1)
        pads.append((lo, max(hi, 0)))
    xs = _slice_dims(x, crop)
    spatial = tuple(xs.shape[2:])
    rest = tuple(range(3, 3 + n))
    xt = bind(P.reshape, xs, shape=(batch, groups, c_in_g, *spatial))
    xt = bind(P.transpose, xt, permutation=(2, 1, 0, *rest))
    xt = bind(P.reshape, xt, shape=(c_in_g, groups * batch, *spatial))
    ctt = bind(P.transpose, ct, permutation=(1, 0, *range(2, 2 + n)))
    r = bind(conv, xt, ctt, strides=tuple(dilations), dilations=tuple(strides),
             padding=tuple(pads), groups=groups)  # fmt: skip
    return bind(P.transpose, r, permutation=(1, 0, *range(2, 2 + n)))


def _conv_vjp(ct, x, w, *, out, strides, dilations, padding, groups):
    """Input and weight cotangents of `conv`, each computed only when that operand needs it."""
    gx = gw = None
    if x.requires_grad:
        gx = _conv_input_grad(ct, w, x.shape[2:], strides, dilations, padding, groups)
    if w.requires_grad:
        gw = _conv_weight_grad(ct, x, w, strides, dilations, padding, groups)
    return gx, gw


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
        m = bind(P.broadcast_in_dim, _host_tensor(inside), dims=(dim,), shape=tuple(out_shape))
        mask = m if mask is None else bind(P.and_, mask, m)
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
            pad_, x, low=low, high=high, value=fill, dtype=x.dtype)  # fmt: skip
        taps = [_slice_dims(xp, {i: (kk * d, o, s) for i, (kk, d, o, s)
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
            grad = placed if grad is None else bind(P.add, grad, placed)
    return (_zeros(sizes, x.dtype) if grad is None else grad,)


def _routed(ct, out, taps, offsets, inside):
    """Per window offset, the cotangent of the windows whose first extreme element sits there:
    the part not yet routed by an earlier offset, where that offset's element equals the
    result (or is NaN) and is not padding."""
    zero = _zeros(ct.shape, ct.dtype)
    left, result = ct, []
    for i, (k, v) in enumerate(zip(offsets, taps)):
        hit = bind(P.or_, bind(P.compare, v, out, direction="eq"),
                   bind(P.compare, v, v, direction="ne"))  # fmt: skip
        mask = _offset_mask(inside[k], ct.shape)
        if mask is not None:
            hit = bind(P.and_, hit, mask)
        result.append((k, bind(P.select, hit, left, zero)))
        if i + 1 < len(offsets):
            left = bind(P.select, hit, zero, left)
    return result


def _others(ct, taps, offsets):
    """Per window offset, `ct` times the product of the window's other elements (prefix times
    suffix products over the offsets; padding and skipped offsets hold 1)."""
    n = len(taps)
    prefix, suffix = [None] * n, [None] * n
    for i in range(1, n):
        prev = prefix[i - 1]
        prefix[i] = taps[i - 1] if prev is None else bind(P.mul, prev, taps[i - 1])
        nxt = suffix[n - i]
        suffix[n - 1 - i] = taps[n - i] if nxt is None else bind(P.mul, taps[n - i], nxt)
    result = []
    for k, pre, suf in zip(offsets, prefix, suffix):
        others = pre if suf is None else suf if pre is None else bind(P.mul, pre, suf)
        result.append((k, ct if others is None else bind(P.mul, ct, others)))
    return result


conv.vjp = _conv_vjp
reduce_window.vjp = _reduce_window_vjp
