"""Tensors from data and fills: `flow.tensor`, `from_numpy`, `from_dlpack`, `full`, `zeros`,
`ones`, `empty` and their `_like` forms, plus `as_tensor`, how every op accepts lists and numbers.

`created` applies the keywords every creation op takes (OneFlow's `device`, `placement`, `sbp`
and `requires_grad`; `pin_memory` is accepted and ignored where OneFlow takes it), and
`like_args` the defaults a `*_like` op takes from its input.

They import nothing of ops/, so ops/basic.py (which re-exports them) and every other ops
module can build on them.
"""

from __future__ import annotations

import numpy as np

from flow import primitives as P
from flow.core import device as _device
from flow.core import dtypes as _dtypes
from flow.core.args import array_from_data
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- from data and fills


def tensor(data, dtype=None, device=None, requires_grad: bool = False, placement=None,
           sbp=None, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, scalars, numpy arrays, tensors);
    global when `placement` and `sbp` are given (`data` is the global value)."""
    return created("tensor", _tensor_from(data, dtype), device=device,
                   requires_grad=requires_grad, placement=placement, sbp=sbp)  # fmt: skip


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
    return Tensor._eager(np.asarray(_dtypes.astype(arr, dt), order="C"))


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


def created(op: str, out: Tensor, *, device=None, requires_grad: bool = False,
            placement=None, sbp=None) -> Tensor:  # fmt: skip
    """A creation op's result with OneFlow's common keywords applied: global on `placement`
    with `sbp` (`out` being the global value, the same on every rank), or placed on `device`
    as `Tensor.to(device)` places it (inside a traced function the device is only checked),
    then a leaf that requires grad when `requires_grad` (floating-point dtypes only)."""
    if placement is not None or sbp is not None:
        if device is not None:
            raise op_error(op, f"got device={str(device)!r} and a placement: a local tensor "
                               f"takes device=, a global one placement= and sbp=")  # fmt: skip
        from flow.distributed.global_tensor import from_global_value

        out = from_global_value(out, placement, sbp)
    elif device is not None:
        dev = _device.require(_device.as_device(device))
        if out._trace is None:
            out._device = None if dev.type == "cpu" else dev
    if requires_grad:
        try:
            out.requires_grad = True
        except RuntimeError as err:
            raise op_error(op, str(err), cls=RuntimeError) from None
    return out


def like_args(input, dtype, device, placement, sbp) -> tuple[Tensor, _dtypes.dtype, dict]:
    """A `*_like` op's input as a tensor, its dtype and the keywords of `created`: the input's
    dtype, and its device (or, for a global input, its placement and SBP) unless given."""
    x = as_tensor(input)
    dt = x.dtype if dtype is None else _dtypes.as_dtype(dtype)
    if x.is_global and device is None:
        placement = x.placement if placement is None else placement
        sbp = x.sbp if sbp is None else sbp
    elif placement is None and sbp is None and device is None:
        device = _device.of(x)
    return x, dt, {"device": device, "placement": placement, "sbp": sbp}


def full(size, fill_value, dtype=None, *, device=None, placement=None, sbp=None,
         requires_grad: bool = False, pin_memory: bool = False) -> Tensor:  # fmt: skip
    """A tensor filled with `fill_value`; global when `placement` and `sbp` are given."""
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.as_dtype(type(fill_value))
    return _filled("full", (size,), fill_value, dt, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def _filled(op: str, size, value, dtype, **kwargs) -> Tensor:
    out = bind(P.full, value=value, shape=shape_arg(op, size),
               dtype=_dtypes.as_dtype(dtype or _dtypes.DEFAULT_FLOAT))  # fmt: skip
    return created(op, out, **kwargs)


def zeros(*size, dtype=None, device=None, placement=None, sbp=None, requires_grad: bool = False,
          pin_memory: bool = False) -> Tensor:  # fmt: skip
    return _filled("zeros", size, 0, dtype, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def ones(*size, dtype=None, device=None, placement=None, sbp=None, requires_grad: bool = False,
         pin_memory: bool = False) -> Tensor:  # fmt: skip
    return _filled("ones", size, 1, dtype, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def empty(*size, dtype=None, device=None, placement=None, sbp=None, requires_grad: bool = False,
          pin_memory: bool = False) -> Tensor:  # fmt: skip
    """A tensor whose values are unspecified (zeros here: host memory is cheap to fill)."""
    return _filled("empty", size, 0, dtype, device=device, placement=placement, sbp=sbp,
                   requires_grad=requires_grad)  # fmt: skip


def _filled_like(op: str, input, value, dtype, device, placement, sbp, requires_grad,
                 size=None) -> Tensor:  # fmt: skip
    """Filled with `value`, of `input`'s shape (or `size`) and its `like_args` defaults."""
    x, dt, where = like_args(input, dtype, device, placement, sbp)
    shape = tuple(x.shape) if size is None else shape_arg(op, size)
    out = bind(P.full, value=value, shape=shape, dtype=dt)
    return created(op, out, requires_grad=requires_grad, **where)


def full_like(input: Tensor, fill_value, dtype=None, *, device=None, placement=None, sbp=None,
              requires_grad: bool = False) -> Tensor:  # fmt: skip
    """A tensor like `input` filled with `fill_value`: its shape, and its dtype, device (for a
    global `input`: placement and SBP, each rank holding its shard) unless given."""
    return _filled_like("full_like", input, fill_value, dtype, device, placement, sbp,
                        requires_grad)  # fmt: skip


def zeros_like(input: Tensor, dtype=None, *, device=None, placement=None, sbp=None,
               requires_grad: bool = False) -> Tensor:  # fmt: skip
    return _filled_like("zeros_like", input, 0, dtype, device, placement, sbp, requires_grad)


def ones_like(input: Tensor, dtype=None, *, device=None, placement=None, sbp=None,
              requires_grad: bool = False) -> Tensor:  # fmt: skip
    return _filled_like("ones_like", input, 1, dtype, device, placement, sbp, requires_grad)


def empty_like(input: Tensor, dtype=None, *, device=None, placement=None, sbp=None,
               requires_grad: bool = False) -> Tensor:  # fmt: skip
    """A tensor like `input` whose values are unspecified (zeros here)."""
    return _filled_like("empty_like", input, 0, dtype, device, placement, sbp, requires_grad)


def new_zeros(self: Tensor, *size, dtype=None, device=None, placement=None, sbp=None,
              requires_grad: bool = False) -> Tensor:  # fmt: skip
    """`x.new_zeros(size)`: zeros of `size` with `x`'s dtype and device (or placement and
    SBP) unless given."""
    return _filled_like("new_zeros", self, 0, dtype, device, placement, sbp, requires_grad, size)


def new_ones(self: Tensor, *size, dtype=None, device=None, placement=None, sbp=None,
             requires_grad: bool = False) -> Tensor:  # fmt: skip
    return _filled_like("new_ones", self, 1, dtype, device, placement, sbp, requires_grad, size)


def new_empty(self: Tensor, *size, dtype=None, device=None, placement=None, sbp=None,
              requires_grad: bool = False) -> Tensor:  # fmt: skip
    return _filled_like("new_empty", self, 0, dtype, device, placement, sbp, requires_grad, size)


def new_full(self: Tensor, size, fill_value, *, dtype=None, device=None, placement=None,
             sbp=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    return _filled_like("new_full", self, fill_value, dtype, device, placement, sbp,
                        requires_grad, (size,))  # fmt: skip


def new_tensor(self: Tensor, data, dtype=None, device=None, requires_grad: bool = False,
               placement=None, sbp=None) -> Tensor:  # fmt: skip
    """`x.new_tensor(data)`: a copy of `data` with `x`'s dtype and device (or placement and
    SBP) unless given."""
    _, dt, where = like_args(self, dtype, device, placement, sbp)
    return created("new_tensor", _tensor_from(data, dt), requires_grad=requires_grad, **where)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """`data` as a tensor, sharing memory where it can (how ops accept lists and numbers): a
    tensor itself (`.to(device, dtype)` when they differ), a numpy array of the dtype through
    `from_numpy`, anything else as `flow.tensor(data, dtype, device)` copies it."""
    if isinstance(data, Tensor):
        return data if dtype is None and device is None else data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and (dtype is None or
                                         _dtypes.as_dtype(dtype).np_dtype == data.dtype):
        out = from_numpy(data)
    else:
        out = _tensor_from(data, dtype)
    return created("as_tensor", out, device=device)


TENSOR_METHODS: dict = {"new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty,
                        "new_full": new_full, "new_tensor": new_tensor}  # fmt: skip
"""Tensor methods this module adds: new tensors taking their defaults from the tensor."""

__all__ = [
    "tensor", "as_tensor", "from_numpy", "from_dlpack", "is_tensor", "numel", "full", "zeros",
    "ones", "empty", "full_like", "zeros_like", "ones_like", "empty_like",
]  # fmt: skip
