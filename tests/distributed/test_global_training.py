"""Training with eager global tensors on 2 and 4 ranks (and a world of one): data- and
tensor-parallel MLP steps match single-device training; Module.to_global."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import HERE, launch, run_command

SCRIPT = HERE / "rank_global_training.py"


@pytest.mark.parametrize("nproc", [2, 4])
def test_global_training_on_ranks(nproc):
    run = launch(nproc, SCRIPT, timeout=60)
    assert run.checks_passed(nproc) > 40, run.describe()


def test_global_training_world_of_one():
    run = run_command([sys.executable, str(SCRIPT)], timeout=60)
    assert run.returncode == 0, run.describe()
    assert re.search(r"rank 0: \d+ checks passed", run.stdout), run.describe()
