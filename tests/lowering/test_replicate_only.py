"""flow-infer-sbp computes replicate-only ops replicated, and refuses an op without SBP rules.

The rank programs of flow-partition show it: a replicate-only op makes the whole
tensor on every rank (global shape, no shard), and a split the program wants is
cut out of it afterwards.
"""

from __future__ import annotations

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.irdl import irdl_op_definition, operand_def, result_def
from xdsl.parser import Parser
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from flow.dialect import make_context
from flow.dialect.attrs import Sbp, dist_of
from flow.dialect.base import FlowOp
from flow.lowering.infer_sbp import infer_sbp
from flow.lowering.partition import partition

PL = '#flow.placement<"cpu", [0, 1]>'


def g(shape: str, sbp: str) -> str:
    return f"tensor<{shape}, #flow.dist<{PL}, #flow.sbp<[{sbp}]>>>"


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def ops(module: ModuleOp, name: str) -> list:
    return [op for op in module.walk() if op.name == name]


def sbps(value) -> tuple[Sbp, ...] | None:
    dist = dist_of(value.type)
    return None if dist is None else dist.sbp.sbps


RANDOM = f"""
func.func @f(%key: {g("i64", "P")}) -> {g("8xi32", "S(0)")} {{
  %0 = flow.random_bits %key : {g("i64", "P")} -> {g("8xi32", "S(0)")}
  func.return %0 : {g("8xi32", "S(0)")}
}}
"""

IOTA = f"""
func.func @f(%x: {g("8xi64", "S(0)")}) -> {g("8xi64", "S(0)")} {{
  %0 = flow.iota dim = 0 -> {g("8xi64", "S(0)")}
  %1 = flow.add %x, %0 : {g("8xi64", "S(0)")}
  func.return %1 : {g("8xi64", "S(0)")}
}}
"""


def test_random_bits_is_computed_broadcast():
    module = parse(RANDOM)
    infer_sbp(module)
    (op,) = ops(module, "flow.random_bits")
    assert op.attributes["sbp_signature"].data == "[B] -> [B]"
    assert sbps(op.key) == (Sbp("B"),)  # the partial key is summed first
    assert sbps(op.result) == (Sbp("B"),)
    (key_box,) = [b for b in ops(module, "flow.boxing") if b.result is op.key]
    assert sbps(key_box.operand) == (Sbp("P"),)
    (use,) = [u.operation for u in op.result.uses]
    assert use.name == "flow.boxing" and sbps(use.result) == (Sbp("S", 0),)


def test_iota_declared_split_is_made_whole_then_split():
    module = parse(IOTA)
    infer_sbp(module)
    (iota,) = ops(module, "flow.iota")
    assert iota.attributes["sbp_signature"].data == "-> [B]"
    assert sbps(iota.result) == (Sbp("B"),)
    (add,) = ops(module, "flow.add")
    assert add.attributes["sbp_signature"].data == "[S(0)], [S(0)] -> [S(0)]"
    assert add.rhs.owner.name == "flow.boxing" and add.rhs.owner.operand is iota.result


@pytest.mark.parametrize("rank", [0, 1])
def test_rank_programs_make_the_whole_tensor_and_slice_it(rank):
    module = parse(RANDOM)
    infer_sbp(module)
    partition(module, rank)
    (op,) = ops(module, "flow.random_bits")
    assert op.result.type == TensorType(op.result.type.element_type, [8])  # all 8, local
    assert [o.name for o in ops(module, "flow.all_reduce")] == ["flow.all_reduce"]  # the key
    (cut,) = ops(module, "flow.local_slice")
    assert cut.result.type.get_shape() == (4,)


@irdl_op_definition
class UnruledOp(FlowOp):
    """A compute op the SBP rule table does not know."""

    name = "flow.test_unruled_in_pass"
    operand = operand_def(TensorType)
    result = result_def(TensorType)


def test_an_op_without_sbp_rules_is_a_pass_error_naming_it():
    ty = g("4xf32", "S(0)")
    module = parse(f"func.func @f(%x: {ty}) -> {ty} {{\n  func.return %x : {ty}\n}}")
    (f,) = module.ops
    assert isinstance(f, func.FuncOp)
    ret = f.body.block.last_op
    x = f.body.block.args[0]
    op = UnruledOp(operands=[x], result_types=[TensorType(f32, [4])])
    Rewriter.insert_op(op, InsertPoint.before(ret))
    ret.operands = [op.result]
    with pytest.raises(PassFailedException) as err:
        infer_sbp(module)
    assert "'flow.test_unruled_in_pass' op has no SBP signatures" in str(err.value)
    assert "replicate-only" in str(err.value)
