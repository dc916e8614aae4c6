"""Gradient clipping of a tensor-parallel model on 2 ranks, and a clipped data-parallel
nn.Graph step of 40 parameters, equal one device (rank_clip_grad.py)."""

from __future__ import annotations

import re

from conftest import HERE, launch

SCRIPT = HERE / "rank_clip_grad.py"


def test_clip_grad_of_global_parameters_on_two_ranks():
    run = launch(2, SCRIPT, timeout=120)
    assert run.returncode == 0, run.describe()
    counts = dict(re.findall(r"rank (\d): (\d+) checks passed", run.stdout))
    assert sorted(counts) == ["0", "1"], run.describe()
    assert set(counts.values()) == {"102"}, run.describe()
