"""`flow.nn.functional` normalizations, composed from primitives (PyTorch semantics).

Statistics are two-pass (the mean first, then the mean squared deviation),
biased for normalizing and unbiased for running-variance updates, as in
PyTorch. Running statistics are updated in place on eager tensors; inside
`flow.jit` the normalization traces but the in-place update is refused, since
compiled functions return new values instead of mutating their inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core.autograd import no_grad
from flow.ops.basic import (
    as_tensor,
    abs,
    amax,
    amin,
    maximum,
    mean,
    normalize_dim,
    reshape,
    rsqrt,
    sqrt,
    sum,
    to,
)
from flow.core.errors import op_error
from flow.core.tensor import Tensor


def _float_input(op: str, input, min_ndim: int = 0, layout: str = "") -> Tensor:
    x = as_tensor(input)
    if not x.dtype.is_floating_point:
        raise op_error(op, f"expected a floating-point input, got {x.dtype!r}", cls=TypeError)
    if x.ndim < min_ndim:
        raise op_error(op, f"expected input of shape {layout} (at least {min_ndim} dims), "
                           f"got {list(x.shape)}")  # fmt: skip
    return x


def _param(op: str, name: str, t, shape: Sequence[int], dtype: _dtypes.dtype) -> Tensor | None:
    """An optional per-channel tensor of exactly `shape`, converted to `dtype`."""
    if t is None:
        return None
    if not isinstance(t, Tensor):
        raise op_error(op, f"expected {name} to be a tensor, got {type(t).__name__}",
                       cls=TypeError)  # fmt: skip
    if tuple(t.shape) != tuple(shape):
        raise op_error(op, f"expected {name} of shape {list(shape)}, got {list(t.shape)}")
    return to(t, dtype)


def _channel_params(op: str, x: Tensor, running_mean, running_var, weight, bias) -> tuple:
    """The optional per-channel tensors of batch / instance norm, checked against `x`."""
    c = (x.shape[1],)
    return (_param(op, "running_mean", running_mean, c, x.dtype),
            _param(op, "running_var", running_var, c, x.dtype),
            _param(op, "weight", weight, c, x.dtype), _param(op, "bias", bias, c, x.dtype))  # fmt: skip


def _moments(x: Tensor, dims: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Mean and biased variance over `dims`, both kept as size-1 dims."""
    m = mean(x, dims, keepdim=True)
    d = x - m
    return m, mean(d * d, dims, keepdim=True)


def _channel_view(t: Tensor, ndim: int) -> Tensor:
    """A per-channel vector (C,) as (1, C, 1, ...) to broadcast against (N, C, *)."""
    return reshape(t, 1, t.shape[0], *([1] * (ndim - 2)))


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None, view) -> Tensor:
    if weight is not None:
        y = y * view(weight)
    if bias is not None:
        y = y + view(bias)
    return y


def _update_running(op: str, running: Tensor, batch_value: Tensor, momentum: float) -> None:
    """`running = (1 - momentum) * running + momentum * batch_value`, in place.

    Inside `flow.jit` / `nn.Graph` the update is an output of the compiled step,
    written back into `running` after each call.
    """
    with no_grad():
        new = running * (1.0 - momentum) + to(batch_value.detach(), running.dtype) * momentum
        running.copy_(new)


def _check_momentum(op: str, momentum) -> float:
    if momentum is None or not 0 <= float(momentum) <= 1:
        raise op_error(op, f"expected momentum in [0, 1], got {momentum!r}")
    return float(momentum)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize each channel (dim 1) of `(N, C, *)` by its mean and variance.

    Training uses the batch statistics and, when running tensors are given,
    updates them in place with `momentum` and the unbiased batch variance;
    evaluation uses the running statistics.
    """
    op = "batch_norm"
    x = _float_input(op, input, 2, "(N, C, *)")
    c = x.shape[1]
    rm, rv, w, b = _channel_params(op, x, running_mean, running_var, weight, bias)

    def view(t):
        return _channel_view(t, x.ndim)

    dims = (0, *range(2, x.ndim))
    if training:
        n = x.numel() // c if c else 0
        if n <= 1:
            raise op_error(op, f"expected more than 1 value per channel when training, got "
                               f"input of shape {list(x.shape)}")  # fmt: skip
        m, v = _moments(x, dims)
        if rm is not None or rv is not None:
            momentum = _check_momentum(op, momentum)
            if rm is not None:
                _update_running(op, running_mean, reshape(m, c), momentum)
            if rv is not None:
                _update_running(op, running_var, reshape(v, c) * (n / (n - 1)), momentum)
    else:
        if rm is None or rv is None:
            raise op_error(op, "running_mean and running_var are required when not training")
        m, v = view(rm), view(rv)
    return _affine((x - m) * rsqrt(v + eps), w, b, view)


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize each (sample, channel) of `(N, C, *)` over its spatial dims.

    With running tensors and `use_input_stats`, they are updated in place with
    the batch-averaged instance statistics (as PyTorch does); without
    `use_input_stats` the running statistics normalize instead.
    """
    op = "instance_norm"
    x = _float_input(op, input, 3, "(N, C, *spatial)")
    c = x.shape[1]
    rm, rv, w, b = _channel_params(op, x, running_mean, running_var, weight, bias)

    def view(t):
        return _channel_view(t, x.ndim)

    if not use_input_stats:
        if rm is None or rv is None:
            raise op_error(op, "running_mean and running_var are required when "
                               "use_input_stats=False")  # fmt: skip
        return _affine((x - view(rm)) * rsqrt(view(rv) + eps), w, b, view)
    spatial = math.prod(x.shape[2:])
    if spatial <= 1:
        raise op_error(op, f"expected more than 1 spatial element when training, got input "
                           f"of shape {list(x.shape)}")  # fmt: skip
    m, v = _moments(x, tuple(range(2, x.ndim)))
    if rm is not None or rv is not None:
        momentum = _check_momentum(op, momentum)
        if rm is not None:
            _update_running(op, running_mean, mean(reshape(m, x.shape[0], c), 0), momentum)
        if rv is not None:
            unbiased = reshape(v, x.shape[0], c) * (spatial / (spatial - 1))
            _update_running(op, running_var, mean(unbiased, 0), momentum)
    return _affine((x - m) * rsqrt(v + eps), w, b, view)


def _normalized_shape(op: str, normalized_shape) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, Integral) else normalized_shape
    if (
        not isinstance(shape, Sequence)
        or isinstance(shape, str)
        or not all(isinstance(s, Integral) for s in shape)
    ):
        raise op_error(op, f"expected normalized_shape to be an int or a sequence of ints, got "
                           f"{normalized_shape!r}", cls=TypeError)  # fmt: skip
    return tuple(int(s) for s in shape)


def _trailing(op: str, x: Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    k = len(shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k :]) != shape:
        raise op_error(op, f"given normalized_shape={list(shape)}, expected input of shape "
                           f"[*, {', '.join(map(str, shape))}], got {list(x.shape)}")  # fmt: skip
    return tuple(range(x.ndim - k, x.ndim))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize over the trailing `normalized_shape` dims, then scale and shift elementwise."""
    op = "layer_norm"
    x = _float_input(op, input)
    shape = _normalized_shape(op, normalized_shape)
    dims = _trailing(op, x, shape)
    w = _param(op, "weight", weight, shape, x.dtype)
    b = _param(op, "bias", bias, shape, x.dtype)
    m, v = _moments(x, dims)
    return _affine((x - m) * rsqrt(v + eps), w, b, lambda t: t)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:  # fmt: skip
    """`x / sqrt(mean(x**2) + eps) * weight` over the trailing `normalized_shape` dims.

    `eps` defaults to the machine epsilon of the input's dtype.
    """
    op = "rms_norm"
    x = _float_input(op, input)
    shape = _normalized_shape(op, normalized_shape)
    dims = _trailing(op, x, shape)
    w = _param(op, "weight", weight, shape, x.dtype)
    if eps is None:
        eps = float(np.finfo(x.dtype.np_dtype).eps)
    y = x * rsqrt(mean(x * x, dims, keepdim=True) + eps)
    return y if w is None else y * w


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:  # fmt: skip
    """Normalize `(N, C, *)` over each group of `C / num_groups` channels and the spatial dims."""
    op = "group_norm"
    x = _float_input(op, input, 2, "(N, C, *)")
    n, c = x.shape[0], x.shape[1]
    if not isinstance(num_groups, Integral) or num_groups <= 0 or c % num_groups:
        raise op_error(op, f"expected num_groups to be a positive divisor of the {c} channels, "
                           f"got {num_groups!r}")  # fmt: skip
    w = _param(op, "weight", weight, (c,), x.dtype)
    b = _param(op, "bias", bias, (c,), x.dtype)
    grouped = reshape(x, n, num_groups, (c // num_groups) * math.prod(x.shape[2:]))
    m, v = _moments(grouped, (2,))
    y = reshape((grouped - m) * rsqrt(v + eps), *x.shape)
    return _affine(y, w, b, lambda t: _channel_view(t, x.ndim))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """`x / max(||x||_p, eps)` along `dim` (p = inf and -inf are the max and min of |x|)."""
    x = _float_input("normalize", input)
    dim = normalize_dim("normalize", dim, x.ndim)
    a = abs(x)
    if p == math.inf:
        norm = amax(a, dim, keepdim=True)
    elif p == -math.inf:
        norm = amin(a, dim, keepdim=True)
    elif p == 2:
        norm = sqrt(sum(a * a, dim, keepdim=True))
    elif p == 1:
        norm = sum(a, dim, keepdim=True)
    elif p > 0:
        norm = sum(a**p, dim, keepdim=True) ** (1.0 / p)
    else:
        raise op_error("normalize", f"expected p > 0 or +-inf, got {p}")
    return x / maximum(norm, eps)


__all__ = ["batch_norm", "instance_norm", "layer_norm", "rms_norm", "group_norm", "normalize"]
