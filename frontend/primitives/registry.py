"""The primitive registry: per primitive, its numpy eager kernel next to the flow op it emits.

`bind(prim, *tensors, **params)` is the single entry point: inside a trace it
appends the dialect op; under `flow.lazy()` it records the application for later
(frontend/_lazy.py); otherwise it runs the numpy kernel. Both paths first ask
the dialect op's `infer` for the result type, so eager mode and the compiler
accept and reject exactly the same programs, with the same messages. The `vjp`
slot is filled by autograd rules, written in frontend ops, next to each kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from xdsl.utils.exceptions import VerifyException

from flow import dialect as fd

from flow.core import device as _device
from flow.core import dtypes as _dtypes
from flow.distributed import global_tensor as _global
from flow.modes import lazy as _lazy
from flow.core.autograd import record
from flow.core.trace import current_trace
from flow.core.errors import op_error, strip_op_prefix, user_location


@dataclass(eq=False)
class Primitive:
    """A primitive operation: name, dialect op, numpy kernel, IR parameter conversion, VJP."""

    name: str
    op: type[fd.FlowOp]
    impl: Callable[..., np.ndarray]
    to_ir: Callable[[dict], dict] = field(default=lambda params: params)
    vjp: Callable | None = None

    def __repr__(self) -> str:
        return f"Primitive({self.name})"


PRIMITIVES: dict[str, Primitive] = {}


def primitive(name: str, op: type[fd.FlowOp], to_ir: Callable[[dict], dict] | None = None):
    """Register the decorated numpy kernel as primitive `name` emitting `op`."""

    def register(impl: Callable[..., np.ndarray]) -> Primitive:
        prim = Primitive(name, op, impl, to_ir or (lambda params: params))
        PRIMITIVES[name] = prim
        return prim

    return register


def bind(prim: Primitive, *args, **params):
    """Apply a primitive to Tensors: emit IR when tracing, else run the numpy kernel."""
    from flow.core.tensor import Tensor

    if _lazy.enabled() and current_trace() is None:  # flow.lazy(): record, compute later
        out = _lazy.lazy_bind(prim, args, params)
        if out is not None:
            _device.propagate(args, out)
            return out
    if not args and current_trace() is None and prim.name in ("full", "iota"):
        return _global.eager_create(prim, params)  # constants: global ones in global VJPs
    trace = current_trace()
    if trace is None and any(getattr(a, "_dist", None) is not None for a in args):
        from flow.distributed.global_tensor import global_bind  # eager global tensors; inside a trace they are traced

        return global_bind(prim, args, params)
    for a in args:
        if a._trace is not None and a._trace is not trace:
            raise op_error(prim.name, "a tensor from another (finished) trace was used here")
    ir_params = prim.to_ir(params)
    loc = user_location()
    if trace is not None:
        operands = [a._value if a._trace is trace else trace.lift(a) for a in args]
        try:
            op = prim.op.make(*operands, **ir_params)
        except VerifyException as err:
            raise op_error(prim.name, strip_op_prefix(str(err)), loc) from None
        trace.emit(op, loc)
        result = op.results[0]
        out = Tensor._traced(result, trace, _dtypes.from_ir(result.type.element_type))
        return record(prim.name, prim.vjp, args, params, out)
    try:
        ty = prim.op.infer([a._ir_type() for a in args], **ir_params)
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err)), loc) from None
    with np.errstate(all="ignore"):  # IEEE results (inf, nan) without warnings, like torch
        out = np.asarray(prim.impl(*(a._data for a in args), **params))
    expected = _dtypes.from_ir(ty.element_type).np_dtype
    if out.dtype != expected:
        out = out.astype(expected)
    result = Tensor._eager(out)
    _global.propagate_constant(args, result)  # the same on every rank if its inputs are
    _device.propagate(args, result)  # on the device of its inputs
    return record(prim.name, prim.vjp, args, params, result)
