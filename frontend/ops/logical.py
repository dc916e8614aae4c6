"""Predicates and logic: NaN / infinity tests, logical and bitwise ops (PyTorch semantics),
composites of compare and the bitwise primitives."""

from __future__ import annotations

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import abs as _abs
from flow.ops.basic import as_tensor, eq, full, lt, ne, promote, to
from flow.primitives.registry import bind


def isnan(input) -> Tensor:
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        return full(x.shape, False, _dtypes.bool_)
    return ne(x, x)


def isinf(input) -> Tensor:
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        return full(x.shape, False, _dtypes.bool_)
    return eq(_abs(x), float("inf"))


def isfinite(input) -> Tensor:
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        return full(x.shape, True, _dtypes.bool_)
    return lt(_abs(x), float("inf"))


def _bool(x) -> Tensor:
    return to(as_tensor(x), _dtypes.bool_)


def logical_and(input, other) -> Tensor:
    a, b = promote("logical_and", _bool(input), _bool(other))
    return bind(P.and_, a, b)


def logical_or(input, other) -> Tensor:
    a, b = promote("logical_or", _bool(input), _bool(other))
    return bind(P.or_, a, b)


def logical_xor(input, other) -> Tensor:
    a, b = promote("logical_xor", _bool(input), _bool(other))
    return bind(P.xor, a, b)


def logical_not(input) -> Tensor:
    x = _bool(input)
    return bind(P.xor, x, full(x.shape, True, _dtypes.bool_))


def _bitwise(name: str, prim):
    def fn(input, other) -> Tensor:
        a, b = promote(name, input, other)
        if a.dtype.is_floating_point:
            raise op_error(
                name, f"expected integer or bool tensors, got {a.dtype!r}", cls=TypeError
            )
        return bind(prim, a, b)

    fn.__name__ = name
    return fn


bitwise_and = _bitwise("bitwise_and", P.and_)

bitwise_or = _bitwise("bitwise_or", P.or_)

bitwise_xor = _bitwise("bitwise_xor", P.xor)


def bitwise_not(input) -> Tensor:
    x = as_tensor(input)
    if x.dtype.is_floating_point:
        raise op_error("bitwise_not", f"expected an integer or bool tensor, got {x.dtype!r}",
                       cls=TypeError)  # fmt: skip
    ones = full(x.shape, True if x.dtype is _dtypes.bool_ else -1, x.dtype)
    return bind(P.xor, x, ones)


TENSOR_METHODS: dict = {
    **{name: globals()[name] for name in (
        "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_xor", "logical_not",
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    )},
    "__and__": bitwise_and,
    "__rand__": lambda self, other: bitwise_and(other, self),
    "__or__": bitwise_or,
    "__ror__": lambda self, other: bitwise_or(other, self),
    "__xor__": bitwise_xor,
    "__rxor__": lambda self, other: bitwise_xor(other, self),
    "__invert__": bitwise_not,
}  # fmt: skip
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = [
    "isnan", "isinf", "isfinite", "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
]  # fmt: skip
