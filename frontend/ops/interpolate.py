"""Interpolation: `interpolate` (and the `upsample*` names) over the spatial dims of
(N, C, *spatial) with PyTorch's coordinate rules.

Interpolation is separable: per spatial dim, a host-built matrix holding PyTorch's
interpolation weights is applied with a matmul, unless a cheaper exact form exists
(integer nearest-neighbour factors via broadcast or strided windows). Area mode is
adaptive average pooling (ops/pooling.py).
"""

from __future__ import annotations

import math

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.args import is_int
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import as_tensor, broadcast_to, reshape
from flow.ops.pooling import _adaptive_avg
from flow.ops.window import _along, _spatial_input
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- nearest neighbours


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
    return bind(P.reduce_window, x, kind="max", window=ones, strides=strides, dilations=ones,
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


# --------------------------------------------------------------------------- coordinate maps


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
        if not all(is_int(s) for s in sizes):
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


# --------------------------------------------------------------------------- public ops


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False) -> Tensor:  # fmt: skip
    """Resize the spatial dims of (N, C, *spatial) with PyTorch's coordinate rules.

    Modes: nearest, nearest-exact, linear (3-D), bilinear / bicubic (4-D),
    trilinear (5-D) and area (adaptive average pooling). Output sizes from
    `scale_factor` are `floor(in * scale_factor)`, and the coordinate maps use
    `1 / scale_factor` unless `recompute_scale_factor` is set, as in PyTorch.
    """
    op = "interpolate"
    x = as_tensor(input)
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
"""Tensor methods this module adds (none)."""

__all__: list[str] = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]
