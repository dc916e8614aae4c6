"""Upstream MLIR ops that IREE accepts but xDSL does not define; we only build and print them."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.arith import FastMathFlagsAttr
from xdsl.dialects.builtin import AnyFloatConstr
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure


@irdl_op_definition
class RemFOp(IRDLOperation):
    """`arith.remf`: floating-point remainder with the sign of the dividend (C fmod)."""

    name = "arith.remf"
    T: ClassVar = VarConstraint("T", AnyFloatConstr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    fastmath = prop_def(FastMathFlagsAttr, default_value=FastMathFlagsAttr("none"))
    traits = traits_def(Pure())
