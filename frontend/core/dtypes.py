"""flow dtypes: one table tying each dtype to its numpy dtype and its MLIR element type."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from xdsl.ir import Attribute


@dataclass(frozen=True, eq=False)
class dtype:  # noqa: N801  (named like torch.dtype / oneflow.dtype)
    """A tensor element type, e.g. `flow.float32`.

    Its numpy dtype and MLIR element type are made on first use: bfloat16's numpy dtype comes
    from ml_dtypes and the MLIR types from xDSL, and `import flow` loads neither."""

    name: str
    ir_name: str  # the MLIR element type: i1, i8, ..., f16, bf16, f32, f64
    kind: int  # 0 bool, 1 integer, 2 floating point: the promotion category

    @functools.cached_property
    def np_dtype(self) -> np.dtype:
        if self.name == "bfloat16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        return np.dtype(self.name)

    @functools.cached_property
    def ir_type(self) -> Attribute:
        from xdsl.dialects import builtin

        if self.ir_name.startswith("i"):
            return builtin.IntegerType(int(self.ir_name[1:]))
        return {"f16": builtin.Float16Type, "bf16": builtin.BFloat16Type,
                "f32": builtin.Float32Type, "f64": builtin.Float64Type}[self.ir_name]()  # fmt: skip

    @property
    def is_floating_point(self) -> bool:
        return self.kind == 2

    @property
    def itemsize(self) -> int:
        return self.np_dtype.itemsize

    def __repr__(self) -> str:
        return f"flow.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


def astype(x: np.ndarray, dt: dtype) -> np.ndarray:
    """`x` converted to `dt`'s numpy dtype, as compiled code converts: to bfloat16 from
    float64 and from integers wider than 16 bits with one rounding (to nearest, ties to
    even). ml_dtypes before 0.7 rounds those through float32, so twice."""
    x = np.asarray(x)
    if dt is not bfloat16 or x.dtype.kind not in "fiu" or x.dtype.itemsize < 4 or (
            x.dtype.kind == "f" and x.dtype.itemsize == 4):  # fmt: skip
        return x.astype(dt.np_dtype)
    wide = _f64_to_odd(x) if x.dtype.kind in "iu" and x.dtype.itemsize == 8 else x
    with np.errstate(over="ignore"):
        return _f32_to_odd(wide.astype(np.float64)).astype(dt.np_dtype)


def _odd(rounded: np.ndarray, err: np.ndarray, bits: str) -> np.ndarray:
    """Round-to-odd from a round-to-nearest result and the sign of its error (exact - it):
    where inexact, the one of `rounded` and its neighbour toward the exact value whose last
    significand bit is 1. Rounding to odd first, then to nearest with at least two fewer
    bits, rounds as once to nearest."""
    u = rounded.view(bits).copy()
    inexact = err != 0
    toward = np.nextafter(rounded, np.where(err > 0, np.inf, -np.inf).astype(rounded.dtype))
    toward = toward.view(bits)
    u[inexact & (u % 2 == 0)] = toward[inexact & (u % 2 == 0)]
    return u.view(rounded.dtype)


def _f32_to_odd(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)
        err = np.where(np.isnan(x) | (x == y), 0.0, np.sign(x - y.astype(np.float64)))
    return _odd(y, err, "u4")  # (an overflow to inf has the error toward the largest float)


def _f64_to_odd(x: np.ndarray) -> np.ndarray:
    """64-bit integers to float64, rounded to odd: `x = hi * 2**32 + lo` exactly, both parts
    exact in float64, and the sum's rounding error is exact (two-sum)."""
    hi = (x >> 32).astype(np.float64) * 2.0**32
    lo = (x & 0xFFFFFFFF).astype(np.float64)
    s = hi + lo
    b = s - hi
    err = (hi - (s - b)) + (lo - b)
    return _odd(s, err, "u8")


bool_ = dtype("bool", "i1", 0)
int8 = dtype("int8", "i8", 1)
int32 = dtype("int32", "i32", 1)
int64 = dtype("int64", "i64", 1)
float16 = dtype("float16", "f16", 2)
bfloat16 = dtype("bfloat16", "bf16", 2)
float32 = dtype("float32", "f32", 2)
float64 = dtype("float64", "f64", 2)

ALL_DTYPES = (bool_, int8, int32, int64, float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL_DTYPES} | {
    "float": float32, "double": float64, "half": float16, "int": int32, "long": int64,
}  # fmt: skip
_BY_NP_NAME = {d.name: d for d in ALL_DTYPES}  # by `np.dtype(x).name` (ml_dtypes says "bfloat16")
_BY_NP_DTYPE: dict[np.dtype, dtype] = {}  # the numpy dtypes seen so far

DEFAULT_FLOAT = float32
DEFAULT_INT = int64


def as_dtype(x) -> dtype:
    """Accept a flow dtype, a name, a numpy dtype or a Python type."""
    if isinstance(x, dtype):
        return x
    found = _BY_NP_DTYPE.get(x) if isinstance(x, np.dtype) else None
    if found is not None:
        return found
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is float:
        return DEFAULT_FLOAT
    if x is int:
        return DEFAULT_INT
    if x is bool:
        return bool_
    try:
        np_dtype = np.dtype(x)
        found = _BY_NP_NAME.get(np_dtype.name)  # `.name` costs 2 us: cached by dtype below
    except TypeError:
        found = None
    if found is None:
        known = ", ".join(d.name for d in ALL_DTYPES)
        raise TypeError(f"unsupported dtype {x!r}; expected one of: {known}")
    _BY_NP_DTYPE[np_dtype] = found
    return found


@functools.cache
def _by_ir() -> dict:
    return {d.ir_type: d for d in ALL_DTYPES}


def from_ir(ty: Attribute) -> dtype:
    return _by_ir()[ty]


def promote_types(a: dtype, b: dtype) -> dtype:
    """PyTorch's promotion of two tensor dtypes: higher category wins, then wider type."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if a.kind > b.kind else b
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if a.itemsize >= b.itemsize else b


def scalar_kind(v) -> int:
    if isinstance(v, (bool, np.bool_)):
        return 0
    if isinstance(v, (int, np.integer)):
        return 1
    return 2


def promote_with_scalar(t: dtype, v) -> dtype:
    """A Python scalar joins a tensor's dtype unless it is of a higher category."""
    k = scalar_kind(v)
    if k <= t.kind:
        return t
    return DEFAULT_FLOAT if k == 2 else DEFAULT_INT
