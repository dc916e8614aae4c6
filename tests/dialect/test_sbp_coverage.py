"""Every compute op has SBP signatures or an explicit replicate-only entry; none is replicated
by default."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import TensorType, f32, i32, i64
from xdsl.ir import Block
from xdsl.irdl import irdl_op_definition, operand_def, result_def

import flow.dialect as fd
from flow.dialect import sbp as sb
from flow.dialect import signatures as sig
from flow.dialect.base import FlowOp


def _dialect_subclasses(cls: type) -> set[type]:
    """Every op class deriving from `cls` that the dialect package defines (not tests)."""
    out = set()
    for sub in cls.__subclasses__():
        defined_here = sub.__module__.startswith("flow.dialect.")
        if defined_here and isinstance(getattr(sub, "name", None), str):
            out.add(sub)
        out |= _dialect_subclasses(sub)
    return out


COMPUTE_OPS = sorted((c for c in fd.ALL_OPS if issubclass(c, FlowOp)), key=lambda c: c.name)
"""What flow-infer-sbp computes signatures for: the FlowOps (the distribution ops, collectives
and flow.fused it treats apart)."""


def test_the_compute_ops_are_every_flowop_of_the_dialect():
    assert set(COMPUTE_OPS) == _dialect_subclasses(FlowOp)
    assert len(COMPUTE_OPS) > 50


@pytest.mark.parametrize("op", COMPUTE_OPS, ids=lambda c: c.name)
def test_every_compute_op_has_a_rule_or_is_replicate_only(op):
    assert op in sig.RULES, f"{op.name} has no entry in flow.dialect.signatures.RULES"


def test_the_replicate_only_ops_are_the_position_dependent_ones():
    assert {c.name for c in sb.REPLICATED_ONLY} == {
        "flow.constant", "flow.full", "flow.iota", "flow.random_bits",
    }  # fmt: skip
    assert all(sig.is_replicate_only(c) for c in sb.REPLICATED_ONLY)
    assert not sig.is_replicate_only(fd.AddOp)


def test_replicate_only_means_broadcast_everywhere():
    key = Block(arg_types=[TensorType(i64, [])]).args[0]
    op = fd.RandomBitsOp.make(key, shape=(4, 2), element_type=i32)
    assert [s.name for s in sb.signatures(op)] == ["[B] -> [B]"]
    assert [s.name for s in sb.signatures(op, 2)] == ["[B, B] -> [B, B]"]


@irdl_op_definition
class UnruledOp(FlowOp):
    """A compute op this test defines and the rule table does not know."""

    name = "flow.test_unruled"
    operand = operand_def(TensorType)
    result = result_def(TensorType)


def test_an_op_without_a_rule_is_an_error_naming_it():
    x = Block(arg_types=[TensorType(f32, [4])]).args[0]
    op = UnruledOp(operands=[x], result_types=[TensorType(f32, [4])])
    with pytest.raises(sig.NoSbpRuleError, match="'flow.test_unruled' op has no SBP signatures"):
        sb.signatures(op)
    with pytest.raises(sig.NoSbpRuleError, match="replicate-only entry"):
        sb.choose(op, [[fd.Sbp("B")]], (2,))
