"""Lowering rules for elementwise flow ops: `linalg.generic` with an arith/math body.

Each op has one *scalar rule* (`SCALAR_RULES`): given the flow op and the
scalar values of its operands, it emits the arith/math ops computing one
element. A single op becomes an all-parallel `linalg.generic` around it; a
`flow.fused` region (lowering/_fused.py) chains the same rules in one body.
Each rule picks the scalar op from the element type (float vs integer vs i1),
so the tables below read as the semantics: NaN-propagating `maximumf` for
float max (like numpy), truncating `divsi` for integer division (guarded so that no
lane traps, with numpy's 0 for a zero divisor), ordered float predicates except `une`
for `ne`, unsigned predicates for i1 (True > False).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    IntegerAttr,
    IntegerType,
    Signedness,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from flow.dialect import ops as flow
from flow.dialect.ops import is_bool, is_float

from . import _half_casts
from ._linalg_builders import (
    Lowered,
    binary,
    build,
    constant,
    elementwise,
    scalar_constant,
    unary,
)
from ._upstream import RemFOp

Scalar = tuple[list[Operation], SSAValue]
"""A scalar computation: the ops to put in a linalg body, and the value they compute."""


def _one(op: Operation) -> Scalar:
    return [op], op.results[0]


# --------------------------------------------------------------------------- unary

_FLOAT_UNARY: dict[type[Operation], type[Operation]] = {
    flow.AbsOp: math.AbsFOp,
    flow.ExpOp: math.ExpOp,
    flow.LogOp: math.LogOp,
    flow.SqrtOp: math.SqrtOp,
    flow.RsqrtOp: math.RsqrtOp,
    flow.TanhOp: math.TanhOp,
    flow.NegOp: arith.NegfOp,
    flow.SinOp: math.SinOp,
    flow.CosOp: math.CosOp,
    flow.TanOp: math.TanOp,
    flow.AsinOp: math.AsinOp,
    flow.AcosOp: math.AcosOp,
    flow.AtanOp: math.AtanOp,
    flow.SinhOp: math.SinhOp,
    flow.CoshOp: math.CoshOp,
    flow.FloorOp: math.FloorOp,
    flow.CeilOp: math.CeilOp,
    flow.RoundOp: math.RoundEvenOp,
    flow.TruncOp: math.TruncOp,
    flow.ErfOp: math.ErfOp,
    flow.Log1pOp: math.Log1pOp,
    flow.Expm1Op: math.ExpM1Op,
    flow.Log2Op: math.LogOp,  # scaled below: IREE's CPU backend has no log2/log10 kernels
    flow.Log10Op: math.LogOp,
}
_LOG_SCALE = {flow.Log2Op: 1.4426950408889634, flow.Log10Op: 0.4342944819032518}


def _tanh_f64_body(args: Sequence[SSAValue]) -> tuple[list[Operation], SSAValue]:
    """tanh for f64, which IREE's cpu backend has no kernel for: expm1(2x) / (expm1(2x) + 2).

    A Taylor series near 0 (IREE's f64 expm1 loses digits there), saturated to
    ±1 beyond |x| > 20 (where the quotient would be inf/inf).
    """
    x = args[0]
    ops: list[Operation] = []

    def emit(o: Operation) -> SSAValue:
        ops.append(o)
        return o.results[0]

    two, limit, one, small = (emit(scalar_constant(v, f64)) for v in (2.0, 20.0, 1.0, 0.05))
    e = emit(unary(math.ExpM1Op, emit(binary(arith.MulfOp, x, two))))
    q = emit(binary(arith.DivfOp, e, emit(binary(arith.AddfOp, e, two))))
    # |x| < 0.05: the odd Taylor series to x**9 (relative error < 1e-15)
    x2 = emit(binary(arith.MulfOp, x, x))
    poly = emit(scalar_constant(62 / 2835, f64))
    for c in (-17 / 315, 2 / 15, -1 / 3, 1.0):
        poly = emit(binary(arith.AddfOp, emit(binary(arith.MulfOp, poly, x2)),
                           emit(scalar_constant(c, f64))))  # fmt: skip
    series = emit(binary(arith.MulfOp, x, poly))
    ax = emit(unary(math.AbsFOp, x))
    near = emit(build(arith.SelectOp, (emit(cmpf(ax, small, "olt")), series, q), (f64,)))
    sign = emit(build(math.CopySignOp, (one, x), (f64,)))
    return ops, emit(build(arith.SelectOp, (emit(cmpf(ax, limit, "ogt")), sign, near), (f64,)))


def _scalar_unary(op: Operation, a: Sequence[SSAValue]) -> Scalar:
    el = op.results[0].type.element_type
    if is_float(el):
        if isinstance(op, flow.TanhOp) and el == f64:
            return _tanh_f64_body(a)
        y = unary(_FLOAT_UNARY[type(op)], a[0])
        scale = _LOG_SCALE.get(type(op))
        if scale is None:
            return [y], y.results[0]
        k = scalar_constant(scale, el)
        mul = binary(arith.MulfOp, y.results[0], k.result)
        return [y, k, mul], mul.results[0]
    if isinstance(op, flow.AbsOp):
        return _one(unary(math.AbsIOp, a[0]))
    assert isinstance(op, flow.NegOp), op.name
    zero = scalar_constant(0, el)
    sub = binary(arith.SubiOp, zero.result, a[0])
    return [zero, sub], sub.results[0]


# --------------------------------------------------------------------------- binary

_BINARY: dict[type[Operation], tuple[type[Operation], type[Operation] | None]] = {
    # flow op: (float scalar op, integer scalar op)
    flow.AddOp: (arith.AddfOp, arith.AddiOp),
    flow.SubOp: (arith.SubfOp, arith.SubiOp),
    flow.MulOp: (arith.MulfOp, arith.MuliOp),
    flow.DivOp: (arith.DivfOp, arith.DivSIOp),
    flow.MaximumOp: (arith.MaximumfOp, arith.MaxSIOp),
    flow.MinimumOp: (arith.MinimumfOp, arith.MinSIOp),
    flow.PowOp: (math.PowFOp, None),
    flow.RemOp: (RemFOp, arith.RemSIOp),
    flow.Atan2Op: (math.Atan2Op, None),
    flow.AndOp: (None, arith.AndIOp),
    flow.OrOp: (None, arith.OrIOp),
    flow.XorOp: (None, arith.XOrIOp),
}


def _pow_body(args: Sequence[SSAValue]) -> tuple[list[Operation], SSAValue]:
    """x**y with numpy's rules: IREE's powf is exp(y*log(x)), NaN for every x < 0 and 0**0.

    |x|**y, negated when x < 0 and y is an odd integer; NaN when x < 0 and y is
    not an integer.
    """
    x, y = args[0], args[1]
    el = x.type
    ops: list[Operation] = []

    def emit(o: Operation) -> SSAValue:
        ops.append(o)
        return o.results[0]

    zero, half = (emit(scalar_constant(v, el)) for v in (0.0, 0.5))
    nan = emit(scalar_constant(float("nan"), el))
    mag = emit(build(math.PowFOp, (emit(unary(math.AbsFOp, x)), y), (el,)))
    negative = emit(cmpf(x, zero, "olt"))
    whole = emit(cmpf(emit(unary(math.FloorOp, y)), y, "oeq"))
    halved = emit(binary(arith.MulfOp, y, half))
    odd = emit(cmpf(emit(unary(math.FloorOp, halved)), halved, "une"))
    signed = emit(build(arith.SelectOp, (odd, emit(unary(arith.NegfOp, mag)), mag), (el,)))
    neg_result = emit(build(arith.SelectOp, (whole, signed, nan), (el,)))
    result = emit(build(arith.SelectOp, (negative, neg_result, mag), (el,)))
    one = emit(scalar_constant(1.0, el))
    unit = emit(
        build(arith.OrIOp, (emit(cmpf(y, zero, "oeq")), emit(cmpf(x, one, "oeq"))), (i1,))
    )  # x**0 == 1**y == 1, even for NaN
    return ops, emit(build(arith.SelectOp, (unit, one, result), (el,)))


def _int_division_body(op: Operation, args: Sequence[SSAValue]) -> Scalar:
    """Integer `divsi`/`remsi` that never trap, with numpy's answers where C's are undefined.

    x / 0 and x % 0 are 0, INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0 (numpy; a
    bare `divsi` raises SIGFPE on x86 or returns garbage). Those lanes divide by 1 instead
    (giving x / 1 == INT_MIN and x % 1 == 0 for the overflow lane), and the quotient of a
    zero divisor is then replaced by 0. The remainder is x - (x / y) * y: MLIR's SPIR-V
    lowering of `remsi` gets the sign wrong for an INT_MIN dividend (Vulkan), and LLVM folds
    this form back into one `srem` on CPUs.
    """
    x, y = args[0], args[1]
    el = x.type
    assert isinstance(el, IntegerType)
    ops: list[Operation] = []

    def emit(o: Operation) -> SSAValue:
        ops.append(o)
        return o.results[0]

    width = el.width.data
    zero, one, minus_one = (emit(scalar_constant(v, el)) for v in (0, 1, -1))
    int_min = emit(constant(IntegerAttr(-(1 << (width - 1)), el)))
    by_zero = emit(cmpi(y, zero, "eq"))
    overflow = emit(build(arith.AndIOp, (emit(cmpi(x, int_min, "eq")),
                                         emit(cmpi(y, minus_one, "eq"))), (i1,)))  # fmt: skip
    unsafe = emit(build(arith.OrIOp, (by_zero, overflow), (i1,)))
    safe = emit(build(arith.SelectOp, (unsafe, one, y), (el,)))
    quotient = emit(binary(arith.DivSIOp, x, safe))
    if isinstance(op, flow.RemOp):
        return ops, emit(binary(arith.SubiOp, x, emit(binary(arith.MuliOp, quotient, safe))))
    return ops, emit(build(arith.SelectOp, (by_zero, zero, quotient), (el,)))


def _scalar_binary(op: Operation, a: Sequence[SSAValue]) -> Scalar:
    if isinstance(op, flow.PowOp):
        return _pow_body(a)
    fop, iop = _BINARY[type(op)]
    if iop in (arith.DivSIOp, arith.RemSIOp) and not is_float(op.results[0].type.element_type):
        return _int_division_body(op, a)
    scalar = fop if is_float(op.results[0].type.element_type) else iop
    assert scalar is not None, f"{op.name} has no integer lowering"
    return _one(binary(scalar, a[0], a[1]))


# --------------------------------------------------------------------------- compare / select

# arith predicate numbers: cmpf oeq=1 ogt=2 oge=3 olt=4 ole=5 une=13;
# cmpi eq=0 ne=1 slt=2 sle=3 sgt=4 sge=5 ult=6 ule=7 ugt=8 uge=9.
_CMPF = {"oeq": 1, "ogt": 2, "oge": 3, "olt": 4, "ole": 5, "une": 13}
_CMPI = {"eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5, "ult": 6, "ule": 7, "ugt": 8,
         "uge": 9}  # fmt: skip
_FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
_INT_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_BOOL_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


def cmpf(x: SSAValue, y: SSAValue, predicate: str) -> Operation:
    return build(arith.CmpfOp, (x, y), (i1,), {"predicate": IntegerAttr(_CMPF[predicate], i64)})


def cmpi(x: SSAValue, y: SSAValue, predicate: str) -> Operation:
    return build(arith.CmpiOp, (x, y), (i1,), {"predicate": IntegerAttr(_CMPI[predicate], i64)})


def _scalar_compare(op: flow.CompareOp, a: Sequence[SSAValue]) -> Scalar:
    el = op.lhs.type.element_type
    direction = op.direction.data.value
    if is_float(el):
        return _one(cmpf(a[0], a[1], _FLOAT_PREDICATES[direction]))
    pred = (_BOOL_PREDICATES if is_bool(el) else _INT_PREDICATES)[direction]
    return _one(cmpi(a[0], a[1], pred))


def _scalar_select(op: flow.SelectOp, a: Sequence[SSAValue]) -> Scalar:
    return _one(build(arith.SelectOp, a[:3], (a[1].type,)))


# --------------------------------------------------------------------------- cast


def cast_scalar(x: SSAValue, src: Attribute, dst: Attribute) -> tuple[list[Operation], SSAValue]:
    """Convert one scalar: float<->int truncate toward zero, bools are 0/1, `x != 0` gives i1;
    bf16 and f64 -> f16 as in `_half_casts` (bit-exact with ml_dtypes on every CPU)."""
    if src == dst:
        return [], x
    if _half_casts.is_special(src, dst):
        return _half_casts.half_cast(x, src, dst)
    if is_bool(dst):
        zero = scalar_constant(0, src)
        cmp = cmpf(x, zero.result, "une") if is_float(src) else cmpi(x, zero.result, "ne")
        return [zero, cmp], cmp.results[0]
    if is_float(src) and is_float(dst):
        sw, dw = src.bitwidth, dst.bitwidth
        return _one(unary(arith.ExtFOp if sw < dw else arith.TruncFOp, x, dst))
    if is_float(src):
        return _one(unary(arith.FPToSIOp, x, dst))
    assert isinstance(src, IntegerType)
    if is_float(dst):
        return _one(unary(arith.UIToFPOp if is_bool(src) else arith.SIToFPOp, x, dst))
    sw, dw = src.width.data, dst.width.data
    if sw < dw:
        return _one(unary(arith.ExtUIOp if is_bool(src) else arith.ExtSIOp, x, dst))
    if sw > dw:
        return _one(unary(arith.TruncIOp, x, dst))
    return [], x


def _scalar_cast(op: flow.CastOp, a: Sequence[SSAValue]) -> Scalar:
    return cast_scalar(a[0], op.operand.type.element_type, op.result.type.element_type)


def check_element_type(ty: TensorType) -> str | None:
    """Why an element type cannot be lowered to arith (signed/unsigned ints), or None."""
    el = ty.element_type
    if isinstance(el, IntegerType) and el.signedness.data != Signedness.SIGNLESS:
        return f"expected signless integer elements (arith has no {el}), got {ty}"
    return None


SCALAR_RULES: dict[type[Operation], Callable[[Operation, Sequence[SSAValue]], Scalar]] = {
    **{c: _scalar_unary for c in _FLOAT_UNARY},
    **{c: _scalar_binary for c in _BINARY},
    flow.CompareOp: _scalar_compare,
    flow.SelectOp: _scalar_select,
    flow.CastOp: _scalar_cast,
}
"""The scalar computation of each elementwise flow op: (op, operand scalars) -> (ops, value)."""


def scalar_body(op: Operation, args: Sequence[SSAValue]) -> Scalar:
    """The arith/math ops computing one element of `op` from its operands' elements `args`."""
    return SCALAR_RULES[type(op)](op, args)


def _lower(op: Operation) -> Lowered:
    if isinstance(op, flow.CastOp) and op.operand.type.element_type == op.result.type.element_type:
        return [], op.operand
    return elementwise(op.operands, op.results[0].type, lambda a: scalar_body(op, a))


RULES: dict[type[Operation], Callable[[Operation], Lowered]] = dict.fromkeys(SCALAR_RULES, _lower)
