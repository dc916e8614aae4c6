"""Softmax and its relatives (`softmax`, `log_softmax`, `softmin`): `flow.softmax`,
`Tensor.softmax` and `flow.nn.functional.softmax` are these.

Both are computed from `x - max(x, dim)`, so every exponent is <= 0 and a large input never
overflows; the other activations are in nn/_activations.py.
"""

from __future__ import annotations

import warnings

from flow.core.errors import op_error
from flow.core.tensor import Tensor
from flow.ops.basic import amax, as_tensor, exp, log, normalize_dim, sum, to


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
    e = exp(_shifted(x, d))
    return e / sum(e, d, keepdim=True)


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    """`x - logsumexp(x, dim)`, computed from `x - max(x, dim)`."""
    x, d = _softmax_input("log_softmax", input, dim, dtype)
    if x.numel() == 0:
        return x
    s = _shifted(x, d)
    return s - log(sum(exp(s), d, keepdim=True))


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
