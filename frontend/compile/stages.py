"""The stages of a compiled function: `Lowered` (traced flow IR) and `Compiled` (loaded IREE module).

`Lowered.compile(target)` looks the program up in the on-disk compile cache by a key taken
before lowering (its flow IR, the target and its flags, the sources of the lowering, the
`FLOW_*` knobs: `front_key`), lowers and compiles it on a miss, and loads it; a global
program compiles this rank's partition instead (compile/per_rank.py). `Compiled` runs it:
arguments are the array leaves of the call followed by the captured tensors (random keys
inserted where the trace drew them); results are written back into mutated tensors, made
eager in the tensors the trace created, and wrapped as tensors (global ones as this rank's
shards) in the structure the traced function returned.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from flow.core import device as _device
from flow.core import profiling
from flow.core.pending import PendingValue
from flow.core.pytree import flatten, unflatten
from flow.core.tensor import Tensor

from . import progress
from .signature import describe, signature

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["Compiled", "Lowered", "Program", "front_key"]


@dataclass
class Lowered:
    """A traced function in flow IR, ready to compile."""

    module: ModuleOp
    in_tree: Any
    out_tree: Any
    signature: tuple
    captured: list[Tensor]
    name: str
    key_slots: list = field(default_factory=list)  # (argument index, Generator): random keys
    mutated: list = field(default_factory=list)  # eager tensors written back after each call
    born: list = field(default_factory=list)  # tensors created by the trace, made eager once
    arg_dists: dict = field(default_factory=dict)  # argument index -> GlobalInfo (global args)
    out_dists: list = field(default_factory=list)  # per result: GlobalInfo, or None when local
    checks: list = field(default_factory=list)  # IndexCheck sites: two last results each
    eqns: dict = field(default_factory=dict)  # op -> (Primitive, params): see Trace.eqns
    grad_reached: list = field(default_factory=list)  # see Trace.grad_reached
    _front_keys: dict = field(default_factory=dict, repr=False)  # target name -> front_key
    _memory: dict = field(default_factory=dict, repr=False)  # target name -> MemoryAnalysis

    @property
    def is_global(self) -> bool:
        """Whether this is a global program (compiled per rank, run on shards)."""
        return bool(self.arg_dists) or any(d is not None for d in self.out_dists)

    def as_text(self, *, debug_info: bool = False) -> str:
        """The flow IR (custom assembly format; `debug_info` adds source locations)."""
        from xdsl.printer import Printer

        out = io.StringIO()
        Printer(stream=out, print_debuginfo=debug_info).print_op(self.module)
        return out.getvalue() + "\n"

    def compile(self, target: str | None = None) -> Compiled:
        """Compile for `target` (default: cpu) and load the module on its device: a target
        with no usable device here fails first, before any compile work."""
        tgt = self.execution_target(target)
        if self.is_global:
            return Compiled(self, tgt.name, *self.build_for_rank(tgt))
        vmfb = self.cached_vmfb(tgt)
        return Compiled(self, tgt.name, vmfb if vmfb is not None else self.build_vmfb(tgt))

    def execution_target(self, target: str | None = None):
        """The target this program compiles for when asked for `target` (default: cpu):
        e.g. vulkan's local architecture. Raises if it cannot run here."""
        from flow.targets import DEFAULT_TARGET, execution_target, get_target, require

        tgt = get_target(target or DEFAULT_TARGET)
        require(tgt)
        return execution_target(tgt)

    def cached_vmfb(self, tgt) -> bytes | None:
        """This (local) program's module for `tgt` from the compile cache, without lowering
        it; None on a miss or with caching off."""
        from flow.targets import cache

        key = self._front_key(tgt)
        if key is None:
            return None
        rec = profiling.ACTIVE
        if rec is None:
            return cache.lookup(key)
        with rec.span("compile cache lookup", "compile", {"function": self.name}) as span:
            vmfb = cache.lookup(key)
            span.args["cache"] = "miss" if vmfb is None else "hit"  # before the span ends
        return vmfb

    def build_vmfb(self, tgt, *, in_child: bool = False) -> bytes:
        """Lower this (local) program and compile it for `tgt` (`in_child`: IREE runs as a
        child process, see `compile_mlir`), storing the module in the compile cache. Safe in
        a background thread: it reads the traced module, never changes it. A compile in the
        foreground shows a status line while it lasts (compile/progress.py)."""
        from flow.lowering import run_pipeline, to_iree_text
        from flow.targets import cache, compile_mlir

        shown = progress.status(f"compiling {self.name} for {tgt.name}")
        with _build_span(self.name, tgt, in_child), \
                contextlib.nullcontext(progress.Line("")) if in_child else shown as line:
            lowered = run_pipeline(self.module.clone(), handoff_pipeline(tgt))
            line.detail = f"{_kernels(lowered)} linalg ops"
            vmfb = compile_mlir(to_iree_text(lowered), tgt, in_child=in_child)
        key = self._front_key(tgt)
        if key is not None:
            cache.store(key, vmfb)
        return vmfb

    def build_for_rank(self, tgt, *, in_child: bool = False) -> tuple[bytes, list]:
        """This rank's compiled program of this global program for `tgt`, and the groups of
        its collectives (compile/per_rank.py; `in_child` as in `build_vmfb`). No MPI
        communication: safe in a background thread while the ranks run other collectives."""
        from flow.distributed import env

        from .per_rank import compile_for_rank

        rank = env.get_rank()
        shown = progress.status(f"compiling {self.name} for {tgt.name}, rank {rank}")
        with _build_span(self.name, tgt, in_child), \
                contextlib.nullcontext() if in_child else shown:
            # SBP inference already ran at trace time (it fixed the result distributions).
            # comm collectives on every target: flow's runtime runs them over MPI (a device's
            # buffers staged through host memory); it sets up no NCCL / RCCL channels
            return compile_for_rank(self.module, rank, tgt, infer_sbp=False, collectives="comm",
                                    in_child=in_child)  # fmt: skip

    def memory_analysis(self, target: str | None = None):
        """The static memory figures of this program compiled for `target` (default: cpu),
        of a global program this rank's: a `flow.lowering.memory_analysis.MemoryAnalysis`
        of the program after the flow-level steps of its lowering (fusion; partitioning and
        the pipeline schedule for a global one). Computed once per target."""
        from flow.lowering.memory_analysis import handoff_memory_analysis

        tgt = self.execution_target(target)
        if tgt.name not in self._memory:
            if self.is_global:
                from flow.distributed import env

                from .per_rank import rank_pipeline

                spec = rank_pipeline(env.get_rank(), tgt, collectives="comm")  # as compiled
            else:
                spec = handoff_pipeline(tgt)
            self._memory[tgt.name] = handoff_memory_analysis(self.module, spec)
        return self._memory[tgt.name]

    def _front_key(self, tgt) -> str | None:
        if tgt.name not in self._front_keys:
            self._front_keys[tgt.name] = front_key(self.module, tgt)
        return self._front_keys[tgt.name]


def _build_span(name: str, tgt, in_child: bool):
    """The profile's span of lowering and compiling one program (nothing when off)."""
    rec = profiling.ACTIVE
    if rec is None:
        return contextlib.nullcontext()
    return rec.span(f"build {name}", "build", {"function": name, "target": tgt.name,
                                               "background": in_child})  # fmt: skip


def handoff_pipeline(tgt) -> str:
    """The pipeline that lowers a local program for `tgt` to IREE input: on the cpu target of
    this host, large matrix products call the host's BLAS where this machine's calibration
    found it faster (`FLOW_BLAS` overrides; flow.targets.blas_calibration)."""
    from flow.targets.blas_calibration import policy

    return f"flow-to-iree-input{{blas={policy(tgt)}}}"


def _kernels(module: ModuleOp) -> int:
    """The linalg ops of a lowered program: the kernels IREE starts from (it fuses them)."""
    return sum(1 for op in module.walk()
               if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index"))  # fmt: skip


def front_key(module: ModuleOp, target) -> str | None:
    """The compile-cache key of a traced program before lowering: its flow IR, the target and
    its flags, the lowering and dialect sources and the `FLOW_*` knobs. A hit skips lowering
    (and the imports it needs), which is most of a cached compile; None when caching is off."""
    from flow.targets import cache, compile_flags

    if cache.cache_dir() is None:
        return None
    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    knobs = sorted(f"{k}={v}" for k, v in os.environ.items()
                   if k.startswith("FLOW_") and k not in _KNOBS_NOT_IN_KEY)  # fmt: skip
    extra = [f"flow-sources={_sources_digest()}", *knobs]
    return cache.cache_key(out.getvalue(), target.name, [*compile_flags(target), *extra])


# Environment knobs that cannot change a compiled program.
_KNOBS_NOT_IN_KEY = {"FLOW_CACHE_DIR", "FLOW_NO_CACHE", "FLOW_DUMP_IR", "FLOW_CPU_DRIVER",
                     "FLOW_COMM_PLAN", "FLOW_COLLECTIVE_TIMEOUT", "FLOW_SYNC_COMPILE",
                     "FLOW_VERBOSE"}  # fmt: skip


@functools.lru_cache(maxsize=1)
def _sources_digest() -> str:
    """A digest of the code that turns flow IR into a module (dialect, lowering, and the
    targets, whose checks run before IREE): each source file's path, size and modification
    time (reading them all costs ~20 ms)."""
    import hashlib
    import importlib.util
    from pathlib import Path

    h = hashlib.sha256()
    for package in ("flow.dialect", "flow.lowering", "flow.targets"):
        spec = importlib.util.find_spec(package)
        for folder in spec.submodule_search_locations or ():
            for path in sorted(Path(folder).rglob("*.py")):
                st = path.stat()
                h.update(f"{path.relative_to(folder)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


class Program:
    """A lowered function made runnable: `_fn(*inputs)` maps the program's input arrays to its
    output arrays (the IREE module's function, or compile/interpret.py's interpreter), and
    `call_flat` turns a call's arguments into those inputs and the outputs into results."""

    lowered: Lowered
    target: str
    device: Any  # of the results; None for the cpu
    groups: list | None = None  # of a global program: its collectives' rank groups
    vmfb: bytes | None = None
    _fn: Any

    def __call__(self, *args):
        leaves, _ = flatten(list(args))
        sig = signature(leaves)
        if sig != self.lowered.signature:
            raise TypeError(
                f"{self.lowered.name}: compiled for arguments {describe(self.lowered.signature)} "
                f"but called with {describe(sig)}"
            )
        return self.call_flat(leaves)

    def memory_analysis(self):
        """The static memory figures of this program, of a global program this rank's
        (argument, output, alias and temporary bytes, the peak live bytes), like JAX's
        `compiled.memory_analysis()`: see `flow.lowering.memory_analysis`."""
        return self.lowered.memory_analysis(self.target)

    @property
    def entry(self):
        """The loaded function itself: takes this program's input arrays (no captured tensors
        added, no signature check), returns its output arrays."""
        return self._fn

    def call_flat(self, leaves: list):
        """Run on the flattened arguments `leaves` (of this program's signature, unchecked)."""
        low = self.lowered
        plain = self.__dict__.get("_plain")
        if plain is None:
            plain = self._plain = self._is_plain()
        deferred = getattr(self._fn, "call_deferred", None) if plain else None
        if deferred is not None:  # local results only, nothing to insert, check or write back
            inputs = [_host(x, True) for x in leaves if isinstance(x, (Tensor, np.ndarray))]
            if low.captured:
                inputs += [_host(t, True) for t in low.captured]
            outputs = deferred(DeviceValue or _device_value(), *inputs)
            return unflatten(low.out_tree, [Tensor._eager(o) for o in outputs])
        inputs = [_host(x) for x in leaves if isinstance(x, (Tensor, np.ndarray))]
        if low.captured:
            inputs += [_host(t) for t in low.captured]
        if plain:
            return unflatten(low.out_tree, [Tensor._eager(np.asarray(o))
                                            for o in self._fn(*inputs)])  # fmt: skip
        for index, generator in low.key_slots:  # a fresh random key per call
            inputs.insert(index, generator._next_key_array())
        if self.groups is not None:  # a rank outside some placement holds no part of those
            from .per_rank import absent_results, held_inputs

            inputs = held_inputs(low, inputs)
            outputs = absent_results(low, [np.asarray(o) for o in self._fn(*inputs)])
        else:
            outputs = [np.asarray(o) for o in self._fn(*inputs)]
        if low.checks:  # before anything is written back: a failed step changes no state
            from flow.ops.index_checks import first_error

            n_checked = len(outputs) - 2 * len(low.checks)
            values = outputs[n_checked:]
            if low.is_global:  # the global values, on every rank (see _check_values)
                values = _check_values(values, low.out_dists[n_checked:],
                                       self._out_shapes()[n_checked:])  # fmt: skip
            err = first_error(low.checks, values)
            if err is not None:
                raise err
            outputs = outputs[:n_checked]
        n_user = len(outputs) - len(low.mutated) - len(low.born)
        if low.mutated:
            for t, o in zip(low.mutated, outputs[n_user:]):
                t._data = o  # the new value, in the buffer the runtime returned (no copy)
        if low.born:
            n_born = n_user + len(low.mutated)
            for t, o, info in zip(low.born, outputs[n_born:], low.out_dists[n_born:]):
                t._data, t._value, t._trace = o, None, None
                if info is not None:
                    t._dist = info
                if self.device is not None:
                    t._device = self.device
        if self._local_results():
            results = [Tensor._eager(o) for o in outputs[:n_user]]
        else:
            results = [_wrap(o, info, shape) for o, (info, shape) in
                       zip(outputs[:n_user], zip(low.out_dists, self._out_shapes()))]  # fmt: skip
        if self.device is not None:
            for r in results:
                r._device = self.device
        return unflatten(low.out_tree, results)

    def _is_plain(self) -> bool:
        """Whether a call only maps inputs to local results on the cpu: no random keys, no
        index checks, no tensors written back or made eager, no ranks, no device to tag
        (most of `call_flat` is then skipped: a few microseconds of a tiny call)."""
        low = self.lowered
        return (not low.key_slots and self.groups is None and not low.checks
                and not low.mutated and not low.born and self.device is None
                and self._local_results())  # fmt: skip

    def _local_results(self) -> bool:
        """Whether every result is a local tensor (no distribution to wrap them with)."""
        local = self.__dict__.get("_local")
        if local is None:
            local = self._local = all(d is None for d in self.lowered.out_dists)
        return local

    def _out_shapes(self) -> list[tuple[int, ...]]:
        shapes = self.__dict__.get("_shapes")
        if shapes is None:  # once: reading them from the IR costs ~7 us a call
            f = self.lowered.module.body.block.first_op
            shapes = self._shapes = [tuple(t.get_shape()) for t in f.function_type.outputs.data]
        return shapes


class Compiled(Program):
    """A compiled function: call it with tensors of the signature it was lowered for."""

    def __init__(self, lowered: Lowered, target: str, vmfb: bytes, groups: list | None = None):
        from flow.targets import load

        self.lowered = lowered
        self.target = target
        self.device = _device.of_target(target)
        self.vmfb = vmfb
        self.groups = groups
        name = lowered.module.body.block.first_op.sym_name.data
        if groups is None:
            self._fn = load(vmfb, target)[name]
            if _DriverTrial.applies(self._fn):
                self._fn = _DriverTrial(self, vmfb, name)
        else:
            self._fn = _load_for_rank(vmfb, groups, target)[name]


class _DriverTrial:
    """Runs a cpu program's first calls on `local-task`, then as many on `local-sync`, and
    keeps local-sync if it is clearly faster (by MARGIN), else local-task. Worker threads pay
    off on big kernels (the MLP step), while a program of many small dispatches runs faster
    on the calling thread, without waking workers for each one (the LeNet step: 2x). Each
    driver's calls run in one block, its first call untimed (the module loads its
    executables): right after a local-task call its workers still spin on the cores, which
    slowed an interleaved local-sync call by half. Results are host memory on both drivers,
    so parameters stay resident across the switch. Skipped when `FLOW_CPU_DRIVER` names a
    driver."""

    SAMPLES = 5  # timed calls per driver, after one untimed first call on each
    MARGIN = 0.75  # local-sync must be this much faster: a burst of load must not flip a choice

    @staticmethod
    def applies(fn) -> bool:
        return fn.module.driver == "local-task" and not os.environ.get("FLOW_CPU_DRIVER")

    def __init__(self, compiled: Compiled, vmfb: bytes, name: str):
        self._compiled, self._vmfb, self._name = compiled, vmfb, name
        self._fns = {"local-task": compiled._fn}
        self._times: dict[str, list[float]] = {"local-task": [], "local-sync": []}
        self._calls = 0
        self._best = None
        self.module = compiled._fn.module  # the driver in use (the faster one once decided)

    def __call__(self, *inputs):
        import time

        if self._best is not None:  # decided (for holders of this object)
            return self._best(*inputs)
        self._calls += 1
        block = self.SAMPLES + 1
        driver = "local-task" if self._calls <= block else "local-sync"
        if self._calls in (1, block + 1):  # a driver's first call: untimed
            if driver not in self._fns:
                from flow.targets import load

                self._fns[driver] = load(self._vmfb, "cpu", driver=driver)[self._name]
            return self._fns[driver](*inputs)
        t0 = time.perf_counter()
        out = self._fns[driver](*inputs)
        self._times[driver].append(time.perf_counter() - t0)
        if self._calls == 2 * block:
            import statistics

            # medians: local-task's slower calls (waking its workers) are part of its cost
            task, sync = (statistics.median(self._times[d]) for d in ("local-task", "local-sync"))
            best = "local-sync" if sync < self.MARGIN * task else "local-task"
            self._best = self._compiled._fn = self._fns[best]
            self.module = self._best.module
            self._fns = {}
        return out


def _check_values(outputs: list, infos: list, shapes: list) -> list[np.ndarray]:
    """The index-check results of a global program as global values: SBP inference makes them
    broadcast (read locally), a partial or absent one is gathered; every rank runs the same
    program, so all of them get the same values and raise together, none waits."""
    from flow.distributed.global_tensor import global_numpy

    return [o if info is None else global_numpy(_wrap(o, info, shape))
            for o, info, shape in zip(outputs, infos, shapes)]  # fmt: skip


def _wrap(data: np.ndarray, info, shape: tuple[int, ...]) -> Tensor:
    """A result as a tensor: local, or global with this rank's shard `data`."""
    if info is None:
        return Tensor._eager(data)
    from flow.distributed.placement import make_global

    return make_global(data, shape, info)


def _load_for_rank(vmfb: bytes, groups: list, target: str):
    """Load a rank's partition of a global program with the `comm` collectives, once."""
    from flow.distributed import env
    from flow.targets import load, prepare_iree_for_mpi

    prepare_iree_for_mpi()
    crowded = target == "cpu" and env.get_world_size() >= (os.cpu_count() or 1)
    return load(vmfb, target, driver="local-sync" if crowded else None, collectives=True,
                groups=groups)  # fmt: skip


class _DeviceValue(PendingValue):
    """A tensor's value that a compiled call returned and nothing has mapped into host memory
    yet: a `flow.targets.Unmapped` (`DeviceValue` is the class of both, made with the first
    such call, which has loaded flow.targets). Passed to another compiled call, it goes as
    the buffer it is; read, it becomes the mapped array (shared with tensors detached from
    it)."""

    __slots__ = ()

    def materialize(self, tensor: Tensor) -> np.ndarray:
        arr = self.array()
        if tensor._buf is self:
            tensor._buf = arr
        return arr

    def alias(self, tensor: Tensor, copy: bool) -> Tensor:
        self.materialize(tensor)
        return tensor.clone() if copy else tensor.detach()

    def rebind(self, tensor: Tensor) -> None:
        """`tensor` takes this value in place: written into its memory, as an array is."""
        held = tensor._buf
        if held.__class__ is DeviceValue:  # mapped first, so its sharers see the write
            held.materialize(tensor)
        tensor._rebind(Tensor._eager(self.array()), "copy_")


DeviceValue: type | None = None


def _device_value() -> type:
    global DeviceValue
    if DeviceValue is None:
        from flow.targets.mapping import Unmapped

        DeviceValue = type("DeviceValue", (Unmapped, _DeviceValue), {"__slots__": ()})
    return DeviceValue


def _host(x, unmapped: bool = False) -> np.ndarray | DeviceValue:
    """What the compiled function takes for `x`: its value, or of a global tensor its shard;
    `unmapped`: a `DeviceValue` as it is (a `flow.targets.Function` takes its buffer)."""
    if isinstance(x, Tensor):
        arr = x._buf  # the array itself, local or a shard, unless pending or traced
        if arr.__class__ is not np.ndarray:
            if unmapped and arr.__class__ is DeviceValue:
                return arr
            arr = x._data if getattr(x, "_dist", None) is not None else x.numpy()
    else:
        arr = x
    return np.asarray(arr, order="C")  # keeps 0-d arrays 0-d
