"""The pipeline-parallel digits example (examples/train_digits_pp.py) runs on 2 ranks: one
epoch of 1F1B training through two stages, then a test accuracy well above chance."""

from __future__ import annotations

import re

import pytest
from conftest import HERE, launch

EXAMPLE = HERE.parent.parent / "examples" / "train_digits_pp.py"


def test_train_digits_pp_runs_on_two_ranks():
    pytest.importorskip("sklearn", reason="the digits data: pip install -e '.[examples]'")
    run = launch(2, EXAMPLE, "--epochs", "1", timeout=180)  # a cold compile cache takes longest
    assert run.returncode == 0, run.describe()
    assert re.search(r"epoch 1: loss \d+\.\d+", run.stdout), run.describe()
    found = re.search(r"test accuracy \(pipeline parallel, 2 ranks\): (\d\.\d+)", run.stdout)
    assert found, run.describe()
    assert float(found.group(1)) > 0.3, run.describe()  # chance is 0.1
    assert not run.left_behind, run.describe()
