"""Gradient clipping with PyTorch's semantics, for local and global parameters.

The total norm is a tensor computed from the gradients with ordinary ops, so for
global gradients it is already the norm of the whole (global) gradient: the
reductions over a split tensor produce a partial sum that flow's SBP boxing turns
into the global value, with no explicit all-reduce here. The gradients are scaled
in place, as `torch.nn.utils.clip_grad_norm_` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Real

from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.ops import basic as O
from flow.ops.logical import isfinite

_EPS = 1e-6


def _grads(op: str, parameters) -> list[Tensor]:
    """The gradients of `parameters` (a tensor or an iterable of them) that exist."""
    params = [parameters] if isinstance(parameters, Tensor) else parameters
    if not isinstance(params, Iterable):
        raise TypeError(f"{op}: expected a tensor or an iterable of tensors, got "
                        f"{type(parameters).__name__}")  # fmt: skip
    grads = []
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: expected parameters to be tensors, got {type(p).__name__}")
        if p.grad is not None:
            grads.append(p.grad)
    places = {str(g.placement) if g.is_global else None for g in grads}
    if len(places) > 1:
        raise ValueError(f"{op}: expected the gradients all local or all global on one "
                         f"placement, got {sorted(map(str, places))}")  # fmt: skip
    return grads


def _norm_type(op: str, norm_type) -> float:
    if not isinstance(norm_type, Real) or not (norm_type > 0 or norm_type == math.inf):
        raise ValueError(f"{op}: expected norm_type to be a positive number or inf, got "
                         f"{norm_type!r}")  # fmt: skip
    return float(norm_type)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:  # fmt: skip
    """Scale the gradients so that their total `norm_type`-norm is at most `max_norm`.

    The total norm is that of all gradients concatenated into one vector (the max of
    their absolute values for `norm_type=inf`); gradients are multiplied by
    `min(1, max_norm / (total + 1e-6))`. Returns the total norm before clipping, a
    0-d tensor (global for global parameters). `foreach` is accepted for
    compatibility; the result does not depend on it.
    """
    op = "clip_grad_norm_"
    p = _norm_type(op, norm_type)
    grads = _grads(op, parameters)
    if not grads:
        return O.tensor(0.0)
    if p == math.inf:
        total = O.total_of([O.amax(O.abs(g)) for g in grads], "max")
    else:
        total = O.total_of([O.sum(g * g) if p == 2 else O.sum(O.abs(g) ** p) for g in grads])
        total = O.sqrt(total) if p == 2 else total ** (1.0 / p)
    if error_if_nonfinite:
        if current_trace() is not None:
            raise NotImplementedError(f"{op}: error_if_nonfinite=True needs the norm's value, "
                                      "which flow.jit / nn.Graph cannot read while tracing; "
                                      "pass error_if_nonfinite=False")  # fmt: skip
        if not bool(isfinite(total).numpy()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped. To disable "
                               "this error and scale the gradients by the non-finite norm "
                               "anyway, set `error_if_nonfinite=False`")  # fmt: skip
    coef = O.minimum(float(max_norm) / (total + _EPS), 1.0)
    for g in grads:
        g.mul_(O.to(coef, g.dtype))
    return total


def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient elementwise into `[-clip_value, clip_value]`, in place."""
    op = "clip_grad_value_"
    if not isinstance(clip_value, Real):
        raise TypeError(f"{op}: expected clip_value to be a number, got "
                        f"{type(clip_value).__name__}")  # fmt: skip
    c = float(clip_value)
    for g in _grads(op, parameters):
        g.clamp_(-c, c)
