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

DEFAULT_FLOAT = float32
DEFAULT_INT = int64


def as_dtype(x) -> dtype:
    """Accept a flow dtype, a name, a numpy dtype or a Python type."""
    if isinstance(x, dtype):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is float:
        return DEFAULT_FLOAT
    if x is int:
        return DEFAULT_INT
    if x is bool:
        return bool_
    try:
        found = _BY_NP_NAME.get(np.dtype(x).name)
    except TypeError:
        found = None
    if found is None:
        known = ", ".join(d.name for d in ALL_DTYPES)
        raise TypeError(f"unsupported dtype {x!r}; expected one of: {known}")
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
