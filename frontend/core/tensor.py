"""`flow.Tensor`: an eager numpy-backed value, or a traced SSA value inside `flow.jit`.

This module holds the storage and metadata and what needs nothing above core; the operators
and the methods written in ops or on global tensors are installed by `flow.ops.methods`
(`install_tensor_methods`, run when `flow` is imported).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core import pending as _pending
from flow.core.pending import PendingValue

if TYPE_CHECKING:
    from xdsl.dialects.builtin import TensorType
    from xdsl.ir import SSAValue


class Size(tuple):
    """The shape of a tensor (a tuple, like `torch.Size`)."""

    def __repr__(self) -> str:
        return f"flow.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class Tensor:
    """A multi-dimensional array of one dtype.

    Eager tensors hold a numpy array; inside a traced function (`flow.jit`)
    tensors stand for SSA values of the function being built. Both support the
    same operations, which are defined in terms of primitives.
    """

    __slots__ = (
        "_buf",  # a numpy array; a PendingValue under flow.lazy (see `_data`); None when traced
        "_value",
        "_trace",
        "_shape",
        "_dtype",
        "_requires_grad",
        "_node",
        "grad",
        "_dist",  # global tensors: placement and SBP (flow.distributed); None (or unset): local
        "_device",  # a flow.device other than the cpu (flow.core.device); unset or None: cpu
        "_grad_hooks",  # a leaf's gradient hooks (flow.core.autograd.register_hook); unset: none
        "_post_grad_hooks",  # a leaf's post-accumulate-grad hooks (flow.core.autograd)
        "__weakref__",
    )
    __array_priority__ = 1000  # numpy defers to our operators

    # `flow.Tensor(2, 3)` / `flow.Tensor(data)`: `__new__` is installed by flow.ops.methods
    def __init__(self, *args, **kwargs):
        pass

    @property
    def _data(self) -> np.ndarray | None:
        """The value as a numpy array (None when traced); computes a pending lazy value."""
        b = self._buf
        if isinstance(b, PendingValue):
            b = b.materialize(self)
        return b

    @_data.setter
    def _data(self, value: np.ndarray | None) -> None:
        self._buf = value

    @classmethod
    def _eager(cls, data: np.ndarray, dtype: _dtypes.dtype | None = None) -> Tensor:
        """A tensor holding `data` (`dtype`, when given, is the flow dtype of its array)."""
        t = object.__new__(cls)
        t._buf, t._value, t._trace = data, None, None
        t._requires_grad, t._node, t.grad = False, None, None
        t._dist = t._device = None  # (set, so reading them needs no AttributeError)
        t._shape = Size(data.shape)
        t._dtype = _dtypes.as_dtype(data.dtype) if dtype is None else dtype
        return t

    @classmethod
    def _traced(cls, value: SSAValue, trace, dtype: _dtypes.dtype) -> Tensor:
        t = object.__new__(cls)
        t._buf, t._value, t._trace = None, value, trace
        t._requires_grad, t._node, t.grad = False, None, None
        t._dist = t._device = None
        t._shape = Size(value.type.get_shape())
        t._dtype = dtype
        return t

    def _ir_type(self) -> TensorType:
        if self._value is not None:
            return self._value.type
        from xdsl.dialects.builtin import TensorType  # xDSL loads with the first op

        return TensorType(self._dtype.ir_type, self._shape)

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return self._shape

    @property
    def dtype(self) -> _dtypes.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return self._shape
        from flow.core.args import normalize_dim

        return self._shape[normalize_dim("size", dim, self.ndim)]

    def numel(self) -> int:
        return self._shape.numel()

    @property
    def is_traced(self) -> bool:
        return self._trace is not None

    @property
    def device(self):
        """The `flow.device` whose target runs this tensor's programs (see flow.core.device);
        the value itself is always in host memory. A global tensor's is its placement's type."""
        from flow.core.device import CPU, device

        d = getattr(self, "_device", None)
        info = getattr(self, "_dist", None)
        if d is None and info is not None and info.placement.type != "cpu":
            return device(info.placement.type, 0)
        return d or CPU

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        from flow.core.args import cuda_device

        return self.to(cuda_device(device))

    # ------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self._node is not None and not value:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables; use detach() "
                "to get a tensor that does not require grad"
            )
        if value and not self._dtype.is_floating_point:
            raise RuntimeError(f"Only Tensors of floating point dtype can require gradients, "
                               f"got {self._dtype!r}")  # fmt: skip
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        """True for a tensor that does not require grad and for one the user created (no op
        recorded it); such tensors accumulate `.grad` in backward."""
        return self._node is None

    @property
    def grad_fn(self):
        """The backward function of the op that computed this tensor (its `name()` spelled
        as PyTorch's, e.g. `MulBackward0`); None for a leaf."""
        return self._node

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in `.grad` after backward (leaves do already)."""
        from flow.core.autograd import retain_grad

        retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        """Whether `retain_grad()` was called on this non-leaf tensor."""
        return self._node is not None and self._node.retain

    def register_hook(self, hook):
        """Call `hook(grad)` with this tensor's gradient during backward; a tensor it returns
        replaces the gradient. Returns a handle whose `remove()` unregisters it."""
        from flow.core.autograd import register_hook

        return register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call `hook(self)` after `backward()` accumulates a gradient into this leaf's `.grad`.
        Returns a handle whose `remove()` unregisters it."""
        from flow.core.autograd import register_post_accumulate_grad_hook

        return register_post_accumulate_grad_hook(self, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
        """Accumulate the gradient of this tensor into the `.grad` of the leaves it depends on."""
        from flow.core.autograd import backward

        backward(self, gradient, retain_graph, create_graph)

    def detach(self) -> Tensor:
        """The same value, cut from the autograd graph (shares memory when eager)."""
        if isinstance(self._buf, PendingValue):
            return self._buf.alias(self, copy=False)
        t = object.__new__(Tensor)
        t._buf, t._value, t._trace = self._buf, self._value, self._trace
        t._requires_grad, t._node, t.grad = False, None, None
        t._shape, t._dtype = self._shape, self._dtype
        t._dist, t._device = getattr(self, "_dist", None), getattr(self, "_device", None)
        return t

    def detach_(self) -> Tensor:
        self._node, self._requires_grad = None, False
        return self

    # ------------------------------------------------------------------ host access
    def numpy(self) -> np.ndarray:
        """The value as a numpy array; of a global tensor, the global value (a collective)."""
        if getattr(self, "_dist", None) is not None:
            return _global_numpy(self)
        if self._data is None:
            raise RuntimeError(
                "numpy() needs a concrete value, but this tensor is being traced inside "
                "flow.jit; return it from the jitted function instead"
            )
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item(): only one-element tensors, got shape {list(self._shape)}")
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    # ------------------------------------------------------------------ DLPack
    def __dlpack__(self, *args, **kwargs):
        """Export through DLPack (zero-copy; shares memory with this eager tensor)."""
        return self.numpy().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.numpy().__dlpack_device__()

    # ------------------------------------------------------------------ misc
    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def element_size(self) -> int:
        return self._dtype.itemsize

    def nelement(self) -> int:
        return self.numel()

    def clone(self) -> Tensor:
        """A copy that shares no memory with this tensor."""
        if self._buf is None:
            return self  # traced values are immutable
        if isinstance(self._buf, PendingValue):
            return self._buf.alias(self, copy=True)
        t = Tensor._eager(self._data.copy())
        if getattr(self, "_dist", None) is not None:
            t._shape, t._dist = self._shape, self._dist
        if getattr(self, "_device", None) is not None:
            t._device = self._device
        return t

    def contiguous(self) -> Tensor:
        if not isinstance(self._buf, np.ndarray) or self._buf.flags.c_contiguous:
            return self
        return Tensor._eager(np.asarray(self._data, order="C"))

    def type_as(self, other: Tensor) -> Tensor:
        if not isinstance(other, Tensor):
            from flow.core.args import describe
            from flow.core.errors import op_error

            raise op_error("type_as", f"expected a tensor, got {describe(other)}", cls=TypeError)
        return self.to(other.dtype)

    # ------------------------------------------------------------------ in-place updates
    def _rebind(self, new: Tensor, op: str) -> Tensor:
        """Make this tensor hold `new`'s value (the in-place ops and `x[i] = v`)."""
        if new.shape != self._shape or new.dtype is not self._dtype:
            new = new.to(self._dtype).broadcast_to(self._shape) if new.ndim <= self.ndim else new
        if tuple(new.shape) != tuple(self._shape):
            from flow.core.errors import op_error

            raise op_error(op, f"result of shape {list(new.shape)} cannot be written into a "
                               f"tensor of shape {list(self._shape)}")  # fmt: skip
        if self._trace is None and new._trace is not None:
            # An eager tensor updated inside a trace (parameters, optimizer state, running
            # stats): the trace outputs the new value and the compiled call writes it back.
            new._trace.mutate(self, new)
            return self
        if self._trace is not None and new._trace is None:
            new = new._lifted_into(self._trace)
        if isinstance(new._buf, PendingValue):  # under flow.lazy: the value is pending
            new._buf.rebind(self)
            return self
        if isinstance(self._buf, np.ndarray) and self._buf.flags.writeable:
            _pending.before_host_write(self._buf)
            self._buf[...] = new._data  # writes through to arrays sharing this memory
        else:
            self._data = None if new._data is None else np.array(new._data)
        self._value, self._trace = new._value, new._trace
        return self

    def _lifted_into(self, trace) -> Tensor:
        """This eager tensor as a value of `trace` (a captured argument)."""
        return Tensor._traced(trace.lift(self), trace, self._dtype)

    def __setitem__(self, index, value) -> None:
        """`x[index] = value` on an eager tensor (numpy indexing and broadcasting rules)."""
        if (
            self._trace is None
            and not isinstance(value, Tensor)
            or (isinstance(value, Tensor) and value._trace is None and self._trace is None)
        ):
            data = self._data if self._data.flags.writeable else np.array(self._data)
            v = value.numpy() if isinstance(value, Tensor) else value
            if data is self._buf:
                _pending.before_host_write(data)
            try:
                data[index] = np.asarray(v).astype(self._dtype.np_dtype, copy=False)
            except (IndexError, ValueError, TypeError) as err:
                from flow.core.errors import op_error

                raise op_error("setitem", str(err), cls=type(err)) from None
            self._rebind(Tensor._eager(data), "setitem")
            return
        from flow.core.errors import op_error

        raise op_error("setitem", "x[index] = value inside flow.jit is not supported yet; build "
                                  "the new tensor with flow.where / masked_fill instead",
                       cls=NotImplementedError)  # fmt: skip

    # copy_ and fill_ are installed by flow.ops.methods
    def zero_(self) -> Tensor:
        return self.fill_(0)

    # ------------------------------------------------------------------ global tensors
    @property
    def is_global(self) -> bool:
        """Whether this is a global tensor (placement + SBP), as made by `to_global`."""
        return getattr(self, "_dist", None) is not None

    @property
    def is_local(self) -> bool:
        return not self.is_global

    @property
    def placement(self):
        """The `flow.placement` of a global tensor (an error for a local one)."""
        if not self.is_global:
            raise RuntimeError("placement: a local tensor has no placement; see to_global")
        return self._dist.placement

    # sbp, to_global and to_local are installed by flow.ops.methods

    def __repr__(self) -> str:
        if self._data is None:
            return f"Tensor(traced, shape={list(self._shape)}, dtype={self._dtype!r})"
        if self.is_global:
            return (f"tensor(global, shape={list(self._shape)}, dtype={self._dtype!r}, "
                    f"{self._dist.describe()})")  # fmt: skip
        body = np.array2string(self._data, separator=", ", prefix="tensor(")
        dev = getattr(self, "_device", None)
        where = "" if dev is None else f", device='{dev}'"
        return f"tensor({body}, dtype={self._dtype!r}{where})"

    def __format__(self, spec: str) -> str:
        """`f"{loss:>7f}"`: a one-element tensor formats as the number it holds (`.item()`: of a
        global tensor, its global value); an empty spec gives `str(tensor)`."""
        if not spec:
            return str(self)
        if self.numel() != 1:
            raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__ "
                            f"for a tensor of shape {list(self._shape)}: only one-element "
                            "tensors format like numbers")  # fmt: skip
        return format(self.item(), spec)

    __hash__ = object.__hash__



def _no_global_numpy(t: Tensor) -> np.ndarray:
    raise RuntimeError("numpy() of a global tensor needs flow.distributed (import flow)")


_global_numpy: Callable[[Tensor], np.ndarray] = _no_global_numpy


def register_global_numpy(fn: Callable[[Tensor], np.ndarray]) -> None:
    """`Tensor.numpy()` of a global tensor calls `fn` (flow.modes.global_eager registers the
    gather of the global value)."""
    global _global_numpy
    _global_numpy = fn
