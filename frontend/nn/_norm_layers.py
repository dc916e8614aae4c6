"""Normalization layers: BatchNorm, InstanceNorm, LayerNorm, GroupNorm and RMSNorm.

BatchNorm keeps `running_mean`, `running_var` and `num_batches_tracked` as
buffers: in training mode it normalizes with the batch statistics and
`F.batch_norm` updates the running ones in place; in eval mode it uses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np

from flow.ops import basic as O
from flow.core.tensor import Tensor
from . import functional as F
from . import init
from ._layers import _empty, _factory
from ._module import Module, Parameter


class _NormBase(Module):
    """Shared state of BatchNorm and InstanceNorm: affine parameters and running statistics."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory(type(self).__name__, device, dtype)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = _empty(num_features, dtype=dt)
            self.bias = _empty(num_features, dtype=dt)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", O.zeros(num_features, dtype=dt))
            self.register_buffer("running_var", O.ones(num_features, dtype=dt))
            self.register_buffer("num_batches_tracked", Tensor._eager(np.array(0, np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Running statistics to (0, 1), weight to ones and bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")  # fmt: skip


class _BatchNorm(_NormBase):
    _dims: tuple[int, ...] = ()

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {input.ndim}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        counting = self.training and self.track_running_stats and \
            self.num_batches_tracked is not None  # fmt: skip
        if self.momentum is None:  # a cumulative average over the batches seen so far
            seen = int(self.num_batches_tracked.item()) + 1 if counting else 1
            factor = 1.0 / seen
        else:
            factor = self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        out = F.batch_norm(input, self.running_mean if keep else None,
                           self.running_var if keep else None, self.weight, self.bias,
                           use_batch_stats, factor, self.eps)  # fmt: skip
        if counting:
            self.num_batches_tracked.add_(1)
        return out


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) per channel."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) per channel."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) per channel."""

    _dims = (5,)


class _InstanceNorm(_NormBase):
    _n = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None) -> None:  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        n = self._n
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"expected {n + 1}D or {n + 2}D input (got {input.ndim}D input)")
        unbatched = input.ndim == n + 1
        x = O.unsqueeze(input, 0) if unbatched else input
        momentum = self.momentum if self.momentum is not None else 0.0
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, momentum,
                              self.eps)  # fmt: skip
        return O.squeeze(out, 0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _n = 1


class InstanceNorm2d(_InstanceNorm):
    _n = 2


class InstanceNorm3d(_InstanceNorm):
    _n = 3


def _shape(normalized_shape) -> tuple[int, ...]:
    if isinstance(normalized_shape, Integral):
        return (int(normalized_shape),)
    if isinstance(normalized_shape, Sequence):
        return tuple(int(s) for s in normalized_shape)
    raise TypeError(f"normalized_shape must be an int or a sequence of ints, got "
                    f"{normalized_shape!r}")  # fmt: skip


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` dims; weight (ones) and bias (zeros) of
    that shape when `elementwise_affine`."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory("LayerNorm", device, dtype)
        self.normalized_shape = _shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(O.ones(*self.normalized_shape, dtype=dt))
            self.register_parameter(
                "bias", Parameter(O.zeros(*self.normalized_shape, dtype=dt)) if bias else None
            )
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")  # fmt: skip


class RMSNorm(Module):
    """`x / sqrt(mean(x**2) + eps) * weight` over the trailing `normalized_shape` dims."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory("RMSNorm", device, dtype)
        self.normalized_shape = _shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(O.ones(*self.normalized_shape, dtype=dt))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")  # fmt: skip


class GroupNorm(Module):
    """Normalize (N, C, *) over groups of `num_channels / num_groups` channels; per-channel
    weight (ones) and bias (zeros) when `affine`."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__()
        dt = _factory("GroupNorm", device, dtype)
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        if affine:
            self.weight = Parameter(O.ones(num_channels, dtype=dt))
            self.bias = Parameter(O.zeros(num_channels, dtype=dt))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = [
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
    "InstanceNorm3d", "LayerNorm", "RMSNorm", "GroupNorm",
]  # fmt: skip
