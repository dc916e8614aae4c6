"""Softmax and its relatives (`softmax`, `log_softmax`, `softmin`): `flow.softmax`,
`Tensor.softmax` and `flow.nn.functional.softmax` are these. softmax and log_softmax, and
their gradients, are composites: one numpy kernel each in eager mode, their primitives in
traced programs.

Both are computed from `x - max(x, dim)`, so every exponent is <= 0 and a large input never
overflows; the other activations are in nn/_activations.py.
"""

from __future__ import annotations

import warnings

import numpy as np

from flow import primitives as P
from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import amax, as_tensor, exp, log, normalize_dim, sum, to
from flow.primitives.registry import bind, composite


def _softmax_input(op: str, input, dim, dtype) -> tuple[Tensor, int]:
    x = as_tensor(input)
    if dtype is not None:
        x = to(x, dtype)
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected a floating-point input (or dtype=), got {x.dtype!r}",
                       cls=TypeError)  # fmt: skip
    if dim is None:
        dim = 0 if x.ndim in (0, 1, 3) else 1
        warnings.warn(f"{op}: implicit dim is deprecated; pass dim= (using dim={dim})",
                      UserWarning, stacklevel=3)  # fmt: skip
    return x, normalize_dim(op, dim, x.ndim)


def _shifted(x: Tensor, dim: int) -> Tensor:
    """`x - max(x, dim)`: every exponent is <= 0 (a row of all -inf gives NaN, as in PyTorch).

    The max is detached: softmax and log_softmax do not depend on the shift, so its
    gradient is zero in exact arithmetic, and a traced backward pass skips the max's VJP
    (a compare, a select and a reduction fewer per call)."""
    return x - amax(x, dim, keepdim=True).detach()


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """`exp(x) / sum(exp(x), dim)`, computed from `x - max(x, dim)`."""
    x, d = _softmax_input("softmax", input, dim, dtype)
    if x.numel() == 0:
        return x
    return bind(_softmax, x, dim=d)


def _softmax_parts(x: Tensor, *, dim: int) -> Tensor:
    e = exp(_shifted(x, dim))
    return e / sum(e, dim, keepdim=True)


def _reduced(kind: str, x: np.ndarray, dim: int) -> np.ndarray:
    """`amax` / `sum` over `dim` with keepdim (a 0-d tensor is its own reduction)."""
    r = P.reduce.impl(x, kind=kind, dims=(dim,) if x.ndim else ())
    return r.reshape([1 if i == dim else n for i, n in enumerate(x.shape)])


def _shifted_kernel(x: np.ndarray, dim: int) -> np.ndarray:
    return x - _reduced("max", x, dim)


def _sum_kernel(x: np.ndarray, dim: int) -> np.ndarray:
    return _reduced("sum", x, dim)


@composite("softmax", _softmax_parts)
def _softmax(x, *, dim):
    """`_softmax_parts` on numpy: the kernels of its primitives, so the same bits (and so
    for the kernels below)."""
    e = P.exp.impl(_shifted_kernel(x, dim))
    return e / _sum_kernel(e, dim)


def _softmax_grad_parts(ct: Tensor, out: Tensor, *, dim: int) -> Tensor:
    return out * (ct - sum(ct * out, dim, keepdim=True))


@composite("softmax_grad", _softmax_grad_parts)
def _softmax_grad(ct, out, *, dim):
    return out * (ct - _sum_kernel(ct * out, dim))


_softmax.vjp = lambda ct, x, *, out, dim: (bind(_softmax_grad, ct, out, dim=dim),)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """`x - logsumexp(x, dim)`, computed from `x - max(x, dim)`."""
    x, d = _softmax_input("log_softmax", input, dim, dtype)
    if x.numel() == 0:
        return x
    return bind(_log_softmax, x, dim=d)


def _log_softmax_parts(x: Tensor, *, dim: int) -> Tensor:
    s = _shifted(x, dim)
    return s - log(sum(exp(s), dim, keepdim=True))


@composite("log_softmax", _log_softmax_parts)
def _log_softmax(x, *, dim):
    s = _shifted_kernel(x, dim)
    return s - P.log.impl(_sum_kernel(P.exp.impl(s), dim))


def _log_softmax_grad_parts(ct: Tensor, out: Tensor, *, dim: int) -> Tensor:
    return ct - exp(out) * sum(ct, dim, keepdim=True)


@composite("log_softmax_grad", _log_softmax_grad_parts)
def _log_softmax_grad(ct, out, *, dim):
    return ct - P.exp.impl(out) * _sum_kernel(ct, dim)


_log_softmax.vjp = lambda ct, x, *, out, dim: (bind(_log_softmax_grad, ct, out, dim=dim),)


def softmin(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """`softmax(-x, dim)`."""
    x, d = _softmax_input("softmin", input, dim, dtype)
    return softmax(-x, d)


TENSOR_METHODS: dict = {
    "softmax": lambda self, dim=None, dtype=None: softmax(self, dim, dtype=dtype),
    "log_softmax": lambda self, dim=None, dtype=None: log_softmax(self, dim, dtype=dtype),
}
"""Tensor methods this module adds (name -> function taking the tensor first)."""

__all__ = ["softmax", "log_softmax"]
