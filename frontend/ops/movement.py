"""Data movement, indexing and creation: the slice / pad / concat / gather primitives and the
public ops built on them (PyTorch / OneFlow semantics).

Each primitive's numpy kernel sits next to the dialect op it emits. Everything
else is composite: `x[...]` is one strided `slice`, a `reshape` and (for
integer-array indices) one `gather` on the flattened indexed dims; `flip` is a
negative-stride slice; `roll`, `split`, `pad` modes and `stack` are slices and
concats; `repeat` is a broadcast between two reshapes; `one_hot`, `eye` and
`arange` compare or scale `iota`. Shapes never depend on data, except for
boolean-mask indexing and `one_hot` without `num_classes`, which work eagerly
and raise inside `flow.jit`.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr

from flow import dialect as fd

from flow.core import dtypes as _dtypes
from flow.modes import lazy as _lazy
from flow.ops import index_checks as checks
from flow.ops import basic as O
from flow import primitives as P
from flow.core.autograd import Function
from flow.primitives.registry import bind, primitive
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.core.trace import current_trace

# --------------------------------------------------------------------------- primitives


@primitive("slice", fd.SliceOp)
def slice_(x, *, start, strides, sizes):
    index = []
    for s, st, k in zip(start, strides, sizes):
        stop = s + k * st
        index.append(slice(0, 0) if k == 0 else slice(s, None if stop < 0 else stop, st))
    return x[tuple(index)]


def _scalar_attr(value, dtype: _dtypes.dtype):
    """`value` as a typed attribute of `dtype` (how flow.full and flow.pad carry scalars)."""
    if dtype.is_floating_point:
        return FloatAttr(float(value), dtype.ir_type)
    return IntegerAttr(int(bool(value)) if dtype is _dtypes.bool_ else int(value), dtype.ir_type)


@primitive(
    "pad",
    fd.PadOp,
    to_ir=lambda p: {
        "low": p["low"],
        "high": p["high"],
        "value": _scalar_attr(p["value"], p["dtype"]),
    },
)
def pad_(x, *, low, high, value, dtype):
    fill = np.array(value).astype(dtype.np_dtype)
    return np.pad(x, list(zip(low, high)), constant_values=fill)


@primitive("concat", fd.ConcatOp)
def concat_(*xs, dim):
    return np.concatenate(xs, axis=dim)


@primitive("gather", fd.GatherOp)
def gather_(x, index, *, dim):
    """`torch.gather`; an index outside `[0, size)` raises (compiled code checks it after the
    call, see frontend/_index_checks.py: the gather itself clamps)."""
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


# --------------------------------------------------------------------------- helpers


def _tensors(op: str, tensors) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise op_error(
            op, f"expected a list or tuple of tensors, got {type(tensors).__name__}", cls=TypeError
        )
    if not tensors:
        raise op_error(op, "expected a non-empty list of tensors")
    return [O._as_tensor(t) for t in tensors]


def _int(op: str, what: str, value) -> int:
    if isinstance(value, Tensor) and value.ndim == 0 and not value.is_traced:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise op_error(op, f"expected an int {what}, got {value!r}", cls=TypeError)
    return int(value)


def _ints(op: str, what: str, values) -> tuple[int, ...]:
    if not isinstance(values, (list, tuple)):
        return (_int(op, what, values),)
    return tuple(_int(op, what, v) for v in values)


def _varargs(sizes: tuple) -> tuple:
    """`f(x, 1, 2)` and `f(x, (1, 2))` both mean (1, 2), as in PyTorch."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return sizes


def _dim_of(op: str, x: Tensor, dim) -> int:
    """`dim` normalized for `x`, which must have at least one dim."""
    if x.ndim == 0:
        raise op_error(op, "cannot be applied to a 0-dim tensor", cls=IndexError)
    return O.normalize_dim(op, dim, x.ndim)


def _slice_dims(x: Tensor, spec: dict[int, tuple[int, int, int]]) -> Tensor:
    """One `flow.slice` taking (start, size, stride) on the dims in `spec`, all of the rest."""
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


def _narrow(x: Tensor, dim: int, start: int, size: int, stride: int = 1) -> Tensor:
    return _slice_dims(x, {dim: (start, size, stride)})


def _take(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """`x` with dim `dim` replaced by `x[..., index[j], ...]` for a 1-D in-range `index`.

    The index is broadcast over the other dims so that one `flow.gather` does it.
    """
    shape = list(x.shape)
    shape[dim] = index.shape[0]
    if x.ndim > 1:
        index = bind(P.broadcast_in_dim, index, dims=(dim,), shape=tuple(shape))
    return bind(gather_, x, index, dim=dim)


def _concrete(x) -> np.ndarray | None:
    """The value of a static index (list, array, eager tensor outside a trace), else None."""
    if isinstance(x, Tensor):
        return x.numpy() if x._data is not None and current_trace() is None else None
    return np.asarray(x)


def _check_in_range(op: str, values: np.ndarray, n: int, dim: int, negative_ok: bool) -> None:
    lo = -n if negative_ok else 0
    bad = values[(values < lo) | (values >= n)]
    if bad.size:
        raise op_error(
            op,
            f"index {bad.reshape(-1)[0]} is out of bounds for dim {dim} with size {n}",
            cls=IndexError,
        )


def _index_tensor(op: str, index, what: str = "index") -> Tensor:
    t = O._as_tensor(index)
    if t.dtype.kind != 1:
        raise op_error(op, f"expected an integer {what} tensor, got {t.dtype!r}", cls=TypeError)
    return t


def _index_dtype(indices, extent: int):
    """The integer dtype index arithmetic runs in: int32 when every index tensor is int32 and
    positions below `extent` fit, else int64. Keeping int32 indices int32 saves a widening
    cast that two gathers would share; on lavapipe such a shared int64 value was read back
    zero-extended from workgroup memory, so negative indices came out wrong."""
    int32 = all(t.dtype is _dtypes.int32 for t in indices) and extent < 2**31
    return _dtypes.int32 if int32 else _dtypes.int64


def _as_index(t: Tensor, extent: int) -> Tensor:
    """`t` in the dtype of `_index_dtype` (no cast when it is already that)."""
    dt = _index_dtype([t], extent)
    return t if t.dtype is dt else O.to(t, dt)


# --------------------------------------------------------------------------- indexing


def _classify(op: str, item):
    """One entry of an index tuple as (kind, value)."""
    if item is None:
        return ("new", None)
    if item is Ellipsis:
        return ("ellipsis", None)
    if isinstance(item, (bool, np.bool_)):
        return ("bool", bool(item))
    if isinstance(item, (int, np.integer)):
        return ("int", int(item))
    if isinstance(item, slice):
        return ("slice", item)
    if isinstance(item, Tensor):
        if item.dtype is _dtypes.bool_:
            return ("mask", item)
        if item.dtype.kind == 1:
            return ("array", item)
        raise op_error(
            op,
            f"tensors used as indices must be integer or bool tensors, got {item.dtype!r}",
            cls=IndexError,
        )
    if isinstance(item, (list, tuple, np.ndarray)):
        arr = np.asarray(item)
        if arr.dtype == np.bool_:
            return ("mask", arr)
        if arr.size == 0:
            arr = arr.astype(np.int64)
        if arr.dtype.kind in "iu":
            return ("array", arr.astype(np.int64))
        raise op_error(
            op, f"arrays used as indices must be integer or bool, got {item!r}", cls=IndexError
        )
    raise op_error(
        op,
        "only ints, slices, None, ..., and integer or bool tensors/arrays/lists "
        f"are valid indices, got {type(item).__name__}",
        cls=IndexError,
    )


def _expand_key(op: str, x: Tensor, key) -> list[tuple[str, object, int]]:
    """The index entries as (kind, value, dim of x) with `...` expanded and masks as arrays."""
    items = [_classify(op, k) for k in (key if isinstance(key, tuple) else (key,))]
    if builtins.sum(k == "ellipsis" for k, _ in items) > 1:
        raise op_error(op, "an index can only have a single ellipsis ('...')", cls=IndexError)
    used = builtins.sum(
        1 if k in ("int", "slice", "array") else (np.ndim(v) if k == "mask" else 0)
        for k, v in items
    )
    if used > x.ndim:
        raise op_error(
            op, f"too many indices for a tensor of rank {x.ndim}: {used} indexed", cls=IndexError
        )
    fill = [("slice", slice(None))] * (x.ndim - used)
    at = next((i for i, (k, _) in enumerate(items) if k == "ellipsis"), len(items))
    items = items[:at] + fill + items[at + 1 :]
    out: list[tuple[str, object, int]] = []
    dim = 0
    for kind, value in items:
        if kind == "mask":
            mask = _concrete(value)
            if mask is None:
                raise op_error(
                    op,
                    "indexing with a boolean mask gives a result whose shape depends on the "
                    "mask's values, which are unknown inside flow.jit; use flow.where(mask, x, "
                    "y) or x.masked_fill(mask, value) to keep the shape static",
                    cls=IndexError,
                )
            if mask.ndim == 0:
                out.append(("bool", bool(mask), dim))
                continue
            for j, m in enumerate(mask.shape):
                if m != x.shape[dim + j]:
                    raise op_error(
                        op,
                        f"the boolean mask of shape {list(mask.shape)} does not "
                        f"match dim {dim + j} of size {x.shape[dim + j]} of the "
                        f"indexed tensor of shape {list(x.shape)}",
                        cls=IndexError,
                    )
            for j, nz in enumerate(np.nonzero(mask)):
                out.append(("array", nz.astype(np.int64), dim + j))
            dim += mask.ndim
        else:
            out.append((kind, value, dim))
            dim += kind in ("int", "slice", "array")
    return out


def getitem(x: Tensor, key) -> Tensor:
    """`x[key]` with numpy's rules: basic indexing is one slice + reshape; integer arrays
    (lists, arrays, tensors; broadcast together) and boolean masks gather.

    Unlike PyTorch, negative slice steps are allowed (they reverse, as in numpy).
    """
    op = "getitem"
    items = _expand_key(op, x, key)
    advanced = any(k == "array" for k, _, _ in items)
    if advanced and any(k == "bool" for k, _, _ in items):
        raise op_error(
            op, "a bool scalar index cannot be combined with integer-array indices", cls=IndexError
        )
    spec: dict[int, tuple[int, int, int]] = {}
    kept: list[int] = []  # result shape after the slice and reshape
    arrays: list[tuple[int, object, int]] = []  # (position in kept, index, dim of x)
    empty_new: list[int] = []
    for kind, value, dim in items:
        if kind in ("new", "bool"):
            if kind == "bool" and not value:
                empty_new.append(len(kept))
            kept.append(1)
            continue
        n = x.shape[dim]
        if kind == "int" and not advanced:
            if not -n <= value < n:
                raise op_error(
                    op,
                    f"index {value} is out of bounds for dim {dim} with size {n}",
                    cls=IndexError,
                )
            spec[dim] = (value % n, 1, 1)
        elif kind == "slice":
            if value.step == 0:
                raise op_error(op, "slice step cannot be zero", cls=ValueError)
            start, stop, step = value.indices(n)
            size = len(range(start, stop, step))
            spec[dim] = (start, size, step)
            kept.append(size)
        else:  # an index array (an int becomes a 0-d one next to other arrays)
            arrays.append((len(kept), np.asarray(value) if kind == "int" else value, dim))
            kept.append(n)
    y = O.reshape(_slice_dims(x, spec), *kept)
    if empty_new:
        y = _slice_dims(y, {d: (0, 0, 1) for d in empty_new})
    return _advanced(op, y, arrays) if arrays else y


def _advanced(op: str, y: Tensor, arrays: list[tuple[int, object, int]]) -> Tensor:
    """Integer-array indexing of `y` on the dims in `arrays` (numpy's placement rule).

    Adjacent index arrays put the broadcast index shape where they stand; separated
    ones put it first. The indexed dims are flattened into one and indexed by the
    linear position, so one gather does it.
    """
    positions = [p for p, _, _ in arrays]
    sizes = [y.shape[p] for p in positions]
    shapes = [
        tuple(np.shape(a)) if not isinstance(a, Tensor) else tuple(a.shape) for _, a, _ in arrays
    ]
    try:
        bshape = np.broadcast_shapes(*shapes)
    except ValueError:
        shown = ", ".join(str(list(s)) for s in shapes)
        raise op_error(
            op,
            f"shape mismatch: index arrays could not be broadcast together with shapes {shown}",
            cls=IndexError,
        ) from None
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    if not adjacent:
        rest = [d for d in range(y.ndim) if d not in positions]
        y = O.permute(y, *positions, *rest)
        positions = list(range(len(positions)))
    pre, post = list(y.shape[: positions[0]]), list(y.shape[positions[-1] + 1 :])
    count = math.prod(bshape)
    strides = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
    static = [_concrete(a) for _, a, _ in arrays]
    for (_, _, dim), values, n in zip(arrays, static, sizes):
        if values is not None:
            _check_in_range(op, values, n, dim, negative_ok=True)
        elif n == 0 and count:
            raise op_error(op, f"cannot index dim {dim} of size 0", cls=IndexError)
    for (_, a, dim), values, n in zip(arrays, static, sizes):
        if values is None:
            checks.check_bounds(op, a, n, dim, negative_ok=True)
    wrapped = [
        None if v is None else np.where(v < 0, v + n, v).astype(np.int64)
        for v, n in zip(static, sizes)
    ]
    if all(v is not None for v in wrapped):
        linear = builtins.sum((v * s for v, s in zip(wrapped, strides)), np.zeros((), np.int64))
        index = bind(P.constant, array=np.broadcast_to(linear, bshape).reshape(-1).copy())
    else:
        index = None
        dynamic = [a for (_, a, _), v in zip(arrays, wrapped) if v is None]
        dtype = _index_dtype(dynamic, math.prod(sizes))
        for (_, a, _), v, n, s in zip(arrays, wrapped, sizes, strides):
            if v is None:
                t = a if a.dtype is dtype else O.to(a, dtype)
                t = O.where(O.lt(t, 0), O.add(t, n), t)
            else:
                t = bind(P.constant, array=v.astype(dtype.np_dtype))
            t = O.mul(t, s) if s != 1 else t
            index = t if index is None else O.add(index, t)
        index = O.reshape(O.broadcast_to(index, bshape), count)
    flat = O.reshape(y, *pre, math.prod(sizes), *post)
    return O.reshape(_take(flat, len(pre), index), *pre, *bshape, *post)


def iter_(x: Tensor):
    """Iterate over the first dim, like a sequence of `x[i]`."""
    if x.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (getitem(x, i) for i in range(x.shape[0]))


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
    return bind(concat_, *(O.to(t, dt) for _, t in parts), dim=d)


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
    x = O._as_tensor(input)
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
    return _narrow(x, d, start, length)


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """`x[..., index, ...]` along `dim` (the dim is removed)."""
    x = O._as_tensor(input)
    d = _dim_of("select", x, dim)
    i, n = _int("select", "index", index), x.shape[d]
    if not -n <= i < n:
        raise op_error(
            "select", f"index {i} is out of range for dim {d} of size {n}", cls=IndexError
        )
    out = _narrow(x, d, i % n, 1)
    return O.reshape(out, *(s for j, s in enumerate(out.shape) if j != d))


def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of `split_size` along `dim` (the last may be smaller), or of the given sizes."""
    x = O._as_tensor(tensor)
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
        out.append(_narrow(x, d, at, s))
        at += s
    return tuple(out)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """`chunks` pieces of size ceil(n / chunks) (fewer when that covers the dim sooner)."""
    x = O._as_tensor(input)
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
    x = O._as_tensor(input)
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
    x = O._as_tensor(input)
    ds = _dim_list("flip", _varargs(dims), x.ndim)
    return _slice_dims(x, {d: (x.shape[d] - 1, x.shape[d], -1) for d in ds if x.ndim})


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """Shift elements along `dims` cyclically; with no dims, over the flattened tensor."""
    x = O._as_tensor(input)
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
            x = bind(concat_, _narrow(x, d, n - s, s), _narrow(x, d, 0, n - s), dim=d)
    return x


def movedim(input: Tensor, source, destination) -> Tensor:
    """Move dims `source` to positions `destination`; the others keep their order."""
    x = O._as_tensor(input)
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
    x = O._as_tensor(input)
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
    x = O._as_tensor(input)
    reps = _ints("tile", "repeat count", dims)
    return repeat(x, *((1,) * (x.ndim - len(reps)) + reps))


# --------------------------------------------------------------------------- gathering


def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
    """`out[i][j] = input[index[i][j]][j]` for dim 0 (torch.gather)."""
    x, idx = O._as_tensor(input), _index_tensor("gather", index)
    if idx.ndim != x.ndim:
        raise op_error(
            "gather",
            f"index must have the same rank as input, got index of shape "
            f"{list(idx.shape)} and input of shape {list(x.shape)}",
        )
    d = O.normalize_dim("gather", dim, x.ndim)
    for j in range(x.ndim):
        if j != d and idx.shape[j] > x.shape[j]:
            raise op_error(
                "gather",
                f"expected index {list(idx.shape)} to be no larger than "
                f"input {list(x.shape)} apart from dim {d} (dim {j})",
            )
    if idx._buf.__class__ is _lazy.LazyValue and idx._buf.value is None:
        # flow.lazy() with a pending index: compute it to check it here, as eager does
        _check_in_range("gather", idx.numpy(), x.shape[d] if x.ndim else 1, d,
                        negative_ok=False)  # fmt: skip
    if x.ndim == 0:
        checks.check_bounds("gather", idx, 1, 0, negative_ok=False)
        return O.reshape(bind(gather_, O.reshape(x, 1), O.reshape(idx, 1), dim=0))
    checks.check_bounds("gather", idx, x.shape[d], d, negative_ok=False)
    return bind(gather_, x, idx, dim=d)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """Gather along `dim` after broadcasting input and indices in the other dims; with no dim,
    over the flattened tensors."""
    x, idx = O._as_tensor(input), _index_tensor("take_along_dim", indices, "indices")
    if dim is None:
        return gather(O.flatten(x), 0, O.flatten(idx))
    if idx.ndim != x.ndim:
        raise op_error(
            "take_along_dim",
            f"input and indices must have the same rank, got {x.ndim} and {idx.ndim}",
        )
    d = O.normalize_dim("take_along_dim", dim, x.ndim)
    xs, js = list(x.shape), list(idx.shape)
    xs[d], js[d] = 1, 1
    common = O.broadcast_shapes("take_along_dim", xs, js)
    x = O.broadcast_to(x, [x.shape[d] if j == d else s for j, s in enumerate(common)])
    idx = O.broadcast_to(idx, [idx.shape[d] if j == d else s for j, s in enumerate(common)])
    return gather(x, d, idx)


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """The entries `index` (a 1-D integer tensor) of dim `dim`, in that order."""
    values = _concrete(index)
    x, idx = O._as_tensor(input), _index_tensor("index_select", index)
    if idx.ndim > 1:
        raise op_error("index_select", f"expected a 0-D or 1-D index, got shape {list(idx.shape)}")
    if x.ndim == 0:
        return O.reshape(index_select(O.reshape(x, 1), 0, idx), *idx.shape)
    d = O.normalize_dim("index_select", dim, x.ndim)
    if values is not None:
        _check_in_range("index_select", values, x.shape[d], d, negative_ok=False)
    elif x.shape[d] == 0 and idx.numel():
        raise op_error("index_select", f"cannot select from dim {d} of size 0", cls=IndexError)
    else:
        checks.check_bounds("index_select", idx, x.shape[d], d, negative_ok=False)
    return _take(x, d, O.reshape(_as_index(idx, x.shape[d]), idx.numel()))


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` (num_embeddings x dim) at the integer `input`: shape input.shape + [dim].

    `padding_idx` only changes training (its row gets no gradient); the lookup is the same.
    """
    values = _concrete(input)
    idx, w = _index_tensor("embedding", input, "input"), O._as_tensor(weight)
    if w.ndim != 2:
        raise op_error("embedding", f"weight must be 2-D, got shape {list(w.shape)}")
    num = w.shape[0]
    if padding_idx is not None and not -num <= _int("embedding", "padding_idx", padding_idx) < num:
        raise op_error(
            "embedding",
            f"padding_idx {padding_idx} must be within [-{num}, {num}) (num_embeddings)",
        )
    if values is not None:
        _check_in_range("embedding", values, num, 0, negative_ok=False)
    elif num == 0 and idx.numel():
        raise op_error("embedding", "cannot look up in an empty weight", cls=IndexError)
    else:
        checks.check_bounds("embedding", idx, num, 0, negative_ok=False)
    flat = O.reshape(_as_index(idx, num), idx.numel())
    pad_row = None if padding_idx is None else int(padding_idx) % num
    rows = _Lookup.apply(w, flat, pad_row) if w.requires_grad else _take(w, 0, flat)
    return O.reshape(rows, *idx.shape, w.shape[1])


class _Lookup(Function):
    """Row lookup whose backward is one matmul, onehot(ids)^T @ grad (not a gather VJP
    over every embedding dim); the padding row gets no gradient, like PyTorch."""

    @staticmethod
    def forward(ctx, weight, ids, pad_row):
        ctx.save_for_backward(ids)
        ctx.num, ctx.pad_row = weight.shape[0], pad_row
        return _take(weight, 0, ids)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        hits_shape = (ctx.num, ids.shape[0])
        rows = bind(P.iota, dim=0, shape=hits_shape, dtype=_dtypes.int64)
        ids_b = bind(P.broadcast_in_dim, ids, dims=(1,), shape=hits_shape)
        hits = bind(P.compare, rows, ids_b, direction="eq")
        if ctx.pad_row is not None:
            hits = O.where(O.ne(rows, ctx.pad_row), hits, False)
        return O.matmul(O.to(hits, grad.dtype), grad), None, None


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """`value` where the bool `mask` (broadcast against input) is true, else `input`."""
    x, m = O._as_tensor(input), O._as_tensor(mask)
    if m.dtype is not _dtypes.bool_:
        raise op_error("masked_fill", f"expected a bool mask, got {m.dtype!r}", cls=TypeError)
    if isinstance(value, Tensor):
        if value.ndim:
            raise op_error(
                "masked_fill", f"expected a 0-dim value tensor, got shape {list(value.shape)}"
            )
        v = O.to(value, x.dtype)
    elif isinstance(value, (bool, int, float, np.number, np.bool_)):
        v = O.full((), value, x.dtype)
    else:
        raise op_error(
            "masked_fill",
            f"expected a number or a 0-dim tensor value, got {type(value).__name__}",
            cls=TypeError,
        )
    return O.where(m, v, x)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 tensor of shape `tensor.shape + [num_classes]` with 1 at each class index.

    `num_classes=-1` takes max + 1 from the data, so it works eagerly only; inside
    `flow.jit`, out-of-range classes raise after the call (frontend/_index_checks.py).
    """
    values = _concrete(tensor)
    x = _index_tensor("one_hot", tensor, "class")
    num_classes = _int("one_hot", "num_classes", num_classes)
    if num_classes == -1:
        if values is None:
            raise op_error(
                "one_hot",
                "num_classes=-1 takes the class count from the data, "
                "which is unknown inside flow.jit; pass num_classes",
            )
        if values.size == 0:
            raise op_error("one_hot", "cannot infer num_classes from an empty tensor")
        num_classes = int(values.max()) + 1
    if num_classes < 0:
        raise op_error("one_hot", f"num_classes must be -1 or non-negative, got {num_classes}")
    if values is not None and values.size:
        if values.min() < 0:
            raise op_error("one_hot", f"class values must be non-negative, got {values.min()}")
        if values.max() >= num_classes:
            raise op_error(
                "one_hot",
                f"class values must be smaller than num_classes "
                f"({num_classes}), got {values.max()}",
            )
    elif values is None:
        checks.check_classes("one_hot", x, num_classes)
    shape = (*x.shape, num_classes)
    classes = bind(P.iota, dim=len(shape) - 1, shape=shape, dtype=_dtypes.int64)
    wide = O.broadcast_to(O.unsqueeze(O.to(x, _dtypes.int64), -1), shape)
    return O.to(O.eq(wide, classes), _dtypes.int64)


# --------------------------------------------------------------------------- padding


def _edges(x: Tensor, d: int, lo: int, hi: int, mode: str) -> Tensor:
    """`x` extended by `lo` / `hi` elements before / after dim `d` in a non-constant mode."""
    n = x.shape[d]
    if mode == "reflect":
        left, right = _narrow(x, d, lo, lo, -1), _narrow(x, d, n - 2, hi, -1)
    elif mode == "circular":
        left, right = _narrow(x, d, n - lo, lo), _narrow(x, d, 0, hi)
    else:
        shape = list(x.shape)
        ends = []
        for at, k in ((0, lo), (n - 1, hi)):
            shape[d] = k
            edge = _narrow(x, d, at, 1)
            ends.append(
                bind(P.broadcast_in_dim, edge, dims=tuple(range(x.ndim)), shape=tuple(shape))
            )
        left, right = ends
    parts = [p for p in (left, x, right) if p.shape[d] or p is x]
    return parts[0] if len(parts) == 1 else bind(concat_, *parts, dim=d)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value=None) -> Tensor:
    """`torch.nn.functional.pad`: `pad` lists (before, after) pairs from the last dim backwards.

    In constant mode negative padding crops. The other modes take non-negative
    padding on any number of trailing dims (PyTorch limits them to 1-3 dims with
    batch dims in front).
    """
    x = O._as_tensor(input)
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
        x = _slice_dims(x, crop)
        low = tuple(builtins.max(per_dim.get(d, (0, 0))[0], 0) for d in range(x.ndim))
        high = tuple(builtins.max(per_dim.get(d, (0, 0))[1], 0) for d in range(x.ndim))
        if not any(low) and not any(high):
            return x
        return bind(pad_, x, low=low, high=high, value=0 if value is None else value, dtype=x.dtype)
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


# --------------------------------------------------------------------------- creation


def _number(op: str, what: str, v):
    if isinstance(v, Tensor) and v.ndim == 0 and not v.is_traced:
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise op_error(op, f"expected a number for {what}, got {v!r}", cls=TypeError)
    return v.item() if isinstance(v, np.generic) else v


def _compute_dtype(dt: _dtypes.dtype) -> _dtypes.dtype:
    """Half-precision values are computed in float32, integers in int64, then cast."""
    if dt.is_floating_point:
        return dt if dt in (_dtypes.float32, _dtypes.float64) else _dtypes.float32
    return _dtypes.int64


def arange(start=0, end=None, step=1, *, dtype=None, placement=None, sbp=None) -> Tensor:
    """`[start, start + step, ...)` below `end`: ceil((end - start) / step) values; int64 when
    every bound is an int, else float32 (unless `dtype` says otherwise)."""
    if end is None:
        start, end = 0, start
    start, end = _number("arange", "start", start), _number("arange", "end", end)
    step = _number("arange", "step", step)
    if step == 0:
        raise op_error("arange", "step must be nonzero")
    if (end - start) * step < 0:
        raise op_error(
            "arange",
            f"upper bound and lower bound are inconsistent with the step "
            f"sign (start={start}, end={end}, step={step})",
        )
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise op_error("arange", f"bounds must be finite, got start={start}, end={end}")
    ints = all(isinstance(v, int) for v in (start, end, step))
    dt = (
        _dtypes.as_dtype(dtype)
        if dtype is not None
        else (_dtypes.int64 if ints else _dtypes.DEFAULT_FLOAT)
    )
    n = -((start - end) // step) if ints else math.ceil((end - start) / step)
    work = _compute_dtype(dt) if ints or dt.is_floating_point else _dtypes.float64
    out = bind(P.iota, dim=0, shape=(n,), dtype=work)
    if step != 1:
        out = O.mul(out, step)
    if start != 0:
        out = O.add(out, start)
    return O._globalize(O.to(out, dt), placement, sbp)


def linspace(start, end, steps: int, *, dtype=None) -> Tensor:
    """`steps` evenly spaced values from `start` to `end` inclusive (float32 by default).

    Like PyTorch, the first half counts up from `start` and the second half down
    from `end`, so both ends are exact.
    """
    start, end = _number("linspace", "start", start), _number("linspace", "end", end)
    steps = _int("linspace", "steps", steps)
    if steps < 0:
        raise op_error("linspace", f"number of steps must be non-negative, got {steps}")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.DEFAULT_FLOAT
    work = _dtypes.float64 if dt is _dtypes.float64 else _dtypes.float32
    if steps <= 1:
        return O.full((steps,), start, dt)
    step = (end - start) / (steps - 1)
    i = bind(P.iota, dim=0, shape=(steps,), dtype=work)
    up = O.add(O.mul(i, step), start)
    down = O.sub(end, O.mul(O.sub(steps - 1, i), step))
    return O.to(O.where(O.lt(i, steps // 2), up, down), dt)


def eye(n: int, m: int | None = None, *, dtype=None) -> Tensor:
    """An n x m matrix with ones on the diagonal (float32 by default)."""
    n = _int("eye", "n", n)
    m = n if m is None else _int("eye", "m", m)
    if n < 0 or m < 0:
        raise op_error("eye", f"n and m must be non-negative, got n={n}, m={m}")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.DEFAULT_FLOAT
    rows = bind(P.iota, dim=0, shape=(n, m), dtype=_dtypes.int64)
    cols = bind(P.iota, dim=1, shape=(n, m), dtype=_dtypes.int64)
    return O.to(O.eq(rows, cols), dt)


def full_like(input: Tensor, fill_value, *, dtype=None) -> Tensor:
    """A tensor of `input`'s shape (and dtype, unless given) filled with `fill_value`."""
    x = O._as_tensor(input)
    return O.full(tuple(x.shape), fill_value, dtype if dtype is not None else x.dtype)


def _method_flip(self: Tensor, *dims) -> Tensor:
    return flip(self, *dims)


TENSOR_METHODS: dict = {
    "__getitem__": getitem,
    "__iter__": iter_,
    "flip": _method_flip,
    "roll": roll,
    "gather": gather,
    "index_select": index_select,
    "take_along_dim": take_along_dim,
    "masked_fill": masked_fill,
    "split": split,
    "chunk": chunk,
    "unbind": unbind,
    "narrow": narrow,
    "select": select,
    "repeat": repeat,
    "tile": tile,
    "movedim": movedim,
}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = [
    "cat",
    "concat",
    "concatenate",
    "stack",
    "split",
    "chunk",
    "unbind",
    "narrow",
    "select",
    "flip",
    "roll",
    "movedim",
    "repeat",
    "tile",
    "gather",
    "take_along_dim",
    "index_select",
    "masked_fill",
    "one_hot",
    "pad",
    "embedding",
    "arange",
    "linspace",
    "eye",
    "full_like",
]


# --------------------------------------------------------------------------- VJP rules


def _zeros_of(t: Tensor) -> Tensor:
    return bind(P.full, value=0, shape=tuple(t.shape), dtype=t.dtype)


def _pad_dim(g: Tensor, d: int, low: int, high: int) -> Tensor:
    """Zero-pad (or, for negative amounts, crop) dim `d` of `g`."""
    if low < 0 or high < 0:
        n = g.shape[d]
        start, stop = max(-low, 0), n - max(-high, 0)
        g = _narrow(g, d, start, stop - start)
        low, high = max(low, 0), max(high, 0)
    if low == 0 and high == 0:
        return g
    lows, highs = [0] * g.ndim, [0] * g.ndim
    lows[d], highs[d] = low, high
    return bind(pad_, g, low=tuple(lows), high=tuple(highs), value=0, dtype=g.dtype)


def _slice_vjp(ct, x, out, *, start, strides, sizes):
    """Scatter the slice's cotangent back into zeros of `x`'s shape, one dim at a time."""
    if any(k == 0 for k in sizes):
        return (_zeros_of(x),)
    g = ct
    for d, (s, st, k) in enumerate(zip(start, strides, sizes)):
        if st < 0:  # reverse, so positions run upward from the last element read
            g = _narrow(g, d, k - 1, k, -1)
            s, st = s + (k - 1) * st, -st
        if st > 1:  # spread the k values st apart: (.., k, 1, ..) -> pad -> (.., k*st, ..)
            shape = list(g.shape)
            g = O.reshape(g, *shape[: d + 1], 1, *shape[d + 1 :])
            g = _pad_dim(g, d + 1, 0, st - 1)
            g = O.reshape(g, *shape[:d], k * st, *shape[d + 1 :])
            g = _narrow(g, d, 0, (k - 1) * st + 1)
        g = _pad_dim(g, d, s, x.shape[d] - s - g.shape[d])
    return (g,)


def _pad_vjp(ct, x, out, *, low, high, value, dtype):
    g = ct
    for d, lo in enumerate(low):
        g = _narrow(g, d, lo, x.shape[d])
    return (g,)


def _concat_vjp(ct, *xs, out, dim):
    grads, offset = [], 0
    for x in xs:
        grads.append(_narrow(ct, dim, offset, x.shape[dim]))
        offset += x.shape[dim]
    return tuple(grads)


def _gather_vjp(ct, x, index, out, *, dim):
    """Scatter-add of the cotangent: a one-hot comparison of `index` with every position of
    `x` along `dim`, contracted with the cotangent (memory: index elements x size of `dim`)."""
    n = x.shape[dim]
    last = lambda t: movedim(t, dim, -1)  # noqa: E731
    idx, g = last(index), last(ct)  # [..., I]
    hits_shape = (*idx.shape, n)
    positions = bind(P.iota, dim=len(hits_shape) - 1, shape=hits_shape, dtype=_dtypes.int64)
    idx = bind(P.broadcast_in_dim, O.to(idx, _dtypes.int64), dims=tuple(range(idx.ndim)),
               shape=hits_shape)  # fmt: skip
    onehot = O.to(bind(P.compare, idx, positions, direction="eq"), g.dtype)  # [..., I, n]
    summed = O.reshape(O.matmul(O.reshape(g, *g.shape[:-1], 1, g.shape[-1]), onehot),
                     *g.shape[:-1], n)  # [..., n]  # fmt: skip
    grad = movedim(summed, -1, dim)
    for d in range(x.ndim):  # index may cover only a leading block of the other dims
        if d != dim and grad.shape[d] != x.shape[d]:
            grad = _pad_dim(grad, d, 0, x.shape[d] - grad.shape[d])
    return grad, None


slice_.vjp = _slice_vjp
pad_.vjp = _pad_vjp
concat_.vjp = _concat_vjp
gather_.vjp = _gather_vjp
