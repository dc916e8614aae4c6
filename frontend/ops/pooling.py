"""Pooling: max, average and adaptive average pooling over 1 to 3 spatial dims, on the
`reduce_window` primitive, with PyTorch's output-size rules and validation.

Average pooling divides a windowed sum by a divisor computed on the host per spatial dim
(so `ceil_mode` windows that hang off the end and `count_include_pad` follow PyTorch
exactly). Adaptive pooling is separable: dims split into equal windows take one
`reduce_window`, the others a host-built 0/1 matrix applied with a matmul.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flow import primitives as P
from flow.core.args import is_int
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import div, full
from flow.ops.window import _along, _ntuple, _scaled, _spatial_input
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- max and average pooling


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
    y = bind(P.reduce_window, x, kind=kind, window=(1,) * lead + k, strides=(1,) * lead + s,
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


def _avg_pool(op: str, n: int, input, kernel_size, stride, padding, ceil_mode,
              count_include_pad, divisor_override) -> Tensor:  # fmt: skip
    x = _spatial_input(op, input, n, float_only=True)
    if divisor_override is not None:
        if not is_int(divisor_override):
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


# --------------------------------------------------------------------------- adaptive pooling


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
        y = bind(P.reduce_window, y, kind="sum", window=ones + tuple(window),
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
    if len(sizes) != n or not all(s is None or is_int(s) for s in sizes):
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


TENSOR_METHODS: dict = {}
"""Tensor methods this module adds (none)."""

__all__: list[str] = [
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
]  # fmt: skip
