"""ZeRO in nn.Graph (rank_zero.py) on 2 and 4 ranks: SGD momentum and Adam training equal to
single-process training, optimizer state split S(0) (1/N rows per rank), the comm plan of each
stage, and the state dict loading into a plain data-parallel graph."""

from __future__ import annotations

import pytest
from conftest import HERE, launch


@pytest.mark.parametrize("nproc", [2, 4])
def test_zero_stages_equal_data_parallel(nproc):
    run = launch(nproc, HERE / "rank_zero.py", timeout=600)
    assert run.checks_passed(nproc) > 100, run.describe()
