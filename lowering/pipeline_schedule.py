"""`flow-pipeline-schedule{rank=R schedule=1f1b}`: order one pipeline stage's program.

A pipeline-parallel training step is traced as one global program: each stage's
modules compute on the stage's placement, activations and their gradients
cross stages as placement changes (send / recv after `flow-partition`), and the
micro-batches of gradient accumulation follow one another. The tracer tags
every op with its micro-batch (`micro_batch = k`) and phase (`pipeline_phase =
"forward" | "backward" | "update"`), and the module lists the stage placements
in order (`pipeline_stages = [#flow.placement<...>, ...]`) and may name the
schedule (`pipeline_schedule = "gpipe"`; the pass option `schedule` wins).

After `flow-partition{rank=R}` rank R's program holds only its stage's ops;
this pass reorders them into the schedule's order of (phase, micro-batch)
slots, for stage `s` of `p` with `m` micro-batches:

* `gpipe`: every forward, then every backward: F0 … F(m-1), B0 … B(m-1);
* `1f1b` (default): `w = min(p - s - 1, m)` warm-up forwards, then one forward
  and one backward in turn, then the remaining backwards:
  F0 … F(w-1), F(w) B0, F(w+1) B1, …, B(m-w) … B(m-1). A stage then holds the
  activations of at most `p - s` micro-batches instead of `m`.

The optimizer update comes last. Untagged ops (what partitioning and boxing
added: receives, sends, conversions) take the slot of their earliest user, so
a receive waits until its value is needed; ops without users (sends) follow
their operands, so activations leave as soon as they are made. Within those
constraints the order is a topological sort by slot, then original position.
Every transfer has its own message tag (flow-partition), so the stages'
different orders still pair each send with its receive; sends never wait.

IREE orders compute between transfers by data dependencies only and would put
off what is needed only at the end (weight gradients, and the activations they
read) until then; so after each slot a `flow.fence` ties what the slot computes
for later slots into the chain of transfers, and the run-time order (and
activation memory) follows the schedule.

The pass removes the tags and the stage list, so nothing of ours crosses to
IREE. Without a stage list it only removes tags. `memory_analysis.py` measures
the memory an order needs (bytes of values alive at once).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from flow.dialect import distributed as dd
from flow.dialect.attr_names import MICRO_BATCH_ATTR, PHASE_ATTR, SCHEDULE_ATTR, STAGES_ATTR
from flow.dialect.attr_names import PIPELINE_SCHEDULES as SCHEDULES
from flow.dialect.attrs import PlacementAttr, dist_of

from ._support import fail


def schedule_slots(schedule: str, stages: int, stage: int, micro_batches: int) -> list:
    """The (phase, micro-batch) slots of `stage` (of `stages`) in execution order."""
    m = micro_batches
    fwd = [("forward", k) for k in range(m)]
    bwd = [("backward", k) for k in range(m)]
    if schedule == "gpipe":
        order = fwd + bwd
    elif schedule == "1f1b":
        w = min(stages - stage - 1, m)
        order = fwd[:w]
        for i in range(m - w):
            order += [fwd[w + i], bwd[i]]
        order += bwd[m - w :]
    else:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
    return order + [("update", 0)]


def _tag(op: Operation) -> tuple[str, int] | None:
    phase = op.attributes.get(PHASE_ATTR)
    if not isinstance(phase, StringAttr):
        return None
    if phase.data == "update":
        return ("update", 0)
    mb = op.attributes.get(MICRO_BATCH_ATTR)
    return (phase.data, mb.value.data if isinstance(mb, IntegerAttr) else 0)


def _strip(op: Operation) -> None:
    for inner in op.walk():
        inner.attributes.pop(PHASE_ATTR, None)
        inner.attributes.pop(MICRO_BATCH_ATTR, None)


def _reorder(f: func.FuncOp, order: list) -> None:
    block = f.body.block
    ops = list(block.ops)
    body, ret = ops[:-1], ops[-1]
    slot_of = {s: i for i, s in enumerate(order)}
    last = len(order)
    slots: dict[Operation, int] = {}
    for op in body:
        tag = _tag(op)
        if tag is not None:
            if tag not in slot_of:
                raise fail(op, f"is tagged {tag[0]} of micro-batch {tag[1]}, outside the schedule")
            slots[op] = slot_of[tag]
    for op in reversed(body):  # untagged: the slot of the earliest user
        if op in slots:
            continue
        users = [u.operation for r in op.results for u in r.uses]
        found = [slots.get(u, last if u is ret else None) for u in users]
        known = [s for s in found if s is not None]
        if known:
            slots[op] = min(known)
    for op in body:  # no users: right after the operands
        if op not in slots:
            found = [slots.get(o.owner, -1) if isinstance(o.owner, Operation) else -1
                     for o in op.operands]  # fmt: skip
            slots[op] = max(found, default=-1)
    position = {op: i for i, op in enumerate(body)}
    waiting = {op: 0 for op in body}
    users: dict[Operation, list[Operation]] = {op: [] for op in body}
    for op in body:
        producers = {o.owner for o in op.operands if o.owner in position}
        waiting[op] = len(producers)
        for p in producers:
            users[p].append(op)
    ready = [(slots[op], position[op], op) for op in body if waiting[op] == 0]
    heapq.heapify(ready)
    scheduled = []
    while ready:
        _, _, op = heapq.heappop(ready)
        scheduled.append(op)
        for u in users[op]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (slots[u], position[u], u))
    assert len(scheduled) == len(body), "the block is not in SSA dominance order"
    for op in body:
        op.detach()
    for op in scheduled:
        block.insert_op_before(op, ret)
    _fence_slots(scheduled, slots, last - 1)  # the update (last slot) needs none


def _fence_slots(scheduled: list[Operation], slots: dict[Operation, int], update: int) -> None:
    """After each slot's ops, a flow.fence on what the slot computes for later slots (a
    slot's results that no transfer of the slot consumes), so that IREE computes them
    there rather than where they are finally used."""
    runs: list[list[Operation]] = []
    for op in scheduled:
        if runs and slots[runs[-1][-1]] == slots[op]:
            runs[-1].append(op)
        else:
            runs.append([op])
    for run in runs:
        if slots[run[0]] >= update:
            continue
        inside = set(run)
        values = []
        for op in run:
            if isinstance(op, (dd.RecvOp, dd.SendOp, dd.FenceOp)):
                continue
            for r in op.results:
                users = [u.operation for u in r.uses]
                if not isinstance(r.type, TensorType) or dist_of(r.type) is not None:
                    continue
                if any(isinstance(u, dd.SendOp) and u in inside for u in users):
                    continue  # the send already waits for it
                if any(u not in inside for u in users):
                    values.append(r)
        if values:
            fence = dd.FenceOp(operands=[values])
            fence.location = run[-1].location
            block = run[-1].parent
            assert block is not None
            block.insert_op_after(fence, run[-1])


def pipeline_schedule(module: ModuleOp, rank: int | None, schedule: str = "") -> None:
    """Reorder rank `rank`'s stage program (see the module docstring); strip the tags.
    `schedule` defaults to the module's `pipeline_schedule` attribute, else 1f1b."""
    stages_attr = module.attributes.pop(STAGES_ATTR, None)
    named = module.attributes.pop(SCHEDULE_ATTR, None)
    if not schedule:
        schedule = named.data if isinstance(named, StringAttr) else "1f1b"
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown pipeline schedule {schedule!r}; known: {', '.join(SCHEDULES)}")
    if isinstance(stages_attr, ArrayAttr) and rank is not None:
        stages = [p for p in stages_attr.data if isinstance(p, PlacementAttr)]
        mine = [i for i, p in enumerate(stages) if rank in p.rank_list]
        if mine:
            for f in module.walk():
                if isinstance(f, func.FuncOp) and f.body.blocks.first is not None:
                    tagged = [(t, op) for op in f.body.block.ops if (t := _tag(op)) is not None]
                    m = 1 + max((k for (_, k), _ in tagged), default=0)
                    if tagged and m > len(tagged):  # each micro-batch has ops; m is from the input
                        (_, k), op = max(tagged, key=lambda t_op: t_op[0][1])
                        raise fail(op, f"is tagged micro-batch {k}, but {f.sym_name.data} has "
                                   f"only {len(tagged)} tagged ops")  # fmt: skip
                    _reorder(f, schedule_slots(schedule, len(stages), mine[0], m))
    _strip(module)


@dataclass(frozen=True)
class PipelineSchedulePass(ModulePass):
    """Order a pipeline stage's program by its schedule (see the module docstring)."""

    name = "flow-pipeline-schedule"
    rank: int = -1
    schedule: str = ""  # default: the module's pipeline_schedule attribute, else 1f1b

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pipeline_schedule(op, None if self.rank < 0 else self.rank, self.schedule)
