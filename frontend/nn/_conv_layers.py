"""Spatial layers: convolutions, transposed convolutions, fold / unfold, pooling, upsampling
and padding, 1-D to 3-D.

Thin Modules over `flow.nn.functional` with PyTorch's constructor arguments,
weight layout `(out_channels, in_channels / groups, *kernel_size)` (transposed:
`(in_channels, out_channels / groups, *kernel_size)`) and default initialization.
Non-zero `padding_mode`s pad explicitly with `flow.nn.functional.pad` and then convolve
without padding, as PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral

from flow.core.tensor import Tensor
from . import functional as F
from . import init
from ._layers import _empty, _factory, _fan_in_uniform_
from ._module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n:
            raise ValueError(f"expected {n} values, got {tuple(value)!r}")
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """Shared constructor, initialization and repr of Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

    _n = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        name, n = type(self).__name__, self._n
        dt = _factory(name, device, dtype)
        if not isinstance(groups, Integral) or groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")  # fmt: skip
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.dilation = _ntuple(dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")  # fmt: skip
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, n)
        self.padding_mode = padding_mode
        self.output_padding = (0,) * n
        self.transposed = self._transposed
        shape = (in_channels, out_channels // groups) if self.transposed \
            else (out_channels, in_channels // groups)  # fmt: skip
        self.weight = _empty(*shape, *self.kernel_size, dtype=dt)
        self.register_parameter("bias", _empty(out_channels, dtype=dt) if bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight from kaiming_uniform_(a=sqrt(5)), bias from U(+-1/sqrt(fan_in)) (the fan-in
        read from the weight's dims 1 and up, for a transposed weight too, as in PyTorch)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _fan_in_uniform_(self.bias, self.weight)

    def _explicit_padding(self) -> list[int]:
        """`F.pad` amounts (last dim first) for a non-zero padding_mode."""
        if self.padding == "valid":
            pairs = [(0, 0)] * self._n
        elif self.padding == "same":
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        else:
            pairs = [(p, p) for p in self.padding]
        return [v for pair in reversed(pairs) for v in pair]

    def forward(self, input: Tensor) -> Tensor:
        conv = getattr(F, f"conv{self._n}d")
        if self.padding_mode != "zeros":
            input = F.pad(input, self._explicit_padding(), mode=self.padding_mode)
            return conv(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)  # fmt: skip

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")  # fmt: skip
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) with weight (C_out, C_in / groups, k)."""

    _n = 1


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) with weight (C_out, C_in / groups, kH, kW)."""

    _n = 2


class Conv3d(_ConvNd):
    """3-D convolution over (N, C_in, D, H, W) with weight (C_out, C_in / groups, kD, kH, kW)."""

    _n = 3


class _ConvTransposeNd(_ConvNd):
    """Shared constructor and forward of ConvTranspose1d/2d/3d (padding_mode 'zeros' only)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:  # fmt: skip
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}, got '
                             f"padding_mode={padding_mode!r}")  # fmt: skip
        if isinstance(padding, str):
            raise ValueError(f"{name} takes an int or a tuple of {self._n} ints as padding, got "
                             f"padding={padding!r}")  # fmt: skip
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)  # fmt: skip
        self.output_padding = _ntuple(output_padding, self._n)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """`self.output_padding`, or the one that gives the requested `output_size` (its
        spatial sizes, optionally after the batch and channel sizes), as in PyTorch."""
        if output_size is None:
            return self.output_padding
        n, name = self._n, type(self).__name__
        lead = 2 if input.ndim == n + 2 else 1
        size = list(output_size)
        if len(size) == lead + n:
            size = size[lead:]
        if len(size) != n:
            raise ValueError(f"{name}: for {input.ndim}D input, output_size must have {n} or "
                             f"{lead + n} elements (got {len(size)})")  # fmt: skip
        spatial = list(input.shape[lead:])
        args = (spatial, self.stride, self.padding, self.dilation, self.kernel_size)
        low = [(i - 1) * s - 2 * p + d * (k - 1) + 1 for i, s, p, d, k in zip(*args)]
        high = [lo + s - 1 for lo, s in zip(low, self.stride)]
        if any(not lo <= v <= hi for v, lo, hi in zip(size, low, high)):
            raise ValueError(f"{name}: requested an output size of {size}, but valid sizes range "
                             f"from {low} to {high} (for an input of {spatial})")  # fmt: skip
        return tuple(v - lo for v, lo in zip(size, low))

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        conv = getattr(F, f"conv_transpose{self._n}d")
        if input.ndim not in (self._n + 1, self._n + 2):
            output_size = None  # conv_transpose reports the rank
        extra = self._output_padding(input, output_size)
        return conv(input, self.weight, self.bias, self.stride, self.padding, extra, self.groups,
                    self.dilation)  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution over (N, C_in, L) with weight (C_in, C_out / groups, k)."""

    _n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution over (N, C_in, H, W) with weight (C_in, C_out / groups, kH,
    kW)."""

    _n = 2


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution over (N, C_in, D, H, W) with weight (C_in, C_out / groups,
    kD, kH, kW)."""

    _n = 3


class Unfold(Module):
    """Sliding blocks of (N, C, H, W) as columns (N, C * kH * kW, L) (see `F.unfold`)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")  # fmt: skip


class Fold(Module):
    """Columns (N, C * kH * kW, L) summed back into (N, C, *output_size) (see `F.fold`)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)  # fmt: skip

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")  # fmt: skip


# --------------------------------------------------------------------------- pooling


class _MaxPoolNd(Module):
    _n = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        pool = getattr(F, f"max_pool{self._n}d")
        return pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                    ceil_mode=self.ceil_mode, return_indices=self.return_indices)  # fmt: skip

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")  # fmt: skip


class MaxPool1d(_MaxPoolNd):
    _n = 1


class MaxPool2d(_MaxPoolNd):
    _n = 2


class MaxPool3d(_MaxPoolNd):
    _n = 3


class _AvgPoolNd(Module):
    _n = 2

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input: Tensor) -> Tensor:
        args = (input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                self.count_include_pad)  # fmt: skip
        if self._n == 1:
            return F.avg_pool1d(*args)
        return getattr(F, f"avg_pool{self._n}d")(*args, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    _n = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:  # fmt: skip
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    _n = 2


class AvgPool3d(_AvgPoolNd):
    _n = 3


class _AdaptiveAvgPoolNd(Module):
    _n = 2

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, f"adaptive_avg_pool{self._n}d")(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    _n = 1


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    _n = 2


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    _n = 3


class Upsample(Module):
    """Resize the spatial dims to `size` or by `scale_factor` (see `F.interpolate`)."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:  # fmt: skip
        super().__init__()
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor is not None else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)  # fmt: skip

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None \
            else f"size={self.size!r}"  # fmt: skip
        return f"{info}, mode={self.mode!r}"


# --------------------------------------------------------------------------- padding


class _PadNd(Module):
    _n = 2
    _mode = "constant"

    def __init__(self, padding, value: float = 0.0) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._n)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self._mode == "constant":
            return F.pad(input, list(self.padding), "constant", self.value)
        return F.pad(input, list(self.padding), self._mode)

    def extra_repr(self) -> str:
        if self._mode == "constant" and type(self).__name__.startswith("Constant"):
            return f"padding={self.padding}, value={self.value}"
        return f"padding={self.padding}"


def _pad_class(name: str, n: int, mode: str, takes_value: bool) -> type[Module]:
    """A padding module class for `n` trailing dims in `mode` (`value` only for ConstantPad)."""
    doc = f"Pad the last {n} dim(s) in {mode!r} mode by `padding` (an int or 2 x {n} ints)."
    body = {"_n": n, "_mode": mode, "__doc__": doc, "__module__": __name__}
    if not takes_value:

        def __init__(self, padding) -> None:
            _PadNd.__init__(self, padding)

        body["__init__"] = __init__
    return type(name, (_PadNd,), body)


ConstantPad1d = _pad_class("ConstantPad1d", 1, "constant", True)
ConstantPad2d = _pad_class("ConstantPad2d", 2, "constant", True)
ConstantPad3d = _pad_class("ConstantPad3d", 3, "constant", True)
ZeroPad1d = _pad_class("ZeroPad1d", 1, "constant", False)
ZeroPad2d = _pad_class("ZeroPad2d", 2, "constant", False)
ZeroPad3d = _pad_class("ZeroPad3d", 3, "constant", False)
ReflectionPad1d = _pad_class("ReflectionPad1d", 1, "reflect", False)
ReflectionPad2d = _pad_class("ReflectionPad2d", 2, "reflect", False)
ReflectionPad3d = _pad_class("ReflectionPad3d", 3, "reflect", False)
ReplicationPad1d = _pad_class("ReplicationPad1d", 1, "replicate", False)
ReplicationPad2d = _pad_class("ReplicationPad2d", 2, "replicate", False)
ReplicationPad3d = _pad_class("ReplicationPad3d", 3, "replicate", False)
CircularPad1d = _pad_class("CircularPad1d", 1, "circular", False)
CircularPad2d = _pad_class("CircularPad2d", 2, "circular", False)
CircularPad3d = _pad_class("CircularPad3d", 3, "circular", False)


__all__ = [
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "Unfold", "Fold", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
    "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "Upsample", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
    "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
    "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
]  # fmt: skip
