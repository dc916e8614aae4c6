"""Global programs on the execution tiers (rank_global_tiers.py): a global flow.jit function, a
data-parallel nn.Graph step and a two-stage pipeline run interpreted, then compiled, matching
single-device references at every call, with every rank switching at the same call; a
background compile failing on one rank raises on every rank."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import HERE, launch, run_command

SCRIPT = HERE / "rank_global_tiers.py"


def _tiered(tmp_path) -> dict[str, str]:
    """Tiered (conftest.py makes compiles synchronous for tests), with an empty compile cache."""
    return {"FLOW_SYNC_COMPILE": "0", "FLOW_CACHE_DIR": str(tmp_path / "cache")}


@pytest.mark.parametrize("nproc", [2, 4])
def test_global_programs_tier_and_switch_together(nproc, tmp_path):
    run = launch(nproc, SCRIPT, timeout=400, env=_tiered(tmp_path))
    assert run.checks_passed(nproc) > 100, run.describe()
    switches: dict[str, dict[int, int]] = {}
    for r, what, call in re.findall(r"rank (\d+): (\w+) switched at call (\d+)", run.stdout):
        switches.setdefault(what, {})[int(r)] = int(call)
    assert sorted(switches) == ["graph", "jit", "pipeline"], run.describe()
    for what, by_rank in switches.items():
        assert sorted(by_rank) == list(range(nproc)), (what, run.describe())
        assert len(set(by_rank.values())) == 1, f"{what}: ranks switched at {by_rank}"


def test_global_programs_tier_in_a_world_of_one(tmp_path):
    run = run_command([sys.executable, str(SCRIPT)], timeout=120, env=_tiered(tmp_path))
    assert run.returncode == 0, run.describe()
    assert re.search(r"rank 0: \d+ checks passed", run.stdout), run.describe()
    assert re.findall(r"rank 0: (\w+) switched", run.stdout) == ["jit", "graph"], run.describe()
