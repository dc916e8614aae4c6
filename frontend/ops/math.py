"""Elementwise math beyond the core arithmetic: trigonometry, rounding, remainders, sign,
sigmoid and clamping — composites of primitives (PyTorch semantics).

The math family's other themes have modules of their own: predicates and logic
(ops/logical.py), reductions, sorting and scans (ops/reduction.py), contractions
(ops/linalg.py).
"""

from __future__ import annotations

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.ops import linalg as _linalg
from flow.ops import logical as _logical
from flow.ops import reduction as _reduction
from flow.ops.basic import (
    as_tensor,
    div,
    full,
    gt,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    promote,
    to,
    where,
)
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- elementwise


_NO_F64_KERNEL = {"sin", "cos", "tan", "asin", "acos", "atan", "atan2", "erf", "rem"}


def _check_f64(op: str, prim, x: Tensor) -> None:
    """Refuse, inside flow.jit, an f64 op that compiled code could only do in f32."""
    if x.dtype is _dtypes.float64 and prim.name in _NO_F64_KERNEL and current_trace():
        raise op_error(op, "float64 is not supported in compiled code (the cpu backend has no "
                           "f64 kernel for it); use float32, or call it outside flow.jit",
                       cls=NotImplementedError)  # fmt: skip


def _float_unary(prim):
    def fn(input) -> Tensor:
        x = as_tensor(input)
        if not x.dtype.is_floating_point:
            x = to(x, _dtypes.DEFAULT_FLOAT)
        _check_f64(prim.name, prim, x)
        return bind(prim, x)

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name} (integer inputs are converted to float32)."
    return fn


sin, cos, tan = _float_unary(P.sin), _float_unary(P.cos), _float_unary(P.tan)

asin, acos, atan = _float_unary(P.asin), _float_unary(P.acos), _float_unary(P.atan)

sinh, cosh = _float_unary(P.sinh), _float_unary(P.cosh)

erf, log1p, expm1 = _float_unary(P.erf), _float_unary(P.log1p), _float_unary(P.expm1)

log2, log10 = _float_unary(P.log2), _float_unary(P.log10)

arcsin, arccos, arctan = asin, acos, atan


def _rounding(prim):
    def fn(input) -> Tensor:
        x = as_tensor(input)
        return bind(prim, x) if x.dtype.is_floating_point else x  # integers are already whole

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name}; integer tensors are returned unchanged."
    return fn


floor, ceil, trunc = _rounding(P.floor), _rounding(P.ceil), _rounding(P.trunc)

fix = trunc


def round(input, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round half to even (like torch.round), optionally to `decimals` decimal places."""
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        return x
    if decimals == 0:
        return bind(P.round_, x)
    scale = 10.0**decimals
    return div(bind(P.round_, mul(x, scale)), scale)


def atan2(input, other) -> Tensor:
    a, b = promote("atan2", input, other, float_result=True)
    _check_f64("atan2", P.atan2, a)
    return bind(P.atan2, a, b)


arctan2 = atan2


def fmod(input, other) -> Tensor:
    """Remainder with the sign of the dividend (C fmod)."""
    a, b = promote("fmod", input, other)
    _no_bool("fmod", a)
    _check_f64("fmod", P.rem, a)
    return bind(P.rem, a, b)


def remainder(input, other) -> Tensor:
    """Python-style modulus: the result has the sign of the divisor."""
    a, b = promote("remainder", input, other)
    _no_bool("remainder", a)
    _check_f64("remainder", P.rem, a)
    r = bind(P.rem, a, b)
    zero = full(r.shape, 0, r.dtype)
    fix_sign = bind(P.and_, ne(r, zero), ne(lt(r, zero), lt(b, zero)))
    return where(fix_sign, r + b, r)


def floor_divide(input, other) -> Tensor:
    """Division rounded toward negative infinity (torch.floor_divide)."""
    a, b = promote("floor_divide", input, other)
    _no_bool("floor_divide", a)
    if a.dtype.is_floating_point:
        return bind(P.floor, bind(P.div, a, b))
    q = bind(P.div, a, b)
    r = bind(P.rem, a, b)  # 0 for a zero divisor, where numpy's quotient is 0 too
    zero = full(r.shape, 0, r.dtype)
    adjust = bind(P.and_, ne(r, zero), ne(lt(r, zero), lt(b, zero)))
    return where(adjust, q - 1, q)


def _no_bool(op: str, x: Tensor) -> None:
    if x.dtype is _dtypes.bool_:
        raise op_error(op, "is not defined for bool tensors", cls=TypeError)


def reciprocal(input) -> Tensor:
    return div(1, input)


def square(input) -> Tensor:
    x = as_tensor(input)
    return mul(x, x)


def sign(input) -> Tensor:
    """-1, 0 or 1 by sign (NaN stays NaN); bool tensors are returned unchanged."""
    x = as_tensor(input)
    if x.dtype is _dtypes.bool_:
        return x
    zero = full(x.shape, 0, x.dtype)
    one = full(x.shape, 1, x.dtype)
    # Neither above nor below zero: x is 0, -0.0 or NaN, each its own sign. (Not `x * 0`:
    # Vulkan drivers may fold that to 0, losing the NaN; Vulkan keeps IEEE NaN and signed
    # zeros only through a select like this one.)
    return where(gt(x, zero), one, where(lt(x, zero), -one, x))


def sigmoid(input) -> Tensor:
    """1 / (1 + exp(-x)), computed as 0.5 * (1 + tanh(x / 2)) so it never overflows."""
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        x = to(x, _dtypes.DEFAULT_FLOAT)
    return mul(bind(P.tanh, mul(x, 0.5)) + 1, 0.5)


def clamp(input, min=None, max=None) -> Tensor:  # noqa: A002
    """Limit to [min, max] (tensors or numbers; NaN stays NaN)."""
    if min is None and max is None:
        raise op_error("clamp", "at least one of 'min' or 'max' must not be None")
    x = as_tensor(input)
    if min is not None:
        x = maximum(x, min)
    if max is not None:
        x = minimum(x, max)
    return x


clip = clamp


def clamp_min(input, min) -> Tensor:  # noqa: A002
    return clamp(input, min=min)


def clamp_max(input, max) -> Tensor:  # noqa: A002
    return clamp(input, max=max)


TENSOR_METHODS: dict = {
    **_logical.TENSOR_METHODS,
    **_reduction.TENSOR_METHODS,
    **_linalg.TENSOR_METHODS,
    **{name: globals()[name] for name in (
        "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh",
        "cosh", "erf", "log1p", "expm1", "log2", "log10", "floor", "ceil", "trunc", "fix",
        "round", "atan2", "fmod", "remainder", "floor_divide", "reciprocal", "square", "sign",
        "sigmoid", "clamp", "clip", "clamp_min", "clamp_max",
    )},
    "__floordiv__": floor_divide,
    "__rfloordiv__": lambda self, other: floor_divide(other, self),
    "__mod__": remainder,
    "__rmod__": lambda self, other: remainder(other, self),
    "__pos__": lambda self: self,
}  # fmt: skip
"""Tensor methods of the math family (name -> function taking the tensor first); it also holds
those of ops/logical.py, ops/reduction.py and ops/linalg.py, which carry their own
TENSOR_METHODS."""

__all__ = [
    "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "erf", "log1p", "expm1", "log2", "log10", "floor", "ceil", "trunc", "fix", "round", "atan2",
    "arctan2", "fmod", "remainder", "floor_divide", "reciprocal", "square", "sign", "sigmoid",
    "clamp", "clip", "clamp_min", "clamp_max",
]  # fmt: skip
