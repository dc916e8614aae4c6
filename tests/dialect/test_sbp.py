"""SBP signatures per op family, the boxing cost model, and the balanced-split helpers."""

from __future__ import annotations

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType, f32
from xdsl.parser import Parser

from flow.dialect import distributed as dd
from flow.dialect import make_context
from flow.dialect import sbp as sb
from flow.dialect.attrs import DistAttr, PlacementAttr, Sbp, SbpAttr

B, P = Sbp("B"), Sbp("P")


def S(d: int) -> Sbp:
    return Sbp("S", d)


def ops_of(body: str, args: str) -> list:
    """The ops of `func.func @f(args) { body }`, parsed and verified."""
    text = f"func.func @f({args}) {{\n{body}\n  func.return\n}}"
    module = Parser(make_context(), text).parse_module()
    module.verify()
    (f,) = module.ops
    assert isinstance(f, func.FuncOp)
    return [op for op in f.body.block.ops if not isinstance(op, func.ReturnOp)]


def one(body: str, args: str):
    (op,) = ops_of(body, args)
    return op


def names(op, ndim: int = 1) -> list[str]:
    return [s.name for s in sb.signatures(op, ndim)]


# --------------------------------------------------------------------------- signatures

MATMUL = one(
    "%0 = flow.matmul %a, %b : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>",
    "%a: tensor<8x4xf32>, %b: tensor<4x6xf32>",
)


def test_matmul_signatures_are_oneflows():
    assert names(MATMUL) == [
        "[S(0)], [B] -> [S(0)]",
        "[B], [S(1)] -> [S(1)]",
        "[S(1)], [S(0)] -> [P]",
        "[B], [B] -> [B]",
        "[P], [B] -> [P]",
        "[B], [P] -> [P]",
    ]


def test_batched_matmul_splits_batch_dims_first():
    op = one(
        "%0 = flow.matmul %a, %b : tensor<2x3x8x4xf32>, tensor<2x3x4x6xf32> -> tensor<2x3x8x6xf32>",
        "%a: tensor<2x3x8x4xf32>, %b: tensor<2x3x4x6xf32>",
    )
    assert names(op)[:5] == [
        "[S(0)], [S(0)] -> [S(0)]",
        "[S(1)], [S(1)] -> [S(1)]",
        "[S(2)], [B] -> [S(2)]",
        "[B], [S(3)] -> [S(3)]",
        "[S(3)], [S(2)] -> [P]",
    ]


@pytest.mark.parametrize("name, partial", [
    ("add", ["[P], [P] -> [P]"]),
    ("sub", ["[P], [P] -> [P]"]),
    ("mul", ["[P], [B] -> [P]", "[B], [P] -> [P]"]),
    ("div", ["[P], [B] -> [P]"]),
    ("maximum", []),
    ("pow", []),
])  # fmt: skip
def test_binary_elementwise(name, partial):
    op = one(f"%0 = flow.{name} %a, %a : tensor<4x6xf32>", "%a: tensor<4x6xf32>")
    splits = ["[S(0)], [S(0)] -> [S(0)]", "[S(1)], [S(1)] -> [S(1)]", "[B], [B] -> [B]"]
    assert names(op) == splits + partial


def test_integer_division_is_not_linear():
    op = one("%0 = flow.div %a, %a : tensor<4xi32>", "%a: tensor<4xi32>")
    assert names(op) == ["[S(0)], [S(0)] -> [S(0)]", "[B], [B] -> [B]"]


def test_unary_elementwise_partial_only_for_negation():
    neg = one("%0 = flow.neg %a : tensor<4xf32>", "%a: tensor<4xf32>")
    exp = one("%0 = flow.exp %a : tensor<4xf32>", "%a: tensor<4xf32>")
    assert names(neg) == ["[S(0)] -> [S(0)]", "[B] -> [B]", "[P] -> [P]"]
    assert names(exp) == ["[S(0)] -> [S(0)]", "[B] -> [B]"]


def test_select_is_linear_in_its_branches():
    op = one(
        "%0 = flow.select %p, %a, %a : tensor<4xi1>, tensor<4xf32>",
        "%p: tensor<4xi1>, %a: tensor<4xf32>",
    )
    assert names(op)[-1] == "[B], [P], [P] -> [P]"


@pytest.mark.parametrize("kind, dims, expected", [
    ("sum", [1], ["[S(0)] -> [S(0)]", "[S(1)] -> [P]", "[S(2)] -> [S(1)]", "[B] -> [B]",
                  "[P] -> [P]"]),
    ("max", [1], ["[S(0)] -> [S(0)]", "[S(2)] -> [S(1)]", "[B] -> [B]"]),
    ("sum", [0, 2], ["[S(0)] -> [P]", "[S(1)] -> [S(0)]", "[S(2)] -> [P]", "[B] -> [B]",
                     "[P] -> [P]"]),
])  # fmt: skip
def test_reduce(kind, dims, expected):
    out = [n for d, n in enumerate((2, 3, 4)) if d not in dims]
    res = "x".join(map(str, out))
    op = one(
        f"%0 = flow.reduce {kind} %a, dims = {dims} : tensor<2x3x4xf32> -> tensor<{res}xf32>",
        "%a: tensor<2x3x4xf32>",
    )
    assert names(op) == expected


def test_transpose_maps_split_dims():
    op = one(
        "%0 = flow.transpose %a, permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>",
        "%a: tensor<2x3x4xf32>",
    )
    assert names(op) == ["[S(2)] -> [S(0)]", "[S(0)] -> [S(1)]", "[S(1)] -> [S(2)]",
                         "[B] -> [B]", "[P] -> [P]"]  # fmt: skip


def test_reshape_keeps_only_whole_dims_with_equal_prefix():
    # 2x3x4 -> 6x4: dim 2 survives as dim 1; dims 0 and 1 merge, so they go B.
    op = one("%0 = flow.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>", "%a: tensor<2x3x4xf32>")
    assert names(op) == ["[S(2)] -> [S(1)]", "[B] -> [B]", "[P] -> [P]"]
    op = one(
        "%0 = flow.reshape %a : tensor<8x3x4xf32> -> tensor<8x12xf32>", "%a: tensor<8x3x4xf32>"
    )
    assert names(op) == ["[S(0)] -> [S(0)]", "[B] -> [B]", "[P] -> [P]"]


def test_reshape_merging_or_splitting_a_split_dim_needs_an_even_split():
    """(b, t) -> (b*t) keeps S(0) when every rank holds whole rows: b a multiple of the
    ranks (of all mesh axes together); (b*t) -> (b, t) likewise with the new leading dim."""
    merge = one("%0 = flow.reshape %a : tensor<4x3xf32> -> tensor<12xf32>", "%a: tensor<4x3xf32>")
    assert names(merge) == ["[B] -> [B]", "[P] -> [P]"]  # mesh unknown: never offered
    even = [s.name for s in sb.signatures(merge, 1, (2,))]
    assert even == ["[S(0)] -> [S(0)]", "[B] -> [B]", "[P] -> [P]"]
    assert [s.name for s in sb.signatures(merge, 1, (3,))] == ["[B] -> [B]", "[P] -> [P]"]
    assert "[S(0), S(0)] -> [S(0), S(0)]" in [s.name for s in sb.signatures(merge, 2, (2, 2))]
    assert "[S(0), B] -> [S(0), B]" not in [s.name for s in sb.signatures(merge, 2, (2, 3))]
    split = one("%0 = flow.reshape %a : tensor<12xf32> -> tensor<4x3xf32>", "%a: tensor<12xf32>")
    assert "[S(0)] -> [S(0)]" in [s.name for s in sb.signatures(split, 1, (4,))]
    assert "[S(0)] -> [S(0)]" not in [s.name for s in sb.signatures(split, 1, (3,))]
    # 2x3x4 -> 6x4: dim 0 leads the merged dims; dim 1 does not (it would need dim 0 whole)
    three = one("%0 = flow.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>",
                "%a: tensor<2x3x4xf32>")  # fmt: skip
    assert [s.name for s in sb.signatures(three, 1, (2,))] == [
        "[S(2)] -> [S(1)]", "[S(0)] -> [S(0)]", "[B] -> [B]", "[P] -> [P]"]  # fmt: skip


def test_broadcast_splits_only_kept_dims():
    op = one(
        "%0 = flow.broadcast_in_dim %a, dims = [1, 2] : tensor<3x1xf32> -> tensor<5x3x4xf32>",
        "%a: tensor<3x1xf32>",
    )
    assert names(op) == ["[S(0)] -> [S(1)]", "[B] -> [B]", "[P] -> [P]"]


def test_concat_and_slice_and_pad():
    concat = one(
        "%0 = flow.concat dim = 1, %a, %a : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x4xf32>",
        "%a: tensor<4x2xf32>",
    )
    assert names(concat) == ["[S(0)], [S(0)] -> [S(0)]", "[B], [B] -> [B]", "[P], [P] -> [P]"]
    sl = one(
        "%0 = flow.slice %a, start = [0, 1], strides = [1, 1] : tensor<4x3xf32> -> tensor<4x2xf32>",
        "%a: tensor<4x3xf32>",
    )
    assert names(sl) == ["[S(0)] -> [S(0)]", "[B] -> [B]", "[P] -> [P]"]
    pad = one(
        "%0 = flow.pad %a, low = [0, 1], high = [0, 0], value = (1.0 : f32) "
        ": tensor<4x3xf32> -> tensor<4x4xf32>",
        "%a: tensor<4x3xf32>",
    )
    assert names(pad) == ["[S(0)] -> [S(0)]", "[B] -> [B]"]  # padding with 1 is not linear


def test_ops_without_rules_are_replicated():
    full = one("%0 = flow.full 1.0 : f32 -> tensor<4xf32>", "")
    iota = one("%0 = flow.iota dim = 0 -> tensor<4xi64>", "")
    assert names(full) == names(iota) == ["-> [B]"]


def test_2d_signatures_are_products():
    sigs = sb.signatures(MATMUL, 2)
    assert len(sigs) == 36
    assert sigs[0].name == "[S(0), S(0)], [B, B] -> [S(0), S(0)]"
    assert sb.Signature(((S(0), B), (B, S(1))), ((S(0), S(1)),)) in sigs


# --------------------------------------------------------------------------- cost model


@pytest.mark.parametrize("src, dst, expected", [
    (P, B, 2 * 1200 * 3 / 4),     # all_reduce
    (P, S(0), 1200 * 3 / 4),      # reduce_scatter
    (S(0), B, 1200 * 3 / 4),      # all_gather
    (S(0), S(1), 1200 * 3 / 16),  # all_to_all
    (S(1), P, 1200 * 3 / 4),      # all_gather, then keep on one rank
    (B, S(1), 0.0),               # local slice
    (B, P, 0.0),                  # zeros on all but one rank
    (S(0), S(0), 0.0),
    (P, P, 0.0),
])  # fmt: skip
def test_axis_cost_table(src, dst, expected):
    assert sb.axis_cost(src, dst, 1200, 4) == pytest.approx(expected)


def test_boxing_cost_counts_bytes_and_sums_mesh_axes():
    ty = TensorType(f32, [10, 30])  # 1200 bytes
    assert sb.boxing_cost(ty, (P,), (B,), (2,)) == pytest.approx(1200)
    # Axis 1 gathers within pieces already split by axis 0: half the tensor.
    assert sb.boxing_cost(ty, (S(0), S(1)), (S(0), B), (2, 2)) == pytest.approx(600 / 2)
    assert sb.boxing_cost(ty, (P, P), (B, B), (2, 2)) == pytest.approx(1200 + 1200)


def test_choose_prefers_no_boxing_then_cheapest():
    s0, s1, b, p = (S(0),), (S(1),), (B,), (P,)
    assert sb.choose(MATMUL, [s0, b], (2,)).name == "[S(0)], [B] -> [S(0)]"
    assert sb.choose(MATMUL, [s1, s0], (2,)).name == "[S(1)], [S(0)] -> [P]"
    # lhs 8x4 S(0), rhs 4x6 S(0): re-splitting the lhs (128 B / 4) beats gathering
    # the rhs (96 B / 2).
    assert sb.choose(MATMUL, [s0, s0], (2,)).name == "[S(1)], [S(0)] -> [P]"
    # P x P: all-reduce the smaller rhs.
    assert sb.choose(MATMUL, [p, p], (2,)).name == "[P], [B] -> [P]"


def test_choose_breaks_ties_by_fewer_boxings_then_order():
    add = one("%0 = flow.add %a, %a : tensor<4x6xf32>", "%a: tensor<4x6xf32>")
    # B, B: splitting is free too, but needs two boxings.
    assert sb.choose(add, [(B,), (B,)], (2,)).name == "[B], [B] -> [B]"
    # P + B: B -> P is free.
    assert sb.choose(add, [(P,), (B,)], (2,)).name == "[P], [P] -> [P]"
    exp = one("%0 = flow.exp %a : tensor<4x6xf32>", "%a: tensor<4x6xf32>")
    # P: reduce-scatter beats all-reduce; S(0) and S(1) tie, the first wins.
    assert sb.choose(exp, [(P,)], (2,)).name == "[S(0)] -> [S(0)]"


def test_choose_on_a_2d_mesh():
    sig = sb.choose(MATMUL, [(S(0), B), (B, S(1))], (2, 2))
    assert sig.name == "[S(0), B], [B, S(1)] -> [S(0), S(1)]"


def test_current_signature():
    pl = '#flow.placement<"cpu", [0, 1]>'

    def t(shape, sbp):
        return f"tensor<{shape}xf32, #flow.dist<{pl}, #flow.sbp<[{sbp}]>>>"

    ok, bad = ops_of(
        f"%0 = flow.matmul %a, %b : {t('8x4', 'S(0)')}, {t('4x6', 'B')} -> {t('8x6', 'S(0)')}\n"
        f"%1 = flow.matmul %a, %a2 : {t('8x4', 'S(0)')}, {t('4x6', 'S(0)')} -> {t('8x6', 'S(0)')}",
        f"%a: {t('8x4', 'S(0)')}, %b: {t('4x6', 'B')}, %a2: {t('4x6', 'S(0)')}",
    )
    assert sb.current_signature(ok).name == "[S(0)], [B] -> [S(0)]"
    assert sb.current_signature(bad) is None


# --------------------------------------------------------------------------- balanced splits


def test_balanced_split_gives_first_ranks_one_more():
    assert dd.balanced_split(10, 4) == (3, 3, 2, 2)
    assert [dd.balanced_offset(10, 4, i) for i in range(4)] == [0, 3, 6, 8]
    assert dd.balanced_split(2, 3) == (1, 1, 0)


def test_local_shape_splits_outer_axis_first():
    mesh = (2, 3)
    # dim 0 = 7: axis 0 -> 4 | 3, then axis 1 splits each piece: 4 -> 2, 1, 1 and 3 -> 1, 1, 1.
    shapes = [
        dd.local_shape((7, 5), mesh, (S(0), S(0)), (i, j)) for i in range(2) for j in range(3)
    ]
    assert shapes == [(2, 5), (1, 5), (1, 5), (1, 5), (1, 5), (1, 5)]


def test_mesh_coordinates_and_groups():
    pl = PlacementAttr.get("cpu", [[4, 5, 6], [7, 8, 9]])
    assert dd.mesh_coord(pl, 8) == (1, 1)
    assert dd.rank_groups(pl, 0) == [(4, 7), (5, 8), (6, 9)]
    assert dd.rank_groups(pl, 1) == [(4, 5, 6), (7, 8, 9)]
    with pytest.raises(ValueError, match=r"rank 3 is not in placement"):
        dd.mesh_coord(pl, 3)


def test_local_type_without_rank_needs_even_splits():
    pl = PlacementAttr.get("cpu", [0, 1])
    uneven = TensorType(f32, [5, 4], DistAttr(pl, SbpAttr.get(["S(0)"])))
    even = TensorType(f32, [6, 4], DistAttr(pl, SbpAttr.get(["S(0)"])))
    assert dd.local_type(even) == TensorType(f32, [3, 4])
    assert dd.local_type(uneven, 0) == TensorType(f32, [3, 4])
    assert dd.local_type(uneven, 1) == TensorType(f32, [2, 4])
    with pytest.raises(dd.UnevenSplitError, match=r"\(\[2, 4\], \[3, 4\]\)"):
        dd.local_type(uneven)
