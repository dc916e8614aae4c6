"""Indexing: `x[key]` with numpy's rules, iteration, `masked_fill`, and the index helpers the
gathering ops share (static index values, range checks, the dtype index arithmetic runs in).

`x[...]` is one strided `slice`, a `reshape` and (for integer-array indices) one `gather`
on the flattened indexed dims. Shapes never depend on data, except for boolean-mask
indexing, which works eagerly and raises inside `flow.jit`.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.ops import basic as O
from flow.ops import index_checks as checks
from flow.primitives.movement import slice_dims
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- argument helpers


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


# --------------------------------------------------------------------------- index helpers


def _take(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """`x` with dim `dim` replaced by `x[..., index[j], ...]` for a 1-D in-range `index`.

    The index is broadcast over the other dims so that one `flow.gather` does it.
    """
    shape = list(x.shape)
    shape[dim] = index.shape[0]
    if x.ndim > 1:
        index = bind(P.broadcast_in_dim, index, dims=(dim,), shape=tuple(shape))
    return bind(P.gather, x, index, dim=dim)


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
    t = O.as_tensor(index)
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
    y = O.reshape(slice_dims(x, spec), *kept)
    if empty_new:
        y = slice_dims(y, {d: (0, 0, 1) for d in empty_new})
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


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """`value` where the bool `mask` (broadcast against input) is true, else `input`."""
    x, m = O.as_tensor(input), O.as_tensor(mask)
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


TENSOR_METHODS: dict = {"__getitem__": getitem, "__iter__": iter_, "masked_fill": masked_fill}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = ["masked_fill"]
