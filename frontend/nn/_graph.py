"""`flow.nn.Graph`: OneFlow's static-graph training step, compiled with IREE.

A subclass assigns modules, registers optimizers with `add_optimizer`, and
writes `build(*inputs)` with the forward pass, `loss.backward()`, and the
return value. The first call for an input signature traces `build` — forward,
backward and (added by the graph) every optimizer's `step()` — into one flow
function whose inputs and outputs include the parameters and optimizer state,
compiles it, and later calls only run it; parameters and state are written
back into the module's own tensors after each call, so `model.state_dict()`
always shows the current values. Learning rates are inputs too, so a
scheduler changing them needs no recompile.
"""

from __future__ import annotations

import functools
from typing import Any

from .._jit import Compiled, Lowered, _flatten, _signature, _trace, _unflatten
from .._tensor import Tensor


class GraphConfig:
    """`graph.config`: per-graph settings (OneFlow's names)."""

    def __init__(self):
        self.gradient_accumulation_steps = 1

    def set_gradient_accumulation_steps(self, steps: int) -> None:
        """Split each batch into `steps` micro-batches along dim 0; one optimizer step per call."""
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(
                f"set_gradient_accumulation_steps: expected an int >= 1, got {steps!r}"
            )
        self.gradient_accumulation_steps = steps


class Graph:
    """Base class of compiled training / inference steps (see the module docstring)."""

    def __init__(self, *, target: str | None = None):
        from flow.targets import DEFAULT_TARGET, get_target

        self.config = GraphConfig()
        self.target = get_target(target or DEFAULT_TARGET).name
        self._optimizers: list = []
        self._schedulers: list = []
        self._compiled: dict[tuple, Compiled] = {}
        self._last_lowered: Lowered | None = None
        self._debug = False

    # ------------------------------------------------------------------ user API
    def build(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must define build(self, ...)")

    def add_optimizer(self, optimizer, *, lr_sch=None) -> None:
        """Run `optimizer.step()` after `build` in every call (and `lr_sch.step()` after it)."""
        self._optimizers.append(optimizer)
        if lr_sch is not None:
            self._schedulers.append(lr_sch)

    def debug(self, v_level: int = 0) -> None:
        """Print the flow IR of each step when it is compiled."""
        self._debug = v_level >= 0

    def __call__(self, *args):
        leaves, _ = _flatten(list(args))
        self._lift_learning_rates()
        key = (_signature(leaves), self.target)
        compiled = self._compiled.get(key)
        if compiled is None:
            lowered = _trace(self._traced_step(), type(self).__name__, args, born=self._new_state)
            if self._debug:
                print(lowered.as_text())
            first = lowered.compile(self.target)
            self._last_lowered = lowered
            if lowered.born:  # optimizer state made by this first step: compile the steady step
                out = first._call_flat(leaves)
                self._after_step()
                self._compiled[key] = _trace_and_compile(self, args)
                return out
            compiled = self._compiled[key] = first
        out = compiled._call_flat(leaves)
        self._after_step()
        return out

    def __repr__(self) -> str:
        if self._last_lowered is None:
            return f"{type(self).__name__}(not compiled yet; call it once to build the graph)"
        return f"{type(self).__name__}:\n{self._last_lowered.as_text()}"

    # ------------------------------------------------------------------ internals
    def _params(self) -> list[Tensor]:
        return [p for opt in self._optimizers for g in opt.param_groups for p in g["params"]]

    def _lift_learning_rates(self) -> None:
        """Make every group's lr a 0-d tensor, so it is an input of the compiled step."""
        from .._ops import tensor

        for opt in self._optimizers:
            for group in opt.param_groups:
                if not isinstance(group["lr"], Tensor):
                    group["lr"] = tensor(float(group["lr"]), dtype="float32")

    def _traced_step(self):
        """`_step`, carrying `build`'s signature so the IR names arguments like the user."""
        return functools.wraps(self.build)(lambda *args: self._step(*args))

    def _step(self, *args):
        """What the graph traces: micro-batches of `build`, then the optimizer steps."""
        params = self._params()
        saved_grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        try:
            n = self.config.gradient_accumulation_steps
            if n == 1:
                out = self.build(*args)
            else:
                outs = [self.build(*chunk) for chunk in _micro_batches(args, n)]
                out = _merge_outputs(outs)
                for p in params:
                    if p.grad is not None:
                        p.grad = p.grad / n
            for opt in self._optimizers:
                opt.step()
        finally:
            for p, g in zip(params, saved_grads):
                p.grad = g
        return out

    def _new_state(self, trace) -> list[Tensor]:
        """Optimizer state tensors the traced step created (first-step initialization)."""
        born = []
        for opt in self._optimizers:
            for state in opt.state.values():
                for v in state.values():
                    if (
                        isinstance(v, Tensor)
                        and v._trace is trace
                        and all(v is not b for b in born)
                    ):
                        born.append(v)
        return born

    def _after_step(self) -> None:
        for sch in self._schedulers:
            sch.step()


def _trace_and_compile(graph: Graph, args) -> Compiled:
    lowered = _trace(graph._traced_step(), type(graph).__name__, args, born=graph._new_state)
    if lowered.born:
        raise RuntimeError(
            f"{type(graph).__name__}: optimizer state is still being created on the second step; "
            "an optimizer must create its state on its first step"
        )
    if graph._debug:
        print(lowered.as_text())
    graph._last_lowered = lowered
    return lowered.compile(graph.target)


def _micro_batches(args: tuple, n: int) -> list[tuple]:
    """Split every tensor argument along dim 0 into `n` equal micro-batches."""
    from .._movement import chunk
    from .._primitives import op_error

    leaves, tree = _flatten(list(args))
    pieces: list[list[Any]] = [[] for _ in range(n)]
    for x in leaves:
        if isinstance(x, Tensor):
            if x.ndim == 0 or x.shape[0] % n:
                raise op_error("Graph", f"gradient accumulation over {n} micro-batches needs a "
                               f"batch dim divisible by {n}, got an input of shape "
                               f"{list(x.shape)}")  # fmt: skip
            parts = chunk(x, n, 0)
        else:
            parts = [x] * n
        for i in range(n):
            pieces[i].append(parts[i])
    return [tuple(_unflatten(tree, p)) for p in pieces]


def _merge_outputs(outs: list):
    """Mean of scalar outputs (losses), concatenation along dim 0 of the others."""
    from .._movement import cat, stack
    from .._ops import mean

    leaves0, tree = _flatten(outs[0])
    per = [(_flatten(o)[0]) for o in outs]
    merged = []
    for i, first in enumerate(leaves0):
        column = [p[i] for p in per]
        if isinstance(first, Tensor) and first.ndim == 0:
            merged.append(mean(stack(column)))
        elif isinstance(first, Tensor):
            merged.append(cat(column, 0))
        else:
            merged.append(first)
    return _unflatten(tree, merged)
