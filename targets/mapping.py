"""Host arrays over the memory of cpu result buffers, and results not mapped yet.

:func:`map_array` makes the numpy array of a mapped result (:mod:`flow.targets.calls`), whose
base, a :class:`Mapping`, keeps the buffer and its device alive. :class:`Unmapped` is a result
left in its buffer (``Function.call_deferred``) until something reads it. This module imports
nothing of IREE, so the frontend can subclass ``Unmapped`` (a tensor's pending value) without
loading the runtime; instances come only from calls, which have.
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import numpy as np

__all__ = ["Mapping", "Unmapped", "address", "map_array"]


class _ArrayInterface(ctypes.Structure):
    """numpy's `PyArrayInterface`, the struct behind `ndarray.__array_struct__`."""

    _fields_ = [("two", ctypes.c_int), ("nd", ctypes.c_int), ("typekind", ctypes.c_char),
                ("itemsize", ctypes.c_int), ("flags", ctypes.c_int),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("data", ctypes.c_void_p), ("descr", ctypes.c_void_p)]  # fmt: skip


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_read_pointer = ctypes.c_void_p.from_address
_DATA_FIELD = _ArrayInterface.data.offset
_BYTE = np.dtype(np.uint8)


def address(arr: np.ndarray) -> int:
    """The address of `arr`'s first element (a third of what `__array_interface__` costs)."""
    return _read_pointer(_capsule_pointer(arr.__array_struct__, None) + _DATA_FIELD).value or 0


class Mapping:
    """The base of a result array that maps device memory: it holds the mapped memory IREE
    made and the device, so that the device outlives the buffer whatever order the arrays are
    freed in (releasing a buffer after its device crashes inside IREE), and it names the
    array's buffer view, so that passing the array back hands IREE the buffer (`owner`: the
    array; views of it share this base but are not it)."""

    # slots are cleared in alphabetical order: the device and the buffer go in `_keep`
    __slots__ = ("__array_interface__", "_keep", "owner", "space", "span")

    def __init__(self, interface: dict[str, Any], mapped: Any, device: Any, view: Any,
                 space: str, span: tuple[int, int]):  # fmt: skip
        self.__array_interface__ = interface
        self._keep = (device, mapped, view)  # a tuple frees its items last to first
        self.space = space
        self.span = span
        self.owner: weakref.ref = _NO_OWNER


_NO_OWNER = weakref.ref(Mapping)  # a weak reference to an object other than any array


def map_array(mapped: Any, span: tuple[int, int], shape: tuple[int, ...], rtype: tuple,
              device: Any, view: Any, space: str) -> np.ndarray:  # fmt: skip
    """The array over `mapped` (`view.map()`, at `span`), of `shape` and `rtype` (numpy dtype,
    the typestr numpy maps it with, whether the array must be viewed as the dtype)."""
    dtype, typestr, as_view = rtype
    # numpy takes the base of a buffer-protocol array from the buffer's owner: the data
    # pointer instead makes the `Mapping` (and the device it holds) the base
    interface = {"data": (span[0], False), "shape": shape, "typestr": typestr, "version": 3}
    mapping = Mapping(interface, mapped, device, view, space, span)
    arr = np.asarray(mapping)
    if as_view:
        arr = arr.view(dtype)  # whose base is the array `mapping` is the base of
    mapping.owner = weakref.ref(arr)
    return arr


class Unmapped:
    """A CPU result not mapped into host memory yet (`Function.call_deferred`): its `shape`,
    `dtype` and buffer view. `array()` maps it, once, into the array `Function.call` would
    have returned (`numpy.asarray` does too); passed back to a call on a CPU driver, it hands
    IREE its buffer unmapped. The frontend subclasses it (a tensor's pending value)."""

    # slots are cleared in alphabetical order: the array, then the device and view in `_keep`
    __slots__ = ("_array", "_keep", "_type", "shape")
    _array: np.ndarray | None
    _keep: tuple[Any, Any]  # (the device, the buffer view): a tuple frees its items last first

    @property
    def dtype(self) -> np.dtype:
        return self._type[0]

    @property
    def nbytes(self) -> int:
        return self._keep[1].byte_length

    def array(self) -> np.ndarray:
        arr = self._array
        if arr is None:
            device, view = self._keep
            size = view.byte_length
            if size == 0:  # nothing to map: an array of our own, holding no buffer
                arr = np.empty(self.shape, self._type[0])
            else:
                mapped = view.map()
                start = address(np.frombuffer(mapped, _BYTE, size))
                arr = map_array(mapped, (start, start + size), self.shape, self._type, device,
                                view, "cpu")  # fmt: skip
            self._array = arr
        return arr

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        arr = self.array()
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __reduce__(self):  # pickled and deep-copied as the array (its device stays behind)
        return np.array, (self.array(),)

    def __repr__(self) -> str:
        return f"<flow.targets.Unmapped {list(self.shape)} {self.dtype}>"
