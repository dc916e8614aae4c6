"""Normalizing user arguments (dims, shapes, data for `flow.tensor`, `to()` targets) in one
place, so that a bad argument gets one message naming the op, what it got and what it
expects, instead of whatever Python or numpy raises deep inside."""

from __future__ import annotations

import builtins
import warnings
from typing import Any

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.errors import op_error

_INT64 = np.iinfo(np.int64)


def describe(value: Any) -> str:
    """`float 1.5`, `str 'a'`: a value with its type, for messages."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def is_int(value: Any) -> bool:
    """An int-like argument (int or numpy integer, not bool)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def normalize_dim(op: str, dim: Any, ndim: int) -> int:
    """`dim` as an index in [0, ndim) (a 0-d tensor accepts 0 and -1)."""
    if not is_int(dim):
        raise op_error(op, f"dim must be an int, got {describe(dim)}", cls=TypeError)
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise op_error(op, f"dim {dim} is out of range for a tensor of rank {ndim} "
                           f"(expected [{-n}, {n - 1}])", cls=IndexError)  # fmt: skip
    return int(dim) % n


def dims_arg(op: str, dim: Any, ndim: int) -> tuple[int, ...]:
    """A reduction's `dim`: None (every dim), an int, or a tuple/list of ints; normalized,
    without repeats."""
    if dim is None:
        return tuple(range(ndim))
    if is_int(dim):
        dims: tuple = (dim,)
    elif isinstance(dim, (tuple, list)) and builtins.all(is_int(d) for d in dim):
        dims = tuple(dim)
    else:
        raise op_error(op, f"dim must be an int or a tuple of ints, got {describe(dim)}",
                       cls=TypeError)  # fmt: skip
    out = tuple(normalize_dim(op, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise op_error(op, f"dim {list(out)} appears multiple times")
    return out


def sizes_arg(op: str, sizes: tuple) -> list[int]:
    """`reshape(2, 3)` / `reshape((2, 3))` sizes: ints, -1 allowed (checked by the caller)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    for i, s in enumerate(sizes):
        if not is_int(s):
            raise op_error(op, f"shape must be ints, got {describe(s)} at position {i} of "
                               f"{list(sizes)}", cls=TypeError)  # fmt: skip
        if s < -1:
            raise op_error(op, f"shape {list(sizes)} has a negative size {s} (only -1, "
                               "'infer this size', is allowed)")  # fmt: skip
    return [int(s) for s in sizes]


def array_from_data(data: Any) -> np.ndarray:
    """`flow.tensor(data)`'s numpy array, with a clear error for data no flow dtype holds:
    ints beyond int64, ragged nesting, strings, None, complex numbers, other objects."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.VisibleDeprecationWarning)
            arr = np.array(data)
    except OverflowError:
        arr = np.array(data, dtype=object)
    except (ValueError, np.exceptions.VisibleDeprecationWarning):
        raise op_error("tensor", "data is ragged: nested sequences must have equal lengths at "
                                 f"each level, got {describe(data)}") from None  # fmt: skip
    if arr.dtype.kind in "OUSVcmM":
        _reject(arr, data)
    if arr.dtype.kind in "uf" and arr.size and not isinstance(data, np.ndarray):
        big = float(np.abs(arr).max() if arr.dtype.kind == "f" else arr.max())
        if big >= 2.0**63:  # numpy turns ints beyond int64 into uint64 or float64
            _check_ints(data)
    return arr


def _check_ints(data: Any) -> None:
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif is_int(v) and not _INT64.min <= v <= _INT64.max:
            raise op_error("tensor", f"the integer {v} does not fit in int64 (range "
                           f"[{_INT64.min}, {_INT64.max}]); pass it as a float "
                           "(or dtype=flow.float64) to store it approximately",
                           cls=OverflowError)  # fmt: skip


def _reject(arr: np.ndarray, data: Any) -> None:
    if arr.dtype.kind in "USV":
        what = "strings (or bytes)"
    elif arr.dtype.kind == "c":
        what = "complex numbers"
    elif arr.dtype.kind in "mM":
        what = "dates or time deltas"
    else:
        _check_ints(data)
        for v in arr.reshape(-1):
            if not isinstance(v, (bool, int, float, np.number, np.bool_)):
                raise op_error("tensor", f"cannot hold {describe(v)}: data must be numbers, "
                               "bools, nested lists of them, numpy arrays or tensors",
                               cls=TypeError)  # fmt: skip
        what = "values of mixed kinds"
    raise op_error("tensor", f"cannot hold {what} ({describe(data)}); supported dtypes: "
                   f"{', '.join(d.name for d in _dtypes.ALL_DTYPES)}", cls=TypeError)  # fmt: skip


def to_args(args: tuple, dtype: Any, device: Any) -> tuple[Any, Any]:
    """`Tensor.to(*args)`'s (dtype, device): each positional argument is a tensor (its
    dtype), a device (a `flow.device` or a string naming a device type) or a dtype."""
    from flow.core.device import _TARGETS
    from flow.core.device import device as device_cls
    from flow.core.tensor import Tensor

    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, device_cls) or (isinstance(a, str) and a.split(":")[0] in _TARGETS):
            device = a
        else:
            try:
                dtype = _dtypes.as_dtype(a)
            except TypeError:
                raise op_error("to", f"{describe(a)} is neither a device type "
                               f"({', '.join(_TARGETS)}; e.g. 'cuda:0') nor a dtype "
                               f"({', '.join(d.name for d in _dtypes.ALL_DTYPES)})",
                               cls=TypeError) from None  # fmt: skip
    if dtype is not None:
        try:
            dtype = _dtypes.as_dtype(dtype)
        except TypeError:
            raise op_error("to", f"dtype= {describe(dtype)} is not a dtype (expected one of: "
                           f"{', '.join(d.name for d in _dtypes.ALL_DTYPES)})",
                           cls=TypeError) from None  # fmt: skip
    return dtype, device


def cuda_device(index: Any) -> Any:
    """`Tensor.cuda(index)`'s device: None (the default cuda device), an int index, or a
    cuda device ('cuda:1' or a `flow.device`)."""
    from flow.core.device import device as device_cls

    if index is None:
        return "cuda"
    if is_int(index) and index >= 0:
        return f"cuda:{int(index)}"
    if isinstance(index, (str, device_cls)) and str(index).split(":")[0] == "cuda":
        return index
    raise op_error("cuda", f"device must be an index >= 0 or a cuda device such as 'cuda:1', "
                           f"got {describe(index)}", cls=TypeError)  # fmt: skip
