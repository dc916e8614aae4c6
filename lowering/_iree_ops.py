"""IREE's own ops that flow-lower-collectives-native emits, declared for xDSL.

On GPU targets collectives become IREE's native `flow.collective.*` ops on
`!flow.channel` values, kept in `util.global`s that a `util.initializer` fills.
These ops belong to IREE (its Flow and Util dialects), not to our `flow`
dialect: they are declared here only so that xDSL can build, verify and print
them in generic form, which is how IREE 3.13 parses them; they are not
registered in our context. The hand-off and flow-lower-to-linalg let exactly
these names through (`IREE_OP_NAMES`, `IREE_TYPE_NAMES`).

Enum properties are IREE's integer encodings (checked against `iree-opt
--mlir-print-op-generic`): `element_type` f16 8, f32 9, ...; `reduction_op`
sum 1, product 2, minimum 3, maximum 4.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    ArrayAttr,
    FunctionType,
    IndexType,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    i32,
)
from xdsl.ir import Attribute, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsolatedFromAbove, IsTerminator


@irdl_attr_definition
class ChannelType(ParametrizedAttribute, TypeAttribute):
    """IREE's `!flow.channel`: a collective communicator (an NCCL / RCCL communicator)."""

    name = "flow.channel"


ELEMENT_TYPES = {
    "i8": 0, "ui8": 1, "i16": 2, "ui16": 3, "i32": 4, "ui32": 5, "i64": 6, "ui64": 7,
    "f16": 8, "f32": 9, "f64": 10, "bf16": 11,
    "si8": 0, "si16": 2, "si32": 4, "si64": 6,
    "i1": 1,  # booleans are stored as bytes: moved as ui8
}  # fmt: skip
"""Our element types -> IREE's CollectiveElementType (signless integers travel as signed)."""

REDUCTIONS = {"sum": 1, "prod": 2, "min": 3, "max": 4}
"""Our reduce kinds -> IREE's CollectiveReductionOp."""


def _tied() -> ArrayAttr:
    return ArrayAttr([IntegerAttr(0, IndexType())])


class CollectiveOp(IRDLOperation):
    """Base of IREE's `flow.collective.*`: the result is written into `target` (tied to it)."""

    target = operand_def(TensorType)
    source = operand_def(TensorType)
    channel = operand_def(ChannelType)
    result = result_def(TensorType)
    element_type = prop_def(IntegerAttr)
    reduction_op = opt_prop_def(IntegerAttr)
    tied_operands = prop_def(ArrayAttr)

    @classmethod
    def make(
        cls, target: SSAValue, source: SSAValue, channel: SSAValue, element: int, reduce: int | None
    ) -> CollectiveOp:
        props: dict[str, Attribute] = {}
        if reduce is not None:
            props["reduction_op"] = IntegerAttr(reduce, i32)
        props["element_type"] = IntegerAttr(element, i32)
        props["tied_operands"] = _tied()
        return cls(operands=[target, source, channel], result_types=[target.type], properties=props)


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    name = "flow.collective.all_reduce"


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    name = "flow.collective.all_gather"


@irdl_op_definition
class ReduceScatterOp(CollectiveOp):
    name = "flow.collective.reduce_scatter"


@irdl_op_definition
class AllToAllOp(CollectiveOp):
    name = "flow.collective.all_to_all"


@irdl_op_definition
class SendRecvOp(IRDLOperation):
    """Send `source` to channel rank `send` and receive `target` from `recv` (-1: none)."""

    name = "flow.collective.send_recv"
    target = operand_def(TensorType)
    source = operand_def(TensorType)
    channel = operand_def(ChannelType)
    send = operand_def(IndexType)
    recv = operand_def(IndexType)
    result = result_def(TensorType)
    element_type = prop_def(IntegerAttr)
    tied_operands = prop_def(ArrayAttr)

    @classmethod
    def make(cls, target, source, channel, send, recv, element: int) -> SendRecvOp:
        props = {"element_type": IntegerAttr(element, i32), "tied_operands": _tied()}
        return cls(
            operands=[target, source, channel, send, recv],
            result_types=[target.type],
            properties=props,
        )


@irdl_op_definition
class ChannelDefaultOp(IRDLOperation):
    """The world channel, from the runtime environment."""

    name = "flow.channel.default"
    result = result_def(ChannelType)


@irdl_op_definition
class ChannelSplitOp(IRDLOperation):
    """A sub-channel: the ranks of one `color`, ordered by `key` (color -1: none)."""

    name = "flow.channel.split"
    channel = operand_def(ChannelType)
    color = operand_def(IndexType)
    key = operand_def(IndexType)
    result = result_def(ChannelType)


@irdl_op_definition
class GlobalOp(IRDLOperation):
    name = "util.global"
    sym_name = prop_def(StringAttr)
    sym_visibility = prop_def(StringAttr)
    type = prop_def(TypeAttribute)

    @classmethod
    def make(cls, name: str, ty: Attribute, visibility: str = "public") -> GlobalOp:
        props = {"sym_name": StringAttr(name), "sym_visibility": StringAttr(visibility),
                 "type": ty}  # fmt: skip
        return cls(properties=props)


@irdl_op_definition
class GlobalLoadOp(IRDLOperation):
    name = "util.global.load"
    result = result_def()
    global_ = prop_def(SymbolRefAttr, prop_name="global")

    @classmethod
    def make(cls, name: str, ty: Attribute) -> GlobalLoadOp:
        return cls(result_types=[ty], properties={"global": SymbolRefAttr(name)})


@irdl_op_definition
class GlobalStoreOp(IRDLOperation):
    name = "util.global.store"
    value = operand_def()
    global_ = prop_def(SymbolRefAttr, prop_name="global")

    @classmethod
    def make(cls, value: SSAValue, name: str) -> GlobalStoreOp:
        return cls(operands=[value], properties={"global": SymbolRefAttr(name)})


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "util.return"
    traits = traits_def(IsTerminator())


@irdl_op_definition
class InitializerOp(IRDLOperation):
    """Code run once when the module is loaded."""

    name = "util.initializer"
    function_type = prop_def(FunctionType)
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())

    @classmethod
    def make(cls, body: Region) -> InitializerOp:
        props = {"function_type": FunctionType.from_lists([], [])}
        return cls(properties=props, regions=[body])


@irdl_op_definition
class OptimizationBarrierOp(IRDLOperation):
    """Its results are its operands, and the compiler may not look through it: a value
    passed with others here depends on all of them (how transfers are ordered and kept)."""

    name = "util.optimization_barrier"
    values = var_operand_def()
    results_ = var_result_def()

    @classmethod
    def make(cls, values: list[SSAValue]) -> OptimizationBarrierOp:
        return cls(operands=[values], result_types=[[v.type for v in values]])


IREE_OPS: tuple[type[IRDLOperation], ...] = (
    AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp, SendRecvOp, ChannelDefaultOp,
    ChannelSplitOp, GlobalOp, GlobalLoadOp, GlobalStoreOp, ReturnOp, InitializerOp,
    OptimizationBarrierOp,
)  # fmt: skip

IREE_OP_NAMES: frozenset[str] = frozenset(op.name for op in IREE_OPS)
"""The IREE op names the hand-off accepts although they start with `flow.`."""

IREE_TYPE_NAMES: frozenset[str] = frozenset({"!" + ChannelType.name})
"""The IREE types, as printed, that the hand-off accepts."""
