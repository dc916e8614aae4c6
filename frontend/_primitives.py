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
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, TensorType
from xdsl.utils.exceptions import VerifyException

from flow import dialect as fd

from . import _device, _dtypes, _global, _lazy
from ._autograd import record
from ._trace import current_trace, describe_location, user_location


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


def op_error(op_name: str, message: str, loc=None, cls: type[Exception] = ValueError) -> Exception:
    """An exception naming the op, what is wrong, and the user's source line."""
    if loc is None:
        loc = user_location()
    return cls(f"{op_name}: {message}\n  at {describe_location(loc)}")


def bind(prim: Primitive, *args, **params):
    """Apply a primitive to Tensors: emit IR when tracing, else run the numpy kernel."""
    from ._tensor import Tensor

    if _lazy.enabled() and current_trace() is None:  # flow.lazy(): record, compute later
        out = _lazy.lazy_bind(prim, args, params)
        if out is not None:
            _device.propagate(args, out)
            return out
    if not args and current_trace() is None and prim.name in ("full", "iota"):
        return _global.eager_create(prim, params)  # constants: global ones in global VJPs
    trace = current_trace()
    if trace is None and any(getattr(a, "_dist", None) is not None for a in args):
        from ._global import global_bind  # eager global tensors; inside a trace they are traced

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
            raise op_error(prim.name, _strip_op_prefix(str(err)), loc) from None
        trace.emit(op, loc)
        result = op.results[0]
        out = Tensor._traced(result, trace, _dtypes.from_ir(result.type.element_type))
        return record(prim.name, prim.vjp, args, params, out)
    try:
        ty = prim.op.infer([a._ir_type() for a in args], **ir_params)
    except VerifyException as err:
        raise op_error(prim.name, _strip_op_prefix(str(err)), loc) from None
    with np.errstate(all="ignore"):  # IEEE results (inf, nan) without warnings, like torch
        out = np.asarray(prim.impl(*(a._data for a in args), **params))
    expected = _dtypes.from_ir(ty.element_type).np_dtype
    if out.dtype != expected:
        out = out.astype(expected)
    result = Tensor._eager(out)
    _global.propagate_constant(args, result)  # the same on every rank if its inputs are
    _device.propagate(args, result)  # on the device of its inputs
    return record(prim.name, prim.vjp, args, params, result)


def _strip_op_prefix(msg: str) -> str:
    first = msg.strip().splitlines()[0] if msg.strip() else msg
    if first.startswith("'flow.") and "' op " in first:
        return first.split("' op ", 1)[1]
    return first


# --------------------------------------------------------------------------- elementwise


def _trunc_div(a, b):
    """Division rounded toward zero; for integers numpy's x // 0 == 0 and INT_MIN // -1 ==
    INT_MIN (floor division corrected where the remainder is nonzero and the signs differ;
    not via abs, which wraps at INT_MIN)."""
    if np.issubdtype(a.dtype, np.integer):
        with np.errstate(divide="ignore", over="ignore"):
            q, r = np.floor_divide(a, b), np.remainder(a, b)
        return (q + ((r != 0) & ((a < 0) != (b < 0)))).astype(a.dtype)
    return a / b


def _unary(name, op, fn):
    return primitive(name, op)(lambda x: fn(x))


def _binary(name, op, fn):
    return primitive(name, op)(lambda a, b: fn(a, b))


neg = _unary("neg", fd.NegOp, np.negative)
abs_ = _unary("abs", fd.AbsOp, np.abs)
exp = _unary("exp", fd.ExpOp, np.exp)
log = _unary("log", fd.LogOp, np.log)
sqrt = _unary("sqrt", fd.SqrtOp, np.sqrt)
rsqrt = _unary("rsqrt", fd.RsqrtOp, lambda x: (1 / np.sqrt(x)).astype(x.dtype))
tanh = _unary("tanh", fd.TanhOp, np.tanh)

add = _binary("add", fd.AddOp, np.add)
sub = _binary("sub", fd.SubOp, np.subtract)
mul = _binary("mul", fd.MulOp, np.multiply)
div = _binary("div", fd.DivOp, _trunc_div)
maximum = _binary("maximum", fd.MaximumOp, np.maximum)
minimum = _binary("minimum", fd.MinimumOp, np.minimum)
pow_ = _binary("pow", fd.PowOp, np.power)
rem = _binary("rem", fd.RemOp, np.fmod)
atan2 = _binary("atan2", fd.Atan2Op, np.arctan2)
and_ = _binary("and", fd.AndOp, np.bitwise_and)
or_ = _binary("or", fd.OrOp, np.bitwise_or)
xor = _binary("xor", fd.XorOp, np.bitwise_xor)


def _erf(x):
    import math

    return np.vectorize(math.erf, otypes=[x.dtype])(x) if x.size else x.copy()


sin = _unary("sin", fd.SinOp, np.sin)
cos = _unary("cos", fd.CosOp, np.cos)
tan = _unary("tan", fd.TanOp, np.tan)
asin = _unary("asin", fd.AsinOp, np.arcsin)
acos = _unary("acos", fd.AcosOp, np.arccos)
atan = _unary("atan", fd.AtanOp, np.arctan)
sinh = _unary("sinh", fd.SinhOp, np.sinh)
cosh = _unary("cosh", fd.CoshOp, np.cosh)
floor = _unary("floor", fd.FloorOp, np.floor)
ceil = _unary("ceil", fd.CeilOp, np.ceil)
round_ = _unary("round", fd.RoundOp, np.round)
trunc = _unary("trunc", fd.TruncOp, np.trunc)
erf = _unary("erf", fd.ErfOp, _erf)
log1p = _unary("log1p", fd.Log1pOp, np.log1p)
expm1 = _unary("expm1", fd.Expm1Op, np.expm1)
log2 = _unary("log2", fd.Log2Op, np.log2)
log10 = _unary("log10", fd.Log10Op, np.log10)

_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


@primitive("compare", fd.CompareOp)
def compare(a, b, *, direction):
    return _COMPARE[direction](a, b)


@primitive("select", fd.SelectOp)
def select(pred, a, b):
    return np.where(pred, a, b)


@primitive("cast", fd.CastOp, to_ir=lambda p: {"element_type": p["dtype"].ir_type})
def cast(x, *, dtype):
    if dtype is _dtypes.bool_:
        return x != 0
    if dtype.kind == 1 and x.dtype.kind == "f":
        return np.trunc(x).astype(dtype.np_dtype)
    return x.astype(dtype.np_dtype)


# --------------------------------------------------------------------------- structured


@primitive("matmul", fd.MatmulOp)
def matmul(a, b):
    return np.matmul(a, b)


_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


@primitive("reduce", fd.ReduceOp)
def reduce(x, *, kind, dims):
    if not dims:
        return x
    return _REDUCE[kind].reduce(x, axis=tuple(dims), dtype=x.dtype)


@primitive("reshape", fd.ReshapeOp)
def reshape(x, *, shape):
    return x.reshape(shape)


@primitive("transpose", fd.TransposeOp)
def transpose(x, *, permutation):
    return np.transpose(x, permutation)


@primitive("broadcast_in_dim", fd.BroadcastInDimOp)
def broadcast_in_dim(x, *, dims, shape):
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


# --------------------------------------------------------------------------- creation


@primitive(
    "iota",
    fd.IotaOp,
    to_ir=lambda p: {
        "dim": p["dim"],
        "shape": tuple(p["shape"]),
        "element_type": p["dtype"].ir_type,
    },
)
def iota(*, dim, shape, dtype):
    idx = np.arange(shape[dim], dtype=dtype.np_dtype)
    view = [1] * len(shape)
    view[dim] = shape[dim]
    return np.broadcast_to(idx.reshape(view), shape)


def _full_to_ir(p: dict) -> dict:
    dt: _dtypes.dtype = p["dtype"]
    v = p["value"]
    if dt.is_floating_point:
        value = FloatAttr(float(v), dt.ir_type)
    else:
        value = IntegerAttr(int(bool(v)) if dt is _dtypes.bool_ else int(v), dt.ir_type)
    return {"value": value, "shape": tuple(p["shape"])}


@primitive("full", fd.FullOp, to_ir=_full_to_ir)
def full(*, value, shape, dtype):
    return np.full(shape, value, dtype=dtype.np_dtype)


def _constant_to_ir(p: dict) -> dict:
    arr: np.ndarray = p["array"]
    dt = _dtypes.as_dtype(arr.dtype)
    ty = TensorType(dt.ir_type, arr.shape)
    values = arr.reshape(-1).tolist()
    if dt is _dtypes.bool_:
        values = [int(v) for v in values]
    return {"value": DenseIntOrFPElementsAttr.from_list(ty, values)}


@primitive("constant", fd.ConstantOp, to_ir=_constant_to_ir)
def constant(*, array):
    return array


# --------------------------------------------------------------------------- VJP rules
#
# Each rule maps the cotangent of a primitive's result to cotangents of its
# inputs (None where there is none), written with `bind` on primitives so that
# inside a trace the backward pass becomes IR like the forward pass.


def _like(t, value):
    return bind(full, value=value, shape=tuple(t.shape), dtype=t.dtype)


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


def _swap_last(t):
    perm = list(range(len(t.shape)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return bind(transpose, t, permutation=tuple(perm))


def _expand_back(ct, x, dims):
    """Broadcast a reduction's cotangent (dims removed) back to `x`'s shape."""
    kept = tuple(i for i in range(len(x.shape)) if i not in dims)
    return bind(broadcast_in_dim, ct, dims=kept, shape=tuple(x.shape))


def _unary_vjp(fn):
    """A rule `ct * f'(x, out)` for a unary primitive."""
    return lambda ct, x, out: (_mul(ct, fn(x, out)),)


_LN2, _LN10, _TWO_OVER_SQRT_PI = 0.6931471805599453, 2.302585092994046, 1.1283791670955126

_VJPS = {
    neg: lambda ct, x, out: (_neg(ct),),
    abs_: _unary_vjp(
        lambda x, out: _sel(
            _cmp(x, _like(x, 0), "gt"),
            _like(x, 1),
            _sel(_cmp(x, _like(x, 0), "lt"), _like(x, -1), _like(x, 0)),
        )
    ),  # fmt: skip
    exp: _unary_vjp(lambda x, out: out),
    log: lambda ct, x, out: (_div(ct, x),),
    sqrt: lambda ct, x, out: (_div(_mul(ct, _like(x, 0.5)), out),),
    rsqrt: lambda ct, x, out: (_mul(ct, _div(_mul(out, _like(x, -0.5)), x)),),
    tanh: _unary_vjp(lambda x, out: bind(sub, _like(x, 1), _mul(out, out))),
    sin: _unary_vjp(lambda x, out: bind(cos, x)),
    cos: _unary_vjp(lambda x, out: _neg(bind(sin, x))),
    tan: _unary_vjp(lambda x, out: bind(add, _like(x, 1), _mul(out, out))),
    asin: lambda ct, x, out: (_div(ct, bind(sqrt, bind(sub, _like(x, 1), _mul(x, x)))),),
    acos: lambda ct, x, out: (_neg(_div(ct, bind(sqrt, bind(sub, _like(x, 1), _mul(x, x))))),),
    atan: lambda ct, x, out: (_div(ct, bind(add, _like(x, 1), _mul(x, x))),),
    sinh: _unary_vjp(lambda x, out: bind(cosh, x)),
    cosh: _unary_vjp(lambda x, out: bind(sinh, x)),
    erf: _unary_vjp(
        lambda x, out: _mul(_like(x, _TWO_OVER_SQRT_PI), bind(exp, _neg(_mul(x, x))))
    ),  # fmt: skip
    log1p: lambda ct, x, out: (_div(ct, bind(add, x, _like(x, 1))),),
    expm1: _unary_vjp(lambda x, out: bind(add, out, _like(x, 1))),
    log2: lambda ct, x, out: (_div(ct, _mul(x, _like(x, _LN2))),),
    log10: lambda ct, x, out: (_div(ct, _mul(x, _like(x, _LN10))),),
    **{p: (lambda ct, x, out: (_like(x, 0),)) for p in (floor, ceil, round_, trunc)},
    add: lambda ct, a, b, out: (ct, ct),
    sub: lambda ct, a, b, out: (ct, _neg(ct)),
    mul: lambda ct, a, b, out: (_mul(ct, b), _mul(ct, a)),
    div: lambda ct, a, b, out: (_div(ct, b), _neg(_div(_mul(ct, out), b))),
    rem: lambda ct, a, b, out: (ct, _neg(_mul(ct, bind(trunc, _div(a, b))))),
    atan2: lambda ct, y, x, out: (
        _div(_mul(ct, x), bind(add, _mul(x, x), _mul(y, y))),
        _neg(_div(_mul(ct, y), bind(add, _mul(x, x), _mul(y, y)))),
    ),
    select: lambda ct, p, a, b, out: (None, _sel(p, ct, _like(ct, 0)), _sel(p, _like(ct, 0), ct)),
    matmul: lambda ct, a, b, out: (
        bind(matmul, ct, _swap_last(b)),
        bind(matmul, _swap_last(a), ct),
    ),  # fmt: skip
    reshape: lambda ct, x, out, shape: (bind(reshape, ct, shape=tuple(x.shape)),),
}


def _extreme_vjp(ct, a, b, out, *, direction):
    """maximum/minimum: the winner gets the cotangent; ties split it evenly (like PyTorch)."""
    wins = _cmp(a, b, direction)
    ties = _cmp(a, b, "eq")
    share = _sel(wins, _like(a, 1), _sel(ties, _like(a, 0.5), _like(a, 0)))
    return _mul(ct, share), _mul(ct, bind(sub, _like(a, 1), share))


def _pow_vjp(ct, a, b, out):
    da = _mul(ct, _mul(b, bind(pow_, a, bind(sub, b, _like(b, 1)))))
    positive = _cmp(a, _like(a, 0), "gt")
    log_a = _sel(positive, bind(log, _sel(positive, a, _like(a, 1))), _like(a, 0))
    return da, _mul(ct, _mul(out, log_a))


def _cast_vjp(ct, x, out, *, dtype):
    if not x._dtype.is_floating_point:
        return (None,)
    return (bind(cast, ct, dtype=x._dtype),)


def _reduce_vjp(ct, x, out, *, kind, dims):
    dims = tuple(dims)
    if not dims:
        return (ct,)
    ct_b = _expand_back(ct, x, dims)
    if kind == "sum":
        return (ct_b,)
    if kind in ("max", "min"):
        hit = _sel(_cmp(x, _expand_back(out, x, dims), "eq"), _like(x, 1), _like(x, 0))
        count = _expand_back(bind(reduce, hit, kind="sum", dims=dims), x, dims)
        return (_div(_mul(ct_b, hit), count),)
    # prod: d/dx_i = product of the others, exact when some x are zero
    zero = _cmp(x, _like(x, 0), "eq")
    nonzero = _sel(zero, _like(x, 1), x)
    p = _expand_back(bind(reduce, nonzero, kind="prod", dims=dims), x, dims)
    zeros = _expand_back(bind(reduce, _sel(zero, _like(x, 1), _like(x, 0)), kind="sum",
                              dims=dims), x, dims)  # fmt: skip
    none_zero = _cmp(zeros, _like(x, 0), "eq")
    one_zero = _cmp(zeros, _like(x, 1), "eq")
    g = _sel(none_zero, _div(p, nonzero), _sel(bind(and_, one_zero, zero), p, _like(x, 0)))
    return (_mul(ct_b, g),)


def _transpose_vjp(ct, x, out, *, permutation):
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return (bind(transpose, ct, permutation=tuple(inverse)),)


def _broadcast_vjp(ct, x, out, *, dims, shape):
    summed = [d for d in range(len(shape)) if d not in dims]
    summed += [d for i, d in enumerate(dims) if x.shape[i] == 1 and shape[d] != 1]
    r = bind(reduce, ct, kind="sum", dims=tuple(sorted(summed))) if summed else ct
    return (bind(reshape, r, shape=tuple(x.shape)) if tuple(r.shape) != tuple(x.shape) else r,)


_VJPS.update({
    maximum: lambda ct, a, b, out: _extreme_vjp(ct, a, b, out, direction="gt"),
    minimum: lambda ct, a, b, out: _extreme_vjp(ct, a, b, out, direction="lt"),
    pow_: _pow_vjp,
    cast: _cast_vjp,
    reduce: _reduce_vjp,
    transpose: _transpose_vjp,
    broadcast_in_dim: _broadcast_vjp,
})  # fmt: skip

for _prim, _rule in _VJPS.items():
    _prim.vjp = _rule
