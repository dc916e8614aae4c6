"""Convolutions `conv1d` / `conv2d` / `conv3d` on the `conv` primitive, with PyTorch's argument
names, defaults, padding modes (`valid`, `same`) and validation; the transposed convolutions
`conv_transpose1d` / `2d` / `3d`, the input gradient of a convolution (`transposed_conv` of
primitives/window.py, which conv's VJP uses too); and `unfold` / `fold` (im2col and its
adjoint), strided slices of the padded input and their scatters (no arithmetic: an inf or NaN
stays in its own entries)."""

from __future__ import annotations

import math

import numpy as np

from flow import primitives as P
from flow.core.args import is_int
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import add_bias, as_tensor, reshape
from flow.ops.window import _ntuple, _spatial_input
from flow.primitives.registry import bind
from flow.primitives.movement import scatter_slice, slice_dims
from flow.primitives.window import transposed_conv


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


def _operands(op: str, n: int, input, weight, groups, layout: str) -> tuple[Tensor, Tensor]:
    """The input and weight of a convolution, checked: the weight's rank (`layout` names its
    first two dims), one dtype for both, and `groups` a positive int."""
    x = _spatial_input(op, input, n, float_only=True)
    w = as_tensor(weight)
    kdims = ", ".join("kD kH kW".split()[3 - n :])
    if w.ndim != n + 2:
        raise op_error(op, f"expected a {n + 2}-D weight [{layout}, {kdims}], got weight of "
                           f"shape {list(w.shape)}")  # fmt: skip
    if w.dtype is not x.dtype:
        raise op_error(op, f"expected input and weight of one dtype, got {x.dtype!r} and "
                           f"{w.dtype!r}", cls=TypeError)  # fmt: skip
    if not is_int(groups):
        raise op_error(op, f"expected groups to be an int, got {groups!r}", cls=TypeError)
    if groups < 1:
        raise op_error(op, f"expected groups >= 1, got {groups}")
    return x, w


def _bias(op: str, bias, c_out: int, x: Tensor, what: str = "") -> Tensor | None:
    """`bias` checked against `c_out` channels and `x`'s dtype (None stays None)."""
    if bias is None:
        return None
    b = as_tensor(bias)
    if tuple(b.shape) != (c_out,):
        raise op_error(op, f"expected bias of shape [{c_out}]{what}, got {list(b.shape)}")
    if b.dtype is not x.dtype:
        raise op_error(op, f"expected bias of dtype {x.dtype!r}, got {b.dtype!r}",
                       cls=TypeError)  # fmt: skip
    return b


def _finish(out: Tensor, b: Tensor | None, n: int, unbatched: bool) -> Tensor:
    """`out` plus the bias per channel, without the batch dim an unbatched input lacked."""
    if b is not None:
        out = add_bias(out, b.to(out.dtype), 1)  # (cast: under autocast, the low dtype)
    return reshape(out, *out.shape[1:]) if unbatched else out


def _conv(op: str, n: int, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x, w = _operands(op, n, input, weight, groups, "out_channels, in_channels / groups")
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
    out = bind(P.conv, x, w, strides=stride, dilations=dilation, padding=pads, groups=groups)
    return _finish(out, _bias(op, bias, c_out, x), n, unbatched)


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


# --------------------------------------------------------------------------- conv_transpose


def _conv_transpose(op: str, n: int, input, weight, bias, stride, padding, output_padding,
                    groups, dilation) -> Tensor:  # fmt: skip
    x, w = _operands(op, n, input, weight, groups, "in_channels, out_channels / groups")
    if any(s == 0 for s in w.shape[1:]):
        raise op_error(op, f"expected non-zero sizes for dims 1 and up of the weight, got "
                           f"weight of shape {list(w.shape)}")  # fmt: skip
    stride = _ntuple(op, "stride", stride, n, 1)
    dilation = _ntuple(op, "dilation", dilation, n, 1)
    pads = _ntuple(op, "padding", padding, n, 0)
    extra = _ntuple(op, "output_padding", output_padding, n, 0)
    if any(e >= s and e >= d for e, s, d in zip(extra, stride, dilation)):
        raise op_error(op, f"expected output_padding to be smaller than stride or dilation in "
                           f"every dim, got output_padding={list(extra)}, stride={list(stride)}, "
                           f"dilation={list(dilation)}")  # fmt: skip
    in_shape = list(x.shape)
    unbatched = x.ndim == n + 1
    if unbatched:
        x = reshape(x, 1, *x.shape)
    c_in, kernel = w.shape[0], tuple(w.shape[2:])
    if c_in % groups:
        raise op_error(op, f"expected weight dim 0 (in_channels = {c_in}) to be divisible by "
                           f"groups={groups}, got weight of shape {list(w.shape)}")  # fmt: skip
    if x.shape[1] != c_in:
        raise op_error(op, f"expected input with {c_in} channels (weight of shape "
                           f"{list(w.shape)}), got input of shape {in_shape} with "
                           f"{x.shape[1]} channels")  # fmt: skip
    sizes = [(i - 1) * s - 2 * p + d * (k - 1) + e + 1
             for i, s, p, d, k, e in zip(x.shape[2:], stride, pads, dilation, kernel, extra)]
    if any(size < 1 for size in sizes):
        raise op_error(op, f"output size per channel ({' x '.join(map(str, sizes))}) of input "
                           f"size {' x '.join(map(str, x.shape[2:]))} is too small: "
                           "(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + "
                           "output_padding + 1 must be at least 1")  # fmt: skip
    b = _bias(op, bias, w.shape[1] * groups, x, " (out_channels)")
    out = transposed_conv(x, w, sizes, stride, dilation, tuple((p, p) for p in pads), groups)
    return _finish(out, b, n, unbatched)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1) -> Tensor:  # fmt: skip
    """1-D transposed convolution of (N, C_in, L) or (C_in, L) with (C_in, C_out / groups, kL):
    the input gradient of conv1d with that weight."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)  # fmt: skip


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1) -> Tensor:  # fmt: skip
    """2-D transposed convolution of (N, C_in, H, W) or (C_in, H, W) with (C_in,
    C_out / groups, kH, kW): the input gradient of conv2d with that weight."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)  # fmt: skip


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1) -> Tensor:  # fmt: skip
    """3-D transposed convolution of (N, C_in, D, H, W) or unbatched input with (C_in,
    C_out / groups, kD, kH, kW): the input gradient of conv3d with that weight."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)  # fmt: skip


# --------------------------------------------------------------------------- unfold / fold


def _block_args(op: str, kernel_size, dilation, padding, stride):
    return (_ntuple(op, "kernel_size", kernel_size, 2, 1), _ntuple(op, "dilation", dilation, 2, 1),
            _ntuple(op, "padding", padding, 2, 0), _ntuple(op, "stride", stride, 2, 1))  # fmt: skip


def _blocks(op: str, sizes, kernel, dilation, padding, stride, what: str) -> list[int]:
    """The number of sliding blocks per spatial dim; an error unless each is at least 1."""
    blocks = [(n + 2 * p - d * (k - 1) - 1) // s + 1
              for n, k, d, p, s in zip(sizes, kernel, dilation, padding, stride)]  # fmt: skip
    if any(b < 1 for b in blocks):
        raise op_error(op, f"{what} ({' x '.join(map(str, sizes))}) with "
                           f"kernel_size={list(kernel)}, dilation={list(dilation)}, "
                           f"padding={list(padding)}, stride={list(stride)} gives "
                           f"{' x '.join(map(str, blocks))} sliding blocks; each must be at "
                           "least 1")  # fmt: skip
    return blocks


def _offsets(kernel, dilation):
    """The (row, column) offset of each kernel entry in a block, row-major."""
    return [(i * dilation[0], j * dilation[1])
            for i in range(kernel[0]) for j in range(kernel[1])]  # fmt: skip


def unfold(input, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding blocks of (N, C, H, W) or (C, H, W) as columns (N, C * kH * kW, L) (im2col), each
    column ordered by channel, then kernel row, then kernel column, L blocks in row-major order.

    One strided slice of the zero-padded input per kernel entry, stacked: a copy, so an inf or
    NaN lands in the columns that hold it and nowhere else, as in PyTorch."""
    op = "unfold"
    x = _spatial_input(op, input, 2, float_only=True)
    kernel, dilation, pads, stride = _block_args(op, kernel_size, dilation, padding, stride)
    blocks = _blocks(op, x.shape[-2:], kernel, dilation, pads, stride, "input size")
    lead, n = tuple(x.shape[:-2]), x.ndim
    if any(pads):
        x = bind(P.pad, x, low=(0,) * (n - 2) + tuple(pads), high=(0,) * (n - 2) + tuple(pads),
                 value=0.0, dtype=x.dtype)  # fmt: skip
    parts = [reshape(slice_dims(x, {n - 2: (r, blocks[0], stride[0]),
                                    n - 1: (c, blocks[1], stride[1])}), *lead, 1, *blocks)
             for r, c in _offsets(kernel, dilation)]  # fmt: skip
    cols = bind(P.concat, *parts, dim=n - 2) if len(parts) > 1 else parts[0]
    return reshape(cols, *lead[:-1], lead[-1] * len(parts), math.prod(blocks))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum the columns (N, C * kH * kW, L) or (C * kH * kW, L) back into (N, C, *output_size)
    (col2im, the adjoint of `unfold`): each kernel entry's columns scattered where `unfold`
    read them (pads and reshapes, no products), and the scatters added."""
    op = "fold"
    x = as_tensor(input)
    if x.ndim not in (2, 3):
        raise op_error(op, "expected a 2-D (unbatched) or 3-D (batched) input, got input of "
                           f"shape {list(x.shape)}")  # fmt: skip
    if any(s == 0 for s in x.shape[-2:]):
        raise op_error(op, "expected non-zero sizes for the non-batch dims of the input, got "
                           f"input of shape {list(x.shape)}")  # fmt: skip
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected a floating-point input, got {x.dtype!r}", cls=TypeError)
    sizes = _ntuple(op, "output_size", output_size, 2, 1)
    kernel, dilation, pads, stride = _block_args(op, kernel_size, dilation, padding, stride)
    k = math.prod(kernel)
    ck, length = x.shape[-2:]
    if ck % k:
        raise op_error(op, f"expected input dim {x.ndim - 2} ({ck}) to be divisible by the "
                           f"product of kernel_size={list(kernel)} ({k}), got input of shape "
                           f"{list(x.shape)}")  # fmt: skip
    blocks = _blocks(op, sizes, kernel, dilation, pads, stride, "output_size")
    if length != math.prod(blocks):
        raise op_error(op, f"expected input dim {x.ndim - 1} ({length}) to match the number of "
                           f"sliding blocks of output_size={list(sizes)} with "
                           f"kernel_size={list(kernel)}, dilation={list(dilation)}, "
                           f"padding={list(pads)}, stride={list(stride)}: "
                           f"{' x '.join(map(str, blocks))} = {math.prod(blocks)}")  # fmt: skip
    lead = tuple(x.shape[:-2])
    cols = reshape(x, *lead, ck // k, k, *blocks)
    n = cols.ndim - 1  # the ndim of the padded output (..., C, H + 2ph, W + 2pw)
    padded = (*lead, ck // k, sizes[0] + 2 * pads[0], sizes[1] + 2 * pads[1])
    out = None
    for e, (r, c) in enumerate(_offsets(kernel, dilation)):
        part = reshape(slice_dims(cols, {n - 2: (e, 1, 1)}), *lead, ck // k, *blocks)
        spread = scatter_slice(part, padded, start=(0,) * (n - 2) + (r, c),
                               strides=(1,) * (n - 2) + tuple(stride),
                               sizes=(*lead, ck // k, *blocks))  # fmt: skip
        out = spread if out is None else out + spread
    if any(pads):
        out = slice_dims(out, {n - 2: (pads[0], sizes[0], 1), n - 1: (pads[1], sizes[1], 1)})
    return out


TENSOR_METHODS: dict = {}
"""Tensor methods this module adds (none)."""

__all__: list[str] = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
]
"""Exported by `flow` and `flow.nn.functional`; `unfold` and `fold` only by the latter (as in
PyTorch, where `Tensor.unfold` is another op)."""
