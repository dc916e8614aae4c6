"""Index checks in global programs: every rank raises the same IndexError, none hangs
(rank_index_checks.py on 2 ranks)."""

from __future__ import annotations

import re

from conftest import HERE, launch


def test_bad_index_in_one_shard_raises_on_every_rank():
    run = launch(2, HERE / "rank_index_checks.py", timeout=150)
    assert run.returncode == 0, run.describe()
    done = re.findall(r"rank (\d): (\d+) checks passed", run.stdout)
    assert sorted(r for r, _ in done) == ["0", "1"], run.describe()
    assert len({n for _, n in done}) == 1, run.describe()
