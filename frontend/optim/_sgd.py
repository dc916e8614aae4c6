"""`flow.optim.SGD`: stochastic gradient descent with momentum, dampening and Nesterov."""

from __future__ import annotations

from typing import Any

import numpy as np

from flow.core import pending
from flow.core.tensor import Tensor
from flow.ops.basic import zeros_like

from ._optimizer import Optimizer, ParamsT, in_place_arrays

__all__ = ["SGD"]


def _new_buffer(x: Tensor) -> Tensor:
    """A tensor object of its own holding `x`'s value, so in-place updates leave `x` alone."""
    return x.clone().detach()


class SGD(Optimizer):
    """Stochastic gradient descent (PyTorch's update rule).

    With `g` the gradient (negated when `maximize`), `g += weight_decay * p`; with
    momentum, `buf = g` on the first step and `buf = momentum * buf + (1 - dampening) * g`
    after it, then `g = g + momentum * buf` (Nesterov) or `g = buf`; finally
    `p -= lr * g`. State: `momentum_buffer` (only when `momentum != 0`). `foreach=True`
    updates all parameters of a dtype at once in a traced step (see `Optimizer`).
    """

    _fused_update = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        maximize: bool = False,
        *,
        foreach: bool | None = None,
    ):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach)  # fmt: skip
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any], index: int) -> None:
        super()._validate_group(group, index)
        self._check(group, index, "momentum", lambda v: v >= 0, "momentum >= 0")
        self._check(group, index, "weight_decay", lambda v: v >= 0, "weight_decay >= 0")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov=True requires momentum > 0 and dampening == 0, got "
                             f"momentum={group['momentum']}, dampening={group['dampening']}")  # fmt: skip

    def _initial_state(self, p: Tensor, group: dict) -> dict:
        """Without dampening, a zero buffer gives the first step's `buf = g` exactly
        (`momentum * 0 + g`); with dampening the first buffer is the gradient itself, so it is
        made on the first step."""
        if group["momentum"] != 0 and group["dampening"] == 0:
            return {"momentum_buffer": zeros_like(p)}
        return {}

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict, lr) -> None:
        buf = state.get("momentum_buffer") if group["momentum"] != 0 else None
        if _update_in_place(p, grad, buf, group, lr):
            return
        momentum, dampening = group["momentum"], group["dampening"]
        d_p = -grad if group["maximize"] else grad
        if group["weight_decay"] != 0:
            d_p = d_p + group["weight_decay"] * p
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = _new_buffer(d_p)
            else:  # momentum * buf + d_p, eagerly one op
                step = d_p if dampening == 0 else d_p * (1 - dampening)
                buf.copy_(step.add(buf, alpha=momentum))
            d_p = d_p.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.sub_(d_p, alpha=lr)


def _update_in_place(p: Tensor, grad: Tensor, buf: Tensor | None, group: dict, lr) -> bool:
    """The eager update `buf = momentum * buf + g; p -= lr * buf` (or `p -= lr * g`) written
    straight into the arrays of `p` and its buffer, with the kernels `add_scaled` runs (see
    `in_place_arrays`). Only for a number `lr` and no dampening, weight decay, Nesterov or
    maximize; False: not done, take the ops."""
    if (group["dampening"] or group["weight_decay"] or group["nesterov"] or group["maximize"]
            or isinstance(lr, Tensor) or isinstance(lr, bool)
            or (group["momentum"] != 0 and buf is None)):  # fmt: skip
        return False
    arrays = in_place_arrays(p, grad) if buf is None else in_place_arrays(p, grad, buf)
    if arrays is None:
        return False
    pa, ga = arrays[0], arrays[1]
    with np.errstate(all="ignore"):  # IEEE results, as the ops give them
        if buf is not None:  # momentum * buf + g, computed in the buffer
            ba = arrays[2]
            pending.before_host_write(ba)
            np.add(np.multiply(ba, np.asarray(group["momentum"], ba.dtype), out=ba), ga, out=ba)
            ga = ba
        scaled = np.multiply(ga, np.asarray(lr, ga.dtype), out=np.empty_like(pa))  # (0-d too)
        pending.before_host_write(pa)
        np.subtract(pa, scaled, out=pa)
    return True
