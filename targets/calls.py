"""Calling a loaded function: numpy arguments in, numpy results out, values kept on the device.

Results always come back as a tuple of ``numpy.ndarray``:

* CPU drivers (``local-task``, ``local-sync``): the array maps IREE's result buffer without a
  copy. The mapping holds a reference to the buffer, so IREE does not recycle it: the array
  stays valid (and unchanged) across later calls. When two results share memory (a function
  returning the same value twice), the later ones are copied so results never alias.
* Other drivers: each result is copied to a host-visible staging buffer and then into a fresh
  numpy array (``DeviceArray.to_host()`` fails on lavapipe: it imports host memory that does not
  meet Vulkan's 4096-byte import alignment). These arrays are read-only: they are copies of a
  device buffer that later calls use in their place (see below).

Device residency: every result array remembers the device buffer it came from. Passing that very
array back as an argument (a parameter updated by the previous training step) hands IREE the
device buffer instead of uploading the array again, so values that go from one call to the next
never cross to the host and back. On CPU drivers the array *is* the device memory, so writing
into it is seen by the next call; elsewhere the array is read-only, and code that updates it
makes a new array (which is uploaded). A result that shares memory with an argument passed this
way (a function returning its input) is copied, so results never alias the caller's arrays.
:func:`transfer_stats` counts the bytes uploaded, passed as device buffers and read back.

Result arrays that map device memory hold the device (through their base), so a device goes
only with the last of them, whenever the runtime shuts down (:mod:`flow.targets.runtime`).
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass
from typing import Any

import iree.runtime as rt
import numpy as np

from .table import CPU_DRIVERS

__all__ = ["Function", "TransferStats", "forget_residents", "reset_transfer_stats",
           "transfer_stats"]  # fmt: skip


@dataclass(frozen=True)
class TransferStats:
    """Host <-> device traffic of function calls since :func:`reset_transfer_stats`.

    ``uploaded_bytes``: numpy arguments copied into new device buffers; ``resident_bytes``:
    arguments passed as the device buffer they came from (no copy); ``read_back_bytes``:
    results copied to the host through staging buffers (drivers whose memory is not mapped)."""

    calls: int = 0
    uploads: int = 0
    uploaded_bytes: int = 0
    resident_args: int = 0
    resident_bytes: int = 0
    read_backs: int = 0
    read_back_bytes: int = 0


_FIELDS = tuple(TransferStats.__dataclass_fields__)
_counts = dict.fromkeys(_FIELDS, 0)  # mutable: a call adds to it (a frozen replace costs 6 us)


def transfer_stats() -> TransferStats:
    """A snapshot of the transfer counters."""
    return TransferStats(**_counts)


def reset_transfer_stats() -> None:
    """Zero the transfer counters."""
    _counts.update(dict.fromkeys(_FIELDS, 0))


# id(result array) -> (weak reference to it, memory space, the device buffer view it holds).
# An entry lives as long as its array; the id is checked against the live object on lookup.
# The memory space is the driver, except that the CPU drivers share one (host memory: a
# buffer of a local-task call is a valid argument of a local-sync call and back).
_resident: dict[int, tuple[weakref.ref, str, rt.HalBufferView]] = {}


def _remember(arr: np.ndarray, space: str, view: rt.HalBufferView) -> None:
    key = id(arr)
    _resident[key] = (weakref.ref(arr, lambda _r, k=key: _forget(k, _r)), space, view)


def _forget(key: int, ref: weakref.ref) -> None:
    entry = _resident.get(key)
    if entry is not None and entry[0] is ref:
        del _resident[key]


def forget_residents() -> None:
    """Forget every result's device buffer (at shutdown: the buffers go before their devices)."""
    _resident.clear()


def _resident_view(arr: np.ndarray, space: str) -> rt.HalBufferView | None:
    entry = _resident.get(id(arr))
    if entry is None or entry[0]() is not arr or entry[1] != space:
        return None
    return entry[2]


class Function:
    """One exported function; calling it returns a tuple of numpy arrays (always a tuple,
    also for a single result; empty for none)."""

    def __init__(self, module: Module, name: str, invoker: Any):
        self.module = module
        self.name = name
        self._invoker = invoker
        self._space = "cpu" if module.driver in CPU_DRIVERS else module.driver  # memory space
        self._maps_results = module.driver in CPU_DRIVERS

    def call(self, *args: Any) -> tuple[np.ndarray, ...]:
        """Run the function on numpy arrays (or scalars); see the module doc for result memory
        and for arguments that are earlier results (passed as device buffers)."""
        packed: list[Any] = []
        resident: list[np.ndarray] = []
        uploaded = up_bytes = 0
        for a in args:
            if isinstance(a, np.ndarray):
                view = _resident_view(a, self._space)
                if view is not None:
                    packed.append(view)
                    resident.append(a)
                    continue
                a = np.asarray(a, order="C")
                uploaded += 1
                up_bytes += a.nbytes
            packed.append(a)
        invoker = self._invoker
        if invoker is None:
            self.module._live()
        raw = invoker(*packed)
        values = raw if isinstance(raw, tuple) else (() if raw is None else (raw,))
        if self._maps_results:
            out = _map_results(values, self._space, resident, self.module.device)
            read_back = 0
        else:
            out = _read_back(values, self.module.device, self._space)
            read_back = sum(a.nbytes for a in out)
        c = _counts
        c["calls"] += 1
        if uploaded:
            c["uploads"] += uploaded
            c["uploaded_bytes"] += up_bytes
        if resident:
            c["resident_args"] += len(resident)
            c["resident_bytes"] += sum(a.nbytes for a in resident)
        if read_back:
            c["read_backs"] += len(out)
            c["read_back_bytes"] += read_back
        return out

    __call__ = call

    def __repr__(self) -> str:
        return f"<flow.targets.Function {self.name} on {self.module.driver}>"


def _span(arr: np.ndarray) -> tuple[int, int]:
    start = arr.__array_interface__["data"][0]
    return start, start + arr.nbytes


class _Mapping:
    """The base of a result array that maps device memory: the mapped array IREE made and the
    device, so that the device outlives the buffer whatever order the arrays are freed in
    (releasing a buffer after its device crashes inside IREE)."""

    __slots__ = ("__array_interface__", "_keep")

    def __init__(self, interface: dict[str, Any], mapped: np.ndarray, device: rt.HalDevice):
        # `mapped`'s C-contiguous layout; without the `descr` list numpy reads it 1 us faster
        self.__array_interface__ = {"data": interface["data"], "shape": interface["shape"],
                                    "typestr": interface["typestr"], "version": 3}  # fmt: skip
        self._keep = (device, mapped)  # a tuple frees its items last to first: buffer first


def _typed(arr: np.ndarray, view: rt.HalBufferView) -> np.ndarray:
    """`arr` as its buffer view's element type: IREE hands bf16 back as raw 2-byte voids."""
    if arr.dtype.kind != "V":
        return arr
    import ml_dtypes  # noqa: F401  (numpy knows the name "bfloat16" once it is imported)

    return arr.view(np.dtype(rt.HalElementType.map_to_dtype(view.element_type)))


def _map_results(
    values: tuple[Any, ...], space: str, resident: list[np.ndarray], device: rt.HalDevice
) -> tuple[np.ndarray, ...]:
    """CPU results as numpy arrays mapping their device buffers (remembered for later calls);
    copies where a result shares memory with an earlier result or a resident argument."""
    taken: list[tuple[int, int]] = []  # disjoint spans, sorted
    for start, end in sorted(_span(a) for a in resident if a.nbytes):
        if taken and start < taken[-1][1]:
            taken[-1] = (taken[-1][0], max(end, taken[-1][1]))
        else:
            taken.append((start, end))
    out: list[np.ndarray] = []
    for value in values:
        arr = np.asarray(value)
        if isinstance(value, rt.DeviceArray):
            arr = _typed(arr, value._buffer_view)
        if not isinstance(value, rt.DeviceArray):
            out.append(arr)
            continue
        if arr.nbytes == 0:  # nothing to map: an array of our own, holding no IREE buffer
            out.append(np.empty(arr.shape, arr.dtype))
            continue
        interface = arr.__array_interface__
        start = interface["data"][0]
        span = (start, start + arr.nbytes)
        i = bisect.bisect_left(taken, span)
        if (i < len(taken) and taken[i][0] < span[1]) or (i > 0 and taken[i - 1][1] > span[0]):
            out.append(arr.copy())
            continue
        taken.insert(i, span)
        if arr.dtype == np.dtype(rt.HalElementType.map_to_dtype(value._buffer_view.element_type)):
            # else a converted copy (bool)
            arr = _typed(np.asarray(_Mapping(interface, arr, device)), value._buffer_view)
            _remember(arr, space, value._buffer_view)
        out.append(arr)
    return tuple(out)


def _read_back(values: tuple[Any, ...], device: rt.HalDevice, space: str) -> tuple[np.ndarray, ...]:
    """Copy device results into numpy through host-visible staging buffers (one wait for all);
    each array is read-only and remembers its device buffer (see the module doc)."""
    staged: list[tuple[rt.HalBuffer, list[int], np.dtype, np.dtype] | None] = []
    sem = device.create_semaphore(0)
    step = 0
    for value in values:
        if not isinstance(value, rt.DeviceArray):
            staged.append(None)
            continue
        view = value._buffer_view  # DeviceArray has no public accessor for its buffer view
        raw_dtype = np.dtype(rt.HalElementType.map_to_dtype(view.element_type))
        src = view.get_buffer()
        if src.byte_length() == 0:
            staged.append((None, view.shape, raw_dtype, np.dtype(value.dtype)))
            continue
        host = device.allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=src.byte_length(),
        )
        device.queue_copy(
            src,
            host,
            wait_semaphores=rt.HalFence.create_at(sem, step),
            signal_semaphores=rt.HalFence.create_at(sem, step + 1),
        )
        step += 1
        staged.append((host, view.shape, raw_dtype, np.dtype(value.dtype)))
    if step:
        rt.HalFence.create_at(sem, step).wait()
    out: list[np.ndarray] = []
    for value, entry in zip(values, staged):
        if entry is None:
            out.append(np.asarray(value))
            continue
        host, shape, raw_dtype, dtype = entry
        if host is None:
            arr = np.empty(shape, raw_dtype)
        else:
            arr = np.array(host.map().asarray(shape, raw_dtype))
        if dtype == raw_dtype:
            arr.flags.writeable = False
            _remember(arr, space, value._buffer_view)
        else:
            arr = arr.astype(dtype)
        out.append(arr)
    return tuple(out)
