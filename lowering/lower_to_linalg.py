"""`flow-lower-to-linalg`: rewrite every flow op into func/arith/math/tensor/linalg.

One walk collects the flow ops and checks every type on the way (global
tensors must have been partitioned into local ones first); then each op is
replaced through a dispatch table (op class -> rule). A `flow.fused` is one
rule for its whole region (one `linalg.generic`), so the ops inside it are
checked but not lowered one by one. Nothing is mutated unless the whole
module can be lowered, so a failure leaves the input intact for a repro.
This is much faster in xDSL than a set of rewrite patterns driven to a
fixpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass

from flow.dialect.attrs import DistAttr
from flow.dialect.fused import FusedOp
from flow.dialect.fused import YieldOp as FusedYieldOp

from . import _elementwise, _fused, _movement, _random, _structured, _window
from ._elementwise import check_element_type
from ._iree_ops import IREE_OP_NAMES
from ._linalg_builders import Lowered
from ._support import fail

RULES: dict[type[Operation], Callable[[Operation], Lowered]] = {
    **_elementwise.RULES,
    **_structured.RULES,
    **_movement.RULES,
    **_window.RULES,
    **_random.RULES,
    **_fused.RULES,
}
"""The lowering of each flow op class."""

PARTITION_FIRST = "global tensors must be partitioned first (flow-partition)"


def _check_type(op: Operation, what: str, ty: Attribute) -> None:
    if isinstance(ty, TensorType) and isinstance(ty.encoding, DistAttr):
        raise fail(op, f"{what} has type {ty}: {PARTITION_FIRST}")


def _collect(module: ModuleOp) -> list[tuple[Operation, Callable[[Operation], Lowered]]]:
    """The flow ops of `module` with their rules; raises before anything is rewritten."""
    todo: list[tuple[Operation, Callable[[Operation], Lowered]]] = []
    for op in module.walk():
        for i, r in enumerate(op.results):
            _check_type(op, f"result #{i}", r.type)
        if isinstance(op, func.FuncOp):
            ft = op.function_type
            for j, ty in enumerate(ft.inputs.data):
                _check_type(op, f"@{op.sym_name.data} argument #{j}", ty)
            for j, ty in enumerate(ft.outputs.data):
                _check_type(op, f"@{op.sym_name.data} result #{j}", ty)
        else:
            for region in op.regions:
                for block in region.blocks:
                    for j, arg in enumerate(block.args):
                        _check_type(op, f"block argument #{j}", arg.type)
        if op.name.startswith("flow.") and op.name not in IREE_OP_NAMES:
            for v in (*op.operands, *op.results):
                if (why := check_element_type(v.type)) is not None:
                    raise fail(op, why)
            rule = RULES.get(type(op))
            fused_body = isinstance(op.parent_op(), FusedOp)
            if rule is None and not (fused_body and isinstance(op, FusedYieldOp)):
                raise fail(op, "has no lowering to linalg")
            if not fused_body:  # the flow.fused rule lowers its body ops itself
                todo.append((op, rule))
    return todo


def lower_module(module: ModuleOp) -> None:
    """Replace every flow op in `module` by its func/arith/math/tensor/linalg lowering."""
    for op, rule in _collect(module):
        new_ops, value = rule(op)
        block = op.parent
        assert block is not None
        loc = op.location
        for new in new_ops:
            new.location = loc
            block.insert_op_before(new, op)
        values = value if isinstance(value, list) else [value]  # several for flow.fused
        for result, v in zip(op.results, values, strict=True):
            result.replace_all_uses_with(v)
        block.erase_op(op)


@dataclass(frozen=True)
class LowerToLinalgPass(ModulePass):
    """Lower the flow dialect to linalg-on-tensors (with arith/math/tensor) for IREE."""

    name = "flow-lower-to-linalg"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_module(op)
