"""memory_analysis.py on hand-written programs: the figures, counted by hand."""

from __future__ import annotations

from xdsl.parser import Parser

from flow.dialect import make_context
from flow.lowering.memory_analysis import MemoryAnalysis, memory_analysis, peak_live_bytes

_PROGRAM = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xi64>, %m: tensor<16xi1>, %d: tensor<?x4xf32>)
    -> (tensor<4x8xf32>, tensor<f32>) {
  %0 = flow.tanh %a : tensor<4x8xf32>
  %1 = flow.exp %0 : tensor<4x8xf32>
  %2 = flow.add %1, %1 : tensor<4x8xf32>
  %3 = flow.reduce sum %a, dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  func.return %2, %3 : tensor<4x8xf32>, tensor<f32>
}
"""


def _function():
    module = Parser(make_context(), _PROGRAM).parse_module()
    return module.body.block.first_op


def test_the_figures_of_a_small_program():
    # arguments: 128 + 64 + 16 (i1 takes a byte) + 0 (a dynamic dim counts 0) = 208, alive
    # throughout. Computed values: %0 (128) dies at %1, %1 (128) at %2; %2 (128) and %3 (4)
    # are results. Alive after each op: 128, 256, 256 (%1 and %2), 132: the peak is 256, of
    # which temporaries (%0, %1) are 256 at most.
    got = memory_analysis(_function())
    assert got == MemoryAnalysis(argument_size_in_bytes=208, output_size_in_bytes=132,
                                 alias_size_in_bytes=0, temp_size_in_bytes=256,
                                 peak_live_bytes=208 + 256)  # fmt: skip
    assert peak_live_bytes(_function()) == 464


def test_str_and_repr_name_every_figure():
    got = memory_analysis(_function())
    assert repr(got).startswith("MemoryAnalysis(argument_size_in_bytes=208, ")
    text = str(got)
    for label in ("arguments", "outputs", "aliased", "temporaries", "peak live"):
        assert label in text
    assert "464 bytes" in text


_CONVS = """
func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %v: tensor<6x1x3x3xf32>)
    -> tensor<2x4x6x6xf32> {
  %0 = flow.conv %x, %w, strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, 0], groups = 1 : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %1 = flow.conv %x, %v, strides = [1, 1], dilations = [1, 1], padding = [0, 0, 0, 0], groups = 3 : tensor<2x3x8x8xf32>, tensor<6x1x3x3xf32> -> tensor<2x6x6x6xf32>
  func.return %0 : tensor<2x4x6x6xf32>
}
"""


def test_a_convolution_counts_its_patches_while_it_runs():
    # arguments: 1536 + 432 + 216 = 2184. %0 (a product of patches, lowering/_window.py)
    # is 288 floats (1152 bytes), a result; while it runs, its patches [27, 72] (1944 floats),
    # their packed copy and the [4, 72] product before the transpose: 2 * 7776 + 1152 bytes.
    # %1 is grouped: the loop nest, no workspace; it is a temporary of 432 floats (1728 bytes)
    # that dies at once. Peak: max(1152 + 16704, 1152 + 1728).
    module = Parser(make_context(), _CONVS).parse_module()
    got = memory_analysis(module.body.block.first_op)
    assert got.argument_size_in_bytes == 2184
    assert got.temp_size_in_bytes == 16704
    assert got.peak_live_bytes == 2184 + 1152 + 16704
