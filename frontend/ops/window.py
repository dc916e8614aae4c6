"""What the window ops (ops/conv.py, ops/pooling.py, ops/interpolate.py) share: PyTorch's
argument expansion and input checks, host-built constants, and the two host-matrix
helpers (a per-dim divisor, a contraction with a host matrix).

The window primitives themselves, `conv` and `reduce_window`, and their VJPs are in
primitives/window.py.
"""

from __future__ import annotations

import math

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.args import is_int
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import as_tensor, div, matmul, mul, reshape, tensor
from flow.primitives.window import host_tensor, set_host_capture

# --------------------------------------------------------------------------- argument checks


def _ntuple(op: str, name: str, value, n: int, low: int) -> tuple[int, ...]:
    """An int or a sequence of 1 or `n` ints, each >= `low`, as `n` ints (PyTorch's expansion)."""
    values = list(value) if isinstance(value, (tuple, list)) else [value]
    if not values or not all(is_int(v) for v in values):
        raise op_error(op, f"expected {name} to be an int or a tuple of {n} ints, got {value!r}",
                       cls=TypeError)  # fmt: skip
    if len(values) not in (1, n):
        raise op_error(op, f"expected {name} to be an int or a tuple of {n} ints, got {value!r} "
                           f"({len(values)} values)")  # fmt: skip
    out = tuple(int(v) for v in values) * (n if len(values) == 1 else 1)
    if any(v < low for v in out):
        raise op_error(op, f"expected {name} >= {low}, got {value!r}")
    return out


def _spatial_input(op: str, input, n: int, *, float_only: bool) -> Tensor:
    """The input as a tensor of rank n + 1 (unbatched) or n + 2, with non-empty non-batch dims."""
    x = as_tensor(input)
    if x.ndim not in (n + 1, n + 2):
        raise op_error(op, f"expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) input, "
                           f"got input of shape {list(x.shape)}")  # fmt: skip
    if any(s == 0 for s in x.shape[-(n + 1) :]):
        raise op_error(op, "expected non-zero sizes for the non-batch dims of the input, "
                           f"got input of shape {list(x.shape)}")  # fmt: skip
    if x.dtype is _dtypes.bool_ or (float_only and not x.dtype.is_floating_point):
        kind = "floating-point" if float_only else "numeric"
        raise op_error(op, f"expected a {kind} input, got {x.dtype!r}", cls=TypeError)
    return x


# --------------------------------------------------------------------------- host constants


def _capture_constant(arr: np.ndarray) -> Tensor:
    """A larger host array as a captured tensor, the same on every rank: broadcast next to
    global ones."""
    from flow.distributed.eager_ops import mark_constant

    return mark_constant(tensor(arr))


set_host_capture(_capture_constant)


def _scaled(x: Tensor, divisors: list[np.ndarray]) -> Tensor:
    """`x` divided by the outer product of per-trailing-dim divisors (exact small integers),
    formed in the graph from 1-D constants so the IR stays small."""
    n = len(divisors)
    const = 1
    divisor: Tensor | None = None
    for i, dv in enumerate(divisors):
        if np.all(dv == dv[0]):
            const *= int(dv[0])
            continue
        shape = [1] * n
        shape[i] = dv.shape[0]
        piece = host_tensor(dv.astype(x.dtype.np_dtype).reshape(shape))
        divisor = piece if divisor is None else mul(divisor, piece)
    if divisor is None:
        return x if const == 1 else div(x, const)
    return div(x, divisor if const == 1 else mul(divisor, const))


def _along(x: Tensor, axis: int, m: np.ndarray) -> Tensor:
    """Contract dim `axis` of `x` (size L) with the host matrix `m` of shape (O, L)."""
    shape = list(x.shape)
    lead = math.prod(shape[:axis])
    after = math.prod(shape[axis + 1 :])
    m = m.astype(x.dtype.np_dtype)
    if after == 1:
        y = matmul(reshape(x, lead, shape[axis]), host_tensor(np.ascontiguousarray(m.T)))
    else:
        y = matmul(host_tensor(m), reshape(x, lead, shape[axis], after))
    return reshape(y, *shape[:axis], m.shape[0], *shape[axis + 1 :])


TENSOR_METHODS: dict = {}
"""Tensor methods of the window family (none; the ops are functions only)."""

__all__: list[str] = []
