"""`flow-boxing-to-collectives{rank=R}`: lower each `flow.boxing` to collectives on shards.

A boxing within one placement becomes `flow.to_local`, one collective per
changed mesh axis, as the boxing table of flow.dialect.sbp says (OneFlow's:
P→B all_reduce, P→S reduce_scatter, S→B all_gather, S(i)→S(j) all_to_all,
B→S local_slice, B→P local_partial, S→P all_gather then local_partial), and
`flow.to_global`. On a 2-D placement the axes change one at a time, in an
order where each step is exact: a step on axis `a` must not touch a tensor dim
that an inner axis (`b > a`) splits, since the inner pieces are cut out of the
outer ones. When no order works, the boxing goes through broadcast: gather
inner to outer, then split outer to inner.

A change of placement becomes point-to-point messages: with equal mesh
shapes and SBPs each shard goes from the i-th rank of the source to the i-th
of the target; otherwise the source ranks first make the whole tensor (boxing
to broadcast), target rank j receives it from source rank `j % n`, and slices
out its shard locally. This depends on the rank, so it needs `rank=R`.

Shard shapes are the balanced split's. Without `rank` they must be the same
on every rank (even splits, one program for all ranks); an uneven split
needs `rank=R` and gives rank R's program.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from flow.dialect import distributed as dd
from flow.dialect.attr_names import TRANSFER_ATTR
from flow.dialect.attrs import DistAttr, PlacementAttr, Sbp, SbpAttr, dist_of
from flow.dialect.sbp import boxing_rule, boxing_steps
from flow.dialect.structured import ReduceKind, ReduceKindAttr

from ._support import atomically, fail

B = Sbp("B")
Step = tuple[int, Sbp, Sbp]
"""One change on one mesh axis: (axis, from, to)."""


def _split_dims(*sbps: Sbp) -> set[int]:
    return {s.dim for s in sbps if s.kind == "S"}


def _expand(axis: int, src: Sbp, dst: Sbp) -> list[Step]:
    """The boxing table's steps for one axis (S→P has no single collective: gather, then keep)."""
    return [(axis, step.src, step.dst) for step in boxing_steps(src, dst)]


def _exact(state: list[Sbp], step: Step) -> bool:
    axis, src, dst = step
    inner = _split_dims(*state[axis + 1 :])
    return not (_split_dims(src, dst) & inner)


def plan(src: tuple[Sbp, ...], dst: tuple[Sbp, ...]) -> list[Step]:
    """The per-axis steps that box nd-SBP `src` to `dst`, each exact when it runs."""
    changed = [a for a in range(len(src)) if src[a] != dst[a]]
    for order in permutations(changed):
        state, steps = list(src), []
        for a in order:
            for step in _expand(a, state[a], dst[a]):
                if not _exact(state, step):
                    break
                steps.append(step)
                state[a] = step[2]
            else:
                continue
            break
        else:
            return steps
    steps, state = [], list(src)
    for a in reversed(range(len(src))):  # gather, innermost axis first
        if state[a] != B:
            steps += _expand(a, state[a], B)
            state[a] = B
    for a in range(len(src)):  # then split, outermost first
        if dst[a] != B:
            steps += _expand(a, B, dst[a])
            state[a] = dst[a]
    return steps


class _Builder:
    """Emits ops before one op, tracking the current shard value and its global type."""

    def __init__(self, anchor: Operation, rank: int | None):
        self.anchor, self.rank = anchor, rank

    def emit(self, op: Operation) -> Operation:
        op.location = self.anchor.location
        Rewriter.insert_op(op, InsertPoint.before(self.anchor))
        return op

    def shard_type(self, ty: TensorType, placement: PlacementAttr, state) -> TensorType:
        glob = TensorType(ty.element_type, ty.get_shape(), DistAttr(placement, SbpAttr.get(state)))
        try:
            return dd.local_type(glob, self.rank)  # type: ignore[return-value]
        except dd.UnevenSplitError as err:
            raise fail(self.anchor, str(err)) from None

    def steps(
        self, value: SSAValue, ty: TensorType, placement: PlacementAttr, src, dst
    ) -> SSAValue:
        """Box the shard `value` of a tensor shaped like `ty` from nd-SBP `src` to `dst`."""
        state = list(src)
        for axis, s, t in plan(tuple(src), tuple(dst)):
            state[axis] = t
            out = self.shard_type(ty, placement, state)
            value = self.emit(_collective(value, out, placement, axis, s, t)).results[0]
        return value


def _collective(
    value: SSAValue, out: TensorType, placement: PlacementAttr, axis: int, src: Sbp, dst: Sbp
) -> Operation:
    """The one op of the boxing table turning `src` into `dst` along `axis`."""
    rule = boxing_rule(src, dst)
    if rule.op is None:
        raise AssertionError(f"the boxing {src} -> {dst} is not one collective ({rule.collective})")
    props = dd.mesh_props(placement, axis, **rule.dims(src, dst))
    if rule.reduce is not None:
        props["kind"] = ReduceKindAttr(ReduceKind(rule.reduce))
    return rule.op(operands=[value], result_types=[out], properties=props)


def lower_boxing(op: dd.BoxingOp, rank: int | None) -> None:
    """Replace `op` by collectives (or messages, for a placement change) for `rank`."""
    src_ty, dst_ty = op.operand.type, op.result.type
    assert isinstance(src_ty, TensorType) and isinstance(dst_ty, TensorType)
    src, dst = dist_of(src_ty), dist_of(dst_ty)
    assert src is not None and dst is not None
    b = _Builder(op, rank)
    if src.placement == dst.placement:
        if rank is not None and rank not in src.placement.rank_list:
            raise fail(op, f"runs on {src.placement}, which does not hold rank {rank}")
        shard = b.emit(
            dd.ToLocalOp(
                operands=[op.operand],
                result_types=[b.shard_type(src_ty, src.placement, src.sbp.sbps)],
            )
        ).result
        shard = b.steps(shard, src_ty, src.placement, src.sbp.sbps, dst.sbp.sbps)
        result = b.emit(dd.ToGlobalOp(operands=[shard], result_types=[dst_ty])).result
    else:
        result = _move(op, b, src, dst)
    if result is None:
        if op.result.first_use is not None:
            raise fail(
                op,
                f"moves to {dst.placement}, which does not hold rank {rank}, but its result is "
                "used here; flow-partition removes such uses",
            )
        Rewriter.erase_op(op)
        return
    op.result.replace_all_uses_with(result)
    Rewriter.erase_op(op)


def _tag(op: dd.BoxingOp) -> dict[str, Attribute]:
    tag = op.attributes.get(TRANSFER_ATTR)
    return {} if tag is None else {"tag": tag}


def _move(op: dd.BoxingOp, b: _Builder, src: DistAttr, dst: DistAttr) -> SSAValue | None:
    """A placement change, as seen by rank `b.rank`; None where the rank gets no shard."""
    rank = b.rank
    if rank is None:
        raise fail(
            op,
            f"changes placement from {src.placement} to {dst.placement}: point-to-point "
            "messages depend on the rank, give the pass option rank=R",
        )
    ty = op.operand.type
    assert isinstance(ty, TensorType)
    senders, receivers = src.placement.rank_list, dst.placement.rank_list
    s_nd, d_nd = src.sbp.sbps, dst.sbp.sbps
    direct = src.placement.mesh_shape == dst.placement.mesh_shape and s_nd == d_nd
    sent = None
    if rank in senders:
        shard_ty = b.shard_type(ty, src.placement, s_nd)
        sent = b.emit(dd.ToLocalOp(operands=[op.operand], result_types=[shard_ty])).result
        if not direct:  # every source rank makes the whole tensor
            sent = b.steps(sent, ty, src.placement, s_nd, (B,) * len(s_nd))
        for j, peer in enumerate(receivers):
            source = senders[j] if direct else senders[j % len(senders)]
            if source == rank and peer != rank:
                b.emit(dd.SendOp(operands=[sent], properties={"peer": IntegerAttr(peer, i64),
                                                              **_tag(op)}))  # fmt: skip
    if rank not in receivers:
        return None
    j = receivers.index(rank)
    source = senders[j] if direct else senders[j % len(senders)]
    if direct:
        want = b.shard_type(ty, dst.placement, d_nd)
    else:
        want = TensorType(ty.element_type, ty.get_shape())
    if source == rank:
        got = sent
    else:
        got = b.emit(
            dd.RecvOp(
                result_types=[want], properties={"peer": IntegerAttr(source, i64), **_tag(op)}
            )  # fmt: skip
        ).result
    assert got is not None
    if not direct:
        got = b.steps(got, ty, dst.placement, (B,) * len(d_nd), d_nd)
    return b.emit(dd.ToGlobalOp(operands=[got], result_types=[op.result.type])).result


def boxing_to_collectives(module: ModuleOp, rank: int | None) -> None:
    for op in list(module.walk()):
        if isinstance(op, dd.BoxingOp):
            lower_boxing(op, rank)


@dataclass(frozen=True)
class BoxingToCollectivesPass(ModulePass):
    """Lower every `flow.boxing` to collectives on shards (see the module docstring).

    `rank=-1` (the default) builds the program every rank runs; it needs even
    splits and no placement change.
    """

    name = "flow-boxing-to-collectives"
    rank: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rank = None if self.rank < 0 else self.rank
        atomically(op, lambda m: boxing_to_collectives(m, rank))
