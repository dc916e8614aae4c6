"""Tracing mode: inside `flow.jit` (an active `Trace`), a primitive appends its dialect op.

Operands of the trace are its SSA values; eager tensors the function captures become
arguments of the traced function (`Trace.lift`). Shape and dtype errors raise here, at the
user's line, which the emitted op also carries as its location.
"""

from __future__ import annotations

from xdsl.utils.exceptions import VerifyException

from flow.core import dtypes as _dtypes
from flow.core.autograd import record
from flow.core.errors import op_error, strip_op_prefix, user_location
from flow.core.tensor import Tensor
from flow.modes.eager import check_same_trace

__all__ = ["applies", "process"]


def applies(prim, args: tuple, trace) -> bool:
    return trace is not None


def process(prim, args: tuple, params: dict, trace) -> Tensor:
    """Emit `prim`'s op into `trace`; the result is a traced tensor."""
    check_same_trace(prim, args, trace)
    ir_params = prim.to_ir(params)
    loc = user_location()
    operands = [a._value if a._trace is trace else trace.lift(a) for a in args]
    try:
        op = prim.op.make(*operands, **ir_params)
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err)), loc) from None
    trace.emit(op, loc)
    trace.eqns[op] = (prim, params)
    result = op.results[0]
    out = Tensor._traced(result, trace, _dtypes.from_ir(result.type.element_type))
    return record(prim.name, prim.vjp, args, params, out)
