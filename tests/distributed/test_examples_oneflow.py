"""The OneFlow documentation's parallelism examples (examples/oneflow_parallelism.py: global
tensors, 2-D SBP, DDP, pipeline, hybrid), each checked against numpy or a single-device run
inside the script, on 2 and 4 ranks."""

from __future__ import annotations

import re

import pytest
from conftest import HERE, launch

EXAMPLE = HERE.parent.parent / "examples" / "oneflow_parallelism.py"
NAMES = ["global_tensors", "sbp_2d", "ddp", "pipeline", "hybrid"]


@pytest.mark.parametrize("nproc", [2, 4])
def test_oneflow_parallelism_examples(nproc):
    run = launch(nproc, EXAMPLE, timeout=300)  # a cold compile cache takes longest
    assert run.returncode == 0, run.describe()
    for r in range(nproc):
        done = re.findall(rf"^rank {r}: (\w+) ok$", run.stdout, re.M)
        assert done == NAMES, run.describe()
        assert f"rank {r}: {len(NAMES)} examples passed" in run.stdout, run.describe()
    assert not run.left_behind, run.describe()
