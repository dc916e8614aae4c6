"""Elementwise primitives: unary math, binary arithmetic, bitwise, compare, select, cast.

Each is a numpy kernel registered against its dialect op (dialect/ops.py, lowered by
lowering/_elementwise.py) with its VJP rule beside it: the rule maps the cotangent of the
result to cotangents of the inputs (None where there is none), written with `bind` on
primitives so that inside a trace the backward pass becomes IR like the forward pass.
"""

from __future__ import annotations

import numpy as np

from flow.core import dtypes as _dtypes
from flow.primitives.registry import PRIMITIVES, bind, primitive

# --------------------------------------------------------------------------- VJP helpers


def _like(t, value):
    return bind(PRIMITIVES["full"], value=value, shape=tuple(t.shape), dtype=t.dtype)  # structured


def _sel(pred, a, b):
    return bind(select, pred, a, b)


def _cmp(a, b, direction):
    return bind(compare, a, b, direction=direction)


def _mul(a, b):
    return bind(mul, a, b)


def _div(a, b):
    return bind(div, a, b)


def _neg(a):
    return bind(neg, a)


def _needs(t) -> bool:
    """Whether backward wants a cotangent for input `t` (rules skip the work for the others;
    backward drops what they would return for them anyway)."""
    return t._requires_grad


def _d(fn):
    """A unary rule `ct * f'(x, out)`."""
    return lambda ct, x, out: (_mul(ct, fn(x, out)),)


def _unary(name, op, fn, vjp=None, quiet=False):
    prim = primitive(name, op, quiet=quiet)(lambda x: fn(x))
    prim.vjp = vjp
    return prim


def _binary(name, op, fn, vjp=None, quiet=False):
    prim = primitive(name, op, quiet=quiet)(lambda a, b: fn(a, b))
    prim.vjp = vjp
    return prim


def _trunc_div(a, b):
    """Division rounded toward zero; for integers numpy's x // 0 == 0 and INT_MIN // -1 ==
    INT_MIN (floor division corrected where the remainder is nonzero and the signs differ;
    not via abs, which wraps at INT_MIN)."""
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore", over="ignore"):
            q, r = np.floor_divide(a, b), np.remainder(a, b)
        return (q + ((r != 0) & ((a < 0) != (b < 0)))).astype(a.dtype)
    return a / b


def _erf(x):
    import math

    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


def _sign(x, out):
    return _sel(
        _cmp(x, _like(x, 0), "gt"),
        _like(x, 1),
        _sel(_cmp(x, _like(x, 0), "lt"), _like(x, -1), _like(x, 0)),
    )


def _one_minus_sq(x):
    return bind(sub, _like(x, 1), _mul(x, x))


def _zero(ct, x, out):
    return (_like(x, 0),)


_LN2, _LN10, _TWO_OVER_SQRT_PI = 0.6931471805599453, 2.302585092994046, 1.1283791670955126

# --------------------------------------------------------------------------- unary

neg = _unary("neg", "NegOp", np.negative, lambda ct, x, out: (_neg(ct),), quiet=True)
abs_ = _unary("abs", "AbsOp", np.abs, _d(_sign))
exp = _unary("exp", "ExpOp", np.exp, _d(lambda x, out: out))
log = _unary("log", "LogOp", np.log, lambda ct, x, out: (_div(ct, x),))
sqrt = _unary("sqrt", "SqrtOp", np.sqrt,
              lambda ct, x, out: (_div(_mul(ct, _like(x, 0.5)), out),))  # fmt: skip
rsqrt = _unary("rsqrt", "RsqrtOp", lambda x: (1 / np.sqrt(x)).astype(x.dtype),
               lambda ct, x, out: (_mul(ct, _div(_mul(out, _like(x, -0.5)), x)),))  # fmt: skip
tanh = _unary("tanh", "TanhOp", np.tanh, _d(lambda x, out: bind(sub, _like(x, 1), _mul(out, out))))
sin = _unary("sin", "SinOp", np.sin, _d(lambda x, out: bind(cos, x)))
cos = _unary("cos", "CosOp", np.cos, _d(lambda x, out: _neg(bind(sin, x))))
tan = _unary("tan", "TanOp", np.tan, _d(lambda x, out: bind(add, _like(x, 1), _mul(out, out))))
asin = _unary("asin", "AsinOp", np.arcsin,
              lambda ct, x, out: (_div(ct, bind(sqrt, _one_minus_sq(x))),))  # fmt: skip
acos = _unary("acos", "AcosOp", np.arccos,
              lambda ct, x, out: (_neg(_div(ct, bind(sqrt, _one_minus_sq(x)))),))  # fmt: skip
atan = _unary("atan", "AtanOp", np.arctan,
              lambda ct, x, out: (_div(ct, bind(add, _like(x, 1), _mul(x, x))),))  # fmt: skip
sinh = _unary("sinh", "SinhOp", np.sinh, _d(lambda x, out: bind(cosh, x)))
cosh = _unary("cosh", "CoshOp", np.cosh, _d(lambda x, out: bind(sinh, x)))
floor = _unary("floor", "FloorOp", np.floor, _zero)
ceil = _unary("ceil", "CeilOp", np.ceil, _zero)
round_ = _unary("round", "RoundOp", np.round, _zero)
trunc = _unary("trunc", "TruncOp", np.trunc, _zero)
erf = _unary("erf", "ErfOp", _erf,
             _d(lambda x, out: _mul(_like(x, _TWO_OVER_SQRT_PI), bind(exp, _neg(_mul(x, x))))))  # fmt: skip
log1p = _unary("log1p", "Log1pOp", np.log1p,
               lambda ct, x, out: (_div(ct, bind(add, x, _like(x, 1))),))  # fmt: skip
expm1 = _unary("expm1", "Expm1Op", np.expm1, _d(lambda x, out: bind(add, out, _like(x, 1))))
log2 = _unary("log2", "Log2Op", np.log2,
              lambda ct, x, out: (_div(ct, _mul(x, _like(x, _LN2))),))  # fmt: skip
log10 = _unary("log10", "Log10Op", np.log10,
               lambda ct, x, out: (_div(ct, _mul(x, _like(x, _LN10))),))  # fmt: skip

# --------------------------------------------------------------------------- binary


def _extreme_vjp(direction):
    """maximum/minimum: the winner gets the cotangent; ties split it evenly (like PyTorch)."""

    def rule(ct, a, b, out):
        wins = _cmp(a, b, direction)
        ties = _cmp(a, b, "eq")
        share = _sel(wins, _like(a, 1), _sel(ties, _like(a, 0.5), _like(a, 0)))
        return (_mul(ct, share) if _needs(a) else None,
                _mul(ct, bind(sub, _like(a, 1), share)) if _needs(b) else None)  # fmt: skip

    return rule


def _pow_vjp(ct, a, b, out):
    da = _mul(ct, _mul(b, bind(pow_, a, bind(sub, b, _like(b, 1))))) if _needs(a) else None
    if not _needs(b):
        return da, None
    positive = _cmp(a, _like(a, 0), "gt")
    log_a = _sel(positive, bind(log, _sel(positive, a, _like(a, 1))), _like(a, 0))
    return da, _mul(ct, _mul(out, log_a))


def _atan2_vjp(ct, y, x, out):
    return (
        _div(_mul(ct, x), bind(add, _mul(x, x), _mul(y, y))),
        _neg(_div(_mul(ct, y), bind(add, _mul(x, x), _mul(y, y)))),
    )


add = _binary("add", "AddOp", np.add, lambda ct, a, b, out: (ct, ct))
sub = _binary("sub", "SubOp", np.subtract,
              lambda ct, a, b, out: (ct, _neg(ct) if _needs(b) else None))  # fmt: skip
mul = _binary("mul", "MulOp", np.multiply, lambda ct, a, b, out: (
    _mul(ct, b) if _needs(a) else None, _mul(ct, a) if _needs(b) else None))  # fmt: skip
div = _binary("div", "DivOp", _trunc_div, lambda ct, a, b, out: (
    _div(ct, b) if _needs(a) else None,
    _neg(_div(_mul(ct, out), b)) if _needs(b) else None))  # fmt: skip
maximum = _binary("maximum", "MaximumOp", np.maximum, _extreme_vjp("gt"), quiet=True)
minimum = _binary("minimum", "MinimumOp", np.minimum, _extreme_vjp("lt"), quiet=True)
pow_ = _binary("pow", "PowOp", np.power, _pow_vjp)
rem = _binary("rem", "RemOp", np.fmod, lambda ct, a, b, out: (
    ct, _neg(_mul(ct, bind(trunc, _div(a, b)))) if _needs(b) else None))  # fmt: skip
atan2 = _binary("atan2", "Atan2Op", np.arctan2, _atan2_vjp)
and_ = _binary("and", "AndOp", np.bitwise_and, quiet=True)  # bitwise: no VJP
or_ = _binary("or", "OrOp", np.bitwise_or, quiet=True)
xor = _binary("xor", "XorOp", np.bitwise_xor, quiet=True)

# --------------------------------------------------------------------------- compare, select, cast

_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


@primitive("compare", "CompareOp", quiet=True)
def compare(a, b, *, direction):
    return _COMPARE[direction](a, b)


_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@primitive("select", "SelectOp", quiet=True)
def select(pred, a, b):
    """`np.where`, which branches per element and so runs several times slower on an
    irregular mask (a ReLU's) than on a uniform one; larger selects pick the bits instead:
    `b ^ ((a ^ b) * pred)`, exact for every value, into one result array."""
    if (pred.dtype != np.bool_ or a.dtype != b.dtype or a.dtype.itemsize not in _BITS
            or max(a.size, b.size) < 4096):  # fmt: skip
        return np.where(pred, a, b)
    dtype, bits = a.dtype, _BITS[a.dtype.itemsize]
    a, b = a.view(bits), b.view(bits)
    out = np.empty(np.broadcast_shapes(pred.shape, a.shape, b.shape), bits)
    np.bitwise_xor(a, b, out=out)
    np.multiply(out, pred, out=out)  # the bits in which a differs from b, where pred holds
    np.bitwise_xor(out, b, out=out)
    return out.view(dtype)


def masked(x: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """`np.where(keep, x, 0)` as the bits of `x` times `keep` (one pass, exact for every
    value, as `select` picks bits); `np.where` itself for other shapes or element sizes."""
    bits = _BITS.get(x.dtype.itemsize)
    if bits is None or keep.shape != x.shape or keep.dtype != np.bool_:
        return np.where(keep, x, np.zeros((), x.dtype))
    return np.multiply(x.view(bits), keep).view(x.dtype)


select.vjp = lambda ct, p, a, b, out: (
    None,
    _sel(p, ct, _like(ct, 0)) if _needs(a) else None,
    _sel(p, _like(ct, 0), ct) if _needs(b) else None,
)  # fmt: skip


@primitive("cast", "CastOp", to_ir=lambda p: {"element_type": p["dtype"].ir_type})
def cast(x, *, dtype):
    if dtype is _dtypes.bool_:
        return x != 0
    if dtype.kind == 1 and x.dtype.kind == "f":
        return np.trunc(x).astype(dtype.np_dtype)
    return _dtypes.astype(x, dtype)


def _cast_vjp(ct, x, out, *, dtype):
    if not x._dtype.is_floating_point:
        return (None,)
    return (bind(cast, ct, dtype=x._dtype),)


cast.vjp = _cast_vjp

__all__ = ["abs_", "acos", "add", "and_", "asin", "atan", "atan2", "cast", "ceil", "compare", "cos", "cosh", "div", "erf", "exp", "expm1", "floor", "log", "log10", "log1p", "log2", "maximum", "minimum", "mul", "neg", "or_", "pow_", "rem", "round_", "rsqrt", "select", "sin", "sinh", "sqrt", "sub", "tan", "tanh", "trunc", "xor"]  # fmt: skip
