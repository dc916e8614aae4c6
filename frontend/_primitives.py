"""The primitive registry: per primitive, its numpy eager kernel next to the flow op it emits.

`bind(prim, *tensors, **params)` is the single entry point: inside a trace it
appends the dialect op; otherwise it runs the numpy kernel. Both paths first ask
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

from . import _dtypes
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

    trace = current_trace()
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
        return Tensor._traced(result, trace, _dtypes.from_ir(result.type.element_type))
    try:
        ty = prim.op.infer([a._ir_type() for a in args], **ir_params)
    except VerifyException as err:
        raise op_error(prim.name, _strip_op_prefix(str(err)), loc) from None
    with np.errstate(all="ignore"):  # IEEE results (inf, nan) without warnings, like torch
        out = np.asarray(prim.impl(*(a._data for a in args), **params))
    expected = _dtypes.from_ir(ty.element_type).np_dtype
    if out.dtype != expected:
        out = out.astype(expected)
    return Tensor._eager(out)


def _strip_op_prefix(msg: str) -> str:
    first = msg.strip().splitlines()[0] if msg.strip() else msg
    if first.startswith("'flow.") and "' op " in first:
        return first.split("' op ", 1)[1]
    return first


# --------------------------------------------------------------------------- elementwise


def _trunc_div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
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
