"""`flow.jit`: trace a Python function into flow IR, compile it with IREE, cache per signature.

Staged like JAX: `jit(f).lower(*args)` → `Lowered` (`.as_text()` is the flow
IR) → `.compile(target=...)` → `Compiled`, a callable running the IREE module.
Calling `jit(f)(*args)` does all three on the first call for each input
signature (shapes, dtypes, static arguments, target) and reuses the result.

Global tensors (frontend/_global.py) trace as arguments of their global type
with a `#flow.dist` encoding (placement and SBP are part of the signature);
`flow-infer-sbp` then gives every value its distribution, the function's
results take the distribution inference chose, and each rank compiles and runs
its own partition of the program on its shards (frontend/_distributed_compile.py),
getting global tensors back.
"""

from __future__ import annotations

import functools
import inspect
import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.printer import Printer
from xdsl.rewriter import Rewriter

from flow.core import device as _device
from flow.core import dtypes as _dtypes
from flow.ops.basic import tensor as _to_tensor
from flow.core.tensor import Tensor
from flow.core.trace import Trace

# --------------------------------------------------------------------------- pytrees


def _flatten(tree) -> tuple[list, Any]:
    """Leaves and structure of nested tuples / lists / dicts (leaves: anything else)."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = _flatten(item)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), tuple(specs))
    if isinstance(tree, dict):
        keys = sorted(tree)
        leaves, spec = _flatten([tree[k] for k in keys])
        return leaves, (dict, (tuple(keys), spec))
    return [tree], None


def _unflatten(spec, leaves: list):
    if spec is None:
        return leaves[0]
    kind, inner = spec
    if kind is dict:
        keys, sub = inner
        return dict(zip(keys, _unflatten(sub, leaves)))
    out, i = [], 0
    for n, sub in inner:
        out.append(_unflatten(sub, leaves[i : i + n]))
        i += n
    return kind(*out) if hasattr(kind, "_fields") else kind(out)  # a namedtuple, or not


def _is_array(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray))


def _signature(leaves: list) -> tuple:
    sig = []
    for x in leaves:
        if isinstance(x, Tensor) and getattr(x, "_dist", None) is not None:
            sig.append(("G", tuple(x.shape), x.dtype.name, x._dist.placement, x._dist.sbp))
        elif isinstance(x, Tensor):
            sig.append(("T", tuple(x.shape), x.dtype.name))
        elif isinstance(x, np.ndarray):
            sig.append(("T", x.shape, _dtypes.as_dtype(x.dtype).name))
        else:
            try:
                hash(x)
            except TypeError:
                raise TypeError(
                    f"flow.jit: argument of type {type(x).__name__} is neither a tensor nor "
                    "hashable; pass tensors/arrays, or hashable static values"
                ) from None
            sig.append(("S", type(x).__name__, x))
    return tuple(sig)


def _describe(sig: tuple) -> str:
    parts = []
    for entry in sig:
        if entry[0] == "T":
            parts.append(f"{entry[2]}{list(entry[1])}")
        elif entry[0] == "G":
            parts.append(f"global {entry[2]}{list(entry[1])} sbp={list(entry[4])}")
        else:
            parts.append(repr(entry[2]))
    return "(" + ", ".join(parts) + ")"


# --------------------------------------------------------------------------- stages


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

    @property
    def is_global(self) -> bool:
        """Whether this is a global program (compiled per rank, run on shards)."""
        return bool(self.arg_dists) or any(d is not None for d in self.out_dists)

    def as_text(self, *, debug_info: bool = False) -> str:
        """The flow IR (custom assembly format; `debug_info` adds source locations)."""
        out = io.StringIO()
        Printer(stream=out, print_debuginfo=debug_info).print_op(self.module)
        return out.getvalue() + "\n"

    def compile(self, target: str | None = None) -> Compiled:
        """Compile for `target` (default: cpu) and load the module on its device: a target
        with no usable device here fails first, before any compile work."""
        from flow.targets import DEFAULT_TARGET, compile_mlir, execution_target, get_target, require

        tgt = get_target(target or DEFAULT_TARGET)
        require(tgt)
        if self.is_global:
            from flow import env

            from flow.compile.per_rank import compile_for_rank

            # SBP inference already ran at trace time (it fixed the result distributions).
            tgt = execution_target(tgt)  # e.g. vulkan: the architecture of the local device
            # comm collectives on every target: flow's runtime runs them over MPI (a device's
            # buffers staged through host memory); it sets up no NCCL / RCCL channels
            vmfb, groups = compile_for_rank(
                self.module, env.get_rank(), tgt, infer_sbp=False, collectives="comm"
            )
            return Compiled(self, tgt.name, vmfb, groups)
        from flow.targets import cache

        tgt = execution_target(tgt)
        key = _front_key(self.module, tgt)
        vmfb = cache.lookup(key) if key is not None else None
        if vmfb is None:
            from flow.lowering import run_pipeline, to_iree_text

            lowered = run_pipeline(self.module.clone(), "flow-to-iree-input")
            vmfb = compile_mlir(to_iree_text(lowered), tgt)
            if key is not None:
                cache.store(key, vmfb)
        return Compiled(self, tgt.name, vmfb)


def _front_key(module: ModuleOp, target) -> str | None:
    """The compile-cache key of a traced program before lowering: its flow IR, the target and
    its flags, the lowering and dialect sources and the `FLOW_*` knobs. A hit skips lowering
    (and the imports it needs), which is most of a cached compile; None when caching is off."""
    from flow.targets import cache, compile_flags

    if cache.cache_dir() is None:
        return None
    out = io.StringIO()
    Printer(stream=out, print_generic_format=True).print_op(module)
    knobs = sorted(f"{k}={v}" for k, v in os.environ.items()
                   if k.startswith("FLOW_") and k not in _KNOBS_NOT_IN_KEY)  # fmt: skip
    extra = [f"flow-sources={_sources_digest()}", *knobs]
    return cache.cache_key(out.getvalue(), target.name, [*compile_flags(target), *extra])


# Environment knobs that cannot change a compiled program.
_KNOBS_NOT_IN_KEY = {"FLOW_CACHE_DIR", "FLOW_NO_CACHE", "FLOW_DUMP_IR", "FLOW_CPU_DRIVER",
                     "FLOW_COMM_PLAN", "FLOW_COLLECTIVE_TIMEOUT"}  # fmt: skip


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


class Compiled:
    """A compiled function: call it with tensors of the signature it was lowered for."""

    def __init__(self, lowered: Lowered, target: str, vmfb: bytes, groups: list | None = None):
        from flow.targets import load

        self.lowered = lowered
        self.target = target
        self.device = _device.of_target(target)  # of the results; None for the cpu
        self.vmfb = vmfb
        self.groups = groups  # of a global program: its collectives' rank groups
        name = lowered.module.body.block.first_op.sym_name.data
        if groups is None:
            self._fn = load(vmfb, target)[name]
            if _DriverTrial.applies(self._fn):
                self._fn = _DriverTrial(self, vmfb, name)
        else:
            self._fn = _load_for_rank(vmfb, groups, target)[name]

    def __call__(self, *args):
        leaves, _ = _flatten(list(args))
        sig = _signature(leaves)
        if sig != self.lowered.signature:
            raise TypeError(
                f"{self.lowered.name}: compiled for arguments {_describe(self.lowered.signature)} "
                f"but called with {_describe(sig)}"
            )
        return self._call_flat(leaves)

    def _call_flat(self, leaves: list):
        inputs = [_host(x) for x in leaves if _is_array(x)]
        inputs += [_host(t) for t in self.lowered.captured]
        for index, generator in self.lowered.key_slots:  # a fresh random key per call
            inputs.insert(index, generator._next_key_array())
        if self.groups is not None:  # a rank outside some placement holds no part of those
            from flow.compile.per_rank import absent_results, held_inputs

            inputs = held_inputs(self.lowered, inputs)
            outputs = absent_results(self.lowered, [np.asarray(o) for o in self._fn(*inputs)])
        else:
            outputs = [np.asarray(o) for o in self._fn(*inputs)]
        low = self.lowered
        if low.checks:  # before anything is written back: a failed step changes no state
            from flow.ops.index_checks import first_error

            n_checked = len(outputs) - 2 * len(low.checks)
            values = outputs[n_checked:]
            if self.groups is not None:  # the global values, on every rank (see _check_values)
                values = _check_values(values, low.out_dists[n_checked:],
                                       self._out_shapes()[n_checked:])  # fmt: skip
            err = first_error(low.checks, values)
            if err is not None:
                raise err
            outputs = outputs[:n_checked]
        n_user = len(outputs) - len(low.mutated) - len(low.born)
        for t, o in zip(low.mutated, outputs[n_user:]):
            t._data = o  # the new value, in the buffer the runtime returned (no copy)
        n_born = n_user + len(low.mutated)
        for t, o, info in zip(low.born, outputs[n_born:], low.out_dists[n_born:]):
            t._data, t._value, t._trace = o, None, None
            if info is not None:
                t._dist = info
            if self.device is not None:
                t._device = self.device
        results = [_wrap(o, info, shape) for o, (info, shape) in
                   zip(outputs[:n_user], zip(low.out_dists, self._out_shapes()))]  # fmt: skip
        if self.device is not None:
            for r in results:
                r._device = self.device
        return _unflatten(low.out_tree, results)

    def _out_shapes(self) -> list[tuple[int, ...]]:
        shapes = self.__dict__.get("_shapes")
        if shapes is None:  # once: reading them from the IR costs ~7 us a call
            f = self.lowered.module.body.block.first_op
            shapes = self._shapes = [tuple(t.get_shape()) for t in f.function_type.outputs.data]
        return shapes


class _DriverTrial:
    """Runs a cpu program's first calls on `local-task` and `local-sync` in turn, then keeps
    local-sync if it is clearly faster (by MARGIN), else local-task. Worker threads pay off on
    big kernels (the MLP step), while a program of many small dispatches runs faster on the
    calling thread, without waking workers for each one (the LeNet step: 2x). Results are host memory on both drivers, so parameters
    stay resident across the switch. Skipped when `FLOW_CPU_DRIVER` names a driver."""

    SAMPLES = 5  # timed calls per driver, after one untimed first call
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
        if self._calls == 1:
            return self._fns["local-task"](*inputs)
        if "local-sync" not in self._fns:
            from flow.targets import load

            self._fns["local-sync"] = load(self._vmfb, "cpu", driver="local-sync")[self._name]
        driver = min(self._times, key=lambda d: len(self._times[d]))
        t0 = time.perf_counter()
        out = self._fns[driver](*inputs)
        self._times[driver].append(time.perf_counter() - t0)
        if all(len(ts) >= self.SAMPLES for ts in self._times.values()):
            import statistics

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
    from flow.distributed.global_tensor import _make_global

    return _make_global(data, shape, info)


def _load_for_rank(vmfb: bytes, groups: list, target: str):
    """Load a rank's partition of a global program with the `comm` collectives, once."""
    from flow import env
    from flow.targets import load, prepare_iree_for_mpi

    prepare_iree_for_mpi()
    crowded = target == "cpu" and env.get_world_size() >= (os.cpu_count() or 1)
    return load(vmfb, target, driver="local-sync" if crowded else None, collectives=True,
                groups=groups)  # fmt: skip


def _host(x) -> np.ndarray:
    """What the compiled function takes for `x`: its value, or of a global tensor its shard."""
    if isinstance(x, Tensor):
        arr = x._data if getattr(x, "_dist", None) is not None else x.numpy()
    else:
        arr = x
    return np.asarray(arr, order="C")  # keeps 0-d arrays 0-d


def _arg_names(fn: Callable, args: tuple) -> list[str]:
    """A readable name per flattened argument leaf (`x`, `params_0`, ...) for the IR."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    out = []
    for i, a in enumerate(args):
        base = names[i] if i < len(names) and names[i].isidentifier() else f"arg{i}"
        n = len(_flatten(a)[0])
        out += [base] if n == 1 else [f"{base}_{j}" for j in range(n)]
    return out


def _trace(fn: Callable, name: str, args: tuple, born: Callable | None = None,
           check_indices: bool | None = None) -> Lowered:  # fmt: skip
    """Trace `fn(*args)`; `born(trace)` may name tensors created by the trace that must
    outlive it (e.g. optimizer state made on the first step): they become extra outputs.
    `check_indices` (default: `FLOW_CHECK_INDICES`) emits index range checks, whose values
    come last (see frontend/_index_checks.py)."""
    leaves, in_tree = _flatten(list(args))
    sig = _signature(leaves)
    with Trace(name if name.isidentifier() else "main") as trace:
        if check_indices is not None:
            trace.check_indices = check_indices
        traced = []
        for x, arg_name in zip(leaves, _arg_names(fn, args)):
            if _is_array(x):
                t = x if isinstance(x, Tensor) else _to_tensor(x)
                value = trace.argument(TensorType(t.dtype.ir_type, t.shape))
                value.name_hint = arg_name
                if getattr(t, "_dist", None) is not None:  # global: typed at the end
                    trace.arg_dists[value.index] = t._dist
                traced.append(Tensor._traced(value, trace, t.dtype))
            else:
                traced.append(x)
        try:
            out = fn(*_unflatten(in_tree, traced))
        except BaseException:
            trace.restore_mutated()  # leave the caller's tensors as they were
            raise
        out_leaves, out_tree = _flatten(out)
        results = []
        for o in out_leaves:
            if not isinstance(o, Tensor):
                raise TypeError(
                    f"flow.jit: {name} must return tensors (or tuples/lists/dicts of them), "
                    f"got {type(o).__name__}"
                )
            results.append(o._value if o._trace is trace else trace.lift(o))
        newborn = [t for t in (born(trace) if born else ()) if id(t) not in trace.mutated]
        mutated = [t for t, _ in trace.mutated.values()]
        mutated_args = [trace._captured_ids[id(t)].index for t in mutated]
        results += trace.restore_mutated()
        results += [t._value for t in newborn]
    checks = list(trace.index_checks)
    results += [v for check in checks for v in check.values]
    module = trace.finish(results)
    module.verify()
    out_dists: list = [None] * len(results)
    if trace.arg_dists or trace.placements:
        # Not verified again: an op whose chosen SBP signature mixes operand SBPs (P / B)
        # has operand types that differ in their encoding only, which the op's type
        # constraints reject; flow-partition drops the encodings.
        out_dists = _globalize(module, trace, len(out_leaves), mutated_args)
    return Lowered(module, in_tree, out_tree, sig, list(trace.captured), name,
                   list(trace.key_slots), mutated, newborn, dict(trace.arg_dists),
                   out_dists, checks)  # fmt: skip


def _globalize(module: ModuleOp, trace: Trace, n_user: int, mutated_args: list[int]) -> list:
    """Type a traced global program and run SBP inference on it; the result distributions.

    The trace emits every value without encoding (ops check that their operand
    types agree, which global and local operands would not). Here the global
    arguments get their `#flow.dist` types; captured local tensors (constants, a
    learning rate: the same on every rank) become broadcast arguments when the
    program has one placement, and with several they are taken as broadcast on the
    placement of each op that uses them; results written back into mutated tensors are
    declared with their tensor's distribution; then `flow-infer-sbp` derives
    every other value's distribution, and the results take the ones it chose.
    """
    from flow.dialect.attrs import DistAttr, Sbp, SbpAttr
    from flow.dialect.attrs import dist_of as _dist_of
    from flow.lowering.infer_sbp import infer_sbp

    from flow.distributed.global_tensor import GlobalInfo

    placements = {info.placement: None for info in trace.arg_dists.values()}
    placements.update(trace.placements)
    by_attr = {pl.attr: pl for pl in placements}
    keys = {index for index, _ in trace.key_slots}
    first_captured = len(trace.block.args) - len(trace.captured) - len(keys)
    replicated = [
        index
        for index in range(first_captured, len(trace.block.args))
        if index not in keys and index not in trace.arg_dists
    ]
    if len(placements) == 1:
        (pl,) = placements
        for index in replicated:
            trace.arg_dists[index] = GlobalInfo(pl, (Sbp("B"),) * len(pl.hierarchy))
    f = module.body.block.first_op
    block = f.body.block
    for index, info in trace.arg_dists.items():
        ty = block.args[index].type
        dist = DistAttr(info.placement.attr, SbpAttr.get(tuple(info.sbp)))
        Rewriter.replace_value_with_new_type(
            block.args[index], TensorType(ty.element_type, ty.get_shape(), dist)
        )
    outputs = list(f.function_type.outputs.data)
    first_mutated = n_user
    for k, index in enumerate(mutated_args):
        outputs[first_mutated + k] = block.args[index].type
    f.function_type = FunctionType.from_lists([a.type for a in block.args], outputs)
    infer_sbp(module, adopt_results=True, replicated_args=replicated)
    f = module.body.block.first_op
    out_dists = []
    for ty in f.function_type.outputs.data:
        d = _dist_of(ty)
        out_dists.append(None if d is None else GlobalInfo(by_attr[d.placement], d.sbp.sbps))
    return out_dists


class jit:  # noqa: N801  (a decorator, named like jax.jit / torch.compile)
    """Compile `fn` with IREE for `target`; usable as `@flow.jit` or `@flow.jit(target=...)`.

    Without `target`, `fn` runs on the device of its tensors (arguments and captured tensors,
    see `flow.device`), the cpu when they have none; `self.target` is then None."""

    def __new__(cls, fn: Callable | None = None, *, target: str | None = None,
                check_indices: bool | None = None):  # fmt: skip
        if fn is None:
            return functools.partial(cls, target=target, check_indices=check_indices)
        return super().__new__(cls)

    def __init__(self, fn: Callable, *, target: str | None = None,
                 check_indices: bool | None = None):  # fmt: skip
        """`check_indices=False` compiles without index range checks (out-of-range indices
        are then clamped, unchecked); by default `FLOW_CHECK_INDICES` decides (on)."""
        from flow.targets import get_target

        self.fn = fn
        self.target = get_target(target).name if target else None
        self.check_indices = check_indices
        self.name = getattr(fn, "__name__", "main")
        self._cache: dict[tuple, Compiled] = {}
        functools.update_wrapper(self, fn)

    def lower(self, *args) -> Lowered:
        return _trace(self.fn, self.name, args, check_indices=self.check_indices)

    def __call__(self, *args):
        leaves, _ = _flatten(list(args))
        key = (_signature(leaves), self.target, _device.of_all(leaves))
        compiled = self._cache.get(key)
        if compiled is None:
            lowered = self.lower(*args)
            target = _device.program_target(
                self.target, [*leaves, *lowered.captured], f"flow.jit({self.name})"
            )
            compiled = self._cache[key] = lowered.compile(target)
        return compiled._call_flat(leaves)
