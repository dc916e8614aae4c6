"""Creation from ranges: `arange`, `linspace`, `logspace`, `eye` — `iota` scaled, shifted
or compared, then cast (PyTorch / OneFlow semantics)."""

from __future__ import annotations

import math

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops import basic as O
from flow.ops.indexing import _int
from flow.primitives.registry import bind


def _number(op: str, what: str, v):
    if isinstance(v, Tensor) and v.ndim == 0 and not v.is_traced:
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise op_error(op, f"expected a number for {what}, got {v!r}", cls=TypeError)
    return v.item() if isinstance(v, np.generic) else v


def _compute_dtype(dt: _dtypes.dtype) -> _dtypes.dtype:
    """Half-precision values are computed in float32, integers in int64, then cast."""
    if dt.is_floating_point:
        return dt if dt in (_dtypes.float32, _dtypes.float64) else _dtypes.float32
    return _dtypes.int64


def arange(start=0, end=None, step=1, *, dtype=None, device=None, placement=None, sbp=None,
           requires_grad: bool = False, pin_memory: bool = False) -> Tensor:  # fmt: skip
    """`[start, start + step, ...)` below `end`: ceil((end - start) / step) values; int64 when
    every bound is an int, else float32 (unless `dtype` says otherwise)."""
    if end is None:
        start, end = 0, start
    start, end = _number("arange", "start", start), _number("arange", "end", end)
    step = _number("arange", "step", step)
    if step == 0:
        raise op_error("arange", "step must be nonzero")
    if (end - start) * step < 0:
        raise op_error(
            "arange",
            f"upper bound and lower bound are inconsistent with the step "
            f"sign (start={start}, end={end}, step={step})",
        )
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise op_error("arange", f"bounds must be finite, got start={start}, end={end}")
    ints = all(isinstance(v, int) for v in (start, end, step))
    dt = (
        _dtypes.as_dtype(dtype)
        if dtype is not None
        else (_dtypes.int64 if ints else _dtypes.DEFAULT_FLOAT)
    )
    n = -((start - end) // step) if ints else math.ceil((end - start) / step)
    work = _compute_dtype(dt) if ints or dt.is_floating_point else _dtypes.float64
    out = bind(P.iota, dim=0, shape=(n,), dtype=work)
    if step != 1:
        out = O.mul(out, step)
    if start != 0:
        out = O.add(out, start)
    return O.created("arange", O.to(out, dt), device=device, placement=placement, sbp=sbp,
                     requires_grad=requires_grad)  # fmt: skip


def linspace(start, end, steps: int, dtype=None, *, device=None, placement=None, sbp=None,
             requires_grad: bool = False) -> Tensor:  # fmt: skip
    """`steps` evenly spaced values from `start` to `end` inclusive (float32 by default).

    Like PyTorch, the first half counts up from `start` and the second half down
    from `end`, so both ends are exact.
    """
    start, end = _number("linspace", "start", start), _number("linspace", "end", end)
    steps = _int("linspace", "steps", steps)
    if steps < 0:
        raise op_error("linspace", f"number of steps must be non-negative, got {steps}")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.DEFAULT_FLOAT
    work = _dtypes.float64 if dt is _dtypes.float64 else _dtypes.float32
    if steps <= 1:
        out = O.full((steps,), start, dt)
    else:
        step = (end - start) / (steps - 1)
        i = bind(P.iota, dim=0, shape=(steps,), dtype=work)
        up = O.add(O.mul(i, step), start)
        down = O.sub(end, O.mul(O.sub(steps - 1, i), step))
        out = O.to(O.where(O.lt(i, steps // 2), up, down), dt)
    return O.created("linspace", out, device=device, placement=placement, sbp=sbp,
                     requires_grad=requires_grad)  # fmt: skip


def logspace(start, end, steps: int, base: float = 10.0, dtype=None, *, device=None,
             placement=None, sbp=None, requires_grad: bool = False) -> Tensor:  # fmt: skip
    """`steps` values from `base ** start` to `base ** end`, their exponents evenly spaced
    (float32 by default)."""
    base = _number("logspace", "base", base)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.DEFAULT_FLOAT
    work = _dtypes.float64 if dt is _dtypes.float64 else _dtypes.float32
    out = O.to(O.pow(float(base), linspace(start, end, steps, work)), dt)
    return O.created("logspace", out, device=device, placement=placement, sbp=sbp,
                     requires_grad=requires_grad)  # fmt: skip


def eye(n: int, m: int | None = None, *, dtype=None, device=None, placement=None, sbp=None,
        requires_grad: bool = False, pin_memory: bool = False) -> Tensor:  # fmt: skip
    """An n x m matrix with ones on the diagonal (float32 by default)."""
    n = _int("eye", "n", n)
    m = n if m is None else _int("eye", "m", m)
    if n < 0 or m < 0:
        raise op_error("eye", f"n and m must be non-negative, got n={n}, m={m}")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.DEFAULT_FLOAT
    rows = bind(P.iota, dim=0, shape=(n, m), dtype=_dtypes.int64)
    cols = bind(P.iota, dim=1, shape=(n, m), dtype=_dtypes.int64)
    return O.created("eye", O.to(O.eq(rows, cols), dt), device=device, placement=placement,
                     sbp=sbp, requires_grad=requires_grad)  # fmt: skip


TENSOR_METHODS: dict = {}
"""Tensor methods this module adds (none: these make new tensors)."""

__all__ = ["arange", "linspace", "logspace", "eye"]
