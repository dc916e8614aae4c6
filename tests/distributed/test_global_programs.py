"""Global flow programs partitioned per rank, collectives lowered to `comm` calls, compiled and
run on 2 and 4 ranks (rank_global_programs.py), plus the pieces that need no launcher."""

from __future__ import annotations

import re

import pytest
from conftest import HERE, launch
from global_programs import CASES
from xdsl.dialects.builtin import TensorType, f32, i8

from flow.dialect import distributed as dd
from flow.dialect import make_context
from flow.lowering import run_pipeline
from flow.lowering.lower_collectives import comm_symbol
from flow.targets import collectives


@pytest.mark.parametrize("nproc", [2, 4])
def test_global_programs_match_numpy(nproc):
    run = launch(nproc, HERE / "rank_global_programs.py", timeout=120)
    assert run.returncode == 0, run.describe()
    want = sum(c.world == nproc for c in CASES)
    done = re.findall(r"rank (\d): (\d+) cases ok", run.stdout)
    assert sorted(r for r, _ in done) == [str(r) for r in range(nproc)], run.describe()
    assert {int(n) for _, n in done} == {want}, run.describe()


@pytest.mark.parametrize(
    ("name", "operand", "result"),
    [
        ("all_reduce_sum", TensorType(f32, [4, 3]), TensorType(f32, [4, 3])),
        ("all_gather", TensorType(f32, [2, 3]), TensorType(f32, [5, 3])),
        ("reduce_scatter_max", TensorType(i8, [6]), TensorType(i8, [3])),
        ("all_to_all", TensorType(f32, [6, 2, 1]), TensorType(f32, [6, 2, 1])),
        ("recv", TensorType(f32, [7]), TensorType(f32, [7])),
        ("send", TensorType(f32, [7]), None),
    ],
)
def test_comm_symbols_agree_with_the_runtime(name, operand, result):
    expected = collectives.import_name(name, str(operand), None if result is None else str(result))
    assert comm_symbol(name, operand, result) == expected


def test_lowered_program_has_no_collective_op_and_records_its_groups():
    (case,) = [c for c in CASES if c.name == "mesh_s0s1_to_bb"]
    from xdsl.parser import Parser

    for rank, groups in [(0, [[0, 2], [0, 1]]), (3, [[1, 3], [2, 3]])]:
        module = Parser(make_context(), case.program).parse_module()
        run_pipeline(module, f"flow-partition{{rank={rank}}},flow-lower-collectives{{rank={rank}}}")
        assert not [op for op in module.walk() if isinstance(op, dd.COLLECTIVE_OPS)]
        text = str(module)
        assert "func.call @comm.all_gather." in text
        got = [[r.value.data for r in g.data] for g in module.attributes["flow.comm_groups"].data]
        assert sorted(map(sorted, got)) == sorted(map(sorted, groups))


def test_partition_to_iree_input_takes_the_rank():
    (case,) = [c for c in CASES if c.name == "s0_to_b_uneven"]
    from xdsl.parser import Parser

    for rank, rows in [(0, 3), (1, 2)]:
        module = Parser(make_context(), case.program).parse_module()
        run_pipeline(module, f"flow-partition-to-iree-input{{rank={rank}}}")
        text = str(module)
        assert f"@comm.all_gather.{rows}x3xf32.5x3xf32" in text
        assert "flow." not in text.replace("flow.comm_groups", "")
