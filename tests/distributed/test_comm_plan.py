"""The per-rank communication plan of a compiled global program (FLOW_COMM_PLAN=1)."""

from __future__ import annotations

from xdsl.parser import Parser

from flow.compile.per_rank import communication_plan, compile_for_rank
from flow.dialect import make_context
from flow.lowering import run_pipeline

PLACE = '#flow.placement<"cpu", [0, 1]>'
SRC = f"""
func.func @main(%a: tensor<8x4xf32, #flow.dist<{PLACE}, #flow.sbp<[S(1)]>>>,
                %b: tensor<4x6xf32, #flow.dist<{PLACE}, #flow.sbp<[S(0)]>>>)
    -> tensor<8x6xf32, #flow.dist<{PLACE}, #flow.sbp<[B]>>> {{
  %m = flow.matmul %a, %b : tensor<8x4xf32, #flow.dist<{PLACE}, #flow.sbp<[S(1)]>>>,
      tensor<4x6xf32, #flow.dist<{PLACE}, #flow.sbp<[S(0)]>>>
      -> tensor<8x6xf32, #flow.dist<{PLACE}, #flow.sbp<[B]>>>
  func.return %m : tensor<8x6xf32, #flow.dist<{PLACE}, #flow.sbp<[B]>>>
}}
"""


def _module():
    return Parser(make_context(), SRC).parse_module()


def test_plan_lists_each_collective_with_its_bytes():
    m = _module()
    run_pipeline(m, "flow-infer-sbp,flow-partition{rank=0}")
    plan = communication_plan(m)
    assert len(plan) == 1  # S(1) x S(0) -> P, then P -> B: one all_reduce of the 8x6 result
    assert plan[0].startswith("flow.all_reduce tensor<8x6xf32> (192 bytes)")


def test_env_knob_prints_the_plan(monkeypatch, capsys):
    monkeypatch.setenv("FLOW_COMM_PLAN", "1")
    vmfb, groups = compile_for_rank(_module(), 1)
    err = capsys.readouterr().err
    assert "communication plan of rank 1:" in err and "flow.all_reduce" in err
    assert groups == [(0, 1)] and vmfb
