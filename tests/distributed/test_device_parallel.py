"""Global programs on a device placement on 2 ranks (rank_device_parallel.py): flow.jit with a
split batch, and data- and tensor-parallel nn.Graph training steps, equal to single-device
training. Vulkan runs wherever a Vulkan device is (Mesa lavapipe here); `FLOW_TEST_TARGET`
adds another target (benchmarks/gpu_check.sh: cuda)."""

from __future__ import annotations

import os

import pytest
from conftest import HERE, launch

from flow.targets import available, get_target

TARGETS = ["vulkan"]
if (extra := os.environ.get("FLOW_TEST_TARGET", "").strip()) and get_target(extra).name not in (
    "vulkan", "cpu"):  # fmt: skip
    TARGETS.append(get_target(extra).name)


@pytest.mark.parametrize("target", TARGETS)
def test_parallel_training_on_a_device_placement(target):
    if target not in available():
        pytest.skip(f"no {target} device here (usable: {', '.join(available())})")
    run = launch(2, HERE / "rank_device_parallel.py", target, timeout=300)
    assert run.checks_passed(2) > 20, run.describe()
