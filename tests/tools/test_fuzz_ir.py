"""Seeded fuzzing of flow's IR front door: mutated lit inputs must end in a located diagnostic
or be accepted, lowered to IREE input and parsed by IREE; never an internal error or a hang.

The same generator, run over 10,000 cases in subprocesses, is `benchmarks/fuzz_ir.py`.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from flow.tools import irfuzz

LIT = Path(__file__).resolve().parents[1] / "lit"
CASES = 400
SEED = 13


@pytest.fixture(scope="module")
def corpus() -> list[bytes]:
    return irfuzz.load_corpus(LIT)


def test_generator_is_seeded(corpus):
    """Case i of seed s is the same input every time, so a failure is reproduced by its number."""
    first = [irfuzz.make_case(corpus, SEED, i) for i in range(20)]
    again = [irfuzz.make_case(corpus, SEED, i) for i in range(20)]
    assert first == again
    assert len(set(first)) > 15
    assert any(c not in corpus for c in first)


KNOWN_BAD = [
    b'func.func @f() attributes {a = "' + b"a" * 40,
    b"%0 = flow.constant dense<1.0> : tensor<100000000xf32>",
    b"func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
    b"  %b = flow.add %a, %b : tensor<4xf32>\n  return %b : tensor<4xf32>\n}",
    b"func.func @f(%a: tensor<tensor<f32>>) {\n  return\n}",
    b"func.func @f(%a: tensor<99999999999999999999xf32>) {\n  return\n}",
    b"func.func @f(%a: tensor<4294967296x4294967296xf32>) {\n  return\n}",
    b'func.func @f(%a: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, '
    b"#flow.sbp<[S(7)]>>>) {\n  return\n}",
    b"func.func @f() attributes {a = " + b"[" * 20000 + b"} {\n  return\n}",
    b"func.func @f(%a: tensor<4xf32>) {\n  %0 = flow.add %a, %a : i32\n  return\n}",
    b"func.func @f() {\n  \xff\n}",
    b"func.func @f(%a: tensor<4xi99999999>) {\n  return\n}",
    b"func.func @f(%x: tensor<2x3xi1048577>) -> tensor<3xi1048577> {\n"
    b"  %0 = flow.reduce max %x, dims = [0] : tensor<2x3xi1048577> -> tensor<3xi1048577>\n"
    b"  return %0 : tensor<3xi1048577>\n}",
    b"func.func @f() -> tensor<1xi32> {\n"
    b"  %0 = flow.constant dense<[99999999999999999999]> : tensor<1xi32>\n"
    b"  return %0 : tensor<1xi32>\n}",
]
"""The malformed inputs of issue 13 (and ones the fuzzer found): each a located diagnostic."""


def test_known_bad_inputs_are_clean_diagnostics():
    outcomes = [irfuzz.run_case(data) for data in KNOWN_BAD]
    assert [o.kind for o in outcomes] == ["clean"] * len(KNOWN_BAD), outcomes


@pytest.mark.parametrize("tool", ["flow-opt", "flow-compile"])
def test_tools_exit_1_with_located_error(tool, tmp_path, capsys):
    """The tools print `file:line:col: error:` and exit 1 for each, without a traceback."""
    from flow.tools import compile as compile_tool
    from flow.tools import opt

    for n, data in enumerate(KNOWN_BAD):
        path = tmp_path / f"bad{n}.mlir"
        path.write_bytes(data)
        if tool == "flow-opt":
            rc = opt.main([str(path)])
        else:
            rc = compile_tool.main([str(path), "--emit", "linalg", "-o", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert rc == 1, (data[:80], err)
        assert re.match(rf"{re.escape(str(path))}:\d+:\d+: error: \S", err), (data[:80], err)
        assert "internal error" not in err and "Traceback" not in err, err


def test_accepted_input_reaches_iree():
    """An unmutated lit input is accepted, lowered and parsed by IREE (the happy path is live)."""
    data = b"func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n" \
        b"  %0 = flow.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n"
    assert irfuzz.run_case(data).kind == "accepted"


def test_fuzz_ir(corpus):
    """Hundreds of mutated inputs: no internal error, hang or IREE rejection."""
    counts: Counter[str] = Counter()
    failures = []
    for i, data in irfuzz.cases(corpus, SEED, 0, CASES):
        outcome = irfuzz.run_case(data, f"case{i}.mlir")
        counts[outcome.kind] += 1
        if outcome.kind in irfuzz.BUGS:
            failures.append(f"--- case {i} ({outcome.kind}):\n{data!r}\n{outcome.detail}")
    print(dict(counts))
    assert not failures, "\n".join(failures[:5])
    # The mutations reach every stage, not only the parser.
    assert counts["clean"] > 0 and counts["accepted"] > 0


def test_dense_bound_is_on_splats_only(monkeypatch):
    """A splat may not expand past the limit; a literal that spells out its elements may."""
    from flow.dialect import parsing

    monkeypatch.setattr(parsing, "MAX_DENSE_ELEMENTS", 16)

    def module(literal: str) -> bytes:
        return (
            f"func.func @f() -> tensor<64xf32> {{\n  %0 = flow.constant {literal} : tensor<64xf32>"
            "\n  return %0 : tensor<64xf32>\n}\n"
        ).encode()

    spelled = ", ".join(str(float(i)) for i in range(64))
    parsed = parsing.parse_module(module(f"dense<[{spelled}]>"))
    assert "dense<[0.000000e+00, 1.000000e+00" in str(parsed)
    for splat in ("dense<1.0>", 'dense<"0x0000803F">'):
        with pytest.raises(parsing.LocatedVerifyException, match="limit of 16 elements for a"):
            parsing.parse_module(module(splat))


PIPELINE = """\
!a = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [0]>, #flow.sbp<[B]>>>
!b = tensor<4xf32, #flow.dist<#flow.placement<"cpu", [1]>, #flow.sbp<[B]>>>
module attributes {pipeline_stages = [#flow.placement<"cpu", [0]>, #flow.placement<"cpu", [1]>]} {
func.func @step(%x: !a) -> !a {
  %a = flow.exp %x {micro_batch = MB : i64, pipeline_phase = "forward"} : !a
  %b = flow.boxing %a {micro_batch = MB : i64, pipeline_phase = "forward"} : !a -> !b
  %c = flow.neg %b {micro_batch = MB : i64, pipeline_phase = "backward"} : !b
  %d = flow.boxing %c {micro_batch = MB : i64, pipeline_phase = "backward"} : !b -> !a
  func.return %d : !a
}
}
"""


def test_pipeline_micro_batch_index_is_bounded():
    """A huge micro-batch tag made flow-pipeline-schedule build a schedule of that many
    slots (a hang, found by the IR fuzzer); now it is a pass error naming the op."""
    assert irfuzz.run_case(PIPELINE.replace("MB", "0").encode()).kind == "accepted"
    untagged = re.sub(r" \{micro_batch = MB : i64, pipeline_phase = \"\w+\"\}", "", PIPELINE)
    assert "micro_batch" not in untagged
    assert irfuzz.run_case(untagged.encode()).kind == "accepted"
    huge = PIPELINE.replace("MB", "9223372036854775807").encode()
    assert irfuzz.run_case(huge).kind == "lowering"
    from flow.dialect.parsing import parse_module
    from flow.lowering import run_pipeline

    with pytest.raises(Exception, match="is tagged micro-batch 9223372036854775807, but step has"):
        run_pipeline(parse_module(huge), "flow-infer-sbp,flow-pipeline-schedule{rank=0}")
