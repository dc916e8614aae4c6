"""Public tensor operations, written in terms of primitives (PyTorch / OneFlow semantics):
arithmetic, comparisons, matmul, the core reductions and shape ops.

Broadcasting and type promotion happen here, explicitly, so primitives (and the
dialect ops they emit) always see operands of one shape and dtype. Tensors from data and
fills are in ops/construct.py (re-exported here).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

import numpy as np

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.args import dims_arg, normalize_dim, sizes_arg, to_args
from flow.core.errors import op_error
from flow.core.function import Function
from flow.core.tensor import Tensor
from flow.ops.construct import (  # noqa: F401  (re-exported: most callers import them from here)
    as_tensor,
    created,
    from_dlpack,
    from_numpy,
    full,
    is_tensor,
    like_args,
    numel,
    ones,
    ones_like,
    shape_arg,
    tensor,
    zeros,
    zeros_like,
)
from flow.primitives.registry import bind, composite

# --------------------------------------------------------------------------- helpers


def broadcast_shapes(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    if shapes and all(s == shapes[0] for s in shapes):  # the common case, on every op
        return tuple(shapes[0])
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            shown = " and ".join(str(list(s)) for s in shapes)
            raise op_error(op, f"shapes {shown} are not broadcastable")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def to(x: Tensor, *args, dtype=None, device=None, copy: bool = False) -> Tensor:
    """`x.to(dtype)`, `x.to(device)`, `x.to(device, dtype)` or `x.to(other_tensor)`.

    A tensor's device says where the programs compiled from it run (frontend/_device.py);
    its value stays in host memory. Moving to a device that is missing here is an error.
    """
    from flow.core.device import to_device

    dtype, device = to_args(args, dtype, device)
    if device is not None:
        x = to_device(x, device)
    if dtype is None:
        return x.clone() if copy else x
    dt = _dtypes.as_dtype(dtype)
    return x if x.dtype is dt else bind(P.cast, x, dtype=dt)


def broadcast_to(x: Tensor, shape) -> Tensor:
    shape = tuple(shape)
    if tuple(x.shape) == shape:
        return x
    if len(shape) < x.ndim:
        raise op_error("broadcast_to", f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
    offset = len(shape) - x.ndim
    return bind(P.broadcast_in_dim, x, dims=tuple(range(offset, len(shape))), shape=shape)


def expand(x: Tensor, *sizes) -> Tensor:
    sizes = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    offset = len(sizes) - x.ndim
    shape = tuple(
        x.shape[i - offset] if s == -1 and i >= offset else s for i, s in enumerate(sizes)
    )
    return broadcast_to(x, shape)


def promote(op: str, *xs, float_result: bool = False) -> list[Tensor]:
    """Common dtype and shape of tensors and Python scalars (PyTorch rules)."""
    if len(xs) == 2:  # the common cases, on every binary op
        a, b = xs
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            if a._dtype is b._dtype and a._shape == b._shape \
                    and (a._dtype.kind == 2 or not float_result):  # fmt: skip
                return [a, b]  # two tensors that already agree
        elif isinstance(a, Tensor) and _local_scalar(b, a, float_result):
            return [a, _scalar_like(b, a)]
        elif isinstance(b, Tensor) and _local_scalar(a, b, float_result):
            return [_scalar_like(a, b), b]
    tensors = [x for x in xs if isinstance(x, Tensor)]
    others = [x for x in xs if not isinstance(x, Tensor)]
    if not tensors:
        xs = [tensor(x) for x in xs]
        tensors, others = list(xs), []
    for x in others:
        if not isinstance(x, (bool, int, float, np.number, np.bool_)):
            raise op_error(op, f"expected a tensor or a number, got {type(x).__name__}",
                           cls=TypeError)  # fmt: skip
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = _dtypes.promote_types(dt, t.dtype)
    for v in others:
        dt = _dtypes.promote_with_scalar(dt, v)
    if float_result and not dt.is_floating_point:
        dt = _dtypes.DEFAULT_FLOAT
    shape = broadcast_shapes(op, *(t.shape for t in tensors))
    out = []
    for x in xs:
        if isinstance(x, Tensor):
            out.append(broadcast_to(x if x.dtype is dt else bind(P.cast, x, dtype=dt), shape))
        elif tensors[0].is_global:  # a scalar next to global tensors is a broadcast one
            g = tensors[0].placement
            out.append(full(shape, x, dt, placement=g, sbp=(_global_B(),) * len(g.hierarchy)))
        else:
            out.append(full(shape, x, dt))
    return out


_SCALARS = {int: 1, float: 2}  # Python number types by kind (`_dtypes.scalar_kind`)


def _local_scalar(v, t: Tensor, float_result: bool) -> bool:
    """Whether the number `v` takes the local tensor `t`'s dtype: of its kind or a lower one."""
    kind = _SCALARS.get(v.__class__, 3)
    return kind <= t._dtype.kind and (t._dtype.kind == 2 or not float_result) \
        and getattr(t, "_dist", None) is None  # fmt: skip


def _scalar_like(v, t: Tensor) -> Tensor:
    """The number `v` of `t`'s shape and dtype, as `promote` makes it below (`full` without
    the keyword handling: this is on every op with a number)."""
    return bind(P.full, value=v, shape=t._shape, dtype=t._dtype)


def _global_B():
    from flow.distributed.placement import sbp

    return sbp.broadcast


# --------------------------------------------------------------------------- elementwise


def _binary_op(prim, *, float_result=False):
    def fn(input, other) -> Tensor:
        a, b = promote(prim.name, input, other, float_result=float_result)
        if a.dtype is _dtypes.bool_:
            raise op_error(prim.name, "is not defined for bool tensors", cls=TypeError)
        return bind(prim, a, b)

    fn.__name__ = prim.name
    return fn


def _additive(prim, subtract: bool):
    def fn(input, other, *, alpha=1) -> Tensor:
        """`input + alpha * other` (`-` for sub), PyTorch's and OneFlow's `alpha`."""
        if isinstance(alpha, np.number):
            alpha = alpha.item()
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float, Tensor)):
            raise op_error(prim.name, f"alpha must be a number or a tensor, got "
                                      f"{type(alpha).__name__}", cls=TypeError)  # fmt: skip
        a, b = promote(prim.name, input, other)
        if a.dtype is _dtypes.bool_:
            raise op_error(prim.name, "is not defined for bool tensors", cls=TypeError)
        if isinstance(alpha, float) and not a.dtype.is_floating_point:
            raise op_error(prim.name, f"alpha must be an integer for {a.dtype.name} tensors, "
                                      f"got {alpha}", cls=TypeError)  # fmt: skip
        if not isinstance(alpha, Tensor) and alpha == 1:
            return bind(prim, a, b)
        if isinstance(alpha, Tensor) or a.is_global:
            return bind(prim, a, mul(b, alpha))
        return bind(_add_scaled, a, b, alpha=alpha, subtract=subtract)

    fn.__name__ = prim.name
    return fn


def _add_scaled_parts(x: Tensor, y: Tensor, *, alpha, subtract: bool) -> Tensor:
    return bind(P.sub if subtract else P.add, x, bind(P.mul, y, _scalar_like(alpha, y)))


@composite("add_scaled", _add_scaled_parts)
def _add_scaled(x, y, *, alpha, subtract):
    """`x ± alpha * y` (an optimizer's update) on numpy: the `mul` and `add` / `sub` kernels
    on a fill of y's dtype, so the same bits as its primitives, in one op."""
    scaled = P.mul.impl(y, np.asarray(alpha, y.dtype))
    return P.sub.impl(x, scaled) if subtract else P.add.impl(x, scaled)


add = _additive(P.add, subtract=False)
sub = _additive(P.sub, subtract=True)
mul = _binary_op(P.mul)
div = _binary_op(P.div, float_result=True)
maximum = _binary_op(P.maximum)
minimum = _binary_op(P.minimum)
_pow = _binary_op(P.pow_, float_result=True)


def pow(input, exponent) -> Tensor:  # noqa: A001
    """`input ** exponent`; small integer and square-root exponents use exact multiplies/sqrt."""
    if (
        isinstance(input, Tensor)
        and isinstance(exponent, (int, float))
        and not isinstance(exponent, bool)
    ):
        x = input if input.dtype.is_floating_point else None
        if x is not None and exponent == 2:
            return mul(x, x)
        if x is not None and exponent == 1:
            return x
        if x is not None and exponent == 0.5:
            return sqrt(x)
    return _pow(input, exponent)


def _unary_op(prim, *, float_only: bool):
    def fn(input: Tensor) -> Tensor:
        x = as_tensor(input)
        if float_only and not x.dtype.is_floating_point:
            x = to(x, _dtypes.DEFAULT_FLOAT)
        if x.dtype is _dtypes.bool_:
            raise op_error(prim.name, "is not defined for bool tensors", cls=TypeError)
        return bind(prim, x)

    fn.__name__ = prim.name
    return fn


neg = _unary_op(P.neg, float_only=False)
abs = _unary_op(P.abs_, float_only=False)  # noqa: A001
exp = _unary_op(P.exp, float_only=True)
log = _unary_op(P.log, float_only=True)
sqrt = _unary_op(P.sqrt, float_only=True)
rsqrt = _unary_op(P.rsqrt, float_only=True)
tanh = _unary_op(P.tanh, float_only=True)


class _Relu(Function):
    """`max(x, 0)` with PyTorch's gradient: it passes where `x <= 0` fails (positive or NaN),
    so 0 gets none, where `maximum`'s rule would split it between the two sides; and in
    a third of the ops."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return maximum(x, 0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (_relu_grad_parts(grad, x),)


def relu(input: Tensor) -> Tensor:
    return bind(_relu, as_tensor(input))


@composite("relu", lambda x: _Relu.apply(x))
def _relu(x):
    """`_Relu` on numpy (traced programs get its ops and its gradient rule)."""
    return P.maximum.impl(x, np.zeros((), x.dtype))


def _relu_grad_parts(ct: Tensor, x: Tensor) -> Tensor:
    return where(le(x, 0), 0, ct)


@composite("relu_grad", _relu_grad_parts)
def _relu_grad(ct, x):
    """`ct` where `x <= 0` fails, else 0 (`masked`: one pass)."""
    keep = np.less_equal(x, np.zeros((), x.dtype))
    return P.elementwise.masked(ct, np.logical_not(keep, out=keep))


_relu.vjp = lambda ct, x, *, out: (bind(_relu_grad, ct, x),)


def add_bias(x: Tensor, b: Tensor, dim: int) -> Tensor:
    """`x` plus the vector `b` along dim `dim` (a layer's bias; one op eagerly); any other
    bias (another dtype, another shape) is added as `x + b`."""
    if b.ndim == 1 and b.dtype is x.dtype and x.ndim and b.shape[0] == x.shape[dim]:
        return bind(_add_bias, x, b, dim=dim % x.ndim)
    return add(x, b)


def _bias_view(x, dim: int) -> list[int]:
    return [n if i == dim else 1 for i, n in enumerate(x.shape)]


def _add_bias_parts(x: Tensor, b: Tensor, *, dim: int) -> Tensor:
    return add(x, b if dim == x.ndim - 1 else reshape(b, *_bias_view(x, dim)))


@composite("add_bias", _add_bias_parts)
def _add_bias(x, b, *, dim):
    return P.add.impl(x, b.reshape(_bias_view(x, dim)))


def _bias_grad_parts(ct: Tensor, *, dim: int) -> Tensor:
    return sum(ct, tuple(i for i in range(ct.ndim) if i != dim))


@composite("bias_grad", _bias_grad_parts)
def _bias_grad(ct, *, dim):
    """The bias's cotangent: `ct` summed over every other dim (the reduction, and so the
    bits, of the decomposition's broadcast rule)."""
    return P.reduce.impl(ct, kind="sum", dims=tuple(i for i in range(ct.ndim) if i != dim))


_add_bias.vjp = lambda ct, x, b, *, out, dim: (ct, bind(_bias_grad, ct, dim=dim))


def _compare_op(direction: str):
    def fn(input, other) -> Tensor:
        a, b = promote(direction, input, other)
        return bind(P.compare, a, b, direction=direction)

    fn.__name__ = direction
    return fn


eq, ne, lt, le, gt, ge = (_compare_op(d) for d in ("eq", "ne", "lt", "le", "gt", "ge"))


def where(condition, input, other) -> Tensor:
    cond = to(as_tensor(condition), _dtypes.bool_)
    a, b = promote("where", input, other)
    shape = broadcast_shapes("where", cond.shape, a.shape)
    return bind(P.select, broadcast_to(cond, shape), broadcast_to(a, shape), broadcast_to(b, shape))


# --------------------------------------------------------------------------- matmul


def matmul(input, other) -> Tensor:
    """Matrix product with NumPy/PyTorch semantics (1-D operands, broadcast batch dims)."""
    a, b = as_tensor(input), as_tensor(other)
    if a.ndim == 0 or b.ndim == 0:
        raise op_error("matmul", f"both arguments need at least 1 dim, got shapes "
                                 f"{list(a.shape)} and {list(b.shape)}")  # fmt: skip
    dt = _dtypes.promote_types(a.dtype, b.dtype)
    a, b = to(a, dt), to(b, dt)
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = reshape(a, 1, a.shape[0])
    if squeeze_b:
        b = reshape(b, b.shape[0], 1)
    if a.shape[-1] != b.shape[-2]:
        raise op_error("matmul", f"shapes {list(input.shape)} and {list(other.shape)} cannot be "
                                 f"multiplied ({a.shape[-1]} != {b.shape[-2]})")  # fmt: skip
    batch = broadcast_shapes("matmul", a.shape[:-2], b.shape[:-2])
    a = broadcast_to(a, (*batch, *a.shape[-2:]))
    b = broadcast_to(b, (*batch, *b.shape[-2:]))
    out = bind(P.matmul, a, b)
    if squeeze_a or squeeze_b:
        shape = list(out.shape)
        if squeeze_b:
            shape.pop(-1)
        if squeeze_a:
            shape.pop(-1 if squeeze_b else -2)
        out = reshape(out, *shape)
    return out


mm = matmul


# --------------------------------------------------------------------------- reductions


def _reduce_dims(op: str, x: Tensor, dim) -> tuple[int, ...]:
    dims = dims_arg(op, dim, x.ndim)
    return dims if x.ndim else ()


def _reduce(op: str, kind: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    x = as_tensor(x)
    dims = _reduce_dims(op, x, dim)
    if kind in ("max", "min") and any(x.shape[d] == 0 for d in dims):
        raise op_error(op, f"cannot reduce over an empty dim (shape {list(x.shape)}, "
                           f"dim {dim}): the {kind} of no elements is undefined")  # fmt: skip
    out = bind(P.reduce, x, kind=kind, dims=dims) if dims else x
    if keepdim:
        out = reshape(out, *(1 if i in dims else s for i, s in enumerate(x.shape)))
    return out


def sum(input, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: A001
    x = as_tensor(input)
    if dtype is not None:
        x = to(x, dtype)
    elif not x.dtype.is_floating_point:
        x = to(x, _dtypes.int64)
    return _reduce("sum", "sum", x, dim, keepdim)


def prod(input, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    x = as_tensor(input)
    if dtype is not None:
        x = to(x, dtype)
    elif not x.dtype.is_floating_point:
        x = to(x, _dtypes.int64)
    return _reduce("prod", "prod", x, dim, keepdim)


def mean(input, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    x = as_tensor(input)
    if dtype is not None:
        x = to(x, dtype)
    if not x.dtype.is_floating_point:
        raise op_error("mean", f"expected a floating-point input (or dtype=), got {x.dtype!r}",
                       cls=TypeError)  # fmt: skip
    dims = _reduce_dims("mean", x, dim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    return div(_reduce("mean", "sum", x, dim, keepdim), count)


def amax(input, dim=None, keepdim: bool = False) -> Tensor:
    return _reduce("amax", "max", input, dim, keepdim)


def amin(input, dim=None, keepdim: bool = False) -> Tensor:
    return _reduce("amin", "min", input, dim, keepdim)


def max(input, dim=None, keepdim: bool = False):  # noqa: A001
    """`max(x)`: the largest element; `max(x, dim)`: (values, indices); `max(x, y)`: maximum."""
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    if dim is None:
        return amax(input)
    from flow.ops.reduction import max_dim

    return max_dim(input, dim, keepdim)


def min(input, dim=None, keepdim: bool = False):  # noqa: A001
    """`min(x)`: the smallest element; `min(x, dim)`: (values, indices); `min(x, y)`: minimum."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    if dim is None:
        return amin(input)
    from flow.ops.reduction import min_dim

    return min_dim(input, dim, keepdim)


# --------------------------------------------------------------------------- shapes


def total_of(parts: Sequence[Tensor], kind: str = "sum") -> Tensor:
    """The sum (`kind="max"`: the max) of many 0-d tensors (in their promoted dtype), as one
    reduction of their concatenation. A chain of binary ops over them would become one IREE dispatch
    reading every part's buffer, and a dispatch binds at most 32 buffers (IREE's HAL limit:
    a model's gradient norm or inf check over its parameters would fail to run)."""
    dt = parts[0].dtype
    for p in parts[1:]:
        dt = _dtypes.promote_types(dt, p.dtype)
    rows = [reshape(to(p, dt), 1) for p in parts]
    joined = bind(P.concat, *rows, dim=0) if len(rows) > 1 else rows[0]
    return sum(joined) if kind == "sum" else amax(joined)


def reshape(input: Tensor, *shape) -> Tensor:
    x = as_tensor(input)
    shape = sizes_arg("reshape", shape)
    if shape.count(-1) > 1:
        raise op_error("reshape", f"only one dim can be -1, got {shape}")
    if -1 in shape:
        known = 1
        for s in shape:
            known *= s if s != -1 else 1
        if known == 0 or x.numel() % known:
            raise op_error("reshape", f"shape {shape} is invalid for input of size {x.numel()}")
        shape[shape.index(-1)] = x.numel() // known
    shape = tuple(int(s) for s in shape)
    if shape == tuple(x.shape):
        return x
    return bind(P.reshape, x, shape=shape)


view = reshape


def permute(input: Tensor, *dims) -> Tensor:
    x = as_tensor(input)
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    perm = tuple(normalize_dim("permute", d, x.ndim) for d in dims)
    if len(perm) != x.ndim or len(set(perm)) != x.ndim:
        raise op_error("permute", f"expected a permutation of {x.ndim} dims, got {list(dims)}")
    if perm == tuple(range(x.ndim)):
        return x
    return bind(P.transpose, x, permutation=perm)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    x = as_tensor(input)
    perm = list(range(x.ndim))
    d0, d1 = normalize_dim("transpose", dim0, x.ndim), normalize_dim("transpose", dim1, x.ndim)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(x, *perm)


def t(input: Tensor) -> Tensor:
    x = as_tensor(input)
    if x.ndim > 2:
        raise op_error("t", f"expects a tensor with <= 2 dims, got {x.ndim}")
    return transpose(x, 0, 1) if x.ndim == 2 else x


def squeeze(input: Tensor, dim=None) -> Tensor:
    x = as_tensor(input)
    if dim is None:
        dims = {i for i, s in enumerate(x.shape) if s == 1}
    else:
        dims = {d for d in dims_arg("squeeze", dim, x.ndim) if x.shape[d] == 1}
    return reshape(x, *(s for i, s in enumerate(x.shape) if i not in dims))


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    x = as_tensor(input)
    d = normalize_dim("unsqueeze", dim, x.ndim + 1)
    shape = list(x.shape)
    shape.insert(d, 1)
    return reshape(x, *shape)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    x = as_tensor(input)
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = normalize_dim("flatten", start_dim, x.ndim), normalize_dim("flatten", end_dim, x.ndim)
    if s > e:
        raise op_error("flatten", f"start_dim {start_dim} comes after end_dim {end_dim}")
    n = 1
    for d in x.shape[s : e + 1]:
        n *= d
    return reshape(x, *x.shape[:s], n, *x.shape[e + 1 :])


__all__ = [
    "to",
    "broadcast_to", "expand", "add", "sub", "mul", "div", "maximum", "minimum", "pow", "neg",
    "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "relu", "eq", "ne", "lt", "le", "gt", "ge",
    "where", "matmul", "mm", "sum", "prod", "mean", "amax", "amin", "max", "min", "reshape",
    "view", "permute", "transpose", "t", "squeeze", "unsqueeze", "flatten", "broadcast_shapes",
]  # fmt: skip
