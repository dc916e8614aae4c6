"""`flow.utils.global_view` and loading a state dict across distributions (rank_global_view.py)
on 2 and 4 ranks and in a single process."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import HERE, launch, run_command

SCRIPT = HERE / "rank_global_view.py"


def _counts(stdout: str) -> dict[str, int]:
    return {r: int(n) for r, n in re.findall(r"rank (\d): (\d+) checks passed", stdout)}


@pytest.mark.parametrize("nproc", [2, 4])
def test_global_view_on_ranks(nproc):
    run = launch(nproc, SCRIPT, timeout=120)
    assert run.returncode == 0, run.describe()
    counts = _counts(run.stdout)
    assert sorted(counts) == [str(r) for r in range(nproc)], run.describe()
    assert set(counts.values()) == {30}, run.describe()


def test_global_view_single_process():
    run = run_command([sys.executable, str(SCRIPT)], timeout=60)
    assert run.returncode == 0, run.describe()
    assert _counts(run.stdout) == {"0": 30}, run.describe()
