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
"""

from __future__ import annotations

from flow.compile.graph import GraphEngine

from ._module import Module
from ._pipeline import check_stages

__all__ = ["Graph", "GraphConfig"]


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

    def __init__(self, *, target: str | None = None, sync_compile: bool | None = None):
        """`target`: where the step runs; by default the device of its tensors (inputs and
        parameters, see `flow.device`), the cpu when they have none (`self.target` is None).
        The device is decided once per input signature, when that step is first compiled.
        `sync_compile=True` compiles a new step before it runs; by default
        (`FLOW_SYNC_COMPILE` unset) it runs at once on the eager kernels while IREE compiles
        in the background, and a later call switches to the compiled step."""
        from flow.targets import get_target

        self.config = GraphConfig()
        self.target = get_target(target).name if target else None
        self._engine = GraphEngine(type(self).__name__, sync_compile=sync_compile)
        self._compiled = self._engine.programs  # the compiled steps, by call key

    # ------------------------------------------------------------------ user API
    def build(self, *args):
        raise NotImplementedError(f"{type(self).__name__} must define build(self, ...)")

    def add_optimizer(self, optimizer, *, lr_sch=None) -> None:
        """Run `optimizer.step()` after `build` in every call (and `lr_sch.step()` after it)."""
        self._engine.add_optimizer(optimizer, lr_sch)

    def debug(self, v_level: int = 0) -> None:
        """Print the flow IR of each step when it is compiled."""
        self._engine.debug = v_level >= 0

    def __call__(self, *args):
        return self._engine(args, build=self.build, config=self.config, target=self.target,
                            find_stages=self._find_stages)  # fmt: skip

    def __repr__(self) -> str:
        lowered = self._engine.last_lowered
        if lowered is None:
            return f"{type(self).__name__}(not compiled yet; call it once to build the graph)"
        return f"{type(self).__name__}:\n{lowered.as_text()}"

    def _find_stages(self) -> list:
        """The placements of the pipeline stages among this graph's modules, in order."""
        modules = [(attr, v) for attr, v in vars(self).items() if isinstance(v, Module)]
        return check_stages(type(self).__name__, modules)
