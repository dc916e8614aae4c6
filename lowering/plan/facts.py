"""What a picture of the parallel plan shows, read off a global program after SBP inference.

Each op is taken with its module scope (the name of its location, which nn.Graph's tracer
writes: `loc("first.0"("model.py":12:3))`), its pipeline phase and micro-batch, its stage (the
index of its placement among the module's `pipeline_stages`) and its results' placement and
SBP. Each `flow.boxing` is taken with the collectives it becomes on every rank it involves:
the boxing alone is lowered for that rank by flow-boxing-to-collectives (`lower_boxing`) and
its collectives read by the communication plan (`comm_facts`), so the boxing rules and the
byte counts have one home each. The pipeline's slots per stage are the schedule pass's
(`schedule_slots`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue

from flow.dialect import distributed as dd
from flow.dialect.attr_names import (
    MICRO_BATCH_ATTR,
    PHASE_ATTR,
    SCHEDULE_ATTR,
    SIGNATURE_ATTR,
    STAGES_ATTR,
)
from flow.dialect.attrs import DistAttr, PlacementAttr, dist_of
from flow.dialect.locations import scope_of, source_location

from ..boxing_to_collectives import lower_boxing
from ..pipeline_schedule import schedule_slots
from ..print_comm_plan import CommFact, comm_facts

__all__ = ["BoxingFact", "Collective", "ModuleFact", "OpFact", "PlanFacts", "StageFact",
           "plan_facts", "placement_text", "dist_text"]  # fmt: skip

OPTIMIZER = "optimizer"
"""The scope nn.Graph gives the optimizer update."""

LOCAL = ("local_slice", "local_partial")
"""The collectives of the boxing table that move nothing between ranks."""


def placement_text(p: PlacementAttr) -> str:
    """`cpu[0, 1]`; a 2-D mesh `cpu[[0, 1], [2, 3]]`."""
    ranks: list = list(p.rank_list)
    for n in reversed(p.mesh_shape[1:]):
        ranks = [ranks[i : i + n] for i in range(0, len(ranks), n)]
    return f"{p.device.data}{ranks}"


def dist_text(d: DistAttr | None) -> str:
    """`[S(0)]` (the SBP per mesh axis), `local` for a plain tensor."""
    return "local" if d is None else "[" + ", ".join(str(s) for s in d.sbp.sbps) + "]"


def shape_text(ty) -> str:
    """`64x128xf32` (the global shape and element type)."""
    if not isinstance(ty, TensorType):
        return str(ty)
    dims = "x".join(str(d) for d in ty.get_shape())
    return f"{dims}x{ty.element_type}" if dims else str(ty.element_type)


@dataclass(frozen=True)
class OpFact:
    """One op: its name (without `flow.`), scope, phase, micro-batch, stage, source line,
    result (shape, placement, SBP) and chosen SBP signature."""

    name: str
    scope: str
    phase: str
    micro_batch: int
    stage: int | None
    where: str
    shape: str
    placement: str
    sbp: str
    signature: str


@dataclass(frozen=True)
class Collective:
    """A collective of a boxing as the ranks in `ranks` run it (the same op, type and bytes)."""

    fact: CommFact
    ranks: tuple[int, ...]

    @property
    def kind(self) -> str:
        return self.fact.op.removeprefix("flow.")

    @property
    def moves(self) -> bool:
        """Whether it sends anything (a local slice or partial keeps to its rank)."""
        return self.kind not in LOCAL

    def label(self) -> str:
        """`all_reduce 2.0 KiB` (the bytes one rank moves), `local_slice (no transfer)`."""
        return f"{self.kind} {human_bytes(self.fact.nbytes) if self.moves else '(no transfer)'}"


@dataclass
class BoxingFact:
    """One `flow.boxing`: where it is (scope, source line), from / to (placement, SBP), the
    modules of its producer and first user, and its collectives per rank."""

    index: int
    scope: str
    where: str
    shape: str
    src: tuple[str, str]
    dst: tuple[str, str]
    src_scope: str
    dst_scope: str
    src_stage: int | None
    dst_stage: int | None
    phase: str
    micro_batch: int
    collectives: list[Collective] = field(default_factory=list)

    @property
    def crosses_stages(self) -> bool:
        return self.src_stage is not None and self.dst_stage is not None and (
            self.src_stage != self.dst_stage)  # fmt: skip

    @property
    def moves(self) -> bool:
        """Whether any of its collectives sends anything between ranks."""
        return any(c.moves for c in self.collectives)

    @property
    def nbytes(self) -> int:
        """Bytes the busiest rank moves for it (the most over the ranks)."""
        per: Counter[int] = Counter()
        for c in self.collectives:
            for r in c.ranks:
                if c.moves:
                    per[r] += c.fact.nbytes
        return max(per.values(), default=0)

    def change(self) -> str:
        """`[P] -> [B]`, or with a placement change `cpu[0]:[B] -> cpu[1]:[B]`."""
        if self.src[0] == self.dst[0]:
            return f"{self.src[1]} -> {self.dst[1]}"
        return f"{self.src[0]}:{self.src[1]} -> {self.dst[0]}:{self.dst[1]}"

    def collectives_text(self) -> str:
        """`all_reduce 2.0 KiB`; `send/recv 8.0 KiB` for a matched pair; `no communication`."""
        kinds = list(dict.fromkeys(c.label() for c in self.collectives))
        sizes = {c.fact.nbytes for c in self.collectives}
        if {c.kind for c in self.collectives} == {"send", "recv"} and len(sizes) == 1:
            kinds = [f"send/recv {human_bytes(sizes.pop())}"]
        return ", ".join(kinds) or "no communication"

    def label(self) -> str:
        """`[P] -> [B]: all_reduce 2.0 KiB` (see `collectives_text`)."""
        return f"{self.change()}: {self.collectives_text()}"


@dataclass
class ModuleFact:
    """The ops of one module scope: counts per phase and kind, the distributions of the values
    they compute, their stage, and the boxings inside them."""

    scope: str
    stage: int | None = None
    ops: list[OpFact] = field(default_factory=list)
    boxings: list[BoxingFact] = field(default_factory=list)

    def phases(self) -> Counter[str]:
        return Counter(op.phase or "untagged" for op in self.ops)

    def values(self) -> list[tuple[tuple[str, str, str], int]]:
        """(shape, placement, SBP) of the values computed here, with how many, most first."""
        seen = Counter((op.shape, op.placement, op.sbp) for op in self.ops if op.shape)
        return sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))


@dataclass(frozen=True)
class StageFact:
    """A pipeline stage: its placement and, per rank, its (phase, micro-batch) slots."""

    index: int
    placement: str
    ranks: tuple[int, ...]
    slots: tuple[tuple[str, int], ...]


@dataclass
class PlanFacts:
    """Everything a plan picture shows (see the module docstring)."""

    title: str
    function: str
    placements: list[str]
    modules: list[ModuleFact]
    boxings: list[BoxingFact]
    inputs: list[tuple[str, str, str]]  # (shape, placement, SBP) of each global argument
    stages: list[StageFact]
    schedule: str
    micro_batches: int

    def total_bytes(self) -> int:
        """Bytes the busiest rank sends and receives in one step."""
        per: Counter[int] = Counter()
        for b in self.boxings:
            for c in b.collectives:
                for r in c.ranks:
                    per[r] += c.fact.nbytes if c.moves else 0
        return max(per.values(), default=0)

    def collapsed(self, limit: int) -> list[ModuleFact]:
        """The modules merged to the deepest path depth that leaves at most `limit` of them
        (`blocks.3.attn.qkv` counts under `blocks.3`, then `blocks`), in program order; the
        ops outside any module and the optimizer update come last."""
        depth = max((m.scope.count(".") + 1 for m in self.modules), default=1)
        while depth > 1 and len({_cut(m.scope, depth) for m in self.modules}) > limit:
            depth -= 1
        merged: dict[tuple[str, int | None], ModuleFact] = {}
        for m in self.modules:
            key = (_cut(m.scope, depth), m.stage)
            into = merged.setdefault(key, ModuleFact(key[0], m.stage))
            into.ops += m.ops
            into.boxings += m.boxings
        last = ("", OPTIMIZER)
        return ([m for m in merged.values() if m.scope not in last]
                + [m for m in merged.values() if m.scope == last[0]]
                + [m for m in merged.values() if m.scope == last[1]])  # fmt: skip


def _cut(scope: str, depth: int) -> str:
    return ".".join(scope.split(".")[:depth])


def human_bytes(n: int) -> str:
    """`192 B`, `2.0 KiB`, `1.5 MiB`."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n} B"  # unreachable


def _where(op: Operation) -> str:
    loc = source_location(op)
    return "" if loc is None else f"{loc.filename.data.rsplit('/', 1)[-1]}:{loc.line.data}"


def _phase(op: Operation) -> tuple[str, int]:
    phase = op.attributes.get(PHASE_ATTR)
    mb = op.attributes.get(MICRO_BATCH_ATTR)
    return (phase.data if isinstance(phase, StringAttr) else "",
            mb.value.data if isinstance(mb, IntegerAttr) else 0)  # fmt: skip


def _dist(op: Operation) -> DistAttr | None:
    for v in (*op.results, *op.operands):
        d = dist_of(v.type)
        if d is not None:
            return d
    return None


def _boxing_collectives(op: dd.BoxingOp, memo: dict) -> list[Collective]:
    """The collectives of `op` on each rank it involves, ranks with equal ones merged (the
    same for every boxing between the same two types: `memo` keeps them)."""
    key = (op.operand.type, op.result.type)
    if key in memo:
        return memo[key]
    src, dst = dist_of(op.operand.type), dist_of(op.result.type)
    assert src is not None and dst is not None
    ranks = sorted(set(src.placement.rank_list) | set(dst.placement.rank_list))
    found: dict[CommFact, list[int]] = {}
    for rank in ranks:
        block = Block(arg_types=[op.operand.type])
        box = dd.BoxingOp(operands=[block.args[0]], result_types=[op.result.type])
        block.add_ops([box, func.ReturnOp()])
        module = ModuleOp([func.FuncOp("boxing", ([op.operand.type], []), Region(block))])
        lower_boxing(box, rank)
        for fact in comm_facts(module):
            found.setdefault(fact, []).append(rank)
    memo[key] = [Collective(fact, tuple(rs)) for fact, rs in found.items()]
    return memo[key]


def _user_scope(value: SSAValue) -> str:
    for use in value.uses:
        if not isinstance(use.operation, func.ReturnOp):
            return scope_of(use.operation)
    return ""


def _stage_of(stages: list[PlacementAttr], d: DistAttr | None) -> int | None:
    if d is None or d.placement not in stages:
        return None
    return stages.index(d.placement)


def _home_local_ops(modules: dict[tuple[str, int | None], ModuleFact]) -> None:
    """Put the ops of a scope that are on no stage (local constants) with the scope's ops on
    the stage where it has the most."""
    for (scope, stage), group in list(modules.items()):
        if stage is not None:
            continue
        staged = [m for (s, st), m in modules.items() if s == scope and st is not None]
        if staged:
            home = max(staged, key=lambda m: len(m.ops))
            home.ops += group.ops
            home.boxings += group.boxings
            del modules[(scope, stage)]


def plan_facts(module: ModuleOp, title: str = "") -> PlanFacts:
    """The facts of `module`'s first function with a body (see the module docstring)."""
    f = next((op for op in module.walk() if isinstance(op, func.FuncOp) and op.body.blocks), None)
    if f is None:
        raise ValueError("plan: the module has no function with a body")
    stages_attr = module.attributes.get(STAGES_ATTR)
    stages = [p for p in stages_attr.data if isinstance(p, PlacementAttr)] if isinstance(
        stages_attr, ArrayAttr) else []  # fmt: skip
    named = module.attributes.get(SCHEDULE_ATTR)
    schedule = named.data if isinstance(named, StringAttr) else ("1f1b" if stages else "")
    modules: dict[tuple[str, int | None], ModuleFact] = {}  # by scope and stage
    boxings: list[BoxingFact] = []
    placements: dict[str, None] = {}
    memo: dict = {}  # (source type, target type) -> collectives
    micro = 0
    for op in f.body.block.ops:
        if isinstance(op, func.ReturnOp):
            continue
        scope = scope_of(op)
        d = _dist(op)
        phase, mb = _phase(op)
        if phase and phase != "update":
            micro = max(micro, mb + 1)
        stage = _stage_of(stages, d)
        if isinstance(op, dd.BoxingOp):
            s, t = dist_of(op.operand.type), dist_of(op.result.type)
            assert s is not None and t is not None
            owner = op.operand.owner
            box = BoxingFact(
                len(boxings), scope, _where(op), shape_text(op.result.type),
                (placement_text(s.placement), dist_text(s)),
                (placement_text(t.placement), dist_text(t)),
                scope_of(owner) if isinstance(owner, Operation) else "", _user_scope(op.result),
                _stage_of(stages, s), _stage_of(stages, t), phase, mb,
                _boxing_collectives(op, memo),
            )  # fmt: skip
            boxings.append(box)
            home = box.dst_scope or box.src_scope or scope
            at = box.dst_stage if box.dst_stage is not None else box.src_stage
            group = modules.setdefault((home, at), ModuleFact(home, at))
            group.boxings.append(box)
            continue
        group = modules.setdefault((scope, stage), ModuleFact(scope, stage))
        result = op.results[0].type if op.results else None
        rd = dist_of(result) if result is not None else None
        where = placement_text(rd.placement) if rd is not None else ""
        if where:
            placements[where] = None
        sig = op.attributes.get(SIGNATURE_ATTR)
        group.ops.append(OpFact(
            op.name.removeprefix("flow."), scope, phase, mb, stage, _where(op),
            "" if result is None else shape_text(result), where,
            "" if result is None else dist_text(rd),
            sig.data if isinstance(sig, StringAttr) else "",
        ))  # fmt: skip
    if stages:
        _home_local_ops(modules)
    inputs = []
    for a in f.body.block.args:
        d = dist_of(a.type)
        if d is not None:
            placements[placement_text(d.placement)] = None
            inputs.append((shape_text(a.type), placement_text(d.placement), dist_text(d)))
    stage_facts = [
        StageFact(i, placement_text(p), tuple(p.rank_list),
                  tuple(schedule_slots(schedule, len(stages), i, max(micro, 1))))
        for i, p in enumerate(stages)
    ]  # fmt: skip
    return PlanFacts(title or f.sym_name.data, f.sym_name.data, list(placements),
                     list(modules.values()), boxings, inputs, stage_facts, schedule,
                     max(micro, 1))  # fmt: skip
