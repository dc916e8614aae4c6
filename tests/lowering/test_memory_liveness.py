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
