"""Eager mode: a primitive runs at once on its numpy kernel (the reference semantics).

The dialect op's `infer` gives the result type first (kept per operand signature and
params, `Primitive.eager_dtype`), so eager code accepts and rejects exactly what the
compiler does, with the same messages; the kernel's result is cast to that type. The
result is on the device of the inputs, a constant (the same on every rank) when they all
are, and recorded for autograd.
"""

from __future__ import annotations

import numpy as np
from xdsl.utils.exceptions import VerifyException

from flow.core import device as _device
from flow.core import profiling
from flow.core.autograd import record, recording
from flow.core.errors import op_error, strip_op_prefix
from flow.core.tensor import Tensor
from flow.distributed.eager_ops import propagate_constant

__all__ = ["applies", "check_same_trace", "process"]


def applies(prim, args: tuple, trace) -> bool:
    return trace is None


def check_same_trace(prim, args: tuple, trace) -> None:
    """Tensors of another trace (one that has finished) cannot be used in this one, nor
    eagerly."""
    for a in args:
        if a._trace is not None and a._trace is not trace:
            raise op_error(prim.name, "a tensor from another (finished) trace was used here")


def process(prim, args: tuple, params: dict, trace) -> Tensor:
    """Run `prim` on the arrays of `args`."""
    if profiling.ACTIVE is not None:
        return _profiled(prim, args, params, trace)
    return _run(prim, args, params, trace)


def _profiled(prim, args: tuple, params: dict, trace) -> Tensor:
    rec = profiling.ACTIVE
    info = {"shapes": [list(a._shape) for a in args], "dtypes": [a._dtype.name for a in args]} \
        if rec.record_shapes else None  # fmt: skip
    with rec.span(prim.name, "eager", info):
        return _run(prim, args, params, trace)


def _run(prim, args: tuple, params: dict, trace) -> Tensor:
    if prim.decompose is not None:
        return _run_composite(prim, args, params)
    # (one loop over the operands: this runs for every eager op)
    arrays = []
    for a in args:
        if a._trace is not None:
            check_same_trace(prim, args, trace)
        arrays.append(a._data)
    try:
        dtype = prim.eager_dtype(args, params)
    except VerifyException as err:
        raise op_error(prim.name, strip_op_prefix(str(err))) from None
    if prim.quiet and (not arrays or arrays[0].dtype.kind != "V"):  # (bfloat16 compares warn)
        out = np.asarray(prim.impl(*arrays, **params))
    else:  # IEEE results (inf, nan) without warnings, like torch
        out = np.asarray(_quietly(prim.impl, arrays, params))
    expected = dtype.np_dtype
    if out.dtype != expected:
        out = out.astype(expected)
    result = Tensor._eager(out, dtype)
    propagate_constant(args, result)  # the same on every rank if its inputs are
    _device.propagate(args, result)  # on the device of its inputs
    return record(prim.name, prim.vjp, args, params, result)


def _run_composite(prim, args: tuple, params: dict) -> Tensor:
    """A composite as its one kernel, of the dtype that kernel gives, recorded with its own
    VJP; through its primitives when a tensor is traced, or when gradients are recorded
    and it has no VJP (the autograd graph is then theirs)."""
    for a in args:
        if a._trace is not None:
            return prim.decompose(*args, **params)
    if prim.vjp is None and recording(args):
        return prim.decompose(*args, **params)
    out = np.asarray(_quietly(prim.impl, [a._data for a in args], params))
    result = Tensor._eager(out)
    propagate_constant(args, result)
    _device.propagate(args, result)
    return record(prim.name, prim.vjp, args, params, result)


def _quietly_errstate(impl, arrays, params):
    with np.errstate(all="ignore"):
        return impl(*arrays, **params)


try:  # numpy 2's floating-point error state is a context variable; setting it directly costs
    # a quarter of what `np.errstate` does, and every eager op sets it
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
    from numpy._core.umath import _make_extobj

    _IGNORE = _make_extobj(all="ignore")

    def _quietly(impl, arrays, params):
        """`impl(*arrays, **params)` with numpy's floating-point warnings off."""
        token = _ERRSTATE.set(_IGNORE)
        try:
            return impl(*arrays, **params)
        finally:
            _ERRSTATE.reset(token)
except (ImportError, AttributeError, TypeError):  # numpy 1.x
    _quietly = _quietly_errstate
