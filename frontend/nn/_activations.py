"""`flow.nn.functional` activations and dropout, composed from primitives (softmax and its
relatives are in ops/activations.py and re-exported here).

Semantics follow PyTorch: formulas, defaults, argument names and which
dtypes each accepts. Composites stay numerically stable where the naive
formula is not (sigmoid, softplus and log-sigmoid never exponentiate a large
positive number; softmax subtracts the max), and branches are `where`s over
values that are finite in both arms, so gradients built from them stay finite.
"""

from __future__ import annotations

import math
from numbers import Real

from flow import primitives as P
from flow.core import dtypes as _dtypes
from flow.core.errors import op_error
from flow.core.function import Function
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.ops.activations import log_softmax, softmax, softmin
from flow.ops.basic import (
    abs,
    as_tensor,
    exp,
    maximum,
    minimum,
    relu,
    tanh,
    to,
    where,
)
from flow.ops.random import generator_arg, keep_mask
from flow.primitives.registry import bind


def _float_input(op: str, input) -> Tensor:
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected a floating-point input, got {x.dtype!r}", cls=TypeError)
    return x


def _numeric_input(op: str, input) -> Tensor:
    x = as_tensor(input)
    if x.dtype is _dtypes.bool_:
        raise op_error(op, "is not defined for bool tensors", cls=TypeError)
    return x


def _promote_to_float(input) -> Tensor:
    """Integer inputs become float32, as `torch.sigmoid` and `torch.tanh` do."""
    x = as_tensor(input)
    return x if x.dtype.is_floating_point else to(x, _dtypes.DEFAULT_FLOAT)


def _expm1(x: Tensor) -> Tensor:
    return bind(P.expm1, x)


def _log1p(x: Tensor) -> Tensor:
    return bind(P.log1p, x)


# --------------------------------------------------------------------------- piecewise linear


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """`min(max(x, min_val), max_val)`; NaN stays NaN."""
    if min_val > max_val:
        raise op_error("hardtanh", f"min_val ({min_val}) cannot be greater than max_val "
                                   f"({max_val})")  # fmt: skip
    x = _numeric_input("hardtanh", input)
    return to(minimum(maximum(x, min_val), max_val), x.dtype)


def relu6(input: Tensor) -> Tensor:
    """`min(max(x, 0), 6)`."""
    return hardtanh(_numeric_input("relu6", input), 0.0, 6.0)


def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """`x` where `x > 0`, else `negative_slope * x`."""
    x = _float_input("leaky_relu", input)
    return where(x > 0, x, x * negative_slope)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """`x` where `x > threshold`, else `value`."""
    x = _numeric_input("threshold", input)
    return where(x > threshold, x, value)


def hardsigmoid(input: Tensor) -> Tensor:
    """`relu6(x + 3) / 6`."""
    x = _float_input("hardsigmoid", input)
    return relu6(x + 3.0) / 6.0


def hardswish(input: Tensor) -> Tensor:
    """`x * relu6(x + 3) / 6`."""
    x = _float_input("hardswish", input)
    return x * relu6(x + 3.0) / 6.0


# --------------------------------------------------------------------------- smooth


def sigmoid(input: Tensor) -> Tensor:
    """`1 / (1 + exp(-x))`, from `e = exp(-|x|)` so nothing overflows."""
    x = _promote_to_float(input)
    e = exp(-abs(x))
    return where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def logsigmoid(input: Tensor) -> Tensor:
    """`log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))`."""
    x = _float_input("logsigmoid", input)
    return minimum(x, 0.0) - _log1p(exp(-abs(x)))


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """`log(1 + exp(beta x)) / beta`, and `x` itself where `beta x > threshold`."""
    x = _float_input("softplus", input)
    bx = x * beta
    smooth = (maximum(bx, 0.0) + _log1p(exp(-abs(bx)))) / beta
    return where(bx > threshold, x, smooth)


def elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """`x` where `x > 0`, else `alpha * (exp(x) - 1)`."""
    x = _float_input("elu", input)
    return where(x > 0, x, _expm1(minimum(x, 0.0)) * alpha)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`."""
    if alpha == 0:
        raise op_error("celu", "alpha must not be 0")
    x = _float_input("celu", input)
    return where(x > 0, x, _expm1(minimum(x, 0.0) / alpha) * alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor) -> Tensor:
    """`scale * elu(x, alpha)` with the self-normalizing constants."""
    return elu(_float_input("selu", input), _SELU_ALPHA) * _SELU_SCALE


_GELU_TANH_C = math.sqrt(2 / math.pi)


def _gelu_value(x: Tensor, approximate: str) -> Tensor:
    if approximate == "none":
        return x * 0.5 * (1.0 + bind(P.erf, x * (1 / math.sqrt(2.0))))
    t = tanh((x + x * x * x * 0.044715) * _GELU_TANH_C)
    return x * 0.5 * (1.0 + t)


def _gelu_slope(x: Tensor, approximate: str) -> Tensor:
    """d gelu / dx: `Phi(x) + x * phi(x)`, or the tanh form's own derivative."""
    if approximate == "none":
        cdf = (1.0 + bind(P.erf, x * (1 / math.sqrt(2.0)))) * 0.5
        return cdf + x * exp(x * x * -0.5) * (1 / math.sqrt(2 * math.pi))
    t = tanh((x + x * x * x * 0.044715) * _GELU_TANH_C)
    du = (1.0 + x * x * (3 * 0.044715)) * _GELU_TANH_C
    return (1.0 + t) * 0.5 + x * 0.5 * (1.0 - t * t) * du


class _Gelu(Function):
    """GELU as one differentiable op: the backward pass recomputes the slope from `x`, so a
    step keeps only `x` for it (the composite's autograd kept three tensors of its size)."""

    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return _gelu_value(x, approximate)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * _gelu_slope(x, ctx.approximate), None


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """`x * Phi(x)` with the normal CDF from `erf`, or its tanh approximation."""
    x = _float_input("gelu", input)
    if approximate not in ("none", "tanh"):
        raise op_error("gelu", f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return _Gelu.apply(x, approximate)


def silu(input: Tensor) -> Tensor:
    """`x * sigmoid(x)` (swish)."""
    x = _float_input("silu", input)
    return x * sigmoid(x)


def mish(input: Tensor) -> Tensor:
    """`x * tanh(softplus(x))`."""
    x = _float_input("mish", input)
    return x * tanh(softplus(x))


def softsign(input: Tensor) -> Tensor:
    """`x / (1 + |x|)`."""
    x = _float_input("softsign", input)
    return x / (abs(x) + 1.0)


def tanhshrink(input: Tensor) -> Tensor:
    """`x - tanh(x)`."""
    x = _float_input("tanhshrink", input)
    return x - tanh(x)


# --------------------------------------------------------------------------- softmax
# softmax, log_softmax and softmin live in ops/activations.py (flow.softmax, Tensor.softmax).


# --------------------------------------------------------------------------- dropout


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability `p` and scale the rest by `1 / (1 - p)`.

    The mask comes from the default generator's counter-based random bits, so
    it is the same eagerly and compiled; `training=False` or `p = 0` returns the
    input unchanged and `p = 1` gives zeros (times the input, so NaN stays NaN).
    """
    if not isinstance(p, Real) or not 0 <= p <= 1:
        raise op_error("dropout", f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return as_tensor(input)
    x = _float_input("dropout", input)
    if p == 1:
        out = x * 0.0
    else:
        where_ = x.placement if x.is_global else None  # a global mask is the same everywhere
        keep = keep_mask(tuple(x.shape), 1.0 - p, generator_arg("dropout", None, where_))
        out = where(keep, x * (1.0 / (1.0 - p)), 0.0)
    if inplace:
        if current_trace() is not None:
            raise op_error("dropout", "inplace=True inside flow.jit is not supported; use "
                                      "the returned tensor", cls=NotImplementedError)  # fmt: skip
        x._data = out.numpy()
        return x
    return out


__all__ = [
    "relu", "relu6", "hardtanh", "leaky_relu", "threshold", "hardsigmoid", "hardswish",
    "sigmoid", "logsigmoid", "softplus", "elu", "celu", "selu", "gelu", "silu", "mish",
    "softsign", "tanh", "tanhshrink", "softmax", "log_softmax", "softmin", "dropout",
]  # fmt: skip
