"""Tensors from data and fills: `flow.tensor`, `from_numpy`, `from_dlpack`, `full`, `zeros`,
`ones` and their `_like` forms, plus `as_tensor`, how every op accepts lists and numbers.

They import nothing of ops/, so ops/basic.py (which re-exports them) and every other ops
module can build on them.
"""

from __future__ import annotations

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.args import array_from_data
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- from data and fills


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new eager tensor holding a copy of `data` (nested lists, scalars, numpy arrays)."""
    t = _tensor_from(data, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def _tensor_from(data, dtype) -> Tensor:
    if isinstance(data, Tensor):
        data = data.numpy()
    arr = array_from_data(data)
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype)
    elif arr.dtype.kind == "f" and not isinstance(data, np.ndarray):
        dt = _dtypes.DEFAULT_FLOAT
    elif arr.dtype.kind in "iu" and not isinstance(data, np.ndarray):
        dt = _dtypes.DEFAULT_INT
    else:
        dt = _dtypes.as_dtype(arr.dtype)
    return Tensor._eager(np.array(arr, dtype=dt.np_dtype, order="C"))


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing memory with a numpy array."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(arr).__name__}")
    _dtypes.as_dtype(arr.dtype)
    return Tensor._eager(arr)


def from_dlpack(ext) -> Tensor:
    """A tensor sharing memory with any DLPack producer (numpy, PyTorch, JAX arrays, ...)."""
    try:
        arr = np.from_dlpack(ext)
    except (TypeError, BufferError, RuntimeError) as err:
        raise TypeError(f"from_dlpack: cannot import {type(ext).__name__}: {err}") from None
    _dtypes.as_dtype(arr.dtype)
    return Tensor._eager(arr)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    return as_tensor(input).numel()


def shape_arg(op: str, size) -> tuple[int, ...]:
    """A creation op's `*size`: `f(2, 3)` or `f((2, 3))`, non-negative ints."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise op_error(
                op,
                f"expected a shape of non-negative ints, got {list(size)}",
                cls=TypeError if not isinstance(s, (int, np.integer)) else ValueError,
            )
    return tuple(int(s) for s in size)


def full(size, fill_value, dtype=None, *, placement=None, sbp=None) -> Tensor:
    """A tensor filled with `fill_value`; global when `placement` and `sbp` are given."""
    shape = shape_arg("full", tuple(size) if isinstance(size, (tuple, list)) else (size,))
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.as_dtype(type(fill_value))
    out = bind(P.full, value=fill_value, shape=shape, dtype=dt)
    return globalize(out, placement, sbp)


def globalize(value: Tensor, placement, sbp) -> Tensor:
    """`value` (the same on every rank) as a global tensor when a placement or sbp is given."""
    if placement is None and sbp is None:
        return value
    from flow.distributed.global_tensor import from_global_value

    return from_global_value(value, placement, sbp)


def zeros(*size, dtype=None, placement=None, sbp=None) -> Tensor:
    shape = shape_arg("zeros", size)
    return full(shape, 0, dtype or _dtypes.DEFAULT_FLOAT, placement=placement, sbp=sbp)


def ones(*size, dtype=None, placement=None, sbp=None) -> Tensor:
    shape = shape_arg("ones", size)
    return full(shape, 1, dtype or _dtypes.DEFAULT_FLOAT, placement=placement, sbp=sbp)


def full_like(input: Tensor, fill_value, *, dtype=None) -> Tensor:
    """A tensor like `input` filled with `fill_value`: its shape, its dtype unless `dtype` is
    given, and for a global `input` its placement and SBP (each rank holds its shard)."""
    x = as_tensor(input)
    dt = dtype if dtype is not None else x.dtype
    if x.is_global:
        return full(tuple(x.shape), fill_value, dt, placement=x.placement, sbp=x.sbp)
    return full(tuple(x.shape), fill_value, dt)


def zeros_like(input: Tensor, dtype=None) -> Tensor:
    return full_like(input, 0, dtype=dtype)


def ones_like(input: Tensor, dtype=None) -> Tensor:
    return full_like(input, 1, dtype=dtype)


def as_tensor(x) -> Tensor:
    """`x` itself when it is a Tensor, else `flow.tensor(x)` (how ops accept lists and numbers)."""
    return x if isinstance(x, Tensor) else tensor(x)


__all__ = [
    "tensor", "from_numpy", "from_dlpack", "is_tensor", "numel", "full", "zeros", "ones",
    "full_like", "zeros_like", "ones_like",
]  # fmt: skip
