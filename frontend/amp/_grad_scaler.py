"""`flow.amp.GradScaler` / `StaticGradScaler`: dynamic loss scaling (PyTorch's API).

The scale and the growth counter are 0-d flow tensors and every decision is written with flow
ops (`where`), so the same code runs eagerly and inside a traced `nn.Graph` step, where the
whole of it — unscaling, the inf/nan check, the skipped or applied update, the new scale —
is part of the compiled program (`graph_step`), with no round trip to the host.
"""

from __future__ import annotations

from flow.core.autograd import no_grad
from flow.core.tensor import Tensor

__all__ = ["GradScaler", "StaticGradScaler"]


def _params(optimizer) -> list[Tensor]:
    return [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]


def _finite(grads: list[Tensor]) -> Tensor:
    """0-d bool: every element of every gradient is finite (inf/nan propagate through sums)."""
    from flow.ops.basic import sum as _sum
    from flow.ops.basic import total_of
    from flow.ops.logical import isfinite

    return isfinite(total_of([_sum(g.float()) for g in grads]))


class GradScaler:
    """``GradScaler(init_scale=2.**16, growth_factor=2., backoff_factor=.5,
    growth_interval=2000, enabled=True)``: multiply the loss by ``scale`` before backward
    (`scale`), divide the gradients by it (`unscale_`), skip the optimizer step when a gradient
    is inf/nan (`step`), and halve the scale then, or grow it after ``growth_interval`` finite
    steps in a row (`update`)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):  # fmt: skip
        from flow.ops.basic import tensor

        name = type(self).__name__
        if not init_scale > 0:
            raise ValueError(f"{name}: expected init_scale > 0, got {init_scale!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"{name}: expected growth_factor > 1, got {growth_factor!r}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"{name}: expected 0 < backoff_factor < 1, got {backoff_factor!r}")
        if not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError(f"{name}: expected an int growth_interval >= 1, got "
                             f"{growth_interval!r}")  # fmt: skip
        self._enabled = bool(enabled)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._scale = tensor(float(init_scale), dtype="float32")
        self._growth_tracker = tensor(0, dtype="int32")
        self._found_finite: dict[int, Tensor] = {}  # id(optimizer) -> 0-d bool, per step

    # ------------------------------------------------------------------ PyTorch's API
    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return float(self._scale.item()) if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, outputs):
        """`outputs` (a tensor, or a list/tuple of them) multiplied by the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale.to(outputs.dtype)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"{type(self).__name__}.scale: expected a tensor or a list/tuple of "
                        f"tensors, got {type(outputs).__name__}")  # fmt: skip

    def unscale_(self, optimizer) -> None:
        """Divide the gradients of `optimizer`'s parameters by the scale, in place, and note
        whether they are all finite (once per optimizer between two `update` calls)."""
        if not self._enabled:
            return
        if id(optimizer) in self._found_finite:
            raise RuntimeError(f"{type(self).__name__}.unscale_: already called on this "
                               "optimizer since the last update()")  # fmt: skip
        params = _params(optimizer)
        with no_grad():
            inv = 1.0 / self._scale
            for p in params:
                p.grad = p.grad * inv.to(p.grad.dtype)
            self._found_finite[id(optimizer)] = _finite([p.grad for p in params])

    def step(self, optimizer, *args, **kwargs):
        """Unscale (unless `unscale_` did), then `optimizer.step()` unless a gradient is inf or
        nan; returns what the step returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._found_finite:
            self.unscale_(optimizer)
        if bool(self._found_finite[id(optimizer)].item()):
            return optimizer.step(*args, **kwargs)
        return None

    def update(self, new_scale=None) -> None:
        """Back off (inf/nan seen this step) or count a finite step and grow the scale every
        `growth_interval` of them; `new_scale` sets the scale instead."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, Tensor) else new_scale
            self._scale.copy_(self._scale * 0 + float(value))
        elif self._found_finite:
            from flow.ops.logical import logical_and

            finite = None
            for f in self._found_finite.values():
                finite = f if finite is None else logical_and(finite, f)
            self._update_scale(finite)
        self._found_finite = {}

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": int(self._growth_tracker.item())}  # fmt: skip

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise RuntimeError(f"{type(self).__name__}.load_state_dict: the state dict is "
                               "empty (saved from a disabled scaler?)")  # fmt: skip
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._scale.copy_(self._scale * 0 + float(state_dict["scale"]))
        self._growth_tracker.copy_(self._growth_tracker * 0 + int(state_dict["_growth_tracker"]))

    # ------------------------------------------------------------------ in flow ops
    def _update_scale(self, finite: Tensor) -> None:
        """The new scale and growth counter from `finite` (0-d bool), as flow ops."""
        from flow.ops.basic import where

        with no_grad():
            count = where(finite, self._growth_tracker + 1, self._growth_tracker * 0)
            grow = count >= self._growth_interval
            scale = where(finite, where(grow, self._scale * self._growth_factor, self._scale),
                          self._scale * self._backoff_factor)  # fmt: skip
            self._scale.copy_(scale)
            self._growth_tracker.copy_(where(grow, count * 0, count))

    def graph_step(self, optimizers: list, step=None) -> None:
        """nn.Graph's step with this scaler (the loss was scaled before backward): unscale,
        one finiteness check over all gradients, every optimizer's update (`step(opt)`, by
        default `opt.step()`; ZeRO's sharded one under enable_zero) kept only where the
        gradients are finite (`where(finite, new, old)` for parameters and state), and the
        scale update — all of it in the traced program."""
        from flow.ops.basic import where

        step = step or (lambda opt: opt.step())
        if not self._enabled:
            for opt in optimizers:
                step(opt)
            return
        params = [p for opt in optimizers for p in _params(opt)]
        with no_grad():
            inv = 1.0 / self._scale
            for p in params:
                p.grad = p.grad * inv.to(p.grad.dtype)
            finite = _finite([p.grad for p in params])
            # parameters and optimizer state before the step, as values of the trace (`v * 1`:
            # a detached alias would be captured as a separate input, stale after a call)
            before = {}
            for opt in optimizers:
                for p in _params(opt):
                    for v in [p, *opt.state.get(p, {}).values()]:
                        if isinstance(v, Tensor):
                            before[id(v)] = (v, v * 1)
            for opt in optimizers:
                step(opt)
            for v, old in before.values():
                v.copy_(where(finite, v, old))
        self._update_scale(finite)


class StaticGradScaler(GradScaler):
    """``StaticGradScaler(scale)``: a fixed loss scale (OneFlow); steps with inf/nan
    gradients are still skipped, and the scale never changes."""

    def __init__(self, scale_factor: float):
        super().__init__(init_scale=scale_factor, growth_interval=2**31 - 1)

    def _update_scale(self, finite: Tensor) -> None:
        return None
