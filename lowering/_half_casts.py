"""Casts to and from bfloat16 as integer bit arithmetic, and f64 -> f16 with one rounding:
bit-exact with ml_dtypes / numpy on every target and every CPU.

Why not `arith.truncf` / `extf` for bf16: LLVM turns an int or f32 -> bf16 conversion into a
call of `__truncsfbf2` on CPUs without AVX-512 BF16, which IREE's embedded linker does not
resolve; IREE drops a `truncf` to bf16 that an `extf` reads in the same dispatch (nothing is
rounded); IREE's CPU runtime flushes subnormals (FTZ/DAZ), which float instructions on bf16's
f32-range subnormals then lose; and int32 / int64 / f64 go through f32 first, rounding twice.
Here every conversion to bf16 rounds the exact value to nearest even once, with the integer
ops of its source width; NaNs become ml_dtypes' quiet NaN with the input's sign (0x7fc0).
float16 keeps the hardware conversions (F16C, NEON: exact, untouched by FTZ/DAZ) except
f64 -> f16, which rounds to odd into f32 first so that f32 -> f16 rounds once, and
bf16 <-> f16, whose NaNs are ml_dtypes' quiet NaN with the input's sign.
"""

from __future__ import annotations

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IntegerAttr,
    IntegerType,
    f32,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue

from ._linalg_builders import build, constant, scalar_constant

i16, i32 = IntegerType(16), IntegerType(32)
BF16, F16 = BFloat16Type(), Float16Type()

# arith predicate numbers (arith.cmpi / arith.cmpf)
_EQ, _NE, _SLT, _UGT = 0, 1, 2, 8
_FOGT, _FOLT, _FONE = 2, 4, 6


class _Body:
    """The ops of one scalar computation, appended in order."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []
        self._constants: dict[tuple[int, Attribute], SSAValue] = {}

    def op(self, cls: type[Operation], *xs: SSAValue, ty: Attribute | None = None) -> SSAValue:
        o = build(cls, xs, (xs[0].type if ty is None else ty,))
        self.ops.append(o)
        return o.results[0]

    def c(self, value: int, ty: Attribute) -> SSAValue:
        """An integer constant, made once per body."""
        if (value, ty) not in self._constants:
            o = constant(IntegerAttr(value, ty))
            self.ops.append(o)
            self._constants[(value, ty)] = o.result
        return self._constants[(value, ty)]

    def cmpi(self, pred: int, x: SSAValue, y: SSAValue) -> SSAValue:
        o = build(arith.CmpiOp, (x, y), (i1,), {"predicate": IntegerAttr(pred, i64)})
        self.ops.append(o)
        return o.results[0]

    def cmpf(self, pred: int, x: SSAValue, y: SSAValue) -> SSAValue:
        o = build(arith.CmpfOp, (x, y), (i1,), {"predicate": IntegerAttr(pred, i64)})
        self.ops.append(o)
        return o.results[0]

    def select(self, p: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SelectOp, p, a, b, ty=a.type)

    def _v(self, k: SSAValue | int, ty: Attribute) -> SSAValue:
        return k if isinstance(k, SSAValue) else self.c(k, ty)

    def bin(self, cls: type[Operation], x: SSAValue, k: SSAValue | int) -> SSAValue:
        """`cls(x, k)`, an int `k` as a constant of x's type."""
        return self.op(cls, x, self._v(k, x.type))


def _bits_to_bf16(b: _Body, bits: SSAValue) -> SSAValue:
    """The bf16 whose bit pattern is the low 16 bits of the integer `bits`."""
    low = b.op(arith.TruncIOp, bits, ty=i16) if bits.type != i16 else bits
    return b.op(arith.BitcastOp, low, ty=BF16)


def _bf16_bits(b: _Body, x: SSAValue, ty: IntegerType) -> SSAValue:
    """The bit pattern of the bf16 `x`, zero-extended to `ty`."""
    return b.op(arith.ExtUIOp, b.op(arith.BitcastOp, x, ty=i16), ty=ty)


def _is_nan(b: _Body, bits: SSAValue, inf_bits: int) -> SSAValue:
    """Whether the float with bit pattern `bits` (infinity: `inf_bits`) is a NaN."""
    magnitude = b.bin(arith.AndIOp, bits, (1 << inf_bits.bit_length()) - 1)  # drop the sign
    return b.cmpi(_UGT, magnitude, b.c(inf_bits, bits.type))


def _bf16_bits_from_f32(b: _Body, x: SSAValue) -> SSAValue:
    """The bits (in an i32) of the f32 `x` rounded to nearest even bf16: add 0x7fff plus
    the kept lsb, keep the top half."""
    bits = b.op(arith.BitcastOp, x, ty=i32)
    hi = b.bin(arith.ShRUIOp, bits, 16)
    lsb = b.bin(arith.AndIOp, hi, 1)
    rounded = b.bin(arith.ShRUIOp, b.op(arith.AddiOp, b.bin(arith.AddiOp, bits, 0x7FFF), lsb), 16)
    nan = b.bin(arith.OrIOp, b.bin(arith.AndIOp, hi, 0x8000), 0x7FC0)
    return b.select(_is_nan(b, bits, 0x7F800000), nan, rounded)


def bf16_from_f32(b: _Body, x: SSAValue) -> SSAValue:
    return _bits_to_bf16(b, _bf16_bits_from_f32(b, x))


def f32_from_bf16(b: _Body, x: SSAValue, bits: SSAValue | None = None) -> SSAValue:
    """Exact: the bf16 bits (`bits`, if already in an i32) are the top half of the f32's
    (NaN payloads kept, like ml_dtypes)."""
    bits = _bf16_bits(b, x, i32) if bits is None else bits
    return b.op(arith.BitcastOp, b.bin(arith.ShLIOp, bits, 16), ty=f32)


def _f32_round_to_odd(b: _Body, x: SSAValue) -> SSAValue:
    """The f64 `x` in f32, rounded to odd (truncated, the last bit set if inexact): a second
    rounding to a format at least 2 bits narrower is then the correctly rounded one.
    NaNs pass through (a quiet NaN keeps its payload's top bits); f32 subnormal results may
    be flushed to zero (FTZ), callers handle that range themselves."""
    t = b.op(arith.TruncFOp, x, ty=f32)
    back = b.op(arith.ExtFOp, t, ty=f64)
    inexact = b.cmpf(_FONE, back, x)  # false for NaN
    over = b.cmpf(_FOGT, b.op(math.AbsFOp, back), b.op(math.AbsFOp, x))
    tb = b.op(arith.BitcastOp, t, ty=i32)
    toward_zero = b.op(arith.SubiOp, tb, b.op(arith.ExtUIOp, over, ty=i32))
    odd = b.select(inexact, b.bin(arith.OrIOp, toward_zero, 1), tb)
    return b.op(arith.BitcastOp, odd, ty=f32)


def _f64(b: _Body, value: float) -> SSAValue:
    """An f64 constant."""
    o = scalar_constant(value, f64)
    b.ops.append(o)
    return o.result


def bf16_from_f64(b: _Body, x: SSAValue) -> SSAValue:
    """Round the f64 `x` to nearest even bf16 in one step: to odd into f32 then to bf16, and
    below 2**-126 (bf16 subnormals, whose f32 FTZ would flush) on bf16's grid of 2**-133.
    No f64 bit casts, so that IREE's f64 -> f32 demotion (vulkan) keeps the IR valid."""
    normal = _bf16_bits_from_f32(b, _f32_round_to_odd(b, x))
    ax = b.op(math.AbsFOp, x)
    negative = b.cmpf(_FOLT, b.op(math.CopySignOp, _f64(b, 1.0), x), _f64(b, 0.0))
    sign = b.select(negative, b.c(0x8000, i32), b.c(0, i32))
    grid = b.op(math.RoundEvenOp, b.op(arith.MulfOp, ax, _f64(b, 2.0**133)))
    subnormal = b.op(arith.OrIOp, b.op(arith.FPToSIOp, grid, ty=i32), sign)
    small = b.cmpf(_FOLT, ax, _f64(b, 2.0**-126))  # false for NaN
    return _bits_to_bf16(b, b.select(small, subnormal, normal))


def _leading_zeros(b: _Body, x: SSAValue) -> SSAValue:
    """`math.ctlz`, for an i64 from its two 32-bit halves (SPIR-V has no 64-bit ctlz)."""
    if x.type != i64:
        return b.op(math.CountLeadingZerosOp, x)
    hi = b.op(arith.TruncIOp, b.bin(arith.ShRUIOp, x, 32), ty=i32)
    lo = b.op(arith.TruncIOp, x, ty=i32)
    lz_hi = b.op(arith.ExtUIOp, b.op(math.CountLeadingZerosOp, hi), ty=i64)
    lz_lo = b.bin(arith.AddiOp, b.op(arith.ExtUIOp, b.op(math.CountLeadingZerosOp, lo), ty=i64), 32)
    return b.select(b.cmpi(_EQ, hi, b.c(0, i32)), lz_lo, lz_hi)


def bf16_from_int(b: _Body, x: SSAValue, unsigned: bool) -> SSAValue:
    """Round the integer `x` (an i1 is 0/1) to nearest even bf16 in one step, from its
    magnitude shifted so that its leading one is the top bit (32-bit arithmetic up to int32,
    64-bit for int64); a carry out of the mantissa correctly bumps the exponent."""
    src = x.type
    assert isinstance(src, IntegerType)
    ty = i64 if src.width.data > 32 else i32
    width = ty.width.data
    if src != ty:
        x = b.op(arith.ExtUIOp if unsigned else arith.ExtSIOp, x, ty=ty)
    zero = b.c(0, ty)
    neg = b.cmpi(_SLT, x, zero)
    mag = b.select(neg, b.op(arith.SubiOp, zero, x), x)  # INT_MIN: 2**(W-1), unsigned
    lz = _leading_zeros(b, mag)
    norm = b.op(arith.ShLIOp, mag, b.bin(arith.MinSIOp, lz, width - 1))
    dropped = width - 8  # the implicit one and 7 mantissa bits are kept
    q = b.bin(arith.ShRUIOp, norm, dropped)
    rest = b.bin(arith.AndIOp, norm, (1 << dropped) - 1)
    half = b.c(1 << (dropped - 1), ty)
    odd = b.cmpi(_NE, b.bin(arith.AndIOp, q, 1), zero)
    tie_odd = b.op(arith.AndIOp, b.cmpi(_EQ, rest, half), odd)
    up = b.op(arith.ExtUIOp, b.op(arith.OrIOp, b.cmpi(_UGT, rest, half), tie_odd), ty=ty)
    exp_minus_1 = b.op(arith.SubiOp, b.c(width - 1 + 127 - 1, ty), lz)
    res = b.op(arith.AddiOp, b.op(arith.AddiOp, b.bin(arith.ShLIOp, exp_minus_1, 7), q), up)
    res = b.op(arith.OrIOp, res, b.select(neg, b.c(0x8000, ty), zero))
    return _bits_to_bf16(b, b.select(b.cmpi(_EQ, mag, zero), zero, res))


def f64_from_bf16(b: _Body, x: SSAValue) -> SSAValue:
    """Exact: through f32, except subnormals (an f32 -> f64 instruction would flush them
    under DAZ), which are their 7-bit mantissa times 2**-133."""
    h = _bf16_bits(b, x, i32)
    wide = b.op(arith.ExtFOp, f32_from_bf16(b, x, h), ty=f64)
    m7 = b.op(arith.SIToFPOp, b.bin(arith.AndIOp, h, 0x7F), ty=f64)
    tiny = b.op(math.CopySignOp, b.op(arith.MulfOp, m7, _f64(b, 2.0**-133)), wide)
    exp0 = b.cmpi(_EQ, b.bin(arith.AndIOp, h, 0x7F80), b.c(0, i32))
    return b.select(exp0, tiny, wide)


def f16_from_bf16(b: _Body, x: SSAValue) -> SSAValue:
    """bf16 -> f32 exactly, then the hardware f32 -> f16; NaNs become 0x7e00 with their sign."""
    h = _bf16_bits(b, x, i32)
    t = b.op(arith.BitcastOp, b.op(arith.TruncFOp, f32_from_bf16(b, x, h), ty=F16), ty=i16)
    nan = b.op(arith.TruncIOp, b.bin(arith.OrIOp, b.bin(arith.AndIOp, h, 0x8000), 0x7E00), ty=i16)
    return b.op(arith.BitcastOp, b.select(_is_nan(b, h, 0x7F80), nan, t), ty=F16)


def f16_from_f64(b: _Body, x: SSAValue) -> SSAValue:
    """To odd into f32, then the hardware f32 -> f16: one correct rounding (f32 has 13 more
    bits; results below f32's normal range are far below f16's smallest subnormal)."""
    return b.op(arith.TruncFOp, _f32_round_to_odd(b, x), ty=F16)


def is_special(src: Attribute, dst: Attribute) -> bool:
    """Whether `half_cast` converts src -> dst (bf16 on either side, or f64 -> f16)."""
    return (src != dst and (src == BF16 or dst == BF16)) or (src == f64 and dst == F16)


def half_cast(x: SSAValue, src: Attribute, dst: Attribute) -> tuple[list[Operation], SSAValue]:
    """The ops converting the scalar `x` from `src` to `dst` (see `is_special`)."""
    b = _Body()
    if dst == BF16:
        if src == f32:
            y = bf16_from_f32(b, x)
        elif src == f64:
            y = bf16_from_f64(b, x)
        elif src == F16:
            y = bf16_from_f32(b, b.op(arith.ExtFOp, x, ty=f32))
        else:
            assert isinstance(src, IntegerType), src
            y = bf16_from_int(b, x, unsigned=src.width.data == 1)
    elif src == BF16:
        if dst == f32:
            y = f32_from_bf16(b, x)
        elif dst == f64:
            y = f64_from_bf16(b, x)
        elif dst == F16:
            y = f16_from_bf16(b, x)
        elif dst == i1:  # x != 0 on the bits: a float compare would flush subnormals to 0
            magnitude = b.bin(arith.AndIOp, _bf16_bits(b, x, i32), 0x7FFF)
            y = b.cmpi(_NE, magnitude, b.c(0, i32))
        else:  # toward zero, like numpy; the f32 is exact
            y = b.op(arith.FPToSIOp, f32_from_bf16(b, x), ty=dst)
    else:
        assert src == f64 and dst == F16, (src, dst)
        y = f16_from_f64(b, x)
    return b.ops, y
