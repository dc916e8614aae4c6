"""The Tensor methods written in ops or on global tensors, installed on `flow.Tensor`.

`flow.core.tensor` holds a tensor's storage and metadata and imports nothing above core. The
operators (`x + y`), the methods (`x.sum()`, from each ops family's `TENSOR_METHODS`), their
in-place variants (`x.add_()`), `flow.Tensor(...)` and the global-tensor methods are set
here, once, by `install_tensor_methods()`, which `flow/__init__.py` calls. It also registers
what core runs through hooks: the copy behind `x.to(device)` and the seeds of `backward()`.
"""

from __future__ import annotations

import numpy as np

from flow import primitives as P
from flow.core import autograd as _autograd
from flow.core import device as _device
from flow.core import dtypes as _dtypes
from flow.core.tensor import Size, Tensor
from flow.distributed import global_tensor as _global
from flow.distributed.placement import sbp as _sbp_entries
from flow.ops import activations, construct, movement, random, window
from flow.ops import basic as o
from flow.ops import math as math_ops
from flow.primitives.registry import bind

__all__ = ["install_tensor_methods"]

# The ops families whose TENSOR_METHODS become methods (math's include those of logical,
# reduction and linalg; movement's those of indexing and gather); a later one wins a name
# defined twice.
_FAMILIES = (construct, math_ops, movement, window, random, activations)

_INPLACE = ("add", "sub", "mul", "div", "pow", "clamp", "neg", "abs", "exp", "log", "sqrt",
            "tanh", "sigmoid", "relu", "floor", "ceil", "round", "masked_fill")  # fmt: skip


def _rev(fn):
    return lambda self, other: fn(other, self)


def _basic_methods() -> dict:
    rev = _rev
    return {
        "__add__": o.add, "__radd__": rev(o.add), "__sub__": o.sub, "__rsub__": rev(o.sub),
        "__mul__": o.mul, "__rmul__": rev(o.mul), "__truediv__": o.div,
        "__rtruediv__": rev(o.div), "__pow__": o.pow, "__rpow__": rev(o.pow),
        "__matmul__": o.matmul, "__rmatmul__": rev(o.matmul), "__neg__": o.neg,
        "__abs__": o.abs, "__eq__": o.eq, "__ne__": o.ne, "__lt__": o.lt, "__le__": o.le,
        "__gt__": o.gt, "__ge__": o.ge,
        "add": o.add, "sub": o.sub, "mul": o.mul, "div": o.div, "pow": o.pow,
        "matmul": o.matmul, "neg": o.neg, "abs": o.abs, "exp": o.exp, "log": o.log,
        "sqrt": o.sqrt, "rsqrt": o.rsqrt, "tanh": o.tanh, "relu": o.relu,
        "maximum": o.maximum, "minimum": o.minimum, "eq": o.eq, "ne": o.ne, "lt": o.lt,
        "le": o.le, "gt": o.gt, "ge": o.ge, "sum": o.sum, "mean": o.mean, "prod": o.prod,
        "amax": o.amax, "amin": o.amin, "max": o.max, "min": o.min,
        "reshape": o.reshape, "view": o.reshape, "transpose": o.transpose,
        "permute": o.permute, "t": o.t, "expand": o.expand, "broadcast_to": o.broadcast_to,
        "squeeze": o.squeeze, "unsqueeze": o.unsqueeze, "flatten": o.flatten, "to": o.to,
    }  # fmt: skip


def _new(cls, *args, dtype=None, device=None, placement=None, sbp=None):
    """`flow.Tensor(2, 3)`: a float32 tensor of that shape (zero-filled);
    `flow.Tensor(data)`: a float32 copy of a list, array or tensor (OneFlow/PyTorch style);
    on `device`, or global with `placement` and `sbp`."""
    dt = dtype or _dtypes.float32
    where = {"device": device, "placement": placement, "sbp": sbp}
    if not args:
        return o.zeros(0, dtype=dt, **where)
    if all(isinstance(a, (int, np.integer)) for a in args):
        return o.zeros(*args, dtype=dt, **where)
    if len(args) == 1 and isinstance(args[0], Size):
        return o.zeros(*args[0], dtype=dt, **where)
    if len(args) == 1:
        return o.tensor(args[0], dtype=dt, **where)
    raise TypeError(f"flow.Tensor: expected sizes or one data argument, got {args!r}")


def _copy_(self: Tensor, src) -> Tensor:
    """Write `src` (a tensor, or data) into this tensor, cast and broadcast to it. Into a
    global tensor, `src` is boxed to its placement and SBP first (a local `src` is the whole
    value, the first rank's where they differ), as loading a state dict saved with another
    distribution needs."""
    src = src if isinstance(src, Tensor) else o.tensor(src)
    if self.is_global and self._trace is None and src._trace is None:
        if not src.is_global:  # the whole value: the first rank's, as to_global takes it
            src = src.to_global(self.placement, [_sbp_entries.broadcast] * len(self.sbp))
        if src._dist != self._dist:
            src = src.to_global(self.placement, self.sbp)
    return self._rebind(src.to(self._dtype).broadcast_to(self._shape), "copy_")


def _fill_(self: Tensor, value) -> Tensor:
    """Set every element to `value`."""
    return self._rebind(o.full(self._shape, value, self._dtype), "fill_")


def _sbp(self: Tensor) -> tuple:
    """The SBP of a global tensor: one `flow.sbp` entry per placement axis."""
    if not self.is_global:
        raise RuntimeError("sbp: a local tensor has no sbp; see to_global")
    return tuple(_sbp_entries.sbp(s) for s in self._dist.sbp)


def _to_global(self: Tensor, placement=None, sbp=None) -> Tensor:
    """A global tensor: from a local one (this rank's shard, replica or addend, as `sbp`
    says) or from a global one (boxing to `sbp` and/or moving to `placement`)."""
    return _global.to_global(self, placement, sbp)


def _to_local(self: Tensor) -> Tensor:
    """This rank's shard of a global tensor (a local tensor is returned as is)."""
    return _global.to_local(self)


_OWN = {"__new__": _new, "copy_": _copy_, "fill_": _fill_, "to_global": _to_global,
        "to_local": _to_local}  # fmt: skip
"""The methods defined in this module (installed under these names)."""


def _device_copy(x: Tensor) -> Tensor:
    return bind(P.cast, x, dtype=x.dtype)  # a copy, whose gradient flows back to x


def _inplace(fn, name: str):
    def method(self, *args, **kwargs):
        return self._rebind(fn(self, *args, **kwargs), name)

    method.__name__ = name
    return method


def install_tensor_methods() -> None:
    """Define the operators and methods of `flow.Tensor` (and the core hooks built on ops)."""
    methods = _basic_methods()
    for family in _FAMILIES:
        methods.update(family.TENSOR_METHODS)
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    for name in _INPLACE:
        if hasattr(Tensor, name):
            setattr(Tensor, name + "_", _inplace(getattr(Tensor, name), name + "_"))
    Tensor.T = property(lambda self: o.permute(self, *reversed(range(self.ndim))))
    for dt in ("float", "double", "half", "int", "long", "bool"):
        setattr(Tensor, dt, (lambda d: lambda self: o.to(self, d))(_dtypes.as_dtype(dt)))

    for name, fn in _OWN.items():
        fn.__name__, fn.__qualname__ = name, f"Tensor.{name}"
        setattr(Tensor, name, staticmethod(fn) if name == "__new__" else fn)
    _sbp.__name__, _sbp.__qualname__ = "sbp", "Tensor.sbp"
    Tensor.sbp = property(_sbp)
    _device.register_copy(_device_copy)
    _autograd.register_seed_factories(ones_like=o.ones_like, tensor=o.tensor)
