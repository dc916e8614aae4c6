"""Index checks in global programs: every rank raises the same IndexError, none hangs
(rank_index_checks.py on 2 ranks)."""

from __future__ import annotations

from conftest import HERE, launch


def test_bad_index_in_one_shard_raises_on_every_rank():
    run = launch(2, HERE / "rank_index_checks.py", timeout=150)
    run.checks_passed(2)
