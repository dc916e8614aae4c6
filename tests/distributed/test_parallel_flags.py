"""`Module.to_global(device, parallel= | model_parallel= | pipeline_parallel=True)`
(rank_parallel_flags.py) on 2 and 4 ranks: a small MLP trained eagerly and in nn.Graph equals
single-device training; parameters get the flag's SBP; pipeline stages are balanced."""

from __future__ import annotations

import pytest
from conftest import HERE, launch


@pytest.mark.parametrize("nproc", [2, 4])
def test_parallel_flags_train_like_one_device(nproc):
    run = launch(nproc, HERE / "rank_parallel_flags.py", timeout=400)
    assert run.checks_passed(nproc) > 90, run.describe()
