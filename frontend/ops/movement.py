"""Data movement: joining, splitting, reordering and padding (PyTorch / OneFlow semantics),
all composites of the slice / pad / concat primitives.

`flip` is a negative-stride slice; `roll`, `split`, the `pad` modes and `stack` are slices
and concats; `repeat` is a broadcast between two reshapes. Indexing and gathering are in
ops/indexing.py and ops/gather.py, creation from ranges in ops/creation.py.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops import basic as O
from flow.ops import gather as _gather
from flow.ops import indexing as _indexing
from flow.ops.indexing import _dim_of, _int, _ints, _varargs
from flow.primitives.movement import slice_dim, slice_dims
from flow.primitives.registry import bind


def _tensors(op: str, tensors) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise op_error(
            op, f"expected a list or tuple of tensors, got {type(tensors).__name__}", cls=TypeError
        )
    if not tensors:
        raise op_error(op, "expected a non-empty list of tensors")
    return [O.as_tensor(t) for t in tensors]


# --------------------------------------------------------------------------- joining


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate along `dim` after dtype promotion; 1-D empty tensors are skipped (as in
    PyTorch, for code that starts from `flow.tensor([])`)."""
    ts = _tensors("cat", tensors)
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = _dtypes.promote_types(dt, t.dtype)
    for i, t in enumerate(ts):
        if t.ndim == 0:
            raise op_error(
                "cat", f"zero-dimensional tensor (at position {i}) cannot be concatenated"
            )
    parts = [(i, t) for i, t in enumerate(ts) if tuple(t.shape) != (0,)]
    if not parts:
        return O.to(ts[0], dt)
    ref = parts[0][1]
    d = O.normalize_dim("cat", dim, ref.ndim)
    for i, t in parts:
        if t.ndim != ref.ndim:
            raise op_error(
                "cat",
                f"tensors must have the same rank: expected {ref.ndim}, got "
                f"{t.ndim} for tensor {i}",
            )
        for j in range(t.ndim):
            if j != d and t.shape[j] != ref.shape[j]:
                raise op_error(
                    "cat",
                    f"sizes of tensors must match except in dim {d}: "
                    f"expected size {ref.shape[j]} but got size {t.shape[j]} "
                    f"for tensor {i} (dim {j})",
                )
    if len(parts) == 1:
        return O.to(ref, dt)
    return bind(P.concat, *(O.to(t, dt) for _, t in parts), dim=d)


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Join equal-shaped tensors along a new dim `dim`."""
    ts = _tensors("stack", tensors)
    for i, t in enumerate(ts):
        if tuple(t.shape) != tuple(ts[0].shape):
            raise op_error(
                "stack",
                f"expects each tensor to be equal size, but got "
                f"{list(ts[0].shape)} at entry 0 and {list(t.shape)} at "
                f"entry {i}",
            )
    d = O.normalize_dim("stack", dim, ts[0].ndim + 1)
    return cat([O.unsqueeze(t, d) for t in ts], d)


# --------------------------------------------------------------------------- splitting


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """`length` elements of dim `dim` from `start` (negative `start` counts from the end)."""
    x = O.as_tensor(input)
    d = _dim_of("narrow", x, dim)
    n = x.shape[d]
    start, length = _int("narrow", "start", start), _int("narrow", "length", length)
    if not -n <= start <= n:
        raise op_error(
            "narrow", f"start {start} is out of range for dim {d} of size {n}", cls=IndexError
        )
    if start < 0:
        start += n
    if length < 0 or start + length > n:
        raise op_error("narrow", f"start ({start}) + length ({length}) exceeds dim {d} of size {n}")
    return slice_dim(x, d, start, length)


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """`x[..., index, ...]` along `dim` (the dim is removed)."""
    x = O.as_tensor(input)
    d = _dim_of("select", x, dim)
    i, n = _int("select", "index", index), x.shape[d]
    if not -n <= i < n:
        raise op_error(
            "select", f"index {i} is out of range for dim {d} of size {n}", cls=IndexError
        )
    out = slice_dim(x, d, i % n, 1)
    return O.reshape(out, *(s for j, s in enumerate(out.shape) if j != d))


def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of `split_size` along `dim` (the last may be smaller), or of the given sizes."""
    x = O.as_tensor(tensor)
    d = _dim_of("split", x, dim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = _int("split", "split_size", split_size_or_sections)
        if size < 0 or (size == 0 and n != 0):
            raise op_error(
                "split",
                f"split_size must be positive (or 0 for a dim of size 0), "
                f"got {size} for dim {d} of size {n}",
            )
        sizes = [builtins.min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = list(_ints("split", "section size", split_size_or_sections))
        if any(s < 0 for s in sizes) or builtins.sum(sizes) != n:
            raise op_error(
                "split",
                f"split sizes must be non-negative and sum to {n} (the size "
                f"of dim {d}), got {sizes}",
            )
    out, at = [], 0
    for s in sizes:
        out.append(slice_dim(x, d, at, s))
        at += s
    return tuple(out)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """`chunks` pieces of size ceil(n / chunks) (fewer when that covers the dim sooner)."""
    x = O.as_tensor(input)
    chunks = _int("chunk", "chunks", chunks)
    if chunks <= 0:
        raise op_error("chunk", f"expected chunks > 0, got {chunks}")
    d = _dim_of("chunk", x, dim)
    n = x.shape[d]
    if n == 0:
        return split(x, [0] * chunks, d)
    return split(x, -(-n // chunks), d)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along `dim`, with that dim removed."""
    x = O.as_tensor(input)
    d = _dim_of("unbind", x, dim)
    return tuple(select(x, d, i) for i in range(x.shape[d]))


# --------------------------------------------------------------------------- reordering


def _dim_list(op: str, dims, ndim: int) -> tuple[int, ...]:
    out = tuple(O.normalize_dim(op, d, ndim) for d in _ints(op, "dim", dims))
    if len(set(out)) != len(out):
        raise op_error(op, f"dims {list(_ints(op, 'dim', dims))} contain duplicates")
    return out


def flip(input: Tensor, *dims) -> Tensor:
    """Reverse the order of elements along `dims` (one negative-stride slice)."""
    x = O.as_tensor(input)
    ds = _dim_list("flip", _varargs(dims), x.ndim)
    return slice_dims(x, {d: (x.shape[d] - 1, x.shape[d], -1) for d in ds if x.ndim})


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements along `dims` cyclically; with no dims, over the flattened tensor."""
    x = O.as_tensor(input)
    shifts = _ints("roll", "shift", shifts)
    if dims is None:
        if len(shifts) != 1:
            raise op_error("roll", f"expected one shift without dims, got {list(shifts)}")
        return O.reshape(roll(O.flatten(x), shifts, 0), *x.shape)
    ds = tuple(_dim_of("roll", x, d) for d in _ints("roll", "dim", dims))
    if len(ds) != len(shifts):
        raise op_error(
            "roll", f"shifts and dims must align, got {len(shifts)} shifts and {len(ds)} dims"
        )
    for s, d in zip(shifts, ds):
        n = x.shape[d]
        s = s % n if n else 0
        if s:
            x = bind(P.concat, slice_dim(x, d, n - s, s), slice_dim(x, d, 0, n - s), dim=d)
    return x


def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dims `source` to positions `destination`; the others keep their order."""
    x = O.as_tensor(input)
    src = _dim_list("movedim", source, x.ndim)
    dst = _dim_list("movedim", destination, x.ndim)
    if len(src) != len(dst):
        raise op_error(
            "movedim",
            f"source and destination must have the same number of dims, "
            f"got {list(src)} and {list(dst)}",
        )
    perm = [-1] * x.ndim
    for s, t in zip(src, dst):
        perm[t] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return O.permute(x, *perm)


def repeat(input: Tensor, *sizes) -> Tensor:
    """Tile `x` `sizes[d]` times along each dim (leading sizes add new dims)."""
    x = O.as_tensor(input)
    reps = _ints("repeat", "repeat count", _varargs(sizes))
    if len(reps) < x.ndim:
        raise op_error(
            "repeat", f"expected at least {x.ndim} repeat counts (one per dim), got {list(reps)}"
        )
    if any(r < 0 for r in reps):
        raise op_error("repeat", f"expected non-negative repeat counts, got {list(reps)}")
    shape = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    if all(r == 1 for r in reps):
        return O.reshape(x, *shape)
    # A new size-1 dim in front of each repeated dim, broadcast to the repeat count.
    inter = [v for r, s in zip(reps, shape) for v in ((s,) if r == 1 else (1, s))]
    wide = [v for r, s in zip(reps, shape) for v in ((s,) if r == 1 else (r, s))]
    y = bind(
        P.broadcast_in_dim,
        O.reshape(x, *inter),
        dims=tuple(range(len(wide))),
        shape=tuple(wide),
    )
    return O.reshape(y, *(r * s for r, s in zip(reps, shape)))


def tile(input: Tensor, dims) -> Tensor:
    """`repeat`, with missing leading counts taken as 1."""
    x = O.as_tensor(input)
    reps = _ints("tile", "repeat count", dims)
    return repeat(x, *((1,) * (x.ndim - len(reps)) + reps))


# --------------------------------------------------------------------------- padding


def _edges(x: Tensor, d: int, lo: int, hi: int, mode: str) -> Tensor:
    """`x` extended by `lo` / `hi` elements before / after dim `d` in a non-constant mode."""
    n = x.shape[d]
    if mode == "reflect":
        left, right = slice_dim(x, d, lo, lo, -1), slice_dim(x, d, n - 2, hi, -1)
    elif mode == "circular":
        left, right = slice_dim(x, d, n - lo, lo), slice_dim(x, d, 0, hi)
    else:
        shape = list(x.shape)
        ends = []
        for at, k in ((0, lo), (n - 1, hi)):
            shape[d] = k
            edge = slice_dim(x, d, at, 1)
            ends.append(
                bind(P.broadcast_in_dim, edge, dims=tuple(range(x.ndim)), shape=tuple(shape))
            )
        left, right = ends
    parts = [p for p in (left, x, right) if p.shape[d] or p is x]
    return parts[0] if len(parts) == 1 else bind(P.concat, *parts, dim=d)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value=None) -> Tensor:
    """`torch.nn.functional.pad`: `pad` lists (before, after) pairs from the last dim backwards.

    In constant mode negative padding crops. The other modes take non-negative
    padding on any number of trailing dims (PyTorch limits them to 1-3 dims with
    batch dims in front).
    """
    x = O.as_tensor(input)
    pads = _ints("pad", "padding", pad)
    if len(pads) % 2:
        raise op_error("pad", f"padding length must be divisible by 2, got {len(pads)}")
    if len(pads) // 2 > x.ndim:
        raise op_error(
            "pad",
            f"padding length {len(pads)} is too large for an input of rank "
            f"{x.ndim} (at most {2 * x.ndim})",
        )
    if mode not in _PAD_MODES:
        raise op_error("pad", f"mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
    per_dim = {x.ndim - 1 - i: (pads[2 * i], pads[2 * i + 1]) for i in range(len(pads) // 2)}
    if mode == "constant":
        crop = {}
        for d, (lo, hi) in per_dim.items():
            n = x.shape[d] + builtins.min(lo, 0) + builtins.min(hi, 0)
            if n < 0:
                raise op_error(
                    "pad",
                    f"padding ({lo}, {hi}) of dim {d} of size {x.shape[d]} gives a negative size",
                )
            crop[d] = (-builtins.min(lo, 0), n, 1)
        x = slice_dims(x, crop)
        low = tuple(builtins.max(per_dim.get(d, (0, 0))[0], 0) for d in range(x.ndim))
        high = tuple(builtins.max(per_dim.get(d, (0, 0))[1], 0) for d in range(x.ndim))
        if not any(low) and not any(high):
            return x
        return bind(
            P.pad, x, low=low, high=high, value=0 if value is None else value, dtype=x.dtype
        )
    if value is not None and value != 0:
        raise op_error("pad", f"padding mode {mode!r} doesn't take a value argument")
    for d, (lo, hi) in sorted(per_dim.items()):
        n = x.shape[d]
        if lo < 0 or hi < 0:
            raise op_error(
                "pad", f"{mode} padding must be non-negative, got ({lo}, {hi}) for dim {d}"
            )
        too_far = {
            "reflect": (builtins.max(lo, hi) >= n, f"smaller than the size {n}"),
            "circular": (builtins.max(lo, hi) > n, f"at most the size {n}"),
            "replicate": (n == 0 and lo + hi > 0, "applied to a non-empty dim, not size 0"),
        }[mode]
        if too_far[0]:
            raise op_error("pad", f"{mode} padding ({lo}, {hi}) of dim {d} must be {too_far[1]}")
        if lo or hi:
            x = _edges(x, d, lo, hi, mode)
    return x


def _method_flip(self: Tensor, *dims) -> Tensor:
    return flip(self, *dims)


TENSOR_METHODS: dict = {
    **_indexing.TENSOR_METHODS,
    **_gather.TENSOR_METHODS,
    "flip": _method_flip,
    "roll": roll,
    "split": split,
    "chunk": chunk,
    "unbind": unbind,
    "narrow": narrow,
    "select": select,
    "repeat": repeat,
    "tile": tile,
    "movedim": movedim,
}
"""Tensor methods of the movement family (name -> function taking the tensor first); it also
holds those of ops/indexing.py and ops/gather.py, which carry their own TENSOR_METHODS."""

__all__ = [
    "cat", "concat", "concatenate", "stack", "split", "chunk", "unbind", "narrow", "select",
    "flip", "roll", "movedim", "repeat", "tile", "pad",
]  # fmt: skip
