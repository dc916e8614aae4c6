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

Per-call cost: a call runs ``VmContext.invoke`` on the function itself, beneath IREE's
``FunctionInvoker``. On CPU drivers a small argument is copied into a staging buffer kept for
its position (the program must not keep its arguments past the call; flow's do not), and a
call whose arguments all went there reuses one argument list; a result IREE returns in a
staging buffer is copied, like one in a resident argument.

Deferred results (``Function.call_deferred``, CPU drivers): once a function's first call has
shown that its results share memory with no argument and with no other result (IREE decides
which buffer a result lands in when it compiles the program, so this holds for every call),
its results come back as :class:`Unmapped` values instead: the buffer view alone, mapped into
an array only when ``array()`` (or ``numpy.asarray``) asks. Passed back as an argument, an
``Unmapped`` hands IREE its buffer, so a value that goes from call to call is never mapped.

Result arrays that map device memory hold the device (through their base), so a device goes
only with the last of them, whenever the runtime shuts down (:mod:`flow.targets.runtime`); an
``Unmapped`` holds it too.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import iree.runtime as rt
import numpy as np

from . import events
from .mapping import Mapping, Unmapped, address, map_array
from .table import CPU_DRIVERS

__all__ = ["Function", "TransferStats", "Unmapped", "forget_residents", "reset_transfer_stats",
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


# id(result array) -> (weak reference to it, memory space, the device buffer view it holds):
# the read-back results of drivers whose memory is not mapped (a mapped result keeps its view
# in its base, the `Mapping`). An entry lives as long as its array; the id is checked
# against the live object on lookup. The memory space is the driver, except that the CPU
# drivers share one (host memory: a buffer of a local-task call is a valid argument of a
# local-sync call and back).
_resident: dict[int, tuple[weakref.ref, str, rt.HalBufferView]] = {}


def _remember(arr: np.ndarray, space: str, view: rt.HalBufferView) -> None:
    key = id(arr)
    _resident[key] = (weakref.ref(arr, lambda _r, k=key: _forget(k, _r)), space, view)


def _forget(key: int, ref: weakref.ref) -> None:
    entry = _resident.get(key)
    if entry is not None and entry[0] is ref:
        del _resident[key]


def forget_residents() -> None:
    """Forget every read-back result's device buffer (at shutdown: the buffers go before their
    devices; mapped results hold their device, see `Mapping`)."""
    _resident.clear()


def _resident_view(arr: np.ndarray, space: str) -> rt.HalBufferView | None:
    base = arr.base
    if base.__class__ is np.ndarray:  # a bf16 result is a view of the array its base maps
        base = base.base
    if base.__class__ is Mapping:  # a mapped result, or a view of one (not the same array)
        return base._keep[2] if base.owner() is arr and base.space == space else None
    entry = _resident.get(id(arr))
    if entry is None or entry[0]() is not arr or entry[1] != space:
        return None
    return entry[2]


class Function:
    """One exported function; calling it returns a tuple of numpy arrays (always a tuple,
    also for a single result; empty for none).

    A call goes beneath IREE's `FunctionInvoker`: array arguments become buffer views pushed
    on an argument list, `VmContext.invoke` runs the function, and the result buffer views
    are mapped (CPU) or read back; what the invoker re-derives each call (element types, the
    result count) is looked up once. On CPU drivers a small argument is copied into a buffer
    kept for its position (reallocated when its shape or dtype changes), and a call whose
    arguments all went there reuses one argument list: no allocation for the arguments.
    Other arguments (Python scalars) go through the invoker."""

    def __init__(self, module: Module, name: str, invoker: Any):
        self.module = module
        self.name = name
        self._invoker: _Handles | None = _Handles(module, invoker)  # None once released
        self._space = "cpu" if module.driver in CPU_DRIVERS else module.driver  # memory space
        self._maps_results = module.driver in CPU_DRIVERS
        # whether results never share memory with arguments or each other (None: no call yet)
        self._fresh: bool | None = None

    def call(self, *args: Any) -> tuple[np.ndarray, ...]:
        """Run the function on numpy arrays (or scalars); see the module doc for result memory
        and for arguments that are earlier results (passed as device buffers)."""
        if events.ACTIVE is not None:
            return self._recorded(args)
        return self._run(args, None)

    def call_deferred(self, cls: type[Unmapped], *args: Any) -> tuple[Any, ...]:
        """`call`, except that on a CPU driver, once the first call has shown that no result
        shares memory with an argument or another result, each array result comes back as
        an instance of `cls` (an `Unmapped` class), not mapped yet (see the module doc)."""
        if events.ACTIVE is not None:
            return self._recorded(args)
        return self._run(args, cls)

    def _recorded(self, args: tuple) -> tuple[np.ndarray, ...]:
        """A call while a profile records: one `call` span, with the bytes it uploaded."""
        rec = events.ACTIVE
        before = _counts["uploaded_bytes"], _counts["read_back_bytes"]
        info = {"function": self.name, "driver": self.module.driver, "args": len(args)}
        if rec.record_shapes:
            info["shapes"] = [list(np.shape(a)) for a in args]
            info["dtypes"] = [str(getattr(a, "dtype", type(a).__name__)) for a in args]
        rec.keep_call(self, args)
        with rec.span(f"call {self.name}", "call", info):
            out = self._run(args, None)
        info["uploaded_bytes"] = _counts["uploaded_bytes"] - before[0]
        info["read_back_bytes"] = _counts["read_back_bytes"] - before[1]
        return out

    def _run(self, args: tuple, defer: type[Unmapped] | None) -> tuple[Any, ...]:
        h = self._invoker
        if h is None:
            self.module._live()
        n = len(args)
        # staging buffers, unless another thread's call is using them
        slots = h.slots if self._maps_results and h.lock.acquire(False) else None
        try:
            if slots is not None and len(slots) != n:
                slots = h.slots = [None] * n
                h.slot_args = None
                h.spans = []
            views: list[rt.HalBufferView] = []
            resident: list[np.ndarray] = []
            uploaded = up_bytes = 0
            all_staged = slots is not None
            for i, a in enumerate(args):
                if not isinstance(a, np.ndarray):
                    if not isinstance(a, Unmapped):
                        return self._call_packed(args)
                    if a._array is None and self._maps_results:  # its buffer, unmapped
                        resident.append(a)
                        all_staged = False
                        views.append(a._keep[1])
                        continue
                    a = a.array()
                view = _resident_view(a, self._space)
                if view is not None:
                    resident.append(a)
                    all_staged = False
                    views.append(view)
                    continue
                uploaded += 1
                up_bytes += a.nbytes
                slot = slots[i] if slots is not None else None
                if slot is not None and slot[1] == a.shape and slot[0] == a.dtype:
                    np.copyto(slot[3], a)
                    views.append(slot[2])
                    continue
                if not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a)
                view = h.allocator.allocate_buffer_copy(
                    memory_type=_ARG_MEMORY, allowed_usage=_ARG_USAGE, device=h.device,
                    buffer=a, element_type=_element_type(a.dtype))  # fmt: skip
                views.append(view)
                if slots is not None and 0 < a.nbytes <= STAGE_MAX_BYTES:
                    slots[i] = _staging_slot(a, view)
                    h.slot_args = None
                    h.spans = sorted(slot[4] for slot in slots if slot is not None)
                else:
                    all_staged = False
            arg_list = h.slot_args if all_staged else None
            if arg_list is None:
                arg_list = rt.VmVariantList(n)
                for view in views:
                    arg_list.push_ref(view)
                if all_staged:
                    h.slot_args = arg_list
            ret = rt.VmVariantList(h.n_results)
            h.context.invoke(h.function, arg_list, ret)
            n_ret = ret.size
            if n_ret > h.n_results:
                h.n_results = n_ret
            values: list[Any] = []
            for i in range(n_ret):
                try:
                    values.append(ret.get_as_object(i, rt.HalBufferView))
                except ValueError:  # not a ref: a scalar result
                    values.append(ret.get_variant(i))
            return self._finish(values, resident, uploaded, up_bytes, h.spans, views, defer)
        finally:
            if slots is not None:
                h.lock.release()

    __call__ = call

    def _call_packed(self, args: tuple) -> tuple[np.ndarray, ...]:
        """A call with non-array arguments: IREE's invoker packs them."""
        packed: list[Any] = []
        resident: list[np.ndarray] = []
        uploaded = up_bytes = 0
        for a in args:
            if isinstance(a, Unmapped):
                a = a.array()
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
        raw = self._invoker.invoker(*packed)
        values = raw if isinstance(raw, tuple) else (() if raw is None else (raw,))
        views = [v._buffer_view if isinstance(v, rt.DeviceArray) else v for v in values]
        return self._finish(views, resident, uploaded, up_bytes, [], None, None)

    def _finish(self, values: list[Any], resident: list, uploaded: int, up_bytes: int,
                staged: list, arg_views: list | None, defer: type[Unmapped] | None,
                ) -> tuple[Any, ...]:  # fmt: skip
        """Result buffer views as numpy arrays (or `defer` instances), and the call counted.
        `staged`: the spans of the staging buffers this call used (a result IREE returns in
        one is copied); `arg_views`: the argument buffers, when known (the first such call
        finds out whether results may share memory with them)."""
        device = self._invoker.device
        if self._maps_results:
            fresh = self._fresh
            if fresh is None and arg_views is not None:
                fresh = self._fresh = not _shares_memory(values, arg_views)
            if fresh and defer is not None:
                out = _unmapped(values, device, defer)
            elif fresh:  # nothing to check results against
                out = _map_results(values, self._space, [], device, [])
            else:
                out = _map_results(values, self._space, resident, device, staged)
            read_back = 0
        else:
            out = _read_back(values, device, self._space)
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

    def __repr__(self) -> str:
        return f"<flow.targets.Function {self.name} on {self.module.driver}>"


class _Handles:
    """What calls of one function use of the runtime: IREE's invoker (for calls it packs),
    the VM context and function, the device and its allocator, and the staging buffers. The
    runtime drops them together at shutdown (`Module._release` clears `Function._invoker`),
    so none outlives its device."""

    __slots__ = ("invoker", "context", "function", "device", "allocator", "n_results",
                 "slots", "slot_args", "spans", "lock")  # fmt: skip

    def __init__(self, module: Module, invoker: Any):
        self.invoker = invoker
        self.context = module._context.vm_context
        self.function = invoker.vm_function
        self.device = module.device
        self.allocator = self.device.allocator
        self.n_results = 1  # the capacity of a result list (grown to the count seen)
        # per argument position: (dtype, shape, buffer view, its mapped array, its span)
        self.slots: list[tuple | None] = []
        self.slot_args: rt.VmVariantList | None = None  # the staging buffers' argument list
        self.spans: list[tuple[int, int]] = []  # the staging buffers' memory, sorted
        self.lock = threading.Lock()


_BYTE = np.dtype(np.uint8)
STAGE_MAX_BYTES = 1 << 16  # larger arguments are uploaded into fresh buffers: copying is
# most of their cost, and a staging buffer would keep a second copy of them alive


def _staging_slot(a: np.ndarray, view: rt.HalBufferView) -> tuple:
    """A staging buffer for arguments like `a`, whose contents `view` already holds."""
    # writable, unlike np.frombuffer's; as bytes: IREE's asarray knows no ml_dtypes dtypes
    mapped = view.map().asarray([a.nbytes], _BYTE).view(a.dtype).reshape(a.shape)
    start = address(mapped)
    return (a.dtype, a.shape, view, mapped, (start, start + a.nbytes))


# How arguments are uploaded: as IREE's invoker does (`FunctionInvoker`'s implicit buffers).
_ARG_MEMORY = int(rt.MemoryType.DEVICE_LOCAL)
_ARG_USAGE = int(rt.BufferUsage.DEFAULT)
_ELEMENT_TYPES: dict[np.dtype, rt.HalElementType] = {}  # numpy dtype -> IREE element type
_DTYPES: dict[int, tuple[np.dtype, str, bool]] = {}  # IREE element type -> `_result_type`


def _element_type(dtype: np.dtype) -> rt.HalElementType:
    et = _ELEMENT_TYPES.get(dtype)
    if et is None:
        from iree.runtime.dtypes import map_dtype_to_hal_element_type

        et = map_dtype_to_hal_element_type(dtype)
        if et is None:
            raise TypeError(f"flow.targets: no IREE element type for numpy dtype {dtype}")
        _ELEMENT_TYPES[dtype] = et
    return et


def _dtype(view: rt.HalBufferView) -> np.dtype:
    """The numpy dtype of a buffer view's elements."""
    return _result_type(view.element_type)[0]


def _result_type(element_type: int) -> tuple[np.dtype, str, bool]:
    """Of an IREE element type: its numpy dtype, the `typestr` numpy maps it with, and
    whether the mapped array must be viewed as the dtype (IREE names bf16 only once ml_dtypes
    is loaded, and its typestr is a raw 2-byte void)."""
    found = _DTYPES.get(element_type)
    if found is None:
        dtype = np.dtype(rt.HalElementType.map_to_dtype(element_type))
        if dtype.kind == "V":
            import ml_dtypes  # noqa: F401  (numpy knows the name "bfloat16" once it is imported)

            dtype = np.dtype(rt.HalElementType.map_to_dtype(element_type))
        found = _DTYPES[element_type] = (dtype, dtype.str, np.dtype(dtype.str) != dtype)
    return found


def _span(arr: np.ndarray | Unmapped) -> tuple[int, int]:
    if isinstance(arr, Unmapped):
        arr = arr.array()
    base = arr.base
    if base.__class__ is np.ndarray:
        base = base.base
    if base.__class__ is Mapping and base.owner() is arr:
        return base.span
    start = address(arr)
    return start, start + arr.nbytes


def _unmapped(values: list[Any], device: rt.HalDevice, cls: type[Unmapped]) -> tuple[Any, ...]:
    """CPU results as unmapped `cls` values (scalar results as 0-d arrays)."""
    out: list[Any] = []
    for view in values:
        if not isinstance(view, rt.HalBufferView):
            out.append(np.asarray(view))
            continue
        u = object.__new__(cls)
        u._array = None
        u._keep = (device, view)
        u._type = _result_type(view.element_type)
        u.shape = tuple(view.shape)
        out.append(u)
    return tuple(out)


def _view_span(view: rt.HalBufferView) -> tuple[int, int] | None:
    size = view.byte_length
    if not size:
        return None
    start = address(np.frombuffer(view.map(), _BYTE, size))
    return start, start + size


def _shares_memory(values: list[Any], arg_views: list[rt.HalBufferView]) -> bool:
    """Whether a result buffer overlaps an argument buffer or another result's."""
    spans = [_view_span(v) for v in values if isinstance(v, rt.HalBufferView)]
    results = [s for s in spans if s is not None]
    others = [s for s in map(_view_span, arg_views) if s is not None]
    for i, (start, end) in enumerate(results):
        for s, e in [*others, *results[i + 1 :]]:
            if start < e and s < end:
                return True
    return False


def _map_results(
    values: list[Any], space: str, resident: list[np.ndarray], device: rt.HalDevice,
    staged: list[tuple[int, int]],
) -> tuple[np.ndarray, ...]:
    """CPU results as numpy arrays mapping their device buffers (remembered for later calls);
    copies where a result shares memory with an earlier result, a resident argument or a
    staging buffer (`staged`: their spans, sorted)."""
    if resident:
        taken: list[tuple[int, int]] = []  # disjoint spans, sorted
        for start, end in sorted([_span(a) for a in resident if a.nbytes] + staged):
            if taken and start < taken[-1][1]:
                taken[-1] = (taken[-1][0], max(end, taken[-1][1]))
            else:
                taken.append((start, end))
    else:
        taken = list(staged)
    out: list[np.ndarray] = []
    for view in values:
        if not isinstance(view, rt.HalBufferView):  # a scalar result
            out.append(np.asarray(view))
            continue
        dtype, typestr, as_view = _result_type(view.element_type)
        shape = tuple(view.shape)
        size = view.byte_length
        if size == 0:  # nothing to map: an array of our own, holding no buffer
            out.append(np.empty(shape, dtype))
            continue
        mapped = view.map()
        start = address(np.frombuffer(mapped, _BYTE, size))
        span = (start, start + size)
        if taken:
            i = bisect.bisect_left(taken, span)
            if (i < len(taken) and taken[i][0] < span[1]) or (
                i > 0 and taken[i - 1][1] > span[0]
            ):
                flat = np.frombuffer(mapped, dtype, size // dtype.itemsize)
                out.append(flat.reshape(shape).copy())
                continue
            taken.insert(i, span)
        else:
            taken.append(span)
        out.append(map_array(mapped, span, shape, (dtype, typestr, as_view), device, view, space))
    return tuple(out)


def _read_back(values: list[Any], device: rt.HalDevice, space: str) -> tuple[np.ndarray, ...]:
    """Copy device results into numpy through host-visible staging buffers (one wait for all);
    each array is read-only and remembers its device buffer (see the module doc)."""
    staged: list[tuple[rt.HalBuffer | None, tuple, np.dtype] | None] = []
    sem = device.create_semaphore(0)
    step = 0
    for view in values:
        if not isinstance(view, rt.HalBufferView):
            staged.append(None)
            continue
        dtype = _dtype(view)
        src = view.get_buffer()
        if src.byte_length() == 0:
            staged.append((None, tuple(view.shape), dtype))
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
        staged.append((host, tuple(view.shape), dtype))
    if step:
        rt.HalFence.create_at(sem, step).wait()
    out: list[np.ndarray] = []
    for view, entry in zip(values, staged):
        if entry is None:
            out.append(np.asarray(view))
            continue
        host, shape, dtype = entry
        if host is None:
            arr = np.empty(shape, dtype)
        else:
            arr = np.array(host.map().asarray(list(shape), dtype))
        arr.flags.writeable = False
        _remember(arr, space, view)
        out.append(arr)
    return tuple(out)
