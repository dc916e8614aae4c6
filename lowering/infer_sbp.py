"""`flow-infer-sbp`: give every value of a global program its distribution.

Walks each function in order, starting from its global arguments. For each
flow op on global tensors it asks the op's SBP signatures (dialect/sbp.py) for
the cheapest one given its operands' current SBPs, inserts `flow.boxing` on
the operands that need converting, sets each result's `#flow.dist` encoding
and records the choice as `sbp_signature = "[S(0)], [B] -> [S(0)]"` on the op.
Function results keep the distribution their declared type gives, with a final
boxing where needed (or, with `adopt_results`, the distribution inference gives
them where they are declared local: how `flow.jit` learns a traced function's
result distributions). Explicit `flow.boxing` / `flow.to_global` ops keep their
declared result types (a boxing that became an identity is removed).

Local values that are provably the same on every rank (constants, `full`,
`iota`, and flow ops computing only on such values) are promoted to
broadcast global tensors where an op mixes them with global ones; any other
local operand of a global op is an error (convert it with `flow.to_global`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from flow.dialect import distributed as dd
from flow.dialect import sbp as sbp_rules
from flow.dialect.attr_names import SIGNATURE_ATTR
from flow.dialect.attrs import DistAttr, PlacementAttr, Sbp, SbpAttr, dist_of
from flow.dialect.ops import FlowOp

from ._support import atomically, fail


def with_dist(ty: Attribute, placement: PlacementAttr, nd: tuple[Sbp, ...]) -> TensorType:
    """`ty`'s shape and element type, distributed as `nd` over `placement`."""
    assert isinstance(ty, TensorType)
    return TensorType(ty.element_type, ty.get_shape(), DistAttr(placement, SbpAttr.get(nd)))


def insert_boxing(value: SSAValue, to: TensorType, before: Operation) -> SSAValue:
    """`value` boxed to type `to`, by a `flow.boxing` inserted before `before`."""
    box = dd.BoxingOp(operands=[value], result_types=[to])
    box.location = before.location
    Rewriter.insert_op(box, InsertPoint.before(before))
    return box.result


class _Inference:
    """The state of one function's walk: which local values are replicated on every rank."""

    def __init__(self, adopt_results: bool = False) -> None:
        self.adopt_results = adopt_results
        """Results declared local but computed global take the inferred type (see infer_sbp)."""
        self.replicated: set[SSAValue] = set()
        self.boxed: dict[tuple[SSAValue, Attribute], SSAValue] = {}
        """Boxings made so far, reused by later users (one block: the first dominates)."""

    def _box(self, value: SSAValue, to: TensorType, before: Operation) -> SSAValue:
        key = (value, to)
        if key not in self.boxed:
            self.boxed[key] = insert_boxing(value, to, before)
        return self.boxed[key]

    def run(self, f: func.FuncOp) -> None:
        if f.body.blocks.first is None:
            return
        for op in list(f.body.block.ops):
            if isinstance(op, func.ReturnOp):
                self._results(f, op)
            elif isinstance(op, dd.BoxingOp):
                if op.operand.type == op.result.type:
                    op.result.replace_all_uses_with(op.operand)
                    Rewriter.erase_op(op)
            elif isinstance(op, dd.RedistributeOp):
                self._redistribute(op)
            elif isinstance(op, FlowOp):
                self._op(op)
            elif isinstance(op, (*dd.GLOBAL_OPS, *dd.COLLECTIVE_OPS)):
                continue
            elif any(dist_of(v.type) for v in (*op.operands, *op.results)):
                raise fail(op, "is not a flow op and cannot compute on global tensors")

    def _promote(self, op: Operation, index: int, placement: PlacementAttr) -> SSAValue:
        value = op.operands[index]
        if value not in self.replicated:
            raise fail(
                op,
                f"mixes global operands on {placement} with operand #{index} of local type "
                f"{value.type}, which may differ between ranks; convert it with flow.to_global",
            )
        ndim = len(placement.mesh_shape)
        glob = dd.ToGlobalOp(
            operands=[value], result_types=[with_dist(value.type, placement, (Sbp("B"),) * ndim)]
        )
        glob.location = op.location
        Rewriter.insert_op(glob, InsertPoint.before(op))
        return glob.result

    def _redistribute(self, op: dd.RedistributeOp) -> None:
        """A traced `to_global`: box the operand's inferred distribution to the target."""
        dist = op.dist
        assert isinstance(dist, DistAttr)
        value = op.operand
        if dist_of(value.type) is None:
            value = self._promote(op, 0, dist.placement)
        want = with_dist(value.type, dist.placement, dist.sbp.sbps)
        if value.type != want:
            value = self._box(value, want, op)
        op.result.replace_all_uses_with(value)
        Rewriter.erase_op(op)

    def _op(self, op: FlowOp) -> None:
        dists = [dist_of(o.type) for o in op.operands]
        placements = list(dict.fromkeys(d.placement for d in dists if d is not None))
        declared = [d for r in op.results if (d := dist_of(r.type)) is not None]
        if not placements and not declared:
            if all(o in self.replicated for o in op.operands):
                self.replicated.update(op.results)
            return
        if len(placements) > 1:
            listing = ", ".join(str(p) for p in placements)
            raise fail(
                op,
                f"expected all global operands on one placement, got {listing}; "
                "move them with flow.boxing first",
            )
        placement = placements[0] if placements else declared[0].placement
        operands = list(op.operands)
        for i, d in enumerate(dists):
            if d is None:
                operands[i] = self._promote(op, i, placement)
        op.operands = operands
        current = [dist_of(o.type).sbp.sbps for o in op.operands]
        try:
            sig = sbp_rules.choose(op, current, placement.mesh_shape)
        except sbp_rules.NoSbpRuleError as err:
            raise fail(op, err.detail) from None
        boxed = [
            o if have == want else self._box(o, with_dist(o.type, placement, want), op)
            for o, have, want in zip(op.operands, current, sig.inputs)
        ]
        op.operands = boxed
        for r, nd in zip(list(op.results), sig.outputs):
            want = dist_of(r.type)
            new = Rewriter.replace_value_with_new_type(r, with_dist(r.type, placement, nd))
            if not op.operands and want is not None and want.sbp.sbps != nd:
                # A value made on every rank, declared with another distribution.
                uses = list(new.uses)
                box = dd.BoxingOp(
                    operands=[new],
                    result_types=[with_dist(new.type, want.placement, want.sbp.sbps)],
                )
                box.location = op.location
                Rewriter.insert_op(box, InsertPoint.after(op))
                for use in uses:
                    use.operation.operands[use.index] = box.result
        op.attributes[SIGNATURE_ATTR] = StringAttr(sig.name)

    def _results(self, f: func.FuncOp, ret: func.ReturnOp) -> None:
        outputs = list(f.function_type.outputs.data)
        values = list(ret.operands)
        for i, (v, want) in enumerate(zip(values, outputs)):
            have = v.type
            if have == want:
                continue
            dh, dw = dist_of(have), dist_of(want)
            if self.adopt_results and dw is None and dh is not None:
                outputs[i] = have
                continue
            assert isinstance(have, TensorType)
            if not isinstance(want, TensorType) or (
                (have.get_shape(), have.element_type) != (want.get_shape(), want.element_type)
            ):
                raise fail(ret, f"returns {have} as result #{i}, declared as {want}")
            if dw is None:
                raise fail(
                    ret,
                    f"returns the global tensor {have} as result #{i}, declared local ({want}); "
                    "take this rank's shard with flow.to_local",
                )
            if dh is None:
                v = self._promote(ret, i, dw.placement)
            if v.type != want:
                v = self._box(v, want, ret)
            values[i] = v
        ret.operands = values
        if outputs != list(f.function_type.outputs.data):
            f.function_type = FunctionType.from_lists(f.function_type.inputs.data, outputs)


def infer_sbp(
    module: ModuleOp, *, adopt_results: bool = False, replicated_args: Sequence[int] = ()
) -> None:
    """Run SBP inference on every function of `module`. With `adopt_results`, a result
    declared local whose value is global is redeclared with the inferred distribution.
    `replicated_args` are local arguments known to be the same on every rank (a traced
    program's captured constants, such as learning rates): like constants, they become
    broadcast tensors where global ops use them, on whichever placement that is."""
    for op in module.walk():
        if isinstance(op, func.FuncOp):
            inference = _Inference(adopt_results)
            if op.body.blocks.first is not None:
                args = op.body.block.args
                inference.replicated.update(args[i] for i in replicated_args if i < len(args))
            inference.run(op)


@dataclass(frozen=True)
class InferSbpPass(ModulePass):
    """Choose an SBP signature for every op on global tensors and insert the boxing it needs."""

    name = "flow-infer-sbp"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        atomically(op, infer_sbp)
