"""Convolutions `conv1d` / `conv2d` / `conv3d` on the `conv` primitive, with PyTorch's argument
names, defaults, padding modes (`valid`, `same`) and validation."""

from __future__ import annotations

from flow import primitives as P
from flow.core.args import is_int
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import as_tensor, reshape
from flow.ops.window import _ntuple, _spatial_input
from flow.primitives.registry import bind


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
    w = as_tensor(weight)
    kdims = ", ".join("kD kH kW".split()[3 - n :])
    if w.ndim != n + 2:
        raise op_error(op, f"expected a {n + 2}-D weight [out_channels, in_channels / groups, "
                           f"{kdims}], got weight of shape {list(w.shape)}")  # fmt: skip
    if w.dtype is not x.dtype:
        raise op_error(op, f"expected input and weight of one dtype, got {x.dtype!r} and "
                           f"{w.dtype!r}", cls=TypeError)  # fmt: skip
    if not is_int(groups):
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
    out = bind(P.conv, x, w, strides=stride, dilations=dilation, padding=pads, groups=groups)
    if bias is not None:
        b = as_tensor(bias)
        if tuple(b.shape) != (c_out,):
            raise op_error(op, f"expected bias of shape [{c_out}], got {list(b.shape)}")
        if b.dtype is not x.dtype:
            raise op_error(op, f"expected bias of dtype {x.dtype!r}, got {b.dtype!r}",
                           cls=TypeError)  # fmt: skip
        out = out + reshape(b, 1, c_out, *(1,) * n).to(out.dtype)  # flow.autocast: low dtype
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


TENSOR_METHODS: dict = {}
"""Tensor methods this module adds (none)."""

__all__: list[str] = ["conv1d", "conv2d", "conv3d"]
