"""`graph.memory_analysis()` per rank on 2 ranks (rank_memory.py): data parallel against ZeRO
stages 1 and 3, the argument bytes shrinking as the sharding says."""

from __future__ import annotations

from conftest import HERE, launch


def test_per_rank_figures_follow_the_sharding():
    run = launch(2, HERE / "rank_memory.py", timeout=600, env={"FLOW_CHECK_INDICES": "0"})
    assert run.checks_passed(2) == 3 * 2 + 6, run.describe()
