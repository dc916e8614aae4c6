"""A rank that fails takes every rank down quickly, with its traceback: never a hang."""

from __future__ import annotations

import pytest
from conftest import HERE, launch


@pytest.mark.parametrize("where", ["barrier", "recv", "collective", "callback"])
def test_failing_rank_aborts_all(where):
    # The bound: every rank exits within 30 s (the launch fails the test past it).
    run = launch(2, HERE / "rank_fault.py", where, timeout=30)
    assert run.returncode != 0, run.describe()
    assert not run.left_behind, run.describe()
    assert "rank 0 was not stopped" not in run.stdout, run.describe()
    assert "[rank 1] Traceback (most recent call last):" in run.stderr, run.describe()
    if where == "callback":
        assert "unknown collective group id 99" in run.stderr, run.describe()
    else:
        assert 'rank_fault.py", line' in run.stderr, run.describe()
        assert "[rank 1] ValueError: deliberate failure on rank 1" in run.stderr, run.describe()


def test_collective_deadline_aborts_a_stuck_program():
    # Rank 1 never joins the collective and raises nothing: the deadline, not a hang.
    run = launch(2, HERE / "rank_fault.py", "stuck", timeout=30)
    assert run.returncode != 0, run.describe()
    assert not run.left_behind, run.describe()
    assert "rank 0 was not stopped" not in run.stdout, run.describe()
    assert "flow: rank 0 waited 2 s in the collective 'all_reduce_sum'" in run.stderr, (
        run.describe()
    )
    assert "FLOW_COLLECTIVE_TIMEOUT" in run.stderr, run.describe()
