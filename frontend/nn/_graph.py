"""`flow.nn.Graph`: OneFlow's static-graph training step, compiled with IREE.

A subclass assigns modules, registers optimizers with `add_optimizer`, and
writes `build(*inputs)` with the forward pass, `loss.backward()`, and the
return value. The first call for an input signature traces `build` — forward,
backward and (added by the graph) every optimizer's `step()` — into one flow
function whose inputs and outputs include the parameters and optimizer state,
compiles it, and later calls only run it; parameters and state are written
back into the module's own tensors after each call, so `model.state_dict()`
always shows the current values. Learning rates are inputs too, so a
scheduler changing them needs no recompile. Modules set as pipeline stages
(`module.to(flow.nn.graph.GraphModule).set_stage(...)`, see _pipeline.py) run
their micro-batches in a pipeline schedule.
"""

from __future__ import annotations

import functools
from typing import Any

from flow.core import device as _device
from flow.compile.jit import Compiled, Lowered
from flow.compile.staging import signature as _signature, stage as _trace
from flow.core.pytree import flatten as _flatten, unflatten as _unflatten
from flow.core.tensor import Tensor
from ._pipeline import check_stages


class GraphConfig:
    """`graph.config`: per-graph settings (OneFlow's names)."""

    def __init__(self):
        self.gradient_accumulation_steps = 1
        self.pipeline_schedule = "1f1b"

    def set_gradient_accumulation_steps(self, steps: int) -> None:
        """Split each batch into `steps` micro-batches along dim 0; one optimizer step per call."""
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(
                f"set_gradient_accumulation_steps: expected an int >= 1, got {steps!r}"
            )
        self.gradient_accumulation_steps = steps

    def set_pipeline_schedule(self, schedule: str) -> None:
        """How pipeline stages order their micro-batches: "1f1b" (default: a stage keeps
        the activations of at most as many micro-batches as there are stages after it) or
        "gpipe" (every forward, then every backward)."""
        from flow.lowering.pipeline_schedule import SCHEDULES

        if schedule not in SCHEDULES:
            raise ValueError(
                f"set_pipeline_schedule: expected one of {', '.join(SCHEDULES)}, got {schedule!r}"
            )
        self.pipeline_schedule = schedule


class Graph:
    """Base class of compiled training / inference steps (see the module docstring)."""

    def __init__(self, *, target: str | None = None):
        """`target`: where the step runs; by default the device of its tensors (inputs and
        parameters, see `flow.device`), the cpu when they have none (`self.target` is None)."""
        from flow.targets import get_target

        self.config = GraphConfig()
        self.target = get_target(target).name if target else None
        self._optimizers: list = []
        self._schedulers: list = []
        self._compiled: dict[tuple, Compiled] = {}
        self._last_lowered: Lowered | None = None
        self._stages: list = []  # placements of the pipeline stages, in order (see _pipeline)
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
        key = (_signature(leaves), self.target, _device.of_all(leaves))
        compiled = self._compiled.get(key)
        if compiled is None:
            lowered = self._lower(args)
            if self._debug:
                print(lowered.as_text())
            tensors = [*leaves, *lowered.captured]
            target = _device.program_target(self.target, tensors, type(self).__name__)
            first = lowered.compile(target)
            self._last_lowered = lowered
            if lowered.born:  # optimizer state made by this first step: compile the steady step
                try:
                    out = first.call_flat(leaves)
                except BaseException:  # e.g. a failed index check: no state was made, as eagerly
                    self._forget_state(lowered.born)
                    raise
                self._after_step()
                self._compiled[key] = _trace_and_compile(self, args, target)
                return out
            compiled = self._compiled[key] = first
        out = compiled.call_flat(leaves)
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
        from flow.ops.basic import tensor

        for opt in self._optimizers:
            for group in opt.param_groups:
                if not isinstance(group["lr"], Tensor):
                    group["lr"] = tensor(float(group["lr"]), dtype="float32")

    def _lower(self, args) -> Lowered:
        """Trace one step; a pipeline's module also lists its stages and schedule."""
        self._stages = check_stages(self)
        lowered = _trace(self._traced_step(), type(self).__name__, args, born=self._new_state)
        if self._stages:
            from xdsl.dialects.builtin import ArrayAttr, StringAttr

            from flow.lowering.pipeline_schedule import SCHEDULE_ATTR, STAGES_ATTR

            attrs = lowered.module.attributes
            attrs[STAGES_ATTR] = ArrayAttr([pl.attr for pl in self._stages])
            attrs[SCHEDULE_ATTR] = StringAttr(self.config.pipeline_schedule)
        return lowered

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
            if n == 1 and not self._stages:
                out = self.build(*args)
            else:
                chunks = _micro_batches(args, n) if n > 1 else [args]
                outs = []
                for k, chunk in enumerate(chunks):
                    with _phase("forward", k, self._stages):
                        outs.append(self.build(*chunk))
                with _phase("update", 0, self._stages):
                    out = _merge_outputs(outs) if n > 1 else outs[0]
                    for p in params:
                        if p.grad is not None and n > 1:
                            p.grad = p.grad / n
            with _phase("update", 0, self._stages):
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

    def _forget_state(self, born: list[Tensor]) -> None:
        """Drop the optimizer state entries holding `born` (still traced values of a first
        step that raised), so the next call starts from no state, as after a failed eager step."""
        for opt in self._optimizers:
            for p in [p for p, st in opt.state.items()
                      if any(v is b for v in st.values() for b in born)]:  # fmt: skip
                del opt.state[p]

    def _after_step(self) -> None:
        for sch in self._schedulers:
            sch.step()


def _phase(phase: str, micro_batch: int, stages: list):
    """Tag what a pipeline's trace emits with its phase and micro-batch (else nothing)."""
    import contextlib

    from flow.core.trace import current_trace

    trace = current_trace()
    if not stages or trace is None:
        return contextlib.nullcontext()
    from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64

    from flow.lowering.pipeline_schedule import MICRO_BATCH_ATTR, PHASE_ATTR

    return trace.tagged(
        **{PHASE_ATTR: StringAttr(phase), MICRO_BATCH_ATTR: IntegerAttr(micro_batch, i64)}
    )


def _trace_and_compile(graph: Graph, args, target: str) -> Compiled:
    lowered = graph._lower(args)
    if lowered.born:
        raise RuntimeError(
            f"{type(graph).__name__}: optimizer state is still being created on the second step; "
            "an optimizer must create its state on its first step"
        )
    if graph._debug:
        print(lowered.as_text())
    graph._last_lowered = lowered
    return lowered.compile(target)


def _micro_batches(args: tuple, n: int) -> list[tuple]:
    """Split every tensor argument along dim 0 into `n` equal micro-batches."""
    from flow.ops.movement import chunk
    from flow.core.errors import op_error

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
    from flow.ops.movement import cat, stack
    from flow.ops.basic import mean

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
