"""Pipeline stages of an `nn.Graph` (OneFlow's API):

    self.stage0 = body0                       # in the Graph's __init__
    self.stage0.to(flow.nn.graph.GraphModule).set_stage(stage_id=0, placement=P0)
    self.config.set_gradient_accumulation_steps(4)   # 4 micro-batches per step

`module.to(GraphModule).activation_checkpointing = True` makes the module's forward
checkpointed when a graph traces it (its activations recomputed in the backward pass,
flow.utils.checkpoint); eager calls of the module are unaffected, as in OneFlow.

A staged module computes on its stage's placement (its parameters must be
there: `module.to_global(P0, ...)`); a tensor argument arriving from another
placement is moved to the stage (broadcast, or the `sbp=` given to `set_stage`),
which is a send / recv after partitioning. The graph traces every micro-batch's
forward and backward, tagging each op with its micro-batch and phase, and the
compiler orders each stage's program by a schedule (`1f1b` by default, or
`gpipe`: `config.set_pipeline_schedule`); see lowering/pipeline_schedule.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._module import _HOOKS

__all__ = ["GraphModule", "Stage", "check_stages", "checkpointed", "move_to_stage",
           "staged_modules"]


@dataclass(frozen=True)
class Stage:
    """Where a staged module runs: its stage id, placement and the SBP of moved inputs."""

    stage_id: int
    placement: Any
    sbp: Any = None


class GraphModule:
    """A module's graph settings: `module.to(flow.nn.graph.GraphModule)` returns one."""

    def __init__(self, module: Any):
        self._module = module

    @property
    def module(self) -> Any:
        return self._module

    @property
    def stage_id(self) -> int | None:
        stage = self._module.__dict__.get("_stage")
        return None if stage is None else stage.stage_id

    @property
    def placement(self) -> Any:
        """The placement of the module's stage (None when it is not a stage)."""
        stage = self._module.__dict__.get("_stage")
        return None if stage is None else stage.placement

    def set_stage(self, stage_id: int, placement: Any = None, *, sbp: Any = None) -> GraphModule:
        """Run the module as pipeline stage `stage_id` on `placement`."""
        from flow.distributed.placement import placement as placement_cls

        name = type(self._module).__name__
        if not isinstance(stage_id, int) or isinstance(stage_id, bool) or stage_id < 0:
            raise ValueError(f"set_stage: {name}: expected a stage id >= 0, got {stage_id!r}")
        if not isinstance(placement, placement_cls):
            raise TypeError(f"set_stage: {name}: expected a flow.placement, got {placement!r}")
        old = self._module.__dict__.get("_stage")
        if old is not None and old.stage_id != stage_id:
            raise ValueError(
                f"set_stage: {name} is already stage {old.stage_id}; a module runs on one stage "
                f"(asked for stage {stage_id} as well)"
            )
        object.__setattr__(self._module, "_stage", Stage(stage_id, placement, sbp))
        return self

    @property
    def activation_checkpointing(self) -> bool:
        """Whether, in an nn.Graph, the module keeps only its inputs for the backward pass
        and recomputes its forward there (flow.utils.checkpoint); False by default."""
        return bool(self._module.__dict__.get("_activation_checkpointing", False))

    @activation_checkpointing.setter
    def activation_checkpointing(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"activation_checkpointing: {type(self._module).__name__}: "
                            f"expected True or False, got {value!r}")  # fmt: skip
        object.__setattr__(self._module, "_activation_checkpointing", value)

    def __repr__(self) -> str:
        return f"GraphModule({type(self._module).__name__}, stage={self.stage_id})"


def checkpointed(module: Any, args: tuple, kwargs: dict) -> Any:
    """A call of a module whose `activation_checkpointing` is on: checkpointed when traced
    (in an nn.Graph or flow.jit), a plain forward otherwise."""
    from flow.core.trace import current_trace

    if current_trace() is None:
        return module.forward(*args, **kwargs)
    from flow.utils.checkpoint import checkpoint

    return checkpoint(module.forward, *args, use_reentrant=False, **kwargs)


_HOOKS["checkpointed"] = checkpointed


def staged_modules(modules: list[tuple[str, Any]]) -> list[tuple[str, Any, Stage]]:
    """The staged modules (attribute name, module, stage) among a graph's `modules` (its
    attributes holding a Module, as (name, module)) and their submodules."""
    found = []
    for attr, value in modules:
        for path, m in value.named_modules():
            stage = m.__dict__.get("_stage")
            if stage is not None:
                found.append((f"{attr}.{path}" if path else attr, m, stage))
    return found


def check_stages(gname: str, modules: list[tuple[str, Any]]) -> list[Any]:
    """Validate the stages of the graph `gname` holding `modules` (see `staged_modules`);
    the stage placements in stage order ([] if none)."""
    staged = staged_modules(modules)
    if not staged:
        return []
    by_id: dict[int, tuple[str, Any]] = {}
    for name, _, stage in staged:
        seen = by_id.get(stage.stage_id)
        if seen is not None and seen[1] != stage.placement:
            raise ValueError(
                f"{gname}: stage {stage.stage_id} has two placements: {seen[0]} on "
                f"{seen[1]!r} and {name} on {stage.placement!r}"
            )
        by_id.setdefault(stage.stage_id, (name, stage.placement))
    ids = sorted(by_id)
    if ids != list(range(len(ids))):
        missing = sorted(set(range(ids[-1] + 1)) - set(ids))
        raise ValueError(
            f"{gname}: stage ids {ids} skip stage{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))}; number the stages 0, 1, 2, ..."
        )
    owner: dict[int, tuple[str, int]] = {}
    for name, m, stage in staged:
        for sub_path, sub in m.named_modules():
            where = f"{name}.{sub_path}" if sub_path else name
            prev = owner.get(id(sub))
            if prev is not None and prev[1] != stage.stage_id:
                raise ValueError(
                    f"{gname}: module {type(sub).__name__} is used on stage {prev[1]} "
                    f"({prev[0]}) and on stage {stage.stage_id} ({where}); a module runs on "
                    "one stage"
                )
            owner.setdefault(id(sub), (where, stage.stage_id))
    for a in ids:
        for b in ids[a + 1 :]:
            shared = set(by_id[a][1].attr.rank_list) & set(by_id[b][1].attr.rank_list)
            if shared:
                raise ValueError(
                    f"{gname}: the placements of stage {a} ({by_id[a][0]}, ranks "
                    f"{list(by_id[a][1].attr.rank_list)}) and stage {b} ({by_id[b][0]}, ranks "
                    f"{list(by_id[b][1].attr.rank_list)}) overlap on ranks {sorted(shared)}"
                )
    return [by_id[i][1] for i in ids]


def move_to_stage(stage: Stage, value: Any) -> Any:
    """A staged module's tensor argument, moved to the stage's placement if it is elsewhere
    (a local one, the same on every rank, becomes global there)."""
    from flow.core.tensor import Tensor
    from flow.distributed.placement import global_info, is_global

    if not isinstance(value, Tensor):
        return value
    here = global_info(value).placement.attr if is_global(value) else None
    if here is None and value._trace is not None:
        here = value._trace.placement_of(value._value)
    if here == stage.placement.attr:
        return value
    from flow.distributed.placement import sbp as sbp_mod

    nd = (
        stage.sbp if stage.sbp is not None else [sbp_mod.broadcast] * len(stage.placement.hierarchy)
    )
    return value.to_global(placement=stage.placement, sbp=nd)
