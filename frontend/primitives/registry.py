"""The primitive registry: per primitive, its numpy eager kernel next to the flow op it emits.

`bind(prim, *tensors, **params)` is the single entry point. It knows no execution mode: it
hands the primitive to the first registered mode that takes it (`register_mode`; the modes
and their order are in `flow.modes`: lazy recording, global tensors, tracing, eager), as
JAX's `Primitive.bind` hands off to the current trace. Every mode first asks the dialect
op's `infer` for the result type, so eager mode and the compiler accept and reject exactly
the same programs, with the same messages. The `vjp` slot is filled by autograd rules,
written in frontend ops, next to each kernel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.trace import Trace, current_trace

if TYPE_CHECKING:
    from flow import dialect as fd

__all__ = ["COMPOSITES", "PRIMITIVES", "Primitive", "bind", "composite", "mode_names",
           "primitive", "register_mode", "remove_mode", "set_args_hook"]


@dataclass(eq=False)
class Primitive:
    """A primitive operation: name, dialect op, numpy kernel, IR parameter conversion, VJP.

    The dialect op is named (`op_name`, a class of `flow.dialect`) and looked up on first
    use, so registering the primitives does not load xDSL (`import flow` stays fast)."""

    name: str
    op_name: str
    impl: Callable[..., np.ndarray]
    to_ir: Callable[[dict], dict] = field(default=lambda params: params)
    vjp: Callable | None = None
    # The kernel only moves, selects or compares values, so it never raises a floating-point
    # warning on numpy's own dtypes and eager mode runs it without `np.errstate` (a
    # microsecond per op; ml_dtypes' bfloat16 comparisons do warn on NaN, so those keep it).
    quiet: bool = False
    # A composite (`composite`): the same function written in other primitives, which the
    # modes that emit or distribute ops run instead of `impl`; None for a primitive proper.
    decompose: Callable | None = None
    # (operand dtypes and shapes, params) -> result dtype, for `eager_dtype`
    _result_dtypes: dict = field(default_factory=dict, repr=False)

    @functools.cached_property
    def op(self) -> type[fd.FlowOp]:
        from flow import dialect

        return getattr(dialect, self.op_name)

    def eager_dtype(self, args: tuple, params: dict) -> _dtypes.dtype:
        """The result dtype of this primitive on eager tensors `args`, by the dialect op's
        `infer` (raising its VerifyException on operands it rejects).

        Eager mode asks for every op it runs, and building xDSL types each time costs more
        than most numpy kernels, so the answer is kept per operand dtypes, shapes and
        params; params that cannot be hashed (a constant's array) are inferred every time."""
        key = (tuple([(a._dtype, a._shape) for a in args]),
               tuple([(k, v.__class__, v) for k, v in params.items()]))  # fmt: skip
        try:
            found = self._result_dtypes.get(key)
        except TypeError:  # unhashable params
            key, found = None, None
        if found is not None:
            return found
        ty = self.op.infer([a._ir_type() for a in args], **self.to_ir(params))
        found = _dtypes.from_ir(ty.element_type)
        if key is not None:
            if len(self._result_dtypes) >= _MAX_CACHED:
                self._result_dtypes.clear()
            self._result_dtypes[key] = found
        return found

    def __repr__(self) -> str:
        return f"Primitive({self.name})"


_MAX_CACHED = 4096  # result dtypes kept per primitive (a bound for programs of varying shapes)


PRIMITIVES: dict[str, Primitive] = {}


COMPOSITES: dict[str, Primitive] = {}


def composite(name: str, decompose: Callable, *, quiet: bool = False):
    """Register the decorated numpy kernel as composite `name`: a function of other primitives
    (`decompose(*tensors, **params)`) that eager mode runs as one kernel, as PyTorch's CPU
    kernels fuse a pooling backward or a log_softmax, while traced and lazy programs and
    global tensors see the primitives it is made of. The kernel must give what `decompose`
    gives, with the same dtype (eager mode takes the kernel's); calling its primitives'
    kernels keeps the same bits.

    A composite given a `vjp` (written in primitives and composites) is recorded with it
    when gradients are recorded through it eagerly; one without runs its primitives then,
    so the autograd graph is theirs."""

    def register(impl: Callable[..., np.ndarray]) -> Primitive:
        prim = Primitive(name, "", impl, quiet=quiet, decompose=decompose)
        COMPOSITES[name] = prim
        return prim

    return register


def primitive(name: str, op: str, to_ir: Callable[[dict], dict] | None = None, *,
              quiet: bool = False):  # fmt: skip
    """Register the decorated numpy kernel as primitive `name` emitting `flow.dialect.<op>`
    (`quiet`: see `Primitive.quiet`)."""

    def register(impl: Callable[..., np.ndarray]) -> Primitive:
        prim = Primitive(name, op, impl, to_ir or (lambda params: params), quiet=quiet)
        PRIMITIVES[name] = prim
        return prim

    return register


# A mode: `applies(prim, args, trace)` says whether it takes the primitive (`trace` is the
# current `Trace` or None); `process(prim, args, params, trace)` runs it and returns the
# result, or None to hand the primitive on to the next mode. A composite reaches `process`
# only in modes registered with `composites=True`; the others get its primitives.
Applies = Callable[[Primitive, tuple, Trace | None], bool]
Process = Callable[[Primitive, tuple, dict, Trace | None], object]

_MODE_NAMES: list[str] = []
_MODES: list[tuple[Applies, Process, bool]] = []  # in priority order; whether it runs composites


def register_mode(name: str, applies: Applies, process: Process, *,
                  before: str | None = None, composites: bool = False) -> None:  # fmt: skip
    """Add execution mode `name` after the modes registered so far, or just before mode
    `before`; registering a name again replaces that mode in place. `composites`: whether
    `process` takes composites whole (see `Applies`)."""
    mode = (applies, process, composites)
    if name in _MODE_NAMES:
        _MODES[_MODE_NAMES.index(name)] = mode
        return
    at = len(_MODES)
    if before is not None:
        if before not in _MODE_NAMES:
            raise ValueError(f"register_mode: no mode {before!r} to insert {name!r} before; "
                             f"registered: {', '.join(_MODE_NAMES) or 'none'}")  # fmt: skip
        at = _MODE_NAMES.index(before)
    _MODE_NAMES.insert(at, name)
    _MODES.insert(at, mode)


def remove_mode(name: str) -> None:
    """Forget execution mode `name`."""
    if name not in _MODE_NAMES:
        raise ValueError(f"remove_mode: no mode {name!r}; registered: {', '.join(_MODE_NAMES)}")
    del _MODES[_MODE_NAMES.index(name)]
    _MODE_NAMES.remove(name)


def mode_names() -> tuple[str, ...]:
    """The registered modes, in the order `bind` asks them."""
    return tuple(_MODE_NAMES)


# `hook(prim, args) -> args` rewrites a primitive's operands before any mode sees them
# (`flow.autocast` casts them); None when no hook is set.
_ARGS_HOOK: list[Callable[[Primitive, tuple], tuple] | None] = [None]


def set_args_hook(hook: Callable[[Primitive, tuple], tuple] | None) -> None:
    """Let `hook` rewrite every primitive's operands before `bind` runs it (None: stop)."""
    _ARGS_HOOK[0] = hook


def bind(prim: Primitive, *args, **params):
    """Apply a primitive to Tensors in the current mode (emit IR when tracing, run the numpy
    kernel eagerly, record it under flow.lazy, ...)."""
    if _ARGS_HOOK[0] is not None:
        args = _ARGS_HOOK[0](prim, args)
    trace = current_trace()
    for applies, process, composites in _MODES:
        if applies(prim, args, trace):
            if prim.decompose is not None and not composites:
                return prim.decompose(*args, **params)
            out = process(prim, args, params, trace)
            if out is not None:
                return out
    raise RuntimeError(f"{prim.name}: no execution mode took this primitive (registered: "
                       f"{', '.join(_MODE_NAMES) or 'none'}); import flow to register them")
