"""`flow.optim.RMSprop`: RMSprop with optional momentum and centering."""

from __future__ import annotations

from typing import Any

from flow.core import dtypes as _dtypes
from flow.core.tensor import Tensor
from flow.ops.basic import sqrt, zeros, zeros_like

from ._optimizer import Optimizer, ParamsT

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
