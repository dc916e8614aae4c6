"""`flow-fold-batch-matmuls`: products with a weight shared across the batch as one 2-D product.

The frontend broadcasts a matmul's batch dims (`x @ w` with `x` of shape (B, T, K) and `w`
of (K, N) multiplies (B, T, K) by `w` broadcast to (B, K, N)), as NumPy's semantics say,
and autograd answers with the broadcast's adjoint: the weight's gradient is a batched
product `x^T @ g` of shape (B, K, N) summed over B. Lowered as they stand, IREE copies
(and packs) the weight once per batch entry and runs B small products where one large one
would do; in a transformer step those copies cost more than the products.

Two rewrites, applied in one walk, turn each into one product over rows `B*T`:

* `matmul(a, broadcast(w))`, `w` of rank 2 broadcast over the leading dims only (directly
  or through a transpose of the last two dims), becomes
  `reshape(matmul(reshape(a, (B*T, K)), w), (B, T, N))`;
* `reduce_sum(matmul(transpose(a), g), dims=batch)`, the transpose swapping the last two
  dims of `a` of shape (B, T, K) and the matmul used only there, becomes
  `matmul(transpose(reshape(a, (B*T, K))), reshape(g, (B*T, N)))`.

Reshapes of row-major tensors are free, and the rewritten programs compute the same sums
(the second in another order, as any reassociation of a float sum). Shapes must be static.
The pass runs on local programs (after partitioning), so it never changes a distribution.
It runs before `flow-fold-transposes`, which then folds the transposes left around the
2-D products, and before `flow-gemm-to-blas`, which then sees the larger products.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from flow.dialect import ops as flow

from .fold_transposes import swaps_last_two


def _plain(*values: SSAValue) -> bool:
    """Whether every value is a static tensor without an encoding (a local program's)."""
    for v in values:
        ty = v.type
        if not isinstance(ty, TensorType) or any(s < 0 for s in ty.get_shape()):
            return False
        if not isinstance(ty.encoding, NoneAttr):
            return False
    return True


def _insert(op: Operation, before: Operation) -> SSAValue:
    op.location = before.location
    before.parent.insert_op_before(op, before)
    return op.results[0]


def _rows(value: SSAValue, before: Operation) -> SSAValue:
    """`value` of shape (*batch, M, X) as (prod(batch)*M, X)."""
    shape = value.type.get_shape()
    return _insert(flow.ReshapeOp.make(value, shape=(prod(shape[:-1]), shape[-1])), before)


def _shared_matrix(value: SSAValue, nb: int) -> tuple[SSAValue, bool] | None:
    """The rank-2 `w` that `value` broadcasts over its `nb` leading dims, and whether it is
    read transposed (`value` = transpose(broadcast(w)), the last two dims swapped)."""
    op, transposed = value.owner, False
    if isinstance(op, flow.TransposeOp) and swaps_last_two(tuple(op.permutation.get_values())):
        op, transposed = op.operand.owner, True
    if not isinstance(op, flow.BroadcastInDimOp) or len(op.operand.type.get_shape()) != 2:
        return None
    if tuple(op.broadcast_dimensions.get_values()) != (nb, nb + 1):
        return None
    if op.operand.type.get_shape() != op.result.type.get_shape()[nb:]:
        return None  # a broadcast of a size-1 matrix dim as well
    return op.operand, transposed


def _fold_shared_weight(op: flow.MatmulOp) -> SSAValue | None:
    nb = len(op.result.type.get_shape()) - 2
    shared = _shared_matrix(op.rhs, nb) if nb else None
    if shared is None or not _plain(op.lhs, op.rhs, op.result):
        return None
    w, transposed = shared
    if transposed:
        w = _insert(flow.TransposeOp.make(w, permutation=(1, 0)), op)
    product = _insert(flow.MatmulOp.make(_rows(op.lhs, op), w), op)
    return _insert(flow.ReshapeOp.make(product, shape=op.result.type.get_shape()), op)


def _fold_batch_sum(op: flow.ReduceOp) -> SSAValue | None:
    source = op.operand.owner
    if op.kind.data.value != "sum" or not isinstance(source, flow.MatmulOp):
        return None
    nb = len(source.result.type.get_shape()) - 2
    lhs = source.lhs.owner
    if (
        nb == 0
        or tuple(op.dims.get_values()) != tuple(range(nb))
        or len(list(source.result.uses)) != 1
        or not isinstance(lhs, flow.TransposeOp)
        or not swaps_last_two(tuple(lhs.permutation.get_values()))
        or not _plain(lhs.operand, source.rhs, source.result, op.result)
    ):
        return None
    rows = _insert(flow.TransposeOp.make(_rows(lhs.operand, op), permutation=(1, 0)), op)
    return _insert(flow.MatmulOp.make(rows, _rows(source.rhs, op)), op)


def fold_batch_matmuls(module: ModuleOp) -> None:
    for op in list(module.walk()):
        if op.parent is None:
            continue
        if isinstance(op, flow.MatmulOp):
            new = _fold_shared_weight(op)
        elif isinstance(op, flow.ReduceOp):
            new = _fold_batch_sum(op)
        else:
            continue
        if new is None:
            continue
        source = op.operand.owner if isinstance(op, flow.ReduceOp) else None
        op.result.replace_all_uses_with(new)
        op.parent.erase_op(op)
        if source is not None:
            source.parent.erase_op(source)


@dataclass(frozen=True)
class FoldBatchMatmulsPass(ModulePass):
    """Products with a weight shared across the batch as 2-D products (module docstring)."""

    name = "flow-fold-batch-matmuls"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fold_batch_matmuls(op)
