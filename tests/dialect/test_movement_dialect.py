"""Shape inference, verification and parameters of the movement ops (slice, pad, concat,
gather): every `infer` error names the op, what it expected and what it got."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
    f32,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

import flow.dialect as fd
from flow.dialect import make_context


def t(el, *shape):
    return TensorType(el, list(shape))


def slice_params(start, strides, sizes):
    return {"start": start, "strides": strides, "sizes": sizes}


ZERO = FloatAttr(0.0, f32)

INFER_ERRORS = [
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([0], [1, 1], [2, 2]),
     r"'flow.slice' op expected 2 start entries for tensor<6x5xf32>, got \[0\]"),
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([0, 0], [1, 0], [2, 2]),
     r"'flow.slice' op expected non-zero strides, got \[1, 0\]"),
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([0, 0], [1, 1], [2, -1]),
     r"'flow.slice' op expected non-negative sizes, got \[2, -1\]"),
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([1, 0], [2, 1], [4, 5]),
     r"'flow.slice' op dim 0 reads indices 1 to 7 \(start 1, stride 2, size 4\) outside \[0, 6\) of tensor<6x5xf32>"),
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([0, 2], [1, -1], [6, 4]),
     r"'flow.slice' op dim 1 reads indices 2 to -1 \(start 2, stride -1, size 4\) outside \[0, 5\)"),
    (fd.SliceOp, [f32], slice_params([], [], []),
     r"'flow.slice' op expected operand to be a ranked tensor, got f32"),
    (fd.PadOp, [t(f32, 2, 3)], {"low": [1, 0], "high": [0, -1], "value": ZERO},
     r"'flow.pad' op expected non-negative padding, got low \[1, 0\], high \[0, -1\]"),
    (fd.PadOp, [t(f32, 2, 3)], {"low": [1], "high": [0, 0], "value": ZERO},
     r"'flow.pad' op expected 2 low padding entries for tensor<2x3xf32>, got \[1\]"),
    (fd.PadOp, [t(f32, 2, 3)], {"low": [0, 0], "high": [0, 0], "value": IntegerAttr(0, i32)},
     r"'flow.pad' op expected a padding value of type f32, got 0 : i32"),
    (fd.ConcatOp, [], {"dim": 0}, r"'flow.concat' op expected at least one operand"),
    (fd.ConcatOp, [t(f32)], {"dim": 0}, r"'flow.concat' op expected operands of rank >= 1, got tensor<f32>"),
    (fd.ConcatOp, [t(f32, 2), t(f32, 3)], {"dim": 1}, r"'flow.concat' op expected dim in \[0, 1\), got 1"),
    (fd.ConcatOp, [t(f32, 2, 3), t(i32, 2, 3)], {"dim": 0},
     r"'flow.concat' op expected every operand to have element type f32, got tensor<2x3xi32> \(operand #1\)"),
    (fd.ConcatOp, [t(f32, 2, 3), t(f32, 2, 4), t(f32, 3, 3)], {"dim": 1},
     r"'flow.concat' op expected operand #2 to match operand #0 in every dim but 1, got tensor<3x3xf32> and tensor<2x3xf32>"),
    (fd.ConcatOp, [t(f32, 2, 3), t(f32, 2)], {"dim": 0},
     r"'flow.concat' op expected operand #1 to match operand #0 in every dim but 0"),
    (fd.GatherOp, [t(f32, 4, 3), t(f32, 2, 3)], {"dim": 0},
     r"'flow.gather' op expected integer indices, got tensor<2x3xf32>"),
    (fd.GatherOp, [t(f32, 4, 3), t(i1, 2, 3)], {"dim": 0},
     r"'flow.gather' op expected integer indices, got tensor<2x3xi1>"),
    (fd.GatherOp, [t(f32, 4, 3), t(i64, 2)], {"dim": 0},
     r"'flow.gather' op expected indices of rank 2 like the operand tensor<4x3xf32>, got tensor<2xi64>"),
    (fd.GatherOp, [t(f32, 4, 3), t(i64, 2, 3)], {"dim": -1},
     r"'flow.gather' op expected dim in \[0, 2\), got -1"),
    (fd.GatherOp, [t(f32, 4, 3), t(i64, 2, 5)], {"dim": 0},
     r"'flow.gather' op expected indices dim 1 \(size 5\) to be at most operand dim 1 \(size 3\)"),
    (fd.GatherOp, [t(f32, 0, 3), t(i64, 2, 3)], {"dim": 0},
     r"'flow.gather' op cannot gather along dim 0 of size 0 of tensor<0x3xf32>"),
]  # fmt: skip


@pytest.mark.parametrize(
    "op, types, params, match",
    INFER_ERRORS,
    ids=[f"{c[0].name}-{i}" for i, c in enumerate(INFER_ERRORS)],
)
def test_infer_error_names_op_expected_and_actual(op, types, params, match):
    with pytest.raises(VerifyException, match=match):
        op.infer(types, **params)


def test_every_movement_op_has_an_infer_error_case():
    assert {c[0] for c in INFER_ERRORS} == set(fd.movement.OPS)


INFERRED = [
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([5, 1], [-2, 3], [3, 2]), t(f32, 3, 2)),
    (fd.SliceOp, [t(f32, 6, 5)], slice_params([6, 0], [1, 1], [0, 5]), t(f32, 0, 5)),
    (fd.SliceOp, [t(i1)], slice_params([], [], []), t(i1)),
    (fd.PadOp, [t(i8, 2, 0)], {"low": [1, 0], "high": [0, 3], "value": IntegerAttr(7, i8)}, t(i8, 3, 3)),
    (fd.ConcatOp, [t(f32, 2, 0), t(f32, 2, 3), t(f32, 2, 1)], {"dim": 1}, t(f32, 2, 4)),
    (fd.GatherOp, [t(f32, 4, 3), t(i32, 2, 7)], {"dim": 1}, t(f32, 2, 7)),
    (fd.GatherOp, [t(i1, 0, 3), t(i8, 0, 1)], {"dim": 0}, t(i1, 0, 1)),
]  # fmt: skip


@pytest.mark.parametrize("op, types, params, expected", INFERRED)
def test_inferred_result_types(op, types, params, expected):
    assert op.infer(types, **params) == expected


def test_make_builds_ops_that_verify_and_report_their_params():
    block = Block(arg_types=[t(f32, 6, 5), t(i64, 2, 5)])
    x, idx = block.args
    ops = [
        fd.SliceOp.make(x, **slice_params([5, 0], [-1, 2], [6, 3])),
        fd.PadOp.make(x, low=[0, 1], high=[2, 0], value=FloatAttr(1.5, f32)),
        fd.ConcatOp.make(x, x, x, dim=0),
        fd.GatherOp.make(x, idx, dim=0),
    ]
    block.add_ops(ops)
    block.add_op(ReturnOp())
    ModuleOp([FuncOp("f", ([x.type, idx.type], []), Region(block))]).verify()
    assert [op.results[0].type for op in ops] == [
        t(f32, 6, 3), t(f32, 8, 6), t(f32, 18, 5), t(f32, 2, 5),
    ]  # fmt: skip
    assert ops[0].params() == slice_params((5, 0), (-1, 2), (6, 3))
    assert ops[1].params() == {"low": (0, 1), "high": (2, 0), "value": FloatAttr(1.5, f32)}
    assert ops[2].params() == {"dim": 0} and len(ops[2].operands) == 3
    assert ops[3].params() == {"dim": 0}


def test_verifier_rejects_a_wrong_result_type():
    text = """
    func.func @f(%x: tensor<6x5xf32>) {
      %0 = flow.concat dim = 1, %x, %x : tensor<6x5xf32>, tensor<6x5xf32> -> tensor<6x11xf32>
      func.return
    }
    """
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(
        VerifyException, match=r"expected result type tensor<6x10xf32>, got tensor<6x11xf32>"
    ):
        module.verify()
