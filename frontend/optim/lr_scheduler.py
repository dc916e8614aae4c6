"""Learning-rate schedulers (`flow.optim.lr_scheduler`), with PyTorch's semantics.

A scheduler rewrites `group["lr"]` of its optimizer's param groups at each
`step()` (in place when the lr is a tensor, so a compiled training step that
takes it as an input sees the new value). `get_lr()` is PyTorch's chainable
(recursive) form, computed from the current lr; schedulers with a closed form also
define `_closed_form(base_lr, epoch)`, used by `step(epoch)`, `SequentialLR` and
`WarmupLR`.
"""

from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from flow.core.tensor import Tensor

from ._optimizer import Optimizer

__all__ = [
    "LRScheduler", "_LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR",
    "LinearLR", "CosineAnnealingLR", "CosineDecayLR", "LambdaLR", "SequentialLR", "WarmupLR",
]  # fmt: skip


def _float(lr) -> float:
    return float(lr.item()) if isinstance(lr, Tensor) else float(lr)


def _require(ok: bool, scheduler: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{scheduler}: {message}")


class LRScheduler:
    """Base class: tracks `last_epoch` and `base_lrs` and writes new lrs into the optimizer.

    On construction (`last_epoch=-1`) it records each group's lr as `initial_lr`
    and takes a first step, so the optimizer starts at the epoch-0 lr. Resuming
    (`last_epoch >= 0`) requires `initial_lr` in every group.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected a flow.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")  # fmt: skip
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _float(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: param_groups[{i}] has no "
                                   "'initial_lr', which resuming (last_epoch != -1) needs")  # fmt: skip
        self.base_lrs: list[float] = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:
        """The lrs for `self.last_epoch`, from the current lrs (chainable form)."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The lrs the last `step()` set."""
        return self._last_lr

    def _lrs(self) -> list[float]:
        return [_float(g["lr"]) for g in self.optimizer.param_groups]

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated, jump to `epoch`) and update the lrs."""
        if epoch is not None:
            warnings.warn("passing an epoch to scheduler.step() is deprecated; call step() "
                          "once per epoch instead", UserWarning, stacklevel=2)  # fmt: skip
        self._step(epoch)

    def _step(self, epoch: int | None) -> None:
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            if isinstance(group["lr"], Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr
        self._last_lr = self._lrs()

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        raise NotImplementedError(f"{type(self).__name__} has no closed form")

    def _get_closed_form_lr(self) -> list[float]:
        if type(self)._closed_form is LRScheduler._closed_form:
            return self.get_lr()
        return [self._closed_form(b, self.last_epoch) for b in self.base_lrs]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (which checkpoints itself)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


_LRScheduler = LRScheduler  # the older PyTorch name


class StepLR(LRScheduler):
    """Multiply the lr by `gamma` every `step_size` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1):  # fmt: skip
        _require(isinstance(step_size, int) and step_size >= 1, "StepLR",
                 f"step_size must be a positive int, got {step_size!r}")  # fmt: skip
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** (epoch // self.step_size)


class MultiStepLR(LRScheduler):
    """Multiply the lr by `gamma` at each epoch in `milestones` (repeats multiply again)."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1,
                 last_epoch: int = -1):  # fmt: skip
        self.milestones = Counter(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** bisect_right(sorted(self.milestones.elements()), epoch)


class ExponentialLR(LRScheduler):
    """Multiply the lr by `gamma` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma**epoch


class ConstantLR(LRScheduler):
    """Scale the lr by `factor` for the first `total_iters` epochs, then restore it."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):  # fmt: skip
        _require(0 <= factor <= 1, "ConstantLR", f"factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr / self.factor for lr in self._lrs()]

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        return base_lr * (self.factor if epoch < self.total_iters else 1.0)


class LinearLR(LRScheduler):
    """Scale the lr by a factor going linearly from `start_factor` to `end_factor` over
    `total_iters` epochs (a linear warmup when `start_factor < end_factor`)."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1):  # fmt: skip
        _require(0 < start_factor <= 1, "LinearLR",
                 f"start_factor must be in (0, 1], got {start_factor}")  # fmt: skip
        _require(0 <= end_factor <= 1, "LinearLR",
                 f"end_factor must be in [0, 1], got {end_factor}")  # fmt: skip
        _require(isinstance(total_iters, int) and total_iters >= 1, "LinearLR",
                 f"total_iters must be a positive int, got {total_iters!r}")  # fmt: skip
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [lr * s for lr in self._lrs()]
        if e > n:
            return self._lrs()
        ratio = 1 + (f - s) / (n * s + (e - 1) * (f - s))  # factor(e) / factor(e - 1)
        return [lr * ratio for lr in self._lrs()]

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        s, f, n = self.start_factor, self.end_factor, self.total_iters
        return base_lr * (s + (f - s) * min(n, epoch) / n)


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base lr to `eta_min` over `T_max` epochs (SGDR without
    restarts): `eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2`.

    `get_lr()` is PyTorch's recursive form, so it also follows lr changes made by
    other schedulers; past `T_max` the lr rises again, as in PyTorch.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1):  # fmt: skip
        _require(T_max > 0, "CosineAnnealingLR", f"T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, n, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self._lrs()
        if self._step_count == 1 and e > 0:  # constructed to resume mid-schedule
            return [self._closed_form(b, e) for b in self.base_lrs]
        if (e - 1 - n) % (2 * n) == 0:  # leaving the minimum, where the ratio below is 0/0
            return [lr + (b - lo) * (1 - math.cos(math.pi / n)) / 2
                    for lr, b in zip(self._lrs(), self.base_lrs)]  # fmt: skip
        ratio = (1 + math.cos(math.pi * e / n)) / (1 + math.cos(math.pi * (e - 1) / n))
        return [lo + ratio * (lr - lo) for lr in self._lrs()]

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        lo = self.eta_min
        return lo + (base_lr - lo) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class CosineDecayLR(LRScheduler):
    """OneFlow's cosine decay: `base_lr * ((1 - alpha) * (1 + cos(pi * t / decay_steps)) / 2
    + alpha)` with `t = min(epoch, decay_steps)`, so the lr stays at `alpha * base_lr`."""

    def __init__(self, optimizer: Optimizer, decay_steps: int, alpha: float = 0.0,
                 last_epoch: int = -1):  # fmt: skip
        _require(decay_steps > 0, "CosineDecayLR",
                 f"decay_steps must be positive, got {decay_steps}")  # fmt: skip
        self.decay_steps, self.alpha = decay_steps, alpha
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return self._get_closed_form_lr()

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        t = min(epoch, self.decay_steps)
        cosine = (1 + math.cos(math.pi * t / self.decay_steps)) / 2
        return base_lr * ((1 - self.alpha) * cosine + self.alpha)


class LambdaLR(LRScheduler):
    """`lr = base_lr * lr_lambda(epoch)`; one function, or one per param group."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | Sequence[Callable],
                 last_epoch: int = -1):  # fmt: skip
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            _require(len(lr_lambda) == n, "LambdaLR",
                     f"expected {n} lr_lambdas (one per param group), got {len(lr_lambda)}")  # fmt: skip
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        for i, fn in enumerate(self.lr_lambdas):
            if not callable(fn):
                raise TypeError(f"LambdaLR: lr_lambda {i} is a {type(fn).__name__}, "
                                "expected a function of the epoch")  # fmt: skip
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [b * fn(self.last_epoch) for b, fn in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict[str, Any]:
        """Plain functions are not saved; callable objects save their `__dict__`."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
            for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas", [])
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


class SequentialLR(LRScheduler):
    """Run `schedulers[i]` between `milestones[i - 1]` and `milestones[i]` (e.g. warmup,
    then decay); each later scheduler restarts from its epoch 0 at its milestone."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int], last_epoch: int = -1):  # fmt: skip
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"SequentialLR: expected a flow.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")  # fmt: skip
        schedulers, milestones = list(schedulers), [int(m) for m in milestones]
        _require(len(schedulers) >= 1, "SequentialLR", "expects at least one scheduler")
        for i, s in enumerate(schedulers):
            _require(s.optimizer is optimizer, "SequentialLR",
                     f"scheduler {i} belongs to a different optimizer")  # fmt: skip
        _require(len(milestones) == len(schedulers) - 1, "SequentialLR",
                 f"expects one milestone fewer than schedulers, got {len(schedulers)} "
                 f"schedulers and {len(milestones)} milestones")  # fmt: skip
        _require(milestones == sorted(milestones), "SequentialLR",
                 f"milestones must be increasing, got {milestones}")  # fmt: skip
        self.optimizer = optimizer
        self._schedulers, self._milestones = schedulers, milestones
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch + 1
        self._step_count = 1
        for group in optimizer.param_groups:  # undo the schedulers' own first steps
            group["lr"] = group["initial_lr"]
        for s in schedulers:
            s.last_epoch -= 1
        first = schedulers[bisect_right(milestones, self.last_epoch)]  # milestones may hold 0
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self._step_count += 1
        self.last_epoch += 1
        i = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[i]
        if i > 0 and self._milestones[i - 1] == self.last_epoch:
            scheduler._step(0)
        else:
            scheduler._step(None)
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        inner = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, saved in zip(self._schedulers, inner):
            s.load_state_dict(saved)


class WarmupLR(LRScheduler):
    """OneFlow's warmup: scale the lr by a warmup factor for `warmup_iters` epochs, then
    follow the wrapped scheduler (or keep the base lr when given an optimizer).

    `warmup_method="linear"` ramps the factor from `warmup_factor` to the wrapped
    scheduler's value at `warmup_iters` (to 1 with `warmup_prefix=True` or no
    scheduler); `"constant"` holds `warmup_factor`. After warmup the wrapped
    scheduler sees the global epoch, or the epoch since warmup with `warmup_prefix`.
    The wrapped scheduler must have a closed form (StepLR, MultiStepLR, ...).
    """

    def __init__(self, scheduler_or_optimizer: LRScheduler | Optimizer,
                 warmup_factor: float = 1.0 / 3, warmup_iters: int = 5,
                 warmup_method: str = "linear", warmup_prefix: bool = False,
                 last_epoch: int = -1):  # fmt: skip
        if isinstance(scheduler_or_optimizer, LRScheduler):
            scheduler, optimizer = scheduler_or_optimizer, scheduler_or_optimizer.optimizer
            if type(scheduler)._closed_form is LRScheduler._closed_form:
                raise TypeError(f"WarmupLR: cannot wrap {type(scheduler).__name__}, which has "
                                "no closed form")  # fmt: skip
        elif isinstance(scheduler_or_optimizer, Optimizer):
            scheduler, optimizer = None, scheduler_or_optimizer
        else:
            raise TypeError("WarmupLR: expected an LRScheduler or an Optimizer, got "
                            f"{type(scheduler_or_optimizer).__name__}")  # fmt: skip
        _require(warmup_method in ("linear", "constant"), "WarmupLR",
                 f"warmup_method must be 'linear' or 'constant', got {warmup_method!r}")  # fmt: skip
        _require(isinstance(warmup_iters, int) and warmup_iters >= 0, "WarmupLR",
                 f"warmup_iters must be a non-negative int, got {warmup_iters!r}")  # fmt: skip
        self.scheduler = scheduler
        self.warmup_factor, self.warmup_iters = warmup_factor, warmup_iters
        self.warmup_method, self.warmup_prefix = warmup_method, warmup_prefix
        super().__init__(optimizer, last_epoch)

    def _after(self, base_lr: float, epoch: int) -> float:
        return base_lr if self.scheduler is None else self.scheduler._closed_form(base_lr, epoch)

    def _closed_form(self, base_lr: float, epoch: int) -> float:
        n = self.warmup_iters
        if epoch >= n:
            return self._after(base_lr, epoch - n if self.warmup_prefix else epoch)
        if self.warmup_method == "constant":
            return base_lr * self.warmup_factor
        end = 1.0
        if self.scheduler is not None and not self.warmup_prefix and base_lr != 0:
            end = self._after(base_lr, n) / base_lr
        return base_lr * (self.warmup_factor + (end - self.warmup_factor) * epoch / n)

    def get_lr(self) -> list[float]:
        return self._get_closed_form_lr()

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "scheduler")}
        state["scheduler"] = None if self.scheduler is None else self.scheduler.state_dict()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        inner = state.pop("scheduler", None)
        self.__dict__.update(state)
        if inner is not None and self.scheduler is not None:
            self.scheduler.load_state_dict(inner)
