"""Reductions beyond sum / mean / max: statistics, `all` / `any`, norms, index reductions
(argmax, max with a dim), sorting, top-k and scans — composites of primitives (PyTorch
semantics).

Sorting and scans are written as O(n²) compare/select/reduce compositions along the sorted
dim, which lower to fusable `linalg.generic`s and give eager and compiled code the same
(stable) results; they suit the moderate dims of model code (top-k over classes,
cumulative sums over sequence positions).
"""

from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.args import dims_arg
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import abs as _abs
from flow.ops.basic import (
    amax,
    amin,
    as_tensor,
    broadcast_to,
    div,
    eq,
    full,
    gt,
    log,
    lt,
    mean,
    mul,
    ne,
    normalize_dim,
    permute,
    reshape,
    sub,
    to,
    unsqueeze,
    where,
)
from flow.ops.basic import exp as _exp
from flow.ops.basic import sum as _sum
from flow.ops.logical import _bool, isfinite, isnan, logical_not
from flow.primitives.registry import bind

# --------------------------------------------------------------------------- statistics


def _reduced_count(x: Tensor, dim) -> int:
    n = 1
    for d in dims_arg("var", dim, x.ndim):
        n *= x.shape[d]
    return n


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance with Bessel's correction by default (`correction=1`, or `unbiased=False` → 0)."""
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        raise op_error("var", f"expected a floating-point input, got {x.dtype!r}", cls=TypeError)
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    n = _reduced_count(x, dim)
    centered = sub(x, mean(x, dim, keepdim=True))
    sq = _sum(mul(centered, centered), dim, keepdim)
    return div(sq, builtins.max(n - correction, 0))


def std(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    return bind(P.sqrt, var(input, dim, unbiased, keepdim, correction=correction))


def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def logsumexp(input, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) computed stably by factoring out the max (±inf rows handled)."""
    x = as_tensor(input)
    dims_arg("logsumexp", dim, x.ndim)
    if not x.dtype.is_floating_point:
        x = to(x, _dtypes.DEFAULT_FLOAT)
    m = amax(x, dim, keepdim=True).detach()  # the result does not depend on it (no gradient)
    m = where(isfinite(m), m, 0.0)
    out = log(_sum(_exp(sub(x, m)), dim, keepdim=True)) + m
    if not keepdim:
        dims = set(dims_arg("logsumexp", dim, x.ndim))
        out = reshape(out, *(s for i, s in enumerate(out.shape) if i not in dims))
    return out


def all(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    x = _bool(input)
    dims_arg("all", dim, x.ndim)  # named as called (amin/amax check it too)
    return eq(amin(to(x, _dtypes.int8), dim, keepdim), 1)


def any(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    x = _bool(input)
    dims_arg("any", dim, x.ndim)  # named as called (amin/amax check it too)
    return eq(amax(to(x, _dtypes.int8), dim, keepdim), 1)


def count_nonzero(input, dim=None) -> Tensor:
    return _sum(to(ne(as_tensor(input), 0), _dtypes.int64), dim)


def norm(input, p=2, dim=None, keepdim: bool = False) -> Tensor:
    """Vector p-norm (p = 1, 2, inf, -inf, or any positive number) over `dim`."""
    x = _abs(as_tensor(input))
    dims_arg("norm", dim, x.ndim)
    if not x.dtype.is_floating_point:
        x = to(x, _dtypes.DEFAULT_FLOAT)
    if p == float("inf"):
        return amax(x, dim, keepdim)
    if p == float("-inf"):
        return amin(x, dim, keepdim)
    if p == 1:
        return _sum(x, dim, keepdim)
    if p == 2:
        return bind(P.sqrt, _sum(mul(x, x), dim, keepdim))
    if not isinstance(p, (int, float)) or p <= 0:
        raise op_error("norm", f"expected p to be a positive number or ±inf, got {p!r}")
    return bind(P.pow_, _sum(bind(P.pow_, x, full(x.shape, p, x.dtype)), dim, keepdim),
                full(_sum(x, dim, keepdim).shape, 1.0 / p, x.dtype))  # fmt: skip


# --------------------------------------------------------------------------- index reductions

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])
"""What max/min/sort/topk with a dim return (like torch.return_types)."""


def _positions(x: Tensor, dim: int) -> Tensor:
    return bind(P.iota, dim=dim, shape=tuple(x.shape), dtype=_dtypes.int64)


def _arg_extreme(op: str, x: Tensor, dim, keepdim: bool, largest: bool) -> Tensor:
    x = as_tensor(x)
    if x.dtype is _dtypes.bool_:
        x = to(x, _dtypes.int8)
    if dim is None:
        x, dim = reshape(x, -1), 0
    d = normalize_dim(op, dim, x.ndim)
    if x.ndim and x.shape[d] == 0:
        raise op_error(op, f"cannot take the {op} of an empty dim {dim} (shape {list(x.shape)})")
    best = (amax if largest else amin)(x, d, keepdim=True)
    hit = eq(x, best)
    if x.dtype.is_floating_point:  # NaN wins, like max/min propagate it
        hit = bind(P.or_, hit, isnan(x))
    pos = _positions(x, d) if x.ndim else full((), 0, _dtypes.int64)
    big = x.shape[d] if x.ndim else 1
    return amin(where(hit, pos, big), d if x.ndim else None, keepdim)


def argmax(input, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum along `dim` (of the flattened tensor when dim is None)."""
    return _arg_extreme("argmax", input, dim, keepdim, largest=True)


def argmin(input, dim=None, keepdim: bool = False) -> Tensor:
    return _arg_extreme("argmin", input, dim, keepdim, largest=False)


def max_dim(input, dim: int, keepdim: bool = False) -> ValuesIndices:
    """`max(input, dim)`: the maxima along `dim` and their (first) indices."""
    normalize_dim("max", dim, as_tensor(input).ndim)  # named as called
    return ValuesIndices(amax(input, dim, keepdim), argmax(input, dim, keepdim))


def min_dim(input, dim: int, keepdim: bool = False) -> ValuesIndices:
    normalize_dim("min", dim, as_tensor(input).ndim)
    return ValuesIndices(amin(input, dim, keepdim), argmin(input, dim, keepdim))


# --------------------------------------------------------------------------- sort / top-k / scans


def _last(x: Tensor, d: int) -> Tensor:
    """Move dim `d` to the end."""
    if d == x.ndim - 1:
        return x
    return permute(x, *[i for i in range(x.ndim) if i != d], d)


def _unlast(x: Tensor, d: int) -> Tensor:
    """Inverse of `_last`."""
    if d == x.ndim - 1:
        return x
    perm = list(range(x.ndim - 1))
    perm.insert(d, x.ndim - 1)
    return permute(x, *perm)


def _sort_last(x: Tensor, descending: bool, k: int) -> ValuesIndices:
    """The first `k` entries of the stable sort of `x` along its last dim."""
    n = x.shape[-1]
    a = unsqueeze(x, -1)  # [..., n, 1]: element i
    b = unsqueeze(x, -2)  # [..., 1, n]: element j
    shape = (*x.shape, n)
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    ahead = (gt if descending else lt)(b, a)  # j sorts strictly before i
    tie = eq(b, a)
    if x.dtype.is_floating_point:  # NaN sorts as the largest value
        nan_a, nan_b = isnan(a), isnan(b)
        first, second = (nan_b, nan_a) if descending else (nan_a, nan_b)
        ahead = bind(P.or_, ahead, bind(P.and_, first, logical_not(second)))
        tie = bind(P.or_, tie, bind(P.and_, nan_a, nan_b))
    i = bind(P.iota, dim=len(shape) - 2, shape=shape, dtype=_dtypes.int64)
    j = bind(P.iota, dim=len(shape) - 1, shape=shape, dtype=_dtypes.int64)
    before = bind(P.or_, ahead, bind(P.and_, tie, lt(j, i)))
    rank = _sum(to(before, _dtypes.int64), -1)  # [..., n]: final position of element i
    out_shape = (*x.shape[:-1], k, n)
    slot = bind(P.iota, dim=len(out_shape) - 2, shape=out_shape, dtype=_dtypes.int64)
    mine = eq(broadcast_to(unsqueeze(rank, -2), out_shape), slot)  # [..., k, n]
    xv = broadcast_to(unsqueeze(x, -2), out_shape)
    zero = full(out_shape, 0, x.dtype)
    values = _sum(where(mine, xv, zero), -1, dtype=x.dtype)
    pos = bind(P.iota, dim=len(out_shape) - 1, shape=out_shape, dtype=_dtypes.int64)
    indices = _sum(where(mine, pos, 0), -1)
    return ValuesIndices(values, indices)


def sort(input, dim: int = -1, descending: bool = False, stable: bool = True) -> ValuesIndices:
    """Sorted values and their original indices along `dim` (stable; NaN sorts last)."""
    x = as_tensor(input)
    if x.ndim == 0:
        return ValuesIndices(x, full((), 0, _dtypes.int64))
    d = normalize_dim("sort", dim, x.ndim)
    v, i = _sort_last(_last(x, d), descending, x.shape[d])
    return ValuesIndices(_unlast(v, d), _unlast(i, d))


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    return sort(input, dim, descending).indices


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The `k` largest (or smallest) entries along `dim`, in sorted order, with indices."""
    x = as_tensor(input)
    d = normalize_dim("topk", dim, x.ndim)
    size = x.shape[d] if x.ndim else 1
    if not isinstance(k, (int, np.integer)) or not 0 <= k <= size:
        raise op_error("topk", f"k ({k}) is out of range for dim {dim} of size {size}",
                       cls=IndexError if isinstance(k, (int, np.integer)) else TypeError)  # fmt: skip
    if x.ndim == 0:
        return ValuesIndices(x, full((), 0, _dtypes.int64))
    v, i = _sort_last(_last(x, d), largest, int(k))
    return ValuesIndices(_unlast(v, d), _unlast(i, d))


def _scan(op: str, input, dim: int, dtype, prim_kind: str) -> Tensor:
    x = as_tensor(input)
    if dtype is not None:
        x = to(x, dtype)
    elif not x.dtype.is_floating_point:
        x = to(x, _dtypes.int64)
    if x.ndim == 0:
        return x
    d = normalize_dim(op, dim, x.ndim)
    last = _last(x, d)
    n = last.shape[-1]
    shape = (*last.shape, n)  # [..., i, j]: element j contributes to output i when j <= i
    i = bind(P.iota, dim=len(shape) - 2, shape=shape, dtype=_dtypes.int64)
    j = bind(P.iota, dim=len(shape) - 1, shape=shape, dtype=_dtypes.int64)
    xs = broadcast_to(unsqueeze(last, -2), shape)
    neutral = full(shape, 0 if prim_kind == "sum" else 1, x.dtype)
    terms = where(bind(P.compare, j, i, direction="le"), xs, neutral)
    out = bind(P.reduce, terms, kind=prim_kind, dims=(len(shape) - 1,))
    return _unlast(out, d)


def cumsum(input, dim: int, *, dtype=None) -> Tensor:
    """Cumulative sum along `dim` (integers accumulate in int64, like PyTorch)."""
    return _scan("cumsum", input, dim, dtype, "sum")


def cumprod(input, dim: int, *, dtype=None) -> Tensor:
    return _scan("cumprod", input, dim, dtype, "prod")


TENSOR_METHODS: dict = {name: globals()[name] for name in (
    "var", "std", "logsumexp", "all", "any", "count_nonzero", "norm", "argmax", "argmin",
    "sort", "argsort", "topk", "cumsum", "cumprod",
)}  # fmt: skip
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = [
    "var", "std", "var_mean", "std_mean", "logsumexp", "all", "any", "count_nonzero", "norm",
    "argmax", "argmin", "sort", "argsort", "topk", "cumsum", "cumprod",
]  # fmt: skip
