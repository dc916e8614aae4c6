"""The math library beyond the core: elementwise math, statistics, index reductions,
sorting, scans and contractions — all composites of primitives (PyTorch semantics).

Sorting and scans are written as O(n²) compare/select/reduce compositions along
the sorted dim, which lower to fusable `linalg.generic`s and give eager and
compiled code the same (stable) results; they suit the moderate dims of
model code (top-k over classes, cumulative sums over sequence positions).
"""

from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from flow.core import dtypes as _dtypes
from flow import primitives as P
from flow.ops.basic import (
    _as_tensor,
    _promote,
    amax,
    amin,
    broadcast_to,
    div,
    eq,
    full,
    gt,
    log,
    lt,
    matmul,
    maximum,
    mean,
    minimum,
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
from flow.core.args import dims_arg
from flow.ops.basic import abs as _abs
from flow.ops.basic import exp as _exp
from flow.ops.basic import sum as _sum
from flow.primitives.registry import bind
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.core.trace import current_trace

# --------------------------------------------------------------------------- elementwise


# IREE's CPU backend links no libm: these have f32 approximations but no f64 kernels.
_NO_F64_KERNEL = {"sin", "cos", "tan", "asin", "acos", "atan", "atan2", "erf", "rem"}


def _check_f64(op: str, prim, x: Tensor) -> None:
    """Refuse, inside flow.jit, an f64 op that compiled code could only do in f32."""
    if x.dtype is _dtypes.float64 and prim.name in _NO_F64_KERNEL and current_trace():
        raise op_error(op, "float64 is not supported in compiled code (the cpu backend has no "
                           "f64 kernel for it); use float32, or call it outside flow.jit",
                       cls=NotImplementedError)  # fmt: skip


def _float_unary(prim):
    def fn(input) -> Tensor:
        x = _as_tensor(input)
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
        x = _as_tensor(input)
        return bind(prim, x) if x.dtype.is_floating_point else x  # integers are already whole

    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name}; integer tensors are returned unchanged."
    return fn


floor, ceil, trunc = _rounding(P.floor), _rounding(P.ceil), _rounding(P.trunc)
fix = trunc


def round(input, decimals: int = 0) -> Tensor:  # noqa: A001
    """Round half to even (like torch.round), optionally to `decimals` decimal places."""
    x = _as_tensor(input)
    if not x.dtype.is_floating_point:
        return x
    if decimals == 0:
        return bind(P.round_, x)
    scale = 10.0**decimals
    return div(bind(P.round_, mul(x, scale)), scale)


def atan2(input, other) -> Tensor:
    a, b = _promote("atan2", input, other, float_result=True)
    _check_f64("atan2", P.atan2, a)
    return bind(P.atan2, a, b)


arctan2 = atan2


def fmod(input, other) -> Tensor:
    """Remainder with the sign of the dividend (C fmod)."""
    a, b = _promote("fmod", input, other)
    _no_bool("fmod", a)
    _check_f64("fmod", P.rem, a)
    return bind(P.rem, a, b)


def remainder(input, other) -> Tensor:
    """Python-style modulus: the result has the sign of the divisor."""
    a, b = _promote("remainder", input, other)
    _no_bool("remainder", a)
    _check_f64("remainder", P.rem, a)
    r = bind(P.rem, a, b)
    zero = full(r.shape, 0, r.dtype)
    fix_sign = bind(P.and_, ne(r, zero), ne(lt(r, zero), lt(b, zero)))
    return where(fix_sign, r + b, r)


def floor_divide(input, other) -> Tensor:
    """Division rounded toward negative infinity (torch.floor_divide)."""
    a, b = _promote("floor_divide", input, other)
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
    x = _as_tensor(input)
    return mul(x, x)


def sign(input) -> Tensor:
    """-1, 0 or 1 by sign (NaN stays NaN); bool tensors are returned unchanged."""
    x = _as_tensor(input)
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
    x = _as_tensor(input)
    if not x.dtype.is_floating_point:
        x = to(x, _dtypes.DEFAULT_FLOAT)
    return mul(bind(P.tanh, mul(x, 0.5)) + 1, 0.5)


def clamp(input, min=None, max=None) -> Tensor:  # noqa: A002
    """Limit to [min, max] (tensors or numbers; NaN stays NaN)."""
    if min is None and max is None:
        raise op_error("clamp", "at least one of 'min' or 'max' must not be None")
    x = _as_tensor(input)
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


def isnan(input) -> Tensor:
    x = _as_tensor(input)
    if not x.dtype.is_floating_point:
        return full(x.shape, False, _dtypes.bool_)
    return ne(x, x)


def isinf(input) -> Tensor:
    x = _as_tensor(input)
    if not x.dtype.is_floating_point:
        return full(x.shape, False, _dtypes.bool_)
    return eq(_abs(x), float("inf"))


def isfinite(input) -> Tensor:
    x = _as_tensor(input)
    if not x.dtype.is_floating_point:
        return full(x.shape, True, _dtypes.bool_)
    return lt(_abs(x), float("inf"))


def _bool(x) -> Tensor:
    return to(_as_tensor(x), _dtypes.bool_)


def logical_and(input, other) -> Tensor:
    a, b = _promote("logical_and", _bool(input), _bool(other))
    return bind(P.and_, a, b)


def logical_or(input, other) -> Tensor:
    a, b = _promote("logical_or", _bool(input), _bool(other))
    return bind(P.or_, a, b)


def logical_xor(input, other) -> Tensor:
    a, b = _promote("logical_xor", _bool(input), _bool(other))
    return bind(P.xor, a, b)


def logical_not(input) -> Tensor:
    x = _bool(input)
    return bind(P.xor, x, full(x.shape, True, _dtypes.bool_))


def _bitwise(name: str, prim):
    def fn(input, other) -> Tensor:
        a, b = _promote(name, input, other)
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
    x = _as_tensor(input)
    if x.dtype.is_floating_point:
        raise op_error("bitwise_not", f"expected an integer or bool tensor, got {x.dtype!r}",
                       cls=TypeError)  # fmt: skip
    ones = full(x.shape, True if x.dtype is _dtypes.bool_ else -1, x.dtype)
    return bind(P.xor, x, ones)


# --------------------------------------------------------------------------- statistics


def _reduced_count(x: Tensor, dim) -> int:
    n = 1
    for d in dims_arg("var", dim, x.ndim):
        n *= x.shape[d]
    return n


def var(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance with Bessel's correction by default (`correction=1`, or `unbiased=False` → 0)."""
    x = _as_tensor(input)
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
    x = _as_tensor(input)
    dims_arg("logsumexp", dim, x.ndim)
    if not x.dtype.is_floating_point:
        x = to(x, _dtypes.DEFAULT_FLOAT)
    m = amax(x, dim, keepdim=True)
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
    return _sum(to(ne(_as_tensor(input), 0), _dtypes.int64), dim)


def norm(input, p=2, dim=None, keepdim: bool = False) -> Tensor:
    """Vector p-norm (p = 1, 2, inf, -inf, or any positive number) over `dim`."""
    x = _abs(_as_tensor(input))
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
    x = _as_tensor(x)
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
    normalize_dim("max", dim, _as_tensor(input).ndim)  # named as called
    return ValuesIndices(amax(input, dim, keepdim), argmax(input, dim, keepdim))


def min_dim(input, dim: int, keepdim: bool = False) -> ValuesIndices:
    normalize_dim("min", dim, _as_tensor(input).ndim)
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
    x = _as_tensor(input)
    if x.ndim == 0:
        return ValuesIndices(x, full((), 0, _dtypes.int64))
    d = normalize_dim("sort", dim, x.ndim)
    v, i = _sort_last(_last(x, d), descending, x.shape[d])
    return ValuesIndices(_unlast(v, d), _unlast(i, d))


def argsort(input, dim: int = -1, descending: bool = False, stable: bool = True) -> Tensor:
    return sort(input, dim, descending).indices


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The `k` largest (or smallest) entries along `dim`, in sorted order, with indices."""
    x = _as_tensor(input)
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
    x = _as_tensor(input)
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


# --------------------------------------------------------------------------- contractions


def bmm(input, mat2) -> Tensor:
    a, b = _as_tensor(input), _as_tensor(mat2)
    if a.ndim != 3 or b.ndim != 3:
        raise op_error(
            "bmm", f"expected 3-D tensors, got shapes {list(a.shape)} and {list(b.shape)}"
        )
    if a.shape[0] != b.shape[0]:
        raise op_error("bmm", f"batch sizes differ: {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


def mv(input, vec) -> Tensor:
    a, v = _as_tensor(input), _as_tensor(vec)
    if a.ndim != 2 or v.ndim != 1:
        raise op_error("mv", f"expected a matrix and a vector, got shapes {list(a.shape)} and "
                             f"{list(v.shape)}")  # fmt: skip
    return matmul(a, v)


def dot(input, other) -> Tensor:
    a, b = _as_tensor(input), _as_tensor(other)
    if a.ndim != 1 or b.ndim != 1:
        raise op_error(
            "dot", f"expected 1-D tensors, got shapes {list(a.shape)} and {list(b.shape)}"
        )
    return matmul(a, b)


def outer(input, vec2) -> Tensor:
    return mul(unsqueeze(_as_tensor(input), 1), unsqueeze(_as_tensor(vec2), 0))


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation for one or more operands, by transposes, sums and batched matmuls.

    Supports explicit (`ij,jk->ik`) and implicit (`ij,jk`) output, `...`, and any
    number of operands (contracted left to right). A label repeated within one
    operand (a diagonal, `ii->i`) is not supported and raises ValueError.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ts = [_as_tensor(t) for t in operands]
    eq_ = equation.replace(" ", "")
    lhs, _, out = eq_.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ts):
        raise op_error("einsum", f"equation {equation!r} has {len(ins)} operands, got {len(ts)}")
    n_ell = builtins.max((_ellipsis_dims(s, t, equation) for s, t in zip(ins, ts)), default=0)
    ell = "".join(chr(0x2460 + i) for i in range(n_ell))  # labels standing for `...` dims
    ins = [s.replace("...", ell[n_ell - _ellipsis_dims(s, t, equation) :]) for s, t in zip(ins, ts)]
    if "->" in eq_:
        out = out.replace("...", ell)
    else:  # implicit output: the `...` dims, then labels used exactly once, alphabetically
        counts: dict[str, int] = {}
        for s in ins:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    for s, t in zip(ins, ts):
        if len(set(s)) != len(s):
            raise op_error(
                "einsum", f"repeated label in operand {s!r} (diagonals) is not supported"
            )
        if len(s) != t.ndim:
            raise op_error("einsum", f"operand {s!r} has {len(s)} labels but the tensor has "
                                     f"{t.ndim} dims (shape {list(t.shape)})")  # fmt: skip
    sizes: dict[str, int] = {}
    for s, t in zip(ins, ts):
        for c, n in zip(s, t.shape):
            if sizes.setdefault(c, n) != n and n != 1 and sizes[c] != 1:
                raise op_error("einsum", f"label {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = builtins.max(sizes[c], n)
    for c in out:
        if c not in sizes:
            raise op_error("einsum", f"output label {c!r} does not appear in the inputs")
    acc, acc_s = ts[0], ins[0]
    for k in range(1, len(ts)):
        rest = set(out).union(*ins[k + 1 :])
        acc, acc_s = _contract(acc, acc_s, ts[k], ins[k], rest, sizes)
    acc, acc_s = _sum_out(acc, acc_s, set(out))
    return permute(acc, *[acc_s.index(c) for c in out]) if acc_s != out else acc


def _ellipsis_dims(spec: str, t: Tensor, equation: str) -> int:
    """How many dims the `...` of an operand spec stands for."""
    if "..." not in spec:
        return 0
    n = t.ndim - len(spec.replace("...", ""))
    if n < 0:
        raise op_error("einsum", f"operand {spec!r} has more labels than dims in {equation!r}")
    return n


def _sum_out(t: Tensor, s: str, keep: set[str]) -> tuple[Tensor, str]:
    drop = [i for i, c in enumerate(s) if c not in keep]
    if not drop:
        return t, s
    return _sum(t, drop), "".join(c for c in s if c in keep)


def _contract(a, sa, b, sb, rest, sizes) -> tuple[Tensor, str]:
    """Contract two labelled operands into one whose labels are those still needed."""
    a, sa = _sum_out(a, sa, set(sb) | rest)
    b, sb = _sum_out(b, sb, set(sa) | rest)
    batch = [c for c in sa if c in sb and c in rest]
    contracted = [c for c in sa if c in sb and c not in rest]
    left = [c for c in sa if c not in sb]
    right = [c for c in sb if c not in sa]

    def arrange(t, s, order):
        t = permute(t, *[s.index(c) for c in order])
        return broadcast_to(t, [sizes[c] for c in order])

    def size(labels):
        n = 1
        for c in labels:
            n *= sizes[c]
        return n

    at = arrange(a, sa, batch + left + contracted)
    bt = arrange(b, sb, batch + contracted + right)
    bs = [sizes[c] for c in batch]
    at = reshape(at, *bs, size(left), size(contracted))
    bt = reshape(bt, *bs, size(contracted), size(right))
    prod = matmul(at, bt)
    out = reshape(prod, *bs, *[sizes[c] for c in left], *[sizes[c] for c in right])
    return out, "".join(batch + left + right)


TENSOR_METHODS = {
    name: globals()[name]
    for name in (
        "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh",
        "cosh", "erf", "log1p", "expm1", "log2", "log10", "floor", "ceil", "trunc", "fix",
        "round", "atan2", "fmod", "remainder", "floor_divide", "reciprocal", "square", "sign",
        "sigmoid", "clamp", "clip", "clamp_min", "clamp_max", "isnan", "isinf", "isfinite",
        "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
        "bitwise_xor", "bitwise_not", "var", "std", "logsumexp", "all", "any", "count_nonzero",
        "norm", "argmax", "argmin", "sort", "argsort", "topk", "cumsum", "cumprod", "bmm", "mv",
        "dot", "outer",
    )
} | {
    "__floordiv__": floor_divide,
    "__rfloordiv__": lambda self, other: floor_divide(other, self),
    "__mod__": remainder,
    "__rmod__": lambda self, other: remainder(other, self),
    "__and__": bitwise_and,
    "__rand__": lambda self, other: bitwise_and(other, self),
    "__or__": bitwise_or,
    "__ror__": lambda self, other: bitwise_or(other, self),
    "__xor__": bitwise_xor,
    "__rxor__": lambda self, other: bitwise_xor(other, self),
    "__invert__": bitwise_not,
    "__pos__": lambda self: self,
}  # fmt: skip

__all__ = [
    "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "erf", "log1p", "expm1", "log2", "log10", "floor", "ceil", "trunc", "fix", "round", "atan2",
    "arctan2", "fmod", "remainder", "floor_divide", "reciprocal", "square", "sign", "sigmoid",
    "clamp", "clip", "clamp_min", "clamp_max", "isnan", "isinf", "isfinite", "logical_and",
    "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_not", "var", "std", "var_mean", "std_mean", "logsumexp", "all", "any",
    "count_nonzero", "norm", "argmax", "argmin", "sort", "argsort", "topk", "cumsum", "cumprod",
    "bmm", "mv", "dot", "outer", "einsum",
]  # fmt: skip
