"""The pass registry and named pipelines.

Passes are known by name and module path (`FLOW_PASSES`): a pass's module is imported only
when the pass is asked for, so `flow-opt` starts without loading every lowering, and the
registry imports no pass. Named pipelines are lists of pass specs (`PIPELINES`); each is also
registered as a pass, so `-p flow-to-iree-input` works wherever a pass name does, and
`expand_pipeline` flattens them so failures name the real pass.

A pipeline may take options, which are fields of its pass class (as a pass's are:
`flow-partition-to-iree-input{rank=1}` sets `rank: int = -1`); `$rank` in its steps stands for
the option's value. A pipeline without options needs no class of its own: the registry makes one.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, ArgSpecParseError, parse_pipeline

from flow.targets import events

PIPELINES: dict[str, list[str]] = {
    # Everything needed for the hand-off: afterwards no flow op or attribute remains.
    # dce runs first: flow ops are Pure, while xDSL cannot prove linalg.generic dead.
    # `blas`: which matrix products call the host's BLAS (none, auto, all; the frontend
    # passes auto for the cpu target of this host).
    "flow-to-iree-input": [
        "flow-fold-batch-matmuls",
        "flow-fold-transposes",
        "flow-gemm-to-blas{policy=$blas}",
        "flow-sink-negation",
        "dce",
        "flow-fuse-elementwise",
        "flow-lower-to-linalg",
    ],
    # Rank R's program of a global program whose values carry their distributions (after
    # flow-infer-sbp), its collectives calls of the `comm` runtime module: what flow runs.
    "flow-partition-to-iree-input": [
        "flow-partition{rank=$rank}",
        "flow-pipeline-schedule{rank=$rank}",
        "flow-print-comm-plan{rank=$rank}",
        "flow-lower-collectives{rank=$rank}",
        "flow-to-iree-input{blas=$blas}",
    ],
    # The same with IREE's native collectives (cuda, rocm: NCCL / RCCL channels), split from
    # the channel table of the global program, which is recorded before partitioning.
    "flow-partition-to-iree-input-native": [
        "flow-channel-table",
        "flow-partition{rank=$rank}",
        "flow-pipeline-schedule{rank=$rank}",
        "flow-print-comm-plan{rank=$rank}",
        "flow-lower-collectives-native{rank=$rank}",
        "flow-to-iree-input{blas=$blas}",
    ],
}
"""Named pipelines: name -> pass specs, run in order (`$option`: the pipeline's option)."""

OPTIONAL_STEPS: dict[str, tuple[str, bool]] = {
    "flow-fuse-elementwise": ("FLOW_FUSION", True),
    "flow-print-comm-plan": ("FLOW_COMM_PLAN", False),
}
"""Pipeline steps an environment knob controls: step -> (knob, whether it runs when unset).
`FLOW_FUSION=0` turns fusion off; `FLOW_COMM_PLAN=1` prints each rank's communication plan.

Only steps of named pipelines are affected: a pass named explicitly always runs."""

_OFF = ("0", "off", "false", "no")

FLOW_PASSES: dict[str, str] = {
    "flow-lower-to-linalg": "lower_to_linalg:LowerToLinalgPass",
    "flow-fold-batch-matmuls": "fold_batch_matmuls:FoldBatchMatmulsPass",
    "flow-fold-transposes": "fold_transposes:FoldTransposesPass",
    "flow-sink-negation": "sink_negation:SinkNegationPass",
    "flow-gemm-to-blas": "gemm_to_blas:GemmToBlasPass",
    "flow-fuse-elementwise": "fuse_elementwise:FuseElementwisePass",
    "flow-infer-sbp": "infer_sbp:InferSbpPass",
    "flow-boxing-to-collectives": "boxing_to_collectives:BoxingToCollectivesPass",
    "flow-partition": "partition:PartitionPass",
    "flow-pipeline-schedule": "pipeline_schedule:PipelineSchedulePass",
    "flow-print-comm-plan": "print_comm_plan:PrintCommPlanPass",
    "flow-channel-table": "channel_table:ChannelTablePass",
    "flow-lower-collectives": "lower_collectives:LowerCollectivesPass",
    "flow-lower-collectives-native": "lower_collectives_native:LowerCollectivesNativePass",
    # Named pipelines with options: their class holds the options, PIPELINES their steps.
    "flow-to-iree-input": "to_iree_input:ToIreeInputPass",
    "flow-partition-to-iree-input": "partition_to_iree_input:PartitionToIreeInputPass",
    "flow-partition-to-iree-input-native":
        "partition_to_iree_input:PartitionToIreeInputNativePass",
}  # fmt: skip
"""flow's passes: name -> `module:Class` (a module of this package), imported on demand."""

UPSTREAM_PASSES: dict[str, str] = {
    "dce": "xdsl.transforms.dead_code_elimination:DeadCodeElimination",
    "cse": "xdsl.transforms.common_subexpression_elimination:CommonSubexpressionElimination",
    "canonicalize": "xdsl.transforms.canonicalize:CanonicalizePass",
}
"""The generic xDSL clean-ups our pipelines use: name -> `module:Class`."""


def step_enabled(name: str) -> bool:
    """Whether the pipeline step `name` runs: its knob, if any, says so (`0`, `off`, `false`,
    `no`: it does not; any other value: it does), or, unset, its default."""
    knob, default = OPTIONAL_STEPS.get(name, ("", True))
    value = os.environ.get(knob, "").strip().lower() if knob else ""
    return default if not value else value not in _OFF


def _factory(path: str) -> Callable[[], type[ModulePass]]:
    module, _, cls = path.partition(":")

    def load() -> type[ModulePass]:
        where = module if "." in module else f"{__package__}.{module}"
        return getattr(importlib.import_module(where), cls)

    return load


@dataclass(frozen=True)
class PipelinePass(ModulePass):
    """Base of the passes that stand for a named pipeline (see `PIPELINES`); its dataclass
    fields are the pipeline's options."""

    name: ClassVar[str] = "pipeline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.name not in PIPELINES:
            raise ValueError(f"{type(self).__name__}: {self.name!r} is not a named pipeline")
        passes = get_all_passes()
        rec = events.ACTIVE
        for spec in expand_pipeline(str(self.spec())):
            if rec is None:
                passes[spec.name]().from_spec(spec).apply(ctx, op)
            else:
                with rec.span(spec.name, "pass", {"pass": str(spec)}):
                    passes[spec.name]().from_spec(spec).apply(ctx, op)


def _pipeline_pass(name: str) -> Callable[[], type[ModulePass]]:
    cls_name = "".join(w.title() for w in name.split("-")) + "Pipeline"
    body = {"name": name, "__doc__": f"The `{name}` pipeline.", "__module__": __name__}
    cls = type(cls_name, (PipelinePass,), body)
    return lambda: cls


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass `flow-opt` and `run_pipeline` know, by name, pipelines included."""
    passes = {name: _factory(path) for name, path in {**FLOW_PASSES, **UPSTREAM_PASSES}.items()}
    for name in PIPELINES:
        if name not in passes:
            passes[name] = _pipeline_pass(name)
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


def _option_text(value: object) -> str:
    """An option value as pass-spec text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, str) else str(value)


def pipeline_steps(spec: ArgSpec) -> list[str]:
    """The steps of the named pipeline `spec` with its options filled in, without the steps
    an environment knob turns off (`OPTIONAL_STEPS`)."""
    cls = get_all_passes()[spec.name]()
    fields = [f.name for f in dataclasses.fields(cls)]
    if spec.parameters and not fields:
        raise ValueError(f"pipeline {spec.name!r} takes no options, got {spec}")
    try:
        options = cls.from_spec(spec)
    except ValueError as err:
        raise ValueError(f"pipeline {spec.name!r}: {err}") from None
    values = {f: _option_text(getattr(options, f)) for f in fields}

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise ValueError(
                f"pipeline {spec.name!r}: step option ${match.group(1)} is not an option of "
                f"the pipeline (its options: {', '.join(fields) or 'none'})"
            )
        return values[match.group(1)]

    steps = [re.sub(r"\$([A-Za-z_][A-Za-z0-9_]*)", fill, step) for step in PIPELINES[spec.name]]
    return [step for step in steps if step_enabled(step.split("{")[0])]


def expand_pipeline(spec: str) -> list[ArgSpec]:
    """Parse `spec` and replace each named pipeline by its passes (recursively)."""
    out: list[ArgSpec] = []
    for s in parse_pipeline_spec(spec):
        if s.name in PIPELINES:
            out.extend(expand_pipeline(",".join(pipeline_steps(s))))
        else:
            out.append(s)
    return out
