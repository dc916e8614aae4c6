"""`flow-gemm-to-blas{policy=auto}`: large matrix products become calls of the host's BLAS.

Each `flow.matmul` that the policy picks becomes a `func.call` of an import of the `blas`
runtime module (its ABI: `flow.targets.blas_abi`; the runtime links it into cpu programs),
declared once per name at module level:

    %c = func.call @blas.matmul_nt.256x784xf32.1024x784xf32(%a, %w)
        : (tensor<256x784xf32>, tensor<1024x784xf32>) -> tensor<256x1024xf32>

An operand that is a `flow.transpose` of the last two dims is read through: the call takes
the transpose's input and names the operand transposed (`matmul_nt`), as BLAS's gemm does, so
no transposed copy is made (the transpose goes when nothing else reads it).

Policies (`flow.targets.blas_calibration`): `none` (the default: nothing changes), `all`
(every f32 / f64 product with static shapes) and `auto` (those with at least the flops from
which this machine's calibration found BLAS faster than IREE's code; smaller products stay in
IREE, fused with their epilogues). The frontend passes `auto` for the cpu target of this host
(`flow-to-iree-input{blas=auto}`); other targets never call BLAS.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from flow.dialect import ops as flow
from flow.targets.blas_abi import import_name
from flow.targets.blas_calibration import POLICIES, prefers_blas

from ._support import fail

__all__ = ["GemmToBlasPass", "gemm_to_blas"]


def _read_through_transpose(value: SSAValue) -> tuple[SSAValue, bool]:
    """`(x, True)` when `value` is `flow.transpose` of `x`'s last two dims, else
    `(value, False)`."""
    op = value.owner
    if isinstance(op, flow.TransposeOp):
        perm = tuple(op.permutation.get_values())
        rank = len(perm)
        if rank >= 2 and perm == (*range(rank - 2), rank - 1, rank - 2):
            return op.operand, True
    return value, False


def _static_shape(ty: object) -> tuple[int, ...] | None:
    if not isinstance(ty, TensorType):
        return None
    shape = tuple(ty.get_shape())
    return shape if all(d >= 0 for d in shape) else None


def gemm_to_blas(module: ModuleOp, policy: str) -> int:
    """Rewrite the products `policy` picks into `blas` calls; returns how many."""
    if policy not in POLICIES:
        raise fail(module, f"flow-gemm-to-blas: policy {policy!r}, expected one of "
                           f"{', '.join(POLICIES)}")  # fmt: skip
    if policy == "none":
        return 0
    declared: dict[str, func.FuncOp] = {}
    rewritten = 0
    for op in list(module.walk()):
        if not isinstance(op, flow.MatmulOp) or not op.result.uses:
            continue  # an unused product is dropped by dce; a call would stay
        out = _static_shape(op.result.type)
        lhs_shape = _static_shape(op.lhs.type)
        if out is None or lhs_shape is None:
            continue
        *batch, m, n = out
        k = lhs_shape[-1]
        count = 1
        for d in batch:
            count *= d
        element = str(op.result.type.element_type)
        if not prefers_blas(policy, count, m, n, k, element):
            continue
        a, ta = _read_through_transpose(op.lhs)
        b, tb = _read_through_transpose(op.rhs)
        symbol = import_name(ta, tb, str(a.type), str(b.type))
        if symbol not in declared:
            declared[symbol] = func.FuncOp.external(symbol, [a.type, b.type], [op.result.type])
        call = func.CallOp(symbol, [a, b], [op.result.type])
        call.location = op.location
        sources = {op.lhs.owner, op.rhs.owner}
        op.parent.insert_op_before(call, op)
        op.result.replace_all_uses_with(call.results[0])
        op.parent.erase_op(op)
        for source in sources:  # a transpose read through, now unused
            if isinstance(source, flow.TransposeOp) and not source.result.uses:
                source.parent.erase_op(source)
        rewritten += 1
    body = module.body.block
    existing = {o.sym_name.data for o in body.ops if isinstance(o, func.FuncOp)}
    for symbol, decl in declared.items():
        if symbol not in existing:
            body.add_op(decl)
    return rewritten


@dataclass(frozen=True)
class GemmToBlasPass(ModulePass):
    """Hand large matrix products to the host's BLAS (see the module docstring)."""

    name = "flow-gemm-to-blas"
    policy: str = "none"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        gemm_to_blas(op, self.policy)
