"""`flow.optim.RMSprop`: RMSprop with optional momentum and centering."""

from __future__ import annotations

from typing import Any

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core import pending
from flow.core.tensor import Tensor
from flow.ops.basic import sqrt, zeros, zeros_like

from ._optimizer import Optimizer, ParamsT, in_place_with_step

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (PyTorch's update rule).

    `v = alpha * v + (1 - alpha) * g * g`; centered: `a = alpha * a + (1 - alpha) * g`
    and `avg = sqrt(v - a * a) + eps`, else `avg = sqrt(v) + eps`; with momentum
    `buf = momentum * buf + g / avg` and `p -= lr * buf`, else `p -= lr * g / avg`.
    State: `step` (0-d float32 tensor), `square_avg`, `momentum_buffer` (momentum > 0),
    `grad_avg` (centered). `foreach=True`: see `Optimizer`.
    """

    _fused_update = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        maximize: bool = False,
        *,
        foreach: bool | None = None,
    ):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                        momentum=momentum, centered=centered, maximize=maximize,
                        foreach=foreach)  # fmt: skip
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any], index: int) -> None:
        super()._validate_group(group, index)
        self._check(group, index, "alpha", lambda v: v >= 0, "alpha >= 0")
        self._check(group, index, "eps", lambda v: v >= 0, "eps >= 0")
        self._check(group, index, "momentum", lambda v: v >= 0, "momentum >= 0")
        self._check(group, index, "weight_decay", lambda v: v >= 0, "weight_decay >= 0")

    def _initial_state(self, p: Tensor, group: dict) -> dict:
        state = {"step": zeros((), dtype=_dtypes.float32), "square_avg": zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)
        return state

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict, lr) -> None:
        alpha, momentum = group["alpha"], group["momentum"]
        if not state:
            state.update(self._initial_state(p, group))
        if _update_in_place(p, grad, state, group, lr):
            return
        grad = -grad if group["maximize"] else grad
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * p
        square_avg = state["square_avg"].mul_(alpha).add_(grad * grad * (1 - alpha))
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.add_((grad - grad_avg) * (1 - alpha))
            avg = sqrt(square_avg - grad_avg * grad_avg) + group["eps"]
        else:
            avg = sqrt(square_avg) + group["eps"]
        if momentum > 0:
            buf = state["momentum_buffer"].mul_(momentum).add_(grad / avg)
            p.sub_(buf * lr)
        else:
            p.sub_(grad / avg * lr)


def _update_in_place(p: Tensor, grad: Tensor, state: dict, group: dict, lr) -> bool:
    """`RMSprop._update` written straight into the arrays of `p` and its state, op by op with
    the kernels and number conversions the ops use (see `in_place_with_step`): the same bits.
    False: not done, take the ops."""
    alpha, momentum, eps = group["alpha"], group["momentum"], group["eps"]
    names = ["square_avg", *(["grad_avg"] if group["centered"] else []),
             *(["momentum_buffer"] if momentum > 0 else [])]  # fmt: skip
    found = in_place_with_step(p, grad, state, names, lr)
    if found is None:
        return False
    arrays, sa = found
    pa, ga, sq, *rest = arrays
    dt = pa.dtype.type  # a number next to a tensor takes the tensor's dtype
    for a in (sa, pa, sq, *rest):
        pending.before_host_write(a)
    with np.errstate(all="ignore"):  # IEEE results, as the ops give them
        g = np.negative(ga) if group["maximize"] else ga
        np.add(sa, np.float32(1), out=sa)
        if group["weight_decay"] != 0:
            g = np.add(g, np.multiply(pa, dt(group["weight_decay"])))
        g2, avg = np.empty_like(pa), np.empty_like(pa)  # (0-d too)
        np.multiply(g, g, out=g2)
        np.add(np.multiply(sq, dt(alpha), out=sq), np.multiply(g2, dt(1 - alpha), out=g2), out=sq)
        if group["centered"]:
            mean = rest.pop(0)
            np.subtract(g, mean, out=g2)
            np.add(mean, np.multiply(g2, dt(1 - alpha), out=g2), out=mean)
            np.sqrt(np.subtract(sq, np.multiply(mean, mean, out=avg), out=avg), out=avg)
        else:
            np.sqrt(sq, out=avg)
        np.add(avg, dt(eps), out=avg)
        step_dir = np.divide(g, avg, out=avg)
        if momentum > 0:
            buf = rest[0]
            np.add(np.multiply(buf, dt(momentum), out=buf), step_dir, out=buf)
            step_dir = np.multiply(buf, dt(lr), out=avg)
        else:
            np.multiply(step_dir, dt(lr), out=step_dir)
        np.subtract(pa, step_dir, out=pa)
    return True
