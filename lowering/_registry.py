"""The pass registry and named pipelines.

Pass factories import their module only when called, so `flow-opt` starts
without loading every lowering. Named pipelines are lists of pass specs; each
is also registered as a pass, so `-p flow-to-iree-input` works wherever a pass
name does, and `expand_pipeline` flattens them so failures name the real pass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, ArgSpecParseError, parse_pipeline

PIPELINES: dict[str, list[str]] = {
    # Everything needed for the hand-off: afterwards no flow op or attribute remains.
    # dce runs first: flow ops are Pure, while xDSL cannot prove linalg.generic dead.
    "flow-to-iree-input": [
        "flow-fold-transposes",
        "flow-sink-negation",
        "dce",
        "flow-fuse-elementwise",
        "flow-lower-to-linalg",
    ],
}
"""Named pipelines: name -> pass specs, run in order."""

OPTIONAL_STEPS: dict[str, str] = {"flow-fuse-elementwise": "FLOW_FUSION"}
"""Pipeline steps an environment knob turns off (`FLOW_FUSION=0`); on by default.

Only steps of named pipelines are skipped: a pass named explicitly always runs."""


def step_enabled(name: str) -> bool:
    """Whether the pipeline step `name` runs (its knob, if any, is not `0`/`off`/`false`)."""
    knob = OPTIONAL_STEPS.get(name)
    value = os.environ.get(knob, "") if knob else ""
    return value.strip().lower() not in ("0", "off", "false", "no")


def _flow_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    def lower_to_linalg() -> type[ModulePass]:
        from .lower_to_linalg import LowerToLinalgPass

        return LowerToLinalgPass

    def fold_transposes() -> type[ModulePass]:
        from .fold_transposes import FoldTransposesPass

        return FoldTransposesPass

    def fuse_elementwise() -> type[ModulePass]:
        from .fuse_elementwise import FuseElementwisePass

        return FuseElementwisePass

    def sink_negation() -> type[ModulePass]:
        from .sink_negation import SinkNegationPass

        return SinkNegationPass

    def infer_sbp() -> type[ModulePass]:
        from .infer_sbp import InferSbpPass

        return InferSbpPass

    def boxing_to_collectives() -> type[ModulePass]:
        from .boxing_to_collectives import BoxingToCollectivesPass

        return BoxingToCollectivesPass

    def partition() -> type[ModulePass]:
        from .partition import PartitionPass

        return PartitionPass

    def lower_collectives() -> type[ModulePass]:
        from .lower_collectives import LowerCollectivesPass

        return LowerCollectivesPass

    def lower_collectives_native() -> type[ModulePass]:
        from .lower_collectives_native import LowerCollectivesNativePass

        return LowerCollectivesNativePass

    def pipeline_schedule() -> type[ModulePass]:
        from .pipeline_schedule import PipelineSchedulePass

        return PipelineSchedulePass

    def partition_to_iree_input() -> type[ModulePass]:
        from .lower_collectives import PartitionToIreeInputPass

        return PartitionToIreeInputPass

    return {
        "flow-lower-to-linalg": lower_to_linalg,
        "flow-fold-transposes": fold_transposes,
        "flow-sink-negation": sink_negation,
        "flow-fuse-elementwise": fuse_elementwise,
        "flow-infer-sbp": infer_sbp,
        "flow-boxing-to-collectives": boxing_to_collectives,
        "flow-partition": partition,
        "flow-lower-collectives": lower_collectives,
        "flow-lower-collectives-native": lower_collectives_native,
        "flow-pipeline-schedule": pipeline_schedule,
        # A pass, not a named pipeline: it takes the option rank=R.
        "flow-partition-to-iree-input": partition_to_iree_input,
    }


def _upstream_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The generic xDSL clean-ups our pipelines use."""

    def dce() -> type[ModulePass]:
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        return DeadCodeElimination

    def cse() -> type[ModulePass]:
        from xdsl.transforms.common_subexpression_elimination import (
            CommonSubexpressionElimination,
        )

        return CommonSubexpressionElimination

    def canonicalize() -> type[ModulePass]:
        from xdsl.transforms.canonicalize import CanonicalizePass

        return CanonicalizePass

    return {"dce": dce, "cse": cse, "canonicalize": canonicalize}


@dataclass(frozen=True)
class PipelinePass(ModulePass):
    """Base of the passes that stand for a named pipeline (see `PIPELINES`)."""

    name: ClassVar[str] = "pipeline"
    steps: ClassVar[tuple[str, ...]] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        passes = get_all_passes()
        for spec in expand_pipeline(self.name if self.name in PIPELINES else ",".join(self.steps)):
            passes[spec.name]().from_spec(spec).apply(ctx, op)


def _pipeline_pass(name: str, steps: Iterable[str]) -> Callable[[], type[ModulePass]]:
    cls_name = "".join(w.title() for w in name.split("-")) + "Pipeline"
    cls = type(cls_name, (PipelinePass,), {"name": name, "steps": tuple(steps),
                                            "__doc__": f"The `{name}` pipeline."})  # fmt: skip
    return lambda: cls


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass `flow-opt` and `run_pipeline` know, by name, pipelines included."""
    passes = {**_flow_passes(), **_upstream_passes()}
    for name, steps in PIPELINES.items():
        passes[name] = _pipeline_pass(name, steps)
    return passes


class UnknownPassError(ValueError):
    """A pipeline spec names a pass that is not registered (the message lists those that are)."""


def parse_pipeline_spec(spec: str) -> list[ArgSpec]:
    """Parse `a,b{opt=v}`; raise `UnknownPassError` naming unknown passes and the known ones."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as err:  # a BaseException in xDSL: keep it catchable
        raise ValueError(f"invalid pass pipeline {spec!r}: {err}") from None
    known = get_all_passes()
    unknown = [s.name for s in specs if s.name not in known]
    if unknown:
        raise UnknownPassError(
            f"unknown pass{'es' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"in pipeline {spec!r}; registered passes: {', '.join(sorted(known))}"
        )
    return specs


def expand_pipeline(spec: str) -> list[ArgSpec]:
    """Parse `spec` and replace each named pipeline by its passes (recursively)."""
    out: list[ArgSpec] = []
    for s in parse_pipeline_spec(spec):
        if s.name in PIPELINES:
            if s.parameters:
                raise ValueError(f"pipeline {s.name!r} takes no options, got {s}")
            steps = [p for p in PIPELINES[s.name] if step_enabled(p.split("{")[0])]
            out.extend(expand_pipeline(",".join(steps)))
        else:
            out.append(s)
    return out
