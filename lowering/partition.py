"""`flow-partition{rank=R}`: rewrite a global program into rank R's local program.

The input is a program whose values carry their distributions (the output of
flow-infer-sbp, or anything whose ops all run under one of their SBP
signatures: the pass checks, and names the op that does not). The output has
no global tensor left: every value is this rank's shard, with its local shape,
and every boxing has become collectives (flow-boxing-to-collectives).

Per-rank programs: with `rank=R`, shard shapes are rank R's balanced pieces,
so uneven splits are exact; values on placements that do not hold R are
dropped, with the ops computing them and the function arguments and results
carrying them (rank R's function takes and returns only its own shards), and a
placement change becomes the sends and receives rank R takes part in. Without
`rank` (the default, -1) the result is the one program every rank runs; it
needs even splits and one placement, and the pass says so when they are not.

`flow.to_local` and `flow.to_global` disappear: in the local program a shard
is a plain tensor, so both are the identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, IntegerAttr, ModuleOp, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from flow.dialect import distributed as dd
from flow.dialect import sbp as sbp_rules
from flow.dialect.attrs import PlacementAttr, dist_of
from flow.dialect.ops import FlowOp

from ._support import atomically, fail
from .boxing_to_collectives import TRANSFER_ATTR, lower_boxing


def _is_global(v: SSAValue) -> bool:
    return dist_of(v.type) is not None


def _placements(f: func.FuncOp) -> set[PlacementAttr]:
    types: list[Attribute] = [*f.function_type.inputs.data, *f.function_type.outputs.data]
    for op in f.walk():
        types += [v.type for v in (*op.operands, *op.results)]
    return {d.placement for t in types if (d := dist_of(t)) is not None}


def _set_function_type(f: func.FuncOp, ret: func.ReturnOp) -> None:
    block = f.body.block
    f.function_type = FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in ret.operands]
    )


def _prune(f: func.FuncOp, rank: int) -> None:
    """Drop what does not live on `rank`: values on placements that do not hold it."""

    def lives(v: SSAValue) -> bool:
        d = dist_of(v.type)
        return d is None or rank in d.placement.rank_list

    block = f.body.block
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    ret.operands = [v for v in ret.operands if lives(v)]
    for op in reversed(list(block.ops)):
        if op is ret:
            continue
        if isinstance(op, dd.BoxingOp):
            if not lives(op.operand) and lives(op.result):
                lower_boxing(op, rank)  # the receiving side needs no operand
                continue
            if lives(op.operand):
                continue  # this rank computes or sends its part: lowered below
        global_values = [v for v in (*op.operands, *op.results) if _is_global(v)]
        if all(lives(v) for v in global_values):
            continue
        if any(r.first_use is not None for r in op.results):
            user = next(u.operation for r in op.results for u in r.uses)
            raise fail(
                user,
                f"uses a value on a placement that does not hold rank {rank} "
                f"({op.results[0].type}); move it with flow.boxing first",
            )
        Rewriter.erase_op(op)
    for arg in reversed(block.args):
        if not lives(arg):
            if arg.first_use is not None:
                user = next(iter(arg.uses)).operation
                raise fail(user, f"uses argument #{arg.index}, which rank {rank} does not hold")
            block.erase_arg(arg)
    _set_function_type(f, ret)


def _check_signatures(f: func.FuncOp) -> None:
    """Every flow op on global tensors must run under one of its signatures."""
    for op in f.body.block.ops:
        if isinstance(op, (*dd.GLOBAL_OPS, *dd.COLLECTIVE_OPS, func.ReturnOp)):
            continue
        if not any(_is_global(v) for v in (*op.operands, *op.results)):
            continue
        if not isinstance(op, FlowOp):
            raise fail(op, "is not a flow op and cannot compute on global tensors")
        if sbp_rules.current_signature(op) is None:
            have = ", ".join(
                sbp_rules.format_nd(d.sbp.sbps) if (d := dist_of(v.type)) else "local"
                for v in op.operands
            )
            outs = ", ".join(
                sbp_rules.format_nd(d.sbp.sbps) if (d := dist_of(v.type)) else "local"
                for v in op.results
            )
            raise fail(
                op,
                f"runs as {have} -> {outs}, which is not one of its SBP signatures "
                "(on one placement); run flow-infer-sbp first",
            )


def _local(op: Operation, ty: Attribute, rank: int | None) -> Attribute:
    try:
        return dd.local_type(ty, rank)
    except dd.UnevenSplitError as err:
        raise fail(op, str(err)) from None


def _localize(f: func.FuncOp, rank: int | None) -> None:
    """Give every value its shard type; fold the to_local / to_global boundaries."""
    block = f.body.block
    for arg in list(block.args):
        if _is_global(arg):
            Rewriter.replace_value_with_new_type(arg, _local(f, arg.type, rank))
    for op in list(block.ops):
        if isinstance(op, dd.ToLocalOp):
            if op.operand.type != op.result.type:
                raise fail(
                    op,
                    f"expected result type {op.operand.type}, rank {rank}'s shard, "
                    f"got {op.result.type}",
                )
            op.result.replace_all_uses_with(op.operand)
            Rewriter.erase_op(op)
        elif isinstance(op, dd.ToGlobalOp):
            want = _local(op, op.result.type, rank)
            if op.operand.type != want:
                raise fail(
                    op, f"expected operand type {want}, rank {rank}'s shard, got {op.operand.type}"
                )
            op.result.replace_all_uses_with(op.operand)
            Rewriter.erase_op(op)
        elif not isinstance(op, func.ReturnOp):
            for r in list(op.results):
                if _is_global(r):
                    Rewriter.replace_value_with_new_type(r, _local(op, r.type, rank))
            try:
                op.verify()
            except VerifyException as err:
                raise fail(op, f"does not verify on shards: {err}") from None
    ret = block.last_op
    assert isinstance(ret, func.ReturnOp)
    _set_function_type(f, ret)


def _number_transfers(f: func.FuncOp) -> None:
    """Give each placement change its own message tag, numbered in program order (the same
    on every rank, before each rank drops what it does not hold)."""
    n = 0
    for op in f.body.block.ops:
        if isinstance(op, dd.BoxingOp) and TRANSFER_ATTR not in op.attributes:
            src, dst = dist_of(op.operand.type), dist_of(op.result.type)
            if src is not None and dst is not None and src.placement != dst.placement:
                op.attributes[TRANSFER_ATTR] = IntegerAttr(n % dd.MAX_TAG + 1, i64)
                n += 1


def partition_function(f: func.FuncOp, rank: int | None) -> None:
    """Rewrite `f` into `rank`'s local program (the all-ranks program when `rank` is None)."""
    if f.body.blocks.first is None or not _placements(f):
        return
    if rank is None:
        placements = _placements(f)
        if len(placements) > 1:
            listing = ", ".join(sorted(str(p) for p in placements))
            raise fail(
                f,
                f"@{f.sym_name.data} uses several placements ({listing}): each rank runs "
                "a different program, give the pass option rank=R",
            )
        for arg in f.body.block.args:
            _local(f, arg.type, None)
        for op in f.body.block.ops:
            for r in op.results:
                _local(op, r.type, None)
    _check_signatures(f)
    _number_transfers(f)
    if rank is not None:
        _prune(f, rank)
    for op in list(f.body.block.ops):
        if isinstance(op, dd.BoxingOp):
            lower_boxing(op, rank)
    _localize(f, rank)


def partition(module: ModuleOp, rank: int | None) -> None:
    for op in list(module.walk()):
        if isinstance(op, func.FuncOp):
            partition_function(op, rank)


@dataclass(frozen=True)
class PartitionPass(ModulePass):
    """Rewrite the global program into one rank's local program (see the module docstring)."""

    name = "flow-partition"
    rank: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rank = None if self.rank < 0 else self.rank
        atomically(op, lambda m: partition(m, rank))
