"""The numpy kernel of the `conv` primitive (primitives/window.py): N-d grouped
cross-correlation as matrix products, by the cheapest gathering of the input windows for the
shapes at hand."""

from __future__ import annotations

import functools
import math

import numpy as np

from flow.dialect.semantics import window_output_size
from flow.primitives.movement import pad_constant
from flow.primitives.structured import host_matmul

__all__ = ["conv_kernel"]


def conv_kernel(x, w, *, strides, dilations, padding, groups):
    """`conv` on arrays: one matrix product per group. The windows of the padded operand,
    viewed in place (`_windows`), are gathered into rows of channels x kernel taps, times
    the weight laid out the same way. Stride-1 convolutions gather shifted copies instead:
    of the unpadded input when the result keeps its size (`_same_conv`) or the kernel is as
    large as it (`_conv_over_shifts`), else of the padded one (`_shifted_conv`)."""
    n, dtype, kernel = x.ndim - 2, x.dtype, w.shape[2:]
    batch, c_in, c_out = x.shape[0], x.shape[1], w.shape[0]
    cg, og, taps = c_in // groups, c_out // groups, math.prod(kernel)
    # 16-bit floats accumulate in float32, as PyTorch does on the CPU.
    acc_dt = np.float32 if x.dtype.kind in "fV" and x.dtype.itemsize < 4 else x.dtype
    x, w = x.astype(acc_dt, copy=False), w.astype(acc_dt, copy=False)
    if (x.size and w.size and all(s == 1 for s in strides)
            and all(v >= 0 for pair in padding for v in pair)
            and _small_images(x.shape[2:], padding)):  # fmt: skip
        if groups == 1 and all(d == 1 for d in dilations) and tuple(kernel) == tuple(x.shape[2:]):
            return _conv_over_shifts(x, w, padding).astype(dtype, copy=False)
        if all(lo + hi == d * (k - 1) for (lo, hi), k, d in zip(padding, kernel, dilations)):
            return _same_conv(x, w, padding, dilations, groups).astype(dtype, copy=False)
    if any(lo or hi for lo, hi in padding):
        x = pad_constant(x, (0, 0, *(lo for lo, _ in padding)), (0, 0, *(hi for _, hi in padding)))
    out = [window_output_size(x.shape[2 + i], kernel[i], strides[i], dilations[i], (0, 0))
           for i in range(n)]  # fmt: skip
    positions = math.prod(out)
    if all(s == 1 for s in strides) and taps <= positions and min(out, default=1) > 0:
        return _shifted_conv(x, w, out, dilations, groups).astype(dtype, copy=False)
    win = _windows(x, groups, out, kernel, strides, dilations)  # [N, G, Cg, *out, *k]
    spatial = tuple(range(3, 3 + n))
    cols = win.transpose(1, 0, *spatial, 2, *(s + n for s in spatial))
    cols = cols.reshape(groups, batch * positions, cg * taps)
    wm = w.reshape(groups, og, cg * taps)
    if groups == 1:  # a plain 2-d product: BLAS
        r = host_matmul(cols[0], wm[0].T)[None]
    else:
        r = np.matmul(cols, wm.transpose(0, 2, 1))  # [G, N * positions, og]
    r = r.reshape(groups, batch, *out, og).transpose(1, 0, 2 + n, *range(2, 2 + n))
    return np.ascontiguousarray(r).reshape(batch, c_out, *out).astype(dtype, copy=False)


def _small_images(spatial, padding) -> bool:
    """Whether images are small enough for the shifted copies of the unpadded input
    (`_same_conv`, `_conv_over_shifts`): their masked copies cost more per element than the
    padded copy's plain ones, which pays off where padding adds a fifth or more to an image
    (it is then computed on), or its rows are too short for a window gather to copy fast."""
    padded = math.prod(n + lo + hi for n, (lo, hi) in zip(spatial, padding))
    return padded >= 1.2 * math.prod(spatial) or (len(spatial) > 0 and spatial[-1] < 16)


def _same_conv(x, w, padding, dilations, groups) -> np.ndarray:
    """A stride-1 `conv` whose result has the input's spatial size ("same" padding), with no
    padded copy: each kernel tap's rows are the channel-major input shifted by the tap's
    offset, zero where the tap reads padding (`_shifted_rows`); one product per group over
    the `N * prod(spatial)` positions, which are exactly the result's."""
    (batch, c_in, *spatial), (c_out, cg, *kernel) = x.shape, w.shape
    size, taps, length = math.prod(spatial), math.prod(kernel), batch * math.prod(spatial)
    flat = x.reshape(batch, c_in, size)
    flat = flat[0] if batch == 1 else np.ascontiguousarray(flat.transpose(1, 0, 2))
    cols = _gemm_rows((c_in, taps), length, x.dtype)
    _shifted_rows(flat.reshape(c_in, length), tuple(spatial), tuple(kernel), tuple(dilations),
                  tuple(lo for lo, _ in padding),
                  cols.transpose(1, 0, 2).reshape(*kernel, c_in, length))  # fmt: skip
    cols = cols.reshape(groups, cg * taps, length)
    wm = w.reshape(groups, c_out // groups, cg * taps)
    r = host_matmul(wm[0], cols[0]) if groups == 1 else np.matmul(wm, cols)  # [G,] og, N * size
    r = r.reshape(c_out, batch, size)
    r = r[:, 0] if batch == 1 else np.ascontiguousarray(r.transpose(1, 0, 2))
    return r.reshape(batch, c_out, *spatial)


def _conv_over_shifts(x, w, padding) -> np.ndarray:
    """An ungrouped stride-1 `conv` whose kernel is as large as the input (what the weight
    cotangent of a stride-1 "same" convolution is, `_conv_weight_grad`): each result
    position is the dot product of the weight with the input shifted by that position,
    zero where it reads padding, so the shifted inputs (`_shifted_rows`) times the weight
    are one product."""
    (batch, c_in, *spatial), c_out = x.shape, w.shape[0]
    outs = tuple(lo + hi + 1 for lo, hi in padding)
    cols = _gemm_rows((math.prod(outs), batch), c_in * math.prod(spatial), x.dtype)
    _shifted_rows(x.reshape(batch, c_in, -1), tuple(spatial), outs, (1,) * len(outs),
                  tuple(lo for lo, _ in padding), cols.reshape(*outs, batch, c_in, -1))
    r = host_matmul(cols.reshape(-1, cols.shape[-1]), w.reshape(c_out, -1).T)
    r = np.ascontiguousarray(r.reshape(-1, batch, c_out).transpose(1, 2, 0))
    return r.reshape(batch, c_out, *outs)


def _gemm_rows(lead: tuple[int, ...], length: int, dtype) -> np.ndarray:
    """An uninitialised [*lead, length] operand of a BLAS product, its rows a little apart
    when `length` would put them a multiple of 4 KiB apart: a GEMM over such rows runs
    ~1.5x slower (the rows its panels read fall into the same cache sets)."""
    dtype = np.dtype(dtype)
    gap = 64 // dtype.itemsize if length * dtype.itemsize % 4096 == 0 else 0
    return np.empty((*lead, length + gap), dtype)[..., :length]


def _shifted_rows(src: np.ndarray, grid, taps, dilations, lows, dst: np.ndarray) -> None:
    """`dst[*k, ..., q]`: the rows of `src` [..., L] (each holds whole images of shape `grid`,
    end to end) moved by every window offset k over `taps`. Element q of a row, at position
    p of its image, becomes the element at `p + k * dilation - low`, or 0 where that leaves
    the image.

    All offsets are one strided view of `src` (between zero margins), one flat step per tap
    dim; a mask of the positions that stay inside zeroes the rest, in one multiplication
    when `src` is finite, else by selection (0 * inf would be nan)."""
    *lead, length = src.shape
    finite = src.dtype.kind != "f" or bool(np.isfinite(src.sum()))
    before, after, steps, keep = _shift_plan(grid, taps, dilations, lows, length,
                                             src.dtype.str if finite else "?")  # fmt: skip
    ext = np.zeros((*lead, before + length + after), src.dtype)
    ext[..., before:before + length] = src
    isz = src.itemsize
    view = np.ndarray((*taps, *lead, length), src.dtype, ext, 0,
                      (*(s * isz for s in steps), *ext.strides[:-1], isz))  # fmt: skip
    keep = keep.reshape(*taps, *(1,) * len(lead), *keep.shape[len(taps) + 1:])
    if keep.ndim > view.ndim:  # a mask per image position, broadcast over the images
        view = view.reshape(*view.shape[:-1], -1, keep.shape[-1])
        dst = dst.reshape(*dst.shape[:-1], -1, keep.shape[-1])
    if finite:
        np.multiply(view, keep, out=dst)
    else:
        dst[...] = 0
        np.copyto(dst, view, where=keep)


_TILED_MASK_MAX = 1 << 20  # elements: above, the mask is per image position, broadcast


@functools.lru_cache(maxsize=256)
def _shift_plan(grid, taps, dilations, lows, length: int, dtype: str):
    """For `_shifted_rows` over rows of `length`: the zero margins before and after a row
    (so the first offset reads from the start), the flat step per tap dim, and which
    positions stay inside their image per offset, as a read-only 0/1 array of `dtype`,
    [*taps, 1, length], or [*taps, 1, 1, prod(grid)] (per image) when that would be large."""
    rows = [math.prod(grid[i + 1:]) for i in range(len(grid))]
    steps = tuple(d * r for d, r in zip(dilations, rows))
    first = -sum(lo * r for lo, r in zip(lows, rows))
    last = first + sum((k - 1) * s for k, s in zip(taps, steps))
    inside = np.ones((), np.bool_)
    for n, k, d, lo in zip(grid, taps, dilations, lows):
        pos = np.arange(n)[None, :] + (np.arange(k) * d - lo)[:, None]
        inside = inside[..., None, None] & ((pos >= 0) & (pos < n))
    order = [*range(0, 2 * len(grid), 2), *range(1, 2 * len(grid), 2)]  # tap dims, then grid
    inside = inside.transpose(order).reshape(*taps, 1, 1, -1)
    if inside.size * (length // inside.shape[-1]) <= _TILED_MASK_MAX:
        inside = np.tile(inside, length // inside.shape[-1]).reshape(*taps, 1, -1)
    keep = inside.astype(dtype)
    keep.flags.writeable = False
    return -first, max(0, last), steps, keep  # lows >= 0: the first offset reads at ext[0]


def _shifted_conv(x, w, out, dilations, groups) -> np.ndarray:
    """A stride-1 `conv` of the padded `x` as one matrix product per group over shifted rows.

    With each channel's images laid end to end (`N * prod(spatial)` values), the element a
    kernel tap reads for result position q sits a fixed offset after q, the same offset for
    every position and image. So each tap's rows are one slice of that flat layout: long
    contiguous copies instead of the kernel-wide gathers of `_windows`. Positions past a
    row's last whole window are computed too and cut from the result (at most a kernel's
    width per row), and none of the kept ones reads past its own image."""
    n, (batch, c_in), c_out, kernel = x.ndim - 2, x.shape[:2], w.shape[0], w.shape[2:]
    spatial, cg, og, taps = x.shape[2:], c_in // groups, c_out // groups, math.prod(kernel)
    size = math.prod(spatial)
    row = [math.prod(spatial[i + 1:]) for i in range(n)]  # each spatial dim's flat stride
    offsets = [sum(k * d * r for k, d, r in zip(tap, dilations, row))
               for tap in np.ndindex(*kernel)]  # fmt: skip
    flat = np.ascontiguousarray(x.reshape(batch, c_in, size).transpose(1, 0, 2))
    flat = flat.reshape(c_in, batch * size)
    reach = batch * size - offsets[-1]  # the columns every tap can read
    cols = np.empty((c_in, taps, batch * size), x.dtype)
    for t, off in enumerate(offsets):
        cols[:, t, :reach] = flat[:, off:off + reach]
    cols[:, :, reach:] = 0  # only positions that are cut read these
    cols = cols.reshape(groups, cg * taps, batch * size)
    wm = w.reshape(groups, og, cg * taps)
    r = host_matmul(wm[0], cols[0]) if groups == 1 else np.matmul(wm, cols)  # [G,] og, N * size
    r = r.reshape(c_out, batch, *spatial)[(slice(None), slice(None), *(slice(o) for o in out))]
    return np.ascontiguousarray(r.transpose(1, 0, *range(2, 2 + n)))


def _windows(x, groups, out, kernel, strides, dilations) -> np.ndarray:
    """A read-only view [N, G, C/G, *out, *kernel] of `x` [N, C, *spatial]: element
    (n, g, c, p, k) is x[n, g * C/G + c, p * stride + k * dilation]."""
    st = x.strides
    cg = x.shape[1] // groups
    shape = (x.shape[0], groups, cg, *out, *kernel)
    steps = (st[0], st[1] * cg, st[1], *(st[2 + i] * s for i, s in enumerate(strides)),
             *(st[2 + i] * d for i, d in enumerate(dilations)))  # fmt: skip
    return np.lib.stride_tricks.as_strided(x, shape, steps, writeable=False)
