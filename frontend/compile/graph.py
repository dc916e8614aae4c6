"""The engine of `nn.Graph`: what calling a graph does, on the staging path `flow.jit` uses.

A call lifts every optimizer's learning rate to a 0-d tensor (an input of the step, so a
scheduler changing it needs no recompile), then takes the call's key before tracing
anything (`ProgramCache.lookup`, compile/staging.py). On a new key it traces one step —
`build` on the whole batch or on each micro-batch (gradient accumulation), tagged with its
phase and micro-batch when the graph has pipeline stages, then every optimizer's
`step()` — and compiles it on the device decided once for that key. A first step that
creates optimizer state returns the state as extra results: it runs once, and the steady
step (which reads that state) is traced and compiled for the same key and device; an
optimizer that can make its state before a step (zeros) makes it before the first trace,
so that step is the steady one and one program serves every call. After each call the
learning-rate schedulers step.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from flow.core import profiling
from flow.core.pytree import flatten, unflatten
from flow.core.tensor import Tensor
from flow.core.trace import current_trace
from flow.dialect.attr_names import MICRO_BATCH_ATTR, PHASE_ATTR, SCHEDULE_ATTR, STAGES_ATTR

from .stages import Lowered
from .staging import ProgramCache, stage

__all__ = ["GraphEngine", "TRAIN_STEP_KEY"]

TRAIN_STEP_KEY = "System-Train-TrainStep"  # OneFlow's name of a graph's step counter


class GraphEngine:
    """The compiled steps of one graph and the optimizers they run.

    `name` names the traced function and the graph in errors. The graph hands each call
    what it defines: `build`, its config (`gradient_accumulation_steps`,
    `pipeline_schedule`), its target (None: the device of its tensors) and `find_stages`,
    which returns the placements of its pipeline stages in order ([] without stages) and
    runs whenever a step is traced."""

    def __init__(self, name: str, *, sync_compile: bool | None = None, dynamic=None,
                 build: Callable | None = None):  # fmt: skip
        self.name = name
        self.optimizers: list = []
        self.schedulers: list = []
        # the steps, by call key (`build` names the arguments `dynamic` marks)
        self.programs = ProgramCache(name, sync_compile=sync_compile, dynamic=dynamic, fn=build)
        self.last_lowered: Lowered | None = None
        self.last_target: str | None = None  # the device target of the step compiled last
        self.stages: list = []  # placements of the pipeline stages of the last trace
        self.debug = False  # print each step's flow IR when it is compiled
        self.step_count = 0  # calls run (training steps, in a graph with optimizers)
        self.grad_scaler = None  # a flow.amp.GradScaler run inside the step (set_grad_scaler)

    def add_optimizer(self, optimizer, lr_sch=None) -> None:
        self.optimizers.append(optimizer)
        if lr_sch is not None:
            self.schedulers.append(lr_sch)

    def __call__(self, args: tuple, *, build: Callable, config: Any, target: str | None,
                 find_stages: Callable[[], list]):  # fmt: skip
        """Run one step on `args`, tracing and compiling it first for a new call key."""
        rec = profiling.ACTIVE
        if rec is not None:
            info = {"graph": self.name, "step": self.step_count}
            if self.stages:
                info.update(_pipeline_info(self.stages, config))
            with rec.span(f"nn.Graph {self.name}", "graph", info):
                return self._call(args, build, config, target, find_stages)
        return self._call(args, build, config, target, find_stages)

    def _call(self, args: tuple, build: Callable, config: Any, target: str | None,
              find_stages: Callable[[], list]):  # fmt: skip
        self._lift_learning_rates()
        with _amp(config):  # the key tells steps traced with and without enable_amp apart
            leaves, key, compiled = self.programs.lookup(args, target)
        if compiled is None:
            return self._first_call(key, args, leaves, build, config, find_stages)
        out = compiled.call_flat(leaves)
        self._after_step()
        return out

    def _first_call(self, key: tuple, args: tuple, leaves: list, build: Callable, config: Any,
                    find_stages: Callable[[], list]):  # fmt: skip
        """Trace, compile and run the first step of `key`.

        The optimizers make their state first where they can before a step
        (`Optimizer.init_state`), so the traced step is the steady one: one program serves
        every call. A step that still creates state returns it as extra results, runs once,
        and the steady step is then traced and compiled for the same key and device. If the
        step fails before it ran, the state made for it is dropped again, as after a failed
        eager step."""
        given = [(opt, p) for opt in self.optimizers for p in opt.init_state()]
        lowered = None
        try:
            lowered = self.lower(args, build, config, find_stages)
            if self.debug:
                print(lowered.as_text())
            device_target = self.programs.device_target(key, lowered, leaves)
            retrace = lambda a: self.lower(a, build, config, find_stages)  # noqa: E731
            compiled = self.programs.compile(key, lowered, leaves, device_target,
                                             store=not lowered.born, retrace=retrace)  # fmt: skip
            self.last_lowered, self.last_target = lowered, device_target
            out = compiled.call_flat(leaves)
        except BaseException:
            if lowered is not None:
                self._forget_state(lowered.born)
            for opt, p in given:
                opt.state.pop(p, None)
            raise
        self._after_step()
        if lowered.born:  # optimizer state made by this first step: compile the steady step
            self._compile_steady(key, args, leaves, device_target, build, config, find_stages)
        return out

    def trace_only(self, args: tuple, *, build: Callable, config: Any,
                   find_stages: Callable[[], list]) -> Lowered:  # fmt: skip
        """Trace the step of `args` without compiling or running it (to look at its plan).
        Optimizer state a step would create stays as it was."""
        self._lift_learning_rates()
        given = [(opt, p) for opt in self.optimizers for p in opt.init_state()]
        try:
            lowered = self.lower(args, build, config, find_stages)
            self._forget_state(lowered.born)
        finally:
            for opt, p in given:
                opt.state.pop(p, None)
        return lowered

    def lower(self, args: tuple, build: Callable, config: Any,
              find_stages: Callable[[], list]) -> Lowered:  # fmt: skip
        """Trace one step; a pipeline's module also lists its stages and schedule."""
        self.stages = find_stages()
        step = functools.wraps(build)(lambda *a: self._step(build, config, *a))  # build's names
        lowered = stage(step, self.name, args, born=self._new_state)
        if self.stages:
            from xdsl.dialects.builtin import ArrayAttr, StringAttr

            attrs = lowered.module.attributes
            attrs[STAGES_ATTR] = ArrayAttr([pl.attr for pl in self.stages])
            attrs[SCHEDULE_ATTR] = StringAttr(config.pipeline_schedule)
        return lowered

    def _compile_steady(self, key: tuple, args: tuple, leaves: list, device_target: str,
                        build: Callable, config: Any, find_stages: Callable[[], list]) -> None:  # fmt: skip
        lowered = self.lower(args, build, config, find_stages)
        if lowered.born:
            raise RuntimeError(
                f"{self.name}: optimizer state is still being created on the second step; "
                "an optimizer must create its state on its first step"
            )
        if self.debug:
            print(lowered.as_text())
        self.last_lowered, self.last_target = lowered, device_target
        self.programs.compile(key, lowered, leaves, device_target,
                              retrace=lambda a: self.lower(a, build, config, find_stages))

    def memory_analysis(self):
        """The static memory figures of the step compiled last (the steady step, which reads
        the optimizer state; of a global step this rank's program): see
        `frontend/compile/stages.py: Lowered.memory_analysis`."""
        if self.last_lowered is None:
            raise RuntimeError(f"{self.name}.memory_analysis: not compiled yet; call the graph "
                               "once to build it")  # fmt: skip
        return self.last_lowered.memory_analysis(self.last_target)

    def _params(self) -> list[Tensor]:
        return [p for opt in self.optimizers for g in opt.param_groups for p in g["params"]]

    def _lift_learning_rates(self) -> None:
        """Make every group's lr a 0-d tensor, so it is an input of the compiled step."""
        from flow.ops.basic import tensor

        for opt in self.optimizers:
            for group in opt.param_groups:
                if not isinstance(group["lr"], Tensor):
                    group["lr"] = tensor(float(group["lr"]), dtype="float32")

    def _step(self, build: Callable, config: Any, *args):
        """What the graph traces: micro-batches of `build`, then the optimizer steps."""
        from flow.core import autograd

        params = self._params()
        saved_grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        scaler = self.grad_scaler
        if scaler is not None:
            autograd.OUTPUT_HOOK[0] = scaler.scale  # loss.backward() differentiates loss * scale
        layout = getattr(config, "grad_layout", None)
        if config.gradient_accumulation_steps == 1:  # else once, on the accumulated sum
            autograd.GRAD_HOOK[0] = layout
        try:
            with _amp(config):
                out = self._forward_backward(build, config, params, args)
            autograd.OUTPUT_HOOK[0] = autograd.GRAD_HOOK[0] = None
            with _phase("update", 0, self.stages), _scoped("optimizer"):
                run = getattr(config, "optimizer_step", None)  # ZeRO's sharded update
                if scaler is not None:
                    scaler.graph_step(self.optimizers, run)
                else:
                    for opt in self.optimizers:
                        run(opt) if run is not None else opt.step()
        finally:
            autograd.OUTPUT_HOOK[0] = autograd.GRAD_HOOK[0] = None
            for p, g in zip(params, saved_grads):
                p.grad = g
        return out

    def _forward_backward(self, build: Callable, config: Any, params: list, args: tuple):
        """`build` on the whole batch, or on each micro-batch (gradient accumulation)."""
        n = config.gradient_accumulation_steps
        if n == 1 and not self.stages:
            return build(*args)
        chunks = _micro_batches(args, n) if n > 1 else [args]
        outs = []
        for k, chunk in enumerate(chunks):
            with _phase("forward", k, self.stages):
                outs.append(build(*chunk))
        with _phase("update", 0, self.stages):
            out = _merge_outputs(outs) if n > 1 else outs[0]
            layout = getattr(config, "grad_layout", None)
            for p in params:
                if p.grad is not None and n > 1:
                    p.grad = p.grad / n
                    if layout is not None:
                        p.grad = layout(p, p.grad)
        return out

    def _new_state(self, trace) -> list[Tensor]:
        """Optimizer state tensors the traced step created (first-step initialization)."""
        born = []
        for opt in self.optimizers:
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
        for opt in self.optimizers:
            for p in [p for p, st in opt.state.items()
                      if any(v is b for v in st.values() for b in born)]:  # fmt: skip
                del opt.state[p]

    def _after_step(self) -> None:
        self.step_count += 1
        for sch in self.schedulers:
            sch.step()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The optimizers', schedulers' and grad scaler's states and the step count, by
        `state_keys`."""
        from flow.ops.basic import tensor

        out: dict[str, Any] = {}
        for key, obj in self._stateful():
            out[key] = obj.state_dict()
        out[TRAIN_STEP_KEY] = tensor(self.step_count, dtype="int64")
        return out

    def state_keys(self) -> list[str]:
        return [key for key, _ in self._stateful()] + [TRAIN_STEP_KEY]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the entries of `state_dict()` that `state` has. The optimizers write the
        values into the tensors they hold, which the compiled steps read at each call."""
        for key, obj in self._stateful():
            if key in state:
                obj.load_state_dict(state[key])
        if TRAIN_STEP_KEY in state:
            step = state[TRAIN_STEP_KEY]
            self.step_count = int(step.item() if isinstance(step, Tensor) else step)

    def _stateful(self) -> list[tuple[str, Any]]:
        scaler = [] if self.grad_scaler is None else [("_grad_scaler", self.grad_scaler)]
        return ([(f"_optimizer_{i}", opt) for i, opt in enumerate(self.optimizers)]
                + [(f"_lr_scheduler_{i}", s) for i, s in enumerate(self.schedulers)]
                + scaler)  # fmt: skip


def _pipeline_info(stages: list, config: Any) -> dict:
    """A pipelined step's span args: this rank's stage and the order of its slots in the
    schedule (what flow-pipeline-schedule orders the compiled program by; the interpreted tier
    records its slots as they run, compile/interpret.py)."""
    from flow.distributed import env
    from flow.lowering.pipeline_schedule import schedule_slots

    rank = env.get_rank()
    mine = [i for i, pl in enumerate(stages) if rank in _flat(pl.ranks)]
    m = getattr(config, "gradient_accumulation_steps", 1)
    schedule = getattr(config, "pipeline_schedule", "1f1b")
    info = {"stages": len(stages), "schedule": schedule, "micro_batches": m}
    if mine:
        order = schedule_slots(schedule, len(stages), mine[0], m)
        info["stage"] = mine[0]
        info["slots"] = " ".join(f"{p[0].upper()}{k}" for p, k in order if p != "update") + " U"
    return info


def _flat(ranks) -> list:
    return [r for x in ranks for r in (_flat(x) if isinstance(x, (list, tuple)) else [x])]


def _amp(config: Any):
    """`flow.autocast` in the graph's amp dtype (`config.enable_amp`), a no-op without it."""
    from flow.amp import autocast

    dtype = getattr(config, "amp_dtype", None)
    return autocast("cpu", dtype=dtype, enabled=dtype is not None)


def _phase(phase: str, micro_batch: int, stages: list):
    """Tag what a pipeline's trace emits with its phase and micro-batch (else nothing)."""
    trace = current_trace()
    if not stages or trace is None:
        return contextlib.nullcontext()
    from xdsl.dialects.builtin import IntegerAttr, StringAttr, i64

    return trace.tagged(
        **{PHASE_ATTR: StringAttr(phase), MICRO_BATCH_ATTR: IntegerAttr(micro_batch, i64)}
    )


def _scoped(scope: str):
    """Name what the trace emits with `scope` (see `Trace.scoped`); a no-op outside a trace."""
    trace = current_trace()
    return contextlib.nullcontext() if trace is None else trace.scoped(scope)


def _micro_batches(args: tuple, n: int) -> list[tuple]:
    """Split every tensor argument along dim 0 into `n` equal micro-batches."""
    from flow.core.errors import op_error
    from flow.ops.movement import chunk

    leaves, tree = flatten(list(args))
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
    return [tuple(unflatten(tree, p)) for p in pieces]


def _merge_outputs(outs: list):
    """Mean of scalar outputs (losses), concatenation along dim 0 of the others."""
    from flow.ops.basic import mean
    from flow.ops.movement import cat, stack

    leaves0, tree = flatten(outs[0])
    per = [flatten(o)[0] for o in outs]
    merged = []
    for i, first in enumerate(leaves0):
        column = [p[i] for p in per]
        if isinstance(first, Tensor) and first.ndim == 0:
            merged.append(mean(stack(column)))
        elif isinstance(first, Tensor):
            merged.append(cat(column, 0))
        else:
            merged.append(first)
    return unflatten(tree, merged)
