"""Shape inference, builders, properties and text form of `flow.conv` and `flow.reduce_window`.

Every `infer` error names the op, what it expected and what it got; the
result shapes are checked against PyTorch's output-size formula worked out by
hand.
"""

from __future__ import annotations

import io

import pytest
from xdsl.dialects.builtin import ModuleOp, TensorType, f16, f32, f64, i1, i8, i32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

import flow.dialect as fd
from flow.dialect import make_context


def t(el, *shape):
    return TensorType(el, list(shape))


def conv_params(n=2, strides=None, dilations=None, padding=None, groups=1):
    return {
        "strides": strides or [1] * n,
        "dilations": dilations or [1] * n,
        "padding": padding or [(0, 0)] * n,
        "groups": groups,
    }


def window_params(rank=4, kind="max", window=None, strides=None, dilations=None, padding=None):
    return {
        "kind": kind,
        "window": window or [1] * rank,
        "strides": strides or [1] * rank,
        "dilations": dilations or [1] * rank,
        "padding": padding or [(0, 0)] * rank,
    }


# --------------------------------------------------------------------------- result types

CONV_SHAPES = [
    # input, weight, params, result shape
    ((1, 3, 8, 8), (4, 3, 3, 3), conv_params(), (1, 4, 6, 6)),
    # (9 + 1 + 2 - 2 * (3 - 1) - 1) // 2 + 1 = 4 and (8 - 1 * (2 - 1) - 1) // 3 + 1 = 3
    ((2, 4, 9, 8), (6, 2, 3, 2),
     conv_params(strides=[2, 3], dilations=[2, 1], padding=[(1, 2), (0, 0)], groups=2),
     (2, 6, 4, 3)),
    ((5, 2, 7), (3, 2, 7), conv_params(n=1), (5, 3, 1)),
    ((0, 2, 4, 4, 4), (2, 1, 1, 2, 3), conv_params(n=3, groups=2), (0, 2, 4, 3, 2)),
    ((1, 3, 5, 5), (3, 1, 3, 3), conv_params(padding=[(1, 1), (1, 1)], groups=3), (1, 3, 5, 5)),
]  # fmt: skip


@pytest.mark.parametrize("xs,ws,params,expected", CONV_SHAPES)
def test_conv_result_shape(xs, ws, params, expected):
    ty = fd.ConvOp.infer([t(f32, *xs), t(f32, *ws)], **params)
    assert ty == t(f32, *expected)


def test_conv_keeps_integer_element_types():
    assert fd.ConvOp.infer([t(i8, 1, 1, 3), t(i8, 1, 1, 2)], **conv_params(n=1)) == t(i8, 1, 1, 2)


WINDOW_SHAPES = [
    ((1, 3, 8, 8), window_params(window=[1, 1, 2, 2], strides=[1, 1, 2, 2]), (1, 3, 4, 4)),
    # (7 + 1 + 2 - 2 * (3 - 1) - 1) // 2 + 1 = 3
    ((2, 7), window_params(rank=2, kind="sum", window=[1, 3], strides=[1, 2], dilations=[1, 2],
                           padding=[(0, 0), (1, 2)]), (2, 3)),
    ((0, 5), window_params(rank=2, window=[1, 5]), (0, 1)),
    ((6,), window_params(rank=1, kind="min", strides=[4]), (2,)),
]  # fmt: skip


@pytest.mark.parametrize("shape,params,expected", WINDOW_SHAPES)
def test_reduce_window_result_shape(shape, params, expected):
    assert fd.ReduceWindowOp.infer([t(f32, *shape)], **params) == t(f32, *expected)


# --------------------------------------------------------------------------- errors

INFER_ERRORS = [
    (fd.ConvOp, [t(f32, 3, 8), t(f32, 4, 3, 3)], conv_params(n=1),
     r"'flow.conv' op expected an input of rank 3, 4 or 5 \(\[N, C, spatial...\]\), "
     r"got tensor<3x8xf32>"),
    (fd.ConvOp, [t(f32, 1, 3, 8, 8), t(f32, 4, 3, 3)], conv_params(),
     r"'flow.conv' op expected a weight of rank 4 like the input, got tensor<4x3x3xf32>"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f64, 4, 3, 3)], conv_params(n=1),
     r"'flow.conv' op expected input and weight of one element type, got tensor<1x3x8xf32> and "
     r"tensor<4x3x3xf64>"),
    (fd.ConvOp, [t(i1, 1, 3, 8), t(i1, 4, 3, 3)], conv_params(n=1),
     r"'flow.conv' op expected a float or integer input, got tensor<1x3x8xi1>"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f32, 4, 3, 3)], conv_params(n=2),
     r"'flow.conv' op expected 1 strides, got \[1, 1\]"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f32, 4, 3, 3)], conv_params(n=1, dilations=[0]),
     r"'flow.conv' op expected dilations >= 1, got \[0\]"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f32, 4, 3, 3)], conv_params(n=1, padding=[(1, -1)]),
     r"'flow.conv' op expected non-negative padding, got \[\[1, -1\]\]"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f32, 4, 3, 3)], conv_params(n=1, padding=[(1,)]),
     r"'flow.conv' op expected 1 \(low, high\) padding pairs, got \[\[1\]\]"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f32, 4, 1, 3)], conv_params(n=1, groups=0),
     r"'flow.conv' op expected groups >= 1, got 0"),
    (fd.ConvOp, [t(f32, 1, 3, 8), t(f32, 4, 1, 3)], conv_params(n=1, groups=2),
     r"'flow.conv' op expected input channels \(3\) divisible by groups \(2\)"),
    (fd.ConvOp, [t(f32, 1, 4, 8), t(f32, 4, 1, 3)], conv_params(n=1, groups=2),
     r"'flow.conv' op expected weight dim 1 to be input channels / groups = 2, got 1 "
     r"\(input tensor<1x4x8xf32>, weight tensor<4x1x3xf32>, groups = 2\)"),
    (fd.ConvOp, [t(f32, 1, 4, 8), t(f32, 3, 2, 3)], conv_params(n=1, groups=2),
     r"'flow.conv' op expected output channels \(3\) divisible by groups \(2\)"),
    (fd.ConvOp, [t(f32, 1, 4, 8, 4), t(f32, 3, 4, 3, 3)],
     conv_params(dilations=[1, 2], padding=[(0, 0), (0, 0)]),
     r"'flow.conv' op expected the dilated kernel \(size 5\) to fit in the padded input \(size 4\) "
     r"in spatial dim 1, got input tensor<1x4x8x4xf32> and weight tensor<3x4x3x3xf32>"),
    (fd.ReduceWindowOp, [t(f32, 2, 3)], window_params(rank=2, kind="mean"),
     r"'flow.reduce_window' op expected kind in sum/max/min/prod, got 'mean'"),
    (fd.ReduceWindowOp, [t(i1, 2, 3)], window_params(rank=2),
     r"'flow.reduce_window' op expected a float or integer operand, got tensor<2x3xi1>"),
    (fd.ReduceWindowOp, [t(f32, 2, 3)], window_params(rank=2, window=[2]),
     r"'flow.reduce_window' op expected 2 window sizes, got \[2\]"),
    (fd.ReduceWindowOp, [t(f32, 2, 3)], window_params(rank=2, window=[1, 0]),
     r"'flow.reduce_window' op expected window sizes >= 1, got \[1, 0\]"),
    (fd.ReduceWindowOp, [t(f32, 2, 3)], window_params(rank=2, strides=[1, 0]),
     r"'flow.reduce_window' op expected strides >= 1, got \[1, 0\]"),
    (fd.ReduceWindowOp, [t(f32, 2, 3)], window_params(rank=2, padding=[(0, 0), (-1, 0)]),
     r"'flow.reduce_window' op expected non-negative padding, got \[\[0, 0\], \[-1, 0\]\]"),
    (fd.ReduceWindowOp, [t(f32, 2, 3)],
     window_params(rank=2, window=[1, 3], dilations=[1, 2], padding=[(0, 0), (1, 0)]),
     r"'flow.reduce_window' op expected the dilated window \(size 5\) to fit in the padded operand "
     r"\(size 4\) in dim 1, got tensor<2x3xf32>"),
    (fd.ReduceWindowOp, [t(f32, 0, 3)], window_params(rank=2, window=[2, 1]),
     r"'flow.reduce_window' op expected the dilated window \(size 2\) to fit in the padded operand "
     r"\(size 0\) in dim 0"),
]  # fmt: skip


@pytest.mark.parametrize("op,types,params,match", INFER_ERRORS,
                         ids=[f"{c[0].name}-{i}" for i, c in enumerate(INFER_ERRORS)])  # fmt: skip
def test_infer_errors_name_op_expected_and_actual(op, types, params, match):
    with pytest.raises(VerifyException, match=match):
        op.infer(types, **params)


# --------------------------------------------------------------------------- builders and text


def test_make_verifies_and_reports_params():
    block = Block(arg_types=[t(f16, 2, 4, 9, 8), t(f16, 6, 2, 3, 2)])
    x, w = block.args
    cp = conv_params(strides=[2, 3], dilations=[2, 1], padding=[(1, 2), (0, 0)], groups=2)
    wp = window_params(kind="sum", window=[1, 1, 3, 2], strides=[1, 1, 2, 2],
                       padding=[(0, 0), (0, 0), (1, 1), (0, 1)])  # fmt: skip
    ops = [fd.ConvOp.make(x, w, **cp), fd.ReduceWindowOp.make(x, **wp)]
    block.add_ops([*ops, ReturnOp()])
    ModuleOp([FuncOp("f", ([x.type, w.type], []), Region(block))]).verify()
    assert ops[0].results[0].type == t(f16, 2, 6, 4, 3)
    assert ops[1].results[0].type == t(f16, 2, 4, 5, 4)
    assert ops[0].params() == {"strides": (2, 3), "dilations": (2, 1),
                               "padding": ((1, 2), (0, 0)), "groups": 2}  # fmt: skip
    assert ops[1].params() == {"kind": "sum", "window": (1, 1, 3, 2), "strides": (1, 1, 2, 2),
                               "dilations": (1, 1, 1, 1),
                               "padding": ((0, 0), (0, 0), (1, 1), (0, 1))}  # fmt: skip


TEXT = """\
func.func @f(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  %0 = flow.conv %x, %w, strides = [2, 2], dilations = [1, 2], padding = [1, 1, 0, 0], \
groups = 2 : tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32> -> tensor<1x6x4x2xf32>
  %1 = flow.reduce_window max %x, window = [1, 1, 2, 2], strides = [1, 1, 2, 2], \
dilations = [1, 1, 1, 1], padding = [0, 0, 0, 0, 1, 1, 0, 0] : tensor<1x4x8x8xf32> -> \
tensor<1x4x5x4xf32>
  func.return
}"""


def _print(op) -> str:
    out = io.StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


def test_text_round_trip_and_verify():
    module = Parser(make_context(), TEXT).parse_module()
    module.verify()
    conv, pool = list(module.walk())[2:4]
    assert isinstance(conv, fd.ConvOp) and isinstance(pool, fd.ReduceWindowOp)
    assert conv.params()["padding"] == ((1, 1), (0, 0))
    assert pool.params()["kind"] == "max"
    text = _print(module)
    assert "padding = [1, 1, 0, 0], groups = 2 :" in text
    assert _print(Parser(make_context(), text).parse_module()) == text


def test_verifier_rejects_a_wrong_result_type():
    bad = TEXT.replace("-> tensor<1x6x4x2xf32>", "-> tensor<1x6x4x3xf32>")
    module = Parser(make_context(), bad).parse_module()
    with pytest.raises(VerifyException, match=r"expected result type tensor<1x6x4x2xf32>, got "
                                              r"tensor<1x6x4x3xf32>"):  # fmt: skip
        module.verify()


@pytest.mark.parametrize("el", [f32, i32])
def test_odd_padding_property_is_an_error_not_a_crash(el):
    text = (f"func.func @f(%x: tensor<4x{el}>) {{\n  %0 = flow.reduce_window sum %x, window = [2], "
            f"strides = [1], dilations = [1], padding = [1] : tensor<4x{el}> -> tensor<3x{el}>\n"
            "  func.return\n}")  # fmt: skip
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(
        VerifyException, match=r"expected 1 \(low, high\) padding pairs, got \[\[1\]\]"
    ):
        module.verify()
