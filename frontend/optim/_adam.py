"""`flow.optim.Adam` and `flow.optim.AdamW` (decoupled weight decay)."""

from __future__ import annotations

from typing import Any

import numpy as np

from flow.core import dtypes as _dtypes
from flow.core import pending
from flow.core.tensor import Tensor
from flow.ops.basic import maximum, sqrt, zeros, zeros_like

from ._optimizer import Optimizer, ParamsT, in_place_with_step

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (PyTorch's update rule, with optional AMSGrad).

    `m = beta1 * m + (1 - beta1) * g`, `v = beta2 * v + (1 - beta2) * g * g`,
    `p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)`, where
    `v` is the running maximum of `v` under `amsgrad`. `weight_decay` adds
    `weight_decay * p` to the gradient (AdamW decays `p` directly instead).
    `do_bias_correction=False` (OneFlow) drops the `1 - beta**t` factors.

    State: `step` (a 0-d float32 tensor, so a compiled step reads it rather than
    baking it in), `exp_avg`, `exp_avg_sq` and, with `amsgrad`, `max_exp_avg_sq`.
    `foreach=True`: see `Optimizer`.
    """

    _fused_update = True

    _decoupled_weight_decay = False

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        maximize: bool = False,
        *,
        do_bias_correction: bool = True,
        foreach: bool | None = None,
    ):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        do_bias_correction=do_bias_correction, foreach=foreach)  # fmt: skip
        super().__init__(params, defaults)

    def _validate_group(self, group: dict[str, Any], index: int) -> None:
        super()._validate_group(group, index)
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{type(self).__name__}: invalid betas {betas!r} (expected a pair "
                             "(beta1, beta2))")  # fmt: skip
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"{type(self).__name__}: invalid beta parameter at index {i}: "
                                 f"{beta} (expected 0 <= betas[{i}] < 1)")  # fmt: skip
        self._check(group, index, "eps", lambda v: v >= 0, "eps >= 0")
        self._check(group, index, "weight_decay", lambda v: v >= 0, "weight_decay >= 0")

    def _initial_state(self, p: Tensor, group: dict) -> dict:
        state = {"step": zeros((), dtype=_dtypes.float32), "exp_avg": zeros_like(p),
                 "exp_avg_sq": zeros_like(p)}  # fmt: skip
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict, lr) -> None:
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"]
        if not state:
            state.update(self._initial_state(p, group))
        if _update_in_place(p, grad, state, group, lr, self._decoupled_weight_decay):
            return
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        grad = -grad if group["maximize"] else grad
        step = state["step"].add_(1)
        if wd != 0:
            if self._decoupled_weight_decay:
                p.mul_(1 - lr * wd)
            else:
                grad = grad + wd * p
        exp_avg.add_((grad - exp_avg) * (1 - beta1))
        exp_avg_sq.mul_(beta2).add_(grad * grad * (1 - beta2))
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"].copy_(maximum(state["max_exp_avg_sq"], exp_avg_sq))
        if group["do_bias_correction"]:
            t = step.to(_dtypes.promote_types(p.dtype, _dtypes.float32))
            step_size = lr / (1 - beta1**t)
            denom = sqrt(second) / sqrt(1 - beta2**t) + group["eps"]
        else:
            step_size = lr
            denom = sqrt(second) + group["eps"]
        p.sub_(exp_avg / denom * step_size)


def _update_in_place(p: Tensor, grad: Tensor, state: dict, group: dict, lr,
                     decoupled: bool) -> bool:  # fmt: skip
    """`Adam._update` written straight into the arrays of `p` and its state, op by op with the
    kernels and the number conversions the ops use (see `in_place_with_step`): the same bits.
    False: not done, take the ops."""
    names = ["exp_avg", "exp_avg_sq", *(["max_exp_avg_sq"] if group["amsgrad"] else [])]
    found = in_place_with_step(p, grad, state, names, lr)
    if found is None:
        return False
    arrays, sa = found
    pa, ga, m, v, *peak = arrays
    dt = pa.dtype.type  # a number next to a tensor takes the tensor's dtype
    beta1, beta2 = group["betas"]
    wd, eps = group["weight_decay"], group["eps"]
    for a in (sa, pa, m, v, *peak):
        pending.before_host_write(a)
    with np.errstate(all="ignore"):  # IEEE results, as the ops give them
        g = np.negative(ga) if group["maximize"] else ga
        np.add(sa, np.float32(1), out=sa)
        if wd != 0:
            if decoupled:
                np.multiply(pa, dt(1 - lr * wd), out=pa)
            else:
                g = np.add(g, np.multiply(pa, dt(wd)))
        d, g2, denom = np.empty_like(pa), np.empty_like(pa), np.empty_like(pa)  # (0-d too)
        np.subtract(g, m, out=d)
        np.add(m, np.multiply(d, dt(1 - beta1), out=d), out=m)
        np.multiply(g, g, out=g2)
        np.add(np.multiply(v, dt(beta2), out=v), np.multiply(g2, dt(1 - beta2), out=g2), out=v)
        second = v
        if peak:
            second = np.maximum(peak[0], v, out=peak[0])
        np.sqrt(second, out=denom)
        if group["do_bias_correction"]:
            t = sa.astype(dt)  # step.to(the parameter's float type)
            step_size = np.divide(dt(lr), np.subtract(dt(1), np.power(dt(beta1), t)))
            np.divide(denom, np.sqrt(np.subtract(dt(1), np.power(dt(beta2), t))), out=denom)
        else:
            step_size = dt(lr)
        np.add(denom, dt(eps), out=denom)
        update = np.multiply(np.divide(m, denom, out=denom), step_size, out=denom)
        np.subtract(pa, update, out=pa)
    return True


class AdamW(Adam):
    """Adam with decoupled weight decay: `p *= 1 - lr * weight_decay` before the Adam update."""

    _decoupled_weight_decay = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        maximize: bool = False,
        *,
        do_bias_correction: bool = True,
        foreach: bool | None = None,
    ):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize,
                         do_bias_correction=do_bias_correction, foreach=foreach)  # fmt: skip
