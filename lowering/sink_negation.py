"""`flow-sink-negation`: a sum of negated values becomes the negated sum.

`reduce sum(neg(x))` (the negation used only there) becomes `neg(reduce sum(x))`.
Negation is exact and commutes with each rounding step of the sum, so the result
is the same bit for bit; the negation then runs over the reduced tensor instead of
every element. Losses produce this shape (`-(p * log q).sum()`, `-x.mean()`).

It also keeps IREE's GPU code generation working: IREE fuses an elementwise
negation into the reduction that follows, as the combiner `acc - x`, and its
SPIR-V backend cannot lower a full reduction with that combiner ("Failed to get
an identity value for the reduction operation"), so the program did not compile
for vulkan.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from flow.dialect import ops as flow


def sink_negation(module: ModuleOp) -> None:
    for op in list(module.walk()):
        if not isinstance(op, flow.ReduceOp) or op.kind.data != flow.ReduceKind.SUM:
            continue
        neg = op.operand.owner
        if not isinstance(neg, flow.NegOp) or len(list(neg.result.uses)) != 1:
            continue
        total = flow.ReduceOp(
            operands=[neg.operand], result_types=[op.result.type], properties=dict(op.properties)
        )
        negated = flow.NegOp(operands=[total.result], result_types=[op.result.type])
        total.location = negated.location = op.location
        op.parent.insert_ops_before([total, negated], op)
        op.result.replace_all_uses_with(negated.result)
        op.parent.erase_op(op)
        neg.parent.erase_op(neg)


@dataclass(frozen=True)
class SinkNegationPass(ModulePass):
    """Negate after summing rather than before (see the module docstring)."""

    name = "flow-sink-negation"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        sink_negation(op)
