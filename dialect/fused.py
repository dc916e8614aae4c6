"""`flow.fused`: a region holding a fused elementwise computation, and its `flow.yield`.

The `flow-fuse-elementwise` pass groups chains and trees of elementwise
primitives into one `flow.fused`, which the lowering turns into a single
`linalg.generic`. The body is ordinary flow IR on tensors, so every op in it
keeps its own verifier and its own scalar lowering; the region only adds the
contract that makes one loop nest enough: every value in it has the shape of
the results (the iteration space), the fused operands enter as block
arguments (the region is isolated from above), and a block argument of
another shape is read only through `flow.broadcast_in_dim`, which becomes the
input's indexing map. `flow.full` fills are allowed too: they lower to a
scalar constant.

```mlir
%r:2 = flow.fused (%x = %a, %y = %b) : (tensor<4x3xf32>, tensor<3xf32>)
    -> (tensor<4x3xf32>, tensor<4x3xf32>) {
  %0 = flow.broadcast_in_dim %y, dims = [1] : tensor<3xf32> -> tensor<4x3xf32>
  %1 = flow.add %x, %0 : tensor<4x3xf32>
  %2 = flow.exp %1 : tensor<4x3xf32>
  flow.yield %1, %2 : tensor<4x3xf32>, tensor<4x3xf32>
}
```
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure

from .base import verify_error
from .elementwise import ElementwiseOp
from .structured import BroadcastInDimOp, FullOp

FUSED_BODY_OPS: tuple[type[Operation], ...] = (ElementwiseOp, FullOp, BroadcastInDimOp)
"""What a `flow.fused` body may hold besides its `flow.yield`."""


def _shape(ty: Attribute) -> tuple[int, ...] | None:
    return tuple(ty.get_shape()) if isinstance(ty, TensorType) else None


@irdl_op_definition
class FusedOp(IRDLOperation):
    """Elementwise flow ops fused into one loop nest over the shape of the results.

    The operands are bound to the body's block arguments; `flow.yield` names the
    results (several when values computed inside are also used outside). Body
    ops are elementwise primitives, `flow.full`, and `flow.broadcast_in_dim` of
    a block argument; each has the results' shape.
    """

    name = "flow.fused"
    inputs = var_operand_def(TensorType)
    res = var_result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_types: Sequence[Attribute],
        body: Region,
        attributes: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[inputs], result_types=[result_types], regions=[body], attributes=attributes
        )

    @property
    def iteration_shape(self) -> tuple[int, ...]:
        """The shape every value of the body has: that of the results."""
        return tuple(self.res[0].type.get_shape())

    def print(self, printer: Printer) -> None:
        args = self.body.block.args if self.body.blocks else ()
        printer.print_string(" (")
        printer.print_list(
            zip(args, self.inputs),
            lambda pair: (
                printer.print_ssa_value(pair[0]),
                printer.print_string(" = "),
                printer.print_ssa_value(pair[1]),
            ),
        )
        printer.print_string(") : ")
        printer.print_operation_type(self)
        printer.print_string(" ")
        # invalid IR (being reported) shows its block arguments instead of losing some
        printer.print_region(self.body, print_entry_block_args=len(args) != len(self.inputs))
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)

    @classmethod
    def parse(cls, parser: Parser) -> FusedOp:
        def binding() -> tuple[Parser.Argument, object]:
            arg = parser.parse_argument(expect_type=False)
            parser.parse_punctuation("=")
            return arg, parser.parse_unresolved_operand()

        pairs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, binding)
        parser.parse_punctuation(":")
        at = parser.pos
        fn_type = parser.parse_function_type()
        in_types = fn_type.inputs.data
        if len(pairs) != len(in_types):
            parser.raise_error(
                f"expected {len(pairs)} operand types for {len(pairs)} bindings, "
                f"got {len(in_types)}",
                at,
                parser.pos,
            )
        args = [a.resolve(t) for (a, _), t in zip(pairs, in_types)]
        operands = [parser.resolve_operand(o, t) for (_, o), t in zip(pairs, in_types)]
        body = parser.parse_region(args)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        return cls(operands, fn_type.outputs.data, body, attrs.data if attrs else None)

    def verify_(self) -> None:
        block = self.body.block
        if not self.res:
            raise verify_error(self.name, "expected at least one result")
        shape = self.iteration_shape
        for i, r in enumerate(self.res):
            if _shape(r.type) != shape:
                raise verify_error(
                    self.name,
                    f"expected every result to have shape {list(shape)} (that of result #0), "
                    f"got result #{i} of type {r.type}",
                )
        if len(block.args) != len(self.inputs):
            raise verify_error(
                self.name,
                f"expected {len(self.inputs)} region arguments (one per operand), "
                f"got {len(block.args)}",
            )
        for i, (arg, operand) in enumerate(zip(block.args, self.inputs)):
            if arg.type != operand.type:
                raise verify_error(
                    self.name,
                    f"expected region argument #{i} of type {operand.type} (the operand's), "
                    f"got {arg.type}",
                )
        terminator = block.last_op
        if not isinstance(terminator, YieldOp):
            got = "an empty body" if terminator is None else f"'{terminator.name}'"
            raise verify_error(self.name, f"expected the body to end with 'flow.yield', got {got}")
        for op in block.ops:
            if op is not terminator:
                self._verify_body_op(op, shape)
        yielded = [v.type for v in terminator.values]
        expected = [r.type for r in self.res]
        if len(yielded) != len(expected):
            raise verify_error(
                self.name, f"expected 'flow.yield' of {len(expected)} values, got {len(yielded)}"
            )
        for i, (y, e) in enumerate(zip(yielded, expected)):
            if y != e:
                raise verify_error(self.name, f"expected yield operand #{i} of type {e}, got {y}")

    def _verify_body_op(self, op: Operation, shape: tuple[int, ...]) -> None:
        if not isinstance(op, FUSED_BODY_OPS):
            raise verify_error(
                self.name,
                f"expected only elementwise flow ops, flow.full and flow.broadcast_in_dim "
                f"in its body, got '{op.name}'",
            )
        for j, v in enumerate(op.operands):
            if not _defined_in(v, self.body.block):
                raise verify_error(
                    self.name,
                    f"using value defined outside the region: operand #{j} of '{op.name}' "
                    "(pass it as an operand)",
                )
        if isinstance(op, BroadcastInDimOp) and not isinstance(op.operand.owner, Block):
            raise verify_error(
                self.name,
                "expected 'flow.broadcast_in_dim' in its body to broadcast a region argument, "
                f"got the result of '{op.operand.owner.name}'",
            )
        actual = _shape(op.results[0].type)
        if actual != shape:
            raise verify_error(
                self.name,
                f"expected every op in its body to have the result shape {list(shape)}, "
                f"got '{op.name}' of type {op.results[0].type}",
            )


def _defined_in(value: SSAValue, block: Block) -> bool:
    owner = value.owner
    return owner is block if isinstance(owner, Block) else owner.parent is block


@irdl_op_definition
class YieldOp(IRDLOperation):
    """The terminator of a `flow.fused` body: the values that become its results."""

    name = "flow.yield"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(FusedOp), Pure())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[values])


OPS: tuple = (FusedOp, YieldOp)
ATTRS: tuple = ()

__all__: list[str] = ["FusedOp", "YieldOp", "FUSED_BODY_OPS"]
