"""IREE buffer views as numpy arrays for the ``comm`` module's imports, on CPU and GPU devices.

On a CPU device every buffer is host memory: arguments are mapped, results are device-local
host-visible buffers. On a GPU or Vulkan device (``host_memory=False``) arguments the host
cannot map are copied out through a staging buffer, and results are host memory the device
reads (``HOST_LOCAL | DEVICE_VISIBLE``): MPI works on host memory and the program reads the
result where it lies.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import iree.runtime as rt
import numpy as np

__all__ = ["Buffers", "dtype_of", "row_bytes"]


class Buffers:
    """Maps argument buffer views to numpy and allocates result buffer views on one device
    (see the module docstring for where each lives)."""

    def __init__(self, device: rt.HalDevice, host_memory: bool = True):
        self._device = device
        self._allocator = device.allocator
        self.host_memory = host_memory

    @staticmethod
    def view(ref: rt.VmRef) -> rt.HalBufferView:
        return ref.deref(rt.HalBufferView)

    def array(self, bv: rt.HalBufferView, dtype: np.dtype | None = None) -> np.ndarray:
        """The buffer as a numpy array (typed, or flat bytes when dtype is None): without a copy
        where the host can map it, else a copy (see `writable`)."""
        shape = list(bv.shape)
        if dtype is None:
            dtype, shape = np.dtype(np.uint8), [bv.byte_length]
        if bv.byte_length == 0:
            return np.empty(shape, dtype)
        if self.host_memory or self.writable(bv):
            return bv.map().asarray(shape, dtype)
        return self._download(bv).map().asarray(shape, dtype).copy()

    def writable(self, bv: rt.HalBufferView) -> bool:
        """Whether `array(bv)` maps the buffer itself (so writes to the array land in it)."""
        if self.host_memory:
            return True
        buf = bv.get_buffer()
        mappable = int(rt.BufferUsage.MAPPING_SCOPED)
        return bool(buf.memory_type() & int(rt.MemoryType.HOST_VISIBLE)) and (
            buf.allowed_usage() & mappable == mappable
        )

    def _download(self, bv: rt.HalBufferView) -> rt.HalBuffer:
        src = bv.get_buffer()
        host = self._allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=src.byte_length(),
        )
        sem = self._device.create_semaphore(0)
        self._device.queue_copy(
            src,
            host,
            wait_semaphores=rt.HalFence.create_at(sem, 0),
            signal_semaphores=rt.HalFence.create_at(sem, 1),
        )
        rt.HalFence.create_at(sem, 1).wait()
        return host

    def new(self, shape: Sequence[int], element_type: int, nbytes: int) -> rt.HalBufferView:
        """A result buffer view. Large ones get transparent huge pages before the first touch:
        a fresh 64 MiB buffer otherwise costs ~16k page faults, which made a compiled
        all_reduce ~1.6x slower than mpi4py on numpy arrays (numpy asks for huge pages)."""
        memory = (
            rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE
            if self.host_memory
            else rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE
        )
        buf = self._allocator.allocate_buffer(
            memory_type=int(memory),
            allowed_usage=int(rt.BufferUsage.DEFAULT | rt.BufferUsage.MAPPING),
            allocation_size=nbytes,
        )
        if nbytes >= _HUGE_PAGE_MIN_BYTES:
            _advise_huge_pages(buf.map().asarray([nbytes], np.dtype(np.uint8)).ctypes.data, nbytes)
        return rt.HalBufferView(buf, list(shape), element_type)


_HUGE_PAGE = 2 << 20
_HUGE_PAGE_MIN_BYTES = 4 << 20  # numpy's threshold for the same advice
_MADV_HUGEPAGE = 14
_madvise: Any = None


def _advise_huge_pages(address: int, nbytes: int) -> None:
    """madvise(MADV_HUGEPAGE) on the whole huge pages inside a range (Linux; else nothing)."""
    global _madvise
    if _madvise is None:
        try:
            import ctypes

            fn = ctypes.CDLL(None).madvise
            fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
            _madvise = fn if sys.platform.startswith("linux") else False
        except (OSError, AttributeError):
            _madvise = False
    start = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    end = (address + nbytes) // _HUGE_PAGE * _HUGE_PAGE
    if _madvise and end > start:
        _madvise(start, end - start, _MADV_HUGEPAGE)  # advice only: failure is harmless


_DTYPE_CACHE: dict[int, np.dtype] = {}


def dtype_of(bv: rt.HalBufferView) -> np.dtype:
    """The numpy dtype of a buffer view's element type (cached per element type)."""
    et = int(bv.element_type)
    dt = _DTYPE_CACHE.get(et)
    if dt is None:
        dt = _DTYPE_CACHE[et] = np.dtype(rt.HalElementType.map_to_dtype(bv.element_type))
    return dt


def row_bytes(bv: rt.HalBufferView) -> int:
    """Bytes per dim-0 row of a buffer view; raises for a scalar."""
    if not bv.shape:
        raise ValueError("collectives along dim 0 need a ranked tensor, got a scalar")
    return int(np.prod(bv.shape[1:], dtype=np.int64)) * dtype_of(bv).itemsize

