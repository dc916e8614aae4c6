"""`flow.jit`: trace a Python function into flow IR, compile it with IREE, cache per signature.

Staged like JAX: `jit(f).lower(*args)` → `Lowered` (`.as_text()` is the flow
IR) → `.compile(target=...)` → `Compiled`, a callable running the IREE module.
Calling `jit(f)(*args)` does all three on the first call for each input
signature (shapes, dtypes, static arguments, target) and reuses the result.
"""

from __future__ import annotations

import functools
import inspect
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.printer import Printer

from . import _dtypes
from ._ops import tensor as _to_tensor
from ._tensor import Tensor
from ._trace import Trace

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
    return kind(out)


def _is_array(x) -> bool:
    return isinstance(x, (Tensor, np.ndarray))


def _signature(leaves: list) -> tuple:
    sig = []
    for x in leaves:
        if isinstance(x, Tensor):
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

    def as_text(self, *, debug_info: bool = False) -> str:
        """The flow IR (custom assembly format; `debug_info` adds source locations)."""
        out = io.StringIO()
        Printer(stream=out, print_debuginfo=debug_info).print_op(self.module)
        return out.getvalue() + "\n"

    def compile(self, target: str | None = None) -> Compiled:
        from flow.lowering import run_pipeline, to_iree_text
        from flow.targets import DEFAULT_TARGET, compile_mlir, get_target

        tgt = get_target(target or DEFAULT_TARGET)
        lowered = run_pipeline(self.module.clone(), "flow-to-iree-input")
        vmfb = compile_mlir(to_iree_text(lowered), tgt.name)
        return Compiled(self, tgt.name, vmfb)


class Compiled:
    """A compiled function: call it with tensors of the signature it was lowered for."""

    def __init__(self, lowered: Lowered, target: str, vmfb: bytes):
        from flow.targets import load

        self.lowered = lowered
        self.target = target
        self.vmfb = vmfb
        self._fn = load(vmfb, target)[lowered.module.body.block.first_op.sym_name.data]

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
        inputs += [t.numpy() for t in self.lowered.captured]
        for index, generator in self.lowered.key_slots:  # a fresh random key per call
            inputs.insert(index, generator._next_key_array())
        outputs = [np.asarray(o) for o in self._fn(*inputs)]
        low = self.lowered
        n_user = len(outputs) - len(low.mutated) - len(low.born)
        for t, o in zip(low.mutated, outputs[n_user:]):
            t._data = o  # the new value, in the buffer the runtime returned (no copy)
        for t, o in zip(low.born, outputs[n_user + len(low.mutated) :]):
            t._data, t._value, t._trace = o, None, None
        return _unflatten(low.out_tree, [Tensor._eager(o) for o in outputs[:n_user]])


def _host(x) -> np.ndarray:
    arr = x.numpy() if isinstance(x, Tensor) else x
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


def _trace(fn: Callable, name: str, args: tuple, born: Callable | None = None) -> Lowered:
    """Trace `fn(*args)`; `born(trace)` may name tensors created by the trace that must
    outlive it (e.g. optimizer state made on the first step): they become extra outputs."""
    leaves, in_tree = _flatten(list(args))
    sig = _signature(leaves)
    with Trace(name if name.isidentifier() else "main") as trace:
        traced = []
        for x, arg_name in zip(leaves, _arg_names(fn, args)):
            if _is_array(x):
                t = x if isinstance(x, Tensor) else _to_tensor(x)
                value = trace.argument(TensorType(t.dtype.ir_type, t.shape))
                value.name_hint = arg_name
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
        results += trace.restore_mutated()
        results += [t._value for t in newborn]
    module = trace.finish(results)
    module.verify()
    return Lowered(module, in_tree, out_tree, sig, list(trace.captured), name,
                   list(trace.key_slots), mutated, newborn)  # fmt: skip


class jit:  # noqa: N801  (a decorator, named like jax.jit / torch.compile)
    """Compile `fn` with IREE for `target`; usable as `@flow.jit` or `@flow.jit(target=...)`."""

    def __new__(cls, fn: Callable | None = None, *, target: str | None = None):
        if fn is None:
            return functools.partial(cls, target=target)
        return super().__new__(cls)

    def __init__(self, fn: Callable, *, target: str | None = None):
        from flow.targets import DEFAULT_TARGET, get_target

        self.fn = fn
        self.target = get_target(target or DEFAULT_TARGET).name
        self.name = getattr(fn, "__name__", "main")
        self._cache: dict[tuple, Compiled] = {}
        functools.update_wrapper(self, fn)

    def lower(self, *args) -> Lowered:
        return _trace(self.fn, self.name, args)

    def __call__(self, *args):
        leaves, _ = _flatten(list(args))
        key = (_signature(leaves), self.target)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self.lower(*args).compile(self.target)
        return compiled._call_flat(leaves)
