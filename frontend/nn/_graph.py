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
their micro-batches in a pipeline schedule. This class is the user's side (build, config,
optimizers); what a call does is compile/graph.py's `GraphEngine`, on `flow.jit`'s staging
path (compile/staging.py).

`state_dict()` / `load_state_dict()` save and resume the whole graph (its modules by their
names in the graph, its optimizers and schedulers, its step count); loading writes into the
tensors the compiled steps read. `print(graph)` shows OneFlow's module tree with the
inputs and outputs of each block once traced; `graph.ir()` the flow IR of the last step.
`graph.plan()` draws the parallel plan of the last traced step (`graph.plan(*inputs)` traces one
without running it): modules, SBPs, boxings, pipeline stages and schedule (flow.lowering.plan).
`flow.save(graph, dir)` exports an inference graph that has been called (its parameters, flow
IR, signature and IREE module) for `flow.load(dir)` to run without this code (_graph_export.py).
"""

from __future__ import annotations

import functools

from flow.compile.graph import GraphEngine
from flow.distributed.placement import is_global, sbp

from ._module import Module, _describe, recording_calls
from ._module_hooks import naming_scopes
from ._pipeline import check_stages

__all__ = ["Graph", "GraphConfig"]


class GraphConfig:
    """`graph.config`: per-graph settings (OneFlow's names)."""

    def __init__(self):
        self.gradient_accumulation_steps = 1
        self.pipeline_schedule = "1f1b"
        self.zero: dict | None = None  # enable_zero's settings while on
        self._zero_plan = None  # what ZeRO shards (_zero.ZeroPlan), made at the first call
        self.amp_dtype = None  # the flow.autocast dtype of build(), None: amp off

    def enable_zero(self, mode: bool = True, *, stage: int = 2, shard_min_size: int = 1024,
                    shard_restore_level: int = 1) -> None:
        """ZeRO over the data-parallel placement of the parameters (see _zero.py): stage 1
        splits optimizer state S(0), stage 2 also reduce-scatters gradients, stage 3 also keeps
        parameters S(0) between steps. Tensors with fewer than `shard_min_size` elements (or a
        dim 0 smaller than the number of ranks) stay B. `shard_restore_level` is accepted
        for OneFlow's signature; the boxing back to B is always at the parameter's use."""
        from ._zero import check_zero_args

        check_zero_args(mode, stage, shard_min_size, shard_restore_level)
        self.zero = dict(stage=stage, shard_min_size=shard_min_size) if mode else None

    def grad_layout(self, param, grad):
        """A global parameter's gradient as the traced step keeps it: boxed to the
        parameter's SBP (partial sums all-reduced once, right after backward, as OneFlow
        does), or reduce-scattered to S(0) for a parameter ZeRO stage 2 shards. So
        gradient clipping and the update read it as it is, with no boxing of their own."""
        if not is_global(param):
            return grad
        want = list(param.sbp)
        if self._zero_plan is not None and self._zero_plan.shards_grad(param):
            want = [sbp.split(0)]
        # traced, a redistribution: flow-infer-sbp boxes only what is not laid out so
        return grad.to_global(placement=param.placement, sbp=want)

    def optimizer_step(self, opt) -> None:
        """How the traced step runs `opt.step()`: sharded under ZeRO, else as it is."""
        if self._zero_plan is not None:
            self._zero_plan.optimizer_step(opt)
        else:
            opt.step()

    def enable_amp(self, mode: bool = True, *, dtype=None) -> None:
        """Run `build` under `flow.autocast` (matmul/linear/conv in `dtype`; parameters stay
        float32). The default is bfloat16, which CPUs compute natively; OneFlow's default,
        float16, is `dtype=flow.float16`. `mode=False` turns amp off again."""
        from flow.amp import autocast

        self.amp_dtype = autocast("cpu", dtype=dtype or "bfloat16").dtype if mode else None

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

    def __init__(self, *, target: str | None = None, sync_compile: bool | None = None,
                 dynamic=None):  # fmt: skip
        """`target`: where the step runs; by default the device of its tensors (inputs and
        parameters, see `flow.device`), the cpu when they have none (`self.target` is None).
        The device is decided once per input signature, when that step is first compiled.
        `sync_compile=True` compiles a new step before it runs; by default
        (`FLOW_SYNC_COMPILE` unset) it runs at once on the eager kernels while IREE compiles
        in the background, and a later call switches to the compiled step.
        `dynamic`, as for `flow.jit`: by default a dim whose size changes between calls (a
        last partial batch) becomes dynamic at its second size, so one program serves every
        size; False compiles one step per shape; dims named here (`dynamic=0`, or by the
        names of `build`'s arguments) are dynamic from the first call."""
        from flow.targets import get_target

        self.config = GraphConfig()
        self.target = get_target(target).name if target else None
        self._engine = GraphEngine(type(self).__name__, sync_compile=sync_compile,
                                   dynamic=dynamic, build=self.build)  # fmt: skip
        self._compiled = self._engine.programs  # the compiled steps, by call key
        self._io = None  # the inputs and outputs of the graph and its modules, once traced

    # ------------------------------------------------------------------ user API
    def build(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must define build(self, ...)")

    def add_optimizer(self, optimizer, *, lr_sch=None) -> None:
        """Run `optimizer.step()` after `build` in every call (and `lr_sch.step()` after it)."""
        self._engine.add_optimizer(optimizer, lr_sch)

    def set_grad_scaler(self, grad_scaler) -> None:
        """Scale the loss before `backward()` and run the optimizers through `grad_scaler`
        (a `flow.amp.GradScaler`): the step's inf/nan check, the skipped update and the new
        scale are all part of the compiled step."""
        from flow.amp import GradScaler

        if not isinstance(grad_scaler, GradScaler):
            raise TypeError(f"set_grad_scaler: expected a flow.amp.GradScaler, got "
                            f"{type(grad_scaler).__name__}")  # fmt: skip
        self._engine.grad_scaler = grad_scaler

    def debug(self, v_level: int = 0) -> None:
        """Print the flow IR of each step when it is compiled."""
        self._engine.debug = v_level >= 0

    def ir(self) -> str:
        """The flow IR of the step compiled last (`print(graph)` shows the module tree)."""
        lowered = self._engine.last_lowered
        if lowered is None:
            raise RuntimeError(f"{type(self).__name__}.ir: not compiled yet; call the graph "
                               "once to build it")  # fmt: skip
        return lowered.as_text()

    def memory_analysis(self):
        """The static memory figures of the step compiled last, like JAX's
        `compiled.memory_analysis()`: argument, output, alias and temporary bytes and the
        peak live bytes of the steady training step (of a global step, this rank's program
        after partitioning). See `flow.lowering.memory_analysis`."""
        return self._engine.memory_analysis()

    def __call__(self, *args):
        if self.config.zero is not None and self.config._zero_plan is None:
            from ._zero import ZeroPlan

            self.config._zero_plan = ZeroPlan(type(self).__name__, **self.config.zero,
                                              modules=self._modules(),
                                              optimizers=self._engine.optimizers)  # fmt: skip
        build = functools.wraps(self.build)(lambda *a: self._recorded_build(*a))
        return self._engine(args, build=build, config=self.config, target=self.target,
                            find_stages=self._find_stages)  # fmt: skip

    def _recorded_build(self, *args):
        """`build`, recording the inputs and outputs of the graph and of its modules."""
        plan = self.config._zero_plan
        with recording_calls() as calls, naming_scopes(self._scope_names()):
            if plan is None:
                out = self.build(*args)
            else:
                with plan.gathered_parameters(self._modules()):
                    out = self.build(*args)
        if self._io is None:  # the first micro-batch of the first trace
            calls[id(self)] = (_describe(args), _describe(out))
            self._io = calls
        return out

    def _scope_names(self) -> dict[int, str]:
        """id(module) -> its path in the graph (`first.0`), for the module scope of traced ops."""
        return {id(m): path for attr, module in self._modules()
                for path, m in module.named_modules(prefix=attr)}  # fmt: skip

    def plan(self, *inputs):
        """The parallel plan of this graph's step, to look at: `plan.save("plan.svg")` (or
        `.html`, `.png`), or shown in a notebook. Without inputs, the step traced last (call
        the graph first); with inputs, a step traced for them and not run."""
        from flow.lowering.plan import build_plan

        if inputs:
            build = functools.wraps(self.build)(lambda *a: self._recorded_build(*a))
            lowered = self._engine.trace_only(inputs, build=build, config=self.config,
                                              find_stages=self._find_stages)  # fmt: skip
        else:
            lowered = self._engine.last_lowered
            if lowered is None:
                raise RuntimeError(f"{type(self).__name__}.plan: not traced yet; call the graph "
                                   "once, or pass plan() its inputs")  # fmt: skip
        return build_plan(lowered.module, title=type(self).__name__)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, destination: dict | None = None) -> dict:
        """The whole state of the graph: each module's `state_dict()` under its name in the
        graph, the states of its optimizers and lr schedulers, and its step count under
        OneFlow's name for it, "System-Train-TrainStep"."""
        out = {} if destination is None else destination
        for name, module in self._modules():
            out[name] = module.state_dict()
        out.update(self._engine.state_dict())
        if self.config._zero_plan is not None:  # as a data-parallel graph has it
            from ._zero import boxed_back

            out.update(boxed_back(dict(out)))
        return out

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        """Copy `state_dict()`'s entries into this graph's modules, optimizers and schedulers,
        in place, so steps compiled already run on the loaded values. With `strict`, the
        keys must be those of `state_dict()` (and of each module's state dict)."""
        name = type(self).__name__
        if not isinstance(state_dict, dict):
            raise TypeError(f"{name}.load_state_dict: expected a dict (from state_dict()), "
                            f"got {type(state_dict).__name__}")  # fmt: skip
        modules = self._modules()
        expected = [n for n, _ in modules] + self._engine.state_keys()
        if strict:
            missing = [k for k in expected if k not in state_dict]
            unexpected = [k for k in state_dict if k not in expected]
            if missing or unexpected:
                raise KeyError(f"{name}.load_state_dict: missing keys {missing}, unexpected "
                               f"keys {unexpected}; expected the keys {expected}")  # fmt: skip
        for key, module in modules:
            if key in state_dict:
                module.load_state_dict(state_dict[key], strict=strict)
        self._engine.load_state_dict(state_dict)

    def __repr__(self) -> str:
        """OneFlow's tree: the graph, its modules nested as in `print(module)`, and once the
        graph has been traced the inputs and outputs of each (their shapes and dtypes)."""
        io = self._io or {}
        name = self._engine.name
        inputs, outputs = io.get(id(self), ([], []))
        lines = [f"(GRAPH:{name}:{type(self).__name__}): ("]
        lines += _io_lines("INPUT", f"_{name}_input", inputs, 1)
        for attr, module in self._modules():
            lines += _module_lines(attr, module, io, 1)
        lines += _io_lines("OUTPUT", f"_{name}_output", outputs, 1)
        return "\n".join(lines + [")"])

    def _modules(self) -> list[tuple[str, Module]]:
        """The modules assigned to this graph, by attribute name (its blocks)."""
        return [(attr, v) for attr, v in vars(self).items() if isinstance(v, Module)]

    def _find_stages(self) -> list:
        """The placements of the pipeline stages among this graph's modules, in order."""
        return check_stages(type(self).__name__, self._modules())


def _io_lines(tag: str, prefix: str, described: list[str], depth: int) -> list[str]:
    return [f"{'  ' * depth}({tag}:{prefix}.{i}:{d})" for i, d in enumerate(described)]


def _module_lines(path: str, module: Module, io: dict, depth: int) -> list[str]:
    """`module`'s block in `print(graph)`: its repr head, inputs, submodules and outputs."""
    pad = "  " * depth
    extra = ", ".join(module.extra_repr().split("\n"))
    inputs, outputs = io.get(id(module), ([], []))
    lines = [f"{pad}(MODULE:{path}:{module._get_name()}({extra})): ("]
    lines += _io_lines("INPUT", f"_{path}_input", inputs, depth + 1)
    for name, child in module._modules.items():
        if child is not None:
            lines += _module_lines(f"{path}.{name}", child, io, depth + 1)
    lines += _io_lines("OUTPUT", f"_{path}_output", outputs, depth + 1)
    return lines + [f"{pad})"]
