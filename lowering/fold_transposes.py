"""`flow-fold-transposes`: move transposes into matmuls, where the lowering absorbs them.

Two rewrites, applied in one walk:

* `transpose(transpose(x))` becomes one transpose of `x` (or `x` itself);
* `transpose(matmul(a, b))` (swapping the last two dims, the matmul used only
  there) becomes `matmul(transpose(b), transpose(a))`.

Autograd produces both shapes (the weight gradient of `x @ w.T` is
`(x.T @ g).T`). The lowering reads a transposed matmul operand through its
indexing map, so after this pass no transpose is left around a contraction:
IREE sees plain matmuls with transposed operands, which it packs for data
tiling directly (a transpose fused into the pack or unpack can fail to
vectorize in IREE 3.13's CPU backend).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from flow.dialect import ops as flow


def swaps_last_two(perm: tuple[int, ...]) -> bool:
    n = len(perm)
    return n >= 2 and perm == (*range(n - 2), n - 1, n - 2)


def _transposed(value: SSAValue, perm: tuple[int, ...], before: Operation) -> SSAValue:
    """`value` permuted by `perm`, composing with a producing transpose when there is one."""
    producer = value.owner
    if isinstance(producer, flow.TransposeOp):
        inner = tuple(producer.permutation.get_values())
        perm = tuple(inner[p] for p in perm)
        value = producer.operand
    if perm == tuple(range(len(perm))):
        return value
    op = flow.TransposeOp.make(value, permutation=perm)
    op.location = before.location
    before.parent.insert_op_before(op, before)
    return op.result


def fold_transposes(module: ModuleOp) -> None:
    for op in list(module.walk()):
        if not isinstance(op, flow.TransposeOp) or op.parent is None:
            continue
        perm = tuple(op.permutation.get_values())
        source = op.operand.owner
        if (
            isinstance(source, flow.MatmulOp)
            and swaps_last_two(perm)
            and len(list(source.result.uses)) == 1
            and source.result.type.encoding == op.result.type.encoding
        ):
            lhs = _transposed(source.rhs, perm, op)
            rhs = _transposed(source.lhs, perm, op)
            new = flow.MatmulOp.make(lhs, rhs)
        elif isinstance(source, flow.TransposeOp):
            value = _transposed(op.operand, perm, op)
            op.result.replace_all_uses_with(value)
            op.parent.erase_op(op)
            continue
        else:
            continue
        new.location = op.location
        op.parent.insert_op_before(new, op)
        op.result.replace_all_uses_with(new.result)
        op.parent.erase_op(op)
        source.parent.erase_op(source)


@dataclass(frozen=True)
class FoldTransposesPass(ModulePass):
    """Fold transposes into each other and into matmuls (see the module docstring)."""

    name = "flow-fold-transposes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fold_transposes(op)
