"""Distribution changes inside compiled programs (rank_graph_parallel.py) on 2 and 4 ranks:
to_global traced into flow.jit for every boxing transition, creation ops with placement=,
a change of placement through compiled send/recv, and a tensor-parallel nn.Graph step with
momentum equal to single-device training."""

from __future__ import annotations

import pytest
from conftest import HERE, launch


@pytest.mark.parametrize("nproc", [2, 4])
def test_distribution_changes_in_compiled_programs(nproc):
    run = launch(nproc, HERE / "rank_graph_parallel.py", timeout=240)
    assert run.checks_passed(nproc) > 40, run.describe()
