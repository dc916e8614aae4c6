"""Load compiled modules on an IREE device and call their functions with numpy arrays.

One IREE device (and VM instance) per driver is created lazily and shared process-wide:
device creation is expensive, and a module can only run on a device of its target.

Calling a loaded function (:class:`Function`: results as numpy arrays, values that stay on the
device between calls, transfer counters) is :mod:`flow.targets.calls`.

Lifetime: this module owns every IREE object it creates (the per-driver devices and VM
instances, and through weak registries each module's context and functions) and releases them
in order at exit (:func:`shutdown`, an ``atexit`` hook): Python's garbage collector at
interpreter finalisation frees them in whatever order it picks, and some orders crash inside
IREE's runtime. Result arrays stay valid after that: one that maps device memory holds the
device (through its base), so the device goes only with the last of them.

``FLOW_CPU_DRIVER`` (``local-task`` or ``local-sync``) overrides the cpu target's default driver:
the launcher sets ``local-sync`` when there are at least as many ranks as cores, where each
rank's ``local-task`` workers would compete for the same cores. ``load`` links the ``comm``
module of :mod:`flow.targets.collectives` into programs that import it (MPI collectives), and
the ``blas`` module of :mod:`flow.targets.blas_module` into cpu programs that call the host's
BLAS.
"""

from __future__ import annotations

import atexit
import gc
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import iree.runtime as rt

from . import events
from .blas_abi import imported_products
from .blas_module import create_module as create_blas_module
from .calls import Function, TransferStats, forget_residents, reset_transfer_stats, transfer_stats
from .comm_abi import imported_collectives
from .comm_module import create_module
from .mpi import prepare_iree_for_mpi
from .table import CPU_DRIVERS, DEFAULT_TARGET, TARGETS, Target, get_target

__all__ = [
    "CPU_DRIVERS",
    "Function",
    "LoadError",
    "Module",
    "RuntimeClosedError",
    "RuntimeUnavailableError",
    "TransferStats",
    "UnknownFunctionError",
    "available",
    "device_config",
    "device_names",
    "load",
    "load_problem",
    "require",
    "reset_transfer_stats",
    "resolve_driver",
    "shutdown",
    "transfer_stats",
]

class RuntimeUnavailableError(RuntimeError):
    """The target's runtime driver has no usable device on this machine."""


class LoadError(RuntimeError):
    """IREE could not load a module (not a VM flatbuffer, or built for another device)."""

    def __init__(self, message: str, *, compiled_for: str | None = None):
        super().__init__(message)
        self.compiled_for = compiled_for


class RuntimeClosedError(RuntimeError):
    """The runtime was shut down (at interpreter exit): no module can be loaded or called."""


class UnknownFunctionError(KeyError):
    """A function name that the module does not export."""

    def __str__(self) -> str:  # KeyError would show the repr of the message
        return str(self.args[0]) if self.args else ""


_lock = threading.Lock()
_configs: dict[str, rt.Config | str] = {}  # driver -> config, or why it is unavailable
_modules: weakref.WeakSet[Module] = weakref.WeakSet()  # every loaded module, for shutdown
_closed = False  # set by shutdown: nothing loads or runs after it


def _create_config(driver: str) -> rt.Config | str:
    prepare_iree_for_mpi()  # under mpiexec, IREE would otherwise fail to load its own libmpi
    try:
        if driver in CPU_DRIVERS:
            # The caching allocator keeps freed buffers for the next call: without it a result
            # above glibc's mmap threshold (32 MiB) is fresh memory every call, and faulting in
            # its pages doubled the time of a 64 MiB elementwise chain on local-sync.
            device = rt.get_driver(driver).create_device_by_uri(driver, allocators=["caching"])
        else:
            device = _rank_device(driver)
        return rt.Config(device=device)
    except Exception as err:  # noqa: BLE001 -- any failure means "no usable device"
        return f"{type(err).__name__}: {err}"


_local_rank = 0  # this process's rank on its node (flow.env sets it under a launcher)


def set_local_rank(rank: int) -> None:
    """Tell the runtime this process's rank on its node: with several GPUs (or Vulkan
    devices) on a node, local rank r runs on device r mod their number."""
    global _local_rank
    _local_rank = int(rank)


def _rank_device(driver: str) -> rt.HalDevice:
    """The driver's device for this process: its first, or the local rank's when the node has
    several, so that the ranks of a node spread over its GPUs."""
    if _local_rank:
        hal_driver = rt.get_driver(driver)
        devices = hal_driver.query_available_devices()
        if len(devices) > 1:
            return hal_driver.create_device(devices[_local_rank % len(devices)])
    return rt.get_device(driver, cache=False)  # ours to release (see shutdown), not IREE's


def _config_or_reason(driver: str) -> rt.Config | str:
    with _lock:
        if _closed:
            raise RuntimeClosedError(
                f"the IREE runtime was shut down (at interpreter exit): cannot use {driver!r}"
            )
        entry = _configs.get(driver)
        if entry is None:
            entry = _configs[driver] = _create_config(driver)
        return entry


def cpu_device_peak() -> int:
    """The peak bytes of the cpu devices' allocators this process created (0 when it created
    none); creates nothing. local-task's statistics leave out transient buffers."""
    with _lock:
        configs = [c for d, c in _configs.items() if d in CPU_DRIVERS and isinstance(c, rt.Config)]
    return max((int(c.device.allocator.statistics.get("device_bytes_peak", 0))
                for c in configs), default=0)  # fmt: skip


def resolve_driver(target: str | Target = DEFAULT_TARGET, driver: str | None = None) -> str:
    """The driver a target runs on: ``driver`` if given, else ``FLOW_CPU_DRIVER`` for the cpu
    target, else the target's own."""
    tgt = get_target(target)
    if driver:
        return driver
    env = os.environ.get("FLOW_CPU_DRIVER", "").strip()
    if tgt.name == "cpu" and env:
        if env not in CPU_DRIVERS:
            raise ValueError(f"FLOW_CPU_DRIVER={env!r}: expected one of {', '.join(CPU_DRIVERS)}")
        return env
    return tgt.driver


# How errors name the kind of device a driver drives ("no CUDA device: ...").
_DEVICE_KIND = {"local-task": "CPU", "local-sync": "CPU", "cuda": "CUDA", "hip": "ROCm (HIP)",
                "vulkan": "Vulkan"}  # fmt: skip


def device_config(target: str | Target = DEFAULT_TARGET, driver: str | None = None) -> rt.Config:
    """The shared ``iree.runtime.Config`` (device + VM instance) for a target's driver; raises
    :class:`RuntimeUnavailableError` (naming what is missing and what is usable) without one."""
    tgt = get_target(target)
    drv = resolve_driver(tgt, driver)
    entry = _config_or_reason(drv)
    if isinstance(entry, str):
        usable = ", ".join(available()) or "none"
        compiled_in = ", ".join(sorted(rt.query_available_drivers()))
        raise RuntimeUnavailableError(
            f"no {_DEVICE_KIND.get(drv, drv)} device: target {tgt.name!r} needs the IREE runtime "
            f"driver {drv!r}, which has no usable device here ({entry}). Drivers in this IREE "
            f"runtime: {compiled_in}; targets usable here: {usable}"
        )
    return entry


def require(target: str | Target = DEFAULT_TARGET) -> None:
    """Raise :class:`RuntimeUnavailableError` unless ``target`` can run programs here: called
    before a program is compiled to run, so a missing device fails fast (compiling for a
    device that is absent, e.g. ``flow-compile --target cuda``, needs no such check)."""
    device_config(target)


_device_names: dict[str, tuple[str, ...]] = {}


def device_names(target: str | Target = DEFAULT_TARGET) -> tuple[str, ...]:
    """The names of the devices the target's driver sees here, in IREE's order (device ``i``
    of ``flow.device("vulkan:i")``); empty when the driver has none (cached)."""
    drv = resolve_driver(get_target(target))
    names = _device_names.get(drv)
    if names is None:
        if drv in CPU_DRIVERS:
            names = ("host CPU",)
        else:
            try:
                found = rt.get_driver(drv).query_available_devices()
                names = tuple(str(d.get("name", "")) for d in found)
            except Exception:  # noqa: BLE001 -- no driver library: no device
                names = ()
        _device_names[drv] = names
    return names


_available: tuple[str, ...] | None = None


def available() -> tuple[str, ...]:
    """Names of the targets whose runtime driver can create a device here (cached).
    ``cpu`` is always usable; ``vulkan`` needs a Vulkan loader and device (lavapipe counts)."""
    global _available
    if _available is None:
        _available = tuple(
            name
            for name, t in TARGETS.items()
            if name == "cpu" or not isinstance(_config_or_reason(t.driver), str)
        )
    return _available


def load(
    vmfb: bytes,
    target: str | Target = DEFAULT_TARGET,
    *,
    driver: str | None = None,
    collectives: bool | None = None,
    groups: Any = None,
) -> Module:
    """Load a compiled module onto the device of ``target`` (or of ``driver``, e.g.
    ``local-sync`` for a cpu module when ranks outnumber cores). With ``collectives`` (by
    default: when the module imports any), the ``comm`` collectives are linked in (MPI on host
    memory: a GPU or Vulkan device's buffers are staged); ``groups`` is then the program's group
    table (its id ``i + 1`` names the
    world ranks ``groups[i]``), or None for process-wide group ids."""
    t0 = time.perf_counter_ns() if events.ACTIVE is not None else 0
    tgt = get_target(target)
    drv = resolve_driver(tgt, driver)
    if collectives is None:
        collectives = bool(imported_collectives(vmfb))
    config = device_config(tgt, drv)
    imports: list[rt.VmModule] = []
    keep_alive: list[Any] = []  # the Python module interfaces behind the imports
    if collectives:
        comm_module, iface = create_module(
            config.device, vmfb, groups, host_memory=drv in CPU_DRIVERS
        )
        imports.append(comm_module)
        keep_alive.append(iface)
    if imported_products(vmfb):
        if drv not in CPU_DRIVERS:
            raise LoadError(f"the module calls the host's BLAS (`blas` imports), which only a "
                            f"cpu driver provides, not {drv!r}")  # fmt: skip
        blas_module, iface = create_blas_module(config.device, vmfb)
        imports.append(blas_module)
        keep_alive.append(iface)
    try:
        vm_module = rt.VmModule.copy_buffer(config.vm_instance, vmfb)
        context = rt.SystemContext(vm_modules=(*imports, vm_module), config=config)
    except (RuntimeError, ValueError) as err:
        built_for = _module_target(str(err))
        if built_for is not None and built_for != tgt.name:
            raise LoadError(
                f"the module was compiled for target {built_for!r}, not {tgt.name!r}; "
                f"load it with target={built_for!r}",
                compiled_for=built_for,
            ) from None
        raise LoadError(
            f"cannot load module for target {tgt.name!r} on driver {drv!r}: {err}"
        ) from None
    module = Module(context, vm_module, tgt, drv)
    module._keep_alive = keep_alive
    module.vmfb = vmfb  # a reference, for replaying it under IREE's profiling (flow.profiler)
    module.host_modules = tuple(m.name for m in imports)
    rec = events.ACTIVE
    if rec is not None and t0:
        rec.add("iree.load", "load", t0, time.perf_counter_ns(),
                {"target": tgt.name, "driver": drv, "vmfb_bytes": len(vmfb),
                 "host_modules": list(module.host_modules)})  # fmt: skip
    _modules.add(module)
    return module


_probe: list[rt.VmInstance] = []  # a VM instance for load_problem (no device needed)


def load_problem(vmfb: bytes) -> str | None:
    """Why IREE's runtime cannot load ``vmfb`` as a module (not a VM flatbuffer, a bytecode
    version this runtime does not read, a failed verification), or None when it can; which
    device it runs on is not checked. The compile cache asks before it trusts an entry."""
    with _lock:
        if _closed:
            return None
        if not _probe:
            _probe.append(rt.VmInstance())
        instance = _probe[0]
    try:
        rt.VmModule.copy_buffer(instance, vmfb)
    except (RuntimeError, ValueError) as err:
        return str(err)
    return None


_IREE_DEVICE_TO_TARGET = {"local": "cpu", "llvm-cpu": "cpu", "cuda": "cuda", "hip": "rocm",
                          "rocm": "rocm", "vulkan": "vulkan"}  # fmt: skip


def _module_target(message: str) -> str | None:
    """Our target name for the device a module asks for, from IREE's 'device not found' error."""
    m = re.search(r'#hal\.device\.target<"([\w-]+)"', message)
    return _IREE_DEVICE_TO_TARGET.get(m.group(1)) if m else None


class Module:
    """A loaded module; ``module["main"]`` is a callable :class:`Function`."""

    def __init__(
        self, context: rt.SystemContext, vm_module: rt.VmModule, target: Target, driver: str
    ):
        self._context = context
        self._vm_module = vm_module
        self._bound = context.modules[vm_module.name]
        self.target = target
        self.driver = driver
        self._functions: dict[str, Function] = {}
        self._keep_alive: Any = None  # the Python module interface behind imports, if any
        self.vmfb: bytes | None = None  # the module's flatbuffer, when `load` made it
        self.host_modules: tuple[str, ...] = ()  # imported modules written in Python

    @property
    def device(self) -> rt.HalDevice:
        return self._live()._context.config.device

    @property
    def names(self) -> tuple[str, ...]:
        """Exported function names (IREE's internal ``__init`` etc. left out)."""
        return tuple(n for n in self._live()._vm_module.function_names if not n.startswith("__"))

    def _live(self) -> Module:
        if self._context is None:
            raise RuntimeClosedError(
                f"module on {self.driver!r} was released: the IREE runtime was shut down "
                "(at interpreter exit)"
            )
        return self

    def _release(self) -> None:
        """Drop the IREE objects of this module: functions, then the context, then the
        module and the Python module interface behind its imports."""
        for fn in self._functions.values():
            fn._invoker = None
        self._functions.clear()
        self._bound = None
        self._context = None
        self._vm_module = None
        self._keep_alive = None

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __getitem__(self, name: str) -> Function:
        fn = self._functions.get(name)
        if fn is None:
            if name not in self.names:
                raise UnknownFunctionError(
                    f"module has no function {name!r}; exported functions: "
                    f"{', '.join(self.names) or '(none)'}"
                )
            fn = self._functions[name] = Function(self, name, self._live()._bound[name])
        return fn

    def __repr__(self) -> str:
        t, names = self.target.name, list(self.names) if self._context is not None else "released"
        return f"<flow.targets.Module target={t} driver={self.driver} functions={names}>"


def shutdown() -> None:
    """Release every IREE object this module created, in a fixed order: each module's
    functions and context (and the Python module interface of its imports), the residency
    table, then per driver the HAL module, the device and the VM instance. Idempotent; runs at
    exit (``atexit``); loading or calling afterwards raises :class:`RuntimeClosedError`.

    Result arrays that map device memory stay valid: each holds (through its base) the device
    whose memory it maps, so that device goes only with the last of them."""
    global _closed
    with _lock:
        if _closed:
            return
        _closed = True
        configs = [c for c in _configs.values() if isinstance(c, rt.Config)]
        _configs.clear()
        _probe.clear()
    for module in list(_modules):
        module._release()
    forget_residents()
    gc.collect()  # contexts in reference cycles go now, while their devices are still alive
    for config in configs:
        config.default_vm_modules = ()  # the HAL module (it references the device)
        del config.device
        del config.vm_instance
    configs.clear()
    gc.collect()


# Registered when the runtime is imported: atexit hooks run last-registered first, so hooks a
# program registers after importing flow (which may still run compiled code) come first.
atexit.register(shutdown)
