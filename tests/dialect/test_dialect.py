"""Attributes and shape inference of the flow dialect: construction, parsing and errors.

Every `infer` error names the op, what it expected and what it got.
"""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
    f16,
    f32,
    i1,
    i32,
)
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

import flow.dialect as fd
from flow.dialect import DistAttr, PlacementAttr, Sbp, SbpAttr, dist_of, make_context


def t(el, *shape, encoding=None):
    return (
        TensorType(el, list(shape)) if encoding is None else TensorType(el, list(shape), encoding)
    )


def parse_attr(text: str):
    return Parser(make_context(), text).parse_attribute()


# --------------------------------------------------------------------------- attributes


def test_placement_1d_and_2d():
    p1 = PlacementAttr.get("cpu", [0, 1, 2, 3])
    p2 = PlacementAttr.get("cuda", [[0, 1], [2, 3]])
    assert (p1.mesh_shape, p1.rank_list) == ((4,), (0, 1, 2, 3))
    assert (p2.mesh_shape, p2.rank_list) == ((2, 2), (0, 1, 2, 3))
    assert str(p2) == '#flow.placement<"cuda", [[0, 1], [2, 3]]>'
    assert parse_attr(str(p2)) == p2
    assert parse_attr(str(p1)) == p1


def test_sbp_and_dist_round_trip():
    sbp = SbpAttr.get(["S(1)", Sbp("B"), "P"])
    assert sbp.sbps == (Sbp("S", 1), Sbp("B"), Sbp("P"))
    assert str(sbp) == "#flow.sbp<[S(1), B, P]>"
    dist = DistAttr(PlacementAttr.get("cpu", [[0, 1], [2, 3]]), SbpAttr.get(["S(0)", "B"]))
    ty = t(f32, 8, 4, encoding=dist)
    assert dist_of(ty) == dist and dist_of(t(f32, 8, 4)) is None
    assert parse_attr(str(ty)) == ty


@pytest.mark.parametrize(
    "ranks, match",
    [
        ([[0, 1], [2]], "rectangular"),
        ([[0, 1], 2], "rectangular"),
        ([], "must not be empty"),
        (3, "must be a list"),
    ],
)
def test_placement_shape_errors(ranks, match):
    with pytest.raises(ValueError, match=match):
        PlacementAttr.get("cpu", ranks)


@pytest.mark.parametrize(
    "device, ranks, match",
    [
        ("cpu", [0, 1, 0], r"ranks must be distinct, got \[0, 1, 0\]"),
        ("cpu", [[0, 1], [1, 2]], "ranks must be distinct"),
        ("cpu", [-1, 0], "ranks must be non-negative"),
        ("", [0], "device type must not be empty"),
    ],
)
def test_placement_verify_errors(device, ranks, match):
    with pytest.raises(VerifyException, match=match):
        PlacementAttr.get(device, ranks)


@pytest.mark.parametrize(
    "text, match",
    [
        ('#flow.placement<"cpu", [[0, 1], [2]]>', "rectangular"),
        ('#flow.placement<"cpu", [0, 0]>', "distinct"),
        ("#flow.sbp<[S(0), X]>", r"expected an SBP entry: S\(<dim>\), B or P"),
        ("#flow.sbp<[S(-1)]>", "Expected integer literal"),
    ],
)
def test_attribute_parse_errors(text, match):
    with pytest.raises((ParseError, VerifyException), match=match):
        parse_attr(text)


@pytest.mark.parametrize("entry", ["X", "S", "S(x)", "S(0", "b"])
def test_bad_sbp_entry(entry):
    with pytest.raises(ValueError, match="expected an SBP entry"):
        SbpAttr.get([entry])


def test_sbp_split_needs_a_dim():
    with pytest.raises(ValueError, match="needs a dim"):
        Sbp("S")
    with pytest.raises(ValueError, match="take none"):
        Sbp("B", 0)
    with pytest.raises(ValueError, match="kind must be S, B or P"):
        Sbp("Q")


def test_sbp_count_must_match_placement_axes():
    with pytest.raises(VerifyException, match=r"one SBP entry per placement axis \(2\), got 1"):
        DistAttr(PlacementAttr.get("cpu", [[0, 1], [2, 3]]), SbpAttr.get(["S(0)"]))


def test_split_dim_out_of_range():
    dist = DistAttr(PlacementAttr.get("cpu", [0, 1]), SbpAttr.get(["S(2)"]))
    with pytest.raises(VerifyException, match="split dim 2 is out of range for a tensor of rank 2"):
        fd.ExpOp.infer([t(f32, 8, 4, encoding=dist)])


# --------------------------------------------------------------------------- infer errors

INFER_ERRORS = [
    (fd.ExpOp, [t(i32, 4)], {}, r"'flow.exp' op expected a floating-point tensor, got tensor<4xi32>"),
    (fd.NegOp, [t(i1, 4)], {}, r"'flow.neg' op expected a floating-point or integer tensor, got tensor<4xi1>"),
    (fd.AbsOp, [f32], {}, r"'flow.abs' op expected operand to be a ranked tensor, got f32"),
    (fd.AddOp, [t(f32, 4), t(f32, 3)], {},
     r"'flow.add' op requires both operands to have the same type, got tensor<4xf32> and tensor<3xf32>"),
    (fd.AddOp, [t(i1, 4), t(i1, 4)], {},
     r"'flow.add' op expected floating-point or integer operands, got tensor<4xi1>"),
    (fd.PowOp, [t(i32, 4), t(i32, 4)], {}, r"'flow.pow' op expected floating-point operands, got tensor<4xi32>"),
    (fd.CompareOp, [t(f32, 4), t(f16, 4)], {"direction": "lt"},
     r"'flow.compare' op requires both operands to have the same type, got tensor<4xf32> and tensor<4xf16>"),
    (fd.CompareOp, [t(f32, 4), t(f32, 4)], {"direction": "lessthan"},
     r"'flow.compare' op expected direction in eq/ne/lt/le/gt/ge, got 'lessthan'"),
    (fd.SelectOp, [t(f32, 4), t(f32, 4), t(f32, 4)], {},
     r"'flow.select' op expected predicate of type tensor<4xi1>, got tensor<4xf32>"),
    (fd.SelectOp, [t(i1, 4), t(f32, 4), t(i32, 4)], {},
     r"'flow.select' op requires both branches to have the same type, got tensor<4xf32> and tensor<4xi32>"),
    (fd.CastOp, [t(f32, 4)], {}, r"'flow.cast' op needs a target element type"),
    (fd.CastOp, [t(f32, 4)], {"element_type": StringAttr("x")},
     r"'flow.cast' op expected a float or integer target type"),
    (fd.MatmulOp, [t(f32, 4), t(f32, 4)], {},
     r"'flow.matmul' op expected operands of equal rank >= 2, got tensor<4xf32> and tensor<4xf32>"),
    (fd.MatmulOp, [t(f32, 2, 3), t(f16, 3, 4)], {},
     r"'flow.matmul' op expected equal element types, got tensor<2x3xf32> and tensor<3x4xf16>"),
    (fd.MatmulOp, [t(f32, 2, 2, 3), t(f32, 3, 3, 4)], {},
     r"'flow.matmul' op expected equal batch dims, got \[2\] and \[3\]"),
    (fd.MatmulOp, [t(f32, 2, 3), t(f32, 5, 4)], {},
     r"'flow.matmul' op expected contracting dims to match, got lhs tensor<2x3xf32> \(K=3\) and rhs tensor<5x4xf32> \(K=5\)"),
    (fd.ReduceOp, [t(f32, 2, 3)], {"kind": "sum", "dims": [2]},
     r"'flow.reduce' op expected reduction dims in \[0, 2\), got \[2\]"),
    (fd.ReduceOp, [t(f32, 2, 3)], {"kind": "sum", "dims": [1, 1]},
     r"'flow.reduce' op expected distinct reduction dims, got \[1, 1\]"),
    (fd.ReduceOp, [t(f32, 2, 3)], {"kind": "mean", "dims": [1]},
     r"'flow.reduce' op expected kind in sum/max/min/prod, got 'mean'"),
    (fd.ReduceOp, [t(i1, 2, 3)], {"kind": "sum", "dims": [1]},
     r"'flow.reduce' op expected a float or integer operand, got tensor<2x3xi1>"),
    (fd.ReshapeOp, [t(f32, 2, 3)], {"shape": [7]},
     r"'flow.reshape' op cannot reshape tensor<2x3xf32> \(6 elements\) to shape \[7\]"),
    (fd.TransposeOp, [t(f32, 2, 3)], {"permutation": [0, 0]},
     r"'flow.transpose' op expected distinct permutation entries, got \[0, 0\]"),
    (fd.TransposeOp, [t(f32, 2, 3, 4)], {"permutation": [1, 0]},
     r"'flow.transpose' op expected a permutation of 3 dims, got \[1, 0\]"),
    (fd.BroadcastInDimOp, [t(f32, 3)], {"dims": [0, 1], "shape": [2, 3]},
     r"'flow.broadcast_in_dim' op expected 1 broadcast dims for tensor<3xf32>, got \[0, 1\]"),
    (fd.BroadcastInDimOp, [t(f32, 2, 3)], {"dims": [2, 0], "shape": [2, 4, 3]},
     r"'flow.broadcast_in_dim' op expected increasing broadcast dims, got \[2, 0\]"),
    (fd.BroadcastInDimOp, [t(f32, 3)], {"dims": [0], "shape": [4, 2]},
     r"'flow.broadcast_in_dim' op cannot broadcast operand dim 0 of size 3 to result dim 0 of size 4"),
    (fd.FullOp, [], {"value": IntegerAttr(1, IndexType()), "shape": [2]},
     r"'flow.full' op expected a float or integer fill value, got 1 : index"),
]  # fmt: skip
INFER_ERRORS += [
    (op, [t(i32, 2)], {}, rf"'{op.name}' op expected a floating-point tensor, got tensor<2xi32>")
    for op in (
        fd.ExpOp,
        fd.LogOp,
        fd.SqrtOp,
        fd.RsqrtOp,
        fd.TanhOp,
        fd.SinOp,
        fd.CosOp,
        fd.TanOp,
        fd.AsinOp,
        fd.AcosOp,
        fd.AtanOp,
        fd.SinhOp,
        fd.CoshOp,
        fd.FloorOp,
        fd.CeilOp,
        fd.RoundOp,
        fd.TruncOp,
        fd.ErfOp,
        fd.Log1pOp,
        fd.Expm1Op,
        fd.Log2Op,
        fd.Log10Op,
    )
]
INFER_ERRORS += [
    (
        op,
        [t(f32, 2), t(f32, 2)],
        {},
        rf"'{op.name}' op expected integer or i1 operands, got tensor<2xf32>",
    )
    for op in (fd.AndOp, fd.OrOp, fd.XorOp)
]
INFER_ERRORS += [
    (fd.Atan2Op, [t(i32, 2), t(i32, 2)], {}, r"'flow.atan2' op expected floating-point operands"),
    (
        fd.IotaOp,
        [],
        {"dim": 2, "shape": [2, 3], "element_type": i32},
        r"'flow.iota' op expected dim in \[0, 2\), got 2",
    ),
    (
        fd.IotaOp,
        [],
        {"dim": 0, "shape": [2], "element_type": i1},
        r"'flow.iota' op expected a float or integer element type, got i1",
    ),
    (fd.OptimizationBarrierOp, [f32, t(f32, 2)], {},
     r"'flow.optimization_barrier' op expected value to be a ranked tensor, got f32"),
]
INFER_ERRORS += [
    (op, [t(f32, 2), t(f32, 3)], {},
     rf"'{op.name}' op requires both operands to have the same type, got tensor<2xf32> and tensor<3xf32>")
    for op in (fd.AddOp, fd.SubOp, fd.MulOp, fd.DivOp, fd.MaximumOp, fd.MinimumOp, fd.PowOp,
               fd.RemOp, fd.Atan2Op)
]  # fmt: skip


@pytest.mark.parametrize(
    "op, types, params, match",
    INFER_ERRORS,
    ids=[f"{c[0].name}-{i}" for i, c in enumerate(INFER_ERRORS)],
)
def test_infer_error_names_op_expected_and_actual(op, types, params, match):
    with pytest.raises(VerifyException, match=match):
        op.infer(types, **params)


def test_every_op_has_an_infer_error_case():
    # The core family; movement / window / random ops have their own test files.
    assert {c[0] for c in INFER_ERRORS} >= set(fd.ops.ALL_OPS) - {fd.ConstantOp}


def test_make_builds_ops_that_verify_and_report_their_params():
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    block = Block(arg_types=[t(f32, 2, 3), t(f32, 3, 4)])
    x, w = block.args
    ops = [
        fd.MatmulOp.make(x, w),
        fd.ReduceOp.make(x, kind="max", dims=[1, 0]),
        fd.TransposeOp.make(x, permutation=[1, 0]),
        fd.BroadcastInDimOp.make(w, dims=[1, 2], shape=[5, 3, 4]),
        fd.ReshapeOp.make(x, shape=[6]),
        fd.CompareOp.make(x, x, direction="ge"),
        fd.CastOp.make(x, element_type=i32),
        fd.FullOp.make(value=FloatAttr(1.0, f32), shape=[2]),
        fd.FullOp.make(value=IntegerAttr(1, i1), shape=[]),
        fd.ConstantOp.make(value=DenseIntOrFPElementsAttr.from_list(t(f32, 2), [1.0, 2.0])),
    ]
    block.add_ops(ops)
    block.add_op(ReturnOp())
    ModuleOp([FuncOp("f", ([x.type, w.type], []), Region(block))]).verify()
    assert [str(op.results[0].type) for op in ops[:5]] == [
        "tensor<2x4xf32>", "tensor<f32>", "tensor<3x2xf32>", "tensor<5x3x4xf32>", "tensor<6xf32>",
    ]  # fmt: skip
    assert ops[1].params() == {"kind": "max", "dims": (0, 1)}
    assert ops[3].params() == {"dims": (1, 2), "shape": (5, 3, 4)}
    assert ops[5].results[0].type == t(i1, 2, 3)
