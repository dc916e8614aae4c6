"""One staging path for `flow.jit` and `nn.Graph`: trace, key, compile once, call.

    leaves, key, compiled = programs.lookup(args, target)   # the key, before any tracing
    if compiled is None:
        compiled = programs.compile(key, stage(fn, name, args), leaves)
    compiled.call_flat(leaves)

`stage` traces a Python function on traced stand-ins of its tensor arguments into a
`Lowered` flow program (a global program also gets its arguments' distributions and SBP
inference). A `ProgramCache` keys each call by its signature (compile/signature.py), the
requested target and the devices of its tensor arguments, so a cached call traces nothing;
the device a program runs on is decided once, when its key is first compiled.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING

from flow.amp import autocast_key
from flow.core import device as _device
from flow.core import profiling
from flow.core.autograd import check_reached
from flow.core.pytree import flatten, unflatten
from flow.core.tensor import Tensor
from flow.core.trace import Trace
from flow.ops.basic import tensor as _to_tensor

from . import tiers
from .dynamic import Family, family_key, marked_dims
from .signature import describe, is_array, signature
from .stages import Lowered, Program

if TYPE_CHECKING:  # xDSL loads with the first trace
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["ProgramCache", "describe", "is_array", "signature", "stage"]


class ProgramCache:
    """The compiled programs of one staged function (a `flow.jit`, an `nn.Graph`) by call key.

    A call's key is taken before anything is traced: the signature of its flattened
    arguments, the target asked for (None: the device of the tensors) and the devices of
    its tensor arguments. The device a program runs on is decided once, when its key is
    first compiled (`compile`): the target asked for, else the device of the arguments and
    of the tensors the trace captured (`flow.device`); a call with a known key reuses the
    program without tracing. `what` names the function in errors; `sync_compile` is the
    function's setting for compiling before the first call (compile/tiers.py)."""

    def __init__(self, what: str, *, sync_compile: bool | None = None, dynamic=None,
                 fn: Callable | None = None):  # fmt: skip
        """`dynamic`: the function's `dynamic=` option (compile/dynamic.py): None makes a
        dim dynamic at its second size, False never; marked dims are dynamic at once, and
        `fn` (the staged function) names the arguments they are marked by."""
        from .dynamic import parse_dynamic

        self.what = what
        self.sync_compile = sync_compile  # None: FLOW_SYNC_COMPILE decides (compile/tiers.py)
        self.dynamic = parse_dynamic(dynamic, what)
        self._fn = fn
        self._programs: dict[tuple, Program] = {}
        self._grad_reached: dict[tuple, list] = {}  # key -> Lowered.grad_reached
        self._families: dict[tuple, Family] = {}  # by family_key: calls differing in sizes

    def lookup(self, args: tuple, target: str | None) -> tuple[list, tuple, Program | None]:
        """The flattened `args`, their key and the program compiled for it (None if none)."""
        leaves, key = call_key(args, target)
        program = self._programs.get(key)
        if program is not None and self._grad_reached and key in self._grad_reached:
            check_reached(self._grad_reached[key], self.what)
        return leaves, key, program

    def device_target(self, key: tuple, lowered: Lowered, leaves: list) -> str:
        """The target the program of `key` runs on (see the class docstring)."""
        return _device.program_target(key[1], [*leaves, *lowered.captured], self.what)

    def compile(self, key: tuple, lowered: Lowered, leaves: list, target: str | None = None,
                *, store: bool = True, retrace: Callable | None = None) -> Program:  # fmt: skip
        """Make `lowered` runnable for `target` (default: `device_target`), kept as `key`'s
        program unless `store` is false (a program that runs once). Unless compiles are
        synchronous it runs interpreted until its background compile is done (tiers.py).
        A size of a family with a dynamic program runs that (compile/dynamic.py);
        `retrace(args)` traces the function again, for a companion size of marked dims."""
        target = target or self.device_target(key, lowered, leaves)
        sync = tiers.sync_compile(self.sync_compile)
        forget = lambda: self._programs.pop(key, None)  # noqa: E731
        program = None
        if store and self.dynamic is not False and not lowered.is_global:
            family = self._families.setdefault(family_key(key), Family(self.what))
            names = _arg_names(self._fn, tuple(unflatten(lowered.in_tree, leaves)), bases=True) \
                if self._fn is not None else [""] * len(leaves)  # fmt: skip
            marked = marked_dims(self.dynamic, names, leaves, self.what)
            program = family.program(lowered, lowered.execution_target(target), sync=sync,
                                     marked=marked, leaves=leaves, retrace=retrace,
                                     forget=forget)  # fmt: skip
        if program is None:
            program = tiers.program(lowered, target, sync=sync, once=not store, forget=forget)
        if store:
            self._programs[key] = program
            if lowered.grad_reached:
                self._grad_reached[key] = lowered.grad_reached
        return program

    def values(self):
        return self._programs.values()

    def __len__(self) -> int:
        return len(self._programs)


def call_key(args: tuple, target: str | None) -> tuple[list, tuple]:
    """The flattened `args` and their call key: `(signature(leaves), target, the devices of
    the tensors)`. Arguments that are all local tensors on the cpu (the common call) take one
    pass, building the entries `signature` would (a shape as the tensor's `Size`, a tuple)."""
    sig = []
    for x in args:
        if not isinstance(x, Tensor) or getattr(x, "_dist", None) is not None \
                or getattr(x, "_device", None) is not None:  # fmt: skip
            leaves, _ = flatten(list(args))
            return leaves, (signature(leaves), target, _device.of_all(leaves))
        sig.append(("T", x._shape, x._dtype.name))
    return list(args), (tuple(sig) + autocast_key(), target, None)


def _arg_names(fn: Callable, args: tuple, *, bases: bool = False) -> list[str]:
    """A readable name per flattened argument leaf (`x`, `params_0`, ...) for the IR;
    `bases`: the name of its argument (`params`)."""
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    out = []
    for i, a in enumerate(args):
        base = names[i] if i < len(names) and names[i].isidentifier() else f"arg{i}"
        n = len(flatten(a)[0])
        out += [base] * n if bases or n == 1 else [f"{base}_{j}" for j in range(n)]
    return out


def stage(fn: Callable, name: str, args: tuple, *, born: Callable | None = None,
          check_indices: bool | None = None) -> Lowered:  # fmt: skip
    """Trace `fn(*args)` into a flow program named `name`. `born(trace)` may name tensors
    created by the trace that must outlive it (e.g. optimizer state made on the first step):
    they become extra outputs.
    `check_indices` (default: `FLOW_CHECK_INDICES`) emits index range checks, whose values
    come last (see ops/index_checks.py)."""
    rec = profiling.ACTIVE
    if rec is None:
        return _stage(fn, name, args, born, check_indices)
    with rec.span(f"trace {name}", "trace", {"function": name}) as span:
        lowered = _stage(fn, name, args, born, check_indices)
    span.args["global"] = lowered.is_global
    span.args["ops"] = len(lowered.eqns) if lowered.eqns is not None else 0
    return lowered


def _stage(fn: Callable, name: str, args: tuple, born: Callable | None,
           check_indices: bool | None) -> Lowered:  # fmt: skip
    from xdsl.dialects.builtin import TensorType

    leaves, in_tree = flatten(list(args))
    sig = signature(leaves)
    with Trace(name if name.isidentifier() else "main") as trace:
        if check_indices is not None:
            trace.check_indices = check_indices
        traced = []
        for x, arg_name in zip(leaves, _arg_names(fn, args)):
            if is_array(x):
                t = x if isinstance(x, Tensor) else _to_tensor(x)
                value = trace.argument(TensorType(t.dtype.ir_type, t.shape))
                value.name_hint = arg_name
                if getattr(t, "_dist", None) is not None:  # global: typed at the end
                    trace.arg_dists[value.index] = t._dist
                traced.append(Tensor._traced(value, trace, t.dtype))
            else:
                traced.append(x)
        try:
            out = fn(*unflatten(in_tree, traced))
        except BaseException:
            trace.restore_mutated()  # leave the caller's tensors as they were
            raise
        out_leaves, out_tree = flatten(out)
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
                   out_dists, checks, trace.eqns,
                   grad_reached=list(trace.grad_reached.values()))  # fmt: skip


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
    from xdsl.dialects.builtin import FunctionType, TensorType
    from xdsl.rewriter import Rewriter

    from flow.dialect.attrs import DistAttr, Sbp, SbpAttr
    from flow.dialect.attrs import dist_of as _dist_of
    from flow.distributed.placement import GlobalInfo
    from flow.lowering.infer_sbp import infer_sbp

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
